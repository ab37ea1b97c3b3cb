"""The build-it-yourself checkers' diagnoses from properties: when a learner's attention is
wrong in a way no listed slip reproduces, measure what it did and say it, found against expected; and
the helpers every checker of the chapter uses to run the learner's code and read its result.

Each function reads the learner's result (float64 tensors) and returns one sentence, or None when the
property holds: whether an input was changed in place, whether the weights are positive and each
query's sum to 1 (or the queries' instead), whether blocked keys get weight, and which scale the
scores were divided by, found from the weights themselves (:func:`infer_scale`). When the learner's
attention raises instead, :func:`raised_hint` names the property of the inputs that makes it fail
(leading axes, T != S, Dv != Dh), found by running it on inputs that differ in that one property.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import torch

from ..checking.answers import Message, Verdict, fit_to_page, malformed, say, wrong

# ------------------------------------------------------------------------------------------------
# Running the learner's code without letting it raise, and reading what it returned
# ------------------------------------------------------------------------------------------------

# ------------------------------------------------------------------------------------------------
# Running the learner's code without letting it raise
# ------------------------------------------------------------------------------------------------


def learner_line(error: BaseException) -> str | None:
    """The last line of the learner's own code in ``error``'s traceback (not torch's, not mha's), as
    ``"`code`"``; None when none is found (a line the interpreter cannot read) or the line is the
    learner's own ``raise``."""
    import linecache
    import traceback

    package = str(Path(__file__).resolve().parents[1])
    mine = [
        frame
        for frame in traceback.extract_tb(error.__traceback__)
        if not frame.filename.startswith(package) and "/torch/" not in frame.filename
    ]
    if not mine:
        return None
    frame = mine[-1]
    text = (frame.line or linecache.getline(frame.filename, frame.lineno)).strip()
    if not text or text.startswith("raise") or "`" in text:  # a raise says itself what went wrong
        return None
    return f"`{text}`"


def run_learner(fn, *args, **kwargs):
    """``(result, None)`` or ``(None, what went wrong)``: the learner's exception becomes a sentence
    that says which line of their code raised it, where that line can be read."""
    try:
        return fn(*args, **kwargs), None
    except NotImplementedError:
        return None, say("it raised NotImplementedError: replace the `raise` line with your code")
    except Exception as error:  # the learner's code: report it, never propagate it
        line, name = learner_line(error), type(error).__name__
        if line:
            return None, say("it raised {name} at {line}: “{error}”", name=name, line=line, error=str(error))
        return None, say("it raised {name}: “{error}”", name=name, error=str(error))


def read_tensor(
    name: str, value, shape: tuple, *, allow_nan: bool = False
) -> tuple[torch.Tensor | None, Message | None]:
    """``value`` as a float64 CPU tensor of ``shape``, or ``(None, what is wrong with it)``; NaN and
    infinity are refused unless ``allow_nan`` (a slip can be named first, then the NaN reported)."""
    if not isinstance(value, torch.Tensor):
        return None, say("{name} must be a tensor, found {type}", name=name, type=type(value).__name__)
    if not (value.is_floating_point() or value.dtype == torch.bool):
        return None, say("{name} must be a float tensor, found dtype {dtype}", name=name, dtype=value.dtype)
    if tuple(value.shape) != tuple(shape):
        return None, say(
            "{name} must have shape {expected}, found {found}",
            name=name,
            expected=tuple(shape),
            found=tuple(value.shape),
        )
    value = value.detach().cpu().to(torch.float64)
    if not allow_nan and not torch.isfinite(value).all():
        return None, say("{name} holds NaN or infinity", name=name)
    return value, None


def readable(check):
    """A checker whose verdict fits the page (:func:`~mha.chapters.checking.answers.fit_to_page`), and an
    unwritten stub (``raise NotImplementedError``) answered as such rather than as an error."""

    @functools.wraps(check)
    def wrapper(*args, **kwargs) -> Verdict:
        verdict = check(*args, **kwargs)
        if any("NotImplementedError" in line for line in verdict.lines[1:]):
            note = say(
                "  not written yet: replace `raise NotImplementedError(...)` with your code, then run this cell again"
            )
            verdict = Verdict(ok=False, first_error="not written", lines=(verdict.lines[0], note))
        return fit_to_page(verdict)

    return wrapper


def for_case(where, problem: Message) -> Message:
    """``for <the case>: <what is wrong>``, the hint of a verdict on one case (``where``: the case)."""
    return say("for {where}: {problem}", where=where, problem=problem)


