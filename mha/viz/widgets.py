"""Interactive explorers that work both in a live notebook and in the static HTML book.

One call defines an explorer: its controls and a ``render`` that draws a figure.

    >>> from mha.viz.widgets import explorer, FloatRange                    # doctest: +SKIP
    >>> explorer(render, {"num_heads": [1, 2, 4, 8], "mask": ["none", "causal"]},
    ...          title="Heads and masks", initial={"num_heads": 4})      # doctest: +SKIP

The returned :class:`Explorer` displays as ONE output with two representations:

* ``application/vnd.jupyter.widget-view+json``: a live ipywidgets UI (see :mod:`mha.viz.live`).
  JupyterLab and Notebook 7 rank it above HTML, so a running notebook shows this one. In a kernel
  that a Jupyter server started (``make lab``) it computes: each control takes its live form (a
  continuous slider for :class:`FloatRange`/:class:`IntRange`, a text box for :class:`Text`) and
  every change redraws the figure, in place when ``render`` is a :class:`LiveFigure`.
* ``text/html``: a self-contained component (native ``<input type=range>`` / ``<select>``, a
  slider's ``<output>`` with its current value (a dropdown shows its own), about 30 lines of
  inline JavaScript, no third-party script) that swaps frames precomputed for every combination
  of the controls' grid values. The book shows this one, because ``_config.yml`` sets
  ``sphinx: config: nb_mime_priority_overrides: [["html", "text/html", 0]]``. A note in it, hidden
  by its script, tells a reader who sees it where scripts do not run (a notebook opened before its
  cells ran) that the explorer comes alive when the cell runs.

Where no Jupyter server started the kernel (``scripts/execute_notebooks.py``, nbval, tests), every
frame is rendered when :func:`explorer` is called, so a render error, a non-Figure result, too
many frames or a page too heavy raises in the notebook cell itself. The cell must carry the tag
``nbval-ignore-output`` (a tag, not a comment, so that the reader does not see it): the values behind
each frame are checked by the unit tests of the render function's data, not by comparing images.

ipywidgets, matplotlib and Pillow are imported inside functions, so ``import mha.viz.widgets``
stays light.
"""

from __future__ import annotations

import base64
import html
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence

from .controls import (
    Choice,
    FloatRange,
    IntRange,
    Text,
    check_controls,
    check_specs,
    default_alt,
    format_value,
    frame_count,
    grid,
    grid_description,
    is_number,
    label_of,
    live_description,
)
from .frames import FRAME_COLORS, FRAME_FORMAT, call_args, figure_png, frame_format, render_frames
from .live import LiveFigure, LiveView, Painter, draw_function, explorer_mode, updates_in_place

