"""Does a figure hide its own data? Measured on the drawn figure, in display pixels.

* :func:`overlapping_texts`: two drawn texts (labels, ticks, titles, legend entries) on top of each other;
* :func:`texts_over_data`: a text of an axes (a note, a value label) on a line, marker or error bar;
* :func:`legends_over_data`: a legend box on a line, marker, error bar or bar;
* :func:`hidden_lines`: a line drawn entirely on top of another, so that its legend entry names
  something the reader cannot see;
* :func:`empty_share`: how much of an axis lies outside its data (an axis far wider than its data
  squeezes every marker together).

:func:`place_labels` puts point labels where they overlap no other label, marker or line, and
:func:`outside_legend` puts a legend beside the axes rather than on them.

``tests/book/test_figure_layout.py`` holds the book's figures to these measures.
"""

from __future__ import annotations

import numpy as np

from . import figure_i18n

#: Samples per display pixel along a drawn line.
STEP_PX = 1.0


def _renderer(fig):
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def _px(fig, points: float) -> float:
    return points * fig.dpi / 72.0


def visible_texts(fig) -> list:
    """Texts drawn in ``fig``: :func:`~mha.viz.describe.drawn_texts`, less the labels of ticks that fall
    outside their axis's view (matplotlib keeps those but does not draw them); laid out first."""
    _renderer(fig)
    return figure_i18n.visible_texts(fig)


def _box(text, renderer, pad_px: float = 0.0):
    return text.get_window_extent(renderer).padded(pad_px)


def _overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def overlapping_texts(fig, pad_pt: float = 0.0) -> list[tuple[str, str]]:
    """Pairs of drawn texts whose boxes (each grown by ``pad_pt`` points) overlap."""
    renderer = _renderer(fig)
    texts = visible_texts(fig)
    boxes = [_box(t, renderer, _px(fig, pad_pt)) for t in texts]
    return [
        (texts[i].get_text(), texts[j].get_text())
        for i in range(len(texts))
        for j in range(i + 1, len(texts))
        if _overlap(boxes[i], boxes[j])
    ]


def _sample(points: np.ndarray, solid: bool) -> np.ndarray:
    """Points along a polyline, every :data:`STEP_PX` pixels (only the vertices when not ``solid``)."""
    points = points[np.isfinite(points).all(axis=1)]
    if not solid or len(points) < 2:
        return points
    out = [points[:1]]
    for a, b in zip(points[:-1], points[1:]):
        n = max(1, int(np.hypot(*(b - a)) / STEP_PX))
        out.append(a + (b - a) * (np.arange(1, n + 1)[:, None] / n))
    return np.concatenate(out)


def data_marks(ax) -> list[tuple[object, np.ndarray, float]]:
    """What ``ax`` draws of its data, as ``(artist, points (N, 2) in display pixels, radius in pixels)``:
    lines sampled along their length, markers and scatter points with their radius, error bars.
    Filled areas (a shaded region) and images are backgrounds, not marks."""
    from matplotlib.collections import LineCollection, PathCollection

    fig = ax.figure
    clip = ax.bbox
    marks = []

    def inside(points):
        keep = (points[:, 0] >= clip.x0 - 0.5) & (points[:, 0] <= clip.x1 + 0.5)
        keep &= (points[:, 1] >= clip.y0 - 0.5) & (points[:, 1] <= clip.y1 + 0.5)
        return points[keep]

    for line in ax.lines:
        if not line.get_visible() or not len(line.get_xydata()):
            continue
        display = line.get_transform().transform(np.asarray(line.get_xydata(), float))
        solid = line.get_linestyle() not in ("None", "none", "", " ")
        if solid:
            marks.append((line, inside(_sample(display, True)), _px(fig, line.get_linewidth()) / 2))
        if line.get_marker() not in (None, "None", "none", "", " "):
            marks.append((line, inside(display), _px(fig, line.get_markersize()) / 2))
    for coll in ax.collections:
        if not coll.get_visible():
            continue
        if isinstance(coll, PathCollection):
            offsets = coll.get_offset_transform().transform(np.asarray(coll.get_offsets(), float))
            sizes = coll.get_sizes()
            radius = _px(fig, float(np.sqrt(sizes.max())) / 2) if len(sizes) else 0.0
            marks.append((coll, inside(offsets), radius))
        elif isinstance(coll, LineCollection):
            transform = coll.get_transform()
            widths = coll.get_linewidths()
            radius = _px(fig, float(np.max(widths))) / 2 if len(widths) else 0.0
            for segment in coll.get_segments():
                marks.append((coll, inside(_sample(transform.transform(np.asarray(segment, float)), True)), radius))
    return [m for m in marks if len(m[1])]


