"""What an exercise checker returns, and how it reads a reader's answer.

A checker (``worked.check_row``, ``scaling.check_score_variance``, ``config_exercises.check_max_context``,
...) takes the reader's answer and returns a :class:`Verdict`: ``ok``, the first wrong step and
one line per step, with a hint for the usual slip. It never raises for a malformed answer (a
string, NaN, a list of the wrong length): it says what was expected instead, because a
traceback in the middle of an exercise teaches nothing.

Two ways to build one: a one-step checker returns :func:`right`, :func:`wrong` or
:func:`malformed`; a checker of several parts collects them in a :class:`Report`.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Verdict:
    """The answer of an exercise checker.

    Attributes:
        ok: True when every part given is right.
        first_error: the first wrong step (e.g. ``"weights"``), ``"input"`` for a malformed
            answer, or None.
        lines: the report, one line per step; ``repr`` prints them.
    """

    ok: bool
    first_error: str | None
    lines: tuple

    def __repr__(self) -> str:
        return "\n".join(self.lines)

    @property
    def text(self) -> str:
        return repr(self)


def malformed(title: str, problem: str) -> Verdict:
    """The verdict for an answer the checker cannot read."""
    return Verdict(ok=False, first_error="input", lines=(title, f"  cannot check this answer: {problem}"))


def right(title: str, detail: str = "correct") -> Verdict:
    return Verdict(ok=True, first_error=None, lines=(title, f"  {detail}"))


def wrong(title: str, step: str, hint: str) -> Verdict:
    return Verdict(ok=False, first_error=step, lines=(title, f"  {step}: wrong", f"  hint: {hint}"))


def read_number(name: str, value) -> tuple[float | None, str | None]:
    """The reader's answer as a float, or ``(None, what is wrong with it)``.

    Accepts ints, floats, NumPy scalars and one-element tensors; refuses strings, booleans,
    NaN, infinities and anything else with a sentence that names ``name``.
    """
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            return None, f"{name} must be one number, found a tensor of shape {tuple(value.shape)}"
        value = value.item()
    if isinstance(value, str):
        return None, f"{name} must be a number, found the string {value!r} (write it without quotes)"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None, f"{name} must be a number, found {type(value).__name__}"
    value = float(value)
    if not math.isfinite(value):
        return None, f"{name} must be a finite number, found {value}"
    return value, None


def read_row(name: str, values, length: int) -> tuple[torch.Tensor | None, str | None]:
    """The reader's list of ``length`` numbers as a float64 tensor, or ``(None, what is wrong)``."""
    if isinstance(values, str):
        return None, f"{name} must be a list of {length} numbers, found the string {values!r}"
    try:
        row = torch.as_tensor(values, dtype=torch.float64).detach().cpu()
    except (TypeError, ValueError, RuntimeError):
        return None, f"{name} must be a list of {length} numbers, found {type(values).__name__}"
    if tuple(row.shape) != (length,):
        return None, f"{name} must hold {length} numbers, found shape {tuple(row.shape)}"
    bad = [j + 1 for j in range(length) if not math.isfinite(float(row[j]))]
    if bad:
        return None, f"{name} must hold finite numbers; entries {bad} are NaN or infinite"
    return row, None


def matches(value: float, target: float, rel_tol: float, abs_tol: float = 0.0) -> bool:
    """``value`` equals ``target`` within ``rel_tol`` (relative) or ``abs_tol``."""
    return math.isclose(value, target, rel_tol=rel_tol, abs_tol=abs_tol)


class Report:
    """Collects the lines of an :class:`Verdict`, part by part."""

    def __init__(self, title: str):
        self.lines = [title]
        self.first_error: str | None = None

    def right(self, part: str, note: str = "correct") -> None:
        self.lines.append(f"  {part}: {note}")

    def wrong(self, part: str, what: str, hint: str) -> None:
        self.lines.append(f"  {part}: {what}")
        self.lines.append(f"  {'':{len(part)}s}  hint: {hint}")
        self.first_error = self.first_error or part

    def skipped(self, part: str) -> None:
        self.lines.append(f"  {part}: not given")

    def done(self) -> Verdict:
        if self.first_error is None and any(": correct" in line for line in self.lines):
            self.lines.append("all parts given are correct")
        elif self.first_error is None:
            self.first_error = "answer"
            self.lines.append("nothing to check: give at least one part of the answer")
        else:
            self.lines.append(f"first part to fix: {self.first_error}")
        return Verdict(ok=self.first_error is None, first_error=self.first_error, lines=tuple(self.lines))


def read_numbers(name: str, value, shape: tuple[int, ...]) -> tuple[torch.Tensor | None, str | None]:
    """``(tensor, None)`` with ``value`` as float64 of ``shape``, or ``(None, message)`` saying why not.

    Accepts a number (for ``shape == ()``), a list, a tuple, a numpy array or a tensor.
    """
    expected = "a number" if shape == () else f"{math.prod(shape)} numbers, shape {shape}"
    if isinstance(value, (str, bytes)) or isinstance(value, bool):
        return None, f"{name} must be {expected}, found {type(value).__name__} {value!r}"
    try:
        tensor = torch.as_tensor(value, dtype=torch.float64).detach().cpu()
    except (TypeError, ValueError, RuntimeError):
        return None, f"{name} must be {expected}, found {type(value).__name__} {value!r}"
    if tuple(tensor.shape) != tuple(shape):
        return None, f"{name} must be {expected}, found shape {tuple(tensor.shape)}"
    if not torch.isfinite(tensor).all():
        return None, f"{name} must be finite numbers, found NaN or infinity in {value!r}"
    return tensor, None


def read_int(name: str, value) -> tuple[int | None, str | None]:
    """``(int, None)`` for a whole number (``4`` or ``4.0``), else ``(None, message)``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None, f"{name} must be a whole number, found {type(value).__name__} {value!r}"
    if not math.isfinite(value) or value != int(value):
        return None, f"{name} must be a whole number, found {value!r}"
    return int(value), None


def close(a: torch.Tensor, b, tol: float) -> bool:
    """True when every entry of ``a`` is within ``tol`` of ``b``."""
    return bool(torch.all((a - torch.as_tensor(b, dtype=torch.float64)).abs() <= tol))
