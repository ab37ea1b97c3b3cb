"""Chapter 2's figures: the sqrt(d_k) sweep and its explorer, and how split_heads cuts the projected queries.

The numbers come from :mod:`mha.chapters.scaling`.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

from ..chapters.scaling import NUM_KEYS, head_blocks, sample_scores, score_stats, sorted_weight_profile
from .artists import spines, suptitle
from .live import LiveFigure
from .plotting import head_color

#: The score histogram's axis: one fixed range for every frame, scores beyond it piled at its ends.
SCORE_LIMIT = 30.0
#: How the scales of :data:`mha.chapters.scaling.SCALES` (names easy to type) read on the page.
SCALE_NAMES = {"1/√d_k": "1/√dₖ", "1/d_k": "1/dₖ"}


def scale_name(scale: str) -> str:
    return SCALE_NAMES.get(scale, scale)


def _scaling_numbers(d_k: int, scale: str):
    """What :func:`render_scaling` shows: histogram counts, the sorted-weight profile, the texts."""
    scores, keys, factor = sample_scores(d_k, scale)  # (N, S)
    stats = score_stats(scores, keys, factor)
    profile = sorted_weight_profile(d_k, scale).numpy()  # (S,): mean k-th largest weight
    clipped = scores.flatten().clamp(-SCORE_LIMIT, SCORE_LIMIT).numpy()
    titles = (
        f"all scores: variance {stats['variance']:.3g}",
        f"all {scores.shape[0]} queries: mean largest weight {profile[0]:.2f}",
        f"dₖ = {d_k}, scale {scale_name(scale)}\n{100 * stats['saturated']:.0f}% of queries saturated "
        f"(largest weight > 0.99); median ‖∂softmax/∂scores‖ = {stats['jacobian_norm']:.1e}",
    )
    return clipped, profile, titles


def plot_scaling_sweep(sweep: dict):
    """Four panels over d_k: score variance, largest weight, softmax Jacobian, gradient to q.

    Returns:
        matplotlib.figure.Figure
    """
    panels = [
        ("variance", "variance of the scores", "log"),
        ("max_weight", "mean largest softmax weight", "linear"),
        ("jacobian_norm", "median ‖∂softmax/∂scores‖", "log"),
        ("grad_q_norm", "median ‖∂softmax/∂q‖", "log"),
    ]
    fig, axes = plt.subplots(2, 2, figsize=(9.0, 6.5))
    scales = [name for name in sweep if name != "d_k"]
    for ax, (key, label, yscale) in zip(axes.flat, panels):
        for i, scale in enumerate(scales):
            ax.plot(
                sweep["d_k"], sweep[scale][key], marker="o", color=head_color(i), label=f"scale {scale_name(scale)}"
            )
        ax.set_xscale("log", base=2)
        ax.set_yscale(yscale)
        ax.set_xlabel("head size $d_k$")
        ax.set_ylabel(label)
        ax.set_title(label)
    axes[0, 1].axhline(1.0 / NUM_KEYS, color="gray", lw=0.8, ls="--", label="uniform (1/16)")
    axes[0, 1].set_ylim(0, 1)
    axes[0, 0].legend()
    axes[0, 1].legend()
    fig.suptitle(f"Random unit-variance q and k, softmax over {NUM_KEYS} keys")
    fig.tight_layout()
    return fig


def render_scaling(d_k: int = 64, scale: str = "1/√d_k"):
    """Explorer frame: the scaled scores of every query, and the mean sorted weights of every query.

    Returns:
        matplotlib.figure.Figure
    """
    clipped, profile, titles = _scaling_numbers(d_k, scale)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(8.4, 3.9))
    # one fixed axis for every frame, so the spread itself is what changes; scores beyond it
    # are piled into the outermost bins
    limit = SCORE_LIMIT
    ax1.hist(clipped, bins=60, range=(-limit, limit), color=head_color(0))
    ax1.set_xlim(-limit, limit)
    ax1.set_xlabel(f"score  scale · q·k  (clipped to ±{limit:.0f})")
    ax1.set_ylabel("count")
    ax1.set_title(titles[0])
    ranks = range(1, len(profile) + 1)
    ax2.bar(ranks, profile, color=head_color(1))
    ax2.axhline(1.0 / len(profile), color="gray", lw=0.8, ls="--", label=f"uniform (1/{len(profile)})")
    ax2.set_ylim(0, 1)
    ax2.set_xticks(range(1, len(profile) + 1, 3))
    ax2.set_xlabel("rank of the key in its query's row (1 = largest weight)")
    ax2.set_ylabel("mean softmax weight")
    ax2.set_title(titles[1])
    ax2.legend(loc="upper right", fontsize=9)
    fig.suptitle(titles[2])
    fig.tight_layout()
    return fig


class ScalingPlot(LiveFigure):
    """:func:`render_scaling` updated in place: the histogram's and the profile's bar heights, the
    count axis (its scale follows the tallest bar, as a new figure's would) and the titles."""

    def draw(self, d_k: int = 64, scale: str = "1/√d_k"):
        return render_scaling(d_k, scale)

    def update(self, fig, d_k: int = 64, scale: str = "1/√d_k"):
        clipped, profile, titles = _scaling_numbers(d_k, scale)
        ax1, ax2 = fig.axes[:2]
        counts, _ = np.histogram(clipped, bins=60, range=(-SCORE_LIMIT, SCORE_LIMIT))
        for bar, count in zip(ax1.patches, counts.tolist()):
            bar.set_height(count)
        ax1.relim()
        ax1.autoscale_view(scalex=False)
        for bar, height in zip(ax2.patches, profile.tolist()):
            bar.set_height(height)
        ax1.set_title(titles[0])
        ax2.set_title(titles[1])
        suptitle(fig).set_text(titles[2])

    def artists(self, fig):
        ax1, ax2 = fig.axes[:2]
        parts = [*ax1.patches, ax1.yaxis, ax1.title, *ax2.patches, *ax2.lines, ax2.title, ax2.get_legend()]
        return [*parts, *spines(ax1, ax2), suptitle(fig)]


def render_head_split(num_heads: int = 4, d_model: int = 12, seq_len: int = 4):
    """Picture of ``split_heads``: the (T, d_model) projected queries X W_Q cut into h blocks of (T, d_k).

    The input is X W_Q, not X: every column of it is a weighted sum of all the token's features,
    so a head's block depends on the whole embedding, not on a slice of it.

    Returns:
        matplotlib.figure.Figure
    """
    blocks = head_blocks(d_model, num_heads)
    head_dim = d_model // num_heads
    gap = 0.6
    right_x = d_model + ARROW_CELLS
    # the same canvas for every h (the widest case is h = d_model), so explorer frames line up;
    # CELL inches per cell keep it inside the book's column, its 10-point text at full size
    width = right_x + d_model + gap * (d_model - 1) + 0.5
    fig, ax = plt.subplots(figsize=(CELL * (width + 3.0), CELL * (seq_len + 3.2) + 0.9))
    for i, cols in enumerate(blocks):
        for c in cols:
            for t in range(seq_len):  # left: the full projection, one column per feature
                ax.add_patch(
                    Rectangle((c, seq_len - 1 - t), 1, 1, facecolor=head_color(i), alpha=0.75, edgecolor="white")
                )
                x = right_x + c + i * gap  # right: the same columns, regrouped by head
                ax.add_patch(
                    Rectangle((x, seq_len - 1 - t), 1, 1, facecolor=head_color(i), alpha=0.75, edgecolor="white")
                )
        left = right_x + cols.start + i * gap
        label = f"head {i + 1}" if num_heads <= 6 else str(i + 1)
        ax.text(left + head_dim / 2, seq_len + 0.3, label, ha="center", va="bottom", fontsize=10, gid="head-label")
    for t in range(seq_len):
        ax.text(-0.3, seq_len - 0.5 - t, f"token {t + 1}", ha="right", va="center", fontsize=10)
    ax.text(
        d_model / 2,
        -0.4,
        f"$XW^Q$: $(T, d_{{\\mathrm{{model}}}})$ = ({seq_len}, {d_model})\nevery column mixes all input features",
        ha="center",
        va="top",
        fontsize=10,
    )
    right_end = right_x + d_model + gap * (num_heads - 1)
    ax.text(
        (right_x + right_end) / 2,
        -0.4,
        f"(h, T, dₖ) = ({num_heads}, {seq_len}, {head_dim})",
        ha="center",
        va="top",
        gid="head-shape",
    )
    ax.annotate(
        "",
        xy=(right_x - 0.6, seq_len / 2),
        xytext=(d_model + 0.6, seq_len / 2),
        arrowprops={"arrowstyle": "->", "lw": 1.5},
    )
    ax.text(
        d_model + ARROW_CELLS / 2,
        seq_len / 2 + 0.3,
        "split_heads",
        ha="center",
        va="bottom",
        fontsize=10,
        family="monospace",
    )
    ax.set_xlim(-3.0, width)
    ax.set_ylim(-2.6, seq_len + 1.0)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(_split_title(num_heads, d_model))
    return fig


#: Inches per cell of :func:`render_head_split`, and cells between its two halves (the arrow).
CELL = 0.2
ARROW_CELLS = 6.0


def _split_title(num_heads: int, d_model: int) -> str:
    head_dim = d_model // num_heads
    # Unicode, not mathtext: a live explorer rewrites this title at every change (mathtext costs
    # a parse per new string, about 100 ms)
    return f"h = {num_heads} heads: dₖ = d_model / h = {d_model} / {num_heads} = {head_dim}"


class HeadSplitPlot(LiveFigure):
    """:func:`render_head_split` updated in place: the same ``2 · d_model · T`` cells recoloured and
    regrouped by head, the head labels and the titles rewritten (the canvas is the same for every h)."""

    def __init__(self, d_model: int = 12, seq_len: int = 4):
        self.d_model, self.seq_len = d_model, seq_len

    def draw(self, num_heads: int = 4):
        return render_head_split(num_heads, self.d_model, self.seq_len)

    def update(self, fig, num_heads: int = 4):
        d_model, seq_len = self.d_model, self.seq_len
        blocks = head_blocks(d_model, num_heads)
        head_dim = d_model // num_heads
        gap, right_x = 0.6, d_model + ARROW_CELLS
        (ax,) = fig.axes
        cells = iter(ax.patches)
        for i, cols in enumerate(blocks):
            for c in cols:
                for _ in range(seq_len):
                    left, right = next(cells), next(cells)
                    left.set_facecolor(head_color(i))
                    right.set_facecolor(head_color(i))
                    right.set_x(right_x + c + i * gap)
        labels = [text for text in ax.texts if text.get_gid() == "head-label"]
        for text in labels[num_heads:]:
            text.remove()
        for i, cols in enumerate(blocks):
            x = right_x + cols.start + i * gap + head_dim / 2
            label = f"head {i + 1}" if num_heads <= 6 else str(i + 1)
            if i < len(labels):
                labels[i].set_text(label)
                labels[i].set_x(x)
            else:
                ax.text(x, seq_len + 0.3, label, ha="center", va="bottom", fontsize=10, gid="head-label")
        (shape,) = [text for text in ax.texts if text.get_gid() == "head-shape"]
        shape.set_text(f"(h, T, dₖ) = ({num_heads}, {seq_len}, {head_dim})")
        shape.set_x((2 * right_x + d_model + gap * (num_heads - 1)) / 2)
        ax.set_title(_split_title(num_heads, d_model))
