"""The live form of an explorer: ipywidgets controls and one figure, recomputed at every change.

:func:`mha.viz.widgets.explorer` uses this module for the ``application/vnd.jupyter.widget-view+json``
part of its output. Two things decide what a control move costs:

* **The mode** (:func:`explorer_mode`). In a kernel that a Jupyter server started (``make lab``:
  JupyterLab 4 or Notebook 7) explorers are *live*: nothing is precomputed, each control takes
  its live form (a continuous slider for a :class:`~mha.viz.controls.FloatRange`, a text box for
  a :class:`~mha.viz.controls.Text`) and every change is computed. Anywhere else (storing the
  book's outputs, nbval, tests, scripts) they are *static*: every grid value is precomputed for
  the HTML book, and the widget swaps those frames.
* **The render.** A plain function ``render(**values) -> Figure`` draws a new figure at every
  change (matplotlib's whole pipeline: 100-400 ms on a 2-core CPU). An object with
  ``draw(**values) -> Figure`` and ``update(fig, **values)`` (the :class:`LiveFigure` protocol)
  draws one figure once and then changes its artists in place (bar heights, image data, line
  data, text): a redraw of the same canvas, typically 10-40 ms, on a canvas that renders each
  glyph once (:mod:`mha.viz.glyphs`: a label drawn again is copied, not rendered).

Moves are coalesced: the browser's widget manager holds back every change of a control while the
kernel is busy with the previous one and then sends only the latest, and a change that arrives
while a figure is being drawn only updates the values the next draw uses.

ipywidgets, matplotlib and Pillow are imported inside functions (``import mha.viz.live`` is light).
"""

from __future__ import annotations

import asyncio
import base64
import html
import itertools
import math
import os
import threading
import time
import traceback
from collections import OrderedDict
from collections.abc import Callable, Mapping

from .controls import Control, FloatRange, IntRange, Text, default_alt, is_number, label_of
from .drawlock import DRAW_LOCK, guard_matplotlib_hooks
from .frames import canvas_png, capture, figure_png

#: Environment variable that forces the mode: ``live`` or ``static`` (unset: decided by the kernel).
MODE_VARIABLE = "MHA_EXPLORERS"
#: jupyter_server sets this in the environment of every kernel it starts for a notebook.
SERVER_KERNEL_VARIABLE = "JPY_SESSION_NAME"
#: What ``make bench`` holds an update to unless the render says otherwise: (median, worst) in ms.
DEFAULT_BUDGET_MS = (50.0, 150.0)
#: Errors a reader's input causes (a bad sentence, a value out of range): shown as one line.
INPUT_ERRORS = (ValueError, TypeError, KeyError, IndexError)


def explorer_mode() -> str:
    """``"live"`` or ``"static"``: what an explorer made now does.

    ``MHA_EXPLORERS=live|static`` decides when set. Otherwise an explorer is live in a kernel that a
    Jupyter server (JupyterLab, Notebook 7) started for a notebook, which jupyter_server marks with
    ``JPY_SESSION_NAME``, and static everywhere else: ``scripts/execute_notebooks.py`` (nbclient),
    nbval, pytest and scripts start their kernels without a server.
    """
    wanted = os.environ.get(MODE_VARIABLE, "").strip().lower()
    if wanted in ("live", "static"):
        return wanted
    if wanted:
        raise ValueError(f"{MODE_VARIABLE} must be 'live' or 'static', found {wanted!r}")
    return "live" if os.environ.get(SERVER_KERNEL_VARIABLE) else "static"


