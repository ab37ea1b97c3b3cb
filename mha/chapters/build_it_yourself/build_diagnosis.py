"""The build-it-yourself checkers' diagnoses from properties: when a learner's attention is
wrong in a way no listed slip reproduces, measure what it did and say it, found against expected; and
the helpers every checker of the chapter uses to run the learner's code and read its result.

Each function reads the learner's result (float64 tensors) and returns one sentence, or None when the
property holds: whether an input was changed in place, whether the weights are positive and each
query's sum to 1 (or the queries' instead), whether blocked keys get weight, and which scale the
scores were divided by, found from the weights themselves (:func:`infer_scale`).
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import torch

from ..checking.answers import Verdict, fit_to_page, malformed, wrong

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
        return None, "it raised NotImplementedError: replace the `raise` line with your code"
    except Exception as error:  # the learner's code: report it, never propagate it
        line = learner_line(error)
        where = f" at {line}" if line else ""
        return None, f"it raised {type(error).__name__}{where}: “{error}”"


def read_tensor(name: str, value, shape: tuple, *, allow_nan: bool = False) -> tuple[torch.Tensor | None, str | None]:
    """``value`` as a float64 CPU tensor of ``shape``, or ``(None, what is wrong with it)``; NaN and
    infinity are refused unless ``allow_nan`` (a slip can be named first, then the NaN reported)."""
    if not isinstance(value, torch.Tensor):
        return None, f"{name} must be a tensor, found {type(value).__name__}"
    if not (value.is_floating_point() or value.dtype == torch.bool):
        return None, f"{name} must be a float tensor, found dtype {value.dtype}"
    if tuple(value.shape) != tuple(shape):
        return None, f"{name} must have shape {tuple(shape)}, found {tuple(value.shape)}"
    value = value.detach().cpu().to(torch.float64)
    if not allow_nan and not torch.isfinite(value).all():
        return None, f"{name} holds NaN or infinity"
    return value, None


def readable(check):
    """A checker whose verdict fits the page (:func:`~mha.chapters.checking.answers.fit_to_page`), and an
    unwritten stub (``raise NotImplementedError``) answered as such rather than as an error."""

    @functools.wraps(check)
    def wrapper(*args, **kwargs) -> Verdict:
        verdict = check(*args, **kwargs)
        if any("NotImplementedError" in line for line in verdict.lines[1:]):
            note = (
                "  not written yet: replace `raise NotImplementedError(...)` with your code, then run this cell again"
            )
            verdict = Verdict(ok=False, first_error="not written", lines=(verdict.lines[0], note))
        return fit_to_page(verdict)

    return wrapper


def read_pair(result, where: str):
    """The learner's ``(output, weights)``, or a problem."""
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        found = f"a {type(result).__name__}" + (
            f" of length {len(result)}" if isinstance(result, (tuple, list)) else ""
        )
        return None, f"{where}: return a pair (output, weights), found {found}"
    return result, None


def read_returned(title: str, where: str, result, problem, originals: dict, passed: dict):
    """The learner's ``(output, weights)`` from ``run_learner``'s ``result, problem``, and ``None``; or
    ``None`` and the verdict that ends the check: what raised, a result that is not a pair, or inputs
    changed in place (``originals``: untouched copies of ``passed``, the tensors the learner was given)."""
    result, problem = (None, f"for {where}, {problem}") if problem else read_pair(result, f"for {where}")
    if problem:
        return None, malformed(title, problem)
    changed = changed_inputs(originals, passed)
    if changed:
        return None, wrong(title, "inputs", f"for {where}: {changed}")
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


