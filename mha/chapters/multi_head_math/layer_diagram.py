"""The multi-head-math chapter's picture of the whole layer: every tensor of multi-head attention, with its shape.

X (n, d_model) -> Q, K, V (n, d_model) -> h heads of (n, d_k) -> scores and weights (h, n, m)
-> per-head outputs (h, n, d_k) -> concatenation (n, h·d_k) -> W^O -> (n, d_model), drawn from
the sizes given (the chapter's 5 tokens, d_model = 8, 2 heads), one grid cell per number.

The book shows it as a static SVG, one file per language (``book/images/mha_layer.svg`` and
``mha_layer.zh_CN.svg``, written by ``scripts/make_figures.py``). The SVG keeps its text as text
(``svg.fonttype: none``), so no Chinese font is needed to write it and the reader's browser picks
one; it is deterministic (fixed ``svg.hashsalt``, no date, no creator), so a test can compare the
committed files with a fresh run. The figure is tall and narrow: on a phone it shrinks little, and
its smallest text stays legible (:func:`smallest_font_px`).
"""

from __future__ import annotations

import io
import re
import warnings

import matplotlib
import matplotlib.pyplot as plt
from matplotlib.collections import LineCollection
from matplotlib.patches import FancyArrowPatch, Rectangle

from ...viz.plotting import head_color

#: The width the chapter displays the figure at (its ``{figure}`` directive's ``:width:``), in CSS px.
DISPLAY_WIDTH_PX = 440
#: The narrowest column the figure meets: a 390-pixel-wide phone less the page's margins, in CSS px.
PHONE_WIDTH_PX = 358
#: The figure's width in points (the SVG's user units); the height follows from the sizes drawn.
WIDTH_PT = 340.0
#: Languages with labels; ``book/images/mha_layer{suffix}.svg`` per language.
LANGUAGES = {"en": "", "zh_CN": ".zh_CN"}

#: Every word the figure shows, per language. Formulas and shapes are language-neutral mathtext.
LABELS = {
    "en": {
        "title": "One multi-head attention layer",
        "sizes": "n = {n} tokens, d_model = {d_model}, h = {h} heads of d_k = {d_k}",
        "self": "self-attention: m = n keys",
        "head": "head {i}",
        "input": "1  Input",
        "input_note": "one row per token",
        "project": "2  Project",
        "project_note": "coloured by head",
        "split": "3  Split into heads",
        "split_note": "one (n, d_k) per head",
        "scores": "4  Scores, softmax",
        "scores_note": "weights: rows sum to 1",
        "scores_label": "scores",
        "weights_label": "weights",
        "context": "5  Weights × values",
        "context_note": "one output per head",
        "concat": "6  Concatenate",
        "concat_note": "heads side by side",
        "output": "7  Output",
        "output_note": "mixes the heads",
    },
    "zh_CN": {
        "title": "一个多头注意力层",
        "sizes": "n = {n} 个词元，d_model = {d_model}，h = {h} 个头，d_k = {d_k}",
        "self": "自注意力：m = n 个键",
        "head": "头 {i}",
        "input": "1  输入",
        "input_note": "每个词元一行",
        "project": "2  投影",
        "project_note": "颜色表示所属的头",
        "split": "3  切分成多个头",
        "split_note": "每个头一个 (n, d_k)",
        "scores": "4  分数与 softmax",
        "scores_note": "权重：每行之和为 1",
        "scores_label": "分数",
        "weights_label": "权重",
        "context": "5  权重乘以值",
        "context_note": "每个头一个输出",
        "concat": "6  拼接",
        "concat_note": "各个头并排放置",
        "output": "7  输出",
        "output_note": "把各个头混合起来",
    },
}

#: The style the SVG is written with: text stays text, and the same input gives the same bytes.
SVG_STYLE = {
    "svg.fonttype": "none",
    "svg.hashsalt": "mha-layer-diagram",
    "mathtext.fontset": "dejavusans",
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans"],
    "path.simplify": False,
}

GRAY = "#9e9e9e"
INK = "#222222"
TEXT_PT, NOTE_PT, MATH_PT, SHAPE_PT, TITLE_PT = 10.5, 9.5, 12.5, 9.5, 12.0
CELL_PT, GRID_X0, TEXT_X = 6.0, 16.0, 204.0