class LiveFigure:
    """Base class of a figure that a live explorer updates in place (the fast path).

    Subclass it and define:

    * ``draw(**values) -> Figure``: a new figure for these values (what ``render`` returns; the
      static book calls it once per precomputed frame);
    * ``update(fig, **values)``: change the artists of ``fig``, a figure ``draw`` made, so that it
      shows these values (``bar.set_height``, ``image.set_data``, ``line.set_ydata``,
      ``text.set_text``...). Keep the layout: everything stays inside the figure, whose size and
      margins never change. Return ``False`` when the change cannot be made in place (say, a
      sentence of another length): the explorer then calls ``draw`` for a new figure.
    * optionally ``artists(fig) -> list``: every artist ``update`` changes, plus any artist drawn
      on top of them (an axes' spines over bars). The explorer then draws everything else once,
      keeps it as a background, and at each change draws only these (blitting: 5-15 ms instead of
      30-60 ms for the whole canvas, whose tick labels cost most). Default ``None``: redraw the
      whole canvas at each change, still without building a new figure.

    ``budget_ms`` is the (median, worst) update time ``make bench`` checks this figure against.
    Any object with ``draw`` and ``update`` methods works; an instance of this class is also a
    plain render function (calling it calls ``draw``).
    """

    budget_ms = DEFAULT_BUDGET_MS

    def __call__(self, **values):
        return self.draw(**values)

    def draw(self, **values):
        raise NotImplementedError(f"{type(self).__name__} must define draw(**values) -> Figure")

    def update(self, fig, **values):
        return False

    def artists(self, fig):
        return None


def updates_in_place(render) -> bool:
    """Whether ``render`` follows the :class:`LiveFigure` protocol (``draw`` and ``update``)."""
    return callable(getattr(render, "draw", None)) and callable(getattr(render, "update", None))


def draw_function(render) -> Callable:
    """The function that draws a new figure: ``render.draw`` for a LiveFigure, else ``render``."""
    return render.draw if updates_in_place(render) else render


def budget_ms(render) -> tuple[float, float]:
    """The (median, worst) update time, in ms, that ``render`` is held to."""
    return tuple(getattr(render, "budget_ms", DEFAULT_BUDGET_MS))


