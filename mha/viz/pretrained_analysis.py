"""Chapter 7's figures: all-MiniLM-L6-v2's heads as thumbnails, the "it" margins, the census,
head similarity and the ablation study.

The numbers come from :mod:`mha.chapters.pretrained_analysis`; the model is :mod:`mha.bert`.
"""

from __future__ import annotations

import math

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

from ..chapters.pretrained_analysis import TWIN_SENTENCES
from ..chapters.pretrained_twins import sentence_attention
from .live import LiveFigure
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


def _layer_mosaic(weights: np.ndarray, layer: int, cols: int = 4):
    """One layer's heads tiled ``rows x cols`` in one array (NaN, shown white, between tiles)."""
    num_heads, seq_len = weights.shape[1], weights.shape[-1]
    rows = math.ceil(num_heads / cols)
    step = seq_len + 2  # two white rows/columns between tiles, room for the head names
    mosaic = np.full((rows * step, cols * step - 2), np.nan)
    for head in range(num_heads):
        r, c = divmod(head, cols)
        mosaic[r * step + 2 : r * step + 2 + seq_len, c * step : c * step + seq_len] = weights[layer, head]
    return mosaic, rows, step


def _label_layer(ax, tokens, num_heads: int, rows: int, step: int, cols: int = 4) -> None:
    """Token labels on both axes and each tile's head name (positions follow the sentence's length)."""
    seq_len = len(tokens)
    ax.set_xticks([c * step + j for c in range(cols) for j in range(seq_len)], tokens * cols, rotation=90, fontsize=6)
    ax.set_yticks([r * step + 2 + i for r in range(rows) for i in range(seq_len)], tokens * rows, fontsize=6)
    names = [text for text in ax.texts if text.get_gid() == "head-name"]
    for head in range(num_heads):
        r, c = divmod(head, cols)
        xy = (c * step + (seq_len - 1) / 2, r * step + 1.0)
        if head < len(names):
            names[head].set_position(xy)
        else:
            ax.text(*xy, f"head {head + 1}", ha="center", va="center", fontsize=9, gid="head-name")


def plot_layer_heads(weights: np.ndarray, tokens, layer: int, *, title: str):
    """The heads of one layer (0-based ``layer``) with token labels, tiled 3 x 4 in one image.

    Shapes: weights (L, H, T, T). Returns the figure.
    """
    use_style()
    mosaic, rows, step = _layer_mosaic(weights, layer)
    fig, ax = plt.subplots(figsize=(10.0, 2.6 * rows + 1.4))
    ax.imshow(mosaic, vmin=0.0, vmax=1.0, cmap="viridis", interpolation="nearest", aspect="auto")
    _label_layer(ax, list(tokens), weights.shape[1], rows, step)
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


