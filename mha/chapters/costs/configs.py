"""Published model shapes and the cost tables of the parameter-analysis chapter, built on :mod:`mha.counting`.

Every number here comes from :func:`mha.attention_params`, :func:`mha.attention_flops_breakdown`
or :func:`mha.kv_cache_bytes`; this module only adds the published configurations (as data),
the parts of a model that are not attention (embeddings, MLPs, norms), tables and the numbers
behind the explorers on top. The tests check each count against ``sum(p.numel() ...)`` of real
modules and each cache size against real :class:`mha.KVCache` tensors. The figures are in
:mod:`mha.chapters.costs.figures`.

Notation: D = d_model, H = num_heads, G = num_kv_heads, Dh = head_dim = D / H, T = seq_len,
L = num_layers, V = vocabulary size, P = learned positions, F = d_ff (MLP width).
"""

from __future__ import annotations

import torch
from torch import nn

from ...checks import check_positive_int
from ...counting import attention_flops_breakdown, attention_params, kv_cache_bytes
from ...modules import GroupedQueryAttention
from .models import CLASSIC_CONFIGS, LLAMA2_CONFIGS, ModelConfig, config  # noqa: F401 (the chapter's data)
from .tables import format_bytes, format_table  # noqa: F401 (the chapter prints with configs.format_*)

#: Bytes per stored element for the precisions the chapter compares.
BYTES_PER_ELEMENT = {"fp32": 4, "fp16": 2, "bf16": 2, "8-bit": 1}

#: One GiB (2**30 bytes). Every size in this chapter is binary (KiB, MiB, GiB).
GIB = 2**30


# ---------------------------------------------------------------------------------------------
# Parameters
# ---------------------------------------------------------------------------------------------


