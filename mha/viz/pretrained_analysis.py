"""Chapter 7's figures: all-MiniLM-L6-v2's heads as thumbnails, the "it" margins, the census,
head similarity and the ablation study.

The numbers come from :mod:`mha.chapters.pretrained_analysis`; the model is :mod:`mha.bert`.
"""

from __future__ import annotations

import math

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

from .plotting import head_color, use_style


def plot_all_heads(weights: np.ndarray, tokens, *, title: str):
    """Every head of every layer as a thumbnail heatmap: rows = layers, columns = heads.

    The thumbnails are tiled into one image (one ``imshow``, fast to draw), separated by white.

    Shapes: weights (L, H, T, T). Returns the figure.
    """
    use_style()
    num_layers, num_heads, seq_len, _ = weights.shape
    step = seq_len + 1  # one white row/column between thumbnails
    mosaic = np.full((num_layers * step - 1, num_heads * step - 1), np.nan)
    for layer in range(num_layers):
        for head in range(num_heads):
            mosaic[layer * step : layer * step + seq_len, head * step : head * step + seq_len] = weights[layer, head]
    fig, ax = plt.subplots(figsize=(1.0 * num_heads + 1.0, 1.0 * num_layers + 1.2))
    ax.imshow(mosaic, vmin=0.0, vmax=1.0, cmap="viridis", interpolation="nearest")
    centres = np.arange(num_heads) * step + (seq_len - 1) / 2
    ax.set_xticks(centres, [str(h + 1) for h in range(num_heads)])
    ax.set_yticks(np.arange(num_layers) * step + (seq_len - 1) / 2, [str(layer + 1) for layer in range(num_layers)])
    ax.tick_params(length=0)
    for side in ("left", "bottom"):
        ax.spines[side].set_visible(False)
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_title(
        f"{title}\n(each square: {seq_len} query rows x {seq_len} key columns, "
        f"{tokens[0]} top/left, {tokens[-1]} bottom/right)",
        fontsize=10,
    )
    fig.subplots_adjust(left=0.06, right=0.99, bottom=0.08, top=0.88)
    return fig


def plot_layer_heads(weights: np.ndarray, tokens, layer: int, *, title: str):
    """The heads of one layer (0-based ``layer``) with token labels, tiled 3 x 4 in one image.

    Shapes: weights (L, H, T, T). Returns the figure.
    """
    use_style()
    num_heads, seq_len = weights.shape[1], weights.shape[-1]
    cols = 4
    rows = math.ceil(num_heads / cols)
    step = seq_len + 2  # two white rows/columns between tiles, room for the head names
    mosaic = np.full((rows * step, cols * step - 2), np.nan)
    for head in range(num_heads):
        r, c = divmod(head, cols)
        mosaic[r * step + 2 : r * step + 2 + seq_len, c * step : c * step + seq_len] = weights[layer, head]
    fig, ax = plt.subplots(figsize=(10.0, 2.6 * rows + 1.4))
    ax.imshow(mosaic, vmin=0.0, vmax=1.0, cmap="viridis", interpolation="nearest", aspect="auto")
    for head in range(num_heads):
        r, c = divmod(head, cols)
        ax.text(c * step + (seq_len - 1) / 2, r * step + 1.0, f"head {head + 1}", ha="center", va="center", fontsize=9)
    ax.set_xticks([c * step + j for c in range(cols) for j in range(seq_len)], tokens * cols, rotation=90, fontsize=6)
    ax.set_yticks([r * step + 2 + i for r in range(rows) for i in range(seq_len)], tokens * rows, fontsize=6)
    ax.tick_params(length=0)
    for side in ("left", "bottom"):
        ax.spines[side].set_visible(False)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query")
    ax.set_title(title)
    fig.subplots_adjust(left=0.09, right=0.99, bottom=0.13, top=0.94)
    return fig


def layer_explorer(resolution: dict):
    """``render(layer, sentence)`` for :func:`mha.widgets.explorer`: one layer's 12 heads on one twin.

    ``resolution`` is :func:`it_resolution`'s result; ``layer`` is 1-based, as the book counts.
    """

    def render(layer: int, sentence: str):
        tokens = resolution["tokens"][sentence]
        return plot_layer_heads(
            resolution["maps"][sentence], tokens, layer - 1, title=f'Layer {layer}, "...because it was too {sentence}"'
        )

    return render


def plot_it_margins(resolution: dict):
    """Each head as a point: x = the "it" -> antecedent margin in the "tired" twin, y = in the
    "wide" twin. Heads in the upper-right quadrant point "it" at the right noun in both."""
    use_style()

    x, y = resolution["margin:tired"], resolution["margin:wide"]
    fig, ax = plt.subplots(figsize=(6.4, 5.0))
    for layer in range(x.shape[0]):
        ax.scatter(x[layer], y[layer], s=22, color=head_color(layer), label=f"layer {layer + 1}")
    ax.axhline(0.0, color="grey", lw=0.8)
    ax.axvline(0.0, color="grey", lw=0.8)
    xlim, ylim = ax.get_xlim(), ax.get_ylim()
    ax.fill_between([0.0, xlim[1]], 0.0, ylim[1], color="#009E73", alpha=0.08, lw=0)  # "resolves"
    ax.text(xlim[1], ylim[1], "right noun in both ", ha="right", va="top", fontsize=8, color="#009E73")
    ax.set_xlim(xlim)
    ax.set_ylim(ylim)
    best = np.unravel_index(np.minimum(x, y).argmax(), x.shape)  # the best "resolver"
    for layer, head in {*map(tuple, np.argwhere(np.abs(x) + np.abs(y) > 0.3)), best}:
        ax.annotate(
            f"L{layer + 1}H{head + 1}",
            (x[layer, head], y[layer, head]),
            fontsize=8,
            xytext=(4, 4),
            textcoords="offset points",
        )
    ax.set_xlabel('"tired": weight(it -> animal) - weight(it -> street)')
    ax.set_ylabel('"wide": weight(it -> street) - weight(it -> animal)')
    ax.set_title('Which heads send "it" to the right noun?')
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    return fig


