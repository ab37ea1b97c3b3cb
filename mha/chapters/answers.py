"""What every exercise checker returns, and how it reads a learner's answer without a traceback.

A checker (``single_head.check_split``, ``merge_exercises.check_merge_costs``, ...) takes the
reader's answer and returns an :class:`AnswerCheck`: a report that prints as a few lines (which
part is right, which is wrong, and a hint for the usual slip), with ``ok`` for code. Malformed
answers (a string, a NaN, the wrong number of values) get a message in the report, never an
exception: :func:`read_numbers` turns them into that message.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class AnswerCheck:
    """The verdict of an exercise checker.

    Attributes:
        ok: True when every part given is right.
        first_error: the name of the first wrong or unreadable part, or None.
        lines: the report, one line per part (``repr`` prints them).
    """

    ok: bool
    first_error: str | None
    lines: tuple

    def __repr__(self) -> str:
        return "\n".join(self.lines)


class Report:
    """Collects the lines of an :class:`AnswerCheck`, part by part."""

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

    def done(self) -> AnswerCheck:
        if self.first_error is None and any(": correct" in line for line in self.lines):
            self.lines.append("all parts given are correct")
        elif self.first_error is None:
            self.first_error = "answer"
            self.lines.append("nothing to check: give at least one part of the answer")
        else:
            self.lines.append(f"first part to fix: {self.first_error}")
        return AnswerCheck(ok=self.first_error is None, first_error=self.first_error, lines=tuple(self.lines))


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
