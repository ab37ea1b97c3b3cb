"""The book's one matplotlib style and the attention plots every chapter uses.

Only ``mha.viz`` imports matplotlib. Every function takes ``ax=None`` and returns the figure, so a
notebook can embed it or draw it into a larger layout.
"""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import torch

#: One colour per head, used in every chapter: the colour-blind-safe Okabe-Ito palette, with its
#: yellow (#F0E442, 1.2:1 against white, faint on the page) darkened to an olive (4.1:1).
HEAD_COLORS = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#8C7B00", "#000000"]

STYLE = {
    "figure.figsize": (6.0, 4.0),
    "figure.dpi": 100,
    "savefig.dpi": 100,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": False,
    "axes.prop_cycle": matplotlib.cycler(color=HEAD_COLORS),
    "font.size": 10,
    "legend.frameon": False,
    "image.cmap": "viridis",
    "svg.hashsalt": "mha-course",
}


def use_style() -> None:
    """Apply the course's plotting style to every later figure.

    In a notebook (IPython with the inline backend) a figure output then also stores its alt text
    and the size of its smallest text (:func:`mha.viz.describe.figure_output`): the book shows the
    alt text and a test checks that the text is legible at the book's column width."""
    plt.rcParams.update(STYLE)
    describe_notebook_figures()


def describe_notebook_figures() -> bool:
    """Make :func:`mha.viz.describe.figure_output` the PNG formatter of figures in this IPython
    kernel (inline backend only). Returns whether it did."""
    import sys

    from matplotlib.figure import Figure

    from .describe import figure_output

    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None or "inline" not in str(matplotlib.get_backend()):
        return False
    # The inline backend registers its own formatters when it is first imported: import it first.
    import matplotlib_inline.backend_inline  # noqa: F401

    shell.display_formatter.formatters["image/png"].for_type(Figure, figure_output)
    return True


def head_color(i: int) -> str:
    """The colour of head ``i`` (cycles after eight heads)."""
    return HEAD_COLORS[i % len(HEAD_COLORS)]


def _to_numpy(weights) -> np.ndarray:
    if isinstance(weights, torch.Tensor):
        weights = weights.detach().to("cpu", torch.float64).numpy()
    return np.asarray(weights, dtype=float)


def plot_attention(
    weights,
    query_tokens,
    key_tokens=None,
    *,
    ax=None,
    title="Attention weights",
    annotate=True,
    color=None,
    vmax=1.0,
    fontsize=9,
):
    """Heatmap of one head's weights, rows = queries, columns = keys, with token labels.

    ``annotate`` writes each weight in its cell (at ``fontsize`` points) when there are at most 100.

    Shapes:
        weights (T, S); query_tokens T strings; key_tokens S strings (default: query_tokens).
    Returns:
        matplotlib.figure.Figure
    """
    w = _to_numpy(weights)
    if w.ndim != 2:
        raise ValueError(f"weights must have shape (T, S), found shape {w.shape}")
    key_tokens = query_tokens if key_tokens is None else key_tokens
    if len(query_tokens) != w.shape[0] or len(key_tokens) != w.shape[1]:
        raise ValueError(
            f"token labels must match weights (T, S) = {w.shape}, "
            f"found {len(query_tokens)} query and {len(key_tokens)} key tokens"
        )
    if ax is None:
        fig, ax = plt.subplots(figsize=(0.5 * w.shape[1] + 2.0, 0.45 * w.shape[0] + 1.5))
    fig = ax.figure
    cmap = "viridis"
    if color is not None:
        cmap = matplotlib.colors.LinearSegmentedColormap.from_list("head", ["#ffffff", color])
    image = ax.imshow(w, cmap=cmap, vmin=0.0, vmax=vmax, aspect="auto")
    ax.set_xticks(range(len(key_tokens)), key_tokens, rotation=45, ha="right")
    ax.set_yticks(range(len(query_tokens)), query_tokens)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query")
    ax.set_title(title)
    if annotate and w.size <= 100:
        for (i, j), value in np.ndenumerate(w):
            ax.text(
                j,
                i,
                f"{value:.2f}",
                ha="center",
                va="center",
                fontsize=fontsize,
                color=contrast_color(image, value),
            )
    return fig


def contrast_color(image, value):
    """``"white"`` or ``"black"``: the label colour that reads on ``image``'s cell of ``value`` (an
    array of values gives an array of colours, computed at once)."""
    rgba = np.asarray(image.cmap(image.norm(value)))
    luminance = rgba[..., :3] @ np.array([0.2126, 0.7152, 0.0722])
    colors = np.where(luminance < 0.5, "white", "black")
    return str(colors) if colors.ndim == 0 else colors


def plot_heads(weights, query_tokens, key_tokens=None, *, title=None, annotate=True, axes=None):
    """One heatmap per head, side by side, each in its head's colour.

    Shapes:
        weights (H, T, S).
    Returns:
        matplotlib.figure.Figure
    """
    w = _to_numpy(weights)
    if w.ndim != 3:
        raise ValueError(f"weights must have shape (H, T, S), found shape {w.shape}")
    num_heads = w.shape[0]
    if axes is None:
        width = (0.45 * w.shape[2] + 1.2) * num_heads + 1.0
        fig, axes = plt.subplots(1, num_heads, figsize=(width, 0.45 * w.shape[1] + 1.8), squeeze=False)
        axes = axes[0]
    for h, ax in enumerate(axes):
        plot_attention(
            w[h], query_tokens, key_tokens, ax=ax, title=f"head {h + 1}", annotate=annotate, color=head_color(h)
        )
        if h:
            ax.set_ylabel("")
    fig = axes[0].figure
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
