"""A key/value cache for incremental (token by token) decoding."""

from __future__ import annotations

import torch

from .checks import check_float_tensor, check_positive_int


class KVCache:
    """Preallocated keys and values of the tokens seen so far, for one attention layer.

    Decoding one token at a time, each new query needs the keys and values of every earlier
    token; the cache keeps them instead of recomputing them. Its size is exactly
    ``mha.kv_cache_bytes(batch_size, max_seq_len, 1, num_kv_heads, head_dim, element_size)``.

    Shapes:
        keys, values: (B, G, max_seq_len, Dh); ``append`` takes (B, G, T_new, Dh) and returns
        the filled part, (B, G, S, Dh) with S = ``length``.
    """

    def __init__(self, batch_size, max_seq_len, num_kv_heads, head_dim, *, dtype=torch.float32, device=None):
        shape = (
            check_positive_int("batch_size", batch_size),
            check_positive_int("num_kv_heads", num_kv_heads),
            check_positive_int("max_seq_len", max_seq_len),
            check_positive_int("head_dim", head_dim),
        )
        self.keys = torch.zeros(shape, dtype=dtype, device=device)  # (B, G, max_seq_len, Dh)
        self.values = torch.zeros(shape, dtype=dtype, device=device)  # (B, G, max_seq_len, Dh)
        self.length = 0

    @property
    def max_seq_len(self) -> int:
        return self.keys.shape[2]

    @property
    def nbytes(self) -> int:
        """Bytes held by the cache's key and value tensors."""
        return self.keys.numel() * self.keys.element_size() + self.values.numel() * self.values.element_size()

    def append(self, k, v):
        """Store the new keys/values; return all keys and values so far, (B, G, S, Dh) each."""
        check_float_tensor("k", k)
        check_float_tensor("v", v)
        batch, heads, _, head_dim = self.keys.shape
        expected = (batch, heads, k.shape[2] if k.dim() == 4 else -1, head_dim)
        for name, x in (("k", k), ("v", v)):
            if x.dim() != 4 or tuple(x.shape) != expected:
                raise ValueError(
                    f"{name} must have shape (B, G, T_new, Dh) = {expected[:2]} + (T_new, {head_dim}) "
                    f"matching the cache, found {tuple(x.shape)}"
                )
        new_len = k.shape[2]
        if self.length + new_len > self.max_seq_len:
            raise ValueError(
                f"the cache holds max_seq_len={self.max_seq_len} tokens; it has {self.length} and "
                f"{new_len} more do not fit"
            )
        end = self.length + new_len
        self.keys[:, :, self.length : end] = k
        self.values[:, :, self.length : end] = v
        self.length = end
        return self.keys[:, :, :end], self.values[:, :, :end]  # (B, G, S, Dh)

    def reset(self) -> None:
        """Forget every stored token (the memory stays allocated)."""
        self.length = 0
