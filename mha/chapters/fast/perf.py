"""Measuring attention (the making-it-fast chapter): bytes kept and read, the layers compared, the decoding roofline.

Timings are never taken here: ``python -m benchmarks.bench_attention`` writes them to
``benchmarks/results/<device>.json`` and :mod:`mha.chapters.fast.perf_results` reads that file. What
can be counted exactly is counted here, so the chapter checks it live:

* bytes autograd keeps for the backward pass (:func:`saved_tensors`) and the peak of the tensors
  a forward computation holds at once (:func:`peak_live_bytes`);
* the two references the benchmark times ``mha`` against: the least work PyTorch does for a layer
  (:func:`bare_attention_layer`) and grouped-query attention that copies K and V per query head
  (:func:`gqa_repeat_kv_forward`);
* the bytes one decoding step reads (the weights it reads + KV cache), the FLOPs it does, and the speed-up
  that fewer key/value heads can give a memory-bound step (:func:`decode_step_bytes`,
  :func:`decode_step_flops`, :func:`decode_speedup_bound`);
* the checkers of the chapter's exercises (:func:`check_matrix_bytes`, :func:`check_decode_bytes`,
  :func:`check_online_softmax`): each says which step is wrong and gives a hint.

Shape legend: B batch, H heads, G key/value heads, T query length, S key length, D d_model,
Dh head_dim.
"""

from __future__ import annotations

import weakref
from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

from ...attention import merge_heads, split_heads
from ...checks import check_divisible, check_positive_int
from ...counting import kv_cache_bytes
from ...fused import fused_attention, fused_qkv_projection
from ...modules import GroupedQueryAttention
from ..costs.configs import total_params
from ..costs.models import config

# ---------------------------------------------------------------------------------------------
# Bytes kept for the backward pass, bytes held at once
# ---------------------------------------------------------------------------------------------


def saved_tensors(forward, x, exclude=()) -> list[dict]:
    """The distinct tensors autograd keeps for, and reads during, the backward pass.

    Runs ``forward(x).sum().backward()`` with ``saved_tensors_hooks``. A tensor counts when the
    backward pass unpacks it (a saved tensor whose graph node is freed during the forward pass,
    e.g. behind a ``.detach()``, is not kept and does not count). Tensors sharing a storage count
    once, with the storage's size; storages of ``exclude`` (e.g. the parameters) are left out.

    Returns:
        list of dicts ``shape``, ``dtype``, ``nbytes``, one per storage, in order of first use.
    """
    excluded = {t.untyped_storage().data_ptr() for t in exclude}
    packed, used = [], {}

    def pack(t):
        packed.append(t)
        return len(packed) - 1

    def unpack(index):
        t = packed[index]
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr not in excluded and ptr not in used:
            used[ptr] = {
                "shape": tuple(t.shape),
                "dtype": str(t.dtype).replace("torch.", ""),
                "nbytes": storage.nbytes(),
            }
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        forward(x).sum().backward()
    return list(used.values())


def saved_activation_bytes(forward, x, exclude=()) -> int:
    """Bytes of the distinct tensors the backward pass reads (see :func:`saved_tensors`)."""
    return sum(t["nbytes"] for t in saved_tensors(forward, x, exclude))


class _LiveTensors(TorchFunctionMode):
    """Follows every tensor a torch function returns: bytes of the storages alive, and their peak."""

    def __init__(self, existing):
        super().__init__()
        self.existing = existing  # storages that were there before: inputs, parameters
        self.live = {}  # storage pointer -> [Python tensors alive on it, its bytes]
        self.current = self.peak = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        for t in result if isinstance(result, (tuple, list)) else (result,):
            if isinstance(t, torch.Tensor):
                self._follow(t)
        return result

    def _follow(self, t):
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr == 0 or ptr in self.existing:
            return
        if ptr not in self.live:
            self.live[ptr] = [0, storage.nbytes()]
            self.current += storage.nbytes()
            self.peak = max(self.peak, self.current)
        self.live[ptr][0] += 1
        weakref.finalize(t, self._release, ptr)

    def _release(self, ptr):
        entry = self.live[ptr]
        entry[0] -= 1
        if entry[0] == 0:
            self.current -= entry[1]
            del self.live[ptr]


