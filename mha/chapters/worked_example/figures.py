"""The worked example's presentation: every matrix as text and as LaTeX, and the chapter's explorers.

* The matrices of :mod:`~mha.chapters.worked_example.worked` as text and as LaTeX, made from the same
  numbers (:func:`format_matrix` and :func:`to_latex`), so what the book typesets is what nbval checks;
  and the explorer of the example.
* The "change the example" explorer: every intermediate of the worked example on the reader's five
  words (scores, weights, the concatenated head outputs, the output), one heatmap each, from
  :mod:`~mha.chapters.worked_example.worked_edit`.
"""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import torch

from ...viz.artists import heatmap_artists, set_heatmap, set_tick_labels, spines, suptitle, text_layer, tick_label_texts
from ...viz.live import LiveFigure
from ...viz.plotting import contrast_color, head_color, plot_attention, use_style
from .worked import DTYPE, FEATURES, OUTPUT_FEATURES, WorkedExample, token_labels
from .worked_edit import explorer_example, sentence_example


# ----------------------------------------------------------------------------------------------
# worked
# ----------------------------------------------------------------------------------------------
def _is_integer_matrix(m: torch.Tensor) -> bool:
    return bool(torch.all(m == torch.round(m)))


def format_number(value: float, integers: bool) -> str:
    """Integers exactly (``4``, ``-1``); everything else with 3 decimals (``0.649``)."""
    value = float(value)
    if integers:
        return str(int(round(value)))
    text = f"{value:.3f}"
    return "0.000" if text == "-0.000" else text


def _cells(m: torch.Tensor, row_sums: bool):
    m = torch.as_tensor(m).detach().to("cpu", DTYPE)
    if m.dim() != 2:
        raise ValueError(f"matrix must have 2 dimensions, found shape {tuple(m.shape)}")
    integers = _is_integer_matrix(m)
    rows = [[format_number(value, integers) for value in row] for row in m.tolist()]
    if row_sums:
        for row, total in zip(rows, m.sum(dim=1).tolist()):
            row.append(format_number(total, False))
    return rows


def format_matrix(m, name: str, row_labels=None, col_labels=None, *, row_sums: bool = False) -> str:
    """A labelled matrix as plain text: a title line, a header of column labels, one row per line.

    Integer matrices print exactly, others with 3 decimals; ``row_sums`` adds a ``sum`` column.
    """
    rows = _cells(m, row_sums)
    n_rows, n_cols = len(rows), len(rows[0]) - int(row_sums)
    row_labels = [f"{i + 1}" for i in range(n_rows)] if row_labels is None else [str(r) for r in row_labels]
    col_labels = [f"{j + 1}" for j in range(n_cols)] if col_labels is None else [str(c) for c in col_labels]
    if len(row_labels) != n_rows or len(col_labels) != n_cols:
        raise ValueError(
            f"labels must match the matrix shape ({n_rows}, {n_cols}), "
            f"found {len(row_labels)} row and {len(col_labels)} column labels"
        )
    if row_sums:
        col_labels = col_labels + ["sum"]
    width = max(len(c) for row in rows + [col_labels] for c in row)
    label_width = max(len(r) for r in row_labels)
    lines = [f"{name}  ({n_rows} x {n_cols})", " " * label_width + "  " + " ".join(c.rjust(width) for c in col_labels)]
    for label, row in zip(row_labels, rows):
        lines.append(label.ljust(label_width) + "  " + " ".join(c.rjust(width) for c in row))
    return "\n".join(lines)


def _tex_text(label) -> str:
    return r"\text{" + "".join("\\" + c if c in "_#%&$" else c for c in str(label)) + "}"


