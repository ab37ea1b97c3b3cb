"""Small helpers for :class:`~mha.viz.live.LiveFigure` updates: find and change the artists a plot
function drew (heatmap images and their cell labels, bars, titles), so that a live explorer
changes one figure in place instead of drawing a new one.

A figure drawn by a chapter's plot function stays what the book shows; these helpers only read
it, or add artists that draw nothing (an empty cell label, an invisible marker) so that every
later value has an artist to change.
"""

from __future__ import annotations

import numpy as np
from matplotlib.artist import Artist
from matplotlib.ticker import FixedFormatter


def spines(*axes) -> list:
    """The spines of ``axes``: drawn over images and bars, so they move with them when blitting."""
    return [spine for ax in axes for spine in ax.spines.values()]


def suptitle(fig):
    """The figure's suptitle (a Text), or None."""
    return getattr(fig, "_suptitle", None)


def cell_texts(ax, shape, **style) -> dict:
    """The cell labels of a heatmap in ``ax``: ``(row, col) -> Text``, one per cell of ``shape``.

    A plot that labels only some cells (say, only non-zero ones) gets an empty, invisible-in-effect
    label for each other cell, with ``style`` (font size, alignment), so an update can write any
    cell. The labels are kept on the axes (``ax._mha_cells``) after the first call."""
    cells = getattr(ax, "_mha_cells", None)
    if cells is not None:
        return cells
    cells = {}
    for text in ax.texts:
        x, y = text.get_position()
        key = (int(round(y)), int(round(x)))
        if float(x).is_integer() and float(y).is_integer() and key not in cells:
            cells[key] = text
    style = {"ha": "center", "va": "center", **style}
    for i in range(shape[0]):
        for j in range(shape[1]):
            if (i, j) not in cells:
                cells[(i, j)] = ax.text(j, i, "", **style)
    ax._mha_cells = cells
    return cells


def set_heatmap(ax, values, *, fmt="{:.2f}", show=None, color=None) -> None:
    """Give the first image of ``ax`` new ``values`` (same shape) and rewrite its cell labels.

    ``show(v)`` says whether a cell is labelled (default: every cell); ``color(v)`` its label colour,
    or ``color`` an array of colours, one per cell (default: unchanged)."""
    values = np.asarray(values, dtype=float)
    ax.images[0].set_data(values)
    cells = cell_texts(ax, values.shape)
    for (i, j), v in np.ndenumerate(values):
        text = cells.get((i, j))
        if text is None:
            continue
        text.set_text(fmt.format(v) if show is None or show(v) else "")
        if color is not None:
            text.set_color(color(v) if callable(color) else color[i, j])


def heatmap_artists(ax) -> list:
    """What :func:`set_heatmap` changes: the image and the cell labels (plus the spines over them)."""
    return [*ax.images, *ax.texts, *spines(ax)]


def tick_label_texts(ax, which: str = "xy") -> list:
    """The Text of each major tick label of ``ax`` (``which``: ``"x"``, ``"y"`` or both)."""
    axes = [axis for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)) if name in which]
    return [tick.label1 for axis in axes for tick in axis.get_major_ticks()]


def set_tick_labels(ax, labels, which: str = "xy") -> None:
    """Rewrite the major tick labels of ``ax`` in place (positions and style kept), for a
    :class:`TextLayer` to draw; the formatter gets them too, so a full redraw agrees."""
    for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
        if name in which:
            axis.set_major_formatter(FixedFormatter(list(labels)))
            for tick, label in zip(axis.get_major_ticks(), labels):
                tick.label1.set_text(label)


class TextLayer(Artist):
    """Draws some Text artists (tick labels) that the rest of the figure leaves out.

    Blitting redraws only the artists that change; a whole axis (ticks, their labels, bounding
    boxes) costs 5-20 ms to draw, its labels alone a fraction of it. Given the labels, this artist
    hides them from the axis, which is then drawn once into the background, and draws only them
    at each change. Add it with ``fig.add_artist`` and list it among the moving artists."""

    def __init__(self, texts):
        super().__init__()
        self.texts = list(texts)
        for text in self.texts:
            text.set_visible(False)

    def draw(self, renderer):
        for text in self.texts:
            text.set_visible(True)
            text.draw(renderer)
            text.set_visible(False)


def text_layer(fig, texts) -> TextLayer:
    """A :class:`TextLayer` of ``texts`` added to ``fig``."""
    return fig.add_artist(TextLayer(texts))
