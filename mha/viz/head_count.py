"""Chapter 1's figures: each head's attention map, and accuracy against the number of heads.

The numbers come from :mod:`mha.chapters.head_count` (the cached grid).
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt

from ..chapters.head_count import (
    DEFAULT_RELATIONS,
    GRID_HEADS,
    GRID_SEEDS,
    READOUT_NAMES,
    cached_maps,
    cached_run,
    grid_summary,
)
from .plotting import plot_heads


def render_head_maps(num_heads: int = 2, seed: int = 0):
    """Figure: each head's attention map on a held-out sequence (cached, k = 4, MLP readout)."""
    weights, labels = cached_maps(num_heads, seed)
    cols = min(num_heads, 4)
    rows = math.ceil(num_heads / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.0 * cols + 0.6, 3.0 * rows + 0.5), squeeze=False)
    accuracy = cached_run(num_heads, seed=seed)["accuracy"]
    plot_heads(
        weights,
        labels,
        axes=list(axes.flat),
        annotate=False,
        title=f"{num_heads} head{'s' if num_heads > 1 else ''}, seed {seed}: held-out accuracy {accuracy:.2f}",
    )
    for ax in axes.flat:
        ax.tick_params(labelsize=7)
        ax.set_xlabel("key", fontsize=8)
        ax.set_ylabel("query", fontsize=8)
    return fig


def plot_accuracy_vs_heads(num_relations: int = DEFAULT_RELATIONS, *, ax=None):
    """Held-out accuracy against the number of heads (mean over seeds, bars = min to max)."""
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 3.5))
    for i, readout in enumerate(GRID_SEEDS):
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
    ax.set_xlabel("number of heads h (same d_model, same parameters)")
    ax.set_ylabel("held-out accuracy (all k answers right)")
    ax.set_title(f"Copying k = {num_relations} tokens at once")
    ax.legend(loc="lower right")
    return ax.figure


def plot_grid(readout: str = "mlp", *, ax=None):
    """Heatmap of mean held-out accuracy, rows = relations k, columns = heads h."""
    summary = grid_summary(readout)
    relations = sorted({k for k, _ in summary})
    heads = sorted({h for _, h in summary})
    grid = [[summary[(k, h)]["mean"] for h in heads] for k in relations]
    if ax is None:
        _, ax = plt.subplots(figsize=(4.2, 3.6))
    ax.imshow(grid, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    for i, row in enumerate(grid):
        for j, value in enumerate(row):
            ax.text(
                j, i, f"{value:.2f}", ha="center", va="center", fontsize=8, color="black" if value > 0.6 else "white"
            )
    ax.set_xticks(range(len(heads)), [str(h) for h in heads])
    ax.set_yticks(range(len(relations)), [str(k) for k in relations])
    ax.set_xlabel("heads h")
    ax.set_ylabel("relations k")
    ax.set_title(f"mean accuracy, {READOUT_NAMES[readout]} readout")
    return ax.figure
