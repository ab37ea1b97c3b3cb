"""Measuring attention (chapter 6): bytes kept and read, the layers compared, the decoding roofline.

Timings are never taken here: ``python -m benchmarks.bench_attention`` writes them to
``benchmarks/results/<device>.json`` and :mod:`mha.chapters.perf_results` reads that file. What
can be counted exactly is counted here, so the chapter checks it live:

* bytes autograd keeps for the backward pass (:func:`saved_tensors`) and the peak of the tensors
  a forward computation holds at once (:func:`peak_live_bytes`);
* the two references the benchmark times ``mha`` against: the least work PyTorch does for a layer
  (:func:`bare_attention_layer`) and grouped-query attention that copies K and V per query head
  (:func:`gqa_repeat_kv_forward`);
* the bytes one decoding step reads (weights + KV cache) and the speed-up that bounds
  (:func:`decode_step_bytes`, :func:`decode_speedup_bound`);
* the checkers of the chapter's exercises (:func:`check_matrix_bytes`, :func:`check_decode_bytes`,
  :func:`check_online_softmax`): each says which step is wrong and gives a hint.

Shape legend: B batch, H heads, G key/value heads, T query length, S key length, D d_model,
Dh head_dim.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

from ..attention import merge_heads, split_heads
from ..checks import check_divisible, check_positive_int
from ..counting import kv_cache_bytes
from ..fused import fused_attention, fused_qkv_projection
from ..modules import GroupedQueryAttention
from .answers import Verdict, malformed, matches, read_number, right, wrong
from .configs import total_params
from .models import config

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
    batch_size, seq_len, d_model = x.shape
    num_heads = module.num_heads
    qkv = F.linear(x, module.in_proj_weight, module.in_proj_bias)  # (B, T, 3D)
    qkv = qkv.view(batch_size, seq_len, 3, num_heads, d_model // num_heads)  # (B, T, 3, H, Dh)
    q, k, v = qkv.permute(2, 0, 3, 1, 4)  # 3 x (B, H, T, Dh)
    context = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)  # (B, H, T, Dh)
    context = context.transpose(1, 2).reshape(batch_size, seq_len, d_model)  # (B, T, D)
    return F.linear(context, module.out_proj.weight, module.out_proj.bias)  # (B, T, D)


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

#: The model of the decoding examples: Llama-2-7B (fp16, 32 layers, 32 heads of 128), from chapter 4.
DECODE_MODEL = "Llama-2-7B"


def decode_step_bytes(
    weight_bytes: int,
    batch_size: int,
    context_len: int,
    num_layers: int,
    num_kv_heads: int,
    head_dim: int,
    bytes_per_element: int = 2,
) -> int:
    """Bytes one decoding step must read from memory: every weight once, plus the KV cache.

    A step computes one new token for each of the B sequences. Its matrix products read each
    weight once for the whole batch; its attention reads the keys and values of the
    ``context_len`` tokens before it, in every layer (:func:`mha.kv_cache_bytes`). Activations
    (a few vectors per token) are left out. On hardware whose arithmetic outruns its memory,
    ``time >= bytes / bandwidth``: the roofline of a decoding step.
    """
    if isinstance(weight_bytes, bool) or not isinstance(weight_bytes, int) or weight_bytes < 0:
        raise ValueError(f"weight_bytes must be an int >= 0, found {weight_bytes!r}")
    cache = kv_cache_bytes(batch_size, context_len, num_layers, num_kv_heads, head_dim, bytes_per_element)
    return weight_bytes + cache


def model_decode_step_bytes(
    batch_size: int, context_len: int, num_kv_heads: int, model: str = DECODE_MODEL, bytes_per_element: int = 2
) -> int:
    """:func:`decode_step_bytes` for a published model of :mod:`mha.chapters.configs`, its weights
    held fixed: only the cache changes with ``num_kv_heads`` (as when a model is trained with GQA
    and the parameters saved on W_K and W_V are spent elsewhere, as Llama-2-70B did)."""
    cfg = config(model)
    weights = model_weight_bytes(model, bytes_per_element)
    return decode_step_bytes(
        weights, batch_size, context_len, cfg.num_layers, num_kv_heads, cfg.head_dim, bytes_per_element
    )


def model_weight_bytes(model: str = DECODE_MODEL, bytes_per_element: int = 2) -> int:
    """Bytes of every parameter of a published model (:func:`mha.chapters.configs.total_params`)."""
    return total_params(config(model)) * check_positive_int("bytes_per_element", bytes_per_element)


def decode_speedup_bound(weight_bytes: int, tokens: int, per_token_kv_head_bytes: int, num_heads: int, g: int):
    """How much faster a memory-bound step gets with ``g`` key/value heads instead of ``num_heads``.

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


# ---------------------------------------------------------------------------------------------
# Exercise checkers (mha.chapters.answers.Verdict): the wrong step and a hint; a message, never a traceback
# ---------------------------------------------------------------------------------------------


def _read_size(name: str, answer):
    """(value, None) for one finite number >= 0, else (None, what is wrong with it)."""
    value, problem = read_number(name, answer)
    if problem is None and value < 0:
        problem = f"{name} must be >= 0 (a number of bytes or a sum of exponentials), found {value:g}"
    return (None, problem) if problem else (value, None)


def _verdict(title, step, value, expected, slips, tol=1e-4) -> Verdict:
    """Compare ``value`` with ``expected`` and with each slip, ``(wrong value, hint)`` or
    ``(wrong value, hint, tolerance)``; tolerances are relative (a rounded GiB figure needs 1e-2)."""
    if matches(value, expected, tol):
        return right(title)
    for wrong_value, hint, *slip_tol in slips:
        if matches(value, wrong_value, slip_tol[0] if slip_tol else tol):
            return wrong(title, step, hint)
    ratio = value / expected if expected else math.inf
    return wrong(title, step, f"{ratio:.3g} times the right value: recount step by step")


