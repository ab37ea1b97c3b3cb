"""``mha``: multi-head attention, the code behind every chapter of the course.

Three layers, each importing only from the ones below it:

* the core, in this package: ``attention`` (the functions), ``modules`` (the layers),
  ``fused`` (the fast path), ``kv_cache``, ``counting``, ``encoder``, ``bert``, ``device``,
  ``checks``;
* ``mha.chapters``: each chapter's experiment, worked example and tables (data only);
* ``mha.viz``: the book's plotting style, every figure and the interactive explorers.

Importing ``mha`` has no side effects and needs no Jupyter, network or GPU; it imports neither
matplotlib nor ipywidgets.
"""

from .attention import (
    average_heads,
    causal_mask,
    entropy_bits,
    masked_softmax,
    merge_heads,
    scaled_dot_product_attention,
    split_heads,
)
from .counting import attention_flops, attention_flops_breakdown, attention_params, count_params, kv_cache_bytes
from .device import get_device
from .kv_cache import KVCache
from .modules import (
    AttentionHead,
    FusedMultiHeadAttention,
    GroupedQueryAttention,
    LoopedMultiHeadAttention,
    MultiHeadAttention,
    SingleHeadAttention,
)

# Modules and names that load on first use (``mha.chapters``, ``mha.viz``, ``mha.bert``,
# ``mha.worked_example``, ...), so that ``import mha`` stays light.
_SUBMODULES = {"bert": "bert", "chapters": "chapters", "encoder": "encoder", "viz": "viz"}
_LAZY_NAMES = {"worked_example": "chapters.worked_example.worked", "EncoderLayer": "encoder"}


def __getattr__(name):
    import importlib

    if name in _SUBMODULES:
        return importlib.import_module(f".{_SUBMODULES[name]}", __name__)
    if name in _LAZY_NAMES:
        return getattr(importlib.import_module(f".{_LAZY_NAMES[name]}", __name__), name)
    raise AttributeError(f"module 'mha' has no attribute {name!r}")


__all__ = [
    "AttentionHead",
    "EncoderLayer",
    "FusedMultiHeadAttention",
    "GroupedQueryAttention",
    "KVCache",
    "LoopedMultiHeadAttention",
    "MultiHeadAttention",
    "SingleHeadAttention",
    "attention_flops",
    "attention_flops_breakdown",
    "attention_params",
    "average_heads",
    "causal_mask",
    "count_params",
    "entropy_bits",
    "get_device",
    "kv_cache_bytes",
    "masked_softmax",
    "merge_heads",
    "scaled_dot_product_attention",
    "split_heads",
]
