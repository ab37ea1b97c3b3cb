"""The merging-heads chapter's figures: the equivalent W^O of each merge in blocks, the hand-built two-role
example under each merge, and the merge sweeps of its deep dive, the merging experiments (learning curves per merge, the
learning-rate sweep, accuracy against parameters).

The numbers come from :mod:`mha.chapters.merging.merging`, :mod:`mha.chapters.merging.merge_training` and
:mod:`mha.chapters.merging.role_heads`.
"""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import torch

from ...viz.artists import cell_texts, set_heatmap, set_tick_labels, spines, suptitle, text_layer, tick_label_texts
from ...viz.layout import outside_legend
from ...viz.live import LiveFigure
from ...viz.plotting import head_color
from .merge_folding import numerical_rank
from .merge_training import at_budget, select
from .merging import STRATEGIES
from .role_heads import ROLE_VOCAB, merge_example

#: One colour and marker per merge strategy, in every figure of the chapter.
STRATEGY_COLORS = dict(zip(STRATEGIES, ("#0072B2", "#56B4E9", "#E69F00", "#009E73", "#CC79A7")))
STRATEGY_MARKERS = dict(zip(STRATEGIES, ("o", "v", "s", "^", "D")))


def plot_out_proj_blocks(matrices: dict, num_heads: int):
    """One heatmap per merge of the W^O with which a concatenation computes what the merge computes
    (formula layout, Concat(H) W^O: rows are the heads' features, one block of Dh rows per head,
    columns the output features), with the matrix's rank in the title.

    ``matrices``: merge name -> (D, H*Dh) tensor in ``nn.Linear`` layout, as
    :func:`mha.chapters.merging.merge_folding.equivalent_out_proj` returns it. Returns the figure.
    """
    names = list(matrices)
    cols = 2 if len(names) > 1 else 1
    rows = -(-len(names) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 4.4 * rows), squeeze=False)
    for ax, name in zip(axes.flat, names):
        rank = numerical_rank(matrices[name])  # at the matrix's own precision
        w_o = matrices[name].detach().to("cpu", torch.float64).numpy().T  # (H*Dh, D): block i meets head i
        head_dim, limit = w_o.shape[0] // num_heads, np.abs(w_o).max()
        ax.imshow(w_o, cmap="RdBu_r", vmin=-limit, vmax=limit, aspect="equal")
        for i in range(1, num_heads):
            ax.axhline(i * head_dim - 0.5, color="black", lw=1.6)
        centres = [(i + 0.5) * head_dim - 0.5 for i in range(num_heads)]
        ax.set_yticks(centres, [f"head {i + 1}" for i in range(num_heads)], fontsize=11)
        for i, label in enumerate(ax.get_yticklabels()):
            label.set_color(head_color(i))
        ax.set_xticks([])
        ax.set_xlabel(f"output feature ($d_{{\\mathrm{{model}}}}$ = {w_o.shape[1]})", fontsize=11)
        ax.set_title(f"{name}: rank {rank}", fontsize=12)
    for ax in axes.flat[len(names) :]:
        ax.axis("off")
    fig.suptitle(f"The $W^O$ of each merge: one block of $d_k$ = {head_dim} rows per head", fontsize=13)
    fig.tight_layout()
    return fig


def _heatmap(ax, values, rows, cols, title, color):
    cmap = matplotlib.colors.LinearSegmentedColormap.from_list("m", ["#ffffff", color])
    ax.imshow(np.asarray(values), cmap=cmap, vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(len(cols)), cols, rotation=45, ha="right", fontsize=11)
    ax.set_yticks(range(len(rows)), rows, fontsize=11)
    ax.set_title(title, fontsize=12)
    for (i, j), v in np.ndenumerate(np.asarray(values)):
        if abs(v) >= 0.005:
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=10, color="white" if v > 0.6 else "black")


