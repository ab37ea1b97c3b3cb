"""Chapter 2's experiments: why the scores are scaled by 1/√d_k, and how d_model is cut into heads.

**Why 1/√d_k.** Draw a query ``q`` and keys ``k_j`` with independent unit-variance entries. Each
score ``q·k_j`` is a sum of ``d_k`` products of variance 1, so its variance is ``d_k``
(:func:`dot_product_variance`). Unscaled, the scores of a 512-wide head spread over tens of units;
the softmax then puts almost all its weight on the largest one (it *saturates*) and its Jacobian
``diag(p) - p pᵀ`` tends to zero, so almost no gradient reaches ``W_Q`` and ``W_K``
(:func:`softmax_stats`). Multiplying by ``1/√d_k`` keeps the variance at 1 for every ``d_k``.

**Heads.** :func:`head_blocks` gives the columns :func:`mha.split_heads` hands to each head: the
``d_model`` features of every token cut into ``h`` blocks of ``d_k = d_model / h``.

The figures and explorer frames are in :mod:`mha.viz.scaling`.

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


def softmax_stats(d_k: int, scale="1/√d_k", *, num_queries: int = 500, num_keys: int = NUM_KEYS, seed: int = 0) -> dict:
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
    return score_stats(scores, keys, factor)


def score_stats(scores: torch.Tensor, keys: torch.Tensor, factor: float) -> dict:
    """The statistics of :func:`softmax_stats` for given scores and keys (scaled by ``factor``).

    Shapes: scores (N, S), keys (S, Dk).
    """
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


def scaling_sweep(
    d_ks=DEFAULT_D_KS,
    scales=("1 (no scaling)", "1/√d_k"),
    *,
    num_queries: int = 500,
    num_keys: int = NUM_KEYS,
    seed: int = 0,
) -> dict:
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


def describe_scaling(d_k: int = 64, scale: str = "1/√d_k") -> str:
    """Alt text for an explorer frame."""
    s = softmax_stats(d_k, scale)
    return (
        f"With d_k = {d_k} and scale {scale}, the scores have variance {s['variance']:.3g}; "
        f"{100 * s['saturated']:.0f}% of the queries put more than 0.99 of their weight on one key."
    )


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


def describe_head_split(num_heads: int = 4, d_model: int = 12, seq_len: int = 4) -> str:
    """Alt text for :func:`mha.viz.scaling.render_head_split`."""
    head_dim = d_model // num_heads
    return (
        f"A {seq_len} by {d_model} matrix whose columns are cut into {num_heads} coloured blocks "
        f"of {head_dim} columns, one per head."
    )


# --------------------------------------------------------------------------------------------
# Exercises
# --------------------------------------------------------------------------------------------


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
            raise AssertionError(
                f"for x of shape {shape} and H = {num_heads}, merge(split(x)) != x: "
                "are the heads concatenated along the feature axis, in order?"
            )
    return True
