"""Chapter 2's experiments and pictures: why the scores are scaled by 1/√d_k, and how d_model is
cut into heads.

**Why 1/√d_k.** Draw a query ``q`` and keys ``k_j`` with independent unit-variance entries. Each
score ``q·k_j`` is a sum of ``d_k`` products of variance 1, so its variance is ``d_k``
(:func:`dot_product_variance`). Unscaled, the scores of a 512-wide head spread over tens of units;
the softmax then puts almost all its weight on the largest one (it *saturates*) and its Jacobian
``diag(p) - p pᵀ`` tends to zero, so almost no gradient reaches ``W_Q`` and ``W_K``
(:func:`softmax_stats`). Multiplying by ``1/√d_k`` keeps the variance at 1 for every ``d_k``.

**Heads.** :func:`render_head_split` draws how :func:`mha.split_heads` cuts the ``d_model`` features
of every token into ``h`` blocks of ``d_k = d_model / h``.

Only the ``plot_*`` / ``render_*`` functions import matplotlib (on call). Import the module
explicitly: ``from mha import scaling``.

Shape legend: N samples (queries), S keys, Dk = d_k, T tokens, H heads.
"""
from __future__ import annotations

import math

import torch

from ..attention import entropy_bits
from ..checks import check_positive_int

#: Head widths of the sweep: 1, 2, 4, ..., 1024.
DEFAULT_D_KS = tuple(2**i for i in range(11))
#: The scale factors the explorer offers, by name: none, the Transformer's, and too much.
SCALES = {
    "1 (no scaling)": lambda d_k: 1.0,
    "1/√d_k": lambda d_k: 1.0 / math.sqrt(d_k),
    "1/d_k": lambda d_k: 1.0 / d_k,
}
#: Explorer grid: head widths, and the scale factor names.
EXPLORER_D_KS = [4, 16, 64, 256, 1024]
NUM_KEYS = 16


def scale_value(d_k: int, scale) -> float:
    """The numeric factor for ``scale``: a name from :data:`SCALES` or a positive number."""
    d_k = check_positive_int("d_k", d_k)
    if isinstance(scale, str):
        if scale not in SCALES:
            raise ValueError(f"scale must be one of {list(SCALES)} or a positive number, found {scale!r}")
        return SCALES[scale](d_k)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not scale > 0:
        raise ValueError(f"scale must be one of {list(SCALES)} or a positive number, found {scale!r}")
    return float(scale)


def dot_product_variance(d_k: int, *, scale=1.0, num_samples: int = 2000, seed: int = 0) -> float:
    """Empirical variance of ``scale · q·k`` for ``q, k`` with i.i.d. N(0, 1) entries.

    In theory ``scale² · d_k``: ``d_k`` for the raw dot product, 1 with ``scale = 1/√d_k``.
    """
    num_samples = check_positive_int("num_samples", num_samples)
    factor = scale_value(d_k, scale)
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(num_samples, d_k, generator=gen, dtype=torch.float64)  # (N, Dk)
    k = torch.randn(num_samples, d_k, generator=gen, dtype=torch.float64)  # (N, Dk)
    scores = (q * k).sum(dim=-1) * factor  # (N,)
    return scores.var().item()


def sample_scores(d_k: int, scale, *, num_queries: int = 500, num_keys: int = NUM_KEYS, seed: int = 0):
    """Scaled scores of random queries against random keys (unit-variance entries).

    The keys are shared by all queries; each query row is one draw of "a softmax over S keys".

    Shapes:
        returns scores (N, S), keys (S, Dk), the scale factor (float).
    """
    num_queries = check_positive_int("num_queries", num_queries)
    num_keys = check_positive_int("num_keys", num_keys)
    factor = scale_value(d_k, scale)
    gen = torch.Generator().manual_seed(seed)
    keys = torch.randn(num_keys, d_k, generator=gen, dtype=torch.float64)  # (S, Dk)
    queries = torch.randn(num_queries, d_k, generator=gen, dtype=torch.float64)  # (N, Dk)
    return queries @ keys.T * factor, keys, factor  # (N, S)


def softmax_stats(d_k: int, scale="1/√d_k", *, num_queries: int = 500, num_keys: int = NUM_KEYS,
                  seed: int = 0) -> dict:
    """How peaked the softmax of random scaled scores is, and how much gradient passes through it.

    With ``p = softmax(s)``, ``s_j = scale · q·k_j``, the Jacobian is ``J = ∂p/∂s = diag(p) - p pᵀ``;
    it vanishes when ``p`` is one-hot. The gradient that reaches the query is
    ``∂p/∂q = scale · J K``. Gradient norms are Frobenius norms, and their **median** over the
    queries (the typical query): the mean is dominated by the rare queries whose two largest
    scores happen to tie.

    Returns:
        dict with ``d_k``, ``scale`` (the factor), ``variance`` (of the scaled scores),
        ``max_weight`` (mean largest weight: 1/S for uniform, 1 for one-hot), ``saturated``
        (fraction of queries whose largest weight exceeds 0.99), ``entropy_bits`` (mean entropy:
        log2 S for uniform, 0 for one-hot), ``jacobian_norm`` (median ‖∂p/∂s‖_F) and
        ``grad_q_norm`` (median ‖∂p/∂q‖_F).
    """
    scores, keys, factor = sample_scores(d_k, scale, num_queries=num_queries, num_keys=num_keys, seed=seed)
    return _stats(scores, keys, factor)