def read_pair(result, where: Message):
    """The learner's ``(output, weights)``, or a problem (``where``: the case it was given)."""
    if isinstance(result, (tuple, list)) and len(result) != 2:
        found = say(
            "return a pair (output, weights), found a {type} of length {length}",
            type=type(result).__name__,
            length=len(result),
        )
        return None, for_case(where, found)
    if not isinstance(result, (tuple, list)):
        found = say("return a pair (output, weights), found a {type}", type=type(result).__name__)
        return None, for_case(where, found)
    return result, None


def read_returned(title: Message, where: Message, result, problem, originals: dict, passed: dict):
    """The learner's ``(output, weights)`` from ``run_learner``'s ``result, problem``, and ``None``; or
    ``None`` and the verdict that ends the check: what raised, a result that is not a pair, or inputs
    changed in place (``originals``: untouched copies of ``passed``, the tensors the learner was given)."""
    if problem:  # the learner's code raised: "it raised ..."
        return None, malformed(title, say("for {where}, {problem}", where=where, problem=problem))
    result, problem = read_pair(result, where)
    if problem:
        return None, malformed(title, problem)
    changed = changed_inputs(originals, passed)
    if changed:
        return None, wrong(title, "inputs", for_case(where, changed))
    return result, None


#: How far a right answer may be from the float64 reference: the rounding of float32 arithmetic on
#: the checkers' sizes (a softmax over at most 7 keys, products of at most 12 terms, values of order
#: 1), with room: 64 float32 ulps (64 * 1.19e-7 = 7.6e-6). A learner's code that takes its softmax in
#: float32, as many libraries do, is 2-5e-7 off; every slip the checkers name is 1e-2 off or more.
RTOL, ATOL = 64 * torch.finfo(torch.float32).eps, 64 * torch.finfo(torch.float32).eps


def close(a: torch.Tensor, b: torch.Tensor) -> bool:
    """``a`` equals ``b`` up to float32 rounding (:data:`RTOL`, :data:`ATOL`); NaN matches NaN."""
    return a.shape == b.shape and torch.allclose(a, b, rtol=RTOL, atol=ATOL, equal_nan=True)


# ------------------------------------------------------------------------------------------------
# Diagnoses from properties
# ------------------------------------------------------------------------------------------------

#: Agreement of a fitted scale with a named one (relative), and of a row sum with 1.
SCALE_RTOL, SUM_ATOL = 1e-6, 1e-6


def _joined(names: list[str]) -> Message | str:
    """``"q"``, ``"q and k"``, ``"q and k and v"``: the names of inputs, as a clause (in Chinese
    ``q、k 和 v``)."""
    if len(names) == 1:
        return names[0]
    if len(names) == 2:
        return say("{first} and {second}", first=names[0], second=names[1])
    return say("{first} and {rest}", first=names[0], rest=_joined(names[1:]))


def changed_inputs(originals: dict, passed: dict) -> Message | None:
    """The inputs (by name) that the learner's code changed in place, as a sentence; None if none.

    ``originals`` are untouched copies of ``passed``, the tensors given to the learner's code."""
    changed = [
        name
        for name, tensor in passed.items()
        if isinstance(tensor, torch.Tensor) and not torch.equal(tensor, originals[name])
    ]
    if not changed:
        return None
    return say(
        "your code changed its input {names} in place (an in-place operation such as "
        "{first} /= ..., masked_fill_ or +=): compute a new tensor instead ({first} = {first} / ...)",
        names=_joined(changed),
        first=changed[0],
    )


def infer_scale(weights: torch.Tensor, scores: torch.Tensor, visible: torch.Tensor) -> float | None:
    """The factor ``c`` with ``weights == softmax(c · scores)`` over each row's visible keys, fitted by
    least squares on the log-weights (a softmax's log is ``c · score`` minus a constant per row);
    None when no single factor fits (the weights are not a softmax of scaled scores).

    Shapes: weights, scores, visible (..., T, S); visible is True where a key may be seen."""
    keep = visible & (weights > 1e-300)
    counts = keep.sum(-1, keepdim=True)
    if bool((counts < 2).all()):
        return None
    log_w = torch.where(keep, weights.clamp_min(1e-300).log(), 0.0)
    s = torch.where(keep, scores, 0.0)
    # centre each row over its visible keys: the softmax's constant drops out
    log_w = torch.where(keep, log_w - log_w.sum(-1, keepdim=True) / counts.clamp_min(1), 0.0)
    s = torch.where(keep, s - s.sum(-1, keepdim=True) / counts.clamp_min(1), 0.0)
    denominator = (s * s).sum()
    if float(denominator) == 0.0:
        return None
    c = float((s * log_w).sum() / denominator)
    residual = float((log_w - c * s).abs().max())
    return c if residual < 1e-6 * max(1.0, float(log_w.abs().max())) else None


