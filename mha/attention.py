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


def causal_mask(T: int, S: int | None = None, device=None, *, align: str = "bottom-right") -> torch.Tensor:
    """Boolean causal mask, **True = may attend**.

    ``align="bottom-right"`` (the default): query ``i`` may attend key ``j`` when
    ``j <= i + (S - T)``; with ``S > T`` the queries are the *last* ``T`` positions of a longer
    sequence (the case of a KV cache), and ``S >= T`` is required.

    ``align="top-left"``: query ``i`` may attend key ``j`` when ``j <= i``, whatever ``T`` and
    ``S`` (``torch.ones(T, S).tril()``): the convention of ``is_causal=True`` in PyTorch's
    ``F.scaled_dot_product_attention`` and in :func:`scaled_dot_product_attention`. The two
    agree when ``T == S``.

    Shapes:
        returns (T, S), S defaults to T.
    """
    T = check_positive_int("T", T)
    S = T if S is None else check_positive_int("S", S)
    if align not in ("bottom-right", "top-left"):
        raise ValueError(f"align must be 'bottom-right' or 'top-left', found {align!r}")
    if align == "bottom-right" and S < T:
        raise ValueError(f"S ({S}) must be >= T ({T}): the queries are the last T of S positions")
    ones = torch.ones(T, S, dtype=torch.bool, device=device)
    return torch.tril(ones, diagonal=S - T if align == "bottom-right" else 0)  # (T, S)


def intersect_masks(mask: torch.Tensor | None, allowed: torch.Tensor) -> torch.Tensor:
    """``mask`` further restricted to the positions where the bool ``allowed`` is True.

    ``mask``: None, bool (**True = may attend**) or additive float (-inf blocks). The result has
    ``mask``'s kind: a bool mask is AND-ed with ``allowed``, a float mask gets -inf where
    ``allowed`` is False. Used to add a causal restriction to a padding or attention mask.

    Shapes:
        mask and allowed broadcastable to each other; returns their broadcast shape.
    """
    if mask is None:
        return allowed
    if mask.dtype == torch.bool:
        return mask & allowed
    return mask.masked_fill(~allowed, float("-inf"))


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


def check_flag(name: str, value) -> bool:
    """``value`` if it is a bool, else a TypeError naming ``name`` (``is_causal=1`` is a slip)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, found {type(value).__name__} ({value!r})")
    return value


def scaled_dot_product_attention(q, k, v, mask=None, *, scale=None, dropout_p=0.0, is_causal=False):
    """softmax(q kᵀ · scale + mask) v, returning the output *and* the weights.

    ``scale`` defaults to 1/√Dh: with unit-variance entries, q·k has variance Dh, and
    without the scale a large Dh pushes the softmax into saturation, where its gradient
    vanishes (the multi-head-math chapter shows it).

    ``mask`` is either boolean, **True = may attend** (the convention of
    ``torch.nn.functional.scaled_dot_product_attention``), or an additive float mask added
    to the scores (0 keeps a key, -inf blocks it; NaN is rejected). A query row whose keys
    are all blocked returns zero weights and a zero output, never NaN.

    ``is_causal=True`` lets query ``i`` attend keys ``j <= i`` only: PyTorch's convention,
    top-left aligned when T != S (``causal_mask(T, S, align="top-left")``). For the last T of
    S positions (decoding with a KV cache) pass ``mask=causal_mask(T, S)`` instead. Unlike
    PyTorch, a ``mask`` may be given as well: a key must then pass both.

    ``dropout_p`` (for training: pass 0.0 in evaluation, as the modules do) zeroes each weight
    with that probability before the weighted sum and scales the others by 1 / (1 - p), as
    PyTorch does; the weights returned are those before dropout.

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
    if check_flag("is_causal", is_causal):
        mask = intersect_masks(mask, causal_mask(q.shape[-2], k.shape[-2], q.device, align="top-left"))
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    scores = torch.matmul(q, k.transpose(-2, -1)) * scale  # (..., T, S)
    weights = masked_softmax(scores, mask)  # (..., T, S)
    dropped = F.dropout(weights, dropout_p) if dropout_p > 0 else weights  # (..., T, S), training only
    output = torch.matmul(dropped, v)  # (..., T, Dv)
    return output, weights


def blockwise_attention(q, k, v, block_size: int, *, scale=None):
    """softmax(q kᵀ · scale) v over blocks of ``block_size`` keys: the online softmax of FlashAttention.

    The full softmax needs every score of a row before it can divide. Here each block of keys
    updates, per query, a running maximum ``m``, a running sum ``l`` of exp(score - m) and a
    running weighted sum of values; when a block raises the maximum, what was summed so far is
    rescaled by exp(m_old - m_new). Only (T, block_size) scores exist at a time, never (T, S).
    No mask and no weights returned (they are never formed); equal to
    :func:`scaled_dot_product_attention`'s output up to rounding.

    Shapes:
        q (..., T, Dh), k (..., S, Dh), v (..., S, Dv). Returns output (..., T, Dv).
    """
    _check_qkv(q, k, v)
    block_size = check_positive_int("block_size", block_size)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    rows = lead + (q.shape[-2],)
    # (..., T, 1): the running maximum m and the running sum l of exp(score - m)
    row_max = q.new_full(rows + (1,), float("-inf"))
    row_sum = q.new_zeros(rows + (1,))
    # (..., T, Dv): the running sum of exp(score - m) v
    acc = q.new_zeros(rows + (v.shape[-1],))
    for start in range(0, k.shape[-2], block_size):
        k_block = k[..., start : start + block_size, :]  # (..., Bk, Dh)
        v_block = v[..., start : start + block_size, :]  # (..., Bk, Dv)
        # (..., T, Bk)
        scores = torch.matmul(q, k_block.transpose(-2, -1)) * scale
        # (..., T, 1)
        new_max = torch.maximum(row_max, scores.amax(-1, keepdim=True))
        # (..., T, 1): the old sums were taken under the old maximum
        correction = torch.exp(row_max - new_max)
        exp_scores = torch.exp(scores - new_max)  # (..., T, Bk)
        # (..., T, 1) and (..., T, Dv)
        row_sum = row_sum * correction + exp_scores.sum(-1, keepdim=True)
        acc = acc * correction + torch.matmul(exp_scores, v_block)
        row_max = new_max
    return acc / row_sum  # (..., T, Dv): divide once, at the end


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

    How spread out a query's attention weights are (the multi-head-math chapter's saturated softmax has almost 0).

    Shapes:
        probs (..., S) -> returns (...).
    """
    check_float_tensor("probs", probs, min_rank=1)
    logs = torch.where(probs > 0, torch.log2(probs.clamp_min(torch.finfo(probs.dtype).tiny)), 0.0)
    return -(probs * logs).sum(dim=-1)
