"""Each figure drawn a second time for a phone, so that its words stay legible there.

A figure drawn for the desktop column (:data:`~mha.viz.describe.COLUMN_PX`) is shown on a phone
at the phone's column width, 0.4-0.6 of its drawn width: its smallest text, 11-15 px as drawn,
would be 5-8 CSS px. Its phone rendering keeps every text at its size in points and is at most
:func:`phone_width_px` pixels wide, so that in a phone's column its smallest text is at least
:data:`~mha.viz.describe.MIN_TEXT_PX`. :func:`phone_renderings` draws it in one of three ways:

* **restacked** (:func:`restacked`): a figure of a few panels is cut into its cells, each drawn
  exactly as the figure lays it out, and the cells are stacked one under another (two side by side
  where they fit), the suptitle wrapped above them;
* **narrower** (:func:`narrower`): any other figure is drawn narrower and laid out again, its titles
  wrapped, a legend beside its axes put under them;
* **its own** (:func:`phone_figure`): a figure that neither keeps legible (a grid of labelled cells)
  says how it is drawn for a phone, such as transposed.

Each way is measured: the rendering chosen is the one that fits with the fewest overlapping texts
(:func:`mha.viz.layout.overlapping_texts`), and it records that count beside the desktop figure's.

When the chapters are executed, :func:`mha.viz.describe.figure_output` draws each figure's phone
rendering, in English and, with its words in Chinese, for the Chinese edition, and stores it
beside the figure's Chinese twin (``locales/<language>/phone/<SHA-256 of the desktop PNG>.png``,
``index.json``). The book (``_ext/mha_figures.py``) shows it on a screen no wider than
:data:`MEDIA` through a ``<picture>`` element; the link under it still opens the desktop image.
``tests/book/test_figure_text.py`` holds each rendering to legible text and to no more overlapping texts
than its figure; ``tests/browser/test_browser_phone.py`` measures the text on a phone.
"""

from __future__ import annotations

import math
from contextlib import contextmanager, nullcontext

#: The text column of the narrowest phone the book is drawn for, in CSS pixels: a 360-px-wide
#: phone (measured in the built book: 328 px; a 390-px phone's column is 358 px).
PHONE_COLUMN_PX = 328
#: The screens that are shown the phone rendering (the book's column narrows below this width).
MEDIA = "(max-width: 40em)"
#: The narrowest phone rendering, relative to the desktop figure: a narrower one would crowd its
#: panels; such a figure keeps smaller text (``tests/book/test_figure_text.py`` finds none).
MIN_SHARE = 0.4
#: The most cells a figure is restacked in (a grid of 72 small heads is drawn narrower instead).
MAX_CELLS = 6
#: Drawn for a little more than the least legible size: a drawing's tight box is a pixel or two off.
MARGIN_PX = 0.2


def phone_width_px(
    width_px: float, text_px: float, min_text_px: float, column_px: float = PHONE_COLUMN_PX
) -> int | None:
    """The width (image pixels) to draw a figure ``width_px`` wide, whose smallest text is
    ``text_px`` tall as drawn, so that in a phone's column its smallest text is at least
    ``min_text_px``; ``None`` where the figure as drawn already is."""
    if width_px <= column_px or text_px * column_px / width_px >= min_text_px:
        return None
    return max(math.floor(column_px * text_px / (min_text_px + MARGIN_PX)), math.ceil(MIN_SHARE * width_px))


def _relayout(fig) -> None:
    """Lays the figure out again at its new size (a figure with no layout engine of its own was
    laid out once, by ``tight_layout``, at its old size)."""
    import warnings

    from matplotlib.layout_engine import PlaceHolderLayoutEngine

    engine = fig.get_layout_engine()
    if engine is not None and not isinstance(engine, PlaceHolderLayoutEngine):  # e.g. constrained: drawing lays out
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "not compatible with tight_layout": the old layout stays
        fig.tight_layout()