def peak_live_bytes(fn, *args) -> int:
    """The most bytes of new tensors that ``fn(*args)`` holds at one time, without autograd.

    Every tensor a torch function or tensor method returns is followed until Python drops it;
    storages of ``args`` (and views of them) do not count, and neither do buffers a kernel uses
    inside one call. So it is the working set the *Python code* of ``fn`` keeps: for attention,
    whether a (T, S) score matrix ever exists.

    Returns:
        int, bytes.
    """
    existing = {a.untyped_storage().data_ptr() for a in args if isinstance(a, torch.Tensor)}
    mode = _LiveTensors(existing)
    with torch.no_grad(), mode:
        result = fn(*args)
    del result
    return mode.peak


def attention_matrix_bytes(
    batch_size: int, num_heads: int, seq_len: int, key_len: int | None = None, bytes_per_element: int = 4
) -> int:
    """Bytes of one (B, H, T, S) tensor of scores or weights: B·H·T·S·bytes (S defaults to T)."""
    key_len = seq_len if key_len is None else key_len
    sizes = [
        check_positive_int(name, v)
        for name, v in (
            ("batch_size", batch_size),
            ("num_heads", num_heads),
            ("seq_len", seq_len),
            ("key_len", key_len),
            ("bytes_per_element", bytes_per_element),
        )
    ]
    total = 1
    for size in sizes:
        total *= size
    return total


def count_attention_matrices(
    tensors: list[dict], batch_size: int, num_heads: int, seq_len: int, key_len: int | None = None
) -> int:
    """How many of ``tensors`` (from :func:`saved_tensors`) are (T, S) matrices for all B·H heads.

    A tensor counts when its last two sizes are (T, S) and it has B·H·T·S elements, whether it is
    shaped (B, H, T, S) or (B·H, T, S) (PyTorch's module folds the heads into the batch).
    """
    key_len = seq_len if key_len is None else key_len
    numel = batch_size * num_heads * seq_len * key_len
    count = 0
    for t in tensors:
        n = 1
        for size in t["shape"]:
            n *= size
        count += n == numel and tuple(t["shape"][-2:]) == (seq_len, key_len)
    return count


# ---------------------------------------------------------------------------------------------
# The references the benchmark times mha against
# ---------------------------------------------------------------------------------------------


