"""The worked example's checkers, what they measure in a wrong row: which entries differ at the stated
precision, and which usual slip (scaled vs raw scores, a column for a row, another head, the wrong scale, keys
or X averaged instead of values) reproduces the learner's numbers. :func:`mha.chapters.worked_example.worked.check_row`
and :func:`~mha.chapters.worked_example.worked.check_output_row` call them with a
:class:`~mha.chapters.worked_example.worked.WorkedExample`
``ex`` (its ``scores``, ``scaled_scores``, ``weights``, ``k``, ``v``, ``x``, ``head_dim``, ``temperature``).

Shape legend: rows of T = 5 entries (scores, weights) or Dh = 4 entries (outputs); ``h`` and ``r`` are
0-based head and row indices.
"""

from __future__ import annotations

import math

import torch

from ..checking.answers import compare_number


def rows_close(a: torch.Tensor, b: torch.Tensor, tol: float) -> bool:
    return bool(torch.all((a - b).abs() <= tol))


def compare_row(mine, expected, labels, decimals: int) -> tuple[str, str]:
    """``("right" | "close" | "wrong", message)`` for a row, entry by entry, at ``decimals``.

    "close" when no entry is wrong and some are close (one decimal fewer, or one unit off):
    the message names those entries and says what to do, without the expected numbers.
    """
    found = [compare_number(float(mine[j]), float(expected[j]), decimals=decimals) for j in range(len(expected))]
    if all(c.right for c in found):
        return "right", "correct"
    if any(c.status == "wrong" for c in found):
        return "wrong", ""
    near = [j for j, c in enumerate(found) if c.status == "close"]
    where = ", ".join(f"{j + 1} ({labels[j]})" for j in near)
    return "close", f"close at entries {where}: {found[near[0]].message.removeprefix('close: ')}"


def wrong_entries(mine, expected, labels, tol) -> str:
    wrong = [f"{j + 1} ({labels[j]})" for j in range(len(expected)) if abs(float(mine[j] - expected[j])) > tol]
    return ", ".join(wrong)


def diagnose_scores(mine, ex, h, r, tol) -> str:
    if rows_close(mine, ex.scaled_scores[h, r], tol):
        return "these are the *scaled* scores; the raw scores come before dividing by √d_k"
    if rows_close(mine, ex.scores[h, :, r], tol):
        return f"this is column {r + 1} (every query against key {r + 1}); a row is query {r + 1} against every key"
    if rows_close(mine, ex.scores[1 - h, r], tol):
        return f"these are head {2 - h}'s scores: use head {h + 1}'s Q and K"
    return f"recompute q_{r + 1} · k_j with head {h + 1}'s Q and K for the entries marked"


def diagnose_weights(mine, ex, h, r, tol, my_scores) -> str:
    total = float(mine.sum())
    if abs(total - 1.0) > tol:
        return f"a row of weights must sum to 1, yours sums to {total:.3f}: divide each exp by the sum of all five"
    scores = ex.scores[h, r]
    scale = math.sqrt(ex.head_dim) * ex.temperature
    if my_scores is not None and not rows_close(my_scores, scores, tol):
        if rows_close(mine, torch.softmax(my_scores / scale, dim=-1), tol):
            return "your softmax is right, but it starts from your wrong scores: fix the scores first"
    if rows_close(mine, torch.softmax(scores, dim=-1), tol):
        return "softmax of the raw scores: divide them by √d_k = 2 first"
    if ex.temperature != 1.0 and rows_close(mine, torch.softmax(scores / math.sqrt(ex.head_dim), dim=-1), tol):
        return f"you left out the temperature: divide the scaled scores by {ex.temperature:g} as well"
    if rows_close(mine, torch.softmax(scores / (ex.head_dim * ex.temperature), dim=-1), tol):
        return "you divided the scores by d_k = 4; the scale is √d_k = 2"
    return "take exp of each scaled score, then divide by the row's sum of exps"


def diagnose_output(mine, ex, h, r, tol, my_weights) -> str:
    if my_weights is not None and not rows_close(my_weights, ex.weights[h, r], tol):
        if rows_close(mine, my_weights @ ex.v[h], 2 * tol):
            return "your weighted sum is right, but it uses your wrong weights: fix the weights first"
    if rows_close(mine, ex.weights[h, :, r] @ ex.v[h], tol):
        return f"you used column {r + 1} of the weights; the output of token {r + 1} uses row {r + 1}"
    if rows_close(mine, ex.weights[h, r] @ ex.k[h], tol):
        return "you averaged the keys K; the output is a weighted sum of the values V"
    if rows_close(mine, ex.weights[h, r] @ ex.x[:, : ex.head_dim], tol):
        return "you averaged (part of) X; the output is a weighted sum of the values V = X W_V"
    decimals = round(-math.log10(tol))  # the precision the exercise asks (tol = 10^-decimals)
    rounded = torch.round(ex.weights[h, r], decimals=decimals)  # (T,)
    if not rows_close(ex.weights[h, r] @ ex.v[h], rounded @ ex.v[h], tol / 2) and rows_close(
        mine, rounded @ ex.v[h], tol / 2
    ):
        return (
            f"your sum uses the weights rounded to {decimals} decimals, and V's entries multiply that rounding: "
            "keep the weights' full digits until the output, then round it"
        )
    return "sum over the five tokens: weight_j times row j of V"
