"""The pretrained-heads chapter's pruning study of all-MiniLM-L6-v2: which heads can go, and how we would know.

The yardstick is :func:`mha.chapters.pretrained.pretrained_analysis.quality_with_heads` (the paraphrase
margin on the course's sentence pairs). Ranking heads and judging the ranking on the *same* pairs
flatters it, so the study (:func:`ablation_study`, stored in ``mha/data/minilm_head_ablation.json``
by ``python scripts/make_ablation_cache.py``) does three things besides the in-sample curves:

* **held-out splits**: the 24 pairs are cut into two halves (:func:`split_pairs`); heads are ranked
  on one half and the pruned model is judged on the other, both ways round;
* **three rankings**: single-head ablation (:func:`single_head_ablation`), Michel et al.'s
  gradient importance score (:func:`margin_gradients`, :func:`importance_scores`), and greedy
  pruning that re-ranks after every removal (:func:`greedy_pruning`);
* **a random band**: :data:`NUM_RANDOM_ORDERS` random orders (:func:`random_orders`), judged on the
  same held-out half, so that a ranking is compared with chance rather than with one draw.

Shape legend: L layers, H heads per layer, N pairs, R random orders, K measured counts.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import torch

from ...bert import PIP_REQUIREMENT, Batch, BertConfig, BertEncoder, mean_pool
from .. import DATA_DIR
from ..heads.task import one_thread
from .pretrained_analysis import (
    SENTENCE_PAIRS,
    importance_scores,
    load_sentence_pairs,
    pair_batches,
    pair_margins,
    quality_with_heads,
)

#: Precomputed by :func:`ablation_study` (minutes on a CPU, too slow for a notebook cell);
#: ``python scripts/make_ablation_cache.py`` rewrites it. The pretrained-heads chapter and the tests recompute entries.
ABLATION_RESULTS = DATA_DIR / "minilm_head_ablation.json"
#: How many heads the pruning curves remove at each step.
PRUNING_STEP = 6
#: The seed of the split of the pairs into two halves, and of the random orders.
SPLIT_SEED = 0
RANDOM_SEED = 1
NUM_RANDOM_ORDERS = 20


def pruning_counts(config: BertConfig) -> tuple[int, ...]:
    """The numbers of removed heads a pruning curve measures: 0, 6, 12, ... up to all L·H heads."""
    return tuple(range(0, config.num_layers * config.num_heads + 1, PRUNING_STEP))


def head_mask_from_order(config: BertConfig, order, count: int) -> torch.Tensor:
    """A (L, H) mask of ones with the first ``count`` heads of ``order`` (flat indices
    layer·H + head) set to 0."""
    mask = torch.ones(config.num_layers * config.num_heads)
    mask[list(order[:count])] = 0.0
    return mask.view(config.num_layers, config.num_heads)  # (L·H,) -> (L, H)


def quality_after(model: BertEncoder, batches, order, count: int):
    """:class:`Quality` with the first ``count`` heads of ``order`` removed."""
    return quality_with_heads(model, batches, head_mask_from_order(model.config, order, count))


def pruning_curve(model: BertEncoder, batches, order, counts) -> dict:
    """Remove heads in ``order`` (flat indices) and measure after each count in ``counts``.

    Returns: dict with ``removed`` (the counts), ``accuracy`` and ``margin`` (lists, one per count).
    """
    result = {"removed": [], "accuracy": [], "margin": []}
    for count in counts:
        q = quality_after(model, batches, order, count)
        result["removed"].append(int(count))
        result["accuracy"].append(q.accuracy)
        result["margin"].append(q.margin)
    return result


# ---------------------------------------------------------------------------------------------
# Three ways to rank the heads
# ---------------------------------------------------------------------------------------------


def single_head_ablation(model: BertEncoder, batches, progress=None) -> dict:
    """The quality after removing each head alone. Returns (L, H) arrays accuracy and margin."""
    config = model.config
    accuracy = np.zeros((config.num_layers, config.num_heads))
    margin = np.zeros_like(accuracy)
    for index in range(accuracy.size):
        layer, head = divmod(index, config.num_heads)
        accuracy[layer, head], margin[layer, head] = quality_after(model, batches, [index], 1)
        if progress:
            progress(1)
    return {"accuracy": accuracy, "margin": margin}


def least_harmful_first(margin_without: np.ndarray) -> list[int]:
    """Flat head indices sorted by the margin after removing each head alone, highest first."""
    return [int(i) for i in np.argsort(-np.asarray(margin_without).ravel(), kind="stable")]


def gated_embeddings(model: BertEncoder, batch: Batch, gates: torch.Tensor) -> torch.Tensor:
    """The sentence embeddings with head gates ``gates`` (L, H), *with* autograd (unlike
    :func:`mha.bert.sentence_embeddings`), so that the margin can be differentiated by the gates.

    Returns (B, D), unit length.
    """
    batch = batch.to(gates.device)
    out = model(batch.input_ids, batch.attention_mask, batch.token_type_ids, head_mask=gates)
    pooled = mean_pool(out.last_hidden_state, batch.attention_mask)  # (B, D)
    return torch.nn.functional.normalize(pooled, dim=-1)


def margin_gradients(model: BertEncoder, batches) -> np.ndarray:
    """d m_i / d xi_h: how each pair's margin changes as each head's gate moves away from 1.

    Every gate xi_h multiplies head h's output (Michel et al. 2019's head mask); at xi = 1 the
    model is unchanged, and one backward pass per pair gives all L·H derivatives at once.

    Returns: (N, L, H) float64 numpy array, N = the number of pairs in ``batches``.
    """
    param = next(model.parameters())
    config = model.config
    # the lines from here to ``grads = ...`` are printed on the pretrained-heads page: at most 74 characters
    shape = (config.num_layers, config.num_heads)
    gates = torch.ones(shape, dtype=param.dtype, device=param.device)
    gates.requires_grad_(True)
    # on a CPU, many small backward ops: one thread is several times faster
    with one_thread():
        embeddings = (gated_embeddings(model, b, gates) for b in batches)
        margins = pair_margins(*embeddings)  # (N,)

        def grad(margin):  # d margin / d gates: (L, H)
            return torch.autograd.grad(margin, gates, retain_graph=True)[0]

        grads = [grad(m) for m in margins]  # N x (L, H)
    return torch.stack(grads).to("cpu", torch.float64).numpy()  # (N, L, H)


def least_important_first(scores: np.ndarray) -> list[int]:
    """Flat head indices by importance score, lowest first (the order Michel et al. prune in)."""
    return [int(i) for i in np.argsort(np.asarray(scores).ravel(), kind="stable")]


def greedy_pruning(model: BertEncoder, batches, progress=None) -> dict:
    """Remove heads one at a time, each time the one whose removal leaves the highest margin
    *given the heads already removed* (re-ranking after every removal).

    Returns: ``order`` (flat indices, in removal order) and ``margin`` (L·H + 1 values: the margin
    on ``batches`` after 0, 1, ..., L·H removals).
    """
    total = model.config.num_layers * model.config.num_heads
    order, margins = [], [quality_with_heads(model, batches).margin]
    remaining = list(range(total))
    while remaining:
        trials = [quality_after(model, batches, [*order, h], len(order) + 1).margin for h in remaining]
        best = int(np.argmax(trials))  # the first of equal margins
        order.append(remaining.pop(best))
        margins.append(trials[best])
        if progress:
            progress(len(trials))
    return {"order": order, "margin": margins}


def random_orders(total: int, count: int = NUM_RANDOM_ORDERS, seed: int = RANDOM_SEED) -> list[list[int]]:
    """``count`` random permutations of the ``total`` flat head indices (one seeded generator)."""
    rng = np.random.default_rng(seed)
    return [[int(i) for i in rng.permutation(total)] for _ in range(count)]


def holds_until(curve: dict, full_margin: float) -> int:
    """The largest count of removed heads up to which ``curve``'s margin never fell below ``full_margin``
    (a :func:`pruning_curve` dict whose first count, 0, is the intact model).

    Raises ValueError when even the first margin is below ``full_margin``.
    """
    ok = [m >= full_margin for m in curve["margin"]]
    if not ok[0]:
        raise ValueError(f"the curve starts below full_margin ({curve['margin'][0]:.4g} < {full_margin:.4g})")
    return int(curve["removed"][ok.index(False) - 1] if False in ok else curve["removed"][-1])


def above_random_band(curve: dict, random_margins) -> list[int]:
    """The counts, from 1 head removed to all but one, at which ``curve``'s margin is higher than
    every random order's (``random_margins``: (R, K), one row per order, at ``curve``'s counts).

    With no heads or all heads removed every order gives the same model, so those counts are left out.
    """
    highest = np.asarray(random_margins).max(axis=0)  # (K,)
    removed, last = curve["removed"], curve["removed"][-1]
    return [int(c) for c, m, hi in zip(removed, curve["margin"], highest) if 0 < c < last and m > hi]


def split_pairs(num_pairs: int, seed: int = SPLIT_SEED) -> tuple[list[int], list[int]]:
    """Two disjoint halves of the pair indices, each sorted (a seeded random cut)."""
    perm = np.random.default_rng(seed).permutation(num_pairs)
    half = num_pairs // 2
    return sorted(int(i) for i in perm[:half]), sorted(int(i) for i in perm[half:])


def rank_agreement(a: np.ndarray, b: np.ndarray, k: int) -> dict:
    """How alike two scores of the same heads rank them (higher = more important in both).

    Returns: ``spearman`` (rank correlation) and ``overlap`` (how many of the k lowest-ranked
    heads of ``a`` are among the k lowest of ``b``).
    """
    a, b = np.asarray(a, dtype=float).ravel(), np.asarray(b, dtype=float).ravel()
    rank_a, rank_b = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    spearman = float(np.corrcoef(rank_a, rank_b)[0, 1])
    overlap = len(set(np.argsort(a, kind="stable")[:k]) & set(np.argsort(b, kind="stable")[:k]))
    return {"spearman": spearman, "overlap": overlap}


# ---------------------------------------------------------------------------------------------
# The stored study
# ---------------------------------------------------------------------------------------------


def pairs_digest(path=None) -> str:
    """SHA-256 of the sentence-pair file, to tell whether stored results still match it."""
    return hashlib.sha256(Path(SENTENCE_PAIRS if path is None else path).read_bytes()).hexdigest()


def _rounded(x):
    return np.round(np.asarray(x, dtype=float), 6).tolist()


def _quality(q) -> dict:
    return {"accuracy": round(q.accuracy, 6), "margin": round(q.margin, 6)}


def _curves(model, batches, orders: dict, counts) -> dict:
    curves = {}
    for name, order in orders.items():
        curve = pruning_curve(model, batches, order, counts)
        curves[name] = {
            "removed": curve["removed"],
            "accuracy": _rounded(curve["accuracy"]),
            "margin": _rounded(curve["margin"]),
        }
    return curves


def split_study(model: BertEncoder, tokenizer, rank: list[int], held_out: list[int], randoms, progress=None) -> dict:
    """Rank the heads three ways on the pairs ``rank``; judge every ranking, and the random orders
    ``randoms``, on the pairs ``held_out`` (indices into :func:`load_sentence_pairs`)."""
    pairs = load_sentence_pairs()
    counts = pruning_counts(model.config)
    rank_batches = pair_batches(tokenizer, [pairs[i] for i in rank])
    eval_batches = pair_batches(tokenizer, [pairs[i] for i in held_out])
    single = single_head_ablation(model, rank_batches, progress)
    gradients = margin_gradients(model, rank_batches)
    importance = importance_scores(gradients)
    greedy = greedy_pruning(model, rank_batches, progress)
    orders = {
        "ablation": least_harmful_first(single["margin"]),
        "importance": least_important_first(importance),
        "greedy": greedy["order"],
    }
    random_curves = [pruning_curve(model, eval_batches, order, counts) for order in randoms]
    return {
        "rank_pairs": rank,
        "eval_pairs": held_out,
        "full": {
            "rank": _quality(quality_with_heads(model, rank_batches)),
            "eval": _quality(quality_with_heads(model, eval_batches)),
        },
        "single_head_margin": _rounded(single["margin"]),
        "importance": _rounded(importance),
        "importance_raw": _rounded(importance_scores(gradients, normalize=False)),
        "linear_change": _rounded(-gradients.mean(axis=0)),  # first-order estimate of the margin change
        "orders": orders,
        "greedy_in_sample": _rounded(greedy["margin"]),
        "held_out": _curves(model, eval_batches, orders, counts),
        "in_sample": _curves(model, rank_batches, orders, counts),
        "random_held_out": {
            "margin": [_rounded(c["margin"]) for c in random_curves],
            "accuracy": [_rounded(c["accuracy"]) for c in random_curves],
        },
    }


def parking_check(model: BertEncoder, batches, parking: list[int], randoms) -> dict:
    """Remove the ``parking`` heads (flat indices) all at once, and the first as many heads of each order
    of ``randoms`` (sets matched by nothing; :mod:`mha.chapters.pretrained.pretrained_controls` draws matched ones)."""
    count = len(parking)
    return {
        "heads": list(parking),
        "parking_removed": _quality(quality_after(model, batches, parking, count)),
        "random_removed": [_quality(quality_after(model, batches, order, count)) for order in randoms],
    }


def ablation_study(model: BertEncoder, tokenizer, parking: list[int], progress=None) -> dict:
    """Everything the pretrained-heads chapter says about removing heads, as a JSON-ready dict.

    In-sample (ranked and judged on all pairs): the single-head ablation and the curves in the
    order it gives, its reverse and :data:`NUM_RANDOM_ORDERS` random orders. Held out: two
    :func:`split_study` folds (each half ranks, the other judges). And :func:`parking_check` for the
    heads ``parking`` (flat indices: the census's [CLS]-parking heads), against unmatched random sets.
    """
    pairs = load_sentence_pairs()
    batches = pair_batches(tokenizer, pairs)
    counts = pruning_counts(model.config)
    total = model.config.num_layers * model.config.num_heads
    single = single_head_ablation(model, batches, progress)
    least = least_harmful_first(single["margin"])
    randoms = random_orders(total)
    random_curves = [pruning_curve(model, batches, order, counts) for order in randoms]
    half_a, half_b = split_pairs(len(pairs))
    full = _quality(quality_with_heads(model, batches))
    return {
        "description": "Head ablation of all-MiniLM-L6-v2 on mha/data/sentence_pairs.json, written by "
        "mha.chapters.pretrained.pretrained_pruning.ablation_study (python scripts/make_ablation_cache.py). "
        "A removed head's context is zeroed before W_O. Head indices are flat: layer * H + head.",
        "model": PIP_REQUIREMENT,
        "pairs_sha256": pairs_digest(),
        "seeds": {"split": SPLIT_SEED, "random_orders": RANDOM_SEED},
        "full": full,
        "single_head": {"accuracy": _rounded(single["accuracy"]), "margin": _rounded(single["margin"])},
        "pruning": _curves(model, batches, {"least harmful first": least, "most harmful first": least[::-1]}, counts),
        "random": {
            "orders": randoms,
            "margin": [_rounded(c["margin"]) for c in random_curves],
            "accuracy": [_rounded(c["accuracy"]) for c in random_curves],
        },
        "splits": [
            split_study(model, tokenizer, half_a, half_b, randoms, progress),
            split_study(model, tokenizer, half_b, half_a, randoms, progress),
        ],
        "parking": parking_check(model, batches, parking, randoms),
    }


def study_work(config: BertConfig) -> int:
    """How many :func:`ablation_study` steps a progress bar counts (single removals and greedy trials)."""
    total = config.num_layers * config.num_heads
    return total + 2 * (total + total * (total + 1) // 2)


def load_ablation_study(path=None) -> dict:
    """The stored :func:`ablation_study` results; (L, H) tables as numpy arrays.

    Raises ValueError when the sentence-pair file changed since they were computed.
    """
    path = ABLATION_RESULTS if path is None else Path(path)
    study = json.loads(path.read_text())
    if study["pairs_sha256"] != pairs_digest():
        raise ValueError(
            f"{path} was computed on another version of {SENTENCE_PAIRS.name}; "
            "rerun `python scripts/make_ablation_cache.py` to update it"
        )
    for key in ("accuracy", "margin"):
        study["single_head"][key] = np.array(study["single_head"][key])
    for fold in study["splits"]:
        for key in ("single_head_margin", "importance", "importance_raw", "linear_change"):
            fold[key] = np.array(fold[key])
    return study


def write_ablation_study(study: dict, path=None) -> Path:
    """Write :func:`ablation_study`'s results as JSON, one line per innermost list (diff-friendly)."""
    path = ABLATION_RESULTS if path is None else Path(path)
    text = json.dumps(study, indent=1)
    text = re.sub(r"\[\s+([^\[\]{}]*?)\s+\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", text)
    path.write_text(text + "\n")
    return path


# ---------------------------------------------------------------------------------------------
# What the pretrained-heads chapter recomputes live
# ---------------------------------------------------------------------------------------------


def live_subset(model: BertEncoder, tokenizer, study: dict, gradients=None) -> dict:
    """A few stored entries recomputed: name -> (recomputed, stored), both floats or (L, H) arrays.

    The full model's margin; fold 1's held-out margin after removing 24 and 48 heads in the
    ablation order and 48 in the first random order; fold 1's importance scores, from ``gradients``
    (:func:`margin_gradients` on fold 1's ranking pairs) or recomputed (12 backward passes).
    """
    pairs = load_sentence_pairs()
    fold = study["splits"][0]
    held = pair_batches(tokenizer, [pairs[i] for i in fold["eval_pairs"]])
    counts = fold["held_out"]["ablation"]["removed"]
    out = {"full margin": (quality_with_heads(model, pair_batches(tokenizer, pairs)).margin, study["full"]["margin"])}
    for name, order, stored, count in (
        ("ablation order", fold["orders"]["ablation"], fold["held_out"]["ablation"]["margin"], 24),
        ("ablation order", fold["orders"]["ablation"], fold["held_out"]["ablation"]["margin"], 48),
        ("random order 1", study["random"]["orders"][0], fold["random_held_out"]["margin"][0], 48),
    ):
        live = quality_after(model, held, order, count).margin
        out[f"fold 1, {name}, {count} removed, held-out margin"] = (live, stored[counts.index(count)])
    if gradients is None:
        gradients = margin_gradients(model, pair_batches(tokenizer, [pairs[i] for i in fold["rank_pairs"]]))
    out["fold 1 importance scores"] = (importance_scores(gradients), np.asarray(fold["importance"]))
    return out


def largest_difference(subset: dict) -> float:
    """The largest |recomputed - stored| over :func:`live_subset`'s entries."""
    return max(float(np.max(np.abs(np.asarray(a) - np.asarray(b)))) for a, b in subset.values())