def to_latex(m, name: str, row_labels=None, col_labels=None, *, row_sums: bool = False) -> str:
    """``name = …`` typeset with the numbers of :func:`format_matrix`.

    Without labels, a ``bmatrix``. With ``row_labels`` and ``col_labels``, a table whose first row
    names the columns and whose first column names the rows (the same labels as the text form);
    ``row_sums`` adds a ``sum`` column (with labels) or a column vector of sums (without).
    """
    rows = _cells(m, row_sums)
    sums = [row.pop() for row in rows] if row_sums else None
    # wide rows in smaller type, so that 8 columns of 3 decimals fit the book's column at 1280 px
    # (MultiHead(X) was 705 px wide in \small, the column 688 px)
    chars = sum(len(c) for c in rows[0])
    small = r"\footnotesize " if chars > 40 else r"\small " if chars > 30 else ""
    if row_labels is None and col_labels is None:
        body = r" \\ ".join(" & ".join(row) for row in rows)
        latex = small + rf"{name} = \begin{{bmatrix}} {body} \end{{bmatrix}}"
        if sums is not None:
            latex += r" \qquad \text{row sums: } \begin{bmatrix} " + r" \\ ".join(sums) + r" \end{bmatrix}"
        return latex
    if row_labels is None or col_labels is None or len(row_labels) != len(rows) or len(col_labels) != len(rows[0]):
        raise ValueError(
            f"labels must match the matrix shape ({len(rows)}, {len(rows[0])}), found "
            f"{None if row_labels is None else len(row_labels)} row and "
            f"{None if col_labels is None else len(col_labels)} column labels"
        )
    header = [_tex_text(c) for c in col_labels] + ([r"\text{sum}"] if row_sums else [])
    lines = [" & " + " & ".join(header)]
    for i, (label, row) in enumerate(zip(row_labels, rows)):
        lines.append(_tex_text(label) + " & " + " & ".join(row + ([sums[i]] if row_sums else [])))
    spec = "l|" + "r" * len(rows[0]) + ("|r" if row_sums else "")
    body = lines[0] + r" \\ \hline " + r" \\ ".join(lines[1:])
    return small + rf"{name} = \begin{{array}}{{{spec}}} {body} \end{{array}}"


class Matrix:
    """A labelled matrix that displays as typeset LaTeX in the book and as text in plain output.

    Both representations come from the same numbers (:func:`to_latex` and :func:`format_matrix`).
    """

    def __init__(self, m, name: str, latex_name: str, row_labels=None, col_labels=None, *, row_sums=False):
        self.text = format_matrix(m, name, row_labels, col_labels, row_sums=row_sums)
        rows, cols = m.shape
        self.latex = to_latex(
            m,
            latex_name,
            [f"{i + 1}" for i in range(rows)] if row_labels is None else row_labels,
            [f"{j + 1}" for j in range(cols)] if col_labels is None else col_labels,
            row_sums=row_sums,
        )

    def __repr__(self) -> str:
        return self.text

    def _repr_latex_(self) -> str:
        return f"$$ {self.latex} $$"


def matrices(example: WorkedExample, step: str) -> list[Matrix]:
    """The labelled matrices of one step of the example, in page order.

    ``step`` is one of ``x``, ``weights_in`` (W_Q, W_K, W_V per head), ``w_o``, ``qkv``,
    ``scores``, ``scaled_scores``, ``weights``, ``head_outputs``, ``concat``, ``output``.
    """
    ex = example
    rows = token_labels(ex.tokens)
    dk = [f"d{j + 1}" for j in range(ex.head_dim)]
    heads = range(ex.num_heads)
    if step == "x":
        return [Matrix(ex.x, "X", "X", rows, FEATURES)]
    if step == "weights_in":
        return [
            Matrix(getattr(ex, f"w_{n}")[h], f"W_{n.upper()} head {h + 1}", rf"W_{h + 1}^{n.upper()}", FEATURES, dk)
            for h in heads
            for n in "qkv"
        ]
    if step == "w_o":
        cols = [f"h{h + 1}.{c}" for h in heads for c in dk]
        return [Matrix(ex.w_o, "W_O", "W^O", cols, OUTPUT_FEATURES)]
    if step == "qkv":
        return [
            Matrix(getattr(ex, n)[h], f"{n.upper()} head {h + 1}", rf"{n.upper()}_{h + 1}", rows, dk)
            for h in heads
            for n in "qkv"
        ]
    if step in ("scores", "scaled_scores", "weights"):
        tau = ex.temperature != 1.0
        title = {
            "scores": "scores = Q K^T",
            "scaled_scores": "scaled scores = Q K^T / sqrt(d_k)" + (" / temperature" if tau else ""),
            "weights": "weights = softmax(scaled scores)",
        }[step]
        denominator = r"\sqrt{d_k}\,\tau" if tau else r"\sqrt{d_k}"
        latex = {
            "scores": lambda h: rf"Q_{h} K_{h}^\top",
            "scaled_scores": lambda h: rf"\frac{{Q_{h} K_{h}^\top}}{{{denominator}}}",
            "weights": lambda h: rf"A_{h}",
        }[step]
        return [
            Matrix(
                getattr(ex, step)[h],
                f"{title}, head {h + 1}",
                latex(h + 1),
                rows,
                ex.tokens,
                row_sums=step == "weights",
            )
            for h in heads
        ]
    if step == "head_outputs":
        return [
            Matrix(ex.head_outputs[h], f"head {h + 1} output = weights @ V", rf"\mathrm{{head}}_{h + 1}", rows, dk)
            for h in heads
        ]
    if step == "concat":
        cols = [f"h{h + 1}.{c}" for h in heads for c in dk]
        return [Matrix(ex.concat, "concat = [head 1, head 2]", r"[\mathrm{head}_1, \mathrm{head}_2]", rows, cols)]
    if step == "output":
        return [Matrix(ex.output, "output = concat @ W_O", r"\mathrm{MultiHead}(X)", rows, OUTPUT_FEATURES)]
    raise ValueError(
        f"step must be one of x, weights_in, w_o, qkv, scores, scaled_scores, weights, "
        f"head_outputs, concat, output; found {step!r}"
    )


