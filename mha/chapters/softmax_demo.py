"""Softmax with a temperature: the computation behind the first explorer ("How to use this book").

Dividing the scores by a temperature ``tau`` before the softmax is what the attention scale
``1/sqrt(d_k)`` does with ``tau = sqrt(d_k)``: a small ``tau`` sharpens the distribution
towards the largest score (one-hot in the limit), a large ``tau`` flattens it towards uniform.

Import it explicitly: ``from mha import softmax_demo``.
"""
from __future__ import annotations

import math

import torch

from ..checks import check_float_tensor
from ..attention import entropy_bits, masked_softmax

#: Five tokens and the attention scores one query gives them (a fixed, readable example).
TOKENS = ["the", "cat", "chased", "the", "mouse"]
SCORES = (1.0, 3.0, 2.0, 0.5, 2.5)
#: Temperatures offered by the explorer, from sharp to flat.
TEMPERATURES = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0]


def _check_temperature(temperature) -> float:
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
        raise TypeError(f"temperature must be a positive number, found {type(temperature).__name__}")
    if not (math.isfinite(temperature) and temperature > 0):
        raise ValueError(f"temperature must be a positive finite number, found {temperature}")
    return float(temperature)


def softmax_with_temperature(scores, temperature: float = 1.0) -> torch.Tensor:
    """softmax(scores / temperature) over the last axis.

    Shapes:
        scores (..., S) -> returns (..., S); each row sums to 1.
    """
    if not isinstance(scores, torch.Tensor):
        scores = torch.tensor(scores, dtype=torch.float64)
    check_float_tensor("scores", scores, min_rank=1)
    return masked_softmax(scores / _check_temperature(temperature))


def plot_temperature(temperature: float = 1.0, *, scores=SCORES, tokens=TOKENS, ax=None):
    """Bar chart of softmax(scores / temperature), one bar per token, entropy in the title.

    Returns:
        matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt

    from ..viz.plotting import HEAD_COLORS, use_style

    probs = softmax_with_temperature(scores, temperature)
    if len(tokens) != probs.shape[-1]:
        raise ValueError(f"tokens must name each of the {probs.shape[-1]} scores, found {len(tokens)}")
    use_style()
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 3.2))
    fig = ax.figure
    values = probs.tolist()
    positions = range(len(tokens))
    ax.bar(positions, values, color=HEAD_COLORS[0])
    for i, p in enumerate(values):
        ax.text(i, p + 0.02, f"{p:.2f}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(list(positions), [f"{t}\n(score {s:g})" for t, s in zip(tokens, scores)], fontsize=8)
    ax.set_ylim(0.0, 1.1)
    ax.set_xlabel("key token")
    ax.set_ylabel("attention weight")
    ax.set_title(f"softmax(scores / {temperature:g}): entropy {entropy_bits(probs).item():.2f} bits")
    fig.tight_layout()
    return fig


def describe_temperature(temperature: float = 1.0) -> str:
    """Alt text for one explorer frame: the weights in words."""
    probs = softmax_with_temperature(SCORES, temperature)
    top = int(probs.argmax())
    return (f"Bar chart of the attention weights at temperature {temperature:g}: "
            f"'{TOKENS[top]}' gets {probs[top].item():.2f}, entropy {entropy_bits(probs).item():.2f} bits.")
