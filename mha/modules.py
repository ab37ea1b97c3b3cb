"""Attention modules, from one head to grouped-query attention.

Read them in this order: :class:`AttentionHead` (one head's projections), :class:`SingleHeadAttention`,
:class:`LoopedMultiHeadAttention` (a Python loop over heads), :class:`MultiHeadAttention` (all heads
in one matmul: the layer to read) and :class:`GroupedQueryAttention` (heads share keys and values;
decoding with a KV cache). Tests prove that they agree after copying weights.

:class:`FusedMultiHeadAttention` is :class:`MultiHeadAttention` on the fast path of
:mod:`mha.fused` (one matmul for Q, K and V, PyTorch's fused attention kernel): the same function
and the same parameters, for training and benchmarks.

Shape legend: B batch, T query length, S key length, D d_model, H heads, G key/value heads,
Dh head_dim = D / H.
"""

from __future__ import annotations

import torch
from torch import nn

from .attention import causal_mask, merge_heads, scaled_dot_product_attention, split_heads
from .checks import (
    check_divisible,
    check_dropout,
    check_float_tensor,
    check_last_dim,
    check_mask,
    check_positive_int,
    check_rank,
)
from .fused import fused_attention, fused_qkv_projection
from .kv_cache import KVCache


def resolve_qkv(query, key, value, d_model: int):
    """Self-attention when key/value are omitted (key = query, value = key); check ranks and sizes.

    Shapes:
        query (B, T, D), key/value (B, S, D) or None. Returns query, key, value.
    """
    key = query if key is None else key
    value = key if value is None else value
    for name, x in (("query", query), ("key", key), ("value", value)):
        check_float_tensor(name, x)
        check_rank(name, x, 3, "(B, T, D)")
        check_last_dim(name, x, d_model, "d_model")
    if key.shape[:2] != value.shape[:2]:
        raise ValueError(
            f"key and value must share (B, S), found key {tuple(key.shape)} and value {tuple(value.shape)}"
        )
    if query.shape[0] != key.shape[0]:
        raise ValueError(f"query and key must share the batch size B, found {query.shape[0]} and {key.shape[0]}")
    return query, key, value


def combine_masks(mask, key_padding_mask, batch_size, num_heads, seq_len, key_len, dtype):
    """One mask for the scores from an attention mask and a key padding mask.

    ``mask``: bool (**True = may attend**) or additive float, broadcastable to (B, H, T, S).
    ``key_padding_mask``: bool (B, S), **True = this key is padding, ignore it**
    (the convention of ``nn.MultiheadAttention``; the name says what True marks).

    Returns:
        None, a bool mask or a float mask, broadcastable to (B, H, T, S).
    """
    target = (batch_size, num_heads, seq_len, key_len)
    if mask is not None:
        check_mask("mask", mask, target, "(B, H, T, S)")
        if mask.is_floating_point():
            mask = mask.to(dtype)
    if key_padding_mask is None:
        return mask
    if not isinstance(key_padding_mask, torch.Tensor) or key_padding_mask.dtype != torch.bool:
        found = (
            key_padding_mask.dtype if isinstance(key_padding_mask, torch.Tensor) else type(key_padding_mask).__name__
        )
        raise TypeError(f"key_padding_mask must be a bool tensor (True = padding), found {found}")
    if tuple(key_padding_mask.shape) != (batch_size, key_len):
        raise ValueError(
            f"key_padding_mask must have shape (B, S) = {(batch_size, key_len)}, found {tuple(key_padding_mask.shape)}"
        )
    keep = ~key_padding_mask[:, None, None, :]  # (B, 1, 1, S), True = may attend
    if mask is None:
        return keep
    if mask.dtype == torch.bool:
        return mask & keep
    return mask.masked_fill(~keep, float("-inf"))