def _stats(scores: torch.Tensor, keys: torch.Tensor, factor: float) -> dict:
    """Shapes: scores (N, S), keys (S, Dk)."""
    p = torch.softmax(scores, dim=-1)  # (N, S)
    jac = torch.diag_embed(p) - p[:, :, None] * p[:, None, :]  # (N, S, S), symmetric
    gram = keys @ keys.T  # (S, S)
    # ‖J K‖_F² = trace(J K Kᵀ Jᵀ) = sum((J G) ⊙ J) with G = K Kᵀ, without forming (N, S, Dk)
    grad_q_sq = ((jac @ gram) * jac).sum(dim=(-2, -1)).clamp_min(0.0)  # (N,)
    largest = p.max(dim=-1).values  # (N,)
    return {
        "d_k": keys.shape[1],
        "scale": factor,
        "variance": scores.var().item(),
        "max_weight": largest.mean().item(),
        "saturated": (largest > 0.99).double().mean().item(),
        "entropy_bits": entropy_bits(p).mean().item(),
        "jacobian_norm": jac.flatten(1).norm(dim=-1).median().item(),
        "grad_q_norm": (factor * grad_q_sq.sqrt()).median().item(),
    }


def scaling_sweep(d_ks=DEFAULT_D_KS, scales=("1 (no scaling)", "1/√d_k"), *, num_queries: int = 500,
                  num_keys: int = NUM_KEYS, seed: int = 0) -> dict:
    """:func:`softmax_stats` for every head width and scale.

    Returns:
        dict: ``d_k`` (list) and, for each scale name, a dict of lists (one value per d_k) with the
        keys of :func:`softmax_stats`.
    """
    d_ks = [check_positive_int("d_k", d) for d in d_ks]
    sweep = {"d_k": d_ks}
    for scale in scales:
        rows = [softmax_stats(d, scale, num_queries=num_queries, num_keys=num_keys, seed=seed) for d in d_ks]
        sweep[scale] = {key: [row[key] for row in rows] for key in rows[0]}
    return sweep


def plot_scaling_sweep(sweep: dict):
    """Four panels over d_k: score variance, largest weight, softmax Jacobian, gradient to q.

    Returns:
        matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt

    from ..viz.plotting import head_color

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
            ax.plot(sweep["d_k"], sweep[scale][key], marker="o", color=head_color(i), label=f"scale {scale}")
        ax.set_xscale("log", base=2)
        ax.set_yscale(yscale)
        ax.set_xlabel("d_k (head width)")
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
    """Explorer frame: the scaled scores of many queries, and the weights of one query.

    Returns:
        matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt

    from ..viz.plotting import head_color

    scores, keys, factor = sample_scores(d_k, scale)  # (N, S)
    stats = _stats(scores, keys, factor)
    weights = torch.softmax(scores[0], dim=-1).numpy()  # (S,)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9.0, 3.8))
    # one fixed axis for every frame, so the spread itself is what changes; scores beyond it
    # are piled into the outermost bins
    limit = 30.0
    ax1.hist(scores.flatten().clamp(-limit, limit).numpy(), bins=60, range=(-limit, limit), color=head_color(0))
    ax1.set_xlim(-limit, limit)
    ax1.set_xlabel(f"score  scale · q·k  (clipped to ±{limit:.0f})")
    ax1.set_ylabel("count")
    ax1.set_title(f"all scores: variance {stats['variance']:.3g}")
    ax2.bar(range(1, len(weights) + 1), weights, color=head_color(1))
    ax2.set_ylim(0, 1)
    ax2.set_xticks(range(1, len(weights) + 1, 3))
    ax2.set_xlabel("key")
    ax2.set_ylabel("softmax weight")
    ax2.set_title(f"one query: largest weight {weights.max():.2f}")
    fig.suptitle(f"d_k = {d_k}, scale {scale}\n{100 * stats['saturated']:.0f}% of queries saturated "
                 f"(largest weight > 0.99); median ‖∂softmax/∂scores‖ = {stats['jacobian_norm']:.1e}")
    fig.tight_layout()
    return fig


def describe_scaling(d_k: int = 64, scale: str = "1/√d_k") -> str:
    """Alt text for an explorer frame."""
    s = softmax_stats(d_k, scale)
    return (f"With d_k = {d_k} and scale {scale}, the scores have variance {s['variance']:.3g}; "
            f"{100 * s['saturated']:.0f}% of the queries put more than 0.99 of their weight on one key.")


# --------------------------------------------------------------------------------------------
# Cutting d_model into heads
# --------------------------------------------------------------------------------------------

