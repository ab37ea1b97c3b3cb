"""The controls of an explorer: their validation, the grid of every combination of values, and the
words the caption and the default alt text use for them (no figures, no widgets).

A control is a name and either a plain list of allowed values (numbers: a slider; strings: a
dropdown) or one of the specs below, which give the control a *live form* for a running kernel
and a *grid* for the static HTML book. The name is ``render``'s keyword argument; a spec's
``label`` is what the reader sees, in words with the symbol and unit (``"number of heads h"``,
``"head size dₖ"``, ``"context length (tokens)"``; default: the name). Numbers grow to the right.

======================================  ===================================  ==========================
spec                                    live form (a running kernel)         grid (the static book)
======================================  ===================================  ==========================
``[1, 2, 4]``, ``["none", "causal"]``   a slider over the values / dropdown  the values
``Choice([1, 2, 4], value=2)``          the same, opening on ``value``       the values
``FloatRange(0.25, 8, grid=[...])``     a continuous slider (``log=True``)   ``grid``
``IntRange(1, 64, grid=[...])``         an integer slider (``log=True``)     ``grid``
``Text("the cat sat", grid=[...])``     a text box (applied on Enter)        ``grid`` (a dropdown)
======================================  ===================================  ==========================

:func:`mha.viz.widgets.explorer` precomputes one frame per combination of grid values, in
:func:`grid` order, for the book; a live kernel computes whatever value the reader picks.
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Mapping, Sequence


def is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def format_value(value) -> str:
    """How a control value is shown to the reader: ``4``, ``0.5``, ``1e-05``, ``causal``."""
    if is_number(value):
        if isinstance(value, numbers.Integral):
            return str(int(value))
        return f"{float(value):g}"
    return str(value)


def _check_values(values, what: str) -> list:
    """A non-empty list of only numbers or only strings, finite, with no repeated label."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise TypeError(f"{what} must be a list of values, found {type(values).__name__}")
    values = list(values)
    if not values:
        raise ValueError(f"{what} has no values")
    if all(is_number(v) for v in values):
        bad = [v for v in values if not math.isfinite(float(v))]
        if bad:
            raise ValueError(f"{what} has non-finite values {bad}")
    elif not all(isinstance(v, str) for v in values):
        kinds = sorted({type(v).__name__ for v in values})
        raise TypeError(
            f"{what} must hold only numbers (a slider) or only strings (a dropdown), found {', '.join(kinds)}"
        )
    labels = [format_value(v) for v in values]
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        raise ValueError(f"{what} repeats the value(s) {repeated}")
    return values


class Control:
    """Base class of the control specs: ``grid`` (the book's values) and ``value`` (where it opens)."""

    kind = "choice"

    def __init__(self, grid, value=None, label=None, names=None):
        if label is not None and (not isinstance(label, str) or not label.strip()):
            raise TypeError(f"label must be a non-empty string (what the reader sees) or None, found {label!r}")
        self.label = label
        self.grid = _check_values(grid, "the grid")
        self.names = dict(names or {})
        unknown = [v for v in self.names if v not in self.grid]
        if unknown:
            raise ValueError(f"names gives a name to {unknown}, which the grid {self.grid} does not hold")
        self.value = self.grid[0] if value is None else self.check(value)

    def show(self, value) -> str:
        """How ``value`` reads on the control: its name in ``names``, else :func:`format_value`."""
        return self.names.get(value, format_value(value)) if isinstance(value, (str, numbers.Number)) else str(value)

    def check(self, value):
        """``value`` if the live control can take it, else a ValueError or TypeError saying why."""
        if isinstance(value, bool) or value not in self.grid:
            raise ValueError(f"{format_value(value)!r} is not one of {[format_value(v) for v in self.grid]}")
        return self.grid[self.grid.index(value)]

    def grid_start(self, value) -> int:
        """Where the book's control opens for a live ``value``: its place in the grid, or the nearest."""
        if value in self.grid:
            return self.grid.index(value)
        if is_number(value) and is_number(self.grid[0]):
            return min(range(len(self.grid)), key=lambda k: abs(self.grid[k] - value))
        return 0

    def live_words(self, name: str) -> str:
        return f"{name}: one of the values above"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.grid!r}, value={self.value!r})"


def label_of(name: str, spec) -> str:
    """What the reader sees for control ``name``: its spec's ``label``, else the name."""
    return getattr(spec, "label", None) or name


class Choice(Control):
    """A discrete control: numbers give a slider over the values, strings a dropdown, live and static.

    ``Choice([1, 2, 4, 8], value=4)`` is the plain list ``[1, 2, 4, 8]`` opening on 4;
    ``label="number of heads h"`` names it for the reader, and ``names={"1/d_k": "1/dₖ"}`` shows an
    option (what ``render`` gets, easy to type) as it reads in the text.
    """

    def __init__(self, options, *, value=None, label=None, names=None):
        super().__init__(options, value, label, names)


