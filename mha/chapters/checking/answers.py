"""What an exercise checker returns, and how it reads a reader's answer.

A checker (``worked.check_row``, ``scaling.check_score_variance``, ``config_exercises.check_max_context``,
...) takes the reader's answer and returns a :class:`Verdict`: ``ok``, the first wrong step and
one line per step, with a hint for the usual slip. It never raises for a malformed answer (a
string, NaN, a list of the wrong length): it says what was expected instead, because a
traceback in the middle of an exercise teaches nothing.

Two ways to build one: a one-step checker returns :func:`right`, :func:`wrong` or
:func:`malformed`; a checker of several parts collects them in a :class:`Report`.

A numeric answer is judged at the precision the exercise states ("to 2 decimals"), by one rule
for every checker: :func:`compare_number`. An answer right to one digit fewer, or one unit off in
the last digit, is "close" (:func:`close_verdict`, :meth:`Report.close`): the checker says what
precision to give and does not blame the method.
"""

from __future__ import annotations

import math
import numbers
import textwrap
from dataclasses import dataclass
from typing import NamedTuple

import torch

from . import verdict_i18n
from .verdict_i18n import Message, say

#: The width of a verdict's lines: the book's code column shows 75 characters at 1280 px,
#: so a verdict never scrolls sideways (a CJK character counts two).
WIDTH = 74


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
    #: The lines before they were wrapped to the page's width (empty: ``lines`` are not wrapped);
    #: a translation starts from these and wraps its own lines.
    source: tuple = ()

    def render(self, language: str = "en") -> str:
        """The verdict in ``language`` (``"en"`` or ``"zh_CN"``): the same checks, the same numbers."""
        if verdict_i18n.normalise(language) == "en":
            return "\n".join(self.lines)
        return verdict_i18n.render(self.source or self.lines, language, WIDTH)

    def __repr__(self) -> str:
        return self.render(verdict_i18n.language())

    @property
    def text(self) -> str:
        return repr(self)

    def _repr_mimebundle_(self, include=None, exclude=None):
        """What Jupyter shows (the verdict in the current language), with every edition's text in the
        output's metadata: the book's Chinese edition shows the stored verdict in Chinese from it."""
        editions = {language: self.render(language) for language in verdict_i18n.LANGUAGES}
        return {"text/plain": repr(self)}, {"mha": {"verdict": editions}}


def fit_to_page(verdict: Verdict) -> Verdict:
    """``verdict`` with each line wrapped at :data:`WIDTH` (continuation lines indented two more), so
    that it fits the book's code column; a translation starts from the unwrapped lines (``source``)."""
    lines = []
    for line in verdict.lines:
        indent = " " * (len(line) - len(line.lstrip()) + 2)
        lines += textwrap.wrap(line, WIDTH, subsequent_indent=indent, break_on_hyphens=False) or [line]
    return Verdict(verdict.ok, verdict.first_error, tuple(lines), source=verdict.source or verdict.lines)


def malformed(title: Message, problem: Message) -> Verdict:
    """The verdict for an answer the checker cannot read."""
    return Verdict(
        ok=False, first_error="input", lines=(title, say("  cannot check this answer: {problem}", problem=problem))
    )


def right(title: Message, detail: Message | None = None) -> Verdict:
    return Verdict(ok=True, first_error=None, lines=(title, say("  {detail}", detail=detail or say("correct"))))


def wrong(title: Message, step: str, hint: Message) -> Verdict:
    lines = (title, say("  {step}: wrong", step=step), say("  hint: {hint}", hint=hint))
    return Verdict(ok=False, first_error=step, lines=lines)


def read_number(name: str, value) -> tuple[float | None, str | None]:
    """The reader's answer as a float, or ``(None, what is wrong with it)``.

    Accepts ints, floats, NumPy scalars and one-element tensors; refuses strings, booleans,
    NaN, infinities and anything else with a sentence that names ``name``.
    """
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            return None, say(
                "{name} must be one number, found a tensor of shape {shape}", name=name, shape=tuple(value.shape)
            )
        value = value.item()
    if isinstance(value, str):
        return None, say(
            "{name} must be a number, found the string {value!r} (write it without quotes)", name=name, value=value
        )
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None, say("{name} must be a number, found {type}", name=name, type=type(value).__name__)
    value = float(value)
    if not math.isfinite(value):
        return None, say("{name} must be a finite number, found {value}", name=name, value=value)
    return value, None


def read_row(name: str, values, length: int) -> tuple[torch.Tensor | None, str | None]:
    """The reader's list of ``length`` numbers as a float64 tensor, or ``(None, what is wrong)``."""
    if isinstance(values, str):
        return None, say(
            "{name} must be a list of {length} numbers, found the string {value!r}",
            name=name,
            length=length,
            value=values,
        )
    try:
        row = torch.as_tensor(values, dtype=torch.float64).detach().cpu()
    except (TypeError, ValueError, RuntimeError):
        return None, say(
            "{name} must be a list of {length} numbers, found {type}",
            name=name,
            length=length,
            type=type(values).__name__,
        )
    if tuple(row.shape) != (length,):
        return None, say(
            "{name} must hold {length} numbers, found shape {shape}", name=name, length=length, shape=tuple(row.shape)
        )
    bad = [j + 1 for j in range(length) if not math.isfinite(float(row[j]))]
    if bad:
        return None, say(
            "{name} must hold finite numbers; entries {entries} are NaN or infinite", name=name, entries=bad
        )
    return row, None