class Painter:
    """PNG bytes of the figure for given values.

    With a plain ``render`` (the fallback: matplotlib's whole pipeline at each change): a new figure
    at every call, drawn once on its canvas, or with a tight crop when the first figure showed
    something outside its canvas (an outside legend); the last ``CACHE_SIZE`` images are kept, so
    a value seen before comes back at once (``render`` is a pure function of the values). With a
    :class:`LiveFigure`: one persistent figure, changed by ``update``; when ``artists(fig)`` names
    what changes, the rest is drawn once as a background and only those artists are drawn at each
    call (blitting)."""

    CACHE_SIZE = 32
    #: At most this many layouts are drawn ahead (:meth:`plan_warm`).
    MAX_LAYOUTS = 12

    def __init__(self, render, title: str):
        self.render, self.title = render, title
        self.in_place = updates_in_place(render)
        self.figure = self.moving = self.background = None
        self.figures: dict = {}  # layout key -> (figure, moving artists, background)
        self.pending: list = []
        self.fits_canvas: bool | None = None  # fallback: does the first figure lie inside its canvas?
        self.cache: OrderedDict = OrderedDict()
        self.settled: dict = {}  # id(figure) -> (its labels' texts, the background with them drawn in)

    def png(self, values: Mapping) -> bytes:
        if not self.in_place:
            return self._new_figure_png(values)
        key = self._layout(values)
        held = self.figures.get(key)
        if held is None or self.render.update(held[0], **values) is False:
            held = self.figures[key] = self._adopt(capture(self.render.draw, values, self.title, lambda fig: fig))
        self.figure, self.moving, self.background = held
        if self.moving is None:
            return canvas_png(self.figure)
        canvas = self.figure.canvas
        from .artists import TextLayer

        canvas.restore_region(self._settled_background())
        for artist in self.moving:
            if not isinstance(artist, TextLayer):
                self.figure.draw_artist(artist)
        return canvas_png(self.figure, draw=False)

    def _settled_background(self):
        """The background with the figure's :class:`~mha.viz.artists.TextLayer` labels drawn in.

        Labels (tick labels: words, numbers of heads) change far less often than what they label:
        a temperature move changes every cell of a heatmap and no word. They are drawn into a second
        background, made again only when one of their texts changes, so that a move that leaves
        them alone redraws none of them (in the worked example they were a third of an update)."""
        from .artists import TextLayer

        layers = [artist for artist in self.moving if isinstance(artist, TextLayer)]
        if not layers:
            return self.background
        key = tuple(tuple(text.get_text() for text in layer.texts) for layer in layers)
        held = self.settled.get(id(self.figure))
        if held is None or held[0] != key:
            canvas = self.figure.canvas
            canvas.restore_region(self.background)
            for layer in layers:
                self.figure.draw_artist(layer)
            held = self.settled[id(self.figure)] = (key, canvas.copy_from_bbox(self.figure.bbox))
        return held[1]

    def _layout(self, values: Mapping):
        """The layout ``values`` need (``render.layout(**values)``; None: one figure serves all)."""
        layout = getattr(self.render, "layout", None)
        return layout(**values) if callable(layout) else None

    def plan_warm(self, specs: Mapping, values: Mapping) -> int:
        """List, for :meth:`warm_step`, one set of values per layout the discrete controls reach
        (a :class:`LiveFigure` with ``layout``: say, one figure per number of heads). Returns how many."""
        self.pending = []
        if not self.in_place or not callable(getattr(self.render, "layout", None)):
            return 0
        names = [name for name, spec in specs.items() if not isinstance(spec, (FloatRange, Text))]
        seen = {self._layout(values)}
        for combo in itertools.product(*(specs[name].grid for name in names)):
            wanted = {**values, **dict(zip(names, combo))}
            key = self._layout(wanted)
            if key not in seen:
                seen.add(key)
                self.pending.append(wanted)
        del self.pending[self.MAX_LAYOUTS :]
        return len(self.pending)

    def warm_step(self) -> bool:
        """Draw the figure of one more layout (while the kernel is idle); False when none is left."""
        if getattr(self, "pending", None):
            values = self.pending.pop(0)
            key = self._layout(values)
            if key not in self.figures:
                self.figures[key] = self._adopt(capture(self.render.draw, values, self.title, lambda fig: fig))
        return bool(getattr(self, "pending", None))

    def _new_figure_png(self, values: Mapping) -> bytes:
        try:
            key = tuple(values.items())
            hash(key)
        except TypeError:
            key = None
        if key in self.cache:
            self.cache.move_to_end(key)
            return self.cache[key]
        png = capture(self.render, values, self.title, self._encode)
        if key is not None:
            self.cache[key] = png
            if len(self.cache) > self.CACHE_SIZE:
                self.cache.popitem(last=False)
        return png

    def _encode(self, fig) -> bytes:
        """One draw on the canvas (a tight crop costs a second draw, 2-3 times the encoding), unless
        the first figure showed that this render draws outside its canvas."""
        from .glyphs import GlyphCanvas

        if self.fits_canvas is False:
            return figure_png(fig, colors=None)
        fig.patch.set_facecolor("white")
        fig.patch.set_alpha(1.0)
        GlyphCanvas(fig)
        fig.canvas.draw()
        if self.fits_canvas is None:
            inside = fig.get_tightbbox(fig.canvas.get_renderer())
            whole = fig.bbox_inches
            self.fits_canvas = bool(
                inside.x0 >= whole.x0 and inside.y0 >= whole.y0 and inside.x1 <= whole.x1 and inside.y1 <= whole.y1
            )
            if not self.fits_canvas:
                return figure_png(fig, colors=None)
        return canvas_png(fig, draw=False)

    def _adopt(self, fig):
        """``(fig, moving, background)``: ``fig`` kept as a persistent figure, opaque white like the
        book's frames, on its own Agg canvas (closing it in pyplot, which ``capture`` did, leaves it
        a bare one) that renders each glyph once (:mod:`mha.viz.glyphs`), its background
        drawn once when it names its artists."""
        from .glyphs import GlyphCanvas

        fig.patch.set_facecolor("white")
        fig.patch.set_alpha(1.0)
        GlyphCanvas(fig)
        artists = getattr(self.render, "artists", None)
        moving = artists(fig) if callable(artists) else None
        background = None
        if moving is not None:
            moving = sorted(moving, key=lambda artist: artist.get_zorder())  # as Figure.draw orders them
            for artist in moving:
                artist.set_animated(True)  # left out of the full draw: the background
            fig.canvas.draw()
            background = fig.canvas.copy_from_bbox(fig.bbox)
        return fig, moving, background


