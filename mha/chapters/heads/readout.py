"""Which relations a *linear* readout can read on every input, when the heads' weights follow positions.

The argument of the head-count experiments (``chapter("head_count_experiments")``). Head ``h`` puts
the fixed weight ``A[h, j]`` on the token ``j`` places back
(``j = 0`` is the token itself). A linear readout's preference for symbol B over symbol A is a sum of one
term per head and token, ``sum_h sum_j A[h, j] g_h(x_{t-j})``; with ``c_h = g_h(B) - g_h(A)`` the change
of the token at offset ``j`` from A to B moves it by ``beta_j = sum_h c_h A[h, j]``, a *combination* of
the heads' rows with coefficients of any sign (heads can cancel each other's weight).

**The rule.** Relation ``o`` is read right on every input only if some combination puts more weight on
offset ``o`` than on all the other tokens together, ``beta_o > sum_{j != o} |beta_j|``. Proof: take B at
offset ``o`` with every other token set (to A or B) to pull the preference down, and A at offset ``o``
with every other token set to pull it up; the preference must be positive on the first input and
negative on the second, and the two differ by ``beta_o - sum_{j != o} |beta_j|``. With value vectors
that keep the symbols apart (one-hot, say) and the readout ``beta``, the token at offset ``o`` wins on
every input, so the rule is exact.

**At most h relations.** The combinations of r readable relations, restricted to those r offsets, form
a strictly diagonally dominant r x r matrix, so they are linearly independent; they are combinations of
h rows, so r <= h. A residual connection (``residual=True``) hands the readout the token itself: one
more row, all its weight on offset 0. It can cancel offset 0's share (a relation may become readable),
and it changes nothing on the offsets 1, 2, ..., so r <= h still holds.

One head without a residual gives the rule of a single softmax: more than half its weight on offset o.
"""

from __future__ import annotations

import itertools
import math
import numbers

import torch

from ..checking.answers import Message, Report, Verdict, fit_to_page, read_int, say

_TOL = 1e-9

#: The heads of exercise 2 of the head-count experiments: weights on the tokens 0, 1, 2, 3 places back
#: (the rest lies further back).
EXERCISE_WEIGHTS = ((0.05, 0.6, 0.3, 0.05), (0.0, 0.1, 0.45, 0.45))


