"""The first explorer's figure (How to use this book): softmax(scores / temperature) as bars.

The numbers come from :mod:`mha.chapters.softmax_demo`.
"""

from __future__ import annotations

import matplotlib.pyplot as plt

from ..attention import entropy_bits
from ..chapters.softmax_demo import SCORES, TOKENS, softmax_with_temperature
from .plotting import HEAD_COLORS, use_style


def plot_temperature(temperature: float = 1.0, *, scores=SCORES, tokens=TOKENS, ax=None):
    """Bar chart of softmax(scores / temperature), one bar per token, entropy in the title.

    Returns:
        matplotlib.figure.Figure
    """
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