def scale_sentence(c: float, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Message:
    """What the fitted scale ``c`` was, named when it is a usual slip, against 1/√Dh."""
    dh, s_len, dv, t_len = q.shape[-1], k.shape[-2], v.shape[-1], q.shape[-2]
    named = {
        say("1 (no scale)"): 1.0,
        say("1/Dh = 1/{dh}", dh=dh): 1.0 / dh,
        say("1/√S = 1/√{s} (S = the number of keys)", s=s_len): s_len**-0.5,
        say("1/√Dv = 1/√{dv} (the values' width)", dv=dv): dv**-0.5,
        say("1/√T = 1/√{t} (the number of queries)", t=t_len): t_len**-0.5,
        say("√Dh = √{dh}", dh=dh): dh**0.5,
    }
    for axis, size in enumerate(q.shape[:-2]):  # a size read from the wrong axis, q.size(1) for Dh
        named.setdefault(say("1/√{size} (q.shape[{axis}], not q.shape[-1])", size=size, axis=axis), size**-0.5)
    for name, value in named.items():
        if math.isclose(c, value, rel_tol=SCALE_RTOL):
            return say(
                "the scores are multiplied by {name} = {value:.3f}; expected 1/√Dh = 1/√{dh} = {scale:.3f} "
                "(Dh = q.shape[-1])",
                name=name,
                value=value,
                dh=dh,
                scale=dh**-0.5,
            )
    return say(
        "the scores are multiplied by {c:.3f} (read from your weights); expected 1/√Dh = 1/√{dh} = {scale:.3f} "
        "(Dh = q.shape[-1])",
        c=c,
        dh=dh,
        scale=dh**-0.5,
    )


def diagnose_weights(weights: torch.Tensor, q, k, v, mask) -> Message | None:
    """One sentence on what is wrong with attention weights that match no listed slip, found from
    their properties; None if the properties hold and the scale is right.

    Shapes: weights (..., T, S) float64; q (..., T, Dh), k (..., S, Dh), v (..., S, Dv);
    mask (T, S) or None, True = may attend."""
    visible = torch.ones(weights.shape, dtype=torch.bool) if mask is None else mask.expand(weights.shape)
    if not torch.isfinite(weights).all():
        # the mask filled in after the softmax, with -inf rather than 0 (a bug reported in a popular
        # library): -inf exactly where blocked, finite where visible
        if (
            mask is not None
            and bool(torch.isneginf(weights.masked_select(~visible)).all())
            and bool(torch.isfinite(weights.masked_select(visible)).all())
        ):
            return say(
                "the blocked weights are -inf: the mask was applied after the softmax; set blocked "
                "scores to -inf before it, so that their weights are 0"
            )
        return say("the weights hold NaN or infinity: is a whole row blocked, or -inf added outside the mask?")
    rows = weights.sum(-1)
    if bool((weights <= 0).all()) and torch.allclose(weights.exp().sum(-1), torch.ones_like(rows)):
        return say("these are log-weights (log_softmax): the weights are softmax(scores), positive")
    if bool((weights < -SUM_ATOL).any()):
        return say(
            "some weights are negative (smallest {smallest:.3f}): softmax the scaled "
            "scores, which makes every weight positive",
            smallest=float(weights.min()),
        )
    blocked = weights.masked_select(~visible)
    if blocked.numel() and float(weights.masked_select(visible).abs().max()) <= SUM_ATOL:
        return say(
            "the mask is inverted: your weights are 0 exactly where the mask is True; True means "
            "*may attend*, so block where it is False (~mask)"
        )
    if blocked.numel() and float(blocked.abs().max()) > SUM_ATOL:
        return say(
            "blocked keys get weight (up to {largest:.3f}): set their scores to -inf "
            "before the softmax (a score of 0 still gets weight e^0)",
            largest=float(blocked.abs().max()),
        )
    if not torch.allclose(rows, torch.ones_like(rows), atol=SUM_ATOL):
        for axis in range(weights.dim() - 2, -1, -1):  # the queries' axis first, then batch or heads
            sums = weights.sum(axis)
            if weights.shape[axis] > 1 and torch.allclose(sums, torch.ones_like(sums), atol=SUM_ATOL):
                if axis == weights.dim() - 2:
                    return say(
                        "the weights sum to 1 over the queries (dim {dim} of {dims}): softmax over the keys, dim=-1",
                        dim=axis - weights.dim(),
                        dims=weights.dim(),
                    )
                return say(
                    "the weights sum to 1 over a batch or head axis (dim {dim} of {dims}): softmax over the keys, "
                    "dim=-1",
                    dim=axis - weights.dim(),
                    dims=weights.dim(),
                )
        low, high = float(rows.min()), float(rows.max())
        if mask is not None and high <= 1 + SUM_ATOL:
            return say(
                "each query's weights sum to {low:.3f} … {high:.3f}, not 1: the mask was applied after "
                "the softmax; set blocked scores to -inf before it",
                low=low,
                high=high,
            )
        if math.isclose(low, high, rel_tol=1e-9):
            return say(
                "every query's weights sum to {total:.3f}, not 1: a factor applied after the softmax? "
                "Scale the scores before it",
                total=low,
            )
        return say("each query's weights must sum to 1, found sums from {low:.3f} to {high:.3f}", low=low, high=high)
    c = infer_scale(weights, q @ k.transpose(-2, -1), visible)
    if c is not None and not math.isclose(c, q.shape[-1] ** -0.5, rel_tol=SCALE_RTOL):
        return scale_sentence(c, q, k, v)
    return None


# ------------------------------------------------------------------------------------------------
# Why the learner's attention raised: the property of the inputs that makes it fail
# ------------------------------------------------------------------------------------------------

#: Added to what goes wrong on the unbatched case, after the batched cases have passed.
UNBATCHED_HINT = say(
    "your function works with batch and head axes but not without them: count the axes from the end "
    "(k.transpose(-2, -1), softmax(dim=-1), q.shape[-1]) and give the mask no extra axis, so that "
    "(T, Dh) inputs work too"
)


RAISED_HINTS = {
    "leading": say(
        "it runs without the batch and head axes but not with them: count the axes from the "
        "end, k.transpose(-2, -1) (k.T reverses every axis, k.transpose(1, 2) swaps heads and queries), "
        "and use @ or torch.matmul (torch.bmm takes 3-D tensors only)"
    ),
    "square": say(
        "it runs only when T == S, so a (T, S) tensor is used as (S, T) somewhere: the mask is "
        "(T, S), one row per query, and a sum over the keys needs keepdim=True (e / e.sum(-1, keepdim=True))"
    ),
    "broadcast": say(
        "two tensors of different shapes met in an elementwise operation: a sum or max over "
        "the keys needs keepdim=True to divide each row by its own sum (e / e.sum(-1, keepdim=True)), and "
        "the mask is (T, S), one row per query"
    ),
    "widths": say(
        "it runs only when Dv == Dh: the output is (..., T, Dv) with Dv = v.shape[-1], so do not give it q's shape"
    ),
}


def why_it_raised(fn, q, k, v, mask) -> Message | None:
    """Which property of the inputs makes ``fn`` raise, found by running it on inputs that differ in
    one property only: no leading axes, T == S, Dv == Dh. None when none of them helps."""

    def runs(q, k, v, mask) -> bool:
        return run_learner(fn, q.clone(), k.clone(), v.clone(), mask=None if mask is None else mask.clone())[1] is None

    lead = q.dim() - 2
    if lead and any(runs(q[(0,) * n], k[(0,) * n], v[(0,) * n], mask) for n in range(lead, 0, -1)):
        return RAISED_HINTS["leading"]
    t = q.shape[-2]
    if k.shape[-2] > t and runs(q, k[..., :t, :], v[..., :t, :], None if mask is None else mask[:, :t]):
        return RAISED_HINTS["square"]
    if v.shape[-1] > q.shape[-1] and runs(q, k, v[..., : q.shape[-1]], mask):
        return RAISED_HINTS["widths"]
    return None


def raised_hint(fn, problem: Message, q, k, v, mask) -> Message | None:
    """What to change when ``fn`` raised ``problem``: from :func:`why_it_raised`, else from the error."""
    if "NotImplementedError" in problem:
        return None
    hint = why_it_raised(fn, q, k, v, mask)
    if hint is None and "must match the size of tensor" in problem:
        hint = RAISED_HINTS["broadcast"]
    return hint