__all__ = [  # the controls' specs and helpers stay importable from here, where explorers are made
    "Choice",
    "Explorer",
    "FRAME_COLORS",
    "FRAME_DPI",
    "FRAME_FORMAT",
    "FloatRange",
    "IntRange",
    "LiveFigure",
    "MAX_BYTES",
    "MAX_FRAMES",
    "MIN_FRAME_DPI",
    "STATIC_NOTE",
    "Text",
    "check_controls",
    "default_alt",
    "explorer",
    "explorer_mode",
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
#: Shown by the static HTML only where its script does not run: a notebook opened before its cells
#: ran (JupyterLab does not run the scripts of stored outputs). The book's script hides it.
STATIC_NOTE = (
    "This is the stored copy of a live explorer: its controls do nothing yet. It comes alive when "
    "this cell runs (run the cell, or Run All), and then computes every value you choose."
)
#: The text/html of a live explorer: a stored notebook shows it when no kernel holds the widget.
LIVE_NOTE = "A live explorer: run this cell to bring it back (it computes in the notebook's kernel)."

_id_counts: dict[str, int] = {}


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
  var note = root.querySelector(".mha-explorer-note");
  if (note) note.hidden = true;
  var data = JSON.parse(document.getElementById(%(data_id)s).textContent);
  var img = root.querySelector("img.mha-explorer-frame");
  var controls = root.querySelectorAll("[data-mha-control]");
  function update() {
    var index = 0;
    for (var i = 0; i < controls.length; i++) {
      var k = parseInt(controls[i].value, 10), label = data.labels[i][k];
      index = index * data.labels[i].length + k;
      var echo = document.getElementById(controls[i].id + "-value");  // a slider's; a dropdown shows its own
      if (echo) echo.textContent = label;
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
  img.addEventListener("click", function () {  // a frame shown smaller than it is: full size, scrolled sideways
    var full = img.style.maxWidth === "none" || img.naturalWidth <= img.clientWidth;
    img.style.maxWidth = full ? "100%%" : "none";
  });
  update();
})();"""

_NOTE_STYLE = "margin:0.3em 0;padding:0.3em 0.6em;border-left:3px solid #E69F00;background:#fff8e6;font-size:0.9em"


class Explorer:
    """An explorer made by :func:`explorer`; display it (last expression of a cell) to use it.

    Attributes:
        title, caption, mode (``"live"`` or ``"static"``), live (``"frames"`` or ``"render"``),
        specs (name -> control spec), starts (name -> the value it opens on), controls (name -> the
        book's grid of values), combos (list of dicts, frame order), start (the combination the
        book opens on), in_place (render updates one figure in place), precomputed, element_id,
        html, widget (the live UI, built on first use). When precomputed: alts (alt text per
        combination), frames (distinct image bytes, in ``frame_format``), index (combination ->
        position in ``frames``), dpi and frame_size (width, height) of the stored frames.
    """

    def __init__(
        self,
        render,
        controls,
        *,
        title,
        caption=None,
        alt=None,
        initial=None,
        max_frames=MAX_FRAMES,
        max_bytes=MAX_BYTES,
        live=None,
        mode=None,
    ):
        if not isinstance(title, str) or not title.strip():
            raise ValueError(f"explorer title must be a non-empty string, found {title!r}")
        if not callable(render) and not updates_in_place(render):
            raise TypeError(f"explorer {title!r}: render must be callable, found {type(render).__name__}")
        if alt is not None and not callable(alt):
            raise TypeError(
                f"explorer {title!r}: alt must be callable (alt(**values) -> str) or None, found {type(alt).__name__}"
            )
        if caption is not None and not isinstance(caption, str):
            raise TypeError(f"explorer {title!r}: caption must be a string or None, found {type(caption).__name__}")
        if live not in (None, "frames", "render"):
            raise ValueError(
                f"explorer {title!r}: live must be 'frames' or 'render' (or None: the mode decides), found {live!r}"
            )
        self.mode = explorer_mode() if mode is None else mode
        if self.mode not in ("live", "static"):
            raise ValueError(f"explorer {title!r}: mode must be 'live' or 'static' (or None), found {mode!r}")
        self.live = live or ("render" if self.mode == "live" else "frames")
        self.title, self.caption, self.render, self.alt = title, caption, render, alt
        self.in_place = updates_in_place(render)
        self.specs, self.starts = check_specs(controls, title=title, initial=initial)
        self.labels = {name: label_of(name, spec) for name, spec in self.specs.items()}
        self.controls = {name: spec.grid for name, spec in self.specs.items()}
        self.combos = grid(self.controls)
        self.start = self.combos.index(
            {name: spec.grid[spec.grid_start(self.starts[name])] for name, spec in self.specs.items()}
        )
        self.precomputed = self.mode == "static" or self.live == "frames"
        self.max_bytes = max_bytes
        if self.precomputed:
            count = len(self.combos)
            if count > max_frames:
                sizes = " x ".join(f"{len(v)} ({name})" for name, v in self.controls.items())
                raise ValueError(
                    f"explorer {title!r}: {sizes} = {count} frames, more than the limit of "
                    f"{max_frames}; give the controls fewer values"
                )
            self.alts = [self._alt_text(alt, values) for values in self.combos]
        self.element_id = _next_id(title)
        if self.precomputed:
            self.frame_format = frame_format()
            self._precompute()
        else:
            self._html = self._live_html()
        self._view = self.painter = None

    def _alt_text(self, alt, values) -> str:
        if alt is None:
            return default_alt(self.title, values, self.labels)
        text = alt(**values)
        if not isinstance(text, str) or not text.strip():
            raise TypeError(
                f"explorer {self.title!r}: alt({call_args(values)}) must return a non-empty string, found {text!r}"
            )
        return text

    def _precompute(self) -> None:
        """Render every frame; lower the resolution until the HTML fits in ``max_bytes``."""
        dpi = FRAME_DPI
        draw = draw_function(self.render)
        while True:
            encoded, self.frame_size, self.text_pt = render_frames(
                draw, self.combos, self.title, dpi, self.frame_format
            )
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
        return grid_description(
            {n: [self.specs[n].show(v) for v in grid] for n, grid in self.controls.items()}, self.labels
        )

    def frame_data_uri(self, i: int) -> str:
        """The data URI of combination ``i`` (frame order, see :func:`grid`)."""
        return self._data_uri(self.frames[self.index[i]])

    def _data_uri(self, frame: bytes) -> str:
        return f"data:image/{self.frame_format};base64," + base64.b64encode(frame).decode("ascii")

    def _control_html(self, i: int, name: str, values: list) -> str:
        cid = f"{self.element_id}-c{i}"
        spec = self.specs[name]
        k = spec.grid_start(self.starts[name])
        label = f'<label for="{cid}" style="min-width:8em;font-weight:600">{html.escape(self.labels[name])}</label>'
        first = html.escape(spec.show(values[k]))
        if is_number(values[0]):
            # A slider's value is echoed beside it (and announced: a live region).
            field = (
                f'<input type="range" id="{cid}" data-mha-control="{i}" min="0" max="{len(values) - 1}" '
                f'step="1" value="{k}" aria-valuetext="{first}" style="width:14em">'
                f'<output id="{cid}-value" for="{cid}" aria-live="polite">{first}</output>'
            )
        else:
            # A dropdown shows its value itself, and a screen reader announces it: no echo, which
            # would only repeat it beside it.
            options = "".join(
                f'<option value="{j}"{" selected" if j == k else ""}>{html.escape(spec.show(v))}</option>'
                for j, v in enumerate(values)
            )
            field = f'<select id="{cid}" data-mha-control="{i}">{options}</select>'
        return (
            f'<div class="mha-explorer-control" style="display:flex;gap:0.75em;align-items:center;'
            f'margin:0.2em 0">{label}{field}</div>'
        )

    def _build_html(self) -> str:
        eid = self.element_id
        data = {  # this key order, as before: the same explorer gives the same HTML
            "labels": [[self.specs[n].show(v) for v in values] for n, values in self.controls.items()],
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
            f'<figure class="mha-explorer tex2jax_ignore mathjax_ignore" id="{eid}" data-frame="{self.start}" '
            f'role="group" aria-labelledby="{eid}-title" style="margin:1em 0">\n'
            f'<div id="{eid}-title" style="font-weight:700;margin-bottom:0.3em">{html.escape(self.title)}</div>\n'
            f'<div class="mha-explorer-controls">{controls}</div>\n'
            f'<p class="mha-explorer-note" style="{_NOTE_STYLE}">{html.escape(STATIC_NOTE)}</p>\n'
            f'<div style="overflow-x:auto"><img class="mha-explorer-frame" src="{self.frame_data_uri(self.start)}" '
            f'alt="{html.escape(self.alts[self.start])}" '
            f'width="{self.frame_size[0]}" height="{self.frame_size[1]}" data-dpi="{self.dpi:g}" '
            f'data-text-pt="{self.text_pt:g}" style="max-width:100%;height:auto;display:block;margin-top:0.4em;'
            f'cursor:zoom-in"></div>\n'
            f'<figcaption style="font-size:0.9em">{caption}{html.escape(self.grid_description())}</figcaption>\n'
            f'<script type="application/json" id="{eid}-data">{_json_for_script(data)}</script>\n'
            f"<script>\n{script}\n</script>\n"
            f"</figure>"
        )

    def _live_html(self) -> str:
        """The text/html of a live explorer (nothing precomputed): its title and a note."""
        return (
            f'<div class="mha-explorer-placeholder" id="{self.element_id}" style="margin:1em 0">'
            f'<div style="font-weight:700">{html.escape(self.title)}</div>'
            f'<p class="mha-explorer-note" style="{_NOTE_STYLE}">{html.escape(LIVE_NOTE)}</p></div>'
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
    def view(self) -> LiveView:
        """The live UI's parts (controls, image, status, timings), built on first use."""
        if self._view is None:
            computes = self.live == "render"
            if computes:
                self.painter = painter = Painter(self.render, self.title)
                picture = lambda values: (painter.png(values), "png")  # noqa: E731
            else:
                picture = lambda values: (  # noqa: E731
                    self.frames[self.index[self.combos.index(values)]],
                    self.frame_format,
                )
            live_forms = computes and self.mode == "live"
            words = live_description(self.specs) if live_forms else self.grid_description()
            self._view = LiveView(
                self.specs,
                self.starts,
                live=live_forms,
                picture=picture,
                alt=self.alt,
                title=self.title,
                caption=f"{self.caption} {words}" if self.caption else words,
                warm=self.painter.warm_step if computes and self.painter.plan_warm(self.specs, self.starts) else None,
            )
        return self._view

    @property
    def widget(self):
        """The live ipywidgets UI (built on first use, then reused)."""
        return self.view.widget

    @property
    def inputs(self) -> dict:
        """The live widget's controls, by name."""
        return self.view.inputs

    def live_values(self) -> dict:
        """The values the live widget's controls give ``render`` now."""
        return self.view.values()

    def show_values(self, values: Mapping) -> None:
        """Show the figure for ``values`` in the live widget now (what a control change does)."""
        self.view.show(values)

    # ---- display ------------------------------------------------------------------------
    def __repr__(self) -> str:
        if not self.precomputed:
            return f"<Explorer {self.title!r}: live, nothing precomputed ({len(self.combos)} grid combinations)>"
        return (
            f"<Explorer {self.title!r}: {self.frame_count} frames at {self.dpi} dpi, {self.html_bytes} bytes of HTML>"
        )

    def _repr_mimebundle_(self, include=None, exclude=None):
        words = self.grid_description() if self.precomputed else "live"
        bundle = {"text/plain": f"Explorer: {self.title} ({words})", "text/html": self.html}
        view = self.widget._repr_mimebundle_() or {}
        key = "application/vnd.jupyter.widget-view+json"
        if key in view:
            bundle[key] = view[key]
        return bundle


def explorer(
    render: Callable | LiveFigure,
    controls: Mapping[str, Sequence],
    *,
    title: str,
    caption: str | None = None,
    alt: Callable | None = None,
    initial: Mapping | None = None,
    live: str | None = None,
) -> Explorer:
    """An interactive figure that computes in a live notebook and, with no kernel, works in the HTML book.

    Args:
        render: ``render(**values) -> matplotlib.figure.Figure``, a pure function of the control
            values that lives in ``mha`` and is unit-tested; or a :class:`LiveFigure` (an object
            with ``draw(**values) -> Figure`` and ``update(fig, **values)``), which a live kernel
            updates in place (20-40 ms a change instead of 100-400 ms for a new figure).
        controls: dict name -> a list of allowed values (numbers: a slider, strings: a dropdown)
            or a spec: :class:`Choice`, :class:`FloatRange`, :class:`IntRange`, :class:`Text`
            (a live form for a running kernel and a grid for the book). The book precomputes
            every combination of grid values: keep their number <= ~30 (hard limit
            ``MAX_FRAMES`` = 64); a live kernel precomputes nothing and has no such limit.
        title: shown above the controls; also names the explorer in error messages and ids.
        caption: a sentence shown under the figure, before the grid statement
            ("Precomputed for 12 values ...") or, live, what the explorer computes.
        alt: ``alt(**values) -> str``, the alt text of each frame (default: title + values).
        initial: dict name -> the value a control opens on (the case the chapter discusses;
            default: each spec's ``value``, a list's first value). The book opens on the nearest
            grid value.
        live: ``None`` (default): the mode decides (:func:`mha.viz.live.explorer_mode`): compute
            every change in a kernel a Jupyter server started, swap precomputed frames elsewhere.
            ``"frames"`` always precomputes and swaps frames; ``"render"`` always computes.

    Returns:
        :class:`Explorer`: make it the last expression of a cell tagged ``nbval-ignore-output``.

    Raises:
        ValueError: empty controls, repeated or non-finite values, an initial value a control
            cannot take, more than ``MAX_FRAMES`` combinations, or HTML over ``MAX_BYTES`` even at
            ``MIN_FRAME_DPI`` (the last two only when frames are precomputed).
        TypeError: controls of mixed or unsupported types, render not returning a Figure.

    Example (in a cell tagged ``nbval-ignore-output``)::

        from mha.chapters.heads import figures
        from mha.viz.widgets import explorer, FloatRange
        explorer(figures.TemperaturePlot(),
                 {"temperature": FloatRange(0.25, 8, grid=[0.25, 0.5, 1, 2, 4, 8], log=True)},
                 title="Softmax temperature", initial={"temperature": 1.0})
    """
    return Explorer(render, controls, title=title, caption=caption, alt=alt, initial=initial, live=live)
