"""The single-head-limits chapter's figures (and the head-count experiments'): each head's attention map,
accuracy against the number of heads, the grid of (relations, heads), and learning curves (accuracy against
training steps).

The numbers come from :mod:`mha.chapters.head_count` (the cached grid and curves).
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt

from ..chapters.head_count import (
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
from .artists import set_tick_labels, spines, suptitle, text_layer, tick_label_texts
from .layout import outside_legend
from .live import LiveFigure
from .plotting import head_color, plot_heads


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
