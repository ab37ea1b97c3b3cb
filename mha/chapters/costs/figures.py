"""The parameter-analysis chapter's figures: projections cut into heads, FLOPs and parameters against n
and h, the KV cache.

The numbers come from :mod:`mha.chapters.costs.configs` (built on :mod:`mha.counting`).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle

from ...counting import attention_params
from ...viz.artists import spines, suptitle
from ...viz.controls import Choice, IntRange
from ...viz.live import LiveFigure
from ...viz.phone import phone_figure
from ...viz.plotting import head_color, use_style
from .configs import (
    GIB,
    KV_EXPLORER_MODEL,
    block_crossover_seq_len,
    block_flops_split,
    calculator,
    crossover_seq_len,
    flops_split,
    format_bytes,
    kv_explorer_values,
    params_fixed_head_dim,
)
from .models import ModelConfig


def plot_projection_strips(heads=(1, 4), transposed: bool = False):
    """The four d_model x d_model projections, cut into one strip per head (one row per h).

    W_Q, W_K, W_V are cut into h column strips (head i's d_model x d_k block), W_O into h row
    strips (the rows that head i's output multiplies). More heads, thinner strips, same area.
    ``transposed``: one row per projection, one column per h (the figure a phone shows).
    """
    use_style()
    names = ("$W^Q$", "$W^K$", "$W^V$", "$W^O$")
    shape = (4, len(heads)) if transposed else (len(heads), 4)
    figsize = (1.9 * len(heads) + 0.6, 7.6) if transposed else (8.0, 2.0 * len(heads) + 0.4)
    fig, grid = plt.subplots(*shape, figsize=figsize, squeeze=False)
    axes = grid.T if transposed else grid  # one row of axes per h
    for r, (row, h) in enumerate(zip(axes, heads)):
        strips = "one block" if h == 1 else f"{h} strips, one per head"
        for c, (ax, name) in enumerate(zip(row, names)):
            for i in range(h):
                xy, size = ((0, 1 - (i + 1) / h), (1, 1 / h)) if name == "$W^O$" else ((i / h, 0), (1 / h, 1))
                ax.add_patch(Rectangle(xy, *size, facecolor=head_color(i), edgecolor="white", lw=2, alpha=0.85))
            ax.set_xlim(0, 1)
            ax.set_ylim(0, 1)
            ax.set_aspect("equal")
            ax.set_xticks([])
            ax.set_yticks([])
            ax.spines[:].set_visible(False)
            if transposed:
                if r == 0:
                    ax.set_ylabel(name, rotation=0, ha="right", va="center")
                if c == 0:
                    ax.set_title(f"h = {h}\n({strips})", fontsize=10)
            elif r == 0:
                ax.set_title(name)
        if not transposed:
            row[0].set_ylabel(f"h = {h}\n({strips})")
    fig.suptitle(
        "Four $d_{\\mathrm{model}} \\times d_{\\mathrm{model}}$ projections: heads cut them into strips, "
        "they add nothing",
        fontsize=11,
    )
    if not transposed:
        phone_figure(fig, lambda: plot_projection_strips(heads, transposed=True))
    fig.tight_layout()
    return fig


def plot_flops_vs_seq_len(d_model: int, num_heads: int, seq_lens, *, mark=None, ax=None, block: bool = True):
    """Log-log plot of projection and attention FLOPs against T, with the crossover T* marked.

    With ``block``, also the linear layers of a whole block with a 4·d_model MLP (24·n·d_model²)
    and their crossover with attention, n* = 6·d_model.
    """
    use_style()
    fig, ax = plt.subplots() if ax is None else (ax.figure, ax)
    splits = [flops_split(t, d_model, num_heads) for t in seq_lens]
    ax.loglog(seq_lens, [s["projections"] for s in splits], label=r"projections, $8\,n\,d_{\mathrm{model}}^2$")
    ax.loglog(seq_lens, [s["attention"] for s in splits], label=r"attention, $4\,n^2 d_{\mathrm{model}}$")
    crossovers = [(crossover_seq_len(d_model, num_heads), r"$n^* = 2\,d_{\mathrm{model}}$")]
    if block:
        cfg = ModelConfig("block", "gpt2", d_model, num_heads, 1, 4 * d_model, 1)
        linear = [block_flops_split(t, cfg)["linear"] for t in seq_lens]
        ax.loglog(seq_lens, linear, color="0.4", ls="-.", label=r"projections + MLP, $24\,n\,d_{\mathrm{model}}^2$")
        crossovers.append((block_crossover_seq_len(cfg), r"block: $6\,d_{\mathrm{model}}$"))
    for k, (t_star, label) in enumerate(crossovers):  # the first label left of its line, the next right
        ax.axvline(t_star, color="0.5", lw=0.8, ls="--")
        ax.annotate(
            f"{label}\n= {t_star:,.0f}",
            (t_star, 0.03),
            xycoords=("data", "axes fraction"),
            xytext=(-3 if k == 0 else 3, 0),
            textcoords="offset points",
            ha="right" if k == 0 else "left",
            fontsize=9,
        )
    if mark is not None:
        s = flops_split(mark, d_model, num_heads)
        ax.plot([mark, mark], [s["projections"], s["attention"]], "o", color="black", ms=4)
    ax.set_xlabel("sequence length n (tokens)")
    ax.set_ylabel("forward FLOPs of one layer")
    ax.set_title(f"FLOPs of one layer, $d_{{\\mathrm{{model}}}}$ = {d_model}")
    # one place for every n (a live update keeps the layout), on white over the lines it covers
    ax.legend(fontsize=9, loc="upper left", frameon=True, edgecolor="none", framealpha=0.9)
    return fig


def plot_params_vs_heads(d_model: int, heads, *, fixed_head_dim: int = 64, mark=None, ax=None):
    """Parameters of one layer against H: flat when Dh = D / H, linear when Dh is fixed."""
    use_style()
    fig, ax = plt.subplots() if ax is None else (ax.figure, ax)
    split = [attention_params(d_model, h) / 1e6 for h in heads]
    fixed = [params_fixed_head_dim(d_model, h, fixed_head_dim) / 1e6 for h in heads]
    ax.plot(heads, split, "o-", label="$d_k = d_{\\mathrm{model}}\\,/\\,h$")
    ax.plot(heads, fixed, "s--", label=f"$d_k$ = {fixed_head_dim} fixed")
    if mark is not None:
        ax.plot([mark], [attention_params(d_model, mark) / 1e6], "o", color="black", ms=7, mfc="none")
    ax.set_xticks(list(heads), [str(h) for h in heads])
    ax.set_ylim(0, None)
    ax.set_xlabel("number of heads h")
    ax.set_ylabel("parameters of one layer (millions)")
    ax.set_title(f"Attention parameters, $d_{{\\mathrm{{model}}}}$ = {d_model}")
    ax.legend(fontsize=9)
    return fig


def plot_gqa_sweep(rows: list[dict], *, title: str):
    """Two panels against g: cache size (GiB) and parameters per layer (millions)."""
    use_style()
    fig, (ax_cache, ax_params) = plt.subplots(1, 2, figsize=(9.0, 3.6))
    g = [r["kv_heads"] for r in rows]
    ax_cache.plot(g, [r["cache_bytes"] / GIB for r in rows], "o-")
    ax_params.plot(g, [r["params_per_layer"] / 1e6 for r in rows], "s-", color="#E69F00")
    ticks = [v for v in g if v == 1 or v >= g[-1] // 4 or v == g[len(g) // 2]]
    for ax in (ax_cache, ax_params):
        ax.set_xticks(ticks, [str(v) for v in ticks])
        ax.set_ylim(0, None)
        ax.set_xlabel("KV heads g  (1 = MQA, h = MHA)")
    ax_cache.set_ylabel("KV cache (GiB)")
    ax_cache.set_title("KV cache grows linearly in g")
    ax_params.set_ylabel("parameters of one layer (millions)")
    ax_params.set_title("parameters: $(2h + 2g)\\,d_k\\,d_{\\mathrm{model}}$")
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return fig


def render_cost(d_model: int, num_heads: int, seq_len: int):
    """Explorer frame: parameters against h (left) and FLOPs against T (right) for one setting."""
    use_style()
    fig, (ax_p, ax_f) = plt.subplots(1, 2, figsize=(8.4, 3.8))
    plot_params_vs_heads(d_model, [1, 2, 3, 4, 6, 8, 12, 16], mark=num_heads, ax=ax_p)
    plot_flops_vs_seq_len(d_model, num_heads, [2**k for k in range(6, 16)], mark=seq_len, ax=ax_f)
    fig.suptitle(_cost_title(d_model, num_heads, seq_len), fontsize=10)
    fig.tight_layout()
    return fig


def _cost_title(d_model: int, num_heads: int, seq_len: int) -> str:
    c = calculator(d_model, num_heads, num_heads, 1, seq_len, bias=True)
    return (
        f"h = {num_heads}, dₖ = {c['head_dim']}: {c['params_per_layer']:,} parameters; "
        f"n = {seq_len}: projections {c['projection_flops'] / 1e9:.2f} GFLOP, "
        f"attention {c['attention_flops'] / 1e9:.2f} GFLOP"
    )


def _kv_title(num_kv_heads: int, num_layers: int, batch_size: int, precision: str) -> str:
    m = KV_EXPLORER_MODEL
    kind = "MQA" if num_kv_heads == 1 else "MHA" if num_kv_heads == m["num_heads"] else "GQA"
    return (
        f"{kind}: g = {num_kv_heads} of h = {m['num_heads']} heads, {num_layers} layers, "
        f"batch {batch_size}, {precision}"
    )


def _kv_note(v: dict) -> str:
    return f"{format_bytes(v['per_token'])} per token\nfits {v['max_context']:,} tokens in 24 GiB"


def render_kv(num_kv_heads: int, num_layers: int, batch_size: int, precision: str):
    """Explorer frame: KV-cache size against context length, with the 24 GiB cache budget line and, where it
    falls on the axis, the longest context that fits."""
    use_style()
    m = KV_EXPLORER_MODEL
    v = kv_explorer_values(num_kv_heads, num_layers, batch_size, precision)
    longest = KV_EXPLORER_MAX_LEN
    seq_lens = [0, longest]
    fig, ax = plt.subplots(figsize=(6.0, 3.8))
    ax.plot(seq_lens, [t * v["per_token"] / GIB for t in seq_lens], "-", label="KV cache")
    ax.axhline(m["budget_bytes"] / GIB, color="#D55E00", ls="--", lw=1, label="24 GiB cache budget")
    ax.axvline(m["train_context"], color="0.5", ls=":", lw=1, label=f"trained context ({m['train_context']:,})")
    if v["max_context"] <= longest:
        ax.plot([v["max_context"]], [m["budget_bytes"] / GIB], "o", color="black", ms=5)
    ax.set_xlim(0, longest)
    ax.set_xticks(range(0, longest + 1, 16384), [f"{t // 1024}k" for t in range(0, longest + 1, 16384)])
    ax.set_ylim(0, max(32.0, longest * v["per_token"] / GIB * 1.05))
    ax.set_xlabel("context length (tokens)")
    ax.set_ylabel("KV cache (GiB)")
    ax.set_title(_kv_title(num_kv_heads, num_layers, batch_size, precision))
    # the note right of the dotted line, above the budget line and the cache line (which ends at
    # most at 1 / 1.05 of the axis height at the right); the legend below the axes, off every line
    ax.annotate(
        _kv_note(v),
        (m["train_context"], 0.95),
        xycoords=("data", "axes fraction"),
        xytext=(6, 0),
        textcoords="offset points",
        va="top",
        fontsize=9,
    )
    fig.legend(*ax.get_legend_handles_labels(), loc="lower center", ncol=3, fontsize=9, frameon=False)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig


class CostPlot(LiveFigure):
    """:func:`render_cost` updated in place: one figure per (d_model, h) (its ``layout``), in which
    the sequence length moves the FLOPs mark and rewrites the title."""

    def draw(self, d_model: int = 768, num_heads: int = 12, seq_len: int = 1024):
        return render_cost(d_model, num_heads, seq_len)

    def layout(self, d_model: int = 768, num_heads: int = 12, seq_len: int = 1024):
        return d_model, num_heads

    def update(self, fig, d_model: int = 768, num_heads: int = 12, seq_len: int = 1024):
        ax_f = fig.axes[1]
        s = flops_split(seq_len, d_model, num_heads)
        ax_f.lines[-1].set_data([seq_len, seq_len], [s["projections"], s["attention"]])
        suptitle(fig).set_text(_cost_title(d_model, num_heads, seq_len))

    def artists(self, fig):
        ax_f = fig.axes[1]
        return [ax_f.lines[-1], *ax_f.texts, ax_f.get_legend(), *spines(ax_f), suptitle(fig)]


class KVPlot(LiveFigure):
    """:func:`render_kv` updated in place: the cache line, the axis it needs, the longest context
    that fits (a marker, hidden when off the axis), the title and the note."""

    def draw(self, num_kv_heads: int = 32, num_layers: int = 32, batch_size: int = 1, precision: str = "fp16"):
        fig = render_kv(num_kv_heads, num_layers, batch_size, precision)
        (ax,) = fig.axes
        if not [line for line in ax.lines if line.get_marker() == "o"]:  # an invisible marker to move later
            ax.plot([0], [0], "o", color="black", ms=5, visible=False)
        return fig

    def update(self, fig, num_kv_heads: int = 32, num_layers: int = 32, batch_size: int = 1, precision: str = "fp16"):
        m, v, longest = (
            KV_EXPLORER_MODEL,
            kv_explorer_values(num_kv_heads, num_layers, batch_size, precision),
            KV_EXPLORER_MAX_LEN,
        )
        (ax,) = fig.axes
        ax.lines[0].set_ydata([t * v["per_token"] / GIB for t in (0, longest)])
        (point,) = [line for line in ax.lines if line.get_marker() == "o"]
        point.set_data([v["max_context"]], [m["budget_bytes"] / GIB])
        point.set_visible(v["max_context"] <= longest)
        ax.set_ylim(0, max(32.0, longest * v["per_token"] / GIB * 1.05))
        ax.set_title(_kv_title(num_kv_heads, num_layers, batch_size, precision))
        ax.texts[0].set_text(_kv_note(v))


#: The KV explorer's context axis: 0 to 64k tokens, so that Llama 2 7B's 49,152 is on it.
KV_EXPLORER_MAX_LEN = 65536
#: Controls of the two explorers (each product of lengths <= 30 frames), every slider growing to the
#: right. Each opens on the case the chapter discusses (``*_INITIAL``): GPT-2 small's layer
#: (d_model 768, h 12) at its 1,024-token context, and Llama 2 7B's cache (g = h = 32, 32 layers,
#: batch 1, fp16); moving a head slider left gives fewer (wider, or shared) heads.
COST_CONTROLS = {"d_model": [768, 1536], "num_heads": [1, 3, 12], "seq_len": [1024, 4608]}
KV_CONTROLS = {"num_kv_heads": [1, 8, 32], "num_layers": [32, 80], "batch_size": [1, 8], "precision": ["fp16", "8-bit"]}
COST_INITIAL = {"d_model": 768, "num_heads": 12, "seq_len": 1024}
KV_INITIAL = {"num_kv_heads": 32, "num_layers": 32, "batch_size": 8, "precision": "fp16"}
#: What the reader sees for each control: the words, with the symbol of the text and the unit.
LABELS = {
    "d_model": "model width d_model",
    "num_heads": "number of heads h",
    "seq_len": "sequence length n (tokens)",
    "num_kv_heads": "key/value heads g",
    "num_layers": "layers",
    "batch_size": "batch size",
    "precision": "precision",
}


def kv_alt(num_kv_heads: int, num_layers: int, batch_size: int, precision: str) -> str:
    """Alt text of a KV explorer frame."""
    v = kv_explorer_values(num_kv_heads, num_layers, batch_size, precision)
    return (
        f"KV cache against context length for {num_kv_heads} KV heads, {num_layers} layers, batch "
        f"{batch_size}, {precision}: {format_bytes(v['per_token'])} per token, "
        f"{v['max_context']} tokens fit in 24 GiB."
    )


def cost_alt(d_model: int, num_heads: int, seq_len: int) -> str:
    """Alt text of a cost explorer frame."""
    c = calculator(d_model, num_heads, num_heads, 1, seq_len, bias=True)
    return (
        f"d_model {d_model}, {num_heads} heads: {c['params_per_layer']} parameters whatever h; "
        f"at n = {seq_len}, projections {c['projection_flops']} FLOPs and attention "
        f"{c['attention_flops']} FLOPs; they are equal at n = {c['crossover_seq_len']:g}."
    )


#: The two explorers' controls, labelled: in a live kernel the same grids, with the sequence length
#: and the batch as integer sliders between and beyond them.
COST_LIVE_CONTROLS = {
    **{name: Choice(values, label=LABELS[name]) for name, values in COST_CONTROLS.items()},
    "seq_len": IntRange(64, 32768, grid=COST_CONTROLS["seq_len"], log=True, label=LABELS["seq_len"]),
}
KV_LIVE_CONTROLS = {
    **{name: Choice(values, label=LABELS[name]) for name, values in KV_CONTROLS.items()},
    "batch_size": IntRange(1, 64, grid=KV_CONTROLS["batch_size"], label=LABELS["batch_size"]),
}


#: The explorers' titles and captions, as the page shows them (``explorers.json`` translates them).
COST_EXPLORER_TEXT = {
    "title": "Parameters and FLOPs of one attention layer",
    "caption": "Left: parameters against h, flat when d_k = d_model / h. Right: FLOPs against n.",
}
KV_EXPLORER_TEXT = {
    "title": "KV cache against context length",
    "caption": (
        "h = 32 query heads of width 128; g key/value heads; the dashed line is a 24 GiB cache budget, "
        "the dotted one Llama 2's 4,096-token training context."
    ),
}


def cost_explorer():
    """The parameter-analysis chapter's first explorer: parameters against h and FLOPs against n, for one layer.

    It opens on GPT-2 small's layer at its 1,024-token context (``COST_INITIAL``).
    """
    from ...viz.widgets import explorer

    return explorer(CostPlot(), COST_LIVE_CONTROLS, initial=COST_INITIAL, alt=cost_alt, **COST_EXPLORER_TEXT)


def kv_explorer():
    """The parameter-analysis chapter's second explorer: the KV cache against the context, and what fits in 24 GiB.

    It opens on Llama 2 7B's cache in fp16, batch 8 (``KV_INITIAL``): not on exercise 1's answer.
    """
    from ...viz.widgets import explorer

    return explorer(KVPlot(), KV_LIVE_CONTROLS, initial=KV_INITIAL, alt=kv_alt, **KV_EXPLORER_TEXT)