class AttentionHead(nn.Module):
    """One head: its own W_Q, W_K, W_V (each d_model x head_dim) and scaled dot-product attention."""

    def __init__(self, d_model: int, head_dim: int, bias: bool = True):
        super().__init__()
        d_model = check_positive_int("d_model", d_model)
        head_dim = check_positive_int("head_dim", head_dim)
        self.q_proj = nn.Linear(d_model, head_dim, bias=bias)
        self.k_proj = nn.Linear(d_model, head_dim, bias=bias)
        self.v_proj = nn.Linear(d_model, head_dim, bias=bias)

    def forward(self, query, key, value, mask=None):
        """Shapes: query (B, T, D), key/value (B, S, D), mask broadcastable to (B, T, S).

        Returns: context (B, T, Dh), weights (B, T, S).
        """
        q = self.q_proj(query)  # (B, T, Dh)
        k = self.k_proj(key)  # (B, S, Dh)
        v = self.v_proj(value)  # (B, S, Dh)
        return scaled_dot_product_attention(q, k, v, mask)


class SingleHeadAttention(nn.Module):
    """One attention head followed by an output projection back to d_model.

    Args:
        d_model: width of the token vectors (D).
        head_dim: width of the head (Dh); defaults to d_model (one head of the full size).
        bias: whether the projections have biases.
    """

    def __init__(self, d_model: int, head_dim: int | None = None, bias: bool = True):
        super().__init__()
        self.d_model = check_positive_int("d_model", d_model)
        self.head_dim = d_model if head_dim is None else check_positive_int("head_dim", head_dim)
        self.head = AttentionHead(d_model, self.head_dim, bias=bias)
        self.out_proj = nn.Linear(self.head_dim, d_model, bias=bias)

    def forward(self, query, key=None, value=None, *, mask=None):
        """Shapes: query (B, T, D), key/value (B, S, D) (default: query), mask broadcastable to (B, T, S).

        Returns: output (B, T, D), weights (B, T, S).
        """
        query, key, value = resolve_qkv(query, key, value, self.d_model)
        context, weights = self.head(query, key, value, mask)  # (B, T, Dh), (B, T, S)
        return self.out_proj(context), weights  # (B, T, D)


class LoopedMultiHeadAttention(nn.Module):
    """Multi-head attention written as a loop: h independent heads, concatenated, then W_O.

    The version to read first. Each head has its own W_Q, W_K, W_V of size d_model x d_k
    with d_k = d_model / h; their outputs are concatenated **along the feature axis**
    (T x h·d_k) and mixed by W_O (d_model x d_model).
    """

    def __init__(self, d_model: int, num_heads: int, bias: bool = True):
        super().__init__()
        self.d_model = check_positive_int("d_model", d_model)
        self.num_heads = check_positive_int("num_heads", num_heads)
        check_divisible("d_model", d_model, "num_heads", num_heads)
        self.head_dim = d_model // num_heads
        self.heads = nn.ModuleList(AttentionHead(d_model, self.head_dim, bias) for _ in range(num_heads))
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query, key=None, value=None, *, mask=None, key_padding_mask=None):
        """Shapes: query (B, T, D), key/value (B, S, D), mask broadcastable to (B, H, T, S),
        key_padding_mask (B, S) with True = padding.

        Returns: output (B, T, D), weights (B, H, T, S).
        """
        query, key, value = resolve_qkv(query, key, value, self.d_model)
        (batch_size, seq_len, _), key_len = query.shape, key.shape[1]
        shape = (batch_size, self.num_heads, seq_len, key_len)
        mask = combine_masks(mask, key_padding_mask, *shape, query.dtype)
        if mask is not None:
            mask = mask.expand(shape)  # (B, H, T, S), so each head can take its slice
        contexts, weights = [], []
        for i, head in enumerate(self.heads):
            context, w = head(query, key, value, None if mask is None else mask[:, i])  # (B, T, Dh)
            contexts.append(context)
            weights.append(w)
        concat = torch.cat(contexts, dim=-1)  # (B, T, H*Dh): along features, not stacked rows
        return self.out_proj(concat), torch.stack(weights, dim=1)  # (B, T, D), (B, H, T, S)

    @classmethod
    def from_multi_head(cls, m: MultiHeadAttention | FusedMultiHeadAttention) -> LoopedMultiHeadAttention:
        """A looped copy of a batched module: head i gets rows i·Dh..(i+1)·Dh of each projection."""
        if not isinstance(m, (MultiHeadAttention, FusedMultiHeadAttention)):
            raise TypeError(
                f"m must be an mha.MultiHeadAttention or mha.FusedMultiHeadAttention, found {type(m).__name__}"
            )
        bias = m.q_proj.bias is not None
        looped = cls(m.d_model, m.num_heads, bias=bias).to(m.q_proj.weight)
        dh = m.head_dim
        with torch.no_grad():
            for i, head in enumerate(looped.heads):
                rows = slice(i * dh, (i + 1) * dh)
                for name in ("q_proj", "k_proj", "v_proj"):
                    src, dst = getattr(m, name), getattr(head, name)
                    dst.weight.copy_(src.weight[rows])
                    if bias:
                        dst.bias.copy_(src.bias[rows])
            looped.out_proj.load_state_dict(m.out_proj.state_dict())
        return looped

    @classmethod
    def from_torch(cls, m: nn.MultiheadAttention) -> LoopedMultiHeadAttention:
        """A looped copy of ``torch.nn.MultiheadAttention``."""
        return cls.from_multi_head(MultiHeadAttention.from_torch(m))


