"""The single-head-limits chapter's hand-built figures: one head splitting its attention, and the relations
in a sentence.

The numbers come from :mod:`mha.chapters.single_head`.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..chapters.single_head import FEATURES, QUERY, SENTENCE, two_sentences
from .artists import heatmap_artists, set_heatmap, spines
from .live import LiveFigure
from .plotting import HEAD_COLORS, contrast_color, plot_attention


def _split_text(split: float) -> str:
    """``0.5`` as the book's frames print it (one decimal); a live value between tenths, two."""
    return f"{split:.1f}" if abs(split * 10 - round(split * 10)) < 1e-9 else f"{split:.2f}"


def render_split(split: float = 0.5):
    """Figure: the verb's attention row, and its output in both sentences (bars per feature)."""
    result = two_sentences(split)
    fig, (ax_w, ax_out) = plt.subplots(1, 2, figsize=(8.0, 3.0), gridspec_kw={"width_ratios": [1.2, 1]})
    plot_attention(
        result["weights"][QUERY : QUERY + 1],
        ["chases"],
        list(SENTENCE),
        ax=ax_w,
        title=f"the verb's weights (split = {_split_text(split)})",
        color=HEAD_COLORS[0],
        fontsize=10,
    )
    x = np.arange(len(FEATURES))
    ax_out.bar(x - 0.18, result["output"].numpy(), 0.36, label="cat chases mouse", color=HEAD_COLORS[0])
    ax_out.bar(x + 0.18, result["output_swapped"].numpy(), 0.36, label="mouse chases cat", color=HEAD_COLORS[1])
    ax_out.set_xticks(x, [f'"{f}" feature' for f in FEATURES])
    # room above the tallest bar (1.0) for the legend, which never covers a bar
    ax_out.set_ylim(0, 1.55)
    ax_out.set_yticks([0, 0.5, 1])
    ax_out.set_ylabel("value in the head's output")
    ax_out.set_title(f"output of 'chases' (distance {result['distance']:.2f})")
    ax_out.legend(loc="upper center", fontsize=9)
    fig.tight_layout()
    return fig


class SplitPlot(LiveFigure):
    """:func:`render_split` updated in place: the verb's weight row, the six bars and the titles."""

    def draw(self, split: float = 0.5):
        return render_split(split)

    def update(self, fig, split: float = 0.5):
        result = two_sentences(split)
        ax_w, ax_out = fig.axes[:2]
        weights = result["weights"][QUERY : QUERY + 1].to(dtype=result["output"].dtype).numpy()
        set_heatmap(ax_w, weights, color=contrast_color(ax_w.images[0], weights))
        ax_w.set_title(f"the verb's weights (split = {_split_text(split)})")
        heights = [*result["output"].tolist(), *result["output_swapped"].tolist()]
        for bar, height in zip(ax_out.patches, heights):
            bar.set_height(height)
        ax_out.set_title(f"output of 'chases' (distance {result['distance']:.2f})")

    def artists(self, fig):
        ax_w, ax_out = fig.axes[:2]
        return [*heatmap_artists(ax_w), ax_w.title, *ax_out.patches, ax_out.title, ax_out.get_legend(), *spines(ax_out)]