def _weight_table(weights, residual: bool = False) -> torch.Tensor:
    """``weights`` as float64 (H, O + 1): the weight a row leaves over becomes one more column, a token
    further back (the rule is exact when that weight lies on one token); ``residual`` adds the row
    (1, 0, ..., 0) of the token itself."""
    try:
        w = torch.as_tensor(weights, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        w = None
    if w is None or w.dim() != 2 or w.shape[1] < 2 or not torch.isfinite(w).all() or (w < 0).any():
        raise ValueError(f"weights must be (H, O) non-negative rows summing to at most 1, found {weights!r}")
    rest = 1 - w.sum(dim=1, keepdim=True)  # (H, 1)
    if (rest < -_TOL).any():
        raise ValueError(f"weights must be (H, O) non-negative rows summing to at most 1, found {weights!r}")
    table = torch.cat([w, rest.clamp(min=0)], dim=1)  # (H, O + 1)
    if residual:
        table = torch.cat([table, torch.eye(1, table.shape[1], dtype=torch.float64)])  # (H + 1, O + 1)
    return table


def _margin(beta: torch.Tensor, offset: int) -> float:
    """``beta[offset] - sum of |beta| elsewhere``: positive when the combination reads ``offset``."""
    return float(2 * beta[offset] - beta.abs().sum())


def readout_combination(weights, offset: int, *, residual: bool = False) -> torch.Tensor | None:
    """A combination of the heads that reads relation ``offset`` on every input, or None if there is none.

    Returns ``c`` (H,), or (H + 1,) with ``residual`` (the last entry is the residual's), scaled so that
    its largest entry has size 1, with ``beta = c @ weights`` putting more weight on ``offset`` than on
    all the other tokens together; None when no ``c`` does.

    How: ``c -> beta[offset] - sum_{j != offset} |beta_j|`` is linear between the hyperplanes
    ``c . A[:, j] = 0``, so it is positive somewhere only if it is positive on an edge of that
    arrangement (a line where ``r - 1`` of them meet, ``r`` the rank of the other columns), or on a
    direction orthogonal to every other column. Exact enumeration: meant for a few heads and offsets.

    Shapes:
        weights (H, O) -> returns (H,) float64 or None.
    """
    table = _weight_table(weights, residual)
    if not 0 <= offset < table.shape[1] - 1:
        raise ValueError(f"offset must be between 0 and {table.shape[1] - 2}, found {offset!r}")
    target = table[:, offset]  # (H,)
    others = torch.cat([table[:, :offset], table[:, offset + 1 :]], dim=1)  # (H, O)
    others = others[:, others.abs().amax(dim=0) > _TOL]
    basis = torch.zeros(table.shape[0], 0, dtype=torch.float64)
    if others.shape[1]:
        u, s, _ = torch.linalg.svd(others, full_matrices=False)
        basis = u[:, : int((s > _TOL * s[0]).sum())]  # (H, r): the span of the other columns
    outside = target - basis @ (basis.T @ target)  # (H,): the part no other column can cancel
    candidates = [outside] if outside.norm() > _TOL else []
    rank = basis.shape[1]
    coords = basis.T @ others  # (r, m)
    for rows in itertools.combinations(range(coords.shape[1]), rank - 1) if rank else ():
        sub = coords[:, list(rows)].T  # (r - 1, r)
        if rank > 1 and torch.linalg.matrix_rank(sub, tol=_TOL) < rank - 1:
            continue
        edge = torch.linalg.svd(sub if rank > 1 else torch.zeros(1, 1, dtype=torch.float64))[2][-1]  # (r,)
        candidates += [basis @ edge, -(basis @ edge)]
    best = max(candidates, key=lambda c: _margin(c @ table, offset), default=None)
    if best is None or _margin(best @ table, offset) <= _TOL * float(best.abs().max()):
        return None
    return best / best.abs().max()


def reads_on_every_input(beta, offset: int, vocab_size: int = 3) -> bool:
    """Brute force, independent of the rule: with one-hot value vectors over ``vocab_size`` symbols and
    the readout whose score for symbol v is ``sum_j beta[j] [x_{t-j} = v]``, does the symbol at ``offset``
    win strictly on every one of the ``vocab_size ** len(beta)`` inputs?

    Shapes:
        beta (O,) -> returns a bool (meant for a few offsets and symbols).
    """
    beta = torch.as_tensor(beta, dtype=torch.float64)
    if beta.dim() != 1:
        raise ValueError(f"beta must be one weight per offset (O,), found shape {tuple(beta.shape)}")
    if not 0 <= offset < beta.shape[0]:
        raise ValueError(f"offset must be between 0 and {beta.shape[0] - 1}, found {offset!r}")
    if read_int("vocab_size", vocab_size)[1] or vocab_size < 2:
        raise ValueError(f"vocab_size must be a whole number >= 2, found {vocab_size!r}")
    inputs = torch.tensor(list(itertools.product(range(vocab_size), repeat=beta.shape[0])))  # (N, O)
    scores = torch.zeros(inputs.shape[0], vocab_size, dtype=torch.float64)  # (N, V)
    scores.scatter_add_(1, inputs, beta.expand(inputs.shape[0], -1).contiguous())  # (N, V)
    top2 = scores.topk(2, dim=1)  # (N, 2)
    right = top2.indices[:, 0] == inputs[:, offset]  # (N,)
    return bool((right & (top2.values[:, 0] > top2.values[:, 1])).all())


def readable_relations(weights, *, residual: bool = False) -> list[int]:
    """The relations (offsets ``o >= 1``) a *linear* readout can read on every input, for positional weights.

    ``weights[h][o]`` is the weight head ``h`` puts on the token ``o`` places back; a row may leave weight
    for a token further back (it sums to at most 1). See the module's docstring for the rule and its proof.

    Shapes:
        weights (H, O) -> returns the sorted offsets o >= 1 that pass.
    """
    columns = _weight_table(weights).shape[1] - 1
    return [o for o in range(1, columns) if readout_combination(weights, o, residual=residual) is not None]


def _combination_text(c: torch.Tensor, beta: torch.Tensor, offset: int) -> Message:
    terms = None
    for h, x in enumerate(c):
        sign, coef = "-" if float(x) < 0 else "+", abs(float(x))
        if terms is None and sign == "-":  # the first term carries its sign only when it is negative
            terms = say("- {coef:.3g} × head {head}", coef=coef, head=h + 1)
        elif terms is None:
            terms = say("{coef:.3g} × head {head}", coef=coef, head=h + 1)
        else:
            terms = say("{terms} {sign} {coef:.3g} × head {head}", terms=terms, sign=sign, coef=coef, head=h + 1)
    rest = float(beta.abs().sum() - beta[offset].abs())
    on_it = float(beta[offset])
    return say(
        "{terms} puts {on_it:.3g} on it and {rest:.3g} on all other tokens together",
        terms=terms,
        on_it=on_it,
        rest=rest,
    )


def _offset_problem(item) -> Message | None:
    """What is wrong with ``item`` as an offset (as :func:`read_int` says it), or None for a whole number."""
    if isinstance(item, bool) or not isinstance(item, numbers.Real):
        return say("an offset must be a whole number, found {type} {value!r}", type=type(item).__name__, value=item)
    if not math.isfinite(item) or item != int(item):
        return say("an offset must be a whole number, found {value!r}", value=item)
    return None


def check_readable(answer, weights=EXERCISE_WEIGHTS) -> Verdict:
    """Check exercise 2 of the head-count experiments: which relations (offsets >= 1) can a linear readout
    read on every input?

    Args:
        answer: the offsets you think pass, e.g. ``[1, 3]`` (an empty list for none).
        weights: the heads' weights (H, O) as in :func:`readable_relations`.

    Returns:
        :class:`mha.chapters.checking.answers.Verdict`; malformed input gives a message, never an exception.
    """
    report = Report(say("offsets a linear readout can read on every input"))
    expected = set(readable_relations(weights))
    if isinstance(answer, (str, bytes)) or not hasattr(answer, "__iter__"):
        report.wrong(
            "answer",
            say("must be a list of offsets such as [1, 2], found {answer!r}", answer=answer),
            say("list the offsets (1, 2, ...)"),
        )
        return report.done()
    mine = set()
    for item in answer:
        problem = _offset_problem(item)
        value = None if problem else int(item)
        if problem or not 1 <= value < len(weights[0]):
            report.wrong(
                "answer",
                problem or say("offsets run from 1 to {last}, found {value}", last=len(weights[0]) - 1, value=value),
                say("offsets count places back: 1, 2, ..."),
            )
            return report.done()
        mine.add(value)
    if mine == expected:
        report.right("answer")
        return report.done()
    table = _weight_table(weights)
    single = {o for o in range(1, table.shape[1] - 1) if bool((table[:, o] > 0.5).any())}
    if mine - expected:
        o = min(mine - expected)
        hint = say(
            "no combination of the heads puts more weight on offset {offset} than on all other tokens together: "
            "some input outweighs it, whatever the readout",
            offset=o,
        )
    else:
        o = min(expected - mine)
        c = readout_combination(weights, o)
        how = _combination_text(c, c @ table, o)
        if o in single:
            hint = say("offset {offset} can be read: {how}", offset=o, how=how)
        else:
            hint = say(
                "offset {offset} can be read: {how} (heads can cancel each other's weight: no single head needs "
                "more than 1/2)",
                offset=o,
                how=how,
            )
    report.wrong("answer", say("{value} is not it", value=sorted(mine)), hint)
    return fit_to_page(report.done())