def attention_params_by_matrix(
    d_model: int, num_heads: int, num_kv_heads: int | None = None, bias: bool = True
) -> dict:
    """Parameters of one attention layer by matrix: ``W_Q, W_K, W_V, W_O, biases, total``.

    W_Q and W_O are D x D, W_K and W_V are D x (G·Dh); ``total`` equals
    :func:`mha.attention_params`.
    """
    total = attention_params(d_model, num_heads, num_kv_heads, bias)
    kv_heads = num_heads if num_kv_heads is None else num_kv_heads
    kv_dim = kv_heads * (d_model // num_heads)
    parts = {"W_Q": d_model * d_model, "W_K": d_model * kv_dim, "W_V": d_model * kv_dim, "W_O": d_model * d_model}
    parts["biases"] = total - sum(parts.values())
    parts["total"] = total
    return parts


def params_fixed_head_dim(d_model: int, num_heads: int, head_dim: int, bias: bool = True) -> int:
    """Parameters of multi-head attention whose heads have a fixed width ``head_dim``.

    H heads of width Dh give W_Q, W_K, W_V of D x (H·Dh) and W_O of (H·Dh) x D:
    4·H·Dh·D weights, plus 3·H·Dh + D biases. This grows linearly in H. When Dh = D / H it is
    :func:`mha.attention_params` (4·D² + 4·D), which does not depend on H.
    """
    d_model = check_positive_int("d_model", d_model)
    num_heads = check_positive_int("num_heads", num_heads)
    head_dim = check_positive_int("head_dim", head_dim)
    inner = num_heads * head_dim
    return 4 * inner * d_model + ((3 * inner + d_model) if bias else 0)


def tutorial_single_head_count(d_model: int, num_heads: int) -> int:
    """A common count (found in several tutorials), "≈737K" for BERT-base: W_Q, W_K, W_V of ONE
    head plus the full W_O.

    3·D·Dh + D². It is neither one head's share nor the layer's total; kept to show the mistake.
    """
    head_dim = d_model // num_heads
    return 3 * d_model * head_dim + d_model * d_model


def tutorial_kv_params(d_model: int, num_heads: int, num_kv_heads: int) -> int:
    """A common MQA/GQA count (found in several tutorials): (H + 2G)·Dh·D, which leaves out W_O
    (H·Dh·D = D²)."""
    head_dim = d_model // num_heads
    return (num_heads + 2 * num_kv_heads) * head_dim * d_model


def layer_params(cfg: ModelConfig) -> int:
    """Parameters of one transformer block of ``cfg`` (attention + MLP + norms)."""
    d, f = cfg.d_model, cfg.d_ff
    attention = attention_params(d, cfg.num_heads, cfg.num_kv_heads, cfg.bias)
    if cfg.family == "llama":
        return attention + 3 * d * f + 2 * d  # gate, up, down (no biases); two RMSNorm weights
    return attention + (d * f + f) + (f * d + d) + 2 * (2 * d)  # two Linear layers; two LayerNorms


def embedding_params(cfg: ModelConfig) -> int:
    """Parameters outside the blocks: embeddings, final norm, pooler or untied output layer."""
    d = cfg.d_model
    if cfg.family == "bert":
        # word + position + 2 token types, embedding LayerNorm; the pooler is a D x D Linear
        return (cfg.vocab_size + cfg.max_positions + 2) * d + 2 * d + (d * d + d)
    if cfg.family == "gpt2":
        return (cfg.vocab_size + cfg.max_positions) * d + 2 * d  # output layer tied to wte
    return 2 * cfg.vocab_size * d + d  # embedding + untied output layer; final RMSNorm


def total_params(cfg: ModelConfig) -> int:
    """All parameters: ``embedding_params(cfg) + num_layers · layer_params(cfg)`` (exact)."""
    return embedding_params(cfg) + cfg.num_layers * layer_params(cfg)


def build_skeleton(cfg: ModelConfig, device="meta") -> nn.Module:
    """Torch modules with the parameter shapes of ``cfg``, for counting with ``sum(p.numel())``.

    On the ``meta`` device no memory is allocated, so even a 70B-parameter skeleton is instant.
    The blocks of BERT and GPT-2 are ``nn.TransformerEncoderLayer`` (same parameters: attention,
    two Linear layers, two LayerNorms); Llama's are ``mha.GroupedQueryAttention`` without biases,
    three bias-free Linear layers and two ``nn.RMSNorm``. An independent check of
    :func:`total_params`, built from torch's own modules rather than from formulas.
    """
    d, f, h = cfg.d_model, cfg.d_ff, cfg.num_heads
    with torch.device(device):
        parts = nn.ModuleDict()
        if cfg.family == "llama":
            parts["embed"] = nn.Embedding(cfg.vocab_size, d)
            parts["blocks"] = nn.ModuleList(
                nn.ModuleDict(
                    {
                        "attn": GroupedQueryAttention(d, h, cfg.kv_heads, bias=False),
                        "gate": nn.Linear(d, f, bias=False),
                        "up": nn.Linear(d, f, bias=False),
                        "down": nn.Linear(f, d, bias=False),
                        "norm1": nn.RMSNorm(d),
                        "norm2": nn.RMSNorm(d),
                    }
                )
                for _ in range(cfg.num_layers)
            )
            parts["norm"] = nn.RMSNorm(d)
            parts["lm_head"] = nn.Linear(d, cfg.vocab_size, bias=False)
            return parts
        parts["tokens"] = nn.Embedding(cfg.vocab_size, d)
        parts["positions"] = nn.Embedding(cfg.max_positions, d)
        parts["blocks"] = nn.ModuleList(nn.TransformerEncoderLayer(d, h, f) for _ in range(cfg.num_layers))
        if cfg.family == "bert":
            parts["token_types"] = nn.Embedding(2, d)
            parts["embed_norm"] = nn.LayerNorm(d)
            parts["pooler"] = nn.Linear(d, d)
        else:
            parts["final_norm"] = nn.LayerNorm(d)
    return parts


def param_table(configs=CLASSIC_CONFIGS) -> list[dict]:
    """One row per model: shape, attention parameters per layer and per stack, share of the total.

    Columns: ``model, d_model, heads, head_dim, layers, attn_per_layer, attn_stack, total,
    attn_share`` (fraction of all parameters that are attention projections).
    """
    rows = []
    for cfg in configs:
        per_layer = attention_params(cfg.d_model, cfg.num_heads, cfg.num_kv_heads, cfg.bias)
        total = total_params(cfg)
        rows.append(
            {
                "model": cfg.name,
                "d_model": cfg.d_model,
                "heads": cfg.num_heads,
                "head_dim": cfg.head_dim,
                "layers": cfg.num_layers,
                "attn_per_layer": per_layer,
                "attn_stack": cfg.num_layers * per_layer,
                "total": total,
                "attn_share": cfg.num_layers * per_layer / total,
            }
        )
    return rows


# ---------------------------------------------------------------------------------------------
# FLOPs
# ---------------------------------------------------------------------------------------------


def flops_split(seq_len: int, d_model: int, num_heads: int, num_kv_heads: int | None = None) -> dict:
    """Forward FLOPs split into ``projections`` (∝ T·D²) and ``attention`` (∝ T²·D), and ``total``."""
    parts = attention_flops_breakdown(seq_len, d_model, num_heads, num_kv_heads)
    projections = parts["q_proj"] + parts["kv_proj"] + parts["out_proj"]
    attention = parts["scores"] + parts["weighted_sum"]
    return {"projections": projections, "attention": attention, "total": parts["total"]}


def crossover_seq_len(d_model: int, num_heads: int, num_kv_heads: int | None = None) -> float:
    """The T at which attention FLOPs (4·T²·D) equal projection FLOPs.

    Projections cost c·T with c = their FLOPs for one token; attention costs 4·D·T², so they
    meet at T* = c / (4·D). For multi-head attention c = 8·D² and T* = 2·D; with G KV heads
    c = 4·D² + 4·D·G·Dh and T* = D + G·Dh.
    """
    one_token = flops_split(1, d_model, num_heads, num_kv_heads)
    return one_token["projections"] / one_token["attention"]


def block_flops_split(seq_len: int, cfg: ModelConfig) -> dict:
    """Forward FLOPs of one whole block of ``cfg`` on one sequence: attention and its MLP.

    Returns:
        dict with ``projections`` (Q, K, V, O: ∝ T·D²), ``mlp`` (2 matrices of D x F, or 3 for
        Llama's SwiGLU: ∝ T·D·F), ``linear`` (their sum), ``attention`` (4·T²·D, the full T x T
        scores of a non-causal layer) and ``total``.
    """
    split = flops_split(seq_len, cfg.d_model, cfg.num_heads, cfg.num_kv_heads)
    matrices = 3 if cfg.family == "llama" else 2
    mlp = matrices * 2 * seq_len * cfg.d_model * cfg.d_ff
    linear = split["projections"] + mlp
    return {**split, "mlp": mlp, "linear": linear, "total": linear + split["attention"]}


def block_crossover_seq_len(cfg: ModelConfig) -> float:
    """The T at which a whole block's attention FLOPs equal its linear layers' (projections + MLP).

    With a 4·D MLP (BERT, GPT-2) the linear layers cost 8·T·D² + 16·T·D² = 24·T·D², so the
    crossover moves from 2·D (attention layer alone, :func:`crossover_seq_len`) to 6·D.
    """
    one_token = block_flops_split(1, cfg)
    return one_token["linear"] / one_token["attention"]


def flop_counter_mode():
    """``torch.utils.flop_counter.FlopCounterMode``, imported without its import-time log line.

    A CUDA build of torch without triton logs "triton not found; flop counting will not work for
    triton kernels" to stderr when the module is first imported; the course counts no triton kernel,
    and a chapter's output must not change with how the reader's torch was built.
    """
    import logging

    logger = logging.getLogger("torch.utils.flop_counter")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        from torch.utils.flop_counter import FlopCounterMode
    finally:
        logger.setLevel(level)
    return FlopCounterMode


def count_forward_flops(module: nn.Module, *args, **kwargs) -> int:
    """FLOPs of ``module(*args, **kwargs)`` as counted by ``torch.utils.flop_counter.FlopCounterMode``.

    The counter sees matrix multiplications only (2 FLOPs per multiply-add), not additions of
    biases, the scaling or the softmax: the same convention as :func:`mha.attention_flops`
    (:func:`score_elementwise_flops` counts the scaling and softmax). Fused attention
    runs on PyTorch's math kernel here (its matrix products are counted; the CPU flash kernel's
    are not). Call attention modules with ``need_weights=True`` and keep gradients on: under
    ``torch.no_grad()`` an ``nn.MultiheadAttention`` in eval mode takes a fused "fast path" that
    the counter does not see.
    """
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH), flop_counter_mode()(display=False) as counter:
        module(*args, **kwargs)
    return counter.get_total_flops()


