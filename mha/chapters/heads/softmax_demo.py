"""The single-head-limits chapter's opening: one head of attention as a soft lookup, and the softmax temperature.

:func:`worked_row` is the worked row: the query of "mouse", the last of five tokens, is compared
with the keys of the five tokens it may see (dot products: the scores), a softmax turns the scores
into weights that sum to 1, and the output is the weighted sum of the values. Its scores are
:data:`SCORES`, the scores the temperature explorer starts from.

Dividing the scores by a temperature ``tau`` before the softmax is what the attention scale
``1/sqrt(d_k)`` does with ``tau = sqrt(d_k)``: a small ``tau`` sharpens the distribution
towards the largest score (one-hot in the limit), a large ``tau`` flattens it towards uniform.

Import it explicitly: ``from mha.chapters import softmax_demo``; its figure is in
:mod:`mha.chapters.heads.figures`.
"""

from __future__ import annotations

import math

import torch

from ...attention import entropy_bits, masked_softmax, scaled_dot_product_attention
from ...checks import check_float_tensor

#: Five tokens and the attention scores one query gives them (a fixed, readable example).
TOKENS = ["the", "cat", "chased", "the", "mouse"]
SCORES = (1.0, 3.0, 2.0, 0.5, 2.5)
#: The worked row (d_k = d_v = 2): the query of "mouse" and the key and value of each token. The
#: two "the"s differ because a token's vector also carries its position. QUERY . KEYS[j] = SCORES[j].
QUERY = (1.0, 0.5)
KEYS = ((0.5, 1.0), (2.0, 2.0), (1.0, 2.0), (0.0, 1.0), (2.0, 1.0))
VALUES = ((0.0, 0.0), (2.0, 0.0), (0.0, 2.0), (1.0, 0.0), (2.0, 2.0))
#: Temperatures offered by the explorer, from sharp to flat.
TEMPERATURES = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0]
#: Where the explorer opens: the worked row of the page (no temperature, tau = 1).
INITIAL_TEMPERATURE = 1.0


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


def row_tensors():
    """The worked row's query, keys and values as float64 tensors.

    Shapes:
        returns q (Dh,), k (S, Dh) and v (S, Dh); S = 5 tokens, Dh = 2.
    """
    return tuple(torch.tensor(x, dtype=torch.float64) for x in (QUERY, KEYS, VALUES))


def worked_row(temperature: float = 1.0) -> dict:
    """One query's lookup: scores, weights and output, by :func:`mha.scaled_dot_product_attention`.

    The query of "mouse" sees all five tokens (it is the last one, so a causal mask hides none).
    ``temperature`` divides the scores before the softmax (1: the plain softmax of the single-head-limits chapter).

    Shapes:
        returns ``scores`` (S,), ``weights`` (S,) and ``output`` (Dh,), float64; S = 5, Dh = 2.
    """
    tau = _check_temperature(temperature)
    query, k, v = row_tensors()  # (Dh,), (S, Dh), (S, Dh)
    q = query[None]  # (T, Dh) = (1, 2): one query
    output, weights = scaled_dot_product_attention(q, k, v, scale=1.0 / tau)  # (1, 2), (1, 5)
    return {"scores": (q @ k.T)[0], "weights": weights[0], "output": output[0]}  # (5,), (5,), (2,)


def describe_temperature(temperature: float = 1.0) -> str:
    """Alt text for one explorer frame: the weights in words."""
    probs = softmax_with_temperature(SCORES, temperature)
    top = int(probs.argmax())
    return (
        f"Bar chart of the attention weights at temperature {temperature:g}: "
        f"'{TOKENS[top]}' gets {probs[top].item():.2f}, entropy {entropy_bits(probs).item():.2f} bits."
    )
