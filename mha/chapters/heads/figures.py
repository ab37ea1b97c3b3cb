"""The figures and explorers of the single-head-limits chapter and the head-count experiments.

* One head splitting its attention, and the relations in a sentence (numbers from
  :mod:`~mha.chapters.heads.single_head`).
* One query's lookup (:func:`plot_worked_row`), and the temperature explorer's softmax(scores /
  temperature) as bars (:func:`plot_temperature`), from :mod:`~mha.chapters.heads.softmax_demo`.
* Each head's attention map, accuracy against the number of heads, the grid of (relations, heads), and
  learning curves (accuracy against training steps), from :mod:`~mha.chapters.heads.head_count` (the
  cached grid and curves).
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import torch

from ...attention import entropy_bits
from ...viz.artists import heatmap_artists, set_heatmap, set_tick_labels, spines, suptitle, text_layer, tick_label_texts
from ...viz.layout import outside_legend
from ...viz.live import LiveFigure
from ...viz.plotting import HEAD_COLORS, contrast_color, head_color, plot_attention, plot_heads, use_style
from .head_count import (
    CURVE_SETTINGS,
    DEFAULT_RELATIONS,
    GRID_HEADS,
    GRID_SEEDS,
    READOUT_NAMES,
    cached_curves,
    cached_maps,
    cached_run,
    grid_summary,
)
from .single_head import FEATURES, QUERY, SENTENCE, two_sentences
from .softmax_demo import SCORES, TOKENS, VALUES, softmax_with_temperature, worked_row


# ----------------------------------------------------------------------------------------------
# single_head
# ----------------------------------------------------------------------------------------------
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


# ----------------------------------------------------------------------------------------------
# softmax_demo
# ----------------------------------------------------------------------------------------------
def plot_temperature(temperature: float = 1.0, *, scores=SCORES, tokens=TOKENS, ax=None):
    """Bar chart of softmax(scores / temperature), one bar per token, entropy in the title.

    Returns:
        matplotlib.figure.Figure
    """
    probs = softmax_with_temperature(scores, temperature)
    if len(tokens) != probs.shape[-1]:
        raise ValueError(f"tokens must name each of the {probs.shape[-1]} scores, found {len(tokens)}")
    use_style()
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 3.2))
    fig = ax.figure
    values = probs.tolist()
    positions = range(len(tokens))
    ax.bar(positions, values, color=HEAD_COLORS[0])
    for i, p in enumerate(values):
        ax.text(i, p + 0.02, f"{p:.2f}", ha="center", va="bottom", fontsize=9)
    ax.set_xticks(list(positions), [f"{t}\n(score {s:g})" for t, s in zip(tokens, scores)], fontsize=9)
    ax.set_ylim(0.0, 1.1)
    ax.set_xlabel("key token")
    ax.set_ylabel("attention weight")
    ax.set_title(f"softmax(scores / {temperature:g}): entropy {entropy_bits(probs).item():.2f} bits")
    fig.tight_layout()
    return fig


def _token_labels(tokens) -> list[str]:
    """Token names with their position (from 1), so that the two "the"s are told apart."""
    return [f"{t} ({i})" for i, t in enumerate(tokens, start=1)]


def plot_worked_row(temperature: float = 1.0):
    """Figure: one query's lookup in three panels: scores, then softmax weights, then the output.

    The third panel draws each value vector as a point (marker area proportional to its weight)
    and the output, their weighted average, as a star: it lies inside the values' convex hull.

    Returns:
        matplotlib.figure.Figure
    """
    row = worked_row(temperature)
    use_style()
    fig, (ax_s, ax_w, ax_o) = plt.subplots(1, 3, figsize=(6.9, 2.8), gridspec_kw={"width_ratios": [1, 1, 1.15]})
    rows = list(range(len(TOKENS)))
    for ax, values, title, xlabel in (
        (ax_s, row["scores"].tolist(), "1. scores: query · key", "score"),
        (ax_w, row["weights"].tolist(), "2. softmax: weights", "attention weight"),
    ):
        ax.barh(rows, values, color=HEAD_COLORS[0])
        for i, value in enumerate(values):
            ax.text(value, i, f" {value:.2f}", ha="left", va="center", fontsize=8)
        ax.set_xlim(0.0, max(values) * 1.4)
        ax.set_yticks(rows, _token_labels(TOKENS) if ax is ax_s else [""] * len(rows), fontsize=9)
        ax.invert_yaxis()  # position 1 on top
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(xlabel, fontsize=9)
        ax.tick_params(axis="x", labelsize=8)
    ax_s.set_ylabel("key token", fontsize=9)
    points = torch.tensor(VALUES, dtype=torch.float64)  # (S, Dh) = (5, 2)
    hull = [1, 4, 2, 0]  # cat, mouse, chased, the: the corners of the values' convex hull
    ax_o.fill(points[hull, 0], points[hull, 1], color=HEAD_COLORS[0], alpha=0.12, lw=0)
    weights = row["weights"].tolist()
    ax_o.scatter(points[:, 0], points[:, 1], s=[30 + 500 * w for w in weights], color=head_color(1), zorder=2)
    for (x, y), label in zip(points.tolist(), _token_labels(TOKENS)):
        ax_o.annotate(
            label,
            (x, y),
            xytext=(0, 9 if y > 0 else -9),
            textcoords="offset points",
            ha="center",
            va="bottom" if y > 0 else "top",
            fontsize=8,
        )
    out = row["output"].tolist()
    ax_o.scatter([out[0]], [out[1]], marker="*", s=200, color=head_color(5), zorder=3)
    ax_o.annotate(
        f"output\n({out[0]:.2f}, {out[1]:.2f})",
        tuple(out),
        xytext=(-7, 0),
        textcoords="offset points",
        ha="right",
        va="center",
        fontsize=8,
    )
    ax_o.set_xlim(-0.5, 2.5)
    ax_o.set_ylim(-0.75, 2.75)
    ax_o.set_xticks([0, 1, 2])
    ax_o.set_yticks([0, 1, 2])
    ax_o.tick_params(labelsize=8)
    ax_o.set_title("3. output: weighted sum", fontsize=10, loc="right")
    ax_o.set_xlabel("value feature 1", fontsize=9)
    ax_o.set_ylabel("value feature 2", fontsize=9)
    fig.tight_layout(w_pad=0.6)
    return fig


class TemperaturePlot(LiveFigure):
    """:func:`plot_temperature` as a figure a live explorer updates in place (the fast path).

    ``draw`` is :func:`plot_temperature`; ``update`` moves the bars, their labels and the title of a
    figure ``draw`` made, and ``artists`` names them: a live slider redraws those few artists over
    a background drawn once, instead of building a new figure (about 10 ms instead of 150 ms).
    """

    def __init__(self, *, scores=SCORES, tokens=TOKENS):
        self.scores, self.tokens = scores, tokens

    def draw(self, temperature: float = 1.0):
        return plot_temperature(temperature, scores=self.scores, tokens=self.tokens)

    def update(self, fig, temperature: float = 1.0):
        probs = softmax_with_temperature(self.scores, temperature)
        (ax,) = fig.axes
        for i, (bar, label, p) in enumerate(zip(ax.patches, ax.texts, probs.tolist())):
            bar.set_height(p)
            label.set_position((i, p + 0.02))
            label.set_text(f"{p:.2f}")
        ax.set_title(f"softmax(scores / {temperature:g}): entropy {entropy_bits(probs).item():.2f} bits")

    def artists(self, fig):
        """What ``update`` changes (bars, labels, title), and the spines drawn over the bars."""
        (ax,) = fig.axes
        return [*ax.patches, *ax.texts, ax.title, *ax.spines.values()]


# ----------------------------------------------------------------------------------------------
# head_count
# ----------------------------------------------------------------------------------------------
def _maps_title(num_heads: int, seed: int) -> str:
    accuracy = cached_run(num_heads, seed=seed)["accuracy"]
    return f"{num_heads} head{'s' if num_heads > 1 else ''}, seed {seed}: held-out accuracy {accuracy:.2f}"


#: The maps' canvas (inches), the same for every number of heads, so that no frame of the explorer
#: is mostly blank: 1 head fills it, 2 heads share it side by side, 4 and 8 in two rows.
MAPS_SIZE = (8.2, 5.6)
#: Token labels on the maps, in points: 11 CSS px in a frame stored at 80 dpi (an 8.2-inch frame
#: is shown at full size in the book's column); 8.5 pt (9.4 px) read as tiny to a learner.
MAPS_LABEL_PT = 10


def render_head_maps(num_heads: int = 2, seed: int = 0):
    """Figure: each head's attention map on a held-out sequence (cached, r = 4, MLP readout)."""
    weights, labels = cached_maps(num_heads, seed)
    rows = 1 if num_heads <= 2 else 2
    cols = math.ceil(num_heads / rows)
    fig, axes = plt.subplots(rows, cols, figsize=MAPS_SIZE, squeeze=False)
    plot_heads(weights, labels, axes=list(axes.flat), annotate=False, title=_maps_title(num_heads, seed))
    # Every head reads the same sequence: label the keys under the bottom row and the queries left of
    # the first column only (fewer labels to read, and to redraw when a live explorer changes seed).
    for i, ax in enumerate(axes.flat):
        first_column, bottom_row = i % cols == 0, i >= num_heads - cols
        ax.tick_params(labelsize=MAPS_LABEL_PT, labelleft=first_column, labelbottom=bottom_row)
        if cols >= 4:  # four maps abreast: the key labels upright, so that they do not run into each other
            ax.tick_params(axis="x", labelrotation=90)
        ax.set_xlabel("key" if bottom_row else "", fontsize=10)
        ax.set_ylabel("query" if first_column else "", fontsize=10)
    # Fixed margins (the same for every seed, so a live update keeps the layout), room for the labels.
    fig.subplots_adjust(left=0.09, right=0.99, top=0.88, bottom=0.14, wspace=0.12, hspace=0.32)
    fig._mha_labels = list(labels)
    return fig