#: FLOPs per attention score of the element-wise work that the matrix-product count leaves out:
#: the scaling (1 multiply) and a numerically stable softmax (max, subtract, exp, sum, divide: 5).
#: A mask is a select (``masked_fill``), no arithmetic, so it adds none.
FLOPS_PER_SCORE = 6


def score_elementwise_flops(seq_len: int, num_heads: int, batch_size: int = 1) -> int:
    """FLOPs of the scaling and softmax of self-attention: :data:`FLOPS_PER_SCORE` per score.

    Each of the H heads has its own T x T scores, so this work is 6·H·T² (times the batch): unlike
    the matrix products of :func:`mha.attention_flops`, it grows with the number of heads. A
    single head of full width does it over T² scores.
    """
    seq_len = check_positive_int("seq_len", seq_len)
    num_heads = check_positive_int("num_heads", num_heads)
    return FLOPS_PER_SCORE * check_positive_int("batch_size", batch_size) * num_heads * seq_len * seq_len


#: The element-wise arithmetic and reductions that the attention of :mod:`mha` runs on its scores
#: (``masked_fill``, a select, and the copies and views are left out).
_SCORE_OPS = ("mul", "div", "sub", "add", "exp", "amax", "sum")


def count_score_elementwise(module: nn.Module, x: torch.Tensor, **kwargs) -> int:
    """Score elements read by element-wise arithmetic and reductions in ``module(x, **kwargs)``.

    Watches every aten operation (a ``TorchDispatchMode``) and, for each one in ``_SCORE_OPS``,
    counts the elements of its inputs whose last two dimensions are the (T, T) of the scores
    (self-attention on ``x`` of shape (B, T, D)). For the modules of :mod:`mha` this is
    :func:`score_elementwise_flops` (one element read per FLOP): a measured check that the
    scaling and softmax run over H·T² scores, not T². Choose T different from Dh and D.
    """
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    seq_len = x.shape[1]
    counted = 0

    class ScoreCounter(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            nonlocal counted
            if func.overloadpacket.__name__ in _SCORE_OPS:
                inputs = [a for a in tree_flatten(args)[0] if isinstance(a, torch.Tensor)]
                counted += sum(a.numel() for a in inputs if a.dim() >= 2 and a.shape[-2:] == (seq_len, seq_len))
            return func(*args, **(kwargs or {}))

    with torch.no_grad(), ScoreCounter():
        module(x, **kwargs)
    return counted


# ---------------------------------------------------------------------------------------------
# KV cache
# ---------------------------------------------------------------------------------------------


def cache_bytes_per_token(cfg: ModelConfig, bytes_per_element: int = 2) -> int:
    """KV-cache bytes one token adds across all layers of ``cfg`` (batch 1)."""
    return kv_cache_bytes(1, 1, cfg.num_layers, cfg.kv_heads, cfg.head_dim, bytes_per_element)


def cache_matches_weights_tokens(cfg: ModelConfig) -> float:
    """Cached tokens (batch x context) at which the KV cache of ``cfg`` holds as many bytes as its weights.

    Every decoding step reads all the weights and the whole cache, so below this many tokens the
    weights are most of the bytes and above it the cache is. The element size cancels out (cache
    and weights in the same precision): ``total_params(cfg) / (2 · L · G · Dh)``.
    """
    return total_params(cfg) / cache_bytes_per_token(cfg, 1)


def tutorial_cache_elements(batch_size: int, seq_len: int, d_model: int) -> int:
    """A common cache size (found in several tutorials), 2·b·d_model·L: **elements** (not bytes) of
    ONE layer's multi-head KV cache."""
    return 2 * batch_size * d_model * seq_len


def max_context(
    budget_bytes: int,
    num_layers: int,
    num_kv_heads: int,
    head_dim: int,
    bytes_per_element: int = 2,
    batch_size: int = 1,
) -> int:
    """The longest sequence whose KV cache fits in ``budget_bytes`` (0 if not even one token)."""
    budget_bytes = check_positive_int("budget_bytes", budget_bytes)
    per_token = kv_cache_bytes(batch_size, 1, num_layers, num_kv_heads, head_dim, bytes_per_element)
    return budget_bytes // per_token


def kv_cache_table(
    configs=LLAMA2_CONFIGS, seq_lens=(4096, 32768), precisions=("fp16", "8-bit"), batch_size: int = 1
) -> list[dict]:
    """One row per (model, context, precision): ``model, kv_heads, seq_len, precision, bytes``."""
    rows = []
    for cfg in configs:
        for seq_len in seq_lens:
            for precision in precisions:
                size = kv_cache_bytes(
                    batch_size, seq_len, cfg.num_layers, cfg.kv_heads, cfg.head_dim, BYTES_PER_ELEMENT[precision]
                )
                rows.append(
                    {
                        "model": cfg.name,
                        "kv_heads": cfg.kv_heads,
                        "seq_len": seq_len,
                        "precision": precision,
                        "bytes": size,
                    }
                )
    return rows


def divisors(n: int) -> list[int]:
    """The divisors of ``n`` in increasing order (the valid numbers of KV heads for H = n)."""
    n = check_positive_int("n", n)
    return [g for g in range(1, n + 1) if n % g == 0]


def gqa_sweep(
    d_model: int,
    num_heads: int,
    num_layers: int,
    seq_len: int,
    bytes_per_element: int = 2,
    batch_size: int = 1,
    bias: bool = False,
) -> list[dict]:
    """From MQA (g = 1) to MHA (g = H): ``kv_heads, params_per_layer, cache_bytes`` for every valid g."""
    head_dim = d_model // num_heads
    return [
        {
            "kv_heads": g,
            "params_per_layer": attention_params(d_model, num_heads, g, bias),
            "cache_bytes": kv_cache_bytes(batch_size, seq_len, num_layers, g, head_dim, bytes_per_element),
        }
        for g in divisors(num_heads)
    ]


def calculator(
    d_model: int,
    num_heads: int,
    num_kv_heads: int,
    num_layers: int,
    seq_len: int,
    batch_size: int = 1,
    bytes_per_element: int = 2,
    bias: bool = False,
) -> dict:
    """Everything the chapter's calculator shows for one setting.

    Returns:
        dict with ``head_dim``, ``params_per_layer``, ``params_stack``, ``flops_per_layer``
        (the matrix products of one layer's forward pass over the whole batch: ``batch_size``
        sequences of ``seq_len`` tokens), ``projection_flops`` and ``attention_flops`` (its two
        parts, also for the whole batch), ``crossover_seq_len``, ``cache_bytes`` (whole stack,
        whole batch, ``seq_len`` tokens) and ``cache_bytes_mha`` (the same with G = H).
    """
    per_layer = attention_params(d_model, num_heads, num_kv_heads, bias)
    batch_size = check_positive_int("batch_size", batch_size)
    split = flops_split(seq_len, d_model, num_heads, num_kv_heads)
    head_dim = d_model // num_heads
    return {
        "head_dim": head_dim,
        "params_per_layer": per_layer,
        "params_stack": num_layers * per_layer,
        "flops_per_layer": batch_size * split["total"],
        "projection_flops": batch_size * split["projections"],
        "attention_flops": batch_size * split["attention"],
        "crossover_seq_len": crossover_seq_len(d_model, num_heads, num_kv_heads),
        "cache_bytes": kv_cache_bytes(batch_size, seq_len, num_layers, num_kv_heads, head_dim, bytes_per_element),
        "cache_bytes_mha": kv_cache_bytes(batch_size, seq_len, num_layers, num_heads, head_dim, bytes_per_element),
    }


#: The numbers behind the KV explorer (its controls and frames are in mha.chapters.costs.figures).
#: The model the KV explorer varies: Llama 2 7B's H = 32 query heads of width 128 (d_model = 4096),
#: trained with 4,096 tokens; a 24 GiB cache budget.
KV_EXPLORER_MODEL = {"num_heads": 32, "head_dim": 128, "budget_bytes": 24 * GIB, "train_context": 4096}


def kv_explorer_values(num_kv_heads: int, num_layers: int, batch_size: int, precision: str) -> dict:
    """Numbers behind a KV explorer frame: ``per_token`` bytes, ``max_context`` in the budget,
    ``at_4k`` and ``at_32k`` bytes."""
    m = KV_EXPLORER_MODEL
    size = BYTES_PER_ELEMENT[precision]
    args = (num_layers, num_kv_heads, m["head_dim"], size)
    return {
        "per_token": kv_cache_bytes(batch_size, 1, *args),
        "max_context": max_context(m["budget_bytes"], *args, batch_size=batch_size),
        "at_4k": kv_cache_bytes(batch_size, 4096, *args),
        "at_32k": kv_cache_bytes(batch_size, 32768, *args),
    }
