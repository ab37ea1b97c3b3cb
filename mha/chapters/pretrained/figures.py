"""The pretrained-heads chapter's figures: all-MiniLM-L6-v2's heads as thumbnails, the "it" margins, the
census, head similarity and the ablation study.

The numbers come from :mod:`mha.chapters.pretrained.pretrained_analysis`; the model is :mod:`mha.bert`.
"""

from __future__ import annotations

import math

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

from ...viz.layout import place_labels
from ...viz.live import LiveFigure
from ...viz.phone import phone_figure
from ...viz.plotting import head_color, use_style
from .pretrained_analysis import TWIN_SENTENCES
from .pretrained_twins import sentence_attention


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
    # half an inch a thumbnail: the figure fits the book's column, its labels at full size
    fig, ax = plt.subplots(figsize=(0.5 * num_heads + 1.0, 0.5 * num_layers + 1.4))
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
        f"{title}\n(each square: {seq_len} query rows × {seq_len} key columns, "
        f"{tokens[0]} top/left, {tokens[-1]} bottom/right)",
        fontsize=10,
    )
    fig.subplots_adjust(left=0.09, right=0.99, bottom=0.12, top=0.84)
    return fig


#: Heads per frame of the layer explorer (two rows of three), and the layout of their tiles.
HEADS_PER_FRAME = 6
TILE_COLUMNS = 3
#: The layer figure's size (inches), and its token labels' largest size (points): at 80 dpi the
#: frame is shown at full size in the book's column, its 8.5-point labels 9.4 CSS px tall.
LAYER_FIGSIZE = (8.4, 6.8)
TOKEN_PT = 8.5


def _shown_heads(num_heads: int, first_head: int) -> range:
    """The heads (0-based) a frame shows: ``HEADS_PER_FRAME`` from ``first_head`` (1-based)."""
    if (
        isinstance(first_head, bool)
        or not isinstance(first_head, (int, np.integer))
        or not 1 <= first_head <= num_heads
    ):
        raise ValueError(f"first_head must be a head number 1..{num_heads}, found {first_head!r}")
    return range(first_head - 1, min(num_heads, first_head - 1 + HEADS_PER_FRAME))


def _layer_mosaic(weights: np.ndarray, layer: int, heads: range, cols: int = TILE_COLUMNS):
    """Some heads of one layer tiled ``rows x cols`` in one array (NaN, shown white, between tiles)."""
    seq_len = weights.shape[-1]
    rows = math.ceil(HEADS_PER_FRAME / cols)
    step = seq_len + 2  # two white rows/columns between tiles, room for the head names
    mosaic = np.full((rows * step, cols * step - 2), np.nan)
    for k, head in enumerate(heads):
        r, c = divmod(k, cols)
        mosaic[r * step + 2 : r * step + 2 + seq_len, c * step : c * step + seq_len] = weights[layer, head]
    return mosaic, rows, step


def _label_layer(ax, tokens, heads: range, rows: int, step: int, cols: int = TILE_COLUMNS) -> None:
    """Token labels on both axes and each tile's head name (positions follow the sentence's length;
    a long typed sentence gets smaller labels, the book's twins ``TOKEN_PT``)."""
    seq_len = len(tokens)
    size = min(TOKEN_PT, 150.0 / seq_len)
    ax.set_xticks(
        [c * step + j for c in range(cols) for j in range(seq_len)], tokens * cols, rotation=90, fontsize=size
    )
    ax.set_yticks([r * step + 2 + i for r in range(rows) for i in range(seq_len)], tokens * rows, fontsize=size)
    names = [text for text in ax.texts if text.get_gid() == "head-name"]
    for k, head in enumerate(heads):
        r, c = divmod(k, cols)
        xy = (c * step + (seq_len - 1) / 2, r * step + 1.0)
        if k < len(names):
            names[k].set_position(xy)
            names[k].set_text(f"head {head + 1}")
        else:
            ax.text(*xy, f"head {head + 1}", ha="center", va="center", fontsize=10, gid="head-name")
    for name in names[len(heads) :]:
        name.set_text("")


def plot_layer_heads(weights: np.ndarray, tokens, layer: int, *, title: str, first_head: int = 1):
    """Six heads of one layer (0-based ``layer``; heads ``first_head`` to ``first_head + 5``, 1-based)
    with token labels, tiled 2 x 3 in one image.

    Shapes: weights (L, H, T, T). Returns the figure.
    """
    use_style()
    heads = _shown_heads(weights.shape[1], first_head)
    mosaic, rows, step = _layer_mosaic(weights, layer, heads)
    fig, ax = plt.subplots(figsize=LAYER_FIGSIZE)
    ax.imshow(mosaic, vmin=0.0, vmax=1.0, cmap="viridis", interpolation="nearest", aspect="auto")
    _label_layer(ax, list(tokens), heads, rows, step)
    ax.tick_params(length=0)
    for side in ("left", "bottom"):
        ax.spines[side].set_visible(False)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query")
    ax.set_title(title)
    fig.subplots_adjust(left=0.14, right=0.99, bottom=0.17, top=0.94)
    return fig