def matches(value: float, target: float, rel_tol: float, abs_tol: float = 0.0) -> bool:
    """``value`` equals ``target`` within ``rel_tol`` (relative) or ``abs_tol``."""
    return math.isclose(value, target, rel_tol=rel_tol, abs_tol=abs_tol)


class Report:
    """Collects the lines of an :class:`Verdict`, part by part."""

    def __init__(self, title: str):
        self.lines = [title]
        self.first_error: str | None = None

    def right(self, part: str, note: Message | None = None) -> None:
        self.lines.append(say("  {part}: {note}", part=part, note=note or say("correct")))

    def wrong(self, part: str, what: Message, hint: Message) -> None:
        self.lines.append(say("  {part}: {what}", part=part, what=what))
        self.lines.append(say("hint: {hint}", hint=hint).indented(len(part) + 4))
        self.first_error = self.first_error or part

    def close(self, part: str, message: Message) -> None:
        """A part right to fewer digits than asked, or one unit off: no hint about the method."""
        self.lines.append(say("  {part}: {message}", part=part, message=message))
        self.first_error = self.first_error or part

    def skipped(self, part: str) -> None:
        self.lines.append(say("  {part}: not given", part=part))

    def done(self) -> Verdict:
        if self.first_error is None and any(": correct" in line for line in self.lines):
            self.lines.append(say("all parts given are correct"))
        elif self.first_error is None:
            self.first_error = "answer"
            self.lines.append(say("nothing to check: give at least one part of the answer"))
        else:
            self.lines.append(say("first part to fix: {part}", part=self.first_error))
        return Verdict(ok=self.first_error is None, first_error=self.first_error, lines=tuple(self.lines))


def read_numbers(name: str, value, shape: tuple[int, ...]) -> tuple[torch.Tensor | None, str | None]:
    """``(tensor, None)`` with ``value`` as float64 of ``shape``, or ``(None, message)`` saying why not.

    Accepts a number (for ``shape == ()``), a list, a tuple, a numpy array or a tensor.
    """
    expected = (
        say("a number") if shape == () else say("{count} numbers, shape {shape}", count=math.prod(shape), shape=shape)
    )
    found = say(
        "{name} must be {expected}, found {type} {value!r}",
        name=name,
        expected=expected,
        type=type(value).__name__,
        value=value,
    )
    if isinstance(value, (str, bytes)) or isinstance(value, bool):
        return None, found
    try:
        tensor = torch.as_tensor(value, dtype=torch.float64).detach().cpu()
    except (TypeError, ValueError, RuntimeError):
        return None, found
    if tuple(tensor.shape) != tuple(shape):
        return None, say(
            "{name} must be {expected}, found shape {shape}", name=name, expected=expected, shape=tuple(tensor.shape)
        )
    if not torch.isfinite(tensor).all():
        return None, say("{name} must be finite numbers, found NaN or infinity in {value!r}", name=name, value=value)
    return tensor, None