def _bars(ax) -> list:
    from matplotlib.container import BarContainer

    return [p for c in ax.containers if isinstance(c, BarContainer) for p in c.patches if p.get_visible()]


def _hits(box, points: np.ndarray, radius: float) -> int:
    grown = box.padded(radius)
    inside = (
        (points[:, 0] > grown.x0) & (points[:, 0] < grown.x1) & (points[:, 1] > grown.y0) & (points[:, 1] < grown.y1)
    )
    return int(inside.sum())


def texts_over_data(fig, pad_pt: float = 1.5) -> list[tuple[str, str]]:
    """``(text, what it covers)`` for every text drawn inside an axes (``ax.texts``: notes, value and
    point labels) whose box, grown by ``pad_pt`` points, touches a line, marker or error bar there.
    A point label may sit next to its own point, not on it."""
    renderer = _renderer(fig)
    found = []
    for ax in fig.axes:
        marks = data_marks(ax)
        for text in ax.texts:
            if not text.get_visible() or not text.get_text().strip():
                continue
            box = _box(text, renderer, _px(fig, pad_pt))
            for artist, points, radius in marks:
                if _hits(box, points, radius):
                    found.append((text.get_text(), artist.get_label() or type(artist).__name__))
    return found


def legends_over_data(fig) -> list[tuple[str, str, int]]:
    """``(legend entries, what it covers, how many sampled points)`` for every drawn legend (of an
    axes, or of the figure) that covers a line, marker, error bar or bar of any axes."""
    renderer = _renderer(fig)
    legends = [ax.get_legend() for ax in fig.axes] + list(fig.legends)
    found = []
    for legend in legends:
        if legend is None or not legend.get_visible():
            continue
        box = legend.get_window_extent(renderer)
        entries = ", ".join(t.get_text() for t in legend.get_texts())
        for ax in fig.axes:
            for artist, points, radius in data_marks(ax):
                hits = _hits(box, points, radius)
                if hits:
                    found.append((entries, str(artist.get_label()), hits))
            for bar in _bars(ax):
                if _overlap(box, bar.get_window_extent(renderer)):
                    found.append((entries, "bar", 1))
    return found


def hidden_lines(ax, tolerance_px: float = 1.0) -> list[tuple[str, str]]:
    """``(hidden, on top)`` for every line that the legend of ``ax`` names and that lies, along all its length,
    within ``tolerance_px`` of one line drawn after it: the reader sees one line where the legend
    names two."""
    _renderer(ax.figure)
    legend = ax.get_legend()
    named = {t.get_text() for t in legend.get_texts()} if legend is not None else set()
    lines = [line for line in ax.lines if line.get_visible() and line.get_label() in named]
    samples = [_sample(line.get_transform().transform(np.asarray(line.get_xydata(), float)), True) for line in lines]
    found = []
    for i, (line, points) in enumerate(zip(lines, samples)):
        for other, others in zip(lines[i + 1 :], samples[i + 1 :]):
            if len(points) and len(others):
                if all(np.hypot(*(others - p).T).min() <= tolerance_px for p in points):
                    found.append((line.get_label(), other.get_label()))
                    break
    return found