def layer_explorer(resolution: dict):
    """``render(layer, sentence, first_head=1)`` for :func:`mha.viz.widgets.explorer`: six heads of one
    layer on one twin.

    ``resolution`` is :func:`it_resolution`'s result; ``layer`` is 1-based, as the book counts.
    """

    def render(layer: int, sentence: str, first_head: int = 1):
        tokens = resolution["tokens"][sentence]
        return plot_layer_heads(
            resolution["maps"][sentence],
            tokens,
            layer - 1,
            title=_layer_title(layer, f"...because it was too {sentence}", first_head),
            first_head=first_head,
        )

    return render


def _layer_title(layer: int, words: str, first_head: int) -> str:
    last = first_head + HEADS_PER_FRAME - 1
    return f'Layer {layer}, heads {first_head}\N{EN DASH}{last}, "{words}"'


class SentenceHeads(LiveFigure):
    """Six heads of one layer of the model on a sentence the reader types (the pretrained-heads chapter's explorer).

    ``known`` maps sentences to ``(tokens, weights (L, H, T, T))`` already computed (the chapter's
    twins); any other sentence runs the model (:func:`~mha.chapters.pretrained.pretrained_twins.sentence_attention`),
    and the last few are kept, so that moving the layer or head slider computes nothing. ``update``
    changes the one figure in place, also for a sentence of another length (the tiles, labels and
    axes follow it). Held to 300 ms (``budget_ms``): a 20-token sentence runs the model once.
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

    def title(self, layer: int, sentence: str, first_head: int = 1) -> str:
        words = self.titles.get(sentence) or (sentence if len(sentence) <= 60 else sentence[:57] + "...")
        return _layer_title(layer, words, first_head)

    def alt(self, layer: int = 1, sentence: str = "", first_head: int = 1) -> str:
        """The alt text of a frame: which heads, which layer, which sentence, how to read it."""
        tokens, weights = self.attention(sentence)
        heads = _shown_heads(weights.shape[1], first_head)
        return (
            f"Attention maps of heads {heads.start + 1} to {heads.stop} of layer {layer} on "
            f'"{sentence}", {len(tokens)} tokens from {tokens[0]} to {tokens[-1]}: each map has a row '
            "per query token and a column per key token, brighter where the weight is larger."
        )

    def _check_layer(self, layer, num_layers: int) -> int:
        if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) or not 1 <= layer <= num_layers:
            raise ValueError(f"layer must be a layer number 1..{num_layers}, found {layer!r}")
        return int(layer)

    def draw(self, layer: int = 1, sentence: str = "", first_head: int = 1):
        tokens, weights = self.attention(sentence)
        layer = self._check_layer(layer, weights.shape[0])
        return plot_layer_heads(
            weights, tokens, layer - 1, title=self.title(layer, sentence, first_head), first_head=first_head
        )

    def update(self, fig, layer: int = 1, sentence: str = "", first_head: int = 1):
        tokens, weights = self.attention(sentence)
        layer = self._check_layer(layer, weights.shape[0])
        heads = _shown_heads(weights.shape[1], first_head)
        (ax,) = fig.axes
        mosaic, rows, step = _layer_mosaic(weights, layer - 1, heads)
        image = ax.images[0]
        if image.get_array().shape != mosaic.shape:  # another length: the tiles and labels move
            height, width = mosaic.shape
            image.set_extent((-0.5, width - 0.5, height - 0.5, -0.5))
            ax.set_xlim(-0.5, width - 0.5)
            ax.set_ylim(height - 0.5, -0.5)
        image.set_data(mosaic)
        if getattr(fig, "_mha_labels", None) != (tokens, heads):
            _label_layer(ax, list(tokens), heads, rows, step)
            fig._mha_labels = (tokens, heads)
        ax.set_title(self.title(layer, sentence, first_head))


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
    ax.set_xlabel('"tired": weight(it -> animal) - weight(it -> street)')
    ax.set_ylabel('"wide": weight(it -> street) - weight(it -> animal)')
    ax.set_title('Which heads send "it" to the right noun?')
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    # labelled once the axes has its size, each where it covers no other label and no point
    labelled = sorted({*map(tuple, np.argwhere(np.abs(x) + np.abs(y) > 0.3)), best})
    place_labels(
        ax,
        [(x[layer, head], y[layer, head]) for layer, head in labelled],
        [f"L{layer + 1}H{head + 1}" for layer, head in labelled],
        fontsize=8,
    )
    return fig


CENSUS_COLORS = {
    "previous": "#0072B2",
    "next": "#56B4E9",
    "self": "#009E73",
    "special": "#E69F00",
    "broad": "#CC79A7",
    "other": "#DDDDDD",
}


def plot_census(labels: np.ndarray, *, marks: np.ndarray | None = None, transposed: bool = False):
    """The census as a layers x heads grid coloured by label; ``marks`` (bool (L, H)) adds a star.
    ``transposed``: heads down, layers across (the figure a phone shows, :mod:`mha.viz.phone`)."""
    use_style()

    names = list(CENSUS_COLORS)
    codes = np.vectorize(names.index)(labels)  # (L, H) ints
    fig, ax = plt.subplots(figsize=(3.9, 6.4) if transposed else (8.0, 3.6))
    ax.imshow(
        codes.T if transposed else codes,
        cmap=matplotlib.colors.ListedColormap(list(CENSUS_COLORS.values())),
        vmin=-0.5,
        vmax=len(names) - 0.5,
    )
    for (layer, head), label in np.ndenumerate(labels):
        star = "*" if marks is not None and marks[layer, head] else ""
        short = {"previous": "prev", "special": "spec"}.get(label, label)
        x, y = (layer, head) if transposed else (head, layer)
        ax.text(x, y, short + star, ha="center", va="center", fontsize=8)
    heads = [str(h + 1) for h in range(labels.shape[1])]
    layers = [str(layer + 1) for layer in range(labels.shape[0])]
    (ax.set_yticks if transposed else ax.set_xticks)(range(labels.shape[1]), heads)
    (ax.set_xticks if transposed else ax.set_yticks)(range(labels.shape[0]), layers)
    ax.set_xlabel("layer" if transposed else "head")
    ax.set_ylabel("head" if transposed else "layer")
    ax.set_title('What each head mostly does (* = points "it" at the right noun in both twins)')
    if not transposed:
        phone_figure(fig, lambda: plot_census(labels, marks=marks, transposed=True))
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
    # one panel under the other: the figure fits the book's column, its text at full size
    fig, axes = plt.subplots(len(panels), 1, figsize=(6.8, 2.7 * len(panels) + 0.3), sharex=True, sharey=True)
    for ax, (title, curves, randoms, full) in zip(axes, panels):
        counts = next(iter(curves.values()))["removed"]
        _band(ax, counts, randoms, f"random: {len(randoms)} orders")
        for name, curve in curves.items():
            color, marker = PRUNING_STYLE[name]
            ax.plot(curve["removed"], curve["margin"], color=color, marker=marker, ms=3, label=name)
        ax.axhline(full, color="black", lw=0.8, ls=":", label="all heads")
        ax.set_title(title, fontsize=10)
        ax.set_ylabel("paraphrase margin")
    axes[-1].set_xlabel(f"heads removed (of {total})")
    axes[0].legend(fontsize=9, loc="lower left")
    axes[1].legend(fontsize=9, loc="lower left", ncol=2)
    fig.tight_layout()
    return fig


def plot_importance(fold: dict):
    """Each head as a point: x = the margin change when it alone is removed; y = the gradient's
    first-order estimate of that change (left) and Michel et al.'s importance score (right)."""
    use_style()
    change = np.asarray(fold["single_head_margin"]) - fold["full"]["rank"]["margin"]  # (L, H)
    fig, (ax_l, ax_r) = plt.subplots(1, 2, figsize=(8.6, 3.9))
    for layer in range(change.shape[0]):
        style = {"s": 16, "color": head_color(layer), "label": f"layer {layer + 1}"}
        ax_l.scatter(change[layer], np.asarray(fold["linear_change"])[layer], **style)
        ax_r.scatter(change[layer], np.asarray(fold["importance"])[layer], **style)
    low, high = change.min(), change.max()
    ax_l.plot([low, high], [low, high], color="grey", lw=0.8, label="estimate = change")
    ax_l.set_ylabel("first-order estimate: −∂ margin / ∂ gate")
    ax_l.set_title("The gradient predicts each removal", fontsize=10)
    ax_r.set_ylabel("importance score (mean |gradient|, per-layer ℓ2)")
    ax_r.set_title("Michel et al.'s score ranks by size, not by sign", fontsize=10)
    for ax in (ax_l, ax_r):
        ax.axvline(0.0, color="grey", lw=0.6)
        ax.set_xlabel("margin change when the head alone is removed")
    ax_l.legend(fontsize=9, ncol=2)
    fig.tight_layout()
    return fig