CENSUS_COLORS = {
    "previous": "#0072B2",
    "next": "#56B4E9",
    "self": "#009E73",
    "special": "#E69F00",
    "broad": "#CC79A7",
    "other": "#DDDDDD",
}


def plot_census(labels: np.ndarray, *, marks: np.ndarray | None = None):
    """The census as a layers x heads grid coloured by label; ``marks`` (bool (L, H)) adds a star."""
    use_style()

    names = list(CENSUS_COLORS)
    codes = np.vectorize(names.index)(labels)  # (L, H) ints
    fig, ax = plt.subplots(figsize=(8.0, 3.6))
    ax.imshow(
        codes, cmap=matplotlib.colors.ListedColormap(list(CENSUS_COLORS.values())), vmin=-0.5, vmax=len(names) - 0.5
    )
    for (layer, head), label in np.ndenumerate(labels):
        star = "*" if marks is not None and marks[layer, head] else ""
        short = {"previous": "prev", "special": "spec"}.get(label, label)
        ax.text(head, layer, short + star, ha="center", va="center", fontsize=7)
    ax.set_xticks(range(labels.shape[1]), [str(h + 1) for h in range(labels.shape[1])])
    ax.set_yticks(range(labels.shape[0]), [str(layer + 1) for layer in range(labels.shape[0])])
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_title('What each head mostly does (* = points "it" at the right noun in both twins)')
    fig.tight_layout()
    return fig


def plot_similarity(similarities: dict, num_heads: int):
    """Head similarity matrices side by side (title -> (L·H, L·H) matrix), lines between layers."""
    use_style()
    fig, axes = plt.subplots(1, len(similarities), figsize=(5.2 * len(similarities) + 0.8, 4.8), squeeze=False)
    for ax, (title, similarity) in zip(axes[0], similarities.items()):
        image = ax.imshow(similarity, vmin=0.0, vmax=1.0, cmap="viridis")
        for edge in range(num_heads, similarity.shape[0], num_heads):
            ax.axhline(edge - 0.5, color="white", lw=0.6)
            ax.axvline(edge - 0.5, color="white", lw=0.6)
        centres = np.arange(num_heads / 2 - 0.5, similarity.shape[0], num_heads)
        ax.set_xticks(centres, [f"L{layer + 1}" for layer in range(len(centres))])
        ax.set_yticks(centres, [f"L{layer + 1}" for layer in range(len(centres))])
        ax.set_xlabel("head (grouped by layer)")
        ax.set_ylabel("head (grouped by layer)")
        ax.set_title(title)
    fig.colorbar(image, ax=list(axes[0]), label="cosine similarity")
    return fig


def plot_single_head_ablation(study: dict):
    """The change in margin when each head alone is removed (negative = the head helped)."""
    use_style()
    change = study["single_head"]["margin"] - study["full"]["margin"]  # (L, H)
    limit = float(np.abs(change).max())
    fig, ax = plt.subplots(figsize=(8.0, 3.6))
    image = ax.imshow(change, cmap="RdBu", vmin=-limit, vmax=limit)
    ax.set_xticks(range(change.shape[1]), [str(h + 1) for h in range(change.shape[1])])
    ax.set_yticks(range(change.shape[0]), [str(layer + 1) for layer in range(change.shape[0])])
    ax.set_xlabel("head removed")
    ax.set_ylabel("layer")
    ax.set_title("Paraphrase margin after removing one head, minus the full model's")
    fig.colorbar(image, ax=ax, label="change in margin")
    fig.tight_layout()
    return fig


def plot_pruning(study: dict):
    """Margin and accuracy as more and more heads are removed, in each order of the study."""
    use_style()
    total = np.asarray(study["single_head"]["margin"]).size  # every head of every layer: L x H
    fig, (ax_m, ax_a) = plt.subplots(1, 2, figsize=(10.0, 3.8))
    for name, curve in study["pruning"].items():
        ax_m.plot(curve["removed"], curve["margin"], marker="o", ms=3, label=name)
        ax_a.plot(curve["removed"], curve["accuracy"], marker="o", ms=3, label=name)
    for ax, what in ((ax_m, "paraphrase margin"), (ax_a, "retrieval accuracy")):
        ax.set_xlabel(f"heads removed (of {total})")
        ax.set_ylabel(what)
        ax.set_title(f"{what.capitalize()} as heads are removed")
    ax_a.set_ylim(0.0, 1.05)
    ax_m.legend(fontsize=8)
    fig.tight_layout()
    return fig