class MatrixRow:
    """Matrices that are read together (one head's W^Q, W^K, W^V), typeset side by side in one display;
    their text forms one under the other."""

    def __init__(self, items: list[Matrix]):
        self.items = list(items)
        self.text = "\n\n".join(m.text for m in self.items)

    def __repr__(self) -> str:
        return self.text

    def _repr_latex_(self) -> str:
        return "$$ " + r" \qquad ".join(m.latex for m in self.items) + " $$"


#: The steps whose matrices stand in pairs, side by side, as the text compares them: each head's query
#: and key matrices (the text: "the query of position p and the key of position p - 1 point the same
#: way"), then the two heads' value matrices (the same in both heads). Two 8 x 4 matrices fit the book's
#: 688-px column at 1280 px (tests/browser/test_browser_math.py); three, or two 5 x 5 score matrices, do not.
SIDE_BY_SIDE = ("weights_in", "qkv")


def displayed(example: WorkedExample, step: str) -> list:
    """What :func:`show` displays for ``step``: its matrices, paired by :data:`SIDE_BY_SIDE` as
    ``[Q_1, K_1], [Q_2, K_2], [V_1, V_2]``, or one by one."""
    items = matrices(example, step)
    if step not in SIDE_BY_SIDE:
        return items
    q, k, v = (items[n::3] for n in range(3))  # matrices() gives head 1's q, k, v, then head 2's
    return [MatrixRow([q[h], k[h]]) for h in range(example.num_heads)] + [MatrixRow(v)]


def show(example: WorkedExample, step: str) -> None:
    """Display one step's matrices, once each: the book typesets them (LaTeX), side by side where they are
    read together, and their plain-text form, made from the same numbers, is what nbval compares."""
    from IPython.display import display

    for m in displayed(example, step):
        display(m)


def plot_two_heads_and_one(example: WorkedExample, single_weights):
    """The two heads' weights next to those of one head of the same total size.

    Shapes:
        single_weights (T, T), the single head's weights on the example's tokens.
    Returns:
        matplotlib.figure.Figure
    """
    use_style()
    fig, axes = plt.subplots(1, 3, figsize=(9.4, 3.5))
    labels = token_labels(example.tokens)
    for h in range(example.num_heads):
        title = f"two heads: head {h + 1}"
        plot_attention(
            example.weights[h], labels, example.tokens, ax=axes[h], title=title, color=head_color(h), fontsize=10
        )
    plot_attention(
        single_weights, labels, example.tokens, ax=axes[2], title="one head of size 8", color="#555555", fontsize=10
    )
    for ax in axes[1:]:
        ax.set_ylabel("")
    fig.tight_layout()
    return fig