def settle_garbage() -> None:
    """Collect the garbage now and exempt what survives from later collections (``gc.freeze``).

    A notebook kernel holds many long-lived objects (models, figures, the chapters' data); a full
    collection, which Python starts on its own after enough allocations, walks all of them and
    paused an update for 100-170 ms on the 2-core CPU. Done once when an explorer is built, while
    the cell runs, later collections only walk what was made since. Objects are still freed as
    soon as nothing refers to them; only cycles among the frozen ones wait."""
    import gc

    gc.collect()
    gc.freeze()


def control_widget(name: str, spec: Control, value, *, live: bool):
    """The ipywidgets control of ``spec``: its live form, or (``live=False``) a slider/dropdown over
    its grid, as the static book shows it."""
    import ipywidgets as widgets

    common = {"description": label_of(name, spec), "style": {"description_width": "initial"}}
    if live and isinstance(spec, FloatRange):
        slider = {"continuous_update": True, "layout": widgets.Layout(width="28em"), **common}
        if spec.log:
            exponents = (math.log10(spec.lo), math.log10(spec.hi))
            step = (exponents[1] - exponents[0]) / 200
            fmt = ".0f" if isinstance(spec, IntRange) else ".3g"
            control = widgets.FloatLogSlider(
                value=value, base=10, min=exponents[0], max=exponents[1], step=step, readout_format=fmt, **slider
            )
        elif isinstance(spec, IntRange):
            control = widgets.IntSlider(value=value, min=spec.lo, max=spec.hi, step=spec.step, **slider)
        else:
            control = widgets.FloatSlider(value=value, min=spec.lo, max=spec.hi, step=spec.step, **slider)
    elif live and isinstance(spec, Text):
        control = widgets.Text(
            value=value,
            placeholder=spec.placeholder,
            continuous_update=False,
            layout=widgets.Layout(width="36em"),
            **common,
        )
    else:
        grid = spec.grid
        value = grid[spec.grid_start(value)]
        options = [(spec.show(v), v) for v in grid]
        if is_number(grid[0]):
            control = widgets.SelectionSlider(options=options, value=value, continuous_update=True, **common)
        else:
            control = widgets.Dropdown(options=options, value=value, **common)
    control.add_class("mha-explorer-control")
    return control


