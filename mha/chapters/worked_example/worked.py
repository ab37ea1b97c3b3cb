"""The worked example: multi-head attention on five tokens and two heads, with every number on the page.

The example (:func:`worked_example`) is small enough to check with pencil and paper:

* tokens ``the cat saw the dog``; ``d_model = 8``, ``h = 2`` heads, ``d_k = d_model / h = 4``
  (tutorials that use this example scale by √4, which is only consistent with ``d_k = 4`` per head);
* each token's vector is its word type (one-hot ``det, noun, verb``) next to its position
  (one-hot ``p1 … p5``), all entries 0 or 1;
* the weight matrices hold 0, 1, 2 (and -1 in ``W_O``), chosen by hand so that **head 1 looks at
  the previous token** (it reads only the position part of ``x``) and **head 2 looks at tokens of
  the same type** (it reads only the type part).

Conventions: float64, no biases, tokens are rows, a projection is ``x @ W`` (``nn.Linear``
stores the transpose, see :func:`to_module`). Heads and tokens are numbered from 1 on the page and
in the checkers, from 0 in the arrays. Matrices as text and LaTeX, and the figures:
:mod:`mha.chapters.worked_example.figures`.

Shape legend: T = 5 tokens, D = d_model = 8, H = 2 heads, Dh = d_k = 4.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import torch

from ...attention import masked_softmax, merge_heads
from ...modules import MultiHeadAttention, SingleHeadAttention
from ..checking.answers import (
    Verdict,
    close_verdict,
    compare_number,
    malformed,
    named_slip,
    read_number,
    read_row,
    right,
    say,
    wrong,
)
from .worked_diagnosis import (
    compare_row,
    diagnose_output,
    diagnose_scores,
    diagnose_weights,
    rows_close,
    wrong_entries,
)

TOKENS = ["the", "cat", "saw", "the", "dog"]
FEATURES = ["det", "noun", "verb", "p1", "p2", "p3", "p4", "p5"]
#: The output lives in d_model space too, but W_O mixes features: its columns get neutral names.
OUTPUT_FEATURES = [f"o{j}" for j in range(1, 9)]
D_MODEL, NUM_HEADS, HEAD_DIM = 8, 2, 4
DTYPE = torch.float64

# Word type of each token (det, noun, verb): the "content" part of x.
_TYPES = {"the": [1, 0, 0], "cat": [0, 1, 0], "saw": [0, 0, 1], "dog": [0, 1, 0]}


def _tensor(rows) -> torch.Tensor:
    return torch.tensor(rows, dtype=DTYPE)


def canonical_x() -> torch.Tensor:
    """The input X: row t = [type of token t | one-hot position of token t].

    Shapes: returns (T, D) = (5, 8).
    """
    positions = torch.eye(len(TOKENS), dtype=DTYPE)  # (5, 5)
    types = _tensor([_TYPES[t] for t in TOKENS])  # (5, 3)
    return torch.cat([types, positions], dim=1)  # (5, 8)


def canonical_weights() -> dict:
    """The hand-chosen projections: ``w_q, w_k, w_v`` (lists of two (8, 4)) and ``w_o`` (8, 8).

    Head 1 (previous token): the query of position p points at key direction p-1, and the key of
    position p is direction p, so q·k = 2·2 = 4 exactly for the previous token and 0 elsewhere.
    Position 1 has no previous token; its query points at itself. Position 5 is nobody's
    previous token, so its key is zero.

    Head 2 (same type): query and key are both 2·(one-hot type), so q·k = 4 between tokens of the
    same type (the token itself included) and 0 otherwise. Its fourth dimension is unused.

    Values: both heads read the same thing from a token, its type and its position number 1…5,
    so that any difference between the heads' outputs comes only from *where* they look.

    W_O = [[I, I], [I, -I]]: output features 1-4 are head 1 + head 2, features 5-8 are
    head 1 - head 2, so every output feature mixes both heads.
    """
    zero = [0, 0, 0, 0]
    # rows: det, noun, verb, p1, p2, p3, p4, p5
    w_q1 = _tensor([zero, zero, zero, [2, 0, 0, 0], [2, 0, 0, 0], [0, 2, 0, 0], [0, 0, 2, 0], [0, 0, 0, 2]])
    w_k1 = _tensor([zero, zero, zero, [2, 0, 0, 0], [0, 2, 0, 0], [0, 0, 2, 0], [0, 0, 0, 2], zero])
    w_qk2 = _tensor([[2, 0, 0, 0], [0, 2, 0, 0], [0, 0, 2, 0], zero, zero, zero, zero, zero])
    w_v = _tensor(
        [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1], [0, 0, 0, 2], [0, 0, 0, 3], [0, 0, 0, 4], [0, 0, 0, 5]]
    )
    eye = torch.eye(HEAD_DIM, dtype=DTYPE)
    w_o = torch.cat([torch.cat([eye, eye], dim=1), torch.cat([eye, -eye], dim=1)], dim=0)  # (8, 8)
    return {"w_q": [w_q1, w_qk2.clone()], "w_k": [w_k1, w_qk2.clone()], "w_v": [w_v, w_v.clone()], "w_o": w_o}


@dataclass(frozen=True)
class WorkedExample:
    """Every intermediate of two-head attention on five tokens (float64, heads first).

    Shapes (T = 5, D = 8, H = 2, Dh = 4):
        tokens T strings; x (T, D); w_q, w_k, w_v lists of H tensors (D, Dh); w_o (H·Dh, D);
        q, k, v (H, T, Dh); scores (H, T, T) = q kᵀ before scaling;
        scaled_scores (H, T, T) = scores / (√d_k · temperature); weights (H, T, T), rows sum to 1;
        head_outputs (H, T, Dh) = weights @ v; concat (T, H·Dh), heads side by side;
        output (T, D) = concat @ w_o.
    """

    tokens: list
    x: torch.Tensor
    w_q: list
    w_k: list
    w_v: list
    w_o: torch.Tensor
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    scores: torch.Tensor
    scaled_scores: torch.Tensor
    weights: torch.Tensor
    head_outputs: torch.Tensor
    concat: torch.Tensor
    output: torch.Tensor
    temperature: float = 1.0

    @property
    def d_model(self) -> int:
        return self.x.shape[1]

    @property
    def num_heads(self) -> int:
        return len(self.w_q)

    @property
    def head_dim(self) -> int:
        return self.w_q[0].shape[1]


def _check_x(x) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor of shape (5, 8), found {type(x).__name__}")
    if tuple(x.shape) != (len(TOKENS), D_MODEL):
        raise ValueError(f"x must have shape (T, D) = (5, 8), found shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise TypeError(f"x must be a floating-point tensor, found {x.dtype}")
    return x.detach().to("cpu", DTYPE)


def _check_temperature(temperature) -> float:
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real):
        raise TypeError(f"temperature must be a positive number, found {type(temperature).__name__}")
    if not (math.isfinite(temperature) and temperature > 0):
        raise ValueError(f"temperature must be a positive finite number, found {temperature}")
    return float(temperature)


def worked_example(x: torch.Tensor | None = None, temperature: float = 1.0) -> WorkedExample:
    """Run the hand-chosen two-head attention step by step and keep every intermediate.

    Args:
        x: the input (5, 8); default :func:`canonical_x` (the chapter's example). The explorer
            passes a copy with one token's embedding edited (:func:`edited_x`).
        temperature: divides the scaled scores (softmax(q kᵀ / (√d_k · temperature))); 1 is
            ordinary attention, < 1 sharpens the weights, > 1 flattens them.

    Returns:
        :class:`WorkedExample`.
    """
    x = canonical_x() if x is None else _check_x(x)
    temperature = _check_temperature(temperature)
    w = canonical_weights()
    q = torch.stack([x @ w_h for w_h in w["w_q"]])  # (H, T, Dh)
    k = torch.stack([x @ w_h for w_h in w["w_k"]])  # (H, T, Dh)
    v = torch.stack([x @ w_h for w_h in w["w_v"]])  # (H, T, Dh)
    scores = q @ k.transpose(-2, -1)  # (H, T, T): row = query token, column = key token
    # √d_k keeps the scores' spread independent of the head width (the multi-head-math chapter).
    scaled = scores / (math.sqrt(HEAD_DIM) * temperature)  # (H, T, T)
    weights = masked_softmax(scaled)  # (H, T, T)
    head_outputs = weights @ v  # (H, T, Dh)
    concat = merge_heads(head_outputs[None])[0]  # (T, H*Dh): side by side, not stacked
    output = concat @ w["w_o"]  # (T, D)
    return WorkedExample(
        tokens=list(TOKENS),
        x=x,
        w_q=w["w_q"],
        w_k=w["w_k"],
        w_v=w["w_v"],
        w_o=w["w_o"],
        q=q,
        k=k,
        v=v,
        scores=scores,
        scaled_scores=scaled,
        weights=weights,
        head_outputs=head_outputs,
        concat=concat,
        output=output,
        temperature=temperature,
    )


def edited_x(det: float = 0.0, noun: float = 1.0, verb: float = 0.0, *, token: int = 5) -> torch.Tensor:
    """The input with the type part of one token replaced (its position part is kept).

    ``token`` is numbered 1…5 as on the page (default 5, "dog"). Shapes: returns (5, 8).
    """
    if isinstance(token, bool) or not isinstance(token, numbers.Integral) or not 1 <= token <= len(TOKENS):
        raise ValueError(f"token must be a token number 1..{len(TOKENS)} (as on the page), found {token!r}")
    x = canonical_x()
    x[token - 1, :3] = _tensor([det, noun, verb])
    return x


# --------------------------------------------------------------------------------------------
# The same numbers through modules
# --------------------------------------------------------------------------------------------


def to_module(example: WorkedExample | None = None) -> MultiHeadAttention:
    """An ``mha.MultiHeadAttention(8, 2, bias=False)`` (float64) holding the example's weights.

    One d_model x d_model projection is the two heads' (8, 4) matrices side by side; nn.Linear
    computes ``x @ weight.T``, so it stores the transpose. The worked example prints the body: its
    lines stay within 74 characters.
    """
    ex = worked_example() if example is None else example
    module = MultiHeadAttention(D_MODEL, NUM_HEADS, bias=False).to(DTYPE)
    with torch.no_grad():
        for proj, per_head in (
            (module.q_proj, ex.w_q),
            (module.k_proj, ex.w_k),
            (module.v_proj, ex.w_v),
        ):
            # the heads side by side: (D, H*Dh), stored as (H*Dh, D)
            proj.weight.copy_(torch.cat(per_head, dim=1).T)
        # W_O is (H*Dh, D), stored as (D, H*Dh)
        module.out_proj.weight.copy_(ex.w_o.T)
    return module


def single_head_module(example: WorkedExample | None = None) -> SingleHeadAttention:
    """One head of the same total size (head_dim = h·d_k = 8) built from the same matrices.

    Its W_Q, W_K, W_V are the two heads' matrices side by side and W_O is unchanged, so it has
    exactly the parameters of the two-head module. The only difference: one softmax over the
    *sum* of both heads' scores, scaled by √8, instead of one softmax per head.
    """
    ex = worked_example() if example is None else example
    module = SingleHeadAttention(D_MODEL, head_dim=NUM_HEADS * HEAD_DIM, bias=False).to(DTYPE)
    with torch.no_grad():
        for proj, per_head in (
            (module.head.q_proj, ex.w_q),
            (module.head.k_proj, ex.w_k),
            (module.head.v_proj, ex.w_v),
        ):
            proj.weight.copy_(torch.cat(per_head, dim=1).T)  # stored as (8, D)
        module.out_proj.weight.copy_(ex.w_o.T)
    return module


def token_labels(tokens=TOKENS) -> list[str]:
    """Row labels that stay unique when a word repeats: ``1 the``, ``2 cat``, …"""
    return [f"{i + 1} {t}" for i, t in enumerate(tokens)]


# --------------------------------------------------------------------------------------------
# Exercises: one row by hand, the temperature boundary, one output row
# --------------------------------------------------------------------------------------------


def _example(example) -> WorkedExample:
    ex = worked_example() if example is None else example
    if not isinstance(ex, WorkedExample):
        raise TypeError(f"example must be a WorkedExample (e.g. worked.explorer_example()), found {type(ex).__name__}")
    return ex


#: The precision the exercises ask for: hand-computed rows and τ to 2 decimals.
DECIMALS = 2


def check_row(
    head: int,
    row: int,
    *,
    scores=None,
    weights=None,
    output=None,
    example: WorkedExample | None = None,
    decimals: int = DECIMALS,
) -> Verdict:
    """Check one row of one head computed by hand, and say which step went wrong first.

    Args:
        head: 1 or 2, numbered as on the page.
        row: the query token t, 1…5 as on the page (row 2 is "cat").
        scores: your 5 raw scores q_t · k_j (before dividing by √d_k), or None to skip.
        weights: your 5 softmax weights a_tj, or None to skip.
        output: your head output o_t for this token (d_k = 4 numbers), or None to skip.
        example: the example to check against (default: the chapter's canonical one).
        decimals: the precision asked, 2 decimals as on the page: an entry is right when it
            rounds to the exact value's 2 decimals (more digits within half a unit pass); one
            decimal fewer, or one unit off in the last, is "close" (no hint about the method).

    Returns:
        :class:`~mha.chapters.checking.answers.Verdict` (prints as a report; ``.ok`` and
        ``.first_error`` for code). A malformed answer (a string, NaN, the wrong number of
        entries, a head or row that does not exist) gets a message, not an exception.

    Each wrong step gets a hint that recognises common slips (no scaling, dividing by d_k,
    a column instead of a row, the other head, averaging K or X instead of V). The hints
    name wrong entries but never print the expected numbers.
    """
    ex = _example(example)
    title = say("head {head}, row {row}", head=head, row=row)
    if isinstance(head, bool) or not isinstance(head, numbers.Integral) or not 1 <= head <= ex.num_heads:
        return malformed(title, say("head must be 1 or 2 (numbered from 1, as on the page), found {head!r}", head=head))
    if isinstance(row, bool) or not isinstance(row, numbers.Integral) or not 1 <= row <= len(ex.tokens):
        return malformed(
            title, say("row must be a token number 1..{n} (as on the page), found {row!r}", n=len(ex.tokens), row=row)
        )
    if scores is None and weights is None and output is None:
        return malformed(title, say("give at least one of scores=, weights=, output= to check"))
    h, r = int(head) - 1, int(row) - 1
    n = len(ex.tokens)
    tol = 10.0**-decimals  # how near a slip must be to be recognised
    mine = {}
    for name, values, length in (("scores", scores, n), ("weights", weights, n), ("output", output, ex.head_dim)):
        mine[name], problem = (None, None) if values is None else read_row(name, values, length)
        if problem:
            return malformed(title, problem)
    my_scores, my_weights = mine["scores"], mine["weights"]
    lines = [say("head {head}, row {row} ({token})", head=head, row=row, token=ex.tokens[r])]
    first_error = None
    steps = (
        ("scores", my_scores, ex.scores[h, r], ex.tokens),
        ("weights", my_weights, ex.weights[h, r], ex.tokens),
        ("output", mine["output"], ex.head_outputs[h, r], [f"d{j + 1}" for j in range(ex.head_dim)]),
    )
    for name, mine, expected, labels in steps:
        if mine is None:
            lines.append(say("  {name:8s} not given", name=name))
            continue
        status, message = compare_row(mine, expected, labels, decimals)
        if status == "right":
            lines.append(say("  {name:8s} correct", name=name))
            continue
        if status == "close":
            lines.append(say("  {name:8s} {message}", name=name, message=message))
            first_error = first_error or name
            continue
        if name == "scores":
            hint = diagnose_scores(mine, ex, h, r, tol)
        elif name == "weights":
            hint = diagnose_weights(mine, ex, h, r, tol, my_scores)
        else:
            hint = diagnose_output(mine, ex, h, r, tol, my_weights)
        entries = wrong_entries(mine, expected, labels, tol / 2)
        lines.append(say("  {name:8s} wrong at entries {entries}", name=name, entries=entries))
        lines.append(say("hint: {hint}", hint=hint).indented(2 + 8 + 1))
        first_error = first_error or name
    lines.append(
        say("all steps given are correct")
        if first_error is None
        else say("first step to fix: {step}", step=first_error)
    )
    return Verdict(ok=first_error is None, first_error=first_error, lines=tuple(lines))


def temperature_boundary(share: float = 0.9, example: WorkedExample | None = None) -> float:
    """The temperature below which head 1 puts more than ``share`` of row 2's weight on its key.

    From the example's own scaled scores at τ = 1: the chosen key leads the others by ``gap``, so
    its weight e^(gap/τ) / (e^(gap/τ) + others) exceeds ``share`` when τ < gap / ln(others·share/(1-share)).
    """
    ex = _example(example)
    row = ex.scaled_scores[0, 1] * ex.temperature  # (T,), at τ = 1
    top = int(row.argmax())
    rest = torch.cat([row[:top], row[top + 1 :]])
    if not torch.all(rest == rest[0]):
        raise ValueError("temperature_boundary needs a row whose other keys share one score")
    gap = float(row[top] - rest[0])
    return gap / math.log(len(rest) * share / (1 - share))


def check_temperature(tau, *, decimals: int = DECIMALS) -> Verdict:
    """Exercise 2: the temperature τ below which head 1 puts more than 0.9 of a row on one token.

    Asked to 2 decimals: more digits within half a unit pass; one decimal fewer, or one unit off
    in the last, is "close". Recognises the usual slips: one other token instead of four, the raw
    score 4 instead of the scaled 2, dividing by d_k, the equation inverted, and the algebra of
    e/(e + 4) > 0.9.
    """
    title = say("temperature boundary")
    value, problem = read_number("tau", tau)
    if problem:
        return malformed(title, problem)
    target = temperature_boundary()
    verdict = compare_number(value, target, decimals=decimals)
    if verdict.right:
        # the boundary itself, not the reader's rounding of it: at τ = 0.56 the weight is 0.8989
        return right(
            title, say("correct: below τ = {target:.4f} head 1 puts more than 0.9 on its chosen token", target=target)
        )
    slips = [
        (2 / math.log(9), say("one other token? Row 2 of head 1 has four others, each e^0 = 1")),
        (4 / math.log(36), say("you used the raw score 4; the softmax sees the scaled score 4 / √d_k = 2")),
        (1 / math.log(36), say("you divided the score by d_k = 4; the scale is √d_k = 2")),
        (math.log(36) / 2, say("upside down: solve e^(2/τ) > 36 for τ, so τ < 2 / ln 36")),
        (2 / math.log(3.6), say("e/(e + 4) > 0.9 means e > 0.9·e + 3.6, i.e. 0.1·e > 3.6: e > 36, not 3.6")),
        (2 / math.log(40), say("e/(e + 4) > 0.9 means 0.1·e > 0.9·4 = 3.6, so e > 36 (not 4 / 0.1 = 40)")),
    ]
    hint = named_slip(value, target, slips, decimals=decimals)
    if hint is not None:
        return wrong(title, "tau", hint)
    if verdict.status == "close":
        return close_verdict(title, "tau", verdict.message)
    if value < target:
        hint = say(
            "at τ = {tau:g} head 1 is sharper than at the boundary: write the weight as "
            "e^(2/τ) / (e^(2/τ) + 4), set it to 0.9 and solve for τ",
            tau=value,
        )
    else:
        hint = say(
            "at τ = {tau:g} head 1 is flatter than at the boundary: write the weight as "
            "e^(2/τ) / (e^(2/τ) + 4), set it to 0.9 and solve for τ",
            tau=value,
        )
    return wrong(title, "tau", hint)


def check_output_row(row: int, output, *, example: WorkedExample | None = None, decimals: int = DECIMALS) -> Verdict:
    """Exercise 4: token ``row``'s final output, the concatenated heads times W_O (8 numbers).

    Asked to 2 decimals, entry by entry, with the rule of :func:`check_row`.
    """
    ex = _example(example)
    title = say("output row {row}", row=row)
    if isinstance(row, bool) or not isinstance(row, numbers.Integral) or not 1 <= row <= len(ex.tokens):
        return malformed(
            title, say("row must be a token number 1..{n} (as on the page), found {row!r}", n=len(ex.tokens), row=row)
        )
    mine, problem = read_row("output", output, ex.d_model)
    if problem:
        return malformed(title, problem)
    t = int(row) - 1
    title = say("output row {row} ({token})", row=row, token=ex.tokens[t])
    h1, h2 = ex.head_outputs[0, t], ex.head_outputs[1, t]  # (Dh,) each
    labels = [f"o{c + 1}" for c in range(ex.d_model)]
    status, message = compare_row(mine, ex.output[t], labels, decimals)
    if status == "right":
        return right(title)
    if status == "close":
        return close_verdict(title, "output", message)
    tol = 10.0**-decimals  # how near a slip must be to be recognised
    slips = [
        (ex.concat[t], say("this is the concatenation [head 1, head 2]; multiply it by W^O")),
        (torch.cat([h1 - h2, h1 + h2]), say("the halves are swapped: the first four outputs are head 1 + head 2")),
        (
            torch.cat([h1 + h2, h2 - h1]),
            say("sign: W^O's lower-right block is -I, so the last four are head 1 - head 2"),
        ),
        (torch.cat([h1 + h2, h1 + h2]), say("the last four columns of W^O hold I above -I: head 1 minus head 2")),
    ]
    for slip, hint in slips:
        if rows_close(mine, slip, tol):
            return wrong(title, "output", hint)
    return wrong(
        title,
        "output",
        say(
            "entries {entries} are off: output feature c is sum over r of concat[t, r] · W^O[r, c]",
            entries=wrong_entries(mine, ex.output[t], labels, tol / 2),
        ),
    )