def _row_text(values) -> str:
    return " ".join(f"{float(v):6.3f}" for v in values)


#: The step panel's font size in points: 11 pt is about 12 px in a frame stored at 80 dpi, shown
#: unscaled because the figure is narrower than the book's text column (tests/chapters/test_worked.py).
PANEL_FONTSIZE = 11


def explorer_summary(example: WorkedExample, token: int = 5) -> str:
    """Text panel of the explorer: one token's row at every step, the two heads side by side."""
    ex, t = example, token - 1
    features = ", ".join(f"{name} {float(v):g}" for name, v in zip(FEATURES[:3], ex.x[t, :3]))
    width = 7 * len(ex.tokens) - 1  # five numbers of "%6.3f", one space apart
    lines = [
        f"token {token} ({ex.tokens[t]}): {features}; temperature {ex.temperature:g}",
        f"{'':10s} {'head 1 (previous token)':{width}s}   head 2 (same type)",
    ]
    steps = [("q", ex.q), ("k", ex.k), ("s/(√d τ)", ex.scaled_scores), ("A", ex.weights), ("out", ex.head_outputs)]
    for label, values in steps:
        lines.append(f"{label:10s}{_row_text(values[0, t]):{width}s}   {_row_text(values[1, t])}")
    lines.append(f"{'o1 … o8':10s}{_row_text(ex.output[t, :4]):{width}s}   {_row_text(ex.output[t, 4:])}")
    return "\n".join(lines)


def render_explorer(dog_type: str = "noun", temperature: float = 1.0):
    """Both heads' weights side by side, and below them the edited token's row at every step.

    Returns:
        matplotlib.figure.Figure
    """
    use_style()
    ex = explorer_example(dog_type, temperature)
    fig = plt.figure(figsize=(7.4, 5.6))
    grid = fig.add_gridspec(2, 2, height_ratios=[1.5, 0.75], left=0.13, right=0.99, top=0.88, bottom=0.0, hspace=0.42)
    labels = token_labels(ex.tokens)
    titles = ["head 1 (previous token)", "head 2 (same type)"]
    for h in range(ex.num_heads):
        ax = fig.add_subplot(grid[0, h])
        plot_attention(ex.weights[h], labels, ex.tokens, ax=ax, title=titles[h], color=head_color(h), fontsize=9)
        if h:
            ax.set_ylabel("")
    panel = fig.add_subplot(grid[1, :])
    panel.axis("off")
    panel.text(
        -0.12,
        0.78,
        explorer_summary(ex),
        family="monospace",
        fontsize=PANEL_FONTSIZE,
        va="top",
        ha="left",
        transform=panel.transAxes,
    )
    fig.suptitle(_explorer_title(dog_type, temperature))
    return fig


def _explorer_title(dog_type: str, temperature: float) -> str:
    return f"dog is a {dog_type if dog_type != 'none' else 'word of no type'}, temperature {temperature:g}"


class WorkedPlot(LiveFigure):
    """:func:`render_explorer` updated in place: both heads' weights, dog's rows and the title."""

    def draw(self, dog_type: str = "noun", temperature: float = 1.0):
        return render_explorer(dog_type, temperature)

    def update(self, fig, dog_type: str = "noun", temperature: float = 1.0):
        ex = explorer_example(dog_type, temperature)
        *heads, panel = fig.axes
        for h, ax in enumerate(heads):
            weights = ex.weights[h].numpy()
            set_heatmap(ax, weights, color=contrast_color(ax.images[0], weights))
        panel.texts[0].set_text(explorer_summary(ex))
        suptitle(fig).set_text(_explorer_title(dog_type, temperature))

    def artists(self, fig):
        *heads, panel = fig.axes
        return [*(a for ax in heads for a in heatmap_artists(ax)), *panel.texts, suptitle(fig)]