def head_blocks(d_model: int, num_heads: int) -> list[range]:
    """The feature columns each head receives from :func:`mha.split_heads`: head i gets
    columns ``i·d_k .. (i+1)·d_k - 1``.
    """
    from ..checks import check_divisible

    d_model = check_positive_int("d_model", d_model)
    num_heads = check_positive_int("num_heads", num_heads)
    check_divisible("d_model", d_model, "num_heads", num_heads)
    head_dim = d_model // num_heads
    return [range(i * head_dim, (i + 1) * head_dim) for i in range(num_heads)]


def render_head_split(num_heads: int = 4, d_model: int = 12, seq_len: int = 4):
    """Picture of ``split_heads``: a (T, d_model) projection cut into h blocks of (T, d_k).

    Returns:
        matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    from ..viz.plotting import head_color

    blocks = head_blocks(d_model, num_heads)
    head_dim = d_model // num_heads
    gap = 0.6
    right_x = d_model + 4.0
    # the same canvas for every h (the widest case is h = d_model), so explorer frames line up
    width = right_x + d_model + gap * (d_model - 1) + 0.5
    fig, ax = plt.subplots(figsize=(0.3 * (width + 3.0), 0.3 * (seq_len + 2.3) + 0.7))
    for i, cols in enumerate(blocks):
        for c in cols:
            for t in range(seq_len):  # left: the full projection, one column per feature
                ax.add_patch(Rectangle((c, seq_len - 1 - t), 1, 1, facecolor=head_color(i),
                                       alpha=0.75, edgecolor="white"))
                x = right_x + c + i * gap  # right: the same columns, regrouped by head
                ax.add_patch(Rectangle((x, seq_len - 1 - t), 1, 1, facecolor=head_color(i),
                                       alpha=0.75, edgecolor="white"))
        left = right_x + cols.start + i * gap
        label = f"head {i + 1}" if num_heads <= 6 else str(i + 1)
        ax.text(left + head_dim / 2, seq_len + 0.3, label, ha="center", va="bottom", fontsize=8)
    for t in range(seq_len):
        ax.text(-0.3, seq_len - 0.5 - t, f"token {t + 1}", ha="right", va="center", fontsize=8)
    ax.text(d_model / 2, -0.4, f"(T, d_model) = ({seq_len}, {d_model})", ha="center", va="top")
    right_end = right_x + d_model + gap * (num_heads - 1)
    ax.text((right_x + right_end) / 2, -0.4,
            f"(h, T, d_k) = ({num_heads}, {seq_len}, {head_dim})", ha="center", va="top")
    ax.annotate("", xy=(right_x - 0.6, seq_len / 2), xytext=(d_model + 0.6, seq_len / 2),
                arrowprops={"arrowstyle": "->", "lw": 1.5})
    ax.text(d_model + 2.0, seq_len / 2 + 0.3, "split_heads", ha="center", va="bottom", fontsize=8)
    ax.set_xlim(-3.0, width)
    ax.set_ylim(-1.3, seq_len + 1.0)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(f"h = {num_heads} heads: d_k = d_model / h = {d_model} / {num_heads} = {head_dim}")
    return fig


def describe_head_split(num_heads: int = 4, d_model: int = 12, seq_len: int = 4) -> str:
    """Alt text for :func:`render_head_split`."""
    head_dim = d_model // num_heads
    return (f"A {seq_len} by {d_model} matrix whose columns are cut into {num_heads} coloured blocks "
            f"of {head_dim} columns, one per head.")


# --------------------------------------------------------------------------------------------
# Trained heads and exercises
# --------------------------------------------------------------------------------------------

def render_head_map(maps, labels, *, head: int = 1, example: int = 1):
    """Explorer frame: one head's attention map on one input (both counted from 1).

    Shapes:
        maps (E, H, T, T) weights of E inputs; labels: E lists of T token labels.
    Returns:
        matplotlib.figure.Figure
    """
    from ..viz.plotting import head_color, plot_attention

    w = maps[example - 1, head - 1]  # (T, T)
    return plot_attention(w, labels[example - 1], title=f"input {example}, head {head}",
                          color=head_color(head - 1), annotate=False)


def check_merge_heads(fn) -> bool:
    """Exercise check: does ``fn(x)`` undo :func:`mha.split_heads` for several shapes?

    Returns True, or raises AssertionError saying which shape failed and how.
    """
    from ..attention import split_heads

    for batch_size, seq_len, d_model, num_heads in [(2, 5, 8, 2), (1, 3, 12, 3), (3, 1, 6, 6), (2, 4, 8, 1)]:
        gen = torch.Generator().manual_seed(batch_size * 100 + d_model)
        x = torch.randn(batch_size, seq_len, d_model, generator=gen)  # (B, T, D)
        got = fn(split_heads(x, num_heads))  # (B, T, D) expected
        shape = (batch_size, seq_len, d_model)
        if tuple(got.shape) != shape:
            raise AssertionError(f"for H = {num_heads}, expected shape {shape}, found {tuple(got.shape)}")
        if not torch.equal(got, x):
            raise AssertionError(f"for x of shape {shape} and H = {num_heads}, merge(split(x)) != x: "
                                 "are the heads concatenated along the feature axis, in order?")
    return True
