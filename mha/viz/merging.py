"""Chapter 5's figures: the hand-built two-role example under each merge, and the merge sweep.

The numbers come from :mod:`mha.chapters.merging` and :mod:`mha.chapters.role_heads`.
"""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

from ..chapters.merging import MERGES
from ..chapters.role_heads import ROLE_VOCAB, merge_example
from .plotting import head_color


def _heatmap(ax, values, rows, cols, title, color):
    cmap = matplotlib.colors.LinearSegmentedColormap.from_list("m", ["#ffffff", color])
    ax.imshow(np.asarray(values), cmap=cmap, vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(len(cols)), cols, rotation=45, ha="right")
    ax.set_yticks(range(len(rows)), rows)
    ax.set_title(title)
    for (i, j), v in np.ndenumerate(np.asarray(values)):
        if abs(v) >= 0.005:
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color="white" if v > 0.6 else "black")


def plot_merge_example(merge: str, sentence: str):
    """Explorer frame: each head's output (rows = tokens, columns = word features), then what the
    final projection receives after the merge. Returns the figure."""
    ex = merge_example(merge, sentence)
    words, heads = ex["words"], ex["heads"]
    merged = ex["merged"]
    wide = merge == "concat"
    fig, axes = plt.subplots(1, 3, figsize=(11.0, 3.4), gridspec_kw={"width_ratios": [1, 1, 2 if wide else 1.2]})
    roles = ("head 1: looks one word back", "head 2: looks one word ahead")
    for h, ax in enumerate(axes[:2]):
        _heatmap(ax, heads[h], words, ROLE_VOCAB, roles[h], head_color(h))
    axes[0].set_ylabel("token (query)")
    if wide:
        cols = [f"h1:{w}" for w in ROLE_VOCAB] + [f"h2:{w}" for w in ROLE_VOCAB]
        title = "concat: heads side by side"
    else:
        coeff = ex["coefficients"]
        cols = list(ROLE_VOCAB)
        words = [f"{w} (w {c[0]:.2f}/{c[1]:.2f})" for w, c in zip(words, coeff.tolist())]  # head weights
        title = f"{merge}: heads summed"
    _heatmap(axes[2], merged, words, cols, title, "#555555")
    for ax in axes:
        ax.set_xlabel("feature (word)")
    fig.suptitle(f"'{sentence}', merge = {merge}")
    # Fixed margins instead of tight_layout(): the explorer redraws this figure on every change.
    fig.subplots_adjust(left=0.08, right=0.99, bottom=0.3, top=0.8, wspace=0.55 if wide else 0.7)
    return fig


def plot_merge_results(runs: list[dict], *, ax=None):
    """Held-out accuracy against the model's parameters, one marker per run, one panel per task
    (colour = strategy). Returns the figure."""
    tasks = sorted({r["num_relations"] for r in runs}, reverse=True)
    if ax is None:
        fig, axes = plt.subplots(1, len(tasks), figsize=(4.5 * len(tasks), 3.6), sharey=True, squeeze=False)
        axes = axes[0]
    else:
        axes = [ax]
    markers = {"concat": "o", "average": "s", "weighted": "^", "gated": "D"}
    for ax_, k in zip(axes, tasks):
        for i, strategy in enumerate(MERGES):
            group = [r for r in runs if r["num_relations"] == k and r["strategy"] == strategy]
            xs = [r["params"] for r in group]
            ys = [r["accuracy"] for r in group]
            ax_.scatter(xs, ys, color=head_color(i), marker=markers[strategy], label=strategy, alpha=0.8)
        ax_.set_title(f"{k} relations per token")
        ax_.set_xlabel("parameters (whole model)")
        ax_.set_ylim(-0.05, 1.05)
    axes[0].set_ylabel("held-out accuracy (all answers right)")
    axes[-1].legend(loc="lower right", title="merge")
    fig = axes[0].figure
    fig.tight_layout()
    return fig
