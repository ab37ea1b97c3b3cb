"""Closed-form costs of an attention layer: parameters, FLOPs and KV-cache bytes.

Each formula is checked in the tests against real modules (:func:`count_params`) and real
cache tensors. Notation: D = d_model, H = num_heads, G = num_kv_heads, Dh = D / H, T = seq_len.
"""

from __future__ import annotations

from .checks import check_divisible, check_positive_int


def _sizes(d_model, num_heads, num_kv_heads):
    d_model = check_positive_int("d_model", d_model)
    num_heads = check_positive_int("num_heads", num_heads)
    check_divisible("d_model", d_model, "num_heads", num_heads)
    num_kv_heads = num_heads if num_kv_heads is None else check_positive_int("num_kv_heads", num_kv_heads)
    check_divisible("num_heads", num_heads, "num_kv_heads", num_kv_heads)
    return d_model, num_heads, num_kv_heads, d_model // num_heads


def attention_params(d_model: int, num_heads: int, num_kv_heads: int | None = None, bias: bool = True) -> int:
    """Parameters of one attention layer, W_O included.

    W_Q and W_O are D x D; W_K and W_V are D x (G·Dh). Without biases that is
    MHA (G = H): 4·D² = 4·H·Dh·D;  MQA (G = 1): (2H + 2)·Dh·D;  GQA: (2H + 2G)·Dh·D.
    With biases add D + 2·G·Dh + D. When Dh = D / H the MHA count does not depend on H.

    Returns:
        int, equal to ``sum(p.numel() for p in module.parameters())`` of
        ``mha.GroupedQueryAttention(d_model, num_heads, num_kv_heads, bias)`` (and of
        ``nn.MultiheadAttention(d_model, num_heads, bias=bias)`` when G = H).
    """
    d_model, _, num_kv_heads, head_dim = _sizes(d_model, num_heads, num_kv_heads)
    kv_dim = num_kv_heads * head_dim
    weights = 2 * d_model * d_model + 2 * d_model * kv_dim  # W_Q, W_O, W_K, W_V
    biases = 2 * d_model + 2 * kv_dim if bias else 0
    return weights + biases


def attention_flops_breakdown(seq_len: int, d_model: int, num_heads: int, num_kv_heads: int | None = None) -> dict:
    """Forward FLOPs of self-attention on one sequence of length T, by step.

    Counted: matrix multiplications only, 2 FLOPs per multiply-add (one sequence, batch 1).
    Not counted: biases (O(T·D)), masking (a select, no arithmetic), and the 1/√Dh scaling and
    softmax, about 6 FLOPs per score: 6·H·T², which, unlike the matrix products, grows with H
    (0.9 % of the total for H = 12, D = 768, T = 1024).

    Returns:
        dict with ``q_proj`` 2·T·D², ``kv_proj`` 2·2·T·D·G·Dh, ``scores`` 2·T²·D (Q Kᵀ, all heads),
        ``weighted_sum`` 2·T²·D (weights · V), ``out_proj`` 2·T·D², and ``total``.
    """
    d_model, num_heads, num_kv_heads, head_dim = _sizes(d_model, num_heads, num_kv_heads)
    seq_len = check_positive_int("seq_len", seq_len)
    parts = {
        "q_proj": 2 * seq_len * d_model * d_model,
        "kv_proj": 2 * 2 * seq_len * d_model * num_kv_heads * head_dim,
        "scores": 2 * num_heads * seq_len * seq_len * head_dim,
        "weighted_sum": 2 * num_heads * seq_len * seq_len * head_dim,
        "out_proj": 2 * seq_len * d_model * d_model,
    }
    parts["total"] = sum(parts.values())
    return parts


def attention_flops(seq_len: int, d_model: int, num_heads: int, num_kv_heads: int | None = None) -> int:
    """Total forward FLOPs of self-attention on one sequence (see :func:`attention_flops_breakdown`).

    For MHA this is 8·T·D² (projections) + 4·T²·D (attention), whatever the number of heads
    (matrix products only: the scaling and softmax, 6·H·T², are left out).
    """
    return attention_flops_breakdown(seq_len, d_model, num_heads, num_kv_heads)["total"]


def kv_cache_bytes(
    batch_size: int, seq_len: int, num_layers: int, num_kv_heads: int, head_dim: int, bytes_per_element: int = 2
) -> int:
    """Bytes of a KV cache: 2 (K and V) · batch · seq_len · layers · kv_heads · head_dim · bytes.

    ``bytes_per_element``: 2 for fp16/bf16, 1 for 8-bit, 4 for fp32. MQA and GQA shrink the
    cache by H and H / G compared with MHA because only G heads' keys and values are stored.
    """
    sizes = [
        check_positive_int(name, value)
        for name, value in (
            ("batch_size", batch_size),
            ("seq_len", seq_len),
            ("num_layers", num_layers),
            ("num_kv_heads", num_kv_heads),
            ("head_dim", head_dim),
            ("bytes_per_element", bytes_per_element),
        )
    ]
    total = 2
    for size in sizes:
        total *= size
    return total


def count_params(module, *, trainable_only: bool = False) -> int:
    """Parameters of ``module``: ``sum(p.numel() for p in module.parameters())``.

    The count every formula above is checked against: ``count_params(mha.MultiHeadAttention(D, H))
    == attention_params(D, H)``. With ``trainable_only``, only the parameters an optimiser
    updates (``requires_grad``) count.

    Returns:
        int.
    """
    parameters = getattr(module, "parameters", None)
    if not callable(parameters):
        raise TypeError(f"module must be a torch.nn.Module, found {type(module).__name__}")
    return sum(p.numel() for p in parameters() if p.requires_grad or not trainable_only)