def check_matrix_bytes(answer, batch_size: int = 8, num_heads: int = 12, seq_len: int = 4096) -> Verdict:
    """Exercise 1: the bytes of one fp32 (B, H, T, T) attention-weight tensor.

    Recognises the usual slips: elements instead of bytes, 2 bytes (bf16), both kept matrices,
    a missing square, batch or heads, GiB or MiB instead of bytes, bits.
    """
    title = "bytes of one fp32 (B, H, T, T) tensor"
    value, problem = _read_size("answer", answer)
    if problem:
        return malformed(title, problem)
    b, h, n = batch_size, num_heads, seq_len
    expected = attention_matrix_bytes(b, h, n)
    slips = [
        (expected / 4, "that is the number of elements; an fp32 element takes 4 bytes"),
        (expected / 2, "that counts 2 bytes per element (bf16); these weights are fp32, 4 bytes"),
        (2 * expected, "that is two matrices (the explicit path keeps two); the question asks for one"),
        (expected / n, "a head's weights are T x T: one per (query, key) pair, so T appears squared"),
        (expected / h, "the tensor holds every head's matrix: multiply by H"),
        (expected / b, "the tensor holds every sequence of the batch: multiply by B"),
        (expected / 2**30, "that is GiB; give the answer in bytes", 1e-2),
        (expected / 2**20, "that is MiB; give the answer in bytes", 1e-2),
        (expected / 1e9, "that is GB; give the answer in bytes", 1e-2),
        (8 * expected, "that is bits; a byte is 8 bits"),
    ]
    return _verdict(title, "bytes", value, expected, slips)


def check_decode_bytes(answer, num_kv_heads: int, batch_size: int = 1, context_len: int = 4096) -> Verdict:
    """Exercise 2: the bytes one decoding step of Llama-2-7B (fp16) reads, weights held fixed.

    Recognises: the cache alone, the weights alone, keys without values, one layer's cache,
    H heads cached instead of G, fp32 instead of fp16, W_K and W_V shrunk with the cache, GiB.
    """
    title = f"bytes one decoding step reads, g = {num_kv_heads}"
    value, problem = _read_size("answer", answer)
    if problem:
        return malformed(title, problem)
    cfg = config(DECODE_MODEL)
    s, layers = 2, cfg.num_layers
    weights = total_params(cfg) * s
    cache = kv_cache_bytes(batch_size, context_len, layers, num_kv_heads, cfg.head_dim, s)
    expected = weights + cache
    slips = [
        (cache, "that is the KV cache alone; every step also reads every weight of the model once"),
        (weights, "that is the weights alone; the step also reads the keys and values of every earlier token"),
        (weights + cache / 2, "the cache holds keys *and* values: two tensors per layer"),
        (weights + cache / layers, f"each of the {layers} layers has its own cache"),
        (2 * expected, "Llama-2-7B is stored in fp16: 2 bytes per element, not 4"),
        (expected / 2**30, "that is GiB; give the answer in bytes", 1e-2),
        (expected / 1e9, "that is GB; give the answer in bytes", 1e-2),
    ]
    if num_kv_heads != cfg.num_heads:
        full = kv_cache_bytes(batch_size, context_len, layers, cfg.num_heads, cfg.head_dim, s)
        slips.append((weights + full, f"with {num_kv_heads} key/value heads only those are cached, not all h"))
        shrunk = total_params(replace(cfg, num_kv_heads=num_kv_heads)) * s
        slips.append((shrunk + cache, "this exercise holds the weights fixed: only the cache changes with g"))
    return _verdict(title, "bytes", value, expected, slips)


#: Exercise 3's row of scores, in two blocks of keys.
ONLINE_SOFTMAX_BLOCKS = ((2.0, 1.0), (4.0, 3.0))


def check_online_softmax(running_max, running_sum, blocks=ONLINE_SOFTMAX_BLOCKS) -> Verdict:
    """Exercise 3: the running maximum m and sum l of exp(score - m) after the last block.

    Recognises: m not updated by a later block, the sum without rescaling the earlier blocks by
    exp(m_old - m_new), the sum of plain exp(score) (no maximum subtracted), the softmax
    weights' sum (1).
    """
    title = f"online softmax over the blocks {blocks}"
    m_value, problem = read_number("running_max", running_max)
    if problem:
        return malformed(title, problem)
    l_value, problem = _read_size("running_sum", running_sum)
    if problem:
        return malformed(title, problem)
    scores = [s for block in blocks for s in block]
    m, first_max = max(scores), max(blocks[0])
    m_slips = [(first_max, "a later block holds a larger score: m is the maximum of every score so far")]
    stale = sum(math.exp(s - first_max) for s in blocks[0]) + sum(math.exp(s - m) for s in blocks[1])
    l_slips = [
        (stale, "the first block's sum was taken under its own maximum: multiply it by exp(m_old - m_new)"),
        (sum(math.exp(s) for s in scores), "that is the sum of exp(score); subtract the running maximum first"),
        (1.0, "that is the sum of the softmax weights; l is the sum of exp(score - m) before dividing"),
    ]
    steps = (
        ("m", _verdict(title, "m", m_value, m, m_slips if first_max != m else [])),
        ("l", _verdict(title, "l", l_value, sum(math.exp(s - m) for s in scores), l_slips, tol=1e-3)),
    )
    lines, first_error = [title], None
    for step, verdict in steps:
        lines += [f"  {step}: correct"] if verdict.ok else list(verdict.lines[1:])
        first_error = first_error or verdict.first_error
    return Verdict(ok=first_error is None, first_error=first_error, lines=tuple(lines))
