"""The multi-head-math chapter's figures: the sqrt(d_k) sweep and its explorer, how split_heads cuts the
projected queries, and which feature of which token lands in which head (view + transpose, and view alone).

The numbers come from :mod:`mha.chapters.multi_head_math.scaling`.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

from ...viz.artists import spines, suptitle
from ...viz.live import LiveFigure
from ...viz.plotting import head_color
from .head_split import head_blocks
from .scaling import NUM_KEYS, sample_scores, score_stats, sorted_weight_profile

#: The score histogram's axis: one fixed range for every frame, scores beyond it piled at its ends.
SCORE_LIMIT = 30.0
#: How the scales of :data:`mha.chapters.multi_head_math.scaling.SCALES` (names easy to type) read on the page.
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
    # narrow enough for a folded cell's output (666 px), where the multi-head-math chapter shows it
    fig, axes = plt.subplots(2, 2, figsize=(6.6, 6.0))
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
    uniform = axes[0, 1].axhline(1.0 / NUM_KEYS, color="gray", lw=0.8, ls="--", label="uniform (1/16)")
    axes[0, 1].set_ylim(0, 1)
    axes[0, 0].legend()  # the scales; the panel beside it names only its dashed line, clear of the curves
    axes[0, 1].legend(handles=[uniform], loc="lower right", bbox_to_anchor=(1.0, 0.35))
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


# --------------------------------------------------------------------------------------------
# The index mapping: which feature of which token lands in which head
# --------------------------------------------------------------------------------------------

#: Inches per cell of :func:`render_head_index`: room for a 9-point "3·12" in every cell.
INDEX_CELL = 0.36
#: Cells left of the grids, for the row labels ("position 3").
INDEX_LABELS = 2.9
#: Edge of a cell that the slip puts somewhere view + transpose does not.
WRONG_EDGE = "#B00020"


def _light(color: str, share: float = 0.45):
    """``color`` mixed with white (``share`` of the colour): black 9-point text stays legible on it."""
    from matplotlib.colors import to_rgb

    return tuple(1 - share * (1 - c) for c in to_rgb(color))


def _index_gap(num_heads: int) -> float:
    """Cells between two heads' blocks: at most 2 cells in all, so every h fits one canvas."""
    return 0.5 if num_heads <= 5 else 2.0 / (num_heads - 1)


def _index_cells(ax, values, x0: float, y0: float, *, heads, gap: list, wrong=None, gid: str, d_model: int):
    """Draw ``values`` (rows of entries of the index tensor) as cells labelled ``t·f``, top row
    first: cell (r, c) at ``x0 + c + gap[c]``, coloured by head ``heads[r][c]``, with a red edge
    where ``wrong[r][c]``."""
    from .head_split import cell_label

    rows = len(values)
    for r, row in enumerate(values):
        for c, value in enumerate(row):
            head = heads[r][c]
            x, y = x0 + c + gap[c], y0 + rows - 1 - r
            bad = wrong is not None and wrong[r][c]
            ax.add_patch(
                Rectangle(
                    (x, y),
                    1,
                    1,
                    facecolor=_light(head_color(head)),
                    edgecolor=WRONG_EDGE if bad else "white",
                    lw=2.0 if bad else 1.0,
                )
            )
            ax.text(x + 0.5, y + 0.5, cell_label(value, d_model), ha="center", va="center", fontsize=9, gid=gid)


def _index_titles(num_heads: int, reshape: str, seq_len: int, d_model: int, right: bool):
    from .head_split import SPLIT_RIGHT

    head_dim = d_model // num_heads
    if reshape == SPLIT_RIGHT:
        features = "1 feature" if head_dim == 1 else f"{head_dim} features"
        title = f"Right: view + transpose: each head gets {features} of every token"
        if num_heads == 1:
            title = f"Right: view + transpose: one head gets all {d_model} features"
        view = f"(b) q.view(1, {seq_len}, {num_heads}, {head_dim}): (B, T, H, Dh), each token cut into heads"
        last = f"(c) .transpose(1, 2): (B, H, T, Dh) = (1, {num_heads}, {seq_len}, {head_dim}), a panel per head"
    else:
        shape = f"view(1, {num_heads}, {seq_len}, {head_dim})"
        title = (
            f"{shape}, no transpose: the same as view + transpose here"
            if right
            else f"Wrong: {shape}, no transpose: position t is not token t"
        )
        view = ""
        tail = "red edge: not where view + transpose puts it" if not right else "no cell moves"
        last = f"(c) q.{shape}: (B, H, T, Dh), {tail}"
    first = f"(a) q: (B, T, D) = (1, {seq_len}, {d_model}); a cell t·f is token t, feature f"
    return title, first, view, last


