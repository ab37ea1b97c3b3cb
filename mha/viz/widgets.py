"""Interactive explorers that work both in a live notebook and in the static HTML book.

One call defines an explorer: its controls and a ``render`` function that draws a figure.

    >>> from mha.viz.widgets import explorer                                 # doctest: +SKIP
    >>> explorer(render, {"num_heads": [1, 2, 4, 8], "mask": ["none", "causal"]},
    ...          title="Heads and masks")                                # doctest: +SKIP

The returned :class:`Explorer` displays as ONE output with two representations:

* ``application/vnd.jupyter.widget-view+json``: a live ipywidgets UI (a ``SelectionSlider`` per
  numeric control, a ``Dropdown`` per string control, an ``Output`` showing ``render(**values)``,
  recomputed on every change). JupyterLab ranks it above HTML, so a notebook shows this one.
* ``text/html``: a self-contained component (native ``<input type=range>`` / ``<select>``, an
  ``<output>`` with the current value, about 30 lines of inline JavaScript, no third-party
  script) that swaps frames precomputed for every combination of control values. The book
  shows this one, because ``_config.yml`` sets
  ``sphinx: config: nb_mime_priority_overrides: [["html", "text/html", 0]]``.

Every frame is rendered when :func:`explorer` is called, so a render error, a non-Figure
result, too many frames or a page too heavy raises in the notebook cell itself. The cell
must start with ``# NBVAL_IGNORE_OUTPUT``: the values behind each frame are checked by the
unit tests of the render function's data, not by comparing images.

Only this module of the package imports ipywidgets; ipywidgets, matplotlib and Pillow are
imported inside functions, so ``import mha.viz.widgets`` stays light.
"""

from __future__ import annotations

import base64
import html
import json
import math
import re
import traceback
from collections.abc import Callable, Mapping, Sequence

from .controls import (
    check_controls,
    default_alt,
    format_value,
    frame_count,
    grid,
    grid_description,
    is_number,
)
from .frames import FRAME_COLORS, FRAME_FORMAT, encode_image, figure_image, figure_png, frame_format  # noqa: F401

__all__ = [  # the controls' helpers stay importable from here, where explorers are made
    "Explorer",
    "FRAME_COLORS",
    "FRAME_DPI",
    "FRAME_FORMAT",
    "MAX_BYTES",
    "MAX_FRAMES",
    "MIN_FRAME_DPI",
    "check_controls",
    "default_alt",
    "explorer",
    "figure_png",
    "format_value",
    "frame_count",
    "frame_format",
    "grid",
    "grid_description",
]

#: At most this many combinations of control values per explorer (each one is a stored frame).
MAX_FRAMES = 64
#: At most this many bytes of HTML per explorer in the page (frames included, base64-encoded).
MAX_BYTES = 400_000
#: Frames start at this resolution and are re-rendered at a lower one when over MAX_BYTES.
FRAME_DPI = 80
#: Lowest resolution tried before giving up with a ValueError.
MIN_FRAME_DPI = 40

_id_counts: dict[str, int] = {}


# --------------------------------------------------------------------------------------------
# Figures to compact image frames
# --------------------------------------------------------------------------------------------


def _check_figure(fig, title: str, values: Mapping):
    from matplotlib.figure import Figure

    if not isinstance(fig, Figure):
        raise TypeError(
            f"explorer {title!r}: render({_call_args(values)}) must return a matplotlib "
            f"Figure, found {type(fig).__name__}"
        )
    return fig


def _capture(render, values: Mapping, title: str, capture):
    """``capture(render(**values))``, then close every figure the call opened, even on error."""
    import matplotlib.pyplot as plt

    before = set(plt.get_fignums())
    try:
        return capture(_check_figure(render(**values), title, values))
    finally:
        for number in sorted(set(plt.get_fignums()) - before):
            plt.close(number)


def _call_args(values: Mapping) -> str:
    return ", ".join(f"{name}={value!r}" for name, value in values.items())