def plot_merge_example(merge: str, sentence: str):
    """Explorer frame: each head's output (rows = tokens, columns = word features), then what the
    final projection receives after the merge. Returns the figure."""
    ex = merge_example(merge, sentence)
    words, heads = ex["words"], ex["heads"]
    merged = ex["merged"]
    wide = merge == "concat"
    # the two heads side by side, what the final projection receives below them: 8.4 inches wide,
    # so that an 80-dpi frame is shown at full size in the book's column (10-point text, 11 px)
    fig = plt.figure(figsize=(8.4, 6.4))
    grid = fig.add_gridspec(2, 4, hspace=0.75, wspace=0.8)
    axes = [
        fig.add_subplot(grid[0, :2]),
        fig.add_subplot(grid[0, 2:]),
        fig.add_subplot(grid[1, :] if wide else grid[1, 1:3]),
    ]
    roles = ("head 1: one word back", "head 2: one word ahead")
    for h, ax in enumerate(axes[:2]):
        _heatmap(ax, heads[h], words, ROLE_VOCAB, roles[h], head_color(h))
    axes[0].set_ylabel("token (query)", fontsize=11)
    cols = [f"h{h}:{w}" for h in (1, 2) for w in ROLE_VOCAB] if wide else list(ROLE_VOCAB)
    words, title = _merge_rows(merge, ex)  # the summing merges: each head's weight per word
    _heatmap(axes[2], merged, words, cols, title, "#555555")
    for ax in axes:
        ax.set_xlabel("feature (word)", fontsize=11)
    fig.suptitle(f"'{sentence}', merge = {merge}", fontsize=13)
    # Fixed margins instead of tight_layout(): the explorer redraws this figure on every change.
    fig.subplots_adjust(left=0.12, right=0.99, bottom=0.13, top=0.9)
    return fig


def _merge_rows(merge: str, ex: dict) -> tuple[list, str]:
    """The merged panel's row labels and title (the summing merges show each head's weight)."""
    if merge == "concat":
        return ex["words"], "concat: heads side by side"
    words = [f"{w} (w {c[0]:.2f}/{c[1]:.2f})" for w, c in zip(ex["words"], ex["coefficients"].tolist())]
    return words, f"{merge}: heads summed"


class MergePlot(LiveFigure):
    """:func:`plot_merge_example` updated in place: one figure for concat and one for the summing
    merges (its ``layout``), whose three heatmaps, cell labels, row labels and titles change."""

    def draw(self, merge: str = "average", sentence: str = "cat chases mouse"):
        fig = plot_merge_example(merge, sentence)
        ex = merge_example(merge, sentence)
        for ax, values in zip(fig.axes, (*ex["heads"], ex["merged"])):
            cell_texts(ax, tuple(values.shape), fontsize=10)  # a label for every cell, empty where 0
        return fig

    def layout(self, merge: str = "average", sentence: str = "cat chases mouse"):
        return merge == "concat"

    def update(self, fig, merge: str = "average", sentence: str = "cat chases mouse"):
        ex = merge_example(merge, sentence)
        rows, title = _merge_rows(merge, ex)
        for ax, values, labels in zip(fig.axes, (*ex["heads"], ex["merged"]), (ex["words"], ex["words"], rows)):
            set_heatmap(ax, values.numpy(), show=lambda v: abs(v) >= 0.005, color=_cell_color)
            set_tick_labels(ax, labels, "y")
        fig.axes[2].set_title(title, fontsize=12)
        suptitle(fig).set_text(f"'{sentence}', merge = {merge}")

    def artists(self, fig):
        labels = text_layer(fig, [text for ax in fig.axes for text in tick_label_texts(ax, "y")])
        parts = [part for ax in fig.axes for part in (*ax.images, *ax.texts)]
        return [*parts, *spines(*fig.axes), labels, fig.axes[2].title, suptitle(fig)]


def _cell_color(v: float) -> str:
    return "white" if v > 0.6 else "black"