def _titles(fig) -> list:
    """``(text, the axes it belongs to or None)`` for each text of ``fig`` that may run wider than a
    phone's figure: its suptitle, each panel's titles and x-axis label."""
    found = [(getattr(fig, "_suptitle", None), None)]
    for ax in fig.axes:
        found += [(t, ax) for t in (ax.title, ax._left_title, ax._right_title, ax.xaxis.label)]
    return [(t, ax) for t, ax in found if t is not None and t.get_visible() and t.get_text().strip()]


def _wrap_titles(fig, width_px: float) -> None:
    """Wraps each of :func:`_titles` wider than its axes (the suptitle: than ``width_px``)."""
    renderer = fig.canvas.get_renderer()
    for text, ax in _titles(fig):
        room = width_px if ax is None else max(ax.bbox.width, 0.5 * width_px)
        if text.get_window_extent(renderer).width > room:
            _wrap(text, room)


@contextmanager
def resized(fig, share: float, height_share: float = 1.0):
    """``fig`` drawn ``share`` of its width (and ``height_share`` of its height: a phone scrolls down,
    and a figure as tall as before keeps its rows apart), every title or label wider than the figure
    wrapped, restored on leaving."""
    width, height = fig.get_size_inches()
    params = {name: getattr(fig.subplotpars, name) for name in ("left", "right", "bottom", "top", "wspace", "hspace")}
    positions = [(ax, ax.get_position(original=True), ax.get_position()) for ax in fig.axes]
    with _texts_kept([text for text, _ in _titles(fig)]):
        fig.set_size_inches(width * share, height * height_share, forward=False)
        _wrap_titles(fig, width * share * fig.dpi - 4)
        _relayout(fig)
        try:
            yield fig
        finally:
            fig.set_size_inches(width, height, forward=False)
            fig.subplots_adjust(**params)
            for ax, original, active in positions:
                ax.set_position(original, which="original")
                ax.set_position(active, which="active")


def png_size(png: bytes) -> tuple[int, int]:
    """``(width, height)`` of a PNG, from its header."""
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def _clusters(intervals: list[tuple[float, float]]) -> list[int]:
    """The cluster of each interval: intervals that overlap, directly or through others, share one
    (numbered in order along the axis)."""
    order = sorted(range(len(intervals)), key=lambda i: intervals[i][0])
    found, end, current = [0] * len(intervals), None, -1
    for i in order:
        lo, hi = intervals[i]
        if end is None or lo >= end:
            current += 1
            end = hi
        end = max(end, hi)
        found[i] = current
    return found


def cells(fig) -> list[list]:
    """``fig``'s panels as the cells of its grid, row by row: each cell the list of artists drawn in
    it (an axes, with any colorbar beside it). A text or legend of the figure itself (the suptitle
    aside) is a cell of its own where no panel holds it. ``[]`` for a figure of one panel."""
    renderer = fig.canvas.get_renderer()
    axes = [ax for ax in fig.axes if ax.get_visible()]
    bars = [ax for ax in axes if ax.get_label() == "<colorbar>"]
    panels = [ax for ax in axes if ax not in bars]
    if len(panels) < 2:
        return []
    boxes = [ax.get_position() for ax in panels]
    columns = _clusters([(b.x0, b.x1) for b in boxes])
    rows = _clusters([(-b.y1, -b.y0) for b in boxes])  # from the top
    grid = {}
    for ax, row, column in zip(panels, rows, columns):
        grid.setdefault((row, column), []).append(ax)
    for bar in bars:  # beside the panel nearest to it
        box = bar.get_position()
        near = min(panels, key=lambda ax: abs(ax.get_position().x1 - box.x0) + abs(ax.get_position().y0 - box.y0))
        for members in grid.values():
            if near in members:
                members.append(bar)
    own = {id(getattr(fig, name, None)) for name in ("_suptitle", "_supxlabel", "_supylabel")}
    loose = [t for t in fig.texts if id(t) not in own and t.get_visible() and t.get_text().strip()]
    loose += list(fig.legends)
    for artist in loose:
        box = artist.get_window_extent(renderer).transformed(fig.transFigure.inverted())
        inside = [key for key, members in grid.items() if _holds(members, box, renderer)]
        if inside:
            grid[inside[0]].append(artist)
        else:
            row = max([r for (r, c), members in grid.items() if _above(members, box)], default=-1)
            grid[(row + 0.5, box.x0)] = [artist]
    return [grid[key] for key in sorted(grid)]


