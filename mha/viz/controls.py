"""The controls of an explorer: their validation, the grid of every combination of values, and the
words the caption and the default alt text use for them (no figures, no widgets).

A control is a name and a list of allowed values: numbers (a slider) or strings (a dropdown).
:func:`mha.viz.widgets.explorer` precomputes one frame per combination, in :func:`grid` order.
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


def check_controls(controls, *, title: str = "explorer") -> dict[str, list]:
    """Validate ``controls`` (name -> list of allowed values) and return a plain dict of lists.

    Each list is non-empty, holds only numbers (shown as a slider) or only strings (shown as a
    dropdown), has no repeated value and no NaN/infinity. Names must be Python identifiers,
    because the values are passed to ``render(**values)``.
    """
    if not isinstance(controls, Mapping):
        raise TypeError(
            f"explorer {title!r}: controls must be a dict name -> list of values, found {type(controls).__name__}"
        )
    if not controls:
        raise ValueError(
            f"explorer {title!r}: controls is empty; give at least one control, e.g. {{'num_heads': [1, 2, 4]}}"
        )
    checked = {}
    for name, values in controls.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(
                f"explorer {title!r}: control name {name!r} must be a Python identifier "
                "(it is passed to render as a keyword argument)"
            )
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
            raise TypeError(
                f"explorer {title!r}: control {name!r} must be a list of values, found {type(values).__name__}"
            )
        values = list(values)
        if not values:
            raise ValueError(f"explorer {title!r}: control {name!r} has no values")
        if all(is_number(v) for v in values):
            bad = [v for v in values if not math.isfinite(float(v))]
            if bad:
                raise ValueError(f"explorer {title!r}: control {name!r} has non-finite values {bad}")
        elif not all(isinstance(v, str) for v in values):
            kinds = sorted({type(v).__name__ for v in values})
            raise TypeError(
                f"explorer {title!r}: control {name!r} must hold only numbers (a slider) "
                f"or only strings (a dropdown), found {', '.join(kinds)}"
            )
        labels = [format_value(v) for v in values]
        repeated = sorted({label for label in labels if labels.count(label) > 1})
        if repeated:
            raise ValueError(f"explorer {title!r}: control {name!r} repeats the value(s) {repeated}")
        checked[name] = values
    return checked


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


def grid_description(controls) -> str:
    """The sentence the caption uses to state the grid, e.g. ``Precomputed for 12 values ...``."""
    controls = check_controls(controls)
    count = math.prod(len(v) for v in controls.values())
    parts = [
        f"{name} \N{ELEMENT OF} {{{', '.join(format_value(v) for v in values)}}}" for name, values in controls.items()
    ]
    noun = "value" if count == 1 else "values"
    if len(controls) > 1:
        sizes = " \N{MULTIPLICATION SIGN} ".join(str(len(v)) for v in controls.values())
        return f"Precomputed for {count} combinations of values ({sizes}): {'; '.join(parts)}."
    return f"Precomputed for {count} {noun}: {parts[0]}."


def default_alt(title: str, values: Mapping) -> str:
    """Alt text used when ``explorer`` gets no ``alt``: the title followed by the values."""
    settings = ", ".join(f"{name} = {format_value(v)}" for name, v in values.items())
    return f"{title} ({settings})"