def bare_attention_layer(module: nn.MultiheadAttention, x: torch.Tensor, *, is_causal: bool = False) -> torch.Tensor:
    """The least work PyTorch can do for self-attention with ``module``'s weights.

    One matrix product for Q, K and V (``in_proj_weight``), ``F.scaled_dot_product_attention``,
    one output projection: no argument checks, no masks, no weights returned. ``mha``'s fast
    path is timed against it.

    Shapes:
        x (B, T, D). Returns (B, T, D).
    """
    # (the making-it-fast chapter prints these lines: at most 74 characters once dedented)
    batch_size, seq_len, d_model = x.shape
    num_heads = module.num_heads
    w_in, b_in = module.in_proj_weight, module.in_proj_bias
    qkv = F.linear(x, w_in, b_in)  # (B, T, 3D)
    # (B, T, 3D) -> (B, T, 3, H, Dh) -> 3 x (B, H, T, Dh)
    qkv = qkv.view(batch_size, seq_len, 3, num_heads, d_model // num_heads)
    q, k, v = qkv.permute(2, 0, 3, 1, 4)
    # (B, H, T, Dh)
    context = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    # (B, H, T, Dh) -> (B, T, H, Dh) -> (B, T, D)
    context = context.transpose(1, 2).reshape(batch_size, seq_len, d_model)
    w_out, b_out = module.out_proj.weight, module.out_proj.bias
    return F.linear(context, w_out, b_out)  # (B, T, D)


def gqa_repeat_kv_forward(module: GroupedQueryAttention, x: torch.Tensor, *, is_causal: bool = False):
    """``module``'s fast path as it was before ``enable_gqa``: K and V copied once per query head.

    The same function as ``module(x, need_weights=False)``; the copies are (B, H, S, Dh) tensors
    that the kernel then reads (and autograd keeps) instead of the (B, G, S, Dh) originals.

    Shapes:
        x (B, T, D). Returns (B, T, D).
    """
    if not isinstance(module, GroupedQueryAttention):
        raise TypeError(f"module must be an mha.GroupedQueryAttention, found {type(module).__name__}")
    q, k, v = fused_qkv_projection(x, module.q_proj, module.k_proj, module.v_proj)
    group = module.num_heads // module.num_kv_heads
    q = split_heads(q, module.num_heads)  # (B, H, T, Dh)
    k = split_heads(k, module.num_kv_heads).repeat_interleave(group, dim=1)  # (B, G, T, Dh) -> (B, H, T, Dh)
    v = split_heads(v, module.num_kv_heads).repeat_interleave(group, dim=1)  # (B, H, T, Dh)
    context = fused_attention(q, k, v, is_causal=is_causal)  # (B, H, T, Dh)
    return module.out_proj(merge_heads(context))  # (B, T, D)


# ---------------------------------------------------------------------------------------------
# Decoding: bytes per step and the roofline
# ---------------------------------------------------------------------------------------------

#: The model of the decoding examples: Llama-2-7B (fp16, 32 layers, 32 heads of 128), from the
#: parameter-analysis chapter.
DECODE_MODEL = "Llama-2-7B"

#: NVIDIA's published figures for an H100 SXM (its datasheet, not a measurement of this course):
#: memory bandwidth in bytes/s and dense bf16 tensor-core throughput in FLOP/s.
H100_SXM = {"bytes_per_s": 3.35e12, "bf16_flops_per_s": 989e12}


def decode_step_bytes(
    weight_bytes: int,
    batch_size: int,
    context_len: int,
    num_layers: int,
    num_kv_heads: int,
    head_dim: int,
    bytes_per_element: int = 2,
) -> int:
    """Bytes one decoding step must read from memory: the weights it reads, plus the KV cache.

    A step computes one new token for each of the B sequences. ``weight_bytes`` are the weights
    it reads once for the whole batch (for a published model, :func:`model_step_weight_bytes`:
    every weight but the rows of the input embedding that the step does not gather); its
    attention reads the keys and values of the ``context_len`` tokens before it, in every layer
    (:func:`mha.kv_cache_bytes`). Activations (a few vectors per token) are left out.
    ``bytes / bandwidth`` is the least time the step can take (the bandwidth ceiling of its
    roofline; :func:`decode_step_flops` gives the arithmetic).
    """
    if isinstance(weight_bytes, bool) or not isinstance(weight_bytes, int) or weight_bytes < 0:
        raise ValueError(f"weight_bytes must be an int >= 0, found {weight_bytes!r}")
    cache = kv_cache_bytes(batch_size, context_len, num_layers, num_kv_heads, head_dim, bytes_per_element)
    return weight_bytes + cache


def decode_step_flops(
    matmul_params: int, batch_size: int, context_len: int, num_layers: int, num_heads: int, head_dim: int
) -> dict:
    """FLOPs of one decoding step, matrix products only (2 per multiply-add, as :func:`mha.attention_flops`).

    Each weight of a matrix product takes part in one multiply-add per sequence: 2·B·P. Each
    layer's attention lets the B new queries of all H query heads read ``context_len`` keys and
    as many values: 2·2·B·n·H·Dh. The second does not depend on the number of key/value heads G:
    a cached key or value is used H / G times, once by each query head that shares it.

    Returns:
        dict with ``weights`` (2·B·P), ``attention`` (4·B·n·L·H·Dh) and ``total``.
    """
    if isinstance(matmul_params, bool) or not isinstance(matmul_params, int) or matmul_params < 0:
        raise ValueError(f"matmul_params must be an int >= 0, found {matmul_params!r}")
    b, n, layers, heads, head_dim = (
        check_positive_int(name, value)
        for name, value in (
            ("batch_size", batch_size),
            ("context_len", context_len),
            ("num_layers", num_layers),
            ("num_heads", num_heads),
            ("head_dim", head_dim),
        )
    )
    parts = {"weights": 2 * b * matmul_params, "attention": 2 * 2 * b * n * layers * heads * head_dim}
    parts["total"] = parts["weights"] + parts["attention"]
    return parts


def _model_config(model: str, num_kv_heads: int | None):
    """``model``'s configuration, or one of the same shape with ``num_kv_heads`` key/value heads."""
    cfg = config(model)
    return cfg if num_kv_heads is None else replace(cfg, num_kv_heads=num_kv_heads)


def model_weight_bytes(model: str = DECODE_MODEL, bytes_per_element: int = 2, num_kv_heads: int | None = None) -> int:
    """Bytes of every parameter of a published model (:func:`mha.chapters.costs.configs.total_params`).

    With ``num_kv_heads``: of a model of the same shape with that many key/value heads, whose
    W_K and W_V shrink with them (a GQA-8 model of Llama-2-7B's shape has 805 M fewer parameters).
    """
    cfg = _model_config(model, num_kv_heads)
    return total_params(cfg) * check_positive_int("bytes_per_element", bytes_per_element)


def model_step_weight_bytes(
    batch_size: int, model: str = DECODE_MODEL, bytes_per_element: int = 2, num_kv_heads: int | None = None
) -> int:
    """Bytes of weights one decoding step of a Llama-family model reads for ``batch_size`` new tokens.

    Every weight of the matrix products (the output layer included: it is not tied to the input
    embedding) and every norm scale is read once for the whole batch; the input embedding table is
    not read but indexed: the step gathers one row of ``d_model`` per new token, B rows of the
    V = ``vocab_size`` (for Llama-2-7B the table is 1.9 % of the parameters). ``num_kv_heads`` as
    in :func:`model_weight_bytes`.
    """
    cfg = _model_config(model, num_kv_heads)
    if cfg.family != "llama":
        raise ValueError(f"model_step_weight_bytes counts Llama-family models, found {model!r} ({cfg.family})")
    rows = min(check_positive_int("batch_size", batch_size), cfg.vocab_size)
    params = total_params(cfg) - (cfg.vocab_size - rows) * cfg.d_model
    return params * check_positive_int("bytes_per_element", bytes_per_element)


def model_matmul_params(model: str = DECODE_MODEL, num_kv_heads: int | None = None) -> int:
    """Parameters of a Llama-family model that a decoding step multiplies: every weight but the
    input embedding table (a lookup of B rows) and the RMSNorm scales (2 per block, 1 at the end)."""
    cfg = _model_config(model, num_kv_heads)
    if cfg.family != "llama":
        raise ValueError(f"model_matmul_params counts Llama-family models, found {model!r} ({cfg.family})")
    return total_params(cfg) - cfg.vocab_size * cfg.d_model - (2 * cfg.num_layers + 1) * cfg.d_model


def model_decode_step_bytes(
    batch_size: int,
    context_len: int,
    num_kv_heads: int,
    model: str = DECODE_MODEL,
    bytes_per_element: int = 2,
    *,
    fixed_weights: bool = True,
) -> int:
    """:func:`decode_step_bytes` for a published Llama-family model of :mod:`mha.chapters.costs.configs`,
    with the weights a step reads (:func:`model_step_weight_bytes`).

    Two accountings of fewer key/value heads: ``fixed_weights=True`` holds the model's weights as
    published and only the cache changes with ``num_kv_heads`` (as when the parameters saved on
    W_K and W_V are spent elsewhere, e.g. on wider feed-forward layers); ``fixed_weights=False``
    is a model of the same shape whose W_K and W_V shrink with the cache.
    """
    cfg = config(model)
    weights = model_step_weight_bytes(batch_size, model, bytes_per_element, None if fixed_weights else num_kv_heads)
    return decode_step_bytes(
        weights, batch_size, context_len, cfg.num_layers, num_kv_heads, cfg.head_dim, bytes_per_element
    )


def model_decode_step_flops(
    batch_size: int, context_len: int, num_kv_heads: int, model: str = DECODE_MODEL, *, fixed_weights: bool = True
) -> dict:
    """:func:`decode_step_flops` for a Llama-family model (:func:`model_matmul_params`), the two
    accountings of :func:`model_decode_step_bytes`."""
    cfg = config(model)
    check_divisible("num_heads", cfg.num_heads, "num_kv_heads", num_kv_heads)
    params = model_matmul_params(model, None if fixed_weights else num_kv_heads)
    return decode_step_flops(params, batch_size, context_len, cfg.num_layers, cfg.num_heads, cfg.head_dim)


def model_decode_intensity(
    batch_size: int, context_len: int, num_kv_heads: int, model: str = DECODE_MODEL, *, fixed_weights: bool = True
) -> dict:
    """Arithmetic intensity (FLOPs per byte read) of one fp16 decoding step of ``model``.

    :func:`model_decode_step_flops` over :func:`model_decode_step_bytes`, in parts: ``weights``
    (about 2·B / 2 = B FLOP per byte: each weight is used once per sequence), ``cache``
    (exactly H / G in fp16: each cached element is used by the H / G query heads sharing it) and
    ``step`` (the whole step). A step is bandwidth-bound on hardware whose ridge, peak FLOP/s
    over bytes/s, lies above these.
    """
    flops = model_decode_step_flops(batch_size, context_len, num_kv_heads, model, fixed_weights=fixed_weights)
    weight_bytes = model_step_weight_bytes(batch_size, model, 2, None if fixed_weights else num_kv_heads)
    total = model_decode_step_bytes(batch_size, context_len, num_kv_heads, model, fixed_weights=fixed_weights)
    return {
        "weights": flops["weights"] / weight_bytes,
        "cache": flops["attention"] / (total - weight_bytes),
        "step": flops["total"] / total,
    }


def generation_bytes(
    weight_bytes: int,
    new_tokens: int,
    num_kv_heads: int,
    head_dim: int,
    bytes_per_element: int = 4,
    num_layers: int = 1,
) -> int:
    """Bytes a generation of ``new_tokens`` tokens at batch 1 reads with a KV cache, from an empty
    cache: step t (1, 2, ...) reads the weights and the keys and values of t tokens
    (:func:`decode_step_bytes`)."""
    check_positive_int("new_tokens", new_tokens)
    return sum(
        decode_step_bytes(weight_bytes, 1, t, num_layers, num_kv_heads, head_dim, bytes_per_element)
        for t in range(1, new_tokens + 1)
    )


def decode_speedup_bound(weight_bytes: int, tokens: int, per_token_kv_head_bytes: int, num_heads: int, g: int):
    """How much faster a memory-bound step gets with ``g`` key/value heads instead of ``num_heads``,
    the weights ``weight_bytes`` held fixed.

    ``tokens`` is batch x context (the cache holds that many tokens' keys and values) and
    ``per_token_kv_head_bytes`` = 2 · layers · Dh · bytes (K and V of one token, one KV head).
    The bound is bytes(MHA) / bytes(GQA) = (W + c·h) / (W + c·g) with c = tokens x
    ``per_token_kv_head_bytes``: near 1 while the weights dominate, approaching h / g only when
    the cache outweighs the weights.
    """
    check_divisible("num_heads", num_heads, "g", g)
    cache_per_head = check_positive_int("tokens", tokens) * per_token_kv_head_bytes
    return (weight_bytes + cache_per_head * num_heads) / (weight_bytes + cache_per_head * g)


def tokens_for_speedup(weight_bytes: int, per_token_kv_head_bytes: int, num_heads: int, g: int, fraction: float):
    """Batch x context at which :func:`decode_speedup_bound` reaches ``fraction`` of h / g.

    Solves (W + c·h) / (W + c·g) = f·h/g for c = tokens x per-token bytes:
    tokens = W·(f·h/g - 1) / (per-token bytes · h · (1 - f)). Requires f·h/g > 1 and f < 1.
    """
    target = fraction * num_heads / g
    if not (0 < fraction < 1) or target <= 1:
        raise ValueError(
            f"fraction must be in (0, 1) with fraction * h / g > 1, found {fraction!r} (h/g = {num_heads / g})"
        )
    return weight_bytes * (target - 1) / (per_token_kv_head_bytes * num_heads * (1 - fraction))