def plot_merge_curves(runs: list[dict], sweep: str = "main", *, lr=None):
    """One panel per strategy: held-out accuracy against training steps, each seed a thin line,
    the median over seeds a thick one, the median training accuracy dashed. Returns the figure."""
    fig, axes = plt.subplots(2, 3, figsize=(9.0, 6.6), sharex=True, sharey=True)
    for ax, strategy in zip(axes.flat, STRATEGIES):
        group = select(runs, sweep, strategy=strategy, lr=lr)
        color = STRATEGY_COLORS[strategy]
        budgets = [p["steps"] for p in group[0]["curve"]]
        for run in group:
            ax.plot(budgets, [p["accuracy"] for p in run["curve"]], color=color, lw=0.9, alpha=0.5)
        for key, style, width, label in (
            ("accuracy", "-", 2.6, "held-out, median"),
            ("train_accuracy", "--", 1.6, "train, median"),
        ):
            values = np.array([[p[key] for p in run["curve"]] for run in group])  # (seeds, budgets)
            ax.plot(
                budgets,
                np.median(values, axis=0),
                style,
                color="black" if key != "accuracy" else color,
                lw=width,
                label=label,
            )
        ax.set_xscale("log")
        ax.set_title(f"{strategy}\n({group[0]['params']:,} parameters)", fontsize=11)
        ax.axvline(1500, color="#999999", lw=1, ls=":")
        ax.set_ylim(-0.03, 1.03)
    ticks = [250, 1500, 6000, 12_000]
    for ax in (*axes[-1][:2], axes[0, 2]):  # the bottom panel of each column
        ax.set_xticks(ticks, ["250", "1,500", "6k", "12k"])
        ax.minorticks_off()
        ax.tick_params(labelbottom=True)
        ax.set_xlabel("training steps (log scale)", fontsize=11)
    for ax in axes[:, 0]:
        ax.set_ylabel("accuracy (all 4 answers right)", fontsize=11)
    last = axes.flat[-1]  # the key, in the free panel: a legend on a panel would cover its curves
    last.axis("off")
    legend = (
        "thin lines: one seed each (held-out)\nthick line: median held-out\ndashed: median on the training set\n"
        "dotted vertical: 1,500 steps"
    )
    last.text(0.0, 0.5, legend, transform=last.transAxes, fontsize=10, va="center")
    fig.suptitle(
        "Four relations, $d_{\\mathrm{model}}$ = 32, 4 heads: accuracy against training steps, per merge", fontsize=12
    )
    fig.tight_layout()
    return fig


def plot_lr_sweep(runs: list[dict], steps: int = 6000):
    """Held-out accuracy at ``steps`` against the learning rate, one marker per seed, per strategy
    (the main sweep's seeds 0-2 at the default rate, the ``"lr"`` sweep at the others). Returns the figure."""
    fig, ax = plt.subplots(figsize=(8.0, 4.2))
    lrs = sorted({r["lr"] for r in runs if r["sweep"] in ("main", "lr")})
    seeds = sorted({r["seed"] for r in runs if r["sweep"] == "lr"})
    for i, strategy in enumerate(STRATEGIES):
        for j, lr in enumerate(lrs):
            sweep = "lr" if any(r["sweep"] == "lr" and r["lr"] == lr for r in runs) else "main"
            rows = [r for r in at_budget(runs, steps, sweep, strategy=strategy, lr=lr) if r["seed"] in seeds]
            x = j + (i - 2) * 0.13
            ax.scatter(
                [x] * len(rows),
                [r["accuracy"] for r in rows],
                color=STRATEGY_COLORS[strategy],
                marker=STRATEGY_MARKERS[strategy],
                s=36,
                alpha=0.85,
                label=strategy if j == 0 else None,
            )
    ax.set_xticks(range(len(lrs)), [f"{lr:g}" for lr in lrs], fontsize=11)
    ax.set_xlabel("Adam learning rate", fontsize=11)
    ax.set_ylabel("held-out accuracy", fontsize=11)
    ax.set_ylim(-0.03, 1.03)
    ax.set_title(f"After {steps:,} steps, seeds {seeds[0]}-{seeds[-1]} (one marker per seed)", fontsize=12)
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=10, title="merge")
    fig.tight_layout()
    return fig


def plot_merge_results(runs: list[dict], steps: int, sweep: str = "main", *, ax=None):
    """Held-out accuracy at ``steps`` against the whole model's parameters, one marker per seed.
    The x axis spans the models' sizes with a margin: from 0, every marker would fall into the
    last tenth of the axis, on top of one another. Returns the figure."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6.0, 4.0))
    for strategy in STRATEGIES:
        rows = at_budget(runs, steps, sweep, strategy=strategy)
        ax.scatter(
            [r["params"] for r in rows],
            [r["accuracy"] for r in rows],
            color=STRATEGY_COLORS[strategy],
            marker=STRATEGY_MARKERS[strategy],
            label=strategy,
            alpha=0.8,
        )
    sizes = [r["params"] for r in at_budget(runs, steps, sweep)]
    margin = max(0.08 * (max(sizes) - min(sizes)), 1.0)
    ax.set_xlim(min(sizes) - margin, max(sizes) + margin)
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel("parameters (whole model; the axis does not start at 0)", fontsize=11)
    ax.set_ylabel("held-out accuracy", fontsize=11)
    ax.set_title(f"Four relations, after {steps:,} steps (one marker per seed)", fontsize=12)
    outside_legend(ax, fontsize=9, title="merge")
    return ax.figure
