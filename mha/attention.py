"""Scaled dot-product attention and the reshapes around it, one equation per function.

Shape legend used throughout the package:
    B batch size, T query length, S key length, D d_model,
    H number of (query) heads, G number of key/value heads, Dh head_dim = D / H.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .checks import check_divisible, check_dropout, check_float_tensor, check_mask, check_positive_int


def causal_mask(T: int, S: int | None = None, device=None) -> torch.Tensor:
    """Boolean causal mask, **True = may attend**.

    Query ``i`` may attend key ``j`` when ``j <= i + (S - T)``: with ``S > T`` the queries
    are the *last* ``T`` positions of a longer sequence (the case of a KV cache).

    Shapes:
        returns (T, S), S defaults to T.
    """
    T = check_positive_int("T", T)
    S = T if S is None else check_positive_int("S", S)
    if S < T:
        raise ValueError(f"S ({S}) must be >= T ({T}): the queries are the last T of S positions")
    ones = torch.ones(T, S, dtype=torch.bool, device=device)
    return torch.tril(ones, diagonal=S - T)  # (T, S)


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Cut the feature axis into heads.

    Shapes:
        x (B, T, D) -> returns (B, H, T, Dh) with Dh = D / H.
    """
    check_float_tensor("x", x, min_rank=3)
    num_heads = check_positive_int("num_heads", num_heads)
    if x.dim() != 3:
        raise ValueError(f"x must have shape (B, T, D), found shape {tuple(x.shape)}")
    batch_size, seq_len, d_model = x.shape
    check_divisible("d_model", d_model, "num_heads", num_heads)
    head_dim = d_model // num_heads
    x = x.view(batch_size, seq_len, num_heads, head_dim)  # (B, T, H, Dh)
    return x.transpose(1, 2)  # (B, H, T, Dh)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """Concatenate the heads along the feature axis (the inverse of :func:`split_heads`).

    Shapes:
        x (B, H, T, Dh) -> returns (B, T, H * Dh).
    """
    check_float_tensor("x", x, min_rank=4)
    if x.dim() != 4:
        raise ValueError(f"x must have shape (B, H, T, Dh), found shape {tuple(x.shape)}")
    batch_size, num_heads, seq_len, head_dim = x.shape
    x = x.transpose(1, 2)  # (B, T, H, Dh)
    return x.reshape(batch_size, seq_len, num_heads * head_dim)  # (B, T, H*Dh)


def _check_qkv(q, k, v) -> None:
    check_float_tensor("q", q, min_rank=2)
    check_float_tensor("k", k, min_rank=2)
    check_float_tensor("v", v, min_rank=2)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must have the same last dimension (head_dim), found q {tuple(q.shape)} and k {tuple(k.shape)}"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same length S (dimension -2), found k {tuple(k.shape)} and v {tuple(v.shape)}"
        )
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k and v must share a dtype, found {q.dtype}, {k.dtype}, {v.dtype}")
    try:
        torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"the leading (batch/head) dimensions of q, k and v must broadcast, "
            f"found q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        ) from None


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax over the last axis that stays finite and returns zeros for fully masked rows.

    ``mask`` is boolean (**True = may attend**) or additive float (0 keeps, -inf blocks).
    A row whose every key is blocked has no meaningful distribution; it gets all-zero
    weights (so its output is the zero vector) instead of the 0/0 = NaN of a plain softmax.

    Shapes:
        scores (..., T, S); mask broadcastable to scores. Returns (..., T, S).
    """
    if mask is not None:
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, float("-inf"))
        else:
            scores = scores + mask
    # Subtracting the row maximum keeps exp() in range for logits of any size (e.g. 1e4);
    # softmax is unchanged by it, so no gradient needs to flow through the maximum.
    row_max = scores.detach().amax(dim=-1, keepdim=True)  # (..., T, 1)
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    exp_scores = torch.exp(scores - row_max)  # (..., T, S); blocked entries are exactly 0
    denom = exp_scores.sum(dim=-1, keepdim=True)  # (..., T, 1); 0 only for fully masked rows
    return exp_scores / denom.clamp_min(torch.finfo(scores.dtype).tiny)


def scaled_dot_product_attention(q, k, v, mask=None, *, scale=None, dropout_p=0.0):
    """softmax(q kᵀ · scale + mask) v, returning the output *and* the weights.

    ``scale`` defaults to 1/√Dh: with unit-variance entries, q·k has variance Dh, and
    without the scale a large Dh pushes the softmax into saturation, where its gradient
    vanishes (chapter 2 shows it).

    ``mask`` is either boolean, **True = may attend** (the convention of
    ``torch.nn.functional.scaled_dot_product_attention``), or an additive float mask added
    to the scores (0 keeps a key, -inf blocks it; NaN is rejected). A query row whose keys
    are all blocked returns zero weights and a zero output, never NaN.

    ``dropout_p`` (for training) drops each weight with that probability before the weighted
    sum, scaling the others by 1 / (1 - p); the weights returned are those before dropout.

    Shapes:
        q (..., T, Dh), k (..., S, Dh), v (..., S, Dv), mask broadcastable to (..., T, S).
    Returns:
        output (..., T, Dv), weights (..., T, S); each unmasked row of weights sums to 1.
    """
    _check_qkv(q, k, v)
    dropout_p = check_dropout("dropout_p", dropout_p)
    scores_shape = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2]) + (q.shape[-2], k.shape[-2])
    if mask is not None:
        check_mask("mask", mask, scores_shape, "(..., T, S)")
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    scores = torch.matmul(q, k.transpose(-2, -1)) * scale  # (..., T, S)
    weights = masked_softmax(scores, mask)  # (..., T, S)
    dropped = F.dropout(weights, dropout_p) if dropout_p > 0 else weights  # (..., T, S), training only
    output = torch.matmul(dropped, v)  # (..., T, Dv)
    return output, weights


def average_heads(weights: torch.Tensor) -> torch.Tensor:
    """Average per-head attention weights, as ``nn.MultiheadAttention`` returns them by default.

    Only for *inspection*: the module merges head outputs by concatenation, not by this mean.

    Shapes:
        weights (B, H, T, S) -> returns (B, T, S).
    """
    check_float_tensor("weights", weights, min_rank=4)
    return weights.mean(dim=-3)


def entropy_bits(probs: torch.Tensor) -> torch.Tensor:
    """Shannon entropy in bits over the last axis: 0 for one-hot, log2(S) for uniform.

    How spread out a query's attention weights are (chapter 2's saturated softmax has almost 0).

    Shapes:
        probs (..., S) -> returns (...).
    """
    check_float_tensor("probs", probs, min_rank=1)
    logs = torch.where(probs > 0, torch.log2(probs.clamp_min(torch.finfo(probs.dtype).tiny)), 0.0)
    return -(probs * logs).sum(dim=-1)
