"""The worked example's "change the example" explorer: every intermediate of the worked example on the
reader's five words (scores, weights, the concatenated head outputs, the output), one heatmap each.

The numbers come from :mod:`mha.chapters.worked_edit`.
"""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

from ..chapters.worked import OUTPUT_FEATURES
from ..chapters.worked_edit import sentence_example
from .artists import set_tick_labels, spines, suptitle, text_layer, tick_label_texts
from .live import LiveFigure
from .plotting import head_color, use_style


def _panels(ex):
    """(title, values, column labels, colour map, colour limits) for each of the six panels."""
    heads = [f"h{h + 1}.d{j + 1}" for h in range(ex.num_heads) for j in range(ex.head_dim)]
    panels = []
    for h in range(ex.num_heads):
        panels.append((f"head {h + 1}: scores $QK^\\top$", ex.scores[h], ex.tokens, "RdBu_r", (-8.0, 8.0)))
    for h in range(ex.num_heads):
        cmap = matplotlib.colors.LinearSegmentedColormap.from_list("head", ["#ffffff", head_color(h)])
        panels.append((f"head {h + 1}: weights", ex.weights[h], ex.tokens, cmap, (0.0, 1.0)))
    for title, values, cols in (
        ("head outputs, concatenated (weights · $V$)", ex.concat, heads),
        ("output = concat · $W^O$", ex.output, OUTPUT_FEATURES),
    ):
        limit = max(1.0, float(values.abs().max()))
        panels.append((title, values, cols, "RdBu_r", (-limit, limit)))
    return panels


def _number(v: float, hi: float) -> str:
    """A cell's label: weights with two decimals, scores (whole numbers here) as they are."""
    return f"{v:.2f}" if hi <= 1.0 else f"{v:g}"


def _title(ex) -> str:
    return f"'{' '.join(ex.tokens)}', temperature {ex.temperature:g}"


#: The figure's size in inches: two panels abreast in three rows (scores, weights, outputs), so
#: that at 80 dpi it fits the book's column and its smallest text (9 pt) is 10 CSS px tall.
SIZE = (8.4, 8.2)


def plot_sentence_example(tokens="the cat saw the dog", temperature: float = 1.0):
    """Six heatmaps in three rows: both heads' scores, both heads' weights, then the concatenated
    head outputs and the output.

    Returns:
        matplotlib.figure.Figure
    """
    use_style()
    ex = sentence_example(tokens, temperature)
    fig = plt.figure(figsize=SIZE)
    grid = fig.add_gridspec(3, 2, left=0.1, right=0.99, top=0.92, bottom=0.08, hspace=0.62, wspace=0.22)
    for place, (title, values, cols, cmap, (lo, hi)) in zip(grid, _panels(ex)):
        ax = fig.add_subplot(place)
        values = np.asarray(values, dtype=float)
        ax.imshow(values, cmap=cmap, vmin=lo, vmax=hi, aspect="auto")
        ax.set_xticks(range(len(cols)), cols, rotation=45 if len(cols) > len(ex.tokens) else 0, fontsize=9)
        ax.set_yticks(range(len(ex.tokens)), ex.tokens, fontsize=9)
        ax.set_title(title, fontsize=10)
        if values.shape[1] <= len(ex.tokens):  # numbers on the 5 x 5 panels; colours alone on the wide ones
            for (i, j), v in np.ndenumerate(values):
                ax.text(j, i, _number(v, hi), ha="center", va="center", fontsize=9)
    fig.suptitle(_title(ex))
    return fig


class SentenceExample(LiveFigure):
    """:func:`plot_sentence_example` updated in place: the six images and their numbers, the
    colour limits of the two last panels, the words on the axes and the title."""

    def draw(self, tokens="the cat saw the dog", temperature: float = 1.0):
        return plot_sentence_example(tokens, temperature)

    def update(self, fig, tokens="the cat saw the dog", temperature: float = 1.0):
        ex = sentence_example(tokens, temperature)
        for k, (ax, (_, values, _, _, (lo, hi))) in enumerate(zip(fig.axes, _panels(ex))):
            values = np.asarray(values, dtype=float)
            ax.images[0].set_data(values)
            ax.images[0].set_clim(lo, hi)
            for text, v in zip(ax.texts, values.flat):
                text.set_text(_number(v, hi))
            set_tick_labels(ax, ex.tokens, "xy" if k < 4 else "y")
        suptitle(fig).set_text(_title(ex))

    def artists(self, fig):
        words = [t for k, ax in enumerate(fig.axes) for t in tick_label_texts(ax, "xy" if k < 4 else "y")]
        images = [part for ax in fig.axes for part in (*ax.images, *ax.texts)]
        return [*images, *spines(*fig.axes), text_layer(fig, words), suptitle(fig)]