def layer_shapes(n: int = 5, d_model: int = 8, num_heads: int = 2, m: int | None = None) -> dict:
    """The shape of every tensor the figure draws, for one sequence (no batch axis).

    ``m`` is the number of keys (default ``n``: self-attention).

    Returns:
        dict name -> shape tuple: x, q, k, v (n or m, d_model); q_heads (h, n, d_k);
        k_heads, v_heads (h, m, d_k); scores, weights (h, n, m); context (h, n, d_k);
        concat (n, h·d_k); output (n, d_model).
    """
    if d_model % num_heads:
        raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads})")
    m = n if m is None else m
    d_k = d_model // num_heads
    return {
        "x": (n, d_model),
        "q": (n, d_model),
        "k": (m, d_model),
        "v": (m, d_model),
        "q_heads": (num_heads, n, d_k),
        "k_heads": (num_heads, m, d_k),
        "v_heads": (num_heads, m, d_k),
        "scores": (num_heads, n, m),
        "weights": (num_heads, n, m),
        "context": (num_heads, n, d_k),
        "concat": (n, num_heads * d_k),
        "output": (n, d_model),
    }


def _shape_text(shape) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ")"


def _tint(color: str, amount: float = 0.55) -> tuple:
    """``color`` mixed with white (``amount`` of white): grid lines stay visible on it."""
    r, g, b = matplotlib.colors.to_rgb(color)
    return (r + (1 - r) * amount, g + (1 - g) * amount, b + (1 - b) * amount)


class _Canvas:
    """Draws in points, y growing downwards, on one axes that covers the whole figure."""

    def __init__(self, height: float, cell: float):
        self.height, self.cell = height, cell
        self.fig = plt.figure(figsize=(WIDTH_PT / 72, height / 72))
        self.ax = self.fig.add_axes((0, 0, 1, 1))
        self.ax.set_xlim(0, WIDTH_PT)
        self.ax.set_ylim(height, 0)
        self.ax.set_axis_off()

    def grid(self, x, y, rows, cols, colors):
        """A rows x cols grid with its top-left corner at (x, y); ``colors`` one per column."""
        c = self.cell
        for j, color in enumerate(colors):  # one rectangle per run of equal colours
            if j and colors[j - 1] == color:
                continue
            run = next((k for k in range(j, cols) if colors[k] != color), cols) - j
            self.ax.add_patch(Rectangle((x + j * c, y), run * c, rows * c, facecolor=color, edgecolor="none"))
        lines = [[(x, y + i * c), (x + cols * c, y + i * c)] for i in range(1, rows)]
        lines += [[(x + j * c, y), (x + j * c, y + rows * c)] for j in range(1, cols)]
        self.ax.add_collection(LineCollection(lines, colors="white", linewidths=0.8))
        self.ax.add_patch(Rectangle((x, y), cols * c, rows * c, facecolor="none", edgecolor=INK, linewidth=0.8))
        return x + cols * c / 2, y + rows * c  # bottom centre

    def stack(self, x, y, heads, rows, cols):
        """``heads`` cards of rows x cols, head 1 in front, each behind it offset up and right."""
        step = 0.6 * self.cell
        for i in reversed(range(heads)):
            dx, dy = i * step, -i * step
            if i:
                self.ax.add_patch(
                    Rectangle(
                        (x + dx, y + dy),
                        cols * self.cell,
                        rows * self.cell,
                        facecolor=_tint(head_color(i)),
                        edgecolor=INK,
                        linewidth=0.8,
                    )
                )
            else:
                self.grid(x, y, rows, cols, [_tint(head_color(0))] * cols)
        return x + cols * self.cell / 2, y + rows * self.cell

    def text(self, x, y, s, size, *, ha="left", weight="normal", color=INK):
        self.ax.text(x, y, s, fontsize=size, ha=ha, va="baseline", fontweight=weight, color=color)

    def arrow(self, start, end):
        self.ax.add_patch(
            FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=8, color=INK, linewidth=0.9, shrinkA=0)
        )