def plot_twin_counts(twins: dict):
    """Per head, how many twin pairs it resolves (left) and how many its weight moves toward the
    right noun in (right), out of all pairs."""
    use_style()
    num_pairs = twins["resolves"].shape[0]
    fig, axes = plt.subplots(1, 2, figsize=(8.6, 3.0))
    for ax, key, title in (
        (axes[0], "resolves", "pairs resolved\n(right noun in both twins)"),
        (axes[1], "moves", "pairs where the weight moves\ntoward the right noun"),
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
                fontsize=9,
                color="white" if value < num_pairs / 2 else "black",
            )
        ax.set_xticks(range(counts.shape[1]), [str(h + 1) for h in range(counts.shape[1])])
        ax.set_yticks(range(counts.shape[0]), [str(layer + 1) for layer in range(counts.shape[0])])
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_title(f"{title}, of {num_pairs}", fontsize=10)
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
    is :func:`~mha.chapters.pretrained.pretrained_analysis.it_resolution`'s result), titled as before."""
    known, titles = {}, {}
    for name, sentence in TWIN_SENTENCES.items():
        known[sentence] = (resolution["tokens"][name], resolution["maps"][name])
        titles[sentence] = f"...because it was too {name}"
    return SentenceHeads(model, tokenizer, known, titles)