class HeadMaps(LiveFigure):
    """:func:`render_head_maps` updated in place: one figure per number of heads (its ``layout``),
    whose images and title change with the seed."""

    def draw(self, num_heads: int = 2, seed: int = 0):
        return render_head_maps(num_heads, seed)

    def layout(self, num_heads: int = 2, seed: int = 0):
        return num_heads

    def update(self, fig, num_heads: int = 2, seed: int = 0):
        weights, labels = cached_maps(num_heads, seed)
        if len(fig.axes) != num_heads or len(getattr(fig, "_mha_labels", ())) != len(labels):
            return False
        for ax, w in zip(fig.axes, weights):
            ax.images[0].set_data(w.numpy())
            if fig._mha_labels != list(labels):  # each seed's held-out sequence
                set_tick_labels(ax, labels)
        fig._mha_labels = list(labels)
        suptitle(fig).set_text(_maps_title(num_heads, seed))

    def artists(self, fig):
        shown = [text for ax in fig.axes for text in tick_label_texts(ax) if text.get_visible()]
        labels = text_layer(fig, shown)
        return [*(image for ax in fig.axes for image in ax.images), *spines(*fig.axes), labels, suptitle(fig)]


def plot_accuracy_vs_heads(num_relations: int = DEFAULT_RELATIONS, *, readouts=tuple(GRID_SEEDS), ax=None):
    """Held-out accuracy against the number of heads (mean over seeds, bars = min to max), one line
    per readout in ``readouts`` (``"mlp"``, ``"linear"``). Returns the figure."""
    unknown = [r for r in readouts if r not in GRID_SEEDS]
    if unknown or not readouts:
        raise ValueError(f"readouts must be a non-empty selection of {sorted(GRID_SEEDS)}, got {list(readouts)}")
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 3.5))
    for readout in readouts:
        i = list(GRID_SEEDS).index(readout)  # the same colour per readout in every selection
        summary = grid_summary(readout)
        heads = [h for h in GRID_HEADS if (num_relations, h) in summary]
        stats = [summary[(num_relations, h)] for h in heads]
        mean = [s["mean"] for s in stats]
        err = [[s["mean"] - s["min"] for s in stats], [s["max"] - s["mean"] for s in stats]]
        seeds = stats[0]["seeds"]
        ax.errorbar(
            heads,
            mean,
            yerr=err,
            marker="o",
            capsize=4,
            label=f"{READOUT_NAMES[readout]} readout ({seeds} seed{'s' if seeds > 1 else ''})",
            color=f"C{i}",
        )
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(GRID_HEADS), [str(h) for h in GRID_HEADS])
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("number of heads h (same $d_{\\mathrm{model}}$, same parameters)")
    ax.set_ylabel("held-out accuracy (all r answers right)")
    ax.set_title(f"Copying r = {num_relations} tokens at once, after 1,500 steps")
    ax.legend(loc="lower right")
    return ax.figure