class MultiHeadAttention(nn.Module):
    """Multi-head attention (Vaswani et al. 2017): all heads in one matmul. The layer to read.

    The same computation as :class:`LoopedMultiHeadAttention`: one d_model x d_model projection
    is h per-head d_model x d_k projections side by side, and :func:`split_heads` cuts its output
    into heads. Batch first. Weights copy to and from ``torch.nn.MultiheadAttention``.
    :class:`FusedMultiHeadAttention` computes the same function faster.

    Args:
        d_model: D. num_heads: H (D divisible by H). bias: biases on all four projections.
        dropout: dropout on the attention weights during training.
    """

    def __init__(self, d_model: int, num_heads: int, bias: bool = True, dropout: float = 0.0):
        super().__init__()
        self.d_model = check_positive_int("d_model", d_model)
        self.num_heads = check_positive_int("num_heads", num_heads)
        check_divisible("d_model", d_model, "num_heads", num_heads)
        self.dropout = check_dropout("dropout", dropout)
        self.head_dim = d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)  # W_Q: the H heads' d_model x Dh blocks
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)  # W_K
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)  # W_V
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)  # W_O: mixes the concatenated heads

    def forward(
        self, query, key=None, value=None, *, mask=None, key_padding_mask=None, need_weights=True, is_causal=False
    ):
        """Attention of ``query`` over ``key``/``value``; self-attention when they are omitted.

        Args:
            mask: bool, **True = may attend** (the opposite of ``nn.MultiheadAttention``'s bool
                ``attn_mask``), or additive float; (T, S) or broadcastable to (B, H, T, S).
            key_padding_mask: bool (B, S), **True = this key is padding, ignore it**.
            need_weights: False runs PyTorch's fused kernel, which keeps no (B, H, T, S) weights.
            is_causal: query i attends keys j <= i only (top-left aligned when T != S, as PyTorch).
        Shapes:
            query (B, T, D), key/value (B, S, D): S = T in self-attention, not in cross-attention.
        Returns:
            output (B, T, D), weights (B, H, T, S) or None. A query whose keys are all masked
            gets zero weights and a zero context vector.
        """
        query, key, value = resolve_qkv(query, key, value, self.d_model)  # checked (B, T, D), (B, S, D) x 2
        mask = self._scores_mask(mask, key_padding_mask, query, key)  # None or broadcastable to (B, H, T, S)

        # Project, then cut the D features into H heads of Dh: each head attends on its own.
        q = split_heads(self.q_proj(query), self.num_heads)  # (B, T, D) -> (B, H, T, Dh)
        k = split_heads(self.k_proj(key), self.num_heads)  # (B, S, D) -> (B, H, S, Dh)
        v = split_heads(self.v_proj(value), self.num_heads)  # (B, S, D) -> (B, H, S, Dh)

        # softmax(q kᵀ / √Dh + mask) v for every head at once (one batched matmul each).
        dropout_p = self.dropout if self.training else 0.0
        if need_weights:
            context, weights = scaled_dot_product_attention(
                q, k, v, mask, dropout_p=dropout_p, is_causal=is_causal
            )  # (B, H, T, Dh), (B, H, T, S)
        else:  # the same context from a kernel that never stores the weights
            context = fused_attention(q, k, v, mask, dropout_p=dropout_p, is_causal=is_causal)  # (B, H, T, Dh)
            weights = None

        # Concatenate the heads along the features (not a stack of rows), then W_O mixes them.
        output = self.out_proj(merge_heads(context))  # (B, H, T, Dh) -> (B, T, H*Dh) -> (B, T, D)
        return output, weights

    def _scores_mask(self, mask, key_padding_mask, query, key):
        """``mask`` and ``key_padding_mask`` checked and combined into one mask for the scores.

        Shapes:
            query (B, T, D), key (B, S, D). Returns None or a mask broadcastable to (B, H, T, S).
        """
        batch_size, seq_len, key_len = query.shape[0], query.shape[1], key.shape[1]
        return combine_masks(mask, key_padding_mask, batch_size, self.num_heads, seq_len, key_len, query.dtype)

    @classmethod
    def from_torch(cls, m: nn.MultiheadAttention) -> MultiHeadAttention:
        """Copy the weights of ``torch.nn.MultiheadAttention`` (``batch_first`` either way).

        Every constructor option either carries over exactly (``embed_dim``, ``num_heads``,
        ``dropout``, ``bias``, ``device``, ``dtype``; ``batch_first`` only changes the input
        layout, and ``to_torch(batch_first=...)`` restores it) or is refused with a ValueError:
        ``add_bias_kv``, ``add_zero_attn`` and ``kdim``/``vdim`` other than ``embed_dim`` make
        PyTorch compute a function this layer does not have. The training mode is copied too.
        """
        if not isinstance(m, nn.MultiheadAttention):
            raise TypeError(f"m must be a torch.nn.MultiheadAttention, found {type(m).__name__}")
        if m.kdim != m.embed_dim or m.vdim != m.embed_dim:
            raise ValueError(f"m must have kdim = vdim = embed_dim ({m.embed_dim}), found kdim {m.kdim}, vdim {m.vdim}")
        if m.bias_k is not None:  # an extra learned key and value appended to every sequence
            raise ValueError("m must have add_bias_kv=False (mha has no extra key/value), found add_bias_kv=True")
        if m.add_zero_attn:  # a zero key and value appended to every sequence: another softmax
            raise ValueError("m must have add_zero_attn=False (mha has no zero key/value), found add_zero_attn=True")
        bias = m.in_proj_bias is not None
        new = cls(m.embed_dim, m.num_heads, bias=bias, dropout=m.dropout).to(m.in_proj_weight).train(m.training)
        with torch.no_grad():
            for proj, w in zip((new.q_proj, new.k_proj, new.v_proj), m.in_proj_weight.chunk(3)):
                proj.weight.copy_(w)
            if bias:
                for proj, b in zip((new.q_proj, new.k_proj, new.v_proj), m.in_proj_bias.chunk(3)):
                    proj.bias.copy_(b)
            new.out_proj.load_state_dict(m.out_proj.state_dict())
        return new

    def to_torch(self, batch_first: bool = True) -> nn.MultiheadAttention:
        """A ``torch.nn.MultiheadAttention`` with the same weights, dropout and training mode."""
        bias = self.q_proj.bias is not None
        ref = self.q_proj.weight
        m = nn.MultiheadAttention(
            self.d_model,
            self.num_heads,
            dropout=self.dropout,
            bias=bias,
            batch_first=batch_first,
            device=ref.device,
            dtype=ref.dtype,
        ).train(self.training)
        with torch.no_grad():
            m.in_proj_weight.copy_(torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight]))
            if bias:
                m.in_proj_bias.copy_(torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias]))
            m.out_proj.load_state_dict(self.out_proj.state_dict())
        return m


