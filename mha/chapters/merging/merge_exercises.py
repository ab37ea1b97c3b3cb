"""The merging-heads chapter's exercises (and exercise 2 of the merging experiments) and their checkers:
each takes the reader's answer and says what is right, what is wrong, and a hint for the usual slip (an
:class:`mha.chapters.checking.answers.Verdict`).

* :func:`check_merge_costs`: the merge step's parameters for concat, average and the rank-d_k
  concatenation (BERT-large by default; W_down has no bias, every other projection has one);
* :func:`check_indistinguishable`: two different pairs of head outputs that a weighted merge mixes
  into the same vector;
* :func:`check_average_out_proj`: the W^O that makes concatenation compute the average;
* :func:`check_solved_merges` (the merging experiments): which merges solve the four-relation task at a given
  budget, read from the cached sweep.

Malformed answers (a string, a NaN, the wrong shape) get a message in the report, never an exception.
"""

from __future__ import annotations

import torch

from ..checking.answers import Report, Verdict, close, read_numbers, say
from . import merge_training
from .merging import STRATEGIES, merge_params, mix_heads

_W_UP_ROWS = ((1.0, 0.0, 2.0, 0.0), (0.0, 1.0, 0.0, -1.0))
#: Exercise 3's up-projection W_up (d_k = 2 rows, d_model = 4 columns, the formula's layout), h = 2: a
#: float64 tensor, so that ``torch.cat([W_up, W_up])`` works as a learner writes it. The checker reads
#: its own copy of the values: a learner who changes this tensor in place is still judged on the exercise's.
EXERCISE_W_UP = torch.tensor(_W_UP_ROWS, dtype=torch.float64)
EXERCISE_HEADS = 2


def check_merge_costs(concat=None, average=None, concat_lowrank=None, *, d_model=1024, num_heads=16) -> Verdict:
    """Check exercise 1: the merge step's parameters for three merges, biases included (W_O and W_up
    have one, W_down has none, as in :class:`mha.chapters.merging.merging.LowRankConcatMerge`)."""
    report = Report(say("merge parameters for d_model = {d_model}, h = {h}", d_model=d_model, h=num_heads))
    d, dh = d_model, d_model // num_heads
    slips = {
        "concat": {
            d * d: say("W^O has a bias too: d_model more"),
            0: say("concatenating is free, but W^O (d_model x d_model) is not"),
        },
        "average": {
            0: say("the mean is free; W_up (d_k x d_model + bias) is not"),
            dh * d: say("W_up has a bias too: d_model more"),
            d * d + d: say("W_up maps the d_k-wide mean, so it is d_k x d_model, not d_model x d_model"),
        },
        "concat_lowrank": {
            dh * d + d: say("that is W_up alone: W_down (d_model x d_k, no bias) comes first"),
            2 * dh * d: say("W_up has a bias: d_model more (W_down has none)"),
            2 * dh * d + d + dh: say("W_down has no bias here: only W_up's d_model"),
            d * d + d: say("that is a full W^O; the low-rank one is W_down (d_model x d_k) times W_up (d_k x d_model)"),
        },
    }
    # the merging-heads chapter asks for concat and average; the low-rank merge (the merging experiments'
    # control) is listed only when an answer for it is given
    parts = [("concat", concat), ("average", average)] + (
        [("concat_lowrank", concat_lowrank)] if concat_lowrank is not None else []
    )
    for name, value in parts:
        if value is None:
            report.skipped(name)
            continue
        mine, problem = read_numbers(name, value, ())
        expected = merge_params(d_model, num_heads, name)
        if problem:
            report.wrong(name, problem, say("give one whole number"))
        elif float(mine) == expected:
            report.right(name)
        else:
            hint = slips[name].get(float(mine), say("count every weight matrix and bias of the merge step"))
            report.wrong(name, say("{value:,.0f} is not it", value=float(mine)), hint)
    return report.done()


def check_indistinguishable(first, second, weights=(0.75, 0.25)) -> Verdict:
    """Check exercise 2: two different pairs of head outputs ``(H_1, H_2)`` that the weighted merge
    with ``weights`` mixes into the same vector. Each pair is 2 rows of ``d_k`` numbers."""
    report = Report(
        say("two pairs of head outputs the weighted merge {weights} cannot tell apart", weights=tuple(weights))
    )
    hint = say("give each pair as two rows of the same length, e.g. [[1, 0], [0, 1]]")
    for name, value in (("first", first), ("second", second)):
        if not _rows(value):
            found = say(
                "must be two rows of numbers (H_1, H_2), found {type} {value!r}", type=type(value).__name__, value=value
            )
            report.wrong(name, found, hint)
            return report.done()
    a, problem = read_numbers("first", first, (2, len(first[0])))
    b, problem = (None, problem) if problem else read_numbers("second", second, (2, len(first[0])))
    if problem:
        report.wrong("pairs", problem, hint)
        return report.done()
    c = torch.tensor(weights, dtype=torch.float64)
    mix_a = mix_heads(a[None, :, None], c)[0, 0]  # (Dh,)
    mix_b = mix_heads(b[None, :, None], c)[0, 0]
    if close(a, b, 1e-9):
        report.wrong("pairs", say("the two pairs are the same"), say("they must differ and still give the same mix"))
    elif close(mix_a, mix_b, 1e-6):
        report.right("pairs", say("correct: both mix to {mix}", mix=[round(v, 4) for v in mix_a.tolist()]))
    elif close(a, b.flip(0), 1e-9):
        report.wrong(
            "pairs",
            say("swapping the heads changes this mix"),
            say("a swap fools only equal weights (the plain average); solve c_1 (H_1' - H_1) + c_2 (H_2' - H_2) = 0"),
        )
    else:
        shown = [round(v, 4) for v in mix_a.tolist()], [round(v, 4) for v in mix_b.tolist()]
        report.wrong(
            "pairs",
            say("they mix to {first} and {second}", first=shown[0], second=shown[1]),
            say("change H_2 by -c_1/c_2 times the change of H_1"),
        )
    return report.done()


