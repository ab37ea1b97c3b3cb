"""Chapter 4's figures: projections cut into heads, FLOPs and parameters against n and h, the KV cache.

The numbers come from :mod:`mha.chapters.configs` (built on :mod:`mha.counting`).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle

from ..chapters.configs import (
    GIB,
    KV_EXPLORER_MODEL,
    calculator,
    crossover_seq_len,
    flops_split,
    format_bytes,
    kv_explorer_values,
    params_fixed_head_dim,
)
from ..counting import attention_params
from .plotting import head_color, use_style


def plot_projection_strips(heads=(1, 4)):
    """The four d_model x d_model projections, cut into one strip per head (one row per h).

    W_Q, W_K, W_V are cut into h column strips (head i's d_model x d_k block), W_O into h row
    strips (the rows that head i's output multiplies). More heads, thinner strips, same area.
    """
    use_style()
    fig, axes = plt.subplots(len(heads), 4, figsize=(8.0, 2.0 * len(heads) + 0.4), squeeze=False)
    for r, (row, h) in enumerate(zip(axes, heads)):
        for ax, name in zip(row, ("W_Q", "W_K", "W_V", "W_O")):
            for i in range(h):
                xy, size = ((0, 1 - (i + 1) / h), (1, 1 / h)) if name == "W_O" else ((i / h, 0), (1 / h, 1))
                ax.add_patch(Rectangle(xy, *size, facecolor=head_color(i), edgecolor="white", lw=2, alpha=0.85))
            ax.set_xlim(0, 1)
            ax.set_ylim(0, 1)
            ax.set_aspect("equal")
            ax.set_xticks([])
            ax.set_yticks([])
            ax.spines[:].set_visible(False)
            if r == 0:
                ax.set_title(name)
        strips = "one block" if h == 1 else f"{h} strips, one per head"
        row[0].set_ylabel(f"h = {h}\n({strips})")
    fig.suptitle("Four d_model x d_model projections: heads cut them into strips, they add nothing", fontsize=11)
    fig.tight_layout()
    return fig


def plot_flops_vs_seq_len(d_model: int, num_heads: int, seq_lens, *, mark=None, ax=None):
    """Log-log plot of projection and attention FLOPs against T, with the crossover T* marked."""
    use_style()
    fig, ax = plt.subplots() if ax is None else (ax.figure, ax)
    splits = [flops_split(t, d_model, num_heads) for t in seq_lens]
    ax.loglog(seq_lens, [s["projections"] for s in splits], label="projections  8·n·d_model²")
    ax.loglog(seq_lens, [s["attention"] for s in splits], label="attention  4·n²·d_model")
    ax.loglog(seq_lens, [s["total"] for s in splits], color="0.4", ls=":", label="total")
    t_star = crossover_seq_len(d_model, num_heads)
    ax.axvline(t_star, color="0.5", lw=0.8, ls="--")
    ax.annotate(
        f"n* = 2·d_model = {t_star:g}",
        (t_star, ax.get_ylim()[0]),
        xytext=(4, 8),
        textcoords="offset points",
        fontsize=8,
    )
    if mark is not None:
        s = flops_split(mark, d_model, num_heads)
        ax.plot([mark, mark], [s["projections"], s["attention"]], "o", color="black", ms=4)
    ax.set_xlabel("sequence length n (tokens)")
    ax.set_ylabel("forward FLOPs of one layer")
    ax.set_title(f"Attention layer FLOPs, d_model = {d_model}")
    ax.legend(fontsize=8)
    return fig


def plot_params_vs_heads(d_model: int, heads, *, fixed_head_dim: int = 64, mark=None, ax=None):
    """Parameters of one layer against H: flat when Dh = D / H, linear when Dh is fixed."""
    use_style()
    fig, ax = plt.subplots() if ax is None else (ax.figure, ax)
    split = [attention_params(d_model, h) / 1e6 for h in heads]
    fixed = [params_fixed_head_dim(d_model, h, fixed_head_dim) / 1e6 for h in heads]
    ax.plot(heads, split, "o-", label="d_k = d_model / h")
    ax.plot(heads, fixed, "s--", label=f"d_k = {fixed_head_dim} fixed")
    if mark is not None:
        ax.plot([mark], [attention_params(d_model, mark) / 1e6], "o", color="black", ms=7, mfc="none")
    ax.set_xticks(list(heads), [str(h) for h in heads])
    ax.set_ylim(0, None)
    ax.set_xlabel("number of heads h")
    ax.set_ylabel("parameters of one layer (millions)")
    ax.set_title(f"Attention parameters, d_model = {d_model}")
    ax.legend(fontsize=8)
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
    ax_params.set_title("parameters: (2h + 2g)·d_k·d_model")
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return fig


def render_cost(d_model: int, num_heads: int, seq_len: int):
    """Explorer frame: parameters against h (left) and FLOPs against T (right) for one setting."""
    use_style()
    fig, (ax_p, ax_f) = plt.subplots(1, 2, figsize=(8.5, 3.4))
    plot_params_vs_heads(d_model, [1, 2, 4, 8, 16], mark=num_heads, ax=ax_p)
    plot_flops_vs_seq_len(d_model, num_heads, [2**k for k in range(6, 16)], mark=seq_len, ax=ax_f)
    c = calculator(d_model, num_heads, num_heads, 1, seq_len, bias=True)
    fig.suptitle(
        f"h = {num_heads}, d_k = {c['head_dim']}: {c['params_per_layer']:,} parameters; "
        f"n = {seq_len}: projections {c['projection_flops'] / 1e9:.2f} GFLOP, "
        f"attention {c['attention_flops'] / 1e9:.2f} GFLOP",
        fontsize=10,
    )
    fig.tight_layout()
    return fig


def render_kv(num_kv_heads: int, num_layers: int, batch_size: int, precision: str):
    """Explorer frame: KV-cache size against context length, with the 24 GiB budget line."""
    use_style()
    m = KV_EXPLORER_MODEL
    v = kv_explorer_values(num_kv_heads, num_layers, batch_size, precision)
    seq_lens = [0, 8192, 16384, 24576, 32768]
    fig, ax = plt.subplots(figsize=(6.0, 3.4))
    ax.plot(seq_lens, [t * v["per_token"] / GIB for t in seq_lens], "-", label="KV cache")
    ax.axhline(m["budget_bytes"] / GIB, color="#D55E00", ls="--", lw=1, label="24 GiB budget")
    ax.set_xlim(0, 32768)
    ax.set_ylim(0, max(32.0, 32768 * v["per_token"] / GIB * 1.05))
    ax.set_xlabel("context length (tokens)")
    ax.set_ylabel("KV cache (GiB)")
    kind = "MQA" if num_kv_heads == 1 else "MHA" if num_kv_heads == m["num_heads"] else "GQA"
    ax.set_title(
        f"{kind}: g = {num_kv_heads} of h = {m['num_heads']} heads, {num_layers} layers, "
        f"batch {batch_size}, {precision}"
    )
    ax.text(
        0.02,
        0.95,
        f"{format_bytes(v['per_token'])} per token\nfits {v['max_context']:,} tokens in 24 GiB",
        transform=ax.transAxes,
        va="top",
        fontsize=9,
    )
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig


#: Controls of the two explorers (each product of lengths <= 30 frames).
COST_CONTROLS = {"d_model": [512, 1024], "num_heads": [1, 4, 16], "seq_len": [1024, 4096]}
KV_CONTROLS = {"num_kv_heads": [1, 8, 32], "num_layers": [32, 80], "batch_size": [1, 8], "precision": ["fp16", "8-bit"]}


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