class GroupedQueryAttention(nn.Module):
    """Grouped-query attention: H query heads share G key/value heads (Ainslie et al. 2023).

    ``num_kv_heads = num_heads`` is ordinary multi-head attention and ``num_kv_heads = 1`` is
    multi-query attention (Shazeer 2019). Query head i reads key/value head i // (H / G): the
    explicit path (``need_weights=True``) copies each key/value head H / G times; the fast path
    lets PyTorch's kernel read the G heads in place (``enable_gqa``).

    Args:
        d_model: D. num_heads: H (D must be divisible by H). num_kv_heads: G (H divisible by G).
        bias: projections with biases. dropout: dropout on the attention weights in training.
    """

    def __init__(self, d_model: int, num_heads: int, num_kv_heads: int, bias: bool = True, dropout: float = 0.0):
        super().__init__()
        self.d_model = check_positive_int("d_model", d_model)
        self.num_heads = check_positive_int("num_heads", num_heads)
        self.num_kv_heads = check_positive_int("num_kv_heads", num_kv_heads)
        check_divisible("d_model", d_model, "num_heads", num_heads)
        check_divisible("num_heads", num_heads, "num_kv_heads", num_kv_heads)
        self.dropout = check_dropout("dropout", dropout)
        self.head_dim = d_model // num_heads
        kv_dim = self.num_kv_heads * self.head_dim
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, kv_dim, bias=bias)
        self.v_proj = nn.Linear(d_model, kv_dim, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(
        self, query, key=None, value=None, *, mask=None, key_padding_mask=None, need_weights=True, is_causal=False
    ):
        """As :meth:`MultiHeadAttention.forward` (same arguments, mask conventions, shapes and
        returns), with each group of H/G query heads reading one shared key/value head."""
        query, key, value = resolve_qkv(query, key, value, self.d_model)
        (batch_size, seq_len, _), key_len = query.shape, key.shape[1]
        mask = combine_masks(mask, key_padding_mask, batch_size, self.num_heads, seq_len, key_len, query.dtype)
        if key is query and value is query:
            q, k, v = self._project_fused(query)  # (B, T, D), (B, T, G*Dh), (B, T, G*Dh)
        else:
            q, k, v = self.q_proj(query), self.k_proj(key), self.v_proj(value)
        q = split_heads(q, self.num_heads)  # (B, H, T, Dh)
        k = split_heads(k, self.num_kv_heads)  # (B, G, S, Dh)
        v = split_heads(v, self.num_kv_heads)  # (B, G, S, Dh)
        return self._attend(q, k, v, mask, need_weights, is_causal)

    def _project_fused(self, x):
        """Q, K and V of self-attention in one matmul (:func:`mha.fused.fused_qkv_projection`).

        Returns: q (B, T, D), k (B, T, G*Dh), v (B, T, G*Dh).
        """
        return fused_qkv_projection(x, self.q_proj, self.k_proj, self.v_proj)

    def _attend(self, q, k, v, mask, need_weights, is_causal=False):
        """Shapes: q (B, H, T, Dh), k/v (B, G, S, Dh). Returns output (B, T, D), weights or None."""
        dropout_p = self.dropout if self.training else 0.0
        if need_weights:
            group = self.num_heads // self.num_kv_heads
            if group > 1:
                k = k.repeat_interleave(group, dim=1)  # (B, H, S, Dh): head i reads kv head i // group
                v = v.repeat_interleave(group, dim=1)  # (B, H, S, Dh)
            context, weights = scaled_dot_product_attention(
                q, k, v, mask, dropout_p=dropout_p, is_causal=is_causal
            )  # (B, H, T, Dh), (B, H, T, S)
        else:  # the kernel reads the G heads directly (enable_gqa): no copy per query head
            context = fused_attention(q, k, v, mask, dropout_p=dropout_p, is_causal=is_causal)  # (B, H, T, Dh)
            weights = None
        return self.out_proj(merge_heads(context)), weights  # (B, T, D)

    def new_cache(self, batch_size: int, max_seq_len: int, *, dtype=None, device=None) -> KVCache:
        """An empty :class:`KVCache` sized for this module."""
        dtype = dtype or self.q_proj.weight.dtype
        device = device or self.q_proj.weight.device
        return KVCache(batch_size, max_seq_len, self.num_kv_heads, self.head_dim, dtype=dtype, device=device)

    def decode_step(self, x, cache: KVCache, *, need_weights=False):
        """Causal self-attention for new tokens ``x``, reusing the keys/values in ``cache``.

        Appends the new keys and values to the cache; each new token attends to every cached
        token and to the new tokens up to itself. Feeding a sequence token by token gives the
        same outputs as one full causal pass.

        Shapes:
            x (B, T_new, D). Returns output (B, T_new, D), weights (B, H, T_new, S) or None,
            where S = tokens in the cache after the step.
        """
        check_float_tensor("x", x)
        check_rank("x", x, 3, "(B, T_new, D)")
        check_last_dim("x", x, self.d_model, "d_model")
        if not isinstance(cache, KVCache):
            raise TypeError(f"cache must be an mha.KVCache, found {type(cache).__name__}")
        new_len = x.shape[1]
        q, k_new, v_new = self._project_fused(x)
        q = split_heads(q, self.num_heads)  # (B, H, T_new, Dh)
        k_new = split_heads(k_new, self.num_kv_heads)  # (B, G, T_new, Dh)
        v_new = split_heads(v_new, self.num_kv_heads)  # (B, G, T_new, Dh)
        k, v = cache.append(k_new, v_new)  # (B, G, S, Dh) each
        # One new token may attend every cached one: no mask at all,
        # which keeps every fused kernel available. Several new tokens
        # are the last T_new of S: a bottom-right causal mask (T_new, S).
        mask = None
        if new_len > 1:
            mask = causal_mask(new_len, k.shape[2], device=x.device)
        return self._attend(q, k, v, mask, need_weights)


class FusedMultiHeadAttention(GroupedQueryAttention):
    """:class:`MultiHeadAttention` on the fast path: the same function and parameters, faster.

    Self-attention projects Q, K and V in one matrix product (:func:`mha.fused.fused_qkv_projection`),
    and ``need_weights=False`` runs PyTorch's fused attention kernel (:func:`mha.fused.fused_attention`).
    It is grouped-query attention with one key/value head per query head (G = H), so it also decodes
    with a KV cache (:meth:`decode_step`). The making-it-fast chapter and ``benchmarks/`` time it against
    ``torch.nn.MultiheadAttention``; a test proves that it computes what :class:`MultiHeadAttention`
    computes.

    Args:
        d_model: D. num_heads: H (D divisible by H). bias: biases on all four projections.
        dropout: dropout on the attention weights during training.
    """

    def __init__(self, d_model: int, num_heads: int, bias: bool = True, dropout: float = 0.0):
        super().__init__(d_model, num_heads, num_heads, bias=bias, dropout=dropout)

    @classmethod
    def from_multi_head(cls, m: MultiHeadAttention) -> FusedMultiHeadAttention:
        """The fast copy of a :class:`MultiHeadAttention`: the same weights, dtype, device and mode."""
        if not isinstance(m, MultiHeadAttention):
            raise TypeError(f"m must be an mha.MultiHeadAttention, found {type(m).__name__}")
        new = cls(m.d_model, m.num_heads, bias=m.q_proj.bias is not None, dropout=m.dropout).to(m.q_proj.weight)
        new.load_state_dict(m.state_dict())
        return new.train(m.training)

    @classmethod
    def from_torch(cls, m: nn.MultiheadAttention) -> FusedMultiHeadAttention:
        """Copy the weights of ``torch.nn.MultiheadAttention`` (``batch_first`` either way)."""
        return cls.from_multi_head(MultiHeadAttention.from_torch(m))

    def to_multi_head(self) -> MultiHeadAttention:
        """The readable :class:`MultiHeadAttention` with the same weights, dtype, device and mode."""
        ref = self.q_proj.weight
        new = MultiHeadAttention(
            self.d_model, self.num_heads, bias=self.q_proj.bias is not None, dropout=self.dropout
        ).to(ref)
        new.load_state_dict(self.state_dict())
        return new.train(self.training)

    def to_torch(self, batch_first: bool = True) -> nn.MultiheadAttention:
        """A ``torch.nn.MultiheadAttention`` with the same weights."""
        return self.to_multi_head().to_torch(batch_first)
