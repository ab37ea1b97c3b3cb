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

from ..checking.answers import Message, compare_number, say


def rows_close(a: torch.Tensor, b: torch.Tensor, tol: float) -> bool:
    return bool(torch.all((a - b).abs() <= tol))


def compare_row(mine, expected, labels, decimals: int) -> tuple[str, Message]:
    """``("right" | "close" | "wrong", message)`` for a row, entry by entry, at ``decimals``.

    "close" when no entry is wrong and some are close (one decimal fewer, or one unit off):
    the message names those entries and says what to do, without the expected numbers.
    """
    found = [compare_number(float(mine[j]), float(expected[j]), decimals=decimals) for j in range(len(expected))]
    if all(c.right for c in found):
        return "right", say("correct")
    if any(c.status == "wrong" for c in found):
        return "wrong", say("")
    near = [j for j, c in enumerate(found) if c.status == "close"]
    where = ", ".join(f"{j + 1} ({labels[j]})" for j in near)
    first = found[near[0]].message  # "close: give ..." or "close: the last digit ...", said without "close: "
    if first.template.startswith("close: give "):
        detail = say("give {words} (found {found:g}, the answer to {words} is …?)", **first.args)
    else:
        detail = say(
            "the last digit is off by one (found {found:g}); keep every digit while you compute "
            "and round to {words} only at the end",
            **first.args,
        )
    return "close", say("close at entries {where}: {message}", where=where, message=detail)


def wrong_entries(mine, expected, labels, tol) -> str:
    wrong = [f"{j + 1} ({labels[j]})" for j in range(len(expected)) if abs(float(mine[j] - expected[j])) > tol]
    return ", ".join(wrong)


def diagnose_scores(mine, ex, h, r, tol) -> Message:
    if rows_close(mine, ex.scaled_scores[h, r], tol):
        return say("these are the *scaled* scores; the raw scores come before dividing by √d_k")
    if rows_close(mine, ex.scores[h, :, r], tol):
        return say(
            "this is column {col} (every query against key {key}); a row is query {query} against every key",
            col=r + 1,
            key=r + 1,
            query=r + 1,
        )
    if rows_close(mine, ex.scores[1 - h, r], tol):
        return say("these are head {other}'s scores: use head {head}'s Q and K", other=2 - h, head=h + 1)
    return say("recompute q_{row} · k_j with head {head}'s Q and K for the entries marked", row=r + 1, head=h + 1)


def diagnose_weights(mine, ex, h, r, tol, my_scores) -> Message:
    total = float(mine.sum())
    if abs(total - 1.0) > tol:
        return say(
            "a row of weights must sum to 1, yours sums to {total:.3f}: divide each exp by the sum of all five",
            total=total,
        )
    scores = ex.scores[h, r]
    scale = math.sqrt(ex.head_dim) * ex.temperature
    if my_scores is not None and not rows_close(my_scores, scores, tol):
        if rows_close(mine, torch.softmax(my_scores / scale, dim=-1), tol):
            return say("your softmax is right, but it starts from your wrong scores: fix the scores first")
    if rows_close(mine, torch.softmax(scores, dim=-1), tol):
        return say("softmax of the raw scores: divide them by √d_k = 2 first")
    if ex.temperature != 1.0 and rows_close(mine, torch.softmax(scores / math.sqrt(ex.head_dim), dim=-1), tol):
        return say("you left out the temperature: divide the scaled scores by {tau:g} as well", tau=ex.temperature)
    if rows_close(mine, torch.softmax(scores / (ex.head_dim * ex.temperature), dim=-1), tol):
        return say("you divided the scores by d_k = 4; the scale is √d_k = 2")
    return say("take exp of each scaled score, then divide by the row's sum of exps")


def diagnose_output(mine, ex, h, r, tol, my_weights) -> Message:
    if my_weights is not None and not rows_close(my_weights, ex.weights[h, r], tol):
        if rows_close(mine, my_weights @ ex.v[h], 2 * tol):
            return say("your weighted sum is right, but it uses your wrong weights: fix the weights first")
    if rows_close(mine, ex.weights[h, :, r] @ ex.v[h], tol):
        return say(
            "you used column {col} of the weights; the output of token {token} uses row {row}",
            col=r + 1,
            token=r + 1,
            row=r + 1,
        )
    if rows_close(mine, ex.weights[h, r] @ ex.k[h], tol):
        return say("you averaged the keys K; the output is a weighted sum of the values V")
    if rows_close(mine, ex.weights[h, r] @ ex.x[:, : ex.head_dim], tol):
        return say("you averaged (part of) X; the output is a weighted sum of the values V = X W_V")
    decimals = round(-math.log10(tol))  # the precision the exercise asks (tol = 10^-decimals)
    rounded = torch.round(ex.weights[h, r], decimals=decimals)  # (T,)
    if not rows_close(ex.weights[h, r] @ ex.v[h], rounded @ ex.v[h], tol / 2) and rows_close(
        mine, rounded @ ex.v[h], tol / 2
    ):
        return say(
            "your sum uses the weights rounded to {decimals} decimals, and V's entries multiply that rounding: "
            "keep the weights' full digits until the output, then round it",
            decimals=decimals,
        )
    return say("sum over the five tokens: weight_j times row j of V")