def changed_inputs(originals: dict, passed: dict) -> str | None:
    """The inputs (by name) that the learner's code changed in place, as a sentence; None if none.

    ``originals`` are untouched copies of ``passed``, the tensors given to the learner's code."""
    changed = [
        name
        for name, tensor in passed.items()
        if isinstance(tensor, torch.Tensor) and not torch.equal(tensor, originals[name])
    ]
    if not changed:
        return None
    names, first = " and ".join(changed), changed[0]
    return (
        f"your code changed its input {names} in place (an in-place operation such as "
        f"{first} /= ..., masked_fill_ or +=): compute a new tensor instead ({first} = {first} / ...)"
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


def scale_sentence(c: float, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> str:
    """What the fitted scale ``c`` was, named when it is a usual slip, against 1/√Dh."""
    dh, s_len, dv, t_len = q.shape[-1], k.shape[-2], v.shape[-1], q.shape[-2]
    named = {
        "1 (no scale)": 1.0,
        f"1/Dh = 1/{dh}": 1.0 / dh,
        f"1/√S = 1/√{s_len} (S = the number of keys)": s_len**-0.5,
        f"1/√Dv = 1/√{dv} (the values' width)": dv**-0.5,
        f"1/√T = 1/√{t_len} (the number of queries)": t_len**-0.5,
        f"√Dh = √{dh}": dh**0.5,
    }
    for axis, size in enumerate(q.shape[:-2]):  # a size read from the wrong axis, q.size(1) for Dh
        named.setdefault(f"1/√{size} (q.shape[{axis}], not q.shape[-1])", size**-0.5)
    expected = f"1/√Dh = 1/√{dh} = {dh**-0.5:.3f} (Dh = q.shape[-1])"
    for name, value in named.items():
        if math.isclose(c, value, rel_tol=SCALE_RTOL):
            return f"the scores are multiplied by {name} = {value:.3f}; expected {expected}"
    return f"the scores are multiplied by {c:.3f} (read from your weights); expected {expected}"


def diagnose_weights(weights: torch.Tensor, q, k, v, mask) -> str | None:
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
            return (
                "the blocked weights are -inf: the mask was applied after the softmax; set blocked "
                "scores to -inf before it, so that their weights are 0"
            )
        return "the weights hold NaN or infinity: is a whole row blocked, or -inf added outside the mask?"
    rows = weights.sum(-1)
    if bool((weights <= 0).all()) and torch.allclose(weights.exp().sum(-1), torch.ones_like(rows)):
        return "these are log-weights (log_softmax): the weights are softmax(scores), positive"
    if bool((weights < -SUM_ATOL).any()):
        return (
            f"some weights are negative (smallest {float(weights.min()):.3f}): softmax the scaled "
            "scores, which makes every weight positive"
        )
    blocked = weights.masked_select(~visible)
    if blocked.numel() and float(weights.masked_select(visible).abs().max()) <= SUM_ATOL:
        return (
            "the mask is inverted: your weights are 0 exactly where the mask is True; True means "
            "*may attend*, so block where it is False (~mask)"
        )
    if blocked.numel() and float(blocked.abs().max()) > SUM_ATOL:
        return (
            f"blocked keys get weight (up to {float(blocked.abs().max()):.3f}): set their scores to -inf "
            "before the softmax (a score of 0 still gets weight e^0)"
        )
    if not torch.allclose(rows, torch.ones_like(rows), atol=SUM_ATOL):
        for axis in range(weights.dim() - 2, -1, -1):  # the queries' axis first, then batch or heads
            sums = weights.sum(axis)
            if weights.shape[axis] > 1 and torch.allclose(sums, torch.ones_like(sums), atol=SUM_ATOL):
                what = "the queries" if axis == weights.dim() - 2 else "a batch or head axis"
                return (
                    f"the weights sum to 1 over {what} (dim {axis - weights.dim()} of "
                    f"{weights.dim()}): softmax over the keys, dim=-1"
                )
        low, high = float(rows.min()), float(rows.max())
        if mask is not None and high <= 1 + SUM_ATOL:
            return (
                f"each query's weights sum to {low:.3f} … {high:.3f}, not 1: the mask was applied after "
                "the softmax; set blocked scores to -inf before it"
            )
        if math.isclose(low, high, rel_tol=1e-9):
            return (
                f"every query's weights sum to {low:.3f}, not 1: a factor applied after the softmax? "
                "Scale the scores before it"
            )
        return f"each query's weights must sum to 1, found sums from {low:.3f} to {high:.3f}"
    c = infer_scale(weights, q @ k.transpose(-2, -1), visible)
    if c is not None and not math.isclose(c, q.shape[-1] ** -0.5, rel_tol=SCALE_RTOL):
        return scale_sentence(c, q, k, v)
    return None