class SentenceHeads(LiveFigure):
    """Every head of one layer of the model on a sentence the reader types (chapter 7's explorer).

    ``known`` maps sentences to ``(tokens, weights (L, H, T, T))`` already computed (the chapter's
    twins); any other sentence runs the model (:func:`~mha.chapters.pretrained_twins.sentence_attention`),
    and the last few are kept, so that moving the layer slider computes nothing. ``update`` changes
    the one figure in place, also for a sentence of another length (the tiles, labels and axes
    follow it). Held to 300 ms (``budget_ms``): a 20-token sentence runs the model once.
    """

    budget_ms = (300.0, 300.0)
    KEEP = 16

    def __init__(self, model, tokenizer, known: dict | None = None, titles: dict | None = None):
        self.model, self.tokenizer = model, tokenizer
        self.known = dict(known or {})
        self.titles = dict(titles or {})  # sentence -> how the title names it
        self.recent: dict = {}

    def attention(self, sentence: str):
        if sentence in self.known:
            return self.known[sentence]
        if sentence not in self.recent:
            if len(self.recent) >= self.KEEP:
                self.recent.pop(next(iter(self.recent)))
            self.recent[sentence] = sentence_attention(self.model, self.tokenizer, sentence)
        return self.recent[sentence]

    def title(self, layer: int, sentence: str) -> str:
        words = self.titles.get(sentence) or (sentence if len(sentence) <= 70 else sentence[:67] + "...")
        return f'Layer {layer}, "{words}"'

    def _check_layer(self, layer, num_layers: int) -> int:
        if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) or not 1 <= layer <= num_layers:
            raise ValueError(f"layer must be a layer number 1..{num_layers}, found {layer!r}")
        return int(layer)

    def draw(self, layer: int = 1, sentence: str = ""):
        tokens, weights = self.attention(sentence)
        layer = self._check_layer(layer, weights.shape[0])
        return plot_layer_heads(weights, tokens, layer - 1, title=self.title(layer, sentence))

    def update(self, fig, layer: int = 1, sentence: str = ""):
        tokens, weights = self.attention(sentence)
        layer = self._check_layer(layer, weights.shape[0])
        (ax,) = fig.axes
        mosaic, rows, step = _layer_mosaic(weights, layer - 1)
        image = ax.images[0]
        if image.get_array().shape != mosaic.shape:  # another length: the tiles and labels move
            height, width = mosaic.shape
            image.set_extent((-0.5, width - 0.5, height - 0.5, -0.5))
            ax.set_xlim(-0.5, width - 0.5)
            ax.set_ylim(height - 0.5, -0.5)
        image.set_data(mosaic)
        if getattr(fig, "_mha_tokens", None) != tokens:
            _label_layer(ax, list(tokens), weights.shape[1], rows, step)
            fig._mha_tokens = tokens
        ax.set_title(self.title(layer, sentence))


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


def _band(ax, counts, curves, label: str):
    """Shade the min-max band of ``curves`` (R, K) and draw their median."""
    curves = np.asarray(curves)
    ax.fill_between(counts, curves.min(axis=0), curves.max(axis=0), color="grey", alpha=0.25, lw=0, label=label)
    ax.plot(counts, np.median(curves, axis=0), color="grey", lw=1.0, ls="--", label="random: median")


PRUNING_STYLE = {
    "least harmful first": ("#0072B2", "o"),
    "ablation": ("#0072B2", "o"),
    "most harmful first": ("#D55E00", "v"),
    "importance": ("#009E73", "s"),
    "greedy": ("#CC79A7", "^"),
}


def plot_pruning(study: dict):
    """Paraphrase margin as heads are removed: ranked and judged on all pairs (left), then ranked on
    one half and judged on the other (one panel per fold), each against the band of random orders."""
    use_style()
    total = np.asarray(study["single_head"]["margin"]).size  # every head of every layer: L x H
    panels = [("ranked and judged on all pairs", study["pruning"], study["random"]["margin"], study["full"]["margin"])]
    for number, fold in enumerate(study["splits"], start=1):
        title = (
            f"fold {number}: ranked on {len(fold['rank_pairs'])} pairs, judged on the other {len(fold['eval_pairs'])}"
        )
        curves = {k: fold["held_out"][k] for k in ("ablation", "importance", "greedy")}
        panels.append((title, curves, fold["random_held_out"]["margin"], fold["full"]["eval"]["margin"]))
    fig, axes = plt.subplots(1, len(panels), figsize=(5.0 * len(panels), 4.0), sharey=True)
    for ax, (title, curves, randoms, full) in zip(axes, panels):
        counts = next(iter(curves.values()))["removed"]
        _band(ax, counts, randoms, f"random: {len(randoms)} orders")
        for name, curve in curves.items():
            color, marker = PRUNING_STYLE[name]
            ax.plot(curve["removed"], curve["margin"], color=color, marker=marker, ms=3, label=name)
        ax.axhline(full, color="black", lw=0.8, ls=":", label="all heads")
        ax.set_xlabel(f"heads removed (of {total})")
        ax.set_title(title, fontsize=9)
    axes[0].set_ylabel("paraphrase margin")
    axes[0].legend(fontsize=7)
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_importance(fold: dict):
    """Each head as a point: x = the margin change when it alone is removed; y = the gradient's
    first-order estimate of that change (left) and Michel et al.'s importance score (right)."""
    use_style()
    change = np.asarray(fold["single_head_margin"]) - fold["full"]["rank"]["margin"]  # (L, H)
    fig, (ax_l, ax_r) = plt.subplots(1, 2, figsize=(10.0, 4.0))
    for layer in range(change.shape[0]):
        style = {"s": 16, "color": head_color(layer), "label": f"layer {layer + 1}"}
        ax_l.scatter(change[layer], np.asarray(fold["linear_change"])[layer], **style)
        ax_r.scatter(change[layer], np.asarray(fold["importance"])[layer], **style)
    low, high = change.min(), change.max()
    ax_l.plot([low, high], [low, high], color="grey", lw=0.8, label="estimate = change")
    ax_l.set_ylabel("first-order estimate: -d margin / d gate")
    ax_l.set_title("The gradient predicts each removal", fontsize=10)
    ax_r.set_ylabel("importance score (mean |gradient|, per-layer l2)")
    ax_r.set_title("Michel et al.'s score ranks by size, not by sign", fontsize=10)
    for ax in (ax_l, ax_r):
        ax.axvline(0.0, color="grey", lw=0.6)
        ax.set_xlabel("margin change when the head alone is removed")
    ax_l.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig


