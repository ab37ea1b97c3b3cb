"""The merging-heads chapter: how the heads' outputs are merged back into one d_model-wide vector.

After attention, each of the H heads has produced a (T, Dh) matrix. Four ways to merge them
(:data:`MERGES`), and a control for the experiment (:data:`STRATEGIES` holds all five):

``"concat"``  (the Transformer's choice)   concat(head_1, ..., head_H) · W_O,  W_O: D x D
``"average"``                              mean_i(head_i) · W_up,             W_up: Dh x D
``"weighted"`` (one learned scalar alpha_i) sum_i alpha_i head_i · W_up,  alpha = softmax(logits), logits: H
``"gated"``  (per-token weights gamma_{t,i}) sum_i gamma_{t,i} head_{i,t} · W_up,
                                           gamma_t = softmax(x_t W_gate + b_gate), W_gate: D x H
``"concat_lowrank"`` (the control)         concat(head_1, ..., head_H) · W_down · W_up,  W_down: D x Dh
                                           (W_O of rank Dh: the same Dh-wide bottleneck as averaging)

Heads are numbered 1..H in the text and 0..H-1 in the code.

:class:`MergedMultiHeadAttention` is a drop-in for :class:`mha.MultiHeadAttention` with a ``merge``
argument; with ``merge="concat"`` it *is* that module (a test copies the weights and compares).
:func:`merge_params` and :func:`merge_flops` give each merge's cost in closed form; the tests check
them against the modules (``sum(p.numel() ...)`` and ``torch.utils.flop_counter``).

The averaging merges are concatenation with a constrained W_O: averaging then projecting with W_up
is concatenating then projecting with W_O = [W_up; W_up; ...; W_up] / H (every head's block the same),
a matrix of rank at most Dh (:func:`mha.chapters.merging.merge_folding.equivalent_out_proj`). That is exactly
what averaging loses.

Every merge is a sum over heads, concat(H) · W_O = sum_i H_i · W_O_i with W_O_i the i-th block of Dh
rows of W_O (:func:`sum_of_head_projections`); averaging is the case where every block is W_up / H.

The merges with fixed coefficients, the low-rank concat, the average and the weighted merge, compute
the same family of functions: a fixed Dh x Dh matrix applied to head i before the sum (a block of
W_down, alpha_i·I, I / H) folds into that head's W_V (:func:`fold_into_average`), and blocks
alpha_i·I give the others back (:func:`to_lowrank`). They differ in parameterisation only. Between
them and concatenation, the one difference in what can be computed is the rank of the bottleneck:
Dh for them, D for concatenation. The gated merge is in neither family: on a one-token sequence
concatenation and the fixed merges are affine functions of the token's input, and the gated merge
is not (:func:`affine_deviation`), while its outputs, like averaging's, lie in a Dh-dimensional
space.

:mod:`mha.chapters.merging.merge_training` trains the single-head-limits chapter's model
(:mod:`mha.chapters.heads.task`) with each merge. The
hand-built two-role example is :mod:`mha.chapters.merging.role_heads`; the figures are in
:mod:`mha.chapters.merging.figures`.

Shape legend: B batch, T query length, S key length, D d_model, H heads, Dh head_dim = D / H.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from ...attention import merge_heads, scaled_dot_product_attention, split_heads
from ...checks import check_divisible, check_float_tensor, check_positive_int, check_rank
from ...modules import MultiHeadAttention, combine_masks, resolve_qkv

#: The four merges of the tutorials, in the order the chapter discusses them.
MERGES = ("concat", "average", "weighted", "gated")
#: Every merge :class:`MergedMultiHeadAttention` builds: the four, and the experiment's control,
#: concatenation through a rank-Dh W_O (the same bottleneck as averaging, and the same functions:
#: see :func:`fold_into_average`).
STRATEGIES = ("concat", "concat_lowrank", "average", "weighted", "gated")


def check_merge(merge) -> str:
    """Return ``merge`` if it names a strategy in :data:`STRATEGIES`, else raise a ValueError."""
    if merge not in STRATEGIES:
        raise ValueError(f"merge must be one of {', '.join(map(repr, STRATEGIES))}, found {merge!r}")
    return merge


def _check_heads(heads) -> None:
    check_float_tensor("heads", heads)
    check_rank("heads", heads, 4, "(B, H, T, Dh)")


# --------------------------------------------------------------------------------------------
# One equation each
# --------------------------------------------------------------------------------------------


def average_head_outputs(heads: torch.Tensor) -> torch.Tensor:
    """The element-wise mean of the heads' *outputs* (not of their weights: see
    :func:`mha.average_heads`).

    Shapes:
        heads (B, H, T, Dh) -> returns (B, T, Dh): d_k wide, not d_model.
    """
    _check_heads(heads)
    return heads.mean(dim=1)  # (B, T, Dh)


def mix_heads(heads: torch.Tensor, coefficients: torch.Tensor) -> torch.Tensor:
    """A weighted sum of the heads' outputs, ``sum_h c_h head_h``, per token.

    ``coefficients`` (H,) gives every token the same mix; (B, T, H) gives each token its own.
    Coefficients 1/H make this the average.

    Shapes:
        heads (B, H, T, Dh), coefficients (H,) or (B, T, H) -> returns (B, T, Dh).
    """
    _check_heads(heads)
    check_float_tensor("coefficients", coefficients)
    batch_size, num_heads, seq_len, _ = heads.shape
    if coefficients.dim() == 1:
        coefficients = coefficients.expand(batch_size, seq_len, -1)  # (B, T, H)
    if tuple(coefficients.shape) != (batch_size, seq_len, num_heads):
        raise ValueError(
            f"coefficients must have shape (H,) = ({num_heads},) or (B, T, H) = "
            f"{(batch_size, seq_len, num_heads)}, found {tuple(coefficients.shape)}"
        )
    return torch.einsum("bth,bhtd->btd", coefficients, heads)  # (B,T,Dh)


def sum_of_head_projections(heads: torch.Tensor, out_proj_weight: torch.Tensor) -> torch.Tensor:
    """``sum_i H_i · W_O_i``: each head projected by its own block of W_O, then summed.

    ``out_proj_weight`` is W_O in ``nn.Linear`` layout (D_out x H·Dh); head i's block W_O_i is its
    columns ``i·Dh`` to ``(i+1)·Dh``. The result equals ``merge_heads(heads) @ out_proj_weight.T``:
    concatenating then projecting *is* a sum of per-head projections. With every block equal to
    ``W_up / H`` the sum is the average of the heads projected by ``W_up``.

    Shapes:
        heads (B, H, T, Dh), out_proj_weight (D_out, H*Dh) -> returns (B, T, D_out).
    """
    _check_heads(heads)
    check_float_tensor("out_proj_weight", out_proj_weight)
    num_heads, head_dim = heads.shape[1], heads.shape[3]
    if out_proj_weight.dim() != 2 or out_proj_weight.shape[1] != num_heads * head_dim:
        raise ValueError(
            f"out_proj_weight must have shape (D_out, H*Dh) = (D_out, {num_heads * head_dim}), "
            f"found {tuple(out_proj_weight.shape)}"
        )
    blocks = out_proj_weight.view(out_proj_weight.shape[0], num_heads, head_dim)  # (D_out, H, Dh)
    return torch.einsum("bhtd,ohd->bto", heads, blocks)  # (B, T, D_out), summed over heads h


# --------------------------------------------------------------------------------------------
# The merge modules: forward(heads (B, H, T, Dh), x (B, T, D)) -> (B, T, D)
# --------------------------------------------------------------------------------------------


class ConcatMerge(nn.Module):
    """Concatenate the heads along the features (T x H·Dh = T x D), then W_O (D x D)."""

    def __init__(self, d_model: int, num_heads: int, bias: bool = True):
        super().__init__()
        self.num_heads = num_heads
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def coefficients(self, heads, x):
        """Concatenation mixes nothing before W_O: no per-head coefficients (returns None)."""
        return None

    def forward(self, heads, x):
        concatenated = merge_heads(heads)  # (B, T, H*Dh)
        return self.out_proj(concatenated)  # (B, T, D)


class LowRankConcatMerge(nn.Module):
    """Concatenate, then a W_O of rank at most Dh: down to Dh features (W_down, D x Dh, no bias),
    then up to D (W_up, Dh x D). The control for averaging: the same Dh-wide bottleneck, with the
    map into it a free W_down instead of averaging's [I; I; ...; I] / H. Since each block of W_down
    folds into its head's W_V (:func:`fold_into_average`), it computes the same functions as
    averaging, parameterised differently."""

    def __init__(self, d_model: int, num_heads: int, bias: bool = True):
        super().__init__()
        self.num_heads = num_heads
        self.down = nn.Linear(d_model, d_model // num_heads, bias=False)
        self.out_proj = nn.Linear(d_model // num_heads, d_model, bias=bias)

    def coefficients(self, heads, x):
        """No per-head coefficients (returns None): W_down mixes features, not heads."""
        return None

    def forward(self, heads, x):
        concatenated = merge_heads(heads)  # (B, T, H*Dh) = (B, T, D)
        bottleneck = self.down(concatenated)  # (B, T, Dh)
        return self.out_proj(bottleneck)  # (B, T, D)


class AverageMerge(nn.Module):
    """Average the heads (T x Dh), then an up-projection W_up (Dh x D) back to d_model."""

    def __init__(self, d_model: int, num_heads: int, bias: bool = True):
        super().__init__()
        self.num_heads = num_heads
        self.out_proj = nn.Linear(d_model // num_heads, d_model, bias=bias)

    def coefficients(self, heads, x):
        """1/H for every head and token. Returns (B, T, H)."""
        batch_size, num_heads, seq_len, _ = heads.shape
        return heads.new_full((batch_size, seq_len, num_heads), 1.0 / num_heads)  # (B, T, H)

    def forward(self, heads, x):
        coefficients = self.coefficients(heads, x)  # (B, T, H), all 1/H
        mixed = mix_heads(heads, coefficients)  # (B, T, Dh), the mean
        return self.out_proj(mixed)  # (B, T, D)


class WeightedMerge(AverageMerge):
    """One learned scalar per head, softmax-normalised (positive, summing to 1), then W_up.

    The logits start at zero, so a fresh module is exactly the average.
    """

    def __init__(self, d_model: int, num_heads: int, bias: bool = True):
        super().__init__(d_model, num_heads, bias)
        self.head_logits = nn.Parameter(torch.zeros(num_heads))  # (H,)

    def coefficients(self, heads, x):
        """softmax(logits), the same for every token: (B, T, H)."""
        batch_size, _, seq_len, _ = heads.shape
        weights = F.softmax(self.head_logits, dim=0)  # (H,)
        return weights.expand(batch_size, seq_len, -1)  # (B, T, H)


class GatedMerge(AverageMerge):
    """Per-token weights over the heads, computed from the token's input:
    gamma_t = softmax(x_t W_gate + b_gate).

    W_gate is D x H. A fresh module starts near the average (small random gate logits).
    """

    def __init__(self, d_model: int, num_heads: int, bias: bool = True):
        super().__init__(d_model, num_heads, bias)
        self.gate = nn.Linear(d_model, num_heads, bias=bias)

    def coefficients(self, heads, x):
        """softmax over heads of each query token's gate logits.

        Returns (B, T, H).
        """
        return F.softmax(self.gate(x), dim=-1)  # (B, T, H)


MERGE_CLASSES = {
    "concat": ConcatMerge,
    "concat_lowrank": LowRankConcatMerge,
    "average": AverageMerge,
    "weighted": WeightedMerge,
    "gated": GatedMerge,
}


# --------------------------------------------------------------------------------------------
# The drop-in attention module
# --------------------------------------------------------------------------------------------


class MergedMultiHeadAttention(nn.Module):
    """Multi-head attention with a choice of how the heads are merged.

    Same projections, attention and ``forward`` signature as :class:`mha.MultiHeadAttention`;
    only the last step differs (see the module docstring). ``merge="concat"`` computes exactly
    what ``mha.MultiHeadAttention`` computes (:meth:`from_multi_head` copies its weights).

    Args:
        d_model: D. num_heads: H (D divisible by H).
        merge: one of :data:`STRATEGIES`: ``"concat"``, ``"concat_lowrank"``, ``"average"``,
            ``"weighted"`` or ``"gated"``.
        bias: biases on every projection (W_Q, W_K, W_V, the merge's projection and the gate).
    Attributes:
        q_proj, k_proj, v_proj: D x D ``nn.Linear``. merge_layer: the merge module; its
        ``out_proj`` is W_O (D x D) for concat and W_up (Dh x D) otherwise (concat_lowrank adds
        ``down``, W_down: D x Dh).
    """

    def __init__(self, d_model: int, num_heads: int, merge: str = "concat", bias: bool = True):
        super().__init__()
        self.d_model = check_positive_int("d_model", d_model)
        self.num_heads = check_positive_int("num_heads", num_heads)
        check_divisible("d_model", d_model, "num_heads", num_heads)
        self.merge = check_merge(merge)
        self.head_dim = d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.merge_layer = MERGE_CLASSES[merge](d_model, num_heads, bias=bias)

    def head_outputs(self, query, key=None, value=None, *, mask=None, key_padding_mask=None):
        """Every head's output before the merge, and its weights.

        Shapes:
            query (B, T, D), key/value (B, S, D) (default: query); masks as in
            :class:`mha.MultiHeadAttention` (bool mask True = may attend; key_padding_mask True = padding).
        Returns:
            heads (B, H, T, Dh), weights (B, H, T, S).
        """
        query, key, value = resolve_qkv(query, key, value, self.d_model)
        (batch_size, seq_len, _), key_len = query.shape, key.shape[1]
        mask = combine_masks(mask, key_padding_mask, batch_size, self.num_heads, seq_len, key_len, query.dtype)
        q = split_heads(self.q_proj(query), self.num_heads)  # (B, H, T, Dh)
        k = split_heads(self.k_proj(key), self.num_heads)  # (B, H, S, Dh)
        v = split_heads(self.v_proj(value), self.num_heads)  # (B, H, S, Dh)
        return scaled_dot_product_attention(q, k, v, mask)  # (B, H, T, Dh), (B, H, T, S)

    def forward(self, query, key=None, value=None, *, mask=None, key_padding_mask=None, need_weights=True):
        """Attention, then this module's merge.

        Returns:
            output (B, T, D), weights (B, H, T, S) or None (when ``need_weights`` is false).
        """
        heads, weights = self.head_outputs(query, key, value, mask=mask, key_padding_mask=key_padding_mask)
        output = self.merge_layer(heads, query)  # (B, T, D); the gate reads the query tokens
        return output, (weights if need_weights else None)

    def head_coefficients(self, query, key=None, value=None, *, mask=None, key_padding_mask=None):
        """How much each head counts for each query token: (B, T, H), or None for concat."""
        heads, _ = self.head_outputs(query, key, value, mask=mask, key_padding_mask=key_padding_mask)
        return self.merge_layer.coefficients(heads, query)

    @classmethod
    def from_multi_head(cls, m: MultiHeadAttention, merge: str = "concat") -> MergedMultiHeadAttention:
        """Copy W_Q, W_K, W_V of ``m``; with ``merge="concat"`` copy W_O too (the same function as ``m``).

        For another merge, W_O has no counterpart and the merge layer keeps its fresh weights.
        """
        if not isinstance(m, MultiHeadAttention):
            raise TypeError(f"m must be an mha.MultiHeadAttention, found {type(m).__name__}")
        bias = m.q_proj.bias is not None
        new = cls(m.d_model, m.num_heads, merge=merge, bias=bias).to(m.q_proj.weight)
        for name in ("q_proj", "k_proj", "v_proj"):
            getattr(new, name).load_state_dict(getattr(m, name).state_dict())
        if merge == "concat":
            new.merge_layer.out_proj.load_state_dict(m.out_proj.state_dict())
        return new


# --------------------------------------------------------------------------------------------
# Which functions a merge can compute: the one-token test
# --------------------------------------------------------------------------------------------


def affine_deviation(module: nn.Module, *, num_pairs: int = 256, seed: int = 0) -> float:
    """How far ``module`` is from an affine function of a one-token input.

    On a sequence of one token every head attends to that token alone, so head i returns its value
    ``x W_V_i + b_V_i``: concatenation with W_O, and every merge with fixed coefficients, is then an
    affine function of x, while the gated merge multiplies the heads by ``softmax(x W_gate + b_gate)``.
    An affine f sends the midpoint of two inputs to the midpoint of their outputs, so this returns

        max |f((x + y) / 2) - (f(x) + f(y)) / 2|  /  max |f(x) - f(y)|

    over ``num_pairs`` pairs of one-token inputs x, y drawn from N(0, I) with ``seed``, computed in
    float64 on a CPU copy of the module (``module`` itself is not changed). An affine module gives
    rounding, about 1e-16; 0 for a constant one.

    Args:
        module: a module whose ``forward(x)`` maps x (B, T, D) to ``(output (B, T, D), weights)``,
            with an int attribute ``d_model`` (:class:`MergedMultiHeadAttention`, ``mha.MultiHeadAttention``).
    Returns:
        float >= 0.
    """
    if not isinstance(module, nn.Module) or not isinstance(getattr(module, "d_model", None), int):
        raise TypeError(
            f"module must be an nn.Module with an int d_model (an attention module), found {type(module).__name__}"
        )
    num_pairs = check_positive_int("num_pairs", num_pairs)
    f = copy.deepcopy(module).to("cpu", torch.float64).eval()
    gen = torch.Generator().manual_seed(seed)
    x, y = torch.randn(2, num_pairs, 1, f.d_model, generator=gen, dtype=torch.float64)  # 2 x (B, T=1, D)
    with torch.no_grad():
        fx, fy, fmid = (f(inputs)[0] for inputs in (x, y, (x + y) / 2))  # (B, 1, D) each
    defect = (fmid - (fx + fy) / 2).abs().max().item()
    spread = (fx - fy).abs().max().item()
    return defect / spread if spread > 0 else defect


# --------------------------------------------------------------------------------------------
# Costs in closed form
# --------------------------------------------------------------------------------------------


def merge_params(d_model: int, num_heads: int, merge: str, bias: bool = True) -> int:
    """Parameters of the merge step alone (everything after the heads' outputs).

    concat: D·D (+ D);  concat_lowrank: D·Dh + Dh·D (+ D; W_down has no bias);  average: Dh·D (+ D);
    weighted: Dh·D + H (+ D);  gated: Dh·D + D·H (+ D + H).  ``(+ ...)`` are the biases.

    The mean itself has no parameters; the up-projection that brings Dh back to D does.

    Returns:
        int, equal to ``sum(p.numel() ...)`` of ``MergedMultiHeadAttention(...).merge_layer``.
    """
    d_model = check_positive_int("d_model", d_model)
    num_heads = check_positive_int("num_heads", num_heads)
    check_divisible("d_model", d_model, "num_heads", num_heads)
    check_merge(merge)
    head_dim = d_model // num_heads
    in_features = d_model if merge == "concat" else head_dim
    total = in_features * d_model + (d_model if bias else 0)  # W_O or W_up
    if merge == "concat_lowrank":
        total = d_model * head_dim + head_dim * d_model + (d_model if bias else 0)  # W_down, W_up
    if merge == "weighted":
        total += num_heads  # one logit per head
    if merge == "gated":
        total += d_model * num_heads + (num_heads if bias else 0)  # W_gate, b_gate
    return total


def merged_attention_params(d_model: int, num_heads: int, merge: str, bias: bool = True) -> int:
    """Parameters of a whole :class:`MergedMultiHeadAttention`: W_Q, W_K, W_V (3·D·D (+ 3·D)) plus
    :func:`merge_params`. For concat this equals :func:`mha.attention_params`."""
    qkv = 3 * d_model * d_model + (3 * d_model if bias else 0)
    return qkv + merge_params(d_model, num_heads, merge, bias)


def merge_flops_breakdown(seq_len: int, d_model: int, num_heads: int, merge: str) -> dict:
    """Forward FLOPs of the merge step on one sequence of T tokens, by part.

    Counted as in :func:`mha.attention_flops_breakdown`: multiply-adds of matrix products, 2 FLOPs
    each; biases and the softmax over H gate logits are not counted.

    Returns:
        dict with ``gate`` (2·T·D·H for gated, else 0), ``mix`` (the weighted sum over heads,
        2·T·H·Dh = 2·T·D; 0 for concat; for concat_lowrank, W_down: 2·T·D·Dh), ``project``
        (2·T·D·D for concat, 2·T·Dh·D otherwise) and ``total``.
    """
    seq_len = check_positive_int("seq_len", seq_len)
    d_model = check_positive_int("d_model", d_model)
    num_heads = check_positive_int("num_heads", num_heads)
    check_divisible("d_model", d_model, "num_heads", num_heads)
    check_merge(merge)
    head_dim = d_model // num_heads
    concat = merge == "concat"
    mix = {"concat": 0, "concat_lowrank": 2 * seq_len * d_model * head_dim}.get(merge, 2 * seq_len * d_model)
    parts = {
        "gate": 2 * seq_len * d_model * num_heads if merge == "gated" else 0,
        "mix": mix,
        "project": 2 * seq_len * (d_model if concat else head_dim) * d_model,
    }
    parts["total"] = sum(parts.values())
    return parts


def merge_flops(seq_len: int, d_model: int, num_heads: int, merge: str) -> int:
    """Total forward FLOPs of the merge step (see :func:`merge_flops_breakdown`)."""
    return merge_flops_breakdown(seq_len, d_model, num_heads, merge)["total"]


def merge_cost_table(configs: dict, *, seq_len: int = 512, bias: bool = True, merges=STRATEGIES) -> list[dict]:
    """One row per (configuration, merge): ``config``, ``merge``, ``params``, ``flops``,
    ``layer_params`` (the whole attention layer) and ``params_vs_concat`` (ratio).

    ``configs``: name -> (d_model, num_heads), e.g. ``{"BERT-base": (768, 12)}``.
    """
    rows = []
    for name, (d_model, num_heads) in configs.items():
        concat = merge_params(d_model, num_heads, "concat", bias)
        for merge in merges:
            params = merge_params(d_model, num_heads, merge, bias)
            rows.append(
                {
                    "config": name,
                    "d_model": d_model,
                    "num_heads": num_heads,
                    "merge": merge,
                    "params": params,
                    "flops": merge_flops(seq_len, d_model, num_heads, merge),
                    "layer_params": merged_attention_params(d_model, num_heads, merge, bias),
                    "params_vs_concat": params / concat,
                }
            )
    return rows


#: Real configurations (d_model, num_heads) used in the chapter's cost table.
CONFIGS = {"BERT-base": (768, 12), "BERT-large": (1024, 16), "GPT-2 large": (1280, 20), "GPT-2 XL": (1600, 25)}
