"""Chapter 5: how the heads' outputs are merged back into one d_model-wide vector.

After attention, each of the H heads has produced a (T, Dh) matrix. Four ways to merge them:

``"concat"``  (the Transformer's choice)   concat(head_1, ..., head_H) · W_O,  W_O: D x D
``"average"``                              mean_h(head_h) · W_up,             W_up: Dh x D
``"weighted"`` (one learned scalar a_h)    sum_h a_h head_h · W_up,   a = softmax(logits), logits: H
``"gated"``  (per-token weights g_{t,h})   sum_h g_{t,h} head_{t,h} · W_up,  g_t = softmax(x_t W_g), W_g: D x H

:class:`MergedMultiHeadAttention` is a drop-in for :class:`mha.MultiHeadAttention` with a ``merge``
argument; with ``merge="concat"`` it *is* that module (a test copies the weights and compares).
:func:`merge_params` and :func:`merge_flops` give each merge's cost in closed form; the tests check
them against the modules (``sum(p.numel() ...)`` and ``torch.utils.flop_counter``).

The averaging merges are concatenation with a constrained W_O: averaging then projecting with W_up
is concatenating then projecting with W_O = [W_up; W_up; ...; W_up] / H (every head's block the same),
a matrix of rank at most Dh (:func:`equivalent_out_proj`). That is exactly what averaging loses.

:func:`merge_experiment` trains chapter 1's model (:mod:`mha.chapters.task`) with each merge. The
hand-built two-role example is :mod:`mha.chapters.role_heads`; the figures are in
:mod:`mha.viz.merging`.

Shape legend: B batch, T query length, S key length, D d_model, H heads, Dh head_dim = D / H.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from ..attention import merge_heads, scaled_dot_product_attention, split_heads
from ..checks import check_divisible, check_float_tensor, check_positive_int, check_rank
from ..modules import MultiHeadAttention, combine_masks, resolve_qkv
from . import DATA_DIR

#: The merge strategies, in the order the chapter discusses them.
MERGES = ("concat", "average", "weighted", "gated")


def check_merge(merge) -> str:
    """Return ``merge`` if it names a strategy in :data:`MERGES`, else raise a ValueError."""
    if merge not in MERGES:
        raise ValueError(f"merge must be one of {', '.join(map(repr, MERGES))}, found {merge!r}")
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
    return torch.einsum("bth,bhtd->btd", coefficients, heads)  # (B, T, Dh)


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
        return self.out_proj(merge_heads(heads))  # (B, T, H*Dh) -> (B, T, D)


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
        mixed = mix_heads(heads, self.coefficients(heads, x))  # (B, T, Dh), the mean
        return self.out_proj(mixed)  # (B, T, D)


class WeightedMerge(AverageMerge):
    """One learned scalar per head, softmax-normalised (positive, summing to 1), then W_up.

    The logits start at zero, so a fresh module is exactly the average.
    """

    def __init__(self, d_model: int, num_heads: int, bias: bool = True):
        super().__init__(d_model, num_heads, bias)
        self.head_logits = nn.Parameter(torch.zeros(num_heads))  # (H,)

    def coefficients(self, heads, x):
        """softmax(logits), the same for every token. Returns (B, T, H)."""
        batch_size, _, seq_len, _ = heads.shape
        return F.softmax(self.head_logits, dim=0).expand(batch_size, seq_len, -1)  # (B, T, H)


class GatedMerge(AverageMerge):
    """Per-token weights over the heads, computed from the token's input: g_t = softmax(x_t W_g + b_g).

    W_g is D x H. A fresh module starts near the average (small random gate logits).
    """

    def __init__(self, d_model: int, num_heads: int, bias: bool = True):
        super().__init__(d_model, num_heads, bias)
        self.gate = nn.Linear(d_model, num_heads, bias=bias)

    def coefficients(self, heads, x):
        """softmax over heads of the gate logits of each query token. Returns (B, T, H)."""
        return F.softmax(self.gate(x), dim=-1)  # (B, T, H)


MERGE_CLASSES = {"concat": ConcatMerge, "average": AverageMerge, "weighted": WeightedMerge, "gated": GatedMerge}


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
        merge: ``"concat"``, ``"average"``, ``"weighted"`` or ``"gated"``.
        bias: biases on every projection (W_Q, W_K, W_V, the merge's projection and the gate).
    Attributes:
        q_proj, k_proj, v_proj: D x D ``nn.Linear``. merge_layer: the merge module; its
        ``out_proj`` is W_O (D x D) for concat and W_up (Dh x D) otherwise.
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


def equivalent_out_proj(module: MergedMultiHeadAttention) -> torch.Tensor:
    """The W_O (in ``nn.Linear`` layout, D_out x D_in) that a *concatenating* module would need to
    compute the same output as ``module``.

    concat: its own W_O. average: [W_up, W_up, ..., W_up] / H (the same block for every head).
    weighted: [a_1 W_up, ..., a_H W_up]. gated: no fixed matrix exists (the mix changes per
    token), so it raises a ValueError. The averaging forms have rank at most Dh.

    Returns:
        (D, D) tensor, detached.
    """
    if not isinstance(module, MergedMultiHeadAttention):
        raise TypeError(
            f"module must be an mha.chapters.merging.MergedMultiHeadAttention, found {type(module).__name__}"
        )
    layer = module.merge_layer
    if module.merge == "concat":
        return layer.out_proj.weight.detach().clone()
    if module.merge == "gated":
        raise ValueError("merge 'gated' has no equivalent W_O: its head weights change from token to token")
    dummy = layer.out_proj.weight.new_zeros(1, module.num_heads, 1, module.head_dim)  # (1, H, 1, Dh)
    coefficients = layer.coefficients(dummy, None)[0, 0].detach()  # (H,)
    blocks = [c * layer.out_proj.weight.detach() for c in coefficients]  # H x (D, Dh)
    return torch.cat(blocks, dim=1)  # (D, H*Dh) = (D, D)


def to_concat(module: MergedMultiHeadAttention) -> MergedMultiHeadAttention:
    """A ``merge="concat"`` module computing the same function as an average or weighted one.

    Proof by construction that concatenation can do whatever these merges do (the converse is false).
    """
    w_o = equivalent_out_proj(module)  # (D, D)
    bias = module.q_proj.bias is not None
    new = MergedMultiHeadAttention(module.d_model, module.num_heads, "concat", bias=bias).to(w_o)
    for name in ("q_proj", "k_proj", "v_proj"):
        getattr(new, name).load_state_dict(getattr(module, name).state_dict())
    with torch.no_grad():
        new.merge_layer.out_proj.weight.copy_(w_o)
        if bias:
            new.merge_layer.out_proj.bias.copy_(module.merge_layer.out_proj.bias)
    return new


# --------------------------------------------------------------------------------------------
# Costs in closed form
# --------------------------------------------------------------------------------------------


def merge_params(d_model: int, num_heads: int, merge: str, bias: bool = True) -> int:
    """Parameters of the merge step alone (everything after the heads' outputs).

    concat: D·D (+ D);  average: Dh·D (+ D);  weighted: Dh·D + H (+ D);
    gated: Dh·D + D·H (+ D + H).  ``(+ ...)`` are the biases.

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
    if merge == "weighted":
        total += num_heads  # one logit per head
    if merge == "gated":
        total += d_model * num_heads + (num_heads if bias else 0)  # W_g, b_g
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
        2·T·H·Dh = 2·T·D; 0 for concat), ``project`` (2·T·D·D for concat, 2·T·Dh·D otherwise)
        and ``total``.
    """
    seq_len = check_positive_int("seq_len", seq_len)
    d_model = check_positive_int("d_model", d_model)
    num_heads = check_positive_int("num_heads", num_heads)
    check_divisible("d_model", d_model, "num_heads", num_heads)
    check_merge(merge)
    head_dim = d_model // num_heads
    concat = merge == "concat"
    parts = {
        "gate": 2 * seq_len * d_model * num_heads if merge == "gated" else 0,
        "mix": 0 if concat else 2 * seq_len * num_heads * head_dim,
        "project": 2 * seq_len * (d_model if concat else head_dim) * d_model,
    }
    parts["total"] = sum(parts.values())
    return parts


def merge_flops(seq_len: int, d_model: int, num_heads: int, merge: str) -> int:
    """Total forward FLOPs of the merge step (see :func:`merge_flops_breakdown`)."""
    return merge_flops_breakdown(seq_len, d_model, num_heads, merge)["total"]


def merge_cost_table(configs: dict, *, seq_len: int = 512, bias: bool = True) -> list[dict]:
    """One row per (configuration, merge): ``config``, ``merge``, ``params``, ``flops``,
    ``layer_params`` (the whole attention layer) and ``params_vs_concat`` (ratio).

    ``configs``: name -> (d_model, num_heads), e.g. ``{"BERT-base": (768, 12)}``.
    """
    rows = []
    for name, (d_model, num_heads) in configs.items():
        concat = merge_params(d_model, num_heads, "concat", bias)
        for merge in MERGES:
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


# --------------------------------------------------------------------------------------------
# The experiment: chapter 1's task, the same model with each merge
# --------------------------------------------------------------------------------------------

#: Where ``scripts/make_merge_results.py`` stores the multi-seed results the chapter reads.
RESULTS_PATH = DATA_DIR / "merge_results.json"
#: The sweep behind the cached results: tasks (number of relations), seeds, and the heads.
SWEEP = {"num_relations": (4, 2), "seeds": (0, 1, 2, 3, 4), "num_heads": 4, "readout": "linear"}


def merge_experiment(
    strategy: str,
    *,
    seed: int = 0,
    num_relations: int = 4,
    num_heads: int = 4,
    readout: str = "linear",
    steps: int | None = None,
    show_progress: bool = False,
) -> dict:
    """Train chapter 1's one-layer model with ``MergedMultiHeadAttention(merge=strategy)``; test it.

    The task is chapter 1's (:func:`mha.chapters.task.make_task`): at each position ``t >= k`` name the
    tokens at ``t - 1, ..., t - k`` at once (``k = num_relations``; vocabulary 16, 12 tokens).
    ``num_relations=4`` needs four relations per token; ``num_relations=2`` is the easier task where
    averaging is not doomed in advance. Everything but the merge is the same: d_model 32,
    ``num_heads`` heads, embeddings, residual, readout (linear by default), optimiser, data and seed.

    Returns:
        dict with ``accuracy`` (held-out, all k answers right), ``relation_accuracy`` (k floats),
        ``train_accuracy``, ``params`` (whole model), ``attention_params``, ``merge_params``,
        ``strategy``, ``seed``, ``num_relations``, ``num_heads``. Plain numbers: JSON-ready.
    """
    from . import task as experiments  # chapter 1's task, model and training loop

    check_merge(strategy)
    steps = experiments.STEPS if steps is None else steps
    task = experiments.make_task(num_relations, seed=seed)

    def attention(d_model, heads):
        return MergedMultiHeadAttention(d_model, heads, merge=strategy)

    model = experiments.make_model(num_heads, task, seed=seed, readout=readout, attention=attention)
    result = experiments.train_and_evaluate(model, task, steps=steps, seed=seed, show_progress=show_progress)
    keep = ("accuracy", "relation_accuracy", "train_accuracy", "params", "attention_params")
    out = {key: result[key] for key in keep}
    out.update(
        merge_params=sum(p.numel() for p in model.attention.merge_layer.parameters()),
        strategy=strategy,
        seed=seed,
        num_relations=num_relations,
        num_heads=num_heads,
        readout=readout,
        steps=steps,
    )
    return out


def run_merge_sweep(sweep: dict = SWEEP, *, log=None) -> list[dict]:
    """Every (task, strategy, seed) of ``sweep``: a list of :func:`merge_experiment` dicts."""
    runs = []
    for k in sweep["num_relations"]:
        for strategy in MERGES:
            for seed in sweep["seeds"]:
                runs.append(
                    merge_experiment(
                        strategy, seed=seed, num_relations=k, num_heads=sweep["num_heads"], readout=sweep["readout"]
                    )
                )
                if log is not None:
                    log(runs[-1])
    return runs


def load_merge_results(path: Path | str = RESULTS_PATH) -> list[dict]:
    """The cached sweep written by ``scripts/make_merge_results.py`` (a list of run dicts)."""
    with open(path) as f:
        return json.load(f)["runs"]


def summarize_merge_results(runs: list[dict]) -> list[dict]:
    """One row per (task, strategy): ``mean``, ``min``, ``max`` held-out accuracy over seeds,
    ``seeds``, ``params`` (whole model) and ``merge_params``, in :data:`MERGES` order."""
    rows = []
    for k in sorted({r["num_relations"] for r in runs}, reverse=True):
        for strategy in MERGES:
            group = [r for r in runs if r["num_relations"] == k and r["strategy"] == strategy]
            if not group:
                continue
            acc = [r["accuracy"] for r in group]
            rows.append(
                {
                    "num_relations": k,
                    "strategy": strategy,
                    "seeds": len(group),
                    "mean": sum(acc) / len(acc),
                    "min": min(acc),
                    "max": max(acc),
                    "params": group[0]["params"],
                    "merge_params": group[0]["merge_params"],
                }
            )
    return rows