def plot_twin_counts(twins: dict):
    """Per head, how many twin pairs it resolves (left) and how many its weight moves toward the
    right noun in (right), out of all pairs."""
    use_style()
    num_pairs = twins["resolves"].shape[0]
    fig, axes = plt.subplots(1, 2, figsize=(11.0, 3.4))
    for ax, key, title in (
        (axes[0], "resolves", "pairs resolved (right noun in both twins)"),
        (axes[1], "moves", "pairs where the weight moves toward the right noun"),
    ):
        counts = twins[key].sum(axis=0)  # (L, H)
        image = ax.imshow(counts, vmin=0, vmax=num_pairs, cmap="viridis")
        for (layer, head), value in np.ndenumerate(counts):
            ax.text(
                head,
                layer,
                str(value),
                ha="center",
                va="center",
                fontsize=7,
                color="white" if value < num_pairs / 2 else "black",
            )
        ax.set_xticks(range(counts.shape[1]), [str(h + 1) for h in range(counts.shape[1])])
        ax.set_yticks(range(counts.shape[0]), [str(layer + 1) for layer in range(counts.shape[0])])
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_title(f"{title}, of {num_pairs}", fontsize=9)
        fig.colorbar(image, ax=ax, shrink=0.8)
    fig.tight_layout()
    return fig


def plot_value_norms(norms: dict, labels: np.ndarray):
    """Each head as a point: x = the share of its weight on [CLS], y = the share of its output's
    norm that comes from [CLS] (Kobayashi et al. 2020), the census's parking heads in their colour."""
    use_style()
    fig, ax = plt.subplots(figsize=(6.0, 4.6))
    special = labels == "special"
    for mask, name in ((special, "special ([CLS]-parking)"), (~special, "other labels")):
        color = CENSUS_COLORS["special"] if name.startswith("special") else "#555555"
        ax.scatter(norms["cls_weight"][mask], norms["cls_norm_share"][mask], s=18, color=color, label=name)
    ax.plot([0, 1], [0, 1], color="grey", lw=0.8, label="norm share = weight share")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("share of the weight on [CLS]")
    ax.set_ylabel("share of ||A f(x)|| from [CLS]")
    ax.set_title("Weight on [CLS] is not what [CLS] contributes")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def twin_sentence_heads(model, tokenizer, resolution: dict) -> SentenceHeads:
    """The chapter's explorer: :class:`SentenceHeads` that already knows the two twins (``resolution``
    is :func:`~mha.chapters.pretrained_analysis.it_resolution`'s result), titled as before."""
    known, titles = {}, {}
    for name, sentence in TWIN_SENTENCES.items():
        known[sentence] = (resolution["tokens"][name], resolution["maps"][name])
        titles[sentence] = f"...because it was too {name}"
    return SentenceHeads(model, tokenizer, known, titles)