def plot_grid(readout: str = "mlp", *, ax=None):
    """Heatmap of mean held-out accuracy after 1,500 steps, rows = relations r, columns = heads h."""
    summary = grid_summary(readout)
    relations = sorted({r for r, _ in summary})
    heads = sorted({h for _, h in summary})
    grid = [[summary[(r, h)]["mean"] for h in heads] for r in relations]
    if ax is None:
        _, ax = plt.subplots(figsize=(5.0, 4.2))
    ax.imshow(grid, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    for i, row in enumerate(grid):
        for j, value in enumerate(row):
            color = "black" if value > 0.6 else "white"
            ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=12, color=color)
    ax.set_xticks(range(len(heads)), [str(h) for h in heads], fontsize=11)
    ax.set_yticks(range(len(relations)), [str(r) for r in relations], fontsize=11)
    ax.set_xlabel("heads h", fontsize=12)
    ax.set_ylabel("relations r", fontsize=12)
    seeds = max(s["seeds"] for s in summary.values())
    ax.set_title(f"{READOUT_NAMES[readout]} readout: mean over {seeds} seed{'s' if seeds > 1 else ''}", fontsize=12)
    return ax.figure


def plot_grids():
    """Both readouts' grids side by side, large enough to read at page width. Returns the figure."""
    fig, axes = plt.subplots(1, 2, figsize=(9.6, 4.4))
    for ax, readout in zip(axes, ("mlp", "linear")):
        plot_grid(readout, ax=ax)
    fig.suptitle("Held-out accuracy after 1,500 steps (all r answers right)", fontsize=13)
    fig.tight_layout()
    return fig