def draw_layer(n: int = 5, d_model: int = 8, num_heads: int = 2, lang: str = "en"):
    """The whole layer, top to bottom, for ``n`` tokens, width ``d_model`` and ``num_heads`` heads.

    Shapes:
        the grids are drawn one cell per number: X (n, d_model), ..., output (n, d_model).
    Returns:
        matplotlib.figure.Figure
    """
    if lang not in LABELS:
        raise ValueError(f"lang must be one of {sorted(LABELS)}, found {lang!r}")
    if not (1 <= n <= 8 and 1 <= d_model <= 8 and 1 <= num_heads <= 4):
        raise ValueError(
            f"the figure draws one cell per number: n <= 8, d_model <= 8, num_heads <= 4, "
            f"found n = {n}, d_model = {d_model}, num_heads = {num_heads}"
        )
    labels, shapes = LABELS[lang], layer_shapes(n, d_model, num_heads)
    d_k, cell = d_model // num_heads, CELL_PT
    width, stack_w, grid_h = d_model * cell, d_k * cell, n * cell
    rise = (num_heads - 1) * 0.6 * cell  # how far the back cards of a stack stand out
    row_h = max(grid_h + rise + 34.0, 66.0)  # grids, their shape labels, the arrow to the next row
    top = 70.0
    canvas = _Canvas(top + 7 * row_h + 2.0, cell)
    head_cols = [_tint(head_color(j // d_k)) for j in range(d_model)]
    gray = [_tint(GRAY, 0.4)] * d_model
    xs3 = [GRID_X0 + i * (width + 14.0) for i in range(3)]  # the Q, K and V columns
    centre = xs3[1] + width / 2

    canvas.text(WIDTH_PT / 2, 16, labels["title"], TITLE_PT, ha="center", weight="bold")
    sizes = labels["sizes"].format(n=n, d_model=d_model, h=num_heads, d_k=d_k)
    canvas.text(WIDTH_PT / 2, 31, sizes, NOTE_PT, ha="center")
    canvas.text(WIDTH_PT / 2, 44, labels["self"], NOTE_PT, ha="center")
    legend_w = 62.0
    for i in range(num_heads):  # the head colours
        x = WIDTH_PT / 2 - legend_w * num_heads / 2 + i * legend_w
        canvas.ax.add_patch(Rectangle((x, 50.0), 9.0, 9.0, facecolor=_tint(head_color(i)), edgecolor=INK, lw=0.8))
        canvas.text(x + 13.0, 58.0, labels["head"].format(i=i + 1), NOTE_PT)

    def row_y(r):  # top of row r's front grids (the back cards of a stack rise above it)
        return top + r * row_h + rise + 6.0

    def describe(r, title, formula, shape, note):
        y = top + r * row_h + 14.0
        canvas.text(TEXT_X, y, labels[title], TEXT_PT, weight="bold")
        canvas.text(TEXT_X, y + 17.0, formula, MATH_PT)
        canvas.text(TEXT_X, y + 34.0, shape, MATH_PT)
        canvas.text(TEXT_X, y + 48.0, labels[note], NOTE_PT)

    def shape_label(bottom, shape, dy=11.0):
        canvas.text(bottom[0], bottom[1] + dy, _shape_text(shape), SHAPE_PT, ha="center")

    def letter(x, y, name):
        canvas.text(x - 3.0, y + grid_h / 2 + 4.0, name, TEXT_PT, ha="right", weight="bold")

    # 1: the input
    x_bottom = canvas.grid(centre - width / 2, row_y(0), n, d_model, gray)
    shape_label(x_bottom, shapes["x"])
    letter(centre - width / 2, row_y(0), "X")
    describe(0, "input", "$X$", r"$(n,\ d_{\mathrm{model}})$", "input_note")

    # 2: Q, K, V, each column coloured by the head it will belong to
    qkv_bottoms = []
    for x, name in zip(xs3, "qkv"):
        canvas.arrow((x_bottom[0], x_bottom[1] + 14.0), (x + width / 2, row_y(1) - 3.0))
        qkv_bottoms.append(canvas.grid(x, row_y(1), n, d_model, head_cols))
        shape_label(qkv_bottoms[-1], shapes[name])
        letter(x, row_y(1), name.upper())
    describe(1, "project", "$XW^Q,\\ XW^K,\\ XW^V$", r"$(n,\ d_{\mathrm{model}})\ \times 3$", "project_note")

    # 3: each of Q, K, V as a stack of h heads of (n, d_k)
    split_bottoms = []
    for b, name in zip(qkv_bottoms, "qkv"):
        canvas.arrow((b[0], b[1] + 14.0), (b[0], row_y(2) - rise - 3.0))
        split_bottoms.append(canvas.stack(b[0] - stack_w / 2, row_y(2), num_heads, n, d_k))
        shape_label(split_bottoms[-1], shapes[f"{name}_heads"])
        letter(b[0] - stack_w / 2, row_y(2), name.upper())
    describe(2, "split", r"$d_k = d_{\mathrm{model}}\,/\,h$", r"$(h,\ n,\ d_k)$", "split_note")

    # 4: scores from Q and K; softmax along each row gives the weights
    sq_w = n * cell
    scores_x = (split_bottoms[0][0] + split_bottoms[1][0]) / 2 - sq_w / 2
    weights_x = split_bottoms[1][0] + 12.0
    for b in split_bottoms[:2]:
        canvas.arrow((b[0], b[1] + 14.0), (scores_x + sq_w / 2, row_y(3) - rise - 3.0))
    s_bottom = canvas.stack(scores_x, row_y(3), num_heads, n, n)
    w_bottom = canvas.stack(weights_x, row_y(3), num_heads, n, n)
    for bottom, name in ((s_bottom, "scores_label"), (w_bottom, "weights_label")):
        canvas.text(bottom[0], bottom[1] + 11.0, labels[name], NOTE_PT, ha="center")
        shape_label(bottom, shapes["scores"], dy=22.0)
    mid_y = row_y(3) + grid_h / 2
    canvas.arrow((scores_x + sq_w + rise + 2.0, mid_y), (weights_x - 2.0, mid_y))
    describe(3, "scores", r"$QK^{\top}$ / √$d_k$", r"$(h,\ n,\ m)$", "scores_note")

    # 5: weights times V, per head (V comes down from row 3)
    v_bottom = split_bottoms[2]
    ctx_x = v_bottom[0] - stack_w / 2
    canvas.arrow((w_bottom[0], w_bottom[1] + 25.0), (ctx_x - 3.0, row_y(4) + 2.0))
    canvas.arrow((v_bottom[0], v_bottom[1] + 14.0), (v_bottom[0], row_y(4) - rise - 3.0))
    c_bottom = canvas.stack(ctx_x, row_y(4), num_heads, n, d_k)
    shape_label(c_bottom, shapes["context"])
    describe(4, "context", r"$\mathrm{softmax}(\cdot)\,V$", r"$(h,\ n,\ d_k)$", "context_note")

    # 6: the heads concatenated along the features
    canvas.arrow((c_bottom[0], c_bottom[1] + 14.0), (centre + width / 2, row_y(5) - 3.0))
    cat_bottom = canvas.grid(centre - width / 2, row_y(5), n, d_model, head_cols)
    shape_label(cat_bottom, shapes["concat"])
    describe(5, "concat", r"$[\mathrm{head}_1, \ldots, \mathrm{head}_h]$", r"$(n,\ h\,d_k)$", "concat_note")

    # 7: W_O mixes the heads: one row per token, d_model wide
    canvas.arrow((cat_bottom[0], cat_bottom[1] + 14.0), (centre, row_y(6) - 3.0))
    out_bottom = canvas.grid(centre - width / 2, row_y(6), n, d_model, gray)
    shape_label(out_bottom, shapes["output"])
    describe(6, "output", r"$[\ldots]\,W^O$", r"$(n,\ d_{\mathrm{model}})$", "output_note")
    return canvas.fig


def layer_svg(lang: str = "en", n: int = 5, d_model: int = 8, num_heads: int = 2) -> str:
    """The figure as SVG text: text kept as text, the same bytes on every run.

    Returns:
        str, the SVG document.
    """
    with plt.rc_context(SVG_STYLE), warnings.catch_warnings():
        # Chinese labels: matplotlib measures them with DejaVu Sans, which has no CJK glyphs; the
        # SVG keeps them as text, anchored, and the browser draws them with a CJK font.
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from font")
        fig = draw_layer(n, d_model, num_heads, lang)
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
        plt.close(fig)
    return buffer.getvalue()


def svg_width(svg: str) -> float:
    """The width of the SVG's viewBox (its user units: points here)."""
    match = re.search(r'viewBox="[-\d.]+ [-\d.]+ ([\d.]+) [\d.]+"', svg)
    if match is None:
        raise ValueError("the SVG has no viewBox")
    return float(match.group(1))


def font_sizes(svg: str) -> list[float]:
    """Every font size the SVG's text uses, in its user units."""
    return [float(s) for s in re.findall(r"font-size:\s*([\d.]+)px", svg)]


def smallest_font_px(svg: str, display_width_px: float) -> float:
    """The smallest text of the SVG in CSS px when it is displayed ``display_width_px`` wide."""
    return min(font_sizes(svg)) * display_width_px / svg_width(svg)
