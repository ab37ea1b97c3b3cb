"""The first explorer's figure (How to use this book): softmax(scores / temperature) as bars.

The numbers come from :mod:`mha.chapters.softmax_demo`.
"""

from __future__ import annotations

import matplotlib.pyplot as plt

from ..attention import entropy_bits
from ..chapters.softmax_demo import SCORES, TOKENS, softmax_with_temperature
from .live import LiveFigure
from .plotting import HEAD_COLORS, use_style


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
