"""The single-head-limits chapter's opening figures: one query's lookup (:func:`plot_worked_row`), and the temperature
explorer's softmax(scores / temperature) as bars (:func:`plot_temperature`).

The numbers come from :mod:`mha.chapters.softmax_demo`.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import torch

from ..attention import entropy_bits
from ..chapters.softmax_demo import SCORES, TOKENS, VALUES, softmax_with_temperature, worked_row
from .live import LiveFigure
from .plotting import HEAD_COLORS, head_color, use_style


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