def empty_share(ax, axis: str = "x") -> tuple[float, float]:
    """The shares of ``axis``'s span (``"x"`` or ``"y"``, on the axis's own scale) below the lowest
    data point and above the highest: ``(0.05, 0.05)`` is a 5 % margin each side. Data are the
    axes' scatter points and the vertices of its lines drawn in data coordinates."""
    from matplotlib.collections import PathCollection

    index = 0 if axis == "x" else 1
    values = []
    for coll in ax.collections:
        if isinstance(coll, PathCollection) and coll.get_offset_transform() == ax.transData:
            values.extend(np.asarray(coll.get_offsets(), float)[:, index])
    for line in ax.lines:
        if line.get_transform() == ax.transData:
            values.extend(np.asarray(line.get_xydata(), float)[:, index])
    scale = (ax.xaxis if axis == "x" else ax.yaxis).get_transform()
    low, high = sorted(scale.transform(np.array(ax.get_xlim() if axis == "x" else ax.get_ylim())))
    data = scale.transform(np.array([min(values), max(values)]))
    span = high - low
    return float((data[0] - low) / span), float((high - data[1]) / span)


# --------------------------------------------------------------------------------------------
# Placing what could hide data
# --------------------------------------------------------------------------------------------

#: Where a point label may go, in order of preference: (dx, dy) in points, and its alignment.
LABEL_SPOTS = (
    (4, 4, "left", "bottom"),
    (4, -4, "left", "top"),
    (-4, 4, "right", "bottom"),
    (-4, -4, "right", "top"),
    (6, 0, "left", "center"),
    (-6, 0, "right", "center"),
    (0, 6, "center", "bottom"),
    (0, -6, "center", "top"),
    (10, 10, "left", "bottom"),
    (-10, 10, "right", "bottom"),
    (10, -10, "left", "top"),
    (-10, -10, "right", "top"),
)


def place_labels(ax, points, labels, **text_kw) -> list:
    """Label each data point ``points[i]`` with ``labels[i]`` at the first spot of
    :data:`LABEL_SPOTS` where the label stays inside the axes and overlaps no label placed
    before (the axes's legend counts as one), no other text of the axes, and no marker or line but
    its own point; where no spot is free, at the one that covers least. Call it once the axes has
    its final size (after ``tight_layout``). Returns the annotations."""
    fig = ax.figure
    renderer = _renderer(fig)
    marks = data_marks(ax)
    taken = [_box(t, renderer) for t in ax.texts if t.get_visible() and t.get_text().strip()]
    if ax.get_legend() is not None:
        taken.append(ax.get_legend().get_window_extent(renderer))
    placed = []
    for (x, y), label in zip(points, labels):
        own = ax.transData.transform((x, y))
        best, best_cost = None, None
        for dx, dy, ha, va in LABEL_SPOTS:
            note = ax.annotate(label, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va, **text_kw)
            box = _box(note, renderer, _px(fig, 1.0))
            cost = sum(_overlap(box, other) for other in taken) * 100
            cost += 100 * (box.x0 < ax.bbox.x0 or box.x1 > ax.bbox.x1 or box.y0 < ax.bbox.y0 or box.y1 > ax.bbox.y1)
            for _, pts, radius in marks:
                pts = pts[np.hypot(*(pts - own).T) > 0.5]  # not its own point
                cost += _hits(box, pts, radius)
            if best_cost is None or cost < best_cost:
                if best is not None:
                    best.remove()
                best, best_cost = note, cost
            else:
                note.remove()
            if cost == 0:
                break
        taken.append(_box(best, renderer))
        placed.append(best)
    return placed


def outside_legend(ax, *, side: str = "right", **legend_kw):
    """A legend beside ``ax`` (``side`` "right") or below the figure's axes (``"below"``), never on the data."""
    if side == "right":
        return ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, **legend_kw)
    return ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), borderaxespad=0.0, **legend_kw)