def plot_learning_curves(num_relations: int = DEFAULT_RELATIONS, *, readout: str = "mlp", heads=None, ax=None):
    """Held-out accuracy against training steps for every cached number of heads at ``r =
    num_relations``: each seed a thin line, the median over seeds a thick one, the median training
    accuracy dashed (one colour per number of heads). Returns the figure."""
    if heads is None:
        heads = [h for (kind, r, h) in CURVE_SETTINGS if (kind, r) == (readout, num_relations)]
    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 4.2))
    for h in heads:
        runs = cached_curves(h, num_relations=num_relations, readout=readout)
        color = head_color(GRID_HEADS.index(h) if h in GRID_HEADS else h)
        for run in runs:
            steps = [p["steps"] for p in run["curve"]]
            ax.plot(steps, [p["accuracy"] for p in run["curve"]], color=color, lw=0.8, alpha=0.45)
        budgets = sorted({p["steps"] for run in runs for p in run["curve"]})
        for key, style in (("accuracy", "-"), ("train_accuracy", "--")):
            medians = []
            for b in budgets:
                values = sorted(p[key] for run in runs for p in run["curve"] if p["steps"] == b)
                n = len(values)
                medians.append(values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2)
            label = f"h = {h}" if key == "accuracy" else None
            ax.plot(budgets, medians, style, color=color, lw=2.4 if key == "accuracy" else 1.6, label=label)
    ax.set_xscale("log")
    ticks = [250, 1500, 6000, 24_000]
    ax.set_xticks(ticks, [f"{t:,}" for t in ticks])
    ax.minorticks_off()
    ax.axvline(1500, color="#999999", lw=1, ls=":")
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("training steps (log scale; dotted: 1,500)", fontsize=11)
    ax.set_ylabel("accuracy (all r answers right)", fontsize=11)
    ax.set_title(f"r = {num_relations} relations, {READOUT_NAMES[readout]} readout", fontsize=12)
    # beside the axes: inside, it would cover the curves of some setting or other
    outside_legend(ax, fontsize=10, title="heads")
    return ax.figure


def plot_curve_panels(panels=(("mlp", 4), ("mlp", 6))):
    """Learning curves side by side, one panel per ``(readout, r)``. Returns the figure."""
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 4.6), sharey=True, squeeze=False)
    for ax, (readout, r) in zip(axes[0], panels):
        plot_learning_curves(r, readout=readout, ax=ax)
    handles = {}
    for ax in axes[0]:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
        ax.get_legend().remove()
    for ax in axes[0][1:]:
        ax.set_ylabel("")
    fig.suptitle("Accuracy against training steps: each seed (thin),\nmedian held-out (thick), median train (dashed)")
    fig.tight_layout()
    # one legend for all panels (a colour is the same h in each), beside the last one, off the data
    fig.subplots_adjust(right=0.86)
    labels = sorted(handles, key=lambda label: int(label.split("=")[1]))
    axes[0][-1].legend(
        [handles[label] for label in labels],
        labels,
        loc="upper left",
        bbox_to_anchor=(1.03, 1.0),
        borderaxespad=0.0,
        fontsize=10,
        title="heads",
    )
    return fig