def _holds(members, box, renderer) -> bool:
    from matplotlib.transforms import Bbox

    area = Bbox.union([m.get_position() for m in members if hasattr(m, "get_position") and callable(m.get_position)])
    return area.x0 <= box.x0 and box.x1 <= area.x1 and area.y0 <= box.y0 and box.y1 <= area.y1


def _above(members, box) -> bool:
    return min(m.get_position().y0 for m in members if hasattr(m, "get_subplotspec")) >= box.y1 - 1e-9


def _wrap(title, width_px: float) -> None:
    """Breaks each line of ``title`` (a text of the figure) into lines no wider than ``width_px``, as
    measured; its lines as written are kept on the text (wrapping again starts from them)."""
    import textwrap

    if not hasattr(title, "_mha_lines"):
        title._mha_lines = title.get_text().split("\n")
    lines = title._mha_lines
    renderer = title.figure.canvas.get_renderer()
    for columns in range(max(len(line) for line in lines), 11, -2):
        title.set_text("\n".join(textwrap.fill(line, columns) for line in lines))
        if title.get_window_extent(renderer).width <= width_px:
            return


def _unwrap(title, text: str) -> None:
    title.set_text(text)
    if hasattr(title, "_mha_lines"):
        del title._mha_lines


@contextmanager
def _texts_kept(texts: list):
    """Each of ``texts`` back as it was on leaving: its words (unwrapped), position, alignment and
    visibility, whatever a phone's layout did to it meanwhile."""
    kept = [(text, text.get_text(), text.get_position(), text.get_va(), text.get_visible()) for text in texts]
    try:
        yield
    finally:
        for text, words, position, va, visible in kept:
            _unwrap(text, words)
            text.set_position(position)
            text.set_va(va)
            text.set_visible(visible)