def read_int(name: str, value) -> tuple[int | None, str | None]:
    """``(int, None)`` for a whole number (``4`` or ``4.0``), else ``(None, message)``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None, say(
            "{name} must be a whole number, found {type} {value!r}", name=name, type=type(value).__name__, value=value
        )
    if not math.isfinite(value) or value != int(value):
        return None, say("{name} must be a whole number, found {value!r}", name=name, value=value)
    return int(value), None


def close(a: torch.Tensor, b, tol: float) -> bool:
    """True when every entry of ``a`` is within ``tol`` of ``b``."""
    return bool(torch.all((a - torch.as_tensor(b, dtype=torch.float64)).abs() <= tol))


# --------------------------------------------------------------------------------------------
# Precision: an exercise states it ("to 2 decimals"), every numeric checker honours it
# --------------------------------------------------------------------------------------------


class Comparison(NamedTuple):
    """What :func:`compare_number` found: ``status`` is ``"right"``, ``"close"`` or ``"wrong"``;
    ``message`` is the sentence for the reader (empty for ``"wrong"``: the checker gives its hint)."""

    status: str
    message: Message

    @property
    def right(self) -> bool:
        return self.status == "right"


def _precision(decimals, sig_figs) -> tuple[str, int]:
    if (decimals is None) == (sig_figs is None):
        raise ValueError(
            f"give exactly one of decimals= and sig_figs=, found decimals={decimals!r}, sig_figs={sig_figs!r}"
        )
    name, value, least = ("decimals", decimals, 0) if sig_figs is None else ("sig_figs", sig_figs, 1)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be a whole number, found {type(value).__name__} {value!r}")
    if value < least:
        raise ValueError(f"{name} must be at least {least}, found {value}")
    return name, int(value)


def _finite(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, found {type(value).__name__} {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, found {value!r}")
    return float(value)


def precision_unit(expected: float, *, decimals: int | None = None, sig_figs: int | None = None) -> float:
    """One unit in the last asked digit: ``10**-decimals``, or for ``sig_figs`` the unit of the
    ``sig_figs``-th significant digit of ``expected``."""
    name, digits = _precision(decimals, sig_figs)
    expected = _finite("expected", expected)
    if name == "decimals":
        return 10.0**-digits
    if expected == 0:
        raise ValueError("expected must not be 0 with sig_figs= (0 has no significant figures): use decimals=")
    return 10.0 ** (math.floor(math.log10(abs(expected))) - digits + 1)


def precision_words(*, decimals: int | None = None, sig_figs: int | None = None) -> str:
    """``"2 decimals"``, ``"1 decimal"``, ``"2 significant figures"``..."""
    name, digits = _precision(decimals, sig_figs)
    if name == "decimals" and digits == 0:
        return say("0 decimals")
    if name == "decimals":
        return say("{digits} decimal", digits=digits) if digits == 1 else say("{digits} decimals", digits=digits)
    return (
        say("{digits} significant figure", digits=digits)
        if digits == 1
        else say("{digits} significant figures", digits=digits)
    )


def _within(found: float, expected: float, unit: float, units: float) -> bool:
    # a hair of slack so that a value on the boundary (…5) is accepted whichever way it was rounded
    return abs(found - expected) <= units * unit * (1 + 1e-9) + 1e-12 * max(1.0, abs(expected))


def _has_digits(found: float, unit: float) -> bool:
    """``found`` is written with no digit below ``unit`` (e.g. 0.8 for unit 0.1)."""
    steps = found / unit
    return abs(steps - round(steps)) <= 1e-6


def compare_number(found, expected, *, decimals: int | None = None, sig_figs: int | None = None) -> Comparison:
    """Whether ``found`` is ``expected`` to the stated precision: the shared rule of the checkers.

    Give exactly one of ``decimals`` (digits after the point) or ``sig_figs`` (significant
    figures). With ``u`` one unit in the last asked digit:

    - ``"right"``: ``|found - expected| <= u/2``. This accepts the exact value rounded to the
      precision (either rounding of a value on the boundary, such as 0.125 to 2 decimals) and
      answers given with more digits that are within half a unit.
    - ``"close"``: right to one digit fewer than asked (``found`` has no digit below ``10u`` and
      ``|found - expected| <= 10u/2``), or off by at most one unit in the last asked digit
      (``|found - expected| <= 1.5u``, what rounding too early gives). The message says which,
      and never prints the expected value.
    - ``"wrong"``: anything else; the checker gives its hint about the method.

    Raises:
        TypeError: ``found``, ``expected``, ``decimals`` or ``sig_figs`` has the wrong type.
        ValueError: a NaN or infinite number, both or neither precision given, a negative
            precision, or ``sig_figs`` with ``expected == 0``.
    """
    name, digits = _precision(decimals, sig_figs)
    found, expected = _finite("found", found), _finite("expected", expected)
    unit = precision_unit(expected, decimals=decimals, sig_figs=sig_figs)
    words = precision_words(decimals=decimals, sig_figs=sig_figs)
    if _within(found, expected, unit, 0.5):
        return Comparison("right", say("correct"))
    fewer = name == "decimals" or digits > 1  # one digit fewer still says something
    if fewer and _has_digits(found, 10 * unit) and _within(found, expected, 10 * unit, 0.5):
        return Comparison(
            "close", say("close: give {words} (found {found:g}, the answer to {words} is …?)", words=words, found=found)
        )
    if _within(found, expected, unit, 1.5):
        return Comparison(
            "close",
            say(
                "close: the last digit is off by one (found {found:g}); keep every digit while you compute "
                "and round to {words} only at the end",
                found=found,
                words=words,
            ),
        )
    return Comparison("wrong", say(""))


def named_slip(found, expected, slips, *, decimals: int | None = None, sig_figs: int | None = None) -> str | None:
    """The hint of the first slip that ``found`` is, to the stated precision (as :func:`compare_number`).

    ``slips`` is a list of ``(the value a slip gives, its hint)``, most telling first. A slip is named
    only when the precision tells it apart from ``expected``: an answer that is both the slip and the
    right value to that precision is the right value.

    Returns:
        The hint of the first slip that matches, or None.
    """
    for slip, hint in slips:
        apart = compare_number(slip, expected, decimals=decimals, sig_figs=sig_figs).status == "wrong"
        if apart and compare_number(found, slip, decimals=decimals, sig_figs=sig_figs).right:
            return hint
    return None


def close_verdict(title: Message, step: str, message: Message) -> Verdict:
    """The verdict for an answer right to fewer digits than asked, or one unit off: not a wrong method."""
    return Verdict(ok=False, first_error=step, lines=(title, say("  {step}: {message}", step=step, message=message)))
