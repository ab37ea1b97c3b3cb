"""Softmax with a temperature: the computation behind the first explorer ("How to use this book").

Dividing the scores by a temperature ``tau`` before the softmax is what the attention scale
``1/sqrt(d_k)`` does with ``tau = sqrt(d_k)``: a small ``tau`` sharpens the distribution
towards the largest score (one-hot in the limit), a large ``tau`` flattens it towards uniform.

Import it explicitly: ``from mha.chapters import softmax_demo``; its figure is in
:mod:`mha.viz.softmax_demo`.
"""

from __future__ import annotations

import math

import torch

from ..attention import entropy_bits, masked_softmax
from ..checks import check_float_tensor

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


def describe_temperature(temperature: float = 1.0) -> str:
    """Alt text for one explorer frame: the weights in words."""
    probs = softmax_with_temperature(SCORES, temperature)
    top = int(probs.argmax())
    return (
        f"Bar chart of the attention weights at temperature {temperature:g}: "
        f"'{TOKENS[top]}' gets {probs[top].item():.2f}, entropy {entropy_bits(probs).item():.2f} bits."
    )