def restacked(fig, groups: list[list], target_px: int, draw_crop) -> tuple[bytes, int]:
    """One PNG of ``fig``'s cells (:func:`cells`) stacked one under another, each drawn exactly as the
    figure lays it out (nothing moves, so nothing crowds), consecutive cells of a row side by side where
    they fit ``target_px``; the suptitle, wrapped to the width, above the first. Returns the PNG and how
    many texts overlap in its crops. ``draw_crop(fig) -> PNG bytes`` draws what is visible."""
    import io

    from PIL import Image

    from . import layout

    everything = [artist for cell in groups for artist in cell]
    title = fig._suptitle if getattr(fig, "_suptitle", None) is not None and fig._suptitle.get_visible() else None
    runs, overlaps, images = _runs(fig, groups, target_px), 0, []
    with _texts_kept([title] if title is not None else []):
        try:
            for n, run in enumerate(runs):
                shown = {id(a) for a in run}
                for artist in everything:
                    artist.set_visible(id(artist) in shown)
                if title is not None:
                    title.set_visible(n == 0)
                    if n == 0:  # over the first crop's panels
                        boxes = [a.get_tightbbox(fig.canvas.get_renderer()) for a in run]
                        middle = (min(b.x0 for b in boxes) + max(b.x1 for b in boxes)) / 2
                        title.set_x(middle / fig.bbox.width)
                        title.set_y((max(b.y1 for b in boxes) + 4) / fig.bbox.height)
                        title.set_va("bottom")  # its lines grow upwards, clear of the panels
                        _wrap(title, target_px - 4)
                images.append(Image.open(io.BytesIO(draw_crop(fig))).convert("RGBA"))
                overlaps += len(layout.overlapping_texts(fig))
        finally:
            for artist in everything:
                artist.set_visible(True)
    gap = round(0.12 * fig.dpi)
    width, height = max(i.width for i in images), sum(i.height for i in images) + gap * (len(images) - 1)
    sheet = Image.new("RGBA", (width, height), images[0].getpixel((0, 0)))
    top = 0
    for image in images:
        sheet.paste(image, ((width - image.width) // 2, top))
        top += image.height + gap
    out = io.BytesIO()
    sheet.convert("RGB").save(out, "PNG", optimize=True)
    return out.getvalue(), overlaps


def _runs(fig, groups: list[list], target_px: int) -> list[list]:
    """Consecutive cells of one row drawn together where their panels, as laid out, fit ``target_px``."""
    renderer = fig.canvas.get_renderer()

    def extent(cell):
        boxes = [a.get_tightbbox(renderer) for a in cell]
        return min(b.x0 for b in boxes), max(b.x1 for b in boxes)

    runs = []
    for cell in groups:
        if runs and _same_row(runs[-1][-1], cell):
            lo, _ = extent([a for c in runs[-1] for a in c])
            _, hi = extent(cell)
            if hi - lo <= target_px:
                runs[-1].append(cell)
                continue
        runs.append([cell])
    return [[a for c in run for a in c] for run in runs]


def _same_row(a: list, b: list) -> bool:
    ya = [m.get_position().y0 for m in a if hasattr(m, "get_subplotspec")]
    yb = [m.get_position().y0 for m in b if hasattr(m, "get_subplotspec")]
    return bool(ya and yb) and abs(min(ya) - min(yb)) < 1e-6


@contextmanager
def _legends_below(fig, every: bool = False):
    """Each legend drawn beside its axes (:func:`mha.viz.layout.outside_legend`) put under it instead,
        its entries in two columns: beside, it would take the width a phone lacks (``every``: each legend,
    also one on the data, where it crowds a note there). Yields ``place()``,
        which moves each such legend under its axis labels as they are laid out now. Restored after."""
    swapped = []
    for ax in fig.axes:
        old = ax.get_legend()
        if old is None or (not every and old.get_bbox_to_anchor().x0 < ax.bbox.x1 - 1):
            continue
        labels = [t.get_text() for t in old.get_texts()]
        new = ax.legend(
            old.legend_handles,
            labels,
            title=old.get_title().get_text() or None,
            prop=old.get_texts()[0].get_fontproperties() if labels else None,  # the edition's font
            title_fontproperties=old.get_title().get_fontproperties(),
            loc="upper center",
            ncols=min(2, len(labels)),
            borderaxespad=0.0,
            frameon=old.get_frame_on(),
        )
        swapped.append((ax, old, new))

    def place():
        renderer = fig.canvas.get_renderer()
        for ax, _, new in swapped:
            below = ax.xaxis.get_tightbbox(renderer).y0 - 6
            new.set_bbox_to_anchor((0.5, ax.transAxes.inverted().transform((0, below))[1]), transform=ax.transAxes)

    try:
        yield place
    finally:
        for ax, old, new in swapped:
            new.remove()
            ax.legend_ = old


def narrower(
    fig, target_px: int, width_px: int, print_png, height_share: float = 1.0, every_legend: bool = False
) -> tuple[bytes, int]:
    """``fig`` drawn narrower (:func:`resized`), a legend beside its axes put under them, until its PNG
    is at most ``target_px`` wide: the PNG and how many of its texts overlap. ``print_png(fig) -> bytes``
    draws it."""
    from . import layout

    with resized(fig, target_px / width_px, height_share), _legends_below(fig, every_legend) as place:
        for _ in range(2):
            place()
            _relayout(fig)
        place()
        png = print_png(fig)
        for _ in range(6):  # the tight box may come out wider than the figure (labels outside it)
            drawn = png_size(png)[0]
            if drawn <= target_px:
                break
            fig.set_size_inches(fig.get_size_inches() * (0.98 * target_px / drawn, 1.0), forward=False)
            _wrap_titles(fig, fig.bbox.width - 4)
            _relayout(fig)
            place()
            png = print_png(fig)
        return png, len(layout.overlapping_texts(fig))


#: The attribute a figure that draws itself for a phone keeps its drawing under (:func:`phone_figure`).
OWN_DRAWING = "_mha_phone"


def phone_figure(fig, draw):
    """Says how ``fig`` is drawn for a phone, where neither restacking its panels nor drawing it
    narrower keeps its words apart (a grid of labelled cells): ``draw()`` returns a new figure of the
    same content laid out for a narrow column (a grid transposed). Returns ``fig``."""
    setattr(fig, OWN_DRAWING, draw)
    return fig


def phone_renderings(fig, width_px: int, text_pt: float, min_text_px: float, print_png, in_chinese=None) -> dict | None:
    """``{"en": (png, overlaps, how), "zh_CN": ... or None}``: ``fig`` drawn for a phone, with
    ``print_png(fig) -> bytes`` (and, for the Chinese edition, inside ``in_chinese(fig, draw)``, which
    calls ``draw(fig)`` with the figure's words in Chinese): a figure of several panels restacked
    (:func:`restacked`), else drawn narrower (:func:`narrower`); ``how`` says which. ``overlaps``:
    how many of its texts overlap. ``None`` where the figure as drawn is legible on a phone."""
    target = phone_width_px(width_px, text_pt * fig.dpi / 72.0, min_text_px)
    if target is None:
        return None

    def render(f):
        from . import layout

        f.canvas.draw()
        desktop, groups, tried = len(layout.overlapping_texts(f)), cells(f), []
        if len(groups) > MAX_CELLS:
            groups = []
        share = 1.0
        for _ in range(6 if groups else 0):  # restacked, the whole a little smaller where a crop is too wide
            with resized(f, share) if share < 1 else nullcontext():
                png, overlaps = restacked(f, groups, target, print_png)
            tried.append((png, overlaps, "restacked"))
            if png_size(png)[0] <= target:
                break
            share *= 0.97 * target / png_size(png)[0]
            if share < MIN_SHARE:
                break
        # taller, then with every legend under its axes, where the narrower figure still crowds its words
        for height, every in ((1.0, False), (1.3, False), (1.0, True), (1.3, True)):
            if tried and png_size(tried[-1][0])[0] <= target and tried[-1][1] <= desktop:
                break
            tried.append((*narrower(f, target, width_px, print_png, height, every), "narrower"))
        fitting = [t for t in tried if png_size(t[0])[0] <= target] or tried
        return min(fitting, key=lambda t: t[1])  # the fewest overlapping texts; restacked first among equals

    own = getattr(fig, OWN_DRAWING, None)
    if own is not None:
        import matplotlib.pyplot as plt

        from . import layout

        def render_own(f):
            renderer = f.canvas.get_renderer()
            for text, _ in _titles(f):  # a title wider than the phone's figure: wrapped
                if text.get_window_extent(renderer).width > target - 4:
                    _wrap(text, target - 4)
            _relayout(f)
            png = print_png(f)
            if png_size(png)[0] > target:
                return (*narrower(f, target, png_size(png)[0], print_png), "its own, narrower")
            return png, len(layout.overlapping_texts(f)), "its own"

        drawing = own()
        try:
            english = render_own(drawing)
            return {"en": english, "zh_CN": in_chinese(drawing, render_own) if in_chinese is not None else None}
        finally:
            plt.close(drawing)
    english = render(fig)
    return {"en": english, "zh_CN": in_chinese(fig, render) if in_chinese is not None else None}
