"""A Transformer encoder layer built around :class:`mha.MultiHeadAttention`.

Post-norm (the original Transformer, BERT, and the layer many tutorials build)::

    x = norm1(x + dropout(attn(x)))
    x = norm2(x + dropout(ff(x)))          ff(x) = linear2(dropout(act(linear1(x))))

Pre-norm (``norm_first=True``, GPT-2 and most recent models)::

    x = x + dropout(attn(norm1(x)))
    x = x + dropout(ff(norm2(x)))

The residual ``x + ...`` lets each sub-layer learn a *change* to its input rather than a
replacement; the LayerNorm keeps every token vector at zero mean and unit variance (before its
learned gain and bias), so the scale of the activations does not drift from layer to layer.

Parameter names follow ``torch.nn.TransformerEncoderLayer`` (``self_attn``, ``linear1``,
``linear2``, ``norm1``, ``norm2``), and :meth:`EncoderLayer.from_torch` copies its weights.

Shape legend: B batch, T sequence length, D d_model, H heads, F d_ff.
"""

from __future__ import annotations

import numbers

import torch
import torch.nn.functional as F
from torch import nn

from .checks import check_float_tensor, check_positive_int, check_rank
from .modules import MultiHeadAttention

#: Activations the feed-forward block accepts, by name. "gelu" is the exact (erf) GELU,
#: as in ``nn.TransformerEncoderLayer(activation="gelu")`` and BERT.
ACTIVATIONS = {"gelu": F.gelu, "relu": F.relu}


class EncoderLayer(nn.Module):
    """Self-attention and a feed-forward block, each wrapped in a residual and a LayerNorm.

    Args:
        d_model: D, the width of the token vectors.
        num_heads: H (D must be divisible by H).
        d_ff: F, the hidden width of the feed-forward block (often 4·D).
        dropout: dropout after attention, inside and after the feed-forward block, and on the
            attention weights (as ``nn.TransformerEncoderLayer``); active only in training.
        activation: "gelu" (exact, erf-based) or "relu".
        norm_first: False for post-norm (LayerNorm after each residual add), True for pre-norm.
        layer_norm_eps: the epsilon of both LayerNorms.
        bias: biases on every linear layer and LayerNorm.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        activation: str = "gelu",
        norm_first: bool = False,
        layer_norm_eps: float = 1e-5,
        bias: bool = True,
    ):
        super().__init__()
        d_model = check_positive_int("d_model", d_model)
        d_ff = check_positive_int("d_ff", d_ff)
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, found {activation!r}")
        if not isinstance(norm_first, bool):
            raise TypeError(f"norm_first must be a bool, found {type(norm_first).__name__}")
        if isinstance(layer_norm_eps, bool) or not isinstance(layer_norm_eps, numbers.Real) or not layer_norm_eps > 0:
            raise ValueError(f"layer_norm_eps must be a positive float, found {layer_norm_eps!r}")
        self.d_model, self.d_ff = d_model, d_ff
        self.activation_name = activation
        self.activation = ACTIVATIONS[activation]
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, bias=bias, dropout=dropout)
        self.linear1 = nn.Linear(d_model, d_ff, bias=bias)
        self.dropout = nn.Dropout(dropout)  # inside the feed-forward block
        self.linear2 = nn.Linear(d_ff, d_model, bias=bias)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.dropout1 = nn.Dropout(dropout)  # on the attention sub-layer's output
        self.dropout2 = nn.Dropout(dropout)  # on the feed-forward sub-layer's output

    def feed_forward(self, x: torch.Tensor) -> torch.Tensor:
        """The position-wise feed-forward block, applied to every token independently.

        Shapes: x (B, T, D) -> returns (B, T, D).
        """
        hidden = self.activation(self.linear1(x))  # (B, T, F)
        return self.linear2(self.dropout(hidden))  # (B, T, D)

    def _attention(self, x, mask, key_padding_mask, need_weights):
        out, weights = self.self_attn(
            x, mask=mask, key_padding_mask=key_padding_mask, need_weights=need_weights
        )  # (B, T, D), (B, H, T, T)|None
        return self.dropout1(out), weights

    def forward(self, x, *, mask=None, key_padding_mask=None, need_weights=False):
        """Run the layer on a batch of token vectors.

        Args:
            x: the token vectors.
            mask: bool, **True = may attend** (the course's and ``F.scaled_dot_product_attention``'s
                convention; ``nn.TransformerEncoderLayer``'s bool ``src_mask`` means the opposite),
                or an additive float mask; broadcastable to (B, H, T, T).
            key_padding_mask: bool (B, T), **True = this token is padding** (as in PyTorch).
            need_weights: also return the per-head attention weights.

        Shapes:
            x (B, T, D).
        Returns:
            output (B, T, D), weights (B, H, T, T) or None.
        """
        check_float_tensor("x", x)
        check_rank("x", x, 3, "(B, T, D)")
        if self.norm_first:
            attn_out, weights = self._attention(self.norm1(x), mask, key_padding_mask, need_weights)
            x = x + attn_out  # (B, T, D): the residual adds a change to x
            x = x + self.dropout2(self.feed_forward(self.norm2(x)))  # (B, T, D)
        else:
            attn_out, weights = self._attention(x, mask, key_padding_mask, need_weights)
            x = self.norm1(x + attn_out)  # (B, T, D)
            x = self.norm2(x + self.dropout2(self.feed_forward(x)))  # (B, T, D)
        return x, weights

    @classmethod
    def from_torch(cls, layer: nn.TransformerEncoderLayer) -> EncoderLayer:
        """A copy of ``torch.nn.TransformerEncoderLayer`` (same weights, dtype and device).

        The copy is always batch first; call it with (B, T, D) whatever ``layer.batch_first`` is.
        """
        if not isinstance(layer, nn.TransformerEncoderLayer):
            raise TypeError(f"layer must be a torch.nn.TransformerEncoderLayer, found {type(layer).__name__}")
        kind = getattr(layer, "activation_relu_or_gelu", 0)
        if kind not in (1, 2):
            raise ValueError("layer.activation must be relu or gelu (as a string or F.relu/F.gelu)")
        attn = layer.self_attn
        new = cls(
            attn.embed_dim,
            attn.num_heads,
            layer.linear1.out_features,
            dropout=layer.dropout.p,
            activation="relu" if kind == 1 else "gelu",
            norm_first=layer.norm_first,
            layer_norm_eps=layer.norm1.eps,
            bias=layer.linear1.bias is not None,
        )
        new = new.to(layer.linear1.weight)
        new.self_attn = MultiHeadAttention.from_torch(attn)
        for name in ("linear1", "linear2", "norm1", "norm2"):
            getattr(new, name).load_state_dict(getattr(layer, name).state_dict())
        return new.train(layer.training)

    def to_torch(self, batch_first: bool = True) -> nn.TransformerEncoderLayer:
        """A ``torch.nn.TransformerEncoderLayer`` with the same weights."""
        ref = self.linear1.weight
        layer = nn.TransformerEncoderLayer(
            self.d_model,
            self.self_attn.num_heads,
            self.d_ff,
            dropout=self.dropout.p,
            activation=self.activation_name,
            layer_norm_eps=self.norm1.eps,
            batch_first=batch_first,
            norm_first=self.norm_first,
            bias=self.linear1.bias is not None,
            device=ref.device,
            dtype=ref.dtype,
        )
        layer.self_attn = self.self_attn.to_torch(batch_first=batch_first)
        for name in ("linear1", "linear2", "norm1", "norm2"):
            getattr(layer, name).load_state_dict(getattr(self, name).state_dict())
        return layer.train(self.training)