# ----------------------------------------------------------------------------------------------
# worked_edit
# ----------------------------------------------------------------------------------------------
def _panels(ex):
    """(title, values, column labels, colour map, colour limits) for each of the six panels."""
    heads = [f"h{h + 1}.d{j + 1}" for h in range(ex.num_heads) for j in range(ex.head_dim)]
    panels = []
    for h in range(ex.num_heads):
        panels.append((f"head {h + 1}: scores $QK^\\top$", ex.scores[h], ex.tokens, "RdBu_r", (-8.0, 8.0)))
    for h in range(ex.num_heads):
        cmap = matplotlib.colors.LinearSegmentedColormap.from_list("head", ["#ffffff", head_color(h)])
        panels.append((f"head {h + 1}: weights", ex.weights[h], ex.tokens, cmap, (0.0, 1.0)))
    for title, values, cols in (
        ("head outputs, concatenated (weights · $V$)", ex.concat, heads),
        ("output = concat · $W^O$", ex.output, OUTPUT_FEATURES),
    ):
        limit = max(1.0, float(values.abs().max()))
        panels.append((title, values, cols, "RdBu_r", (-limit, limit)))
    return panels


def _number(v: float, hi: float) -> str:
    """A cell's label: weights with two decimals, scores (whole numbers here) as they are."""
    return f"{v:.2f}" if hi <= 1.0 else f"{v:g}"


def _title(ex) -> str:
    return f"'{' '.join(ex.tokens)}', temperature {ex.temperature:g}"


#: The figure's size in inches: two panels abreast in three rows (scores, weights, outputs), so
#: that at 80 dpi it fits the book's column and its smallest text (9 pt) is 10 CSS px tall.
SIZE = (8.4, 8.2)


def plot_sentence_example(tokens="the cat saw the dog", temperature: float = 1.0):
    """Six heatmaps in three rows: both heads' scores, both heads' weights, then the concatenated
    head outputs and the output.

    Returns:
        matplotlib.figure.Figure
    """
    use_style()
    ex = sentence_example(tokens, temperature)
    fig = plt.figure(figsize=SIZE)
    grid = fig.add_gridspec(3, 2, left=0.1, right=0.99, top=0.92, bottom=0.08, hspace=0.62, wspace=0.22)
    for place, (title, values, cols, cmap, (lo, hi)) in zip(grid, _panels(ex)):
        ax = fig.add_subplot(place)
        values = np.asarray(values, dtype=float)
        ax.imshow(values, cmap=cmap, vmin=lo, vmax=hi, aspect="auto")
        ax.set_xticks(range(len(cols)), cols, rotation=45 if len(cols) > len(ex.tokens) else 0, fontsize=9)
        ax.set_yticks(range(len(ex.tokens)), ex.tokens, fontsize=9)
        ax.set_title(title, fontsize=10)
        if values.shape[1] <= len(ex.tokens):  # numbers on the 5 x 5 panels; colours alone on the wide ones
            for (i, j), v in np.ndenumerate(values):
                ax.text(j, i, _number(v, hi), ha="center", va="center", fontsize=9)
    fig.suptitle(_title(ex))
    return fig


class SentenceExample(LiveFigure):
    """:func:`plot_sentence_example` updated in place: the six images and their numbers, the
    colour limits of the two last panels, the words on the axes and the title."""

    def draw(self, tokens="the cat saw the dog", temperature: float = 1.0):
        return plot_sentence_example(tokens, temperature)

    def update(self, fig, tokens="the cat saw the dog", temperature: float = 1.0):
        ex = sentence_example(tokens, temperature)
        for k, (ax, (_, values, _, _, (lo, hi))) in enumerate(zip(fig.axes, _panels(ex))):
            values = np.asarray(values, dtype=float)
            ax.images[0].set_data(values)
            ax.images[0].set_clim(lo, hi)
            for text, v in zip(ax.texts, values.flat):
                text.set_text(_number(v, hi))
            set_tick_labels(ax, ex.tokens, "xy" if k < 4 else "y")
        suptitle(fig).set_text(_title(ex))

    def artists(self, fig):
        words = [t for k, ax in enumerate(fig.axes) for t in tick_label_texts(ax, "xy" if k < 4 else "y")]
        images = [part for ax in fig.axes for part in (*ax.images, *ax.texts)]
        return [*images, *spines(*fig.axes), text_layer(fig, words), suptitle(fig)]