def render_head_index(num_heads: int = 3, reshape: str = "view + transpose", d_model: int = 12, seq_len: int = 3):
    """Which feature of which token lands in which head: the head split of an index tensor.

    (a) the projected queries (1, T, D), entry (t, f) labelled ``t·f`` (counted from 1) and coloured
    by the head it lands in; (b) after ``view(1, T, H, Dh)``: each token's row cut into h blocks;
    (c) after ``transpose(1, 2)``: h panels of (T, Dh). With ``reshape="view, no transpose"``, (c) is
    ``view(1, H, T, Dh)`` of (a) instead (no step (b)), and a red edge marks every cell it puts
    somewhere else than view + transpose does. Every label is read from the tensors that
    :func:`mha.chapters.multi_head_math.head_split.split_steps` computes with torch, so the picture is the ops' result.

    Returns:
        matplotlib.figure.Figure
    """
    from .head_split import SPLIT_RIGHT, split_steps

    steps = split_steps(num_heads, reshape, seq_len, d_model)
    head_dim = d_model // num_heads
    x = steps["x"][0].tolist()  # (T, D)
    heads = steps["heads"][0]  # (H, T, Dh)
    right_heads = split_steps(num_heads, SPLIT_RIGHT, seq_len, d_model)["heads"][0]  # (H, T, Dh)
    where = {int(v): h for h in range(num_heads) for v in heads[h].flatten().tolist()}  # value -> its head
    gap = _index_gap(num_heads)
    gaps = [gap * (c // head_dim) for c in range(d_model)]
    title, first, view_text, last = _index_titles(num_heads, reshape, seq_len, d_model, steps["right"])

    width = d_model + 2.0  # the widest row: d_model cells and at most 2 cells of gaps
    band = seq_len + 2.2  # one step: its cells, its head labels and its heading
    y_c, y_b, y_a = 0.0, band, 2 * band
    top = y_a + seq_len + 1.6
    fig, ax = plt.subplots(figsize=(INDEX_CELL * (width + INDEX_LABELS + 0.4), INDEX_CELL * (top + 0.7)))
    fig.subplots_adjust(0, 0, 1, 1)
    heads_of_x = [[where[v] for v in row] for row in x]
    _index_cells(ax, x, 0.0, y_a, heads=heads_of_x, gap=[0.0] * d_model, gid="input-cell", d_model=d_model)
    if steps["view"] is not None:
        view = steps["view"][0].reshape(seq_len, d_model).tolist()  # (T, H·Dh): head blocks side by side
        view_heads = [[c // head_dim for c in range(d_model)]] * seq_len
        _index_cells(ax, view, 0.0, y_b, heads=view_heads, gap=gaps, gid="view-cell", d_model=d_model)
        _head_names(ax, num_heads, head_dim, gap, y_b + seq_len + 0.1)
    else:
        ax.text(
            width / 2,
            y_b + seq_len / 2,
            f"no (B, T, H, Dh) step: view(1, {num_heads}, {seq_len}, {head_dim}) refills the new shape\n"
            f"in memory order, token 1's {d_model} features, then token 2's, ...,\n"
            f"{head_dim} at a time: {seq_len} rows for head 1"
            + (f", then {seq_len} for head 2, ..." if num_heads > 1 else ", the only head"),
            ha="center",
            va="center",
            fontsize=10,
        )
    # (c): panel h holds heads[h], (T, Dh); its rows are the positions 1..T
    panels = heads.permute(1, 0, 2).reshape(seq_len, d_model).tolist()  # (T, H·Dh): panels side by side
    wrong = (heads != right_heads).permute(1, 0, 2).reshape(seq_len, d_model).tolist()
    panel_heads = [[c // head_dim for c in range(d_model)]] * seq_len
    _index_cells(ax, panels, 0.0, y_c, heads=panel_heads, gap=gaps, wrong=wrong, gid="head-cell", d_model=d_model)
    _head_names(ax, num_heads, head_dim, gap, y_c + seq_len + 0.1)
    for y0, word, shown in ((y_a, "token", True), (y_b, "token", bool(view_text)), (y_c, "position", True)):
        for t in range(seq_len if shown else 0):
            ax.text(-0.25, y0 + seq_len - 0.5 - t, f"{word} {t + 1}", ha="right", va="center", fontsize=10)
    heading = {"ha": "left", "va": "bottom", "fontsize": 10}
    ax.text(-INDEX_LABELS, y_a + seq_len + 0.25, first, **heading)
    if view_text:
        ax.text(-INDEX_LABELS, y_b + seq_len + 0.85, view_text, **heading)
    ax.text(-INDEX_LABELS, y_c + seq_len + 0.85, last, **heading)
    ax.text(-INDEX_LABELS, top - 0.35, title, ha="left", va="center", fontsize=11, fontweight="bold")
    ax.set_xlim(-INDEX_LABELS - 0.2, width + 0.2)
    ax.set_ylim(-0.4, top + 0.3)
    ax.axis("off")
    return fig


def _head_names(ax, num_heads: int, head_dim: int, gap: float, y: float) -> None:
    """The heads' names above their blocks: "head 1", "head 2", ... (beyond 6 heads, the numbers)."""
    for i in range(num_heads):
        name = f"head {i + 1}" if num_heads <= 6 else str(i + 1)
        ax.text(i * (head_dim + gap) + head_dim / 2, y, name, ha="center", va="bottom", fontsize=9, gid="head-name")


class HeadIndexPlot(LiveFigure):
    """:func:`render_head_index` for an explorer: each (h, reshape) has its own layout, drawn once
    (a live kernel draws the others ahead while idle), so a control move shows a figure already
    drawn."""

    def __init__(self, d_model: int = 12, seq_len: int = 3):
        self.d_model, self.seq_len = d_model, seq_len

    def draw(self, num_heads: int = 3, reshape: str = "view + transpose"):
        fig = render_head_index(num_heads, reshape, self.d_model, self.seq_len)
        fig._mha_head_index = (num_heads, reshape)
        return fig

    def layout(self, num_heads: int = 3, reshape: str = "view + transpose"):
        return (num_heads, reshape)

    def update(self, fig, num_heads: int = 3, reshape: str = "view + transpose"):
        # a figure shows one combination: the same one needs nothing, another one a new figure
        return None if getattr(fig, "_mha_head_index", None) == (num_heads, reshape) else False