def _render_frames(render, combos, title, dpi, fmt):
    """Render every combination at ``dpi``; returns image bytes per combination, all one size.

    Frames whose tight bounding box differs (e.g. wider tick labels) are padded with white to
    the largest width and height, so the page does not jump as the reader moves a control.
    """
    from PIL import Image

    images = [_capture(render, values, title, lambda fig: figure_image(fig, dpi)) for values in combos]
    width = max(image.width for image in images)
    height = max(image.height for image in images)
    frames = []
    for image in images:
        if image.size != (width, height):
            canvas = Image.new("RGB", (width, height), (255, 255, 255))
            canvas.paste(image, ((width - image.width) // 2, 0))
            image = canvas
        frames.append(encode_image(image, FRAME_COLORS, fmt))
    return frames, (width, height)


# --------------------------------------------------------------------------------------------
# The explorer
# --------------------------------------------------------------------------------------------


def _slug(title: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
    if len(slug) > 40:  # cut at a word boundary
        slug = slug[:41].rsplit("-", 1)[0] if "-" in slug[:41] else slug[:40]
    return slug or "explorer"


def _next_id(title: str) -> str:
    """Deterministic element id: the title's slug plus a per-slug counter (no random ids)."""
    slug = _slug(title)
    _id_counts[slug] = _id_counts.get(slug, 0) + 1
    return f"mha-explorer-{slug}-{_id_counts[slug]}"


def _json_for_script(data) -> str:
    """JSON that is safe inside ``<script type="application/json">`` (no ``</script>``)."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=True)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


_SCRIPT = """(function () {
  var root = document.getElementById(%(id)s);
  if (!root || root.getAttribute("data-ready")) return;
  root.setAttribute("data-ready", "1");
  var data = JSON.parse(document.getElementById(%(data_id)s).textContent);
  var img = root.querySelector("img.mha-explorer-frame");
  var controls = root.querySelectorAll("[data-mha-control]");
  function update() {
    var index = 0;
    for (var i = 0; i < controls.length; i++) {
      var k = parseInt(controls[i].value, 10), label = data.labels[i][k];
      index = index * data.labels[i].length + k;
      document.getElementById(controls[i].id + "-value").textContent = label;
      if (controls[i].type === "range") controls[i].setAttribute("aria-valuetext", label);
    }
    img.src = data.frames[data.index[index]];
    img.alt = data.alts[index];
    root.setAttribute("data-frame", String(index));
  }
  for (var i = 0; i < controls.length; i++) {
    controls[i].addEventListener("input", update);
    controls[i].addEventListener("change", update);
  }
  update();
})();"""


class Explorer:
    """An explorer made by :func:`explorer`; display it (last expression of a cell) to use it.

    Attributes:
        title, caption, controls (name -> list of values), combos (list of dicts, frame order),
        alts (alt text per combination), frames (distinct image bytes, in ``frame_format``),
        index (combination -> position in ``frames``), dpi and frame_size (width, height) of the
        stored frames, element_id (the HTML id), html, widget (the live UI, built on first use).
    """

    def __init__(
        self,
        render,
        controls,
        *,
        title,
        caption=None,
        alt=None,
        max_frames=MAX_FRAMES,
        max_bytes=MAX_BYTES,
        live="frames",
    ):
        if not isinstance(title, str) or not title.strip():
            raise ValueError(f"explorer title must be a non-empty string, found {title!r}")
        if not callable(render):
            raise TypeError(f"explorer {title!r}: render must be callable, found {type(render).__name__}")
        if alt is not None and not callable(alt):
            raise TypeError(
                f"explorer {title!r}: alt must be callable (alt(**values) -> str) or None, found {type(alt).__name__}"
            )
        if caption is not None and not isinstance(caption, str):
            raise TypeError(f"explorer {title!r}: caption must be a string or None, found {type(caption).__name__}")
        if live not in ("frames", "render"):
            raise ValueError(f"explorer {title!r}: live must be 'frames' or 'render', found {live!r}")
        self.live = live
        self.title = title
        self.caption = caption
        self.render = render
        self.controls = check_controls(controls, title=title)
        count = math.prod(len(v) for v in self.controls.values())
        if count > max_frames:
            sizes = " x ".join(f"{len(v)} ({name})" for name, v in self.controls.items())
            raise ValueError(
                f"explorer {title!r}: {sizes} = {count} frames, more than the limit of "
                f"{max_frames}; give the controls fewer values"
            )
        self.combos = grid(self.controls)
        self.alts = [self._alt_text(alt, values) for values in self.combos]
        self.max_bytes = max_bytes
        self.element_id = _next_id(title)
        self.frame_format = frame_format()
        self._precompute()
        self._widget = None

    def _alt_text(self, alt, values) -> str:
        if alt is None:
            return default_alt(self.title, values)
        text = alt(**values)
        if not isinstance(text, str) or not text.strip():
            raise TypeError(
                f"explorer {self.title!r}: alt({_call_args(values)}) must return a non-empty string, found {text!r}"
            )
        return text

    def _precompute(self) -> None:
        """Render every frame; lower the resolution until the HTML fits in ``max_bytes``."""
        dpi = FRAME_DPI
        while True:
            encoded, self.frame_size = _render_frames(self.render, self.combos, self.title, dpi, self.frame_format)
            distinct = list(dict.fromkeys(encoded))
            self.frames = distinct
            self.index = [distinct.index(frame) for frame in encoded]
            self.dpi = dpi
            self._html = self._build_html()
            size = len(self._html.encode("utf-8"))
            if size <= self.max_bytes:
                return
            if dpi <= MIN_FRAME_DPI:
                raise ValueError(
                    f"explorer {self.title!r}: {size} bytes of HTML even at {dpi} dpi, more than the limit "
                    f"of {self.max_bytes} bytes; use fewer control values or smaller figures"
                )
            # Image size grows roughly with the pixel count, i.e. with dpi squared.
            dpi = max(MIN_FRAME_DPI, min(dpi - 5, int(dpi * math.sqrt(0.9 * self.max_bytes / size))))

    # ---- static HTML --------------------------------------------------------------------
    @property
    def frame_count(self) -> int:
        return len(self.combos)

    def grid_description(self) -> str:
        return grid_description(self.controls)

    def frame_data_uri(self, i: int) -> str:
        """The data URI of combination ``i`` (frame order, see :func:`grid`)."""
        return self._data_uri(self.frames[self.index[i]])

    def _data_uri(self, frame: bytes) -> str:
        return f"data:image/{self.frame_format};base64," + base64.b64encode(frame).decode("ascii")

    def _control_html(self, i: int, name: str, values: list) -> str:
        cid = f"{self.element_id}-c{i}"
        label = f'<label for="{cid}" style="min-width:8em;font-weight:600">{html.escape(name)}</label>'
        first = html.escape(format_value(values[0]))
        if is_number(values[0]):
            field = (
                f'<input type="range" id="{cid}" data-mha-control="{i}" min="0" max="{len(values) - 1}" '
                f'step="1" value="0" aria-valuetext="{first}" style="width:14em">'
            )
        else:
            options = "".join(
                f'<option value="{k}"{" selected" if k == 0 else ""}>{html.escape(format_value(v))}</option>'
                for k, v in enumerate(values)
            )
            field = f'<select id="{cid}" data-mha-control="{i}">{options}</select>'
        output = f'<output id="{cid}-value" for="{cid}" aria-live="polite">{first}</output>'
        return (
            f'<div class="mha-explorer-control" style="display:flex;gap:0.75em;align-items:center;'
            f'margin:0.2em 0">{label}{field}{output}</div>'
        )

    def _build_html(self) -> str:
        eid = self.element_id
        labels = [[format_value(v) for v in values] for values in self.controls.values()]
        data = {
            "labels": labels,
            "index": self.index,
            "alts": self.alts,
            "frames": [self._data_uri(frame) for frame in self.frames],
        }
        controls = "".join(
            self._control_html(i, name, values) for i, (name, values) in enumerate(self.controls.items())
        )
        caption = (html.escape(self.caption) + " ") if self.caption else ""
        script = _SCRIPT % {"id": json.dumps(eid), "data_id": json.dumps(eid + "-data")}
        return (
            f'<figure class="mha-explorer tex2jax_ignore mathjax_ignore" id="{eid}" data-frame="0" '
            f'role="group" aria-labelledby="{eid}-title" style="margin:1em 0">\n'
            f'<div id="{eid}-title" style="font-weight:700;margin-bottom:0.3em">{html.escape(self.title)}</div>\n'
            f'<div class="mha-explorer-controls">{controls}</div>\n'
            f'<img class="mha-explorer-frame" src="{self.frame_data_uri(0)}" alt="{html.escape(self.alts[0])}" '
            f'width="{self.frame_size[0]}" height="{self.frame_size[1]}" '
            f'style="max-width:100%;height:auto;display:block;margin-top:0.4em">\n'
            f'<figcaption style="font-size:0.9em">{caption}{html.escape(self.grid_description())}</figcaption>\n'
            f'<script type="application/json" id="{eid}-data">{_json_for_script(data)}</script>\n'
            f"<script>\n{script}\n</script>\n"
            f"</figure>"
        )

    @property
    def html(self) -> str:
        """The self-contained HTML component (deterministic: same input, same string)."""
        return self._html

    @property
    def html_bytes(self) -> int:
        return len(self._html.encode("utf-8"))

    # ---- live widget --------------------------------------------------------------------
    @property
    def widget(self):
        """The live ipywidgets UI (built on first use, then reused)."""
        if self._widget is None:
            self._widget = self._build_widget()
        return self._widget

    def _build_widget(self):
        import ipywidgets as widgets

        self.inputs = {}
        for name, values in self.controls.items():
            options = [(format_value(v), v) for v in values]
            if is_number(values[0]):
                control = widgets.SelectionSlider(
                    options=options,
                    value=values[0],
                    description=name,
                    continuous_update=False,
                    style={"description_width": "initial"},
                )
            else:
                control = widgets.Dropdown(
                    options=options, value=values[0], description=name, style={"description_width": "initial"}
                )
            control.observe(lambda change: self._show_live(), names="value")
            self.inputs[name] = control
        self.output = widgets.Output()
        self._show_live()
        header = widgets.HTML(f"<b>{html.escape(self.title)}</b>")
        parts = [header, *self.inputs.values(), self.output]
        if self.caption:
            parts.append(widgets.HTML(f"<small>{html.escape(self.caption)}</small>"))
        return widgets.VBox(parts)

    def live_values(self) -> dict:
        """The values currently selected in the live widget."""
        self.widget  # noqa: B018 (the property builds the widget)
        return {name: control.value for name, control in self.inputs.items()}

    def _show_live(self) -> None:
        """Show the figure for the widget's current values in the Output.

        ``live="frames"`` (the default) shows the frame precomputed for these values: every
        reachable combination was rendered when the explorer was made, so a slider move costs a
        lookup (well under a millisecond) instead of a matplotlib draw (50-400 ms on a 2-core
        CPU). ``live="render"`` calls ``render(**values)`` again at full colour and resolution.
        """
        values = {name: control.value for name, control in self.inputs.items()}
        if self.live == "frames":
            self.show_values(values)
            return
        try:
            png = _capture(self.render, values, self.title, lambda fig: figure_png(fig, colors=None))
        except Exception:  # show the error where the figure would be (a callback has no cell)
            self.output.outputs = ({"output_type": "stream", "name": "stderr", "text": traceback.format_exc()},)
            return
        alt = self.alts[self.combos.index(values)]
        self.output.outputs = (
            {
                "output_type": "display_data",
                "data": {"image/png": base64.b64encode(png).decode("ascii"), "text/plain": alt},
                "metadata": {"image/png": {"alt": alt}},
            },
        )

    def show_values(self, values: Mapping) -> None:
        """Put the precomputed frame for ``values`` into the live Output (the fast update path)."""
        i = self.combos.index(dict(values))
        alt = self.alts[i]
        img = (
            f'<img src="{self.frame_data_uri(i)}" alt="{html.escape(alt)}" width="{self.frame_size[0]}" '
            f'height="{self.frame_size[1]}" style="max-width:100%;height:auto">'
        )
        self.output.outputs = (
            {"output_type": "display_data", "data": {"text/html": img, "text/plain": alt}, "metadata": {}},
        )

    # ---- display ------------------------------------------------------------------------
    def __repr__(self) -> str:
        return (
            f"<Explorer {self.title!r}: {self.frame_count} frames at {self.dpi} dpi, {self.html_bytes} bytes of HTML>"
        )

    def _repr_mimebundle_(self, include=None, exclude=None):
        bundle = {"text/plain": f"Explorer: {self.title} ({self.grid_description()})", "text/html": self.html}
        view = self.widget._repr_mimebundle_() or {}
        key = "application/vnd.jupyter.widget-view+json"
        if key in view:
            bundle[key] = view[key]
        return bundle


def explorer(
    render: Callable,
    controls: Mapping[str, Sequence],
    *,
    title: str,
    caption: str | None = None,
    alt: Callable | None = None,
    live: str = "frames",
) -> Explorer:
    """An interactive figure that works in a live notebook and, with no kernel, in the HTML book.

    Args:
        render: ``render(**values) -> matplotlib.figure.Figure``, a pure function of the control
            values that lives in ``mha`` and is unit-tested (it should take < 50 ms).
        controls: dict name -> list of allowed values, in order. Numbers give a slider, strings a
            dropdown. Every combination is precomputed: keep the product of lengths <= ~30
            (hard limit ``MAX_FRAMES`` = 64).
        title: shown above the controls; also names the explorer in error messages and ids.
        caption: a sentence shown under the figure, before the grid statement
            ("Precomputed for 12 values ...").
        alt: ``alt(**values) -> str``, the alt text of each frame (default: title + values).
        live: what the live widget does when a control moves: ``"frames"`` (default) shows the
            precomputed frame at once; ``"render"`` calls ``render`` again at full resolution.

    Returns:
        :class:`Explorer`: make it the last expression of a cell whose first line is
        ``# NBVAL_IGNORE_OUTPUT``.

    Raises:
        ValueError: empty controls, repeated or non-finite values, more than ``MAX_FRAMES``
            combinations, or HTML over ``MAX_BYTES`` even at ``MIN_FRAME_DPI``.
        TypeError: controls of mixed or unsupported types, render not returning a Figure.

    Example::

        # NBVAL_IGNORE_OUTPUT
        from mha.viz.widgets import explorer
        explorer(mha.viz.head_count.render_head_maps, {"num_heads": [1, 2, 4, 8]},
                 title="Attention per head", caption="Each head attends differently.")
    """
    return Explorer(render, controls, title=title, caption=caption, alt=alt, live=live)