class LiveView:
    """The live UI of one explorer: a title, its controls, the figure, a status line, a caption.

    Args:
        specs, starts: the controls (name -> :class:`Control`) and the values they open on.
        live: True for the controls' live forms; False for the book's grid.
        picture: ``picture(values) -> (image bytes, format)``: the figure for these values.
        alt: ``alt(**values) -> str`` or None, the figure's text alternative.
        title, caption: as the explorer's.
    """

    def __init__(self, specs, starts, *, live: bool, picture, alt, title: str, caption: str, warm=None):
        import ipywidgets as widgets

        self.specs, self.live, self.picture, self.alt, self.title = specs, live, picture, alt, title
        self.inputs = {name: control_widget(name, spec, starts[name], live=live) for name, spec in specs.items()}
        # An HTML widget holding an <img> (not widgets.Image): the figure keeps a real alt text.
        self.image = widgets.HTML("")
        self.image.add_class("mha-explorer-image")
        self.data, self.format, self.alt_text = b"", "png", ""
        self.status = widgets.HTML("")
        self.status.add_class("mha-explorer-status")
        self.timings: list[float] = []  # ms per update, kernel side (what `make bench` times)
        self.shown: dict | None = None
        # ipykernel 7 may deliver two widget messages on two threads, and the warm steps run on the
        # event loop's: one lock keeps every draw (matplotlib's figures and its mathtext parser are
        # not thread-safe) to one thread at a time.
        self._lock = threading.Lock()
        self._wanted = False
        guard_matplotlib_hooks()
        parts = [widgets.HTML(f"<b>{html.escape(title)}</b>"), *self.inputs.values(), self.image, self.status]
        parts.append(widgets.HTML(f"<small>{html.escape(caption)}</small>"))
        self.widget = widgets.VBox(parts)
        self.widget.add_class("mha-explorer-live")
        for control in self.inputs.values():
            control.observe(self._on_change, names="value")
        self.show(self.values())
        self.warm = warm
        settle_garbage()
        self._schedule_warm()

    def _schedule_warm(self, delay: float = 0.3) -> bool:
        """Draw the other layouts (``warm()``, one per call) while the kernel is idle: each step is
        a callback of the kernel's event loop, run between messages, and waits while a change is
        drawn. Nothing is scheduled outside a running event loop (scripts, tests: see :meth:`warm_all`)."""
        if self.warm is None:
            return False
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False

        def step():
            if not self._lock.acquire(blocking=False):  # a change is being drawn: later
                loop.call_later(delay, step)
                return
            try:
                with DRAW_LOCK:
                    more = self.warm()
            finally:
                self._lock.release()
            if self._wanted:  # a change that came while this step held the lock
                self._on_change()
            if more:
                loop.call_later(0.05, step)

        loop.call_later(delay, step)
        return True

    def warm_all(self) -> None:
        """Draw every layout now (what the idle callbacks do over the first second or two)."""
        while self.warm is not None and self.warm():
            pass

    def values(self) -> dict:
        """The values ``render`` gets for the controls' current positions."""
        values = {}
        for name, control in self.inputs.items():
            spec, value = self.specs[name], control.value
            values[name] = spec.clean(value) if self.live and isinstance(spec, FloatRange) else value
        return values

    def _on_change(self, change=None) -> None:
        """Draw the latest values; a change during a draw only marks them wanted (coalescing): the
        thread that holds the lock draws them before it lets go."""
        guard_matplotlib_hooks()  # again: a later %matplotlib may have put the plain hooks back
        self._wanted = True
        while self._wanted and self._lock.acquire(blocking=False):
            try:
                while self._wanted:
                    self._wanted = False
                    self.show(self.values())
            finally:
                self._lock.release()

    def show(self, values: Mapping) -> None:
        """Compute the figure for ``values`` and show it; an error goes to the status line instead
        (a callback has no cell to raise in), the last good figure stays."""
        start = time.perf_counter()
        values = dict(values)
        try:
            with DRAW_LOCK:
                data, fmt = self.picture(values)
        except INPUT_ERRORS as error:
            self.status.value = _error_html(f"{type(error).__name__}: {error}")
            return
        except Exception:
            self.status.value = _error_html(traceback.format_exc(limit=-3), pre=True)
            return
        self.data, self.format, self.alt_text = data, fmt, self._alt(values)
        uri = f"data:image/{fmt};base64," + base64.b64encode(data).decode("ascii")
        self.image.value = (
            f'<img class="mha-explorer-figure" src="{uri}" alt="{html.escape(self.alt_text)}" '
            'style="max-width:100%;height:auto;display:block">'
        )
        self.status.value = ""
        self.shown = values
        self.timings.append((time.perf_counter() - start) * 1e3)

    def _alt(self, values) -> str:
        if self.alt is not None:
            try:
                text = self.alt(**values)
                if isinstance(text, str) and text.strip():
                    return text
            except Exception:  # an alt written for the grid may not know a live value
                pass
        return default_alt(self.title, values, {name: label_of(name, spec) for name, spec in self.specs.items()})


def _error_html(text: str, pre: bool = False) -> str:
    body = f"<pre style='white-space:pre-wrap'>{html.escape(text)}</pre>" if pre else html.escape(text)
    return f"<div style='color:#b00020' role='alert'>{body}</div>"


__all__ = [
    "DEFAULT_BUDGET_MS",
    "LiveFigure",
    "LiveView",
    "MODE_VARIABLE",
    "Painter",
    "budget_ms",
    "control_widget",
    "draw_function",
    "explorer_mode",
    "updates_in_place",
]