def _rows(value) -> bool:
    """True for something shaped like two rows of numbers (not a string)."""
    if isinstance(value, (str, bytes)):
        return False
    try:
        return len(value) == 2 and not isinstance(value[0], (str, bytes)) and len(value[0]) > 0
    except TypeError:
        return False


def check_average_out_proj(w_o, w_up=None, num_heads: int = EXERCISE_HEADS) -> Verdict:
    """Check exercise 3: the W^O (formula layout, h·d_k rows x d_model columns) with which
    ``Concat(H) W^O`` equals the average of the heads times ``w_up`` (d_k x d_model; by default the
    exercise's :data:`EXERCISE_W_UP`)."""
    up = torch.as_tensor(_W_UP_ROWS if w_up is None else w_up, dtype=torch.float64).clone()  # (Dh, D)
    head_dim, d_model = up.shape
    report = Report(
        say("W^O for averaging {h} heads, then W_up ({rows} x {cols})", h=num_heads, rows=head_dim, cols=d_model)
    )
    mine, problem = read_numbers("w_o", w_o, (num_heads * head_dim, d_model))
    if problem:
        wide = read_numbers("w_o", w_o, (head_dim, num_heads * d_model))[1] is None
        hint = say("the blocks go one *under* the other") if wide else say("W^O has h·d_k rows and d_model columns")
        report.wrong("w_o", problem, hint)
        return report.done()
    expected = torch.cat([up] * num_heads) / num_heads  # (H*Dh, D): h equal blocks W_up / h
    if close(mine, expected, 1e-6):
        report.right("w_o")
    elif close(mine, expected * num_heads, 1e-6):
        report.wrong(
            "w_o",
            say("not it"),
            say("that computes the *sum* of the heads: divide every block by h = {h}", h=num_heads),
        )
    elif d_model == num_heads * head_dim and close(mine, expected.T, 1e-6):
        report.wrong(
            "w_o",
            say("not it"),
            say("that is the nn.Linear layout (out x in); in O = Concat(H) W^O, row i meets feature i"),
        )
    else:
        report.wrong("w_o", say("not it"), say("every head's block (d_k rows) must be the same: W_up / h"))
    return report.done()


def check_solved_merges(answer, steps: int = 12_000, runs=None) -> Verdict:
    """Check exercise 2 of the merging experiments: the merges that solve the four-relation task (held-out
    accuracy >= 0.99) on at least 4 of 5 seeds after ``steps`` steps, read from the cached main sweep."""
    report = Report(say("merges solving the 4-relation task on >= 4 of 5 seeds at {steps:,} steps", steps=steps))
    runs = merge_training.load_merge_results() if runs is None else runs
    summary = merge_training.summarize(runs, steps)
    expected = {s for s, row in summary.items() if row["solved"] >= 4}
    if isinstance(answer, (str, bytes)) or not hasattr(answer, "__iter__"):
        report.wrong(
            "answer",
            say("must be a list of merge names, found {value!r}", value=answer),
            say("choose among {names}", names=STRATEGIES),
        )
        return report.done()
    mine = set(answer)
    unknown = [m for m in mine if m not in STRATEGIES]
    if unknown:
        report.wrong(
            "answer",
            say("unknown merge {name!r}", name=unknown[0]),
            say("the names are {names}", names=", ".join(STRATEGIES)),
        )
    elif mine == expected:
        report.right("answer")
    else:
        early = {s for s, row in merge_training.summarize(runs, 1500).items() if row["solved"] >= 4}
        if mine == early and early != expected:
            hint = say("that is the answer at 1,500 steps: read the column of the budget asked")
        elif mine - expected:
            hint = say("{name} solves fewer than 4 seeds at this budget", name=sorted(mine - expected)[0])
        else:
            hint = say("{name} solves at least 4 seeds at this budget", name=sorted(expected - mine)[0])
        report.wrong("answer", say("{value} is not it", value=sorted(mine)), hint)
    return report.done()
