"""``mha``: multi-head attention, the code behind every chapter of the course.

Importing it has no side effects and needs no Jupyter, network or GPU. Plotting lives in
``mha.plotting`` and interactive explorers in ``mha.widgets`` (imported on demand).
"""
from .attention import (
    average_heads, causal_mask, masked_softmax, merge_heads, scaled_dot_product_attention, split_heads,
)
from .counting import attention_flops, attention_flops_breakdown, attention_params, kv_cache_bytes
from .device import get_device
from .kv_cache import KVCache
from .modules import (
    AttentionHead, GroupedQueryAttention, LoopedMultiHeadAttention, MultiHeadAttention, SingleHeadAttention,
)

# Chapter modules load on first use (``mha.experiments``, ``mha.widgets``, ...), so that
# ``import mha`` stays light and never imports matplotlib or ipywidgets.
_SUBMODULES = {
    "configs", "encoder", "experiments", "merging", "perf", "plotting", "pretrained", "scaling",
    "single_head", "softmax_demo", "widgets", "worked",
}
_LAZY_NAMES = {"worked_example": "worked", "EncoderLayer": "encoder"}


def __getattr__(name):
    import importlib

    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    if name in _LAZY_NAMES:
        return getattr(importlib.import_module(f".{_LAZY_NAMES[name]}", __name__), name)
    raise AttributeError(f"module 'mha' has no attribute {name!r}")


__all__ = [
    "AttentionHead", "EncoderLayer", "GroupedQueryAttention", "KVCache", "LoopedMultiHeadAttention", "MultiHeadAttention",
    "SingleHeadAttention", "attention_flops", "attention_flops_breakdown", "attention_params",
    "average_heads", "causal_mask", "get_device", "kv_cache_bytes", "masked_softmax", "merge_heads",
    "scaled_dot_product_attention", "split_heads",
]