class FloatRange(Control):
    """A continuous quantity: a slider from ``lo`` to ``hi`` live, the values of ``grid`` in the book.

    Args:
        lo, hi: the live slider's ends (``lo < hi``); every grid value lies between them.
        step: the live slider's resolution (default: 1/100 of the range); values are rounded to it.
            With ``log=True`` the slider moves in equal ratios and values keep 3 significant digits.
        grid: the values the static book precomputes (at least one).
        value: where the explorer opens (default: the first grid value).
        label: what the reader sees (default: the control's name).
    """

    kind = "float"

    def __init__(self, lo, hi, step=None, *, grid, value=None, log=False, label=None):
        for name, x in (("lo", lo), ("hi", hi)):
            if not is_number(x) or not math.isfinite(x):
                raise TypeError(f"{name} must be a finite number, found {x!r}")
        if not lo < hi:
            raise ValueError(f"lo ({lo}) must be less than hi ({hi})")
        if log and lo <= 0:
            raise ValueError(f"a log range needs lo > 0, found lo = {lo}")
        if step is not None and not (is_number(step) and step > 0):
            raise ValueError(f"step must be a positive number, found {step!r}")
        self.lo, self.hi, self.log = lo, hi, bool(log)
        self.step = step if step is not None else (hi - lo) / 100
        grid = _check_values(grid, "the grid")
        for v in grid:
            self._in_range(v, "grid value")
        super().__init__(grid, value, label)

    def _in_range(self, value, what="value"):
        if not is_number(value):
            raise TypeError(f"{what} must be a number, found {type(value).__name__}")
        if not self.lo <= value <= self.hi:
            raise ValueError(
                f"{what} {format_value(value)} is outside [{format_value(self.lo)}, {format_value(self.hi)}]"
            )
        return value

    def check(self, value):
        return self._in_range(value)

    def clean(self, value):
        """A live slider position as the value ``render`` gets: rounded, inside the range."""
        if self.log:
            value = float(f"{value:.3g}")
        else:
            decimals = max(0, -math.floor(math.log10(self.step)) + 1)
            value = round(self.lo + round((value - self.lo) / self.step) * self.step, decimals)
        return min(max(value, self.lo), self.hi)

    def live_words(self, name: str) -> str:
        return f"{name}: any value from {format_value(self.lo)} to {format_value(self.hi)}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.lo!r}, {self.hi!r}, {self.step!r}, grid={self.grid!r}, log={self.log})"


class IntRange(FloatRange):
    """An integer quantity (d_k, sequence length, batch, context): an integer slider live, ``grid`` in
    the book. ``log=True`` moves in equal ratios (for ranges such as 128 to 131072 tokens)."""

    kind = "int"

    def __init__(self, lo, hi, step=1, *, grid, value=None, log=False, label=None):
        for name, x in (("lo", lo), ("hi", hi), ("step", step)):
            if not isinstance(x, numbers.Integral) or isinstance(x, bool):
                raise TypeError(f"{name} must be an integer, found {x!r}")
        for v in grid if isinstance(grid, Sequence) and not isinstance(grid, str) else []:
            if not isinstance(v, numbers.Integral) or isinstance(v, bool):
                raise TypeError(f"grid value {v!r} must be an integer")
        super().__init__(lo, hi, step, grid=grid, value=value, log=log, label=label)

    def check(self, value):
        if not isinstance(value, numbers.Integral) or isinstance(value, bool):
            raise TypeError(f"value must be an integer, found {value!r}")
        return self._in_range(value)

    def clean(self, value):
        if self.log:
            value = float(f"{value:.3g}")
        value = self.lo + round((value - self.lo) / self.step) * self.step
        return int(min(max(value, self.lo), self.hi))


class Text(Control):
    """Text the reader types (tokens, a sentence): a text box live, the strings of ``grid`` in the book.

    Args:
        default: the text it opens with (``value``).
        grid: the texts the static book offers in a dropdown (default: ``[default]``).
        placeholder: shown in an empty box.
        label: what the reader sees (default: the control's name).
    """

    kind = "text"

    def __init__(self, default, *, grid=None, placeholder="", label=None):
        if not isinstance(default, str):
            raise TypeError(f"default must be a string, found {type(default).__name__}")
        grid = [default] if grid is None else grid
        if not all(isinstance(v, str) for v in (grid if isinstance(grid, Sequence) else [])):
            raise TypeError("the grid of a Text control holds strings")
        self.placeholder = placeholder
        super().__init__(grid, default, label)

    def check(self, value):
        if not isinstance(value, str):
            raise TypeError(f"value must be a string, found {type(value).__name__}")
        return value

    def live_words(self, name: str) -> str:
        return f"{name}: type your own"


