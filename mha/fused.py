"""The fast path of self-attention: one matmul for Q, K and V, and PyTorch's fused attention kernel.

Neither changes what is computed, only how fast and with how much memory (the making-it-fast chapter measures both):

* :func:`fused_qkv_projection`: the three projections of self-attention as one matrix product,
  ``x [W_Q; W_K; W_V]ᵀ``, through :class:`FusedLinear`, whose forward pass concatenates the weights
  only for that product and keeps the three weights, not the concatenation, for the backward pass;
* :func:`fused_attention`: ``torch.nn.functional.scaled_dot_product_attention`` (Flash or
  memory-efficient attention where the device has it), which never stores the (B, H, T, S)
  weights, with the course's answer for a query that may attend to no key: a zero vector.

:class:`mha.FusedMultiHeadAttention` and :class:`mha.GroupedQueryAttention` use both;
:class:`mha.MultiHeadAttention`, the layer to read, calls :func:`fused_attention` only when the
caller does not need the weights.

Shape legend: B batch, T query length, S key length, D d_model, H heads, G key/value heads,
Dh head_dim.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .attention import causal_mask, check_flag, intersect_masks


class FusedLinear(torch.autograd.Function):
    """``x @ cat(W_1, ..., W_n)ᵀ + b`` that keeps the separate weights, not their concatenation,
    for the backward pass (a plain ``F.linear(x, torch.cat(...))`` would save a D x 3D copy).

    The forward pass builds the concatenation for its one matrix product and drops it after the
    call; the backward pass computes the gradient of ``x`` from the separate weights in place,
    one product per weight, summed, and never concatenates them.

    Call it as ``FusedLinear.apply(x, bias, W_1, ..., W_n)`` (``bias`` may be None).
    """

    @staticmethod
    def forward(ctx, x, bias, *weights):
        ctx.save_for_backward(x, *weights)
        ctx.has_bias = bias is not None
        # (..., sum of the output sizes)
        return F.linear(x, torch.cat(weights), bias)

    @staticmethod
    def backward(ctx, grad):
        x, *weights = ctx.saved_tensors
        grad_x = grad_bias = None
        # (N, out) and (N, D)
        grad_2d = grad.reshape(-1, grad.shape[-1])
        x_2d = x.reshape(-1, x.shape[-1])
        if ctx.needs_input_grad[0]:
            # grad @ cat(W_1, ..., W_n) as a sum of products with each
            # W_i, read in place: no concatenated copy of the weights,
            # which would be one more allocation and pass over them.
            # The column blocks of grad, no copy:
            parts = grad_2d.split([w.shape[0] for w in weights], dim=1)
            grad_x = parts[0] @ weights[0]  # (N, D)
            for part, weight in zip(parts[1:], weights[1:]):
                grad_x.addmm_(part, weight)
            grad_x = grad_x.view(x.shape)  # (..., D)
        if ctx.has_bias and ctx.needs_input_grad[1]:
            grad_bias = grad_2d.sum(0)
        grad_weights = [None] * len(weights)
        if any(ctx.needs_input_grad[2:]):
            grad_weights = list((grad_2d.T @ x_2d).split([w.shape[0] for w in weights]))
        return (grad_x, grad_bias, *grad_weights)


def fused_qkv_projection(x: torch.Tensor, q_proj: nn.Linear, k_proj: nn.Linear, v_proj: nn.Linear):
    """Q, K and V of self-attention in one matmul: the same numbers as three separate products,
    in one larger product, which may keep the hardware busier than three smaller ones (the
    making-it-fast chapter measures it: a small gain on a CPU, in one run).

    Shapes:
        x (B, T, D).
    Returns:
        q, k, v: (B, T, out) each, ``out`` being each projection's output size (D, G·Dh, G·Dh).
    """
    weights = (q_proj.weight, k_proj.weight, v_proj.weight)
    bias = None
    if q_proj.bias is not None:
        bias = torch.cat([q_proj.bias, k_proj.bias, v_proj.bias])  # (D + 2*G*Dh,)
    qkv = FusedLinear.apply(x, bias, *weights)  # (B, T, D + 2*G*Dh)
    return qkv.split([w.shape[0] for w in weights], dim=-1)


def fused_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    dropout_p: float = 0.0,
    is_causal: bool = False,
) -> torch.Tensor:
    """The output of :func:`mha.scaled_dot_product_attention` from PyTorch's fused kernel.

    The kernel never forms the (B, H, T, S) weights, so it does not return them: that is what
    saves the memory. ``mask``: bool, **True = may attend**, or additive float.

    ``is_causal=True`` (top-left aligned, as in :func:`mha.scaled_dot_product_attention`) goes to
    the kernel as a flag, not as a mask: on a GPU an explicit mask rules out the FlashAttention
    backend, a causal flag does not. With a ``mask`` as well, the two are merged into one mask.

    Grouped-query attention: ``k`` and ``v`` may have G heads for the H of ``q`` (H divisible by
    G); query head i then reads key/value head i // (H / G) through ``enable_gqa=True``, without
    a copy of K and V per query head.

    Shapes:
        q (B, H, T, Dh), k/v (B, H or G, S, Dh), mask broadcastable to (B, H, T, S).
    Returns:
        context (B, H, T, Dh); a query whose keys are all masked gets the zero vector.
    """
    if q.dim() < 3 or k.dim() < 3 or q.shape[-3] % k.shape[-3] != 0:
        raise ValueError(
            f"q's heads (dimension -3) must be a multiple of k's, found q {tuple(q.shape)} and k {tuple(k.shape)}"
        )
    if check_flag("is_causal", is_causal) and mask is not None:
        causal = causal_mask(q.shape[-2], k.shape[-2], q.device, align="top-left")  # (T, S)
        mask, is_causal = intersect_masks(mask, causal), False
    grouped = k.shape[-3] != q.shape[-3]
    context = F.scaled_dot_product_attention(
        q,
        k,
        v,
        attn_mask=mask,
        dropout_p=dropout_p,
        is_causal=is_causal,
        enable_gqa=grouped,
    )  # (B, H, T, Dh)
    if mask is not None:
        # The fused kernel's convention for a query with no visible key differs across
        # versions and backends; make it the documented zero vector. Only when there is such a
        # query: masked_fill copies the context, and autograd would keep both copies.
        visible = mask if mask.dtype == torch.bool else torch.isfinite(mask) | (mask > 0)
        has_key = visible.any(dim=-1, keepdim=True)  # (B|1, H|1, T, 1)
        if not bool(has_key.all()):
            context = context.masked_fill(~has_key, 0.0)
    return context