def as_control(name: str, spec, *, title: str = "explorer") -> Control:
    """The spec of control ``name``: a :class:`Control` as given, a plain list as a :class:`Choice`."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(
            f"explorer {title!r}: control name {name!r} must be a Python identifier "
            "(it is passed to render as a keyword argument)"
        )
    if isinstance(spec, Control):
        return spec
    return Choice(_check_values(spec, f"explorer {title!r}: control {name!r}"))


def check_specs(controls, *, title: str = "explorer", initial: Mapping | None = None):
    """``controls`` (name -> list or spec) as ``({name: Control}, {name: opening value})``.

    Each control opens on its own ``value`` (a plain list: its first value) unless ``initial``
    names it; an initial value must be one the live control can take."""
    if not isinstance(controls, Mapping):
        raise TypeError(
            f"explorer {title!r}: controls must be a dict name -> list of values, found {type(controls).__name__}"
        )
    if not controls:
        raise ValueError(
            f"explorer {title!r}: controls is empty; give at least one control, e.g. {{'num_heads': [1, 2, 4]}}"
        )
    specs = {name: as_control(name, spec, title=title) for name, spec in controls.items()}
    starts = {name: spec.value for name, spec in specs.items()}
    if initial is not None:
        if not isinstance(initial, Mapping):
            raise TypeError(f"explorer {title!r}: initial must be a dict name -> value, found {type(initial).__name__}")
        unknown = sorted(set(initial) - set(specs))
        if unknown:
            raise ValueError(f"explorer {title!r}: initial names no control {unknown}; the controls are {list(specs)}")
        for name, value in initial.items():
            try:
                starts[name] = specs[name].check(value)
            except (TypeError, ValueError) as error:
                raise type(error)(f"explorer {title!r}: initial value of {name!r}: {error}") from None
    return specs, starts


def check_controls(controls, *, title: str = "explorer") -> dict[str, list]:
    """Validate ``controls`` (name -> list of allowed values, or a spec) and return the book's grid of
    each as a plain dict of lists.

    Each list is non-empty, holds only numbers (shown as a slider) or only strings (shown as a
    dropdown), has no repeated value and no NaN/infinity. Names must be Python identifiers,
    because the values are passed to ``render(**values)``.
    """
    specs, _ = check_specs(controls, title=title)
    return {name: spec.grid for name, spec in specs.items()}


def frame_count(controls) -> int:
    """Number of combinations of control values, i.e. frames precomputed for the book."""
    return math.prod(len(values) for values in check_controls(controls).values())


def grid(controls) -> list[dict]:
    """Every combination of control values, in frame order (the last control varies fastest).

    >>> grid({"h": [1, 2], "mask": ["none", "causal"]})
    [{'h': 1, 'mask': 'none'}, {'h': 1, 'mask': 'causal'}, {'h': 2, 'mask': 'none'}, {'h': 2, 'mask': 'causal'}]
    """
    controls = check_controls(controls)
    names = list(controls)
    return [dict(zip(names, combo)) for combo in itertools.product(*controls.values())]


def grid_description(controls, labels: Mapping | None = None) -> str:
    """The sentence the caption uses to state the grid, e.g. ``Precomputed for 12 values ...``
    (each control by its name, or by its label in ``labels``)."""
    controls = check_controls(controls)
    labels = labels or {}
    count = math.prod(len(v) for v in controls.values())
    parts = [
        f"{labels.get(name, name)} \N{ELEMENT OF} {{{', '.join(format_value(v) for v in values)}}}"
        for name, values in controls.items()
    ]
    noun = "value" if count == 1 else "values"
    if len(controls) > 1:
        sizes = " \N{MULTIPLICATION SIGN} ".join(str(len(v)) for v in controls.values())
        return f"Precomputed for {count} combinations of values ({sizes}): {'; '.join(parts)}."
    return f"Precomputed for {count} {noun}: {parts[0]}."


def live_description(controls) -> str:
    """The sentence a live explorer shows under its figure: what it computes, and what the book holds."""
    specs, _ = check_specs(controls)
    labels = {name: label_of(name, spec) for name, spec in specs.items()}
    free = [spec.live_words(labels[name]) for name, spec in specs.items() if not isinstance(spec, Choice)]
    what = f" ({'; '.join(free)})" if free else ""
    book = grid_description({name: [spec.show(v) for v in spec.grid] for name, spec in specs.items()}, labels)
    book = book.replace("Precomputed for", "the static book precomputes", 1)
    return f"Computed live in this kernel at every change{what}; {book}"


def default_alt(title: str, values: Mapping, labels: Mapping | None = None) -> str:
    """Alt text used when ``explorer`` gets no ``alt``: the title followed by the values (each
    control by its label in ``labels``, else its name)."""
    labels = labels or {}
    settings = ", ".join(f"{labels.get(name, name)} = {format_value(v)}" for name, v in values.items())
    return f"{title} ({settings})"
