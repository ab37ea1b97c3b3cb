"""Chapter 7's analyses of all-MiniLM-L6-v2: what each of its heads does, and how much it matters.

The model itself (configuration, weights, tokenizer, forward pass) is :mod:`mha.bert`; the
figures are in :mod:`mha.viz.pretrained`. Here:

* looking at the heads: every head's weights on a sentence (:func:`attention_maps`), which heads
  send "it" to its antecedent (:func:`it_resolution`), a census of what each head mostly does
  (:func:`head_scores`, :func:`classify_heads`) and how alike two heads are (:func:`head_similarity`);
* removing heads: the quality of the sentence embeddings on the course's paraphrase pairs
  (:func:`paraphrase_quality`) with some heads gated off, one at a time and in pruning orders
  (:func:`ablation_study`), stored in ``mha/data/minilm_head_ablation.json``;
* ``python scripts/make_ablation_cache.py`` recomputes that file (minutes on a CPU).

Shape legend: B batch, T tokens, D d_model, H heads, L layers, N pairs.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from ..bert import (
    PIP_REQUIREMENT,
    Batch,
    BertConfig,
    BertEncoder,
    sentence_embeddings,
    tokenize,
)
from . import DATA_DIR

#: The sentence-pair data set written for this course (see :func:`load_sentence_pairs`).
SENTENCE_PAIRS = DATA_DIR / "sentence_pairs.json"


# ---------------------------------------------------------------------------------------------
# Looking at the heads
# ---------------------------------------------------------------------------------------------

#: The sentence of source 002 and its twin: "it" is the animal when it is tired, the street when
#: it is wide. Only the last word differs, so every token sits at the same position in both.
TWIN_SENTENCES = {
    "tired": "The animal didn't cross the street because it was too tired",
    "wide": "The animal didn't cross the street because it was too wide",
}
#: The antecedent of "it" in each twin, and the other candidate.
ANTECEDENTS = {"tired": ("animal", "street"), "wide": ("street", "animal")}


def attention_maps(model: BertEncoder, tokenizer, sentences) -> tuple[list, list]:
    """Every head's attention weights for each sentence, padding cut away.

    Returns:
        tokens: one list of token strings per sentence (T_i tokens, [CLS] ... [SEP]);
        maps: one float64 numpy array (L, H, T_i, T_i) per sentence (rows = queries).
    """
    batch = tokenize(tokenizer, sentences)
    device = next(model.parameters()).device
    with torch.no_grad():
        out = model(*batch.to(device)[:3])  # attentions (L, B, H, T, T)
    weights = out.attentions.to("cpu", torch.float64).numpy()
    maps = []
    for b, tokens in enumerate(batch.tokens):
        n = len(tokens)
        maps.append(weights[:, b, :, :n, :n])  # (L, H, T_i, T_i)
    return batch.tokens, maps


def token_position(tokens, word: str) -> int:
    """The position of ``word`` in ``tokens``; it must occur exactly once."""
    hits = [i for i, t in enumerate(tokens) if t == word]
    if len(hits) != 1:
        raise ValueError(f"word {word!r} must occur exactly once in the tokens, found it {len(hits)} times in {tokens}")
    return hits[0]


def attention_from_to(weights: np.ndarray, tokens, source: str, targets) -> np.ndarray:
    """How much each head's ``source`` token attends to each of the ``targets``.

    Shapes: weights (L, H, T, T). Returns (L, H, len(targets)).
    """
    i = token_position(tokens, source)
    columns = [token_position(tokens, t) for t in targets]
    return weights[:, :, i, columns]  # (L, H, K)


def it_resolution(model: BertEncoder, tokenizer) -> dict:
    """Which heads send "it" to its antecedent, in both twin sentences.

    Returns a dict of (L, H) arrays: ``"tired:animal"``, ``"tired:street"``, ``"wide:animal"``,
    ``"wide:street"`` (weight from "it" to the noun), ``"margin:tired"``/``"margin:wide"``
    (antecedent minus the other noun) and ``"resolves"`` (bool: a positive margin in *both*).
    Also ``tokens`` and ``maps`` (the twins' tokens and (L, H, T, T) weights, by twin name).
    """
    names = list(TWIN_SENTENCES)
    tokens, maps = attention_maps(model, tokenizer, [TWIN_SENTENCES[n] for n in names])
    result = {"tokens": dict(zip(names, tokens)), "maps": dict(zip(names, maps))}
    for name, toks, w in zip(names, tokens, maps):
        right, wrong = ANTECEDENTS[name]
        to_right, to_wrong = np.moveaxis(attention_from_to(w, toks, "it", [right, wrong]), -1, 0)  # (L, H)
        result[f"{name}:{right}"], result[f"{name}:{wrong}"] = to_right, to_wrong
        result[f"margin:{name}"] = to_right - to_wrong
    result["resolves"] = (result["margin:tired"] > 0) & (result["margin:wide"] > 0)
    return result


#: The census's criteria: a head gets the first label whose score reaches its threshold.
#: previous/next/self/special: mean attention weight a word puts on the word before, the word
#: after, itself, or [CLS]+[SEP]; broad: mean normalised entropy of a word's row (1 = uniform).
CENSUS_THRESHOLDS = {"previous": 0.5, "next": 0.5, "self": 0.5, "special": 0.5, "broad": 0.75}


def head_scores(maps) -> dict:
    """The census scores of every head, averaged over the word rows of all sentences.

    Only word queries count (not [CLS]/[SEP]). "previous" and "next" skip a word whose neighbour
    is [CLS] or [SEP], so that no weight counts twice. "entropy" is the row's entropy divided
    by log(T), the entropy of the uniform row: 0 = one key, 1 = all keys alike.

    Shapes: maps: a list of (L, H, T_i, T_i) arrays (T_i >= 4). Returns a dict of (L, H) arrays:
    previous, next, self, special (= cls + sep), cls, sep, entropy.
    """
    sums = {k: [] for k in ("previous", "next", "self", "special", "cls", "sep", "entropy")}
    for w in maps:
        n = w.shape[-1]
        if n < 4:
            raise ValueError(f"every sentence needs at least 2 words besides [CLS] and [SEP], found {n} tokens")
        words = np.arange(1, n - 1)  # word queries
        rows = w[:, :, words, :]  # (L, H, n-2, n)
        sums["self"].append(rows[:, :, np.arange(n - 2), words].mean(-1))
        sums["cls"].append(rows[..., 0].mean(-1))
        sums["sep"].append(rows[..., n - 1].mean(-1))
        sums["special"].append(sums["cls"][-1] + sums["sep"][-1])
        inner = np.arange(2, n - 1)  # words with a word before them
        sums["previous"].append(w[:, :, inner, inner - 1].mean(-1))
        inner = np.arange(1, n - 2)  # words with a word after them
        sums["next"].append(w[:, :, inner, inner + 1].mean(-1))
        entropy = -(rows * np.log(np.clip(rows, 1e-30, None))).sum(-1) / math.log(n)  # (L, H, n-2)
        sums["entropy"].append(entropy.mean(-1))
    return {k: np.mean(v, axis=0) for k, v in sums.items()}


def classify_heads(scores: dict, thresholds: dict | None = None) -> np.ndarray:
    """One label per head from :func:`head_scores`: the first criterion of ``thresholds`` met.

    Returns: (L, H) array of strings, "other" for a head that meets none.
    """
    thresholds = CENSUS_THRESHOLDS if thresholds is None else thresholds
    labels = np.full(scores["self"].shape, "other", dtype=object)
    for name, threshold in reversed(list(thresholds.items())):  # earlier criteria win
        score = scores["entropy" if name == "broad" else name]
        labels[score >= threshold] = name
    return labels


def head_similarity(maps, words_only: bool = False) -> np.ndarray:
    """How alike two heads' attention patterns are: cosine similarity of their weight matrices,
    averaged over sentences (1 = the same pattern up to scale).

    With ``words_only`` the [CLS]/[SEP] rows and columns are dropped first, so that two heads
    are not called alike only because both park their weight on [SEP].

    Shapes: maps: a list of (L, H, T_i, T_i). Returns (L·H, L·H), head index = layer·H + head.
    """
    sims = []
    for w in maps:
        if words_only:
            w = w[..., 1:-1, 1:-1]  # (L, H, T-2, T-2)
        flat = w.reshape(w.shape[0] * w.shape[1], -1)  # (L·H, T·T)
        flat = flat / np.linalg.norm(flat, axis=1, keepdims=True)
        sims.append(flat @ flat.T)  # (L·H, L·H)
    return np.mean(sims, axis=0)


# ---------------------------------------------------------------------------------------------
# Removing heads: how much does the sentence embedding need each one?
# ---------------------------------------------------------------------------------------------


def load_sentence_pairs(path=None) -> list[tuple[str, str]]:
    """The course's paraphrase pairs (``mha/data/sentence_pairs.json``): a list of (a, b)."""
    path = SENTENCE_PAIRS if path is None else Path(path)
    pairs = json.loads(Path(path).read_text())["pairs"]
    if len(pairs) < 2:
        raise ValueError(f"{path} must hold at least 2 pairs, found {len(pairs)}")
    return [(p["a"], p["b"]) for p in pairs]


class Quality(NamedTuple):
    """How well embeddings tell paraphrases apart, on N pairs (a_i, b_i).

    accuracy: the fraction of the 2N sentences whose nearest sentence on the other side is their
    own paraphrase. margin: mean of cos(a_i, b_i) - mean_{j != i} cos(a_i, b_j), the gap between a
    paraphrase and the other sentences (larger is better).
    """

    accuracy: float
    margin: float


def paraphrase_quality(emb_a: torch.Tensor, emb_b: torch.Tensor) -> Quality:
    """Shapes: emb_a, emb_b (N, D), unit length, row i of each a paraphrase pair."""
    sims = (emb_a @ emb_b.T).to("cpu", torch.float64)  # (N, N) cosine similarities
    n = sims.shape[0]
    target = torch.arange(n)
    hits = (sims.argmax(dim=1) == target).sum() + (sims.argmax(dim=0) == target).sum()
    positive = sims.diagonal()  # (N,)
    others = (sims.sum(dim=1) - positive) / (n - 1)  # (N,) mean similarity to the other b's
    return Quality(float(hits) / (2 * n), float((positive - others).mean()))


def pair_batches(tokenizer, pairs=None) -> tuple[Batch, Batch]:
    """The a sides and the b sides of the pairs as two :class:`Batch`es."""
    pairs = load_sentence_pairs() if pairs is None else pairs
    return tokenize(tokenizer, [a for a, _ in pairs]), tokenize(tokenizer, [b for _, b in pairs])


def quality_with_heads(model: BertEncoder, batches, head_mask=None) -> Quality:
    """Embedding quality (:class:`Quality`) with only the heads ``head_mask`` keeps (1 = keep)."""
    batch_a, batch_b = batches
    return paraphrase_quality(
        sentence_embeddings(model, batch_a, head_mask=head_mask),
        sentence_embeddings(model, batch_b, head_mask=head_mask),
    )


def head_mask_without(config: BertConfig, removed) -> torch.Tensor:
    """A (L, H) head mask of ones with zeros at the ``removed`` (layer, head) pairs (0-based)."""
    mask = torch.ones(config.num_layers, config.num_heads)
    for layer, head in removed:
        if not (0 <= layer < config.num_layers and 0 <= head < config.num_heads):
            raise ValueError(
                f"(layer, head) must lie in [0, {config.num_layers}) x [0, {config.num_heads}), found ({layer}, {head})"
            )
        mask[layer, head] = 0.0
    return mask


def single_head_ablation(model: BertEncoder, batches) -> dict:
    """The quality after removing each head alone. Returns (L, H) arrays accuracy and margin."""
    config = model.config
    accuracy = np.zeros((config.num_layers, config.num_heads))
    margin = np.zeros_like(accuracy)
    for layer in range(config.num_layers):
        for head in range(config.num_heads):
            q = quality_with_heads(model, batches, head_mask_without(config, [(layer, head)]))
            accuracy[layer, head], margin[layer, head] = q
    return {"accuracy": accuracy, "margin": margin}


def pruning_curve(model: BertEncoder, batches, order, counts) -> dict:
    """Remove heads in ``order`` (a list of (layer, head)) and measure after each count in ``counts``.

    Returns: dict with ``removed`` (the counts), ``accuracy`` and ``margin`` (lists, one per count).
    """
    result = {"removed": [], "accuracy": [], "margin": []}
    for count in counts:
        q = quality_with_heads(model, batches, head_mask_without(model.config, order[:count]))
        result["removed"].append(int(count))
        result["accuracy"].append(q.accuracy)
        result["margin"].append(q.margin)
    return result


#: Precomputed by :func:`ablation_study` (about a hundred forward passes, minutes on a CPU, too
#: slow for a notebook cell); ``python scripts/make_ablation_cache.py`` rewrites it. Tests
#: recompute entries.
ABLATION_RESULTS = DATA_DIR / "minilm_head_ablation.json"
#: How many heads the pruning curves remove at each step.
PRUNING_STEP = 6


def pruning_counts(config: BertConfig) -> tuple[int, ...]:
    """The numbers of removed heads a pruning curve measures: 0, 6, 12, ... up to all L·H heads."""
    return tuple(range(0, config.num_layers * config.num_heads + 1, PRUNING_STEP))


def pairs_digest(path=None) -> str:
    """SHA-256 of the sentence-pair file, to tell whether stored results still match it."""
    import hashlib

    return hashlib.sha256(Path(SENTENCE_PAIRS if path is None else path).read_bytes()).hexdigest()


def ablation_study(model: BertEncoder, tokenizer, seed: int = 0) -> dict:
    """Single-head ablation and three pruning curves on the course's sentence pairs.

    The orders: "least harmful first" (heads sorted by the margin after removing each alone, the
    highest first, as Michel et al. 2019 prune the least important heads first), its reverse
    "most harmful first", and a "random" order (``seed``).

    Returns: a JSON-ready dict (lists of floats rounded to 6 decimals).
    """
    batches = pair_batches(tokenizer)
    full = quality_with_heads(model, batches)
    single = single_head_ablation(model, batches)
    num_heads = model.config.num_heads
    flat = single["margin"].ravel()
    least_first = [divmod(int(i), num_heads) for i in np.argsort(-flat, kind="stable")]
    rng = np.random.default_rng(seed)
    orders = {
        "least harmful first": least_first,
        "most harmful first": least_first[::-1],
        "random": [divmod(int(i), num_heads) for i in rng.permutation(flat.size)],
    }

    def rounded(x):
        return np.round(np.asarray(x, dtype=float), 6).tolist()

    curves = {}
    for name, order in orders.items():
        curve = pruning_curve(model, batches, order, pruning_counts(model.config))
        curves[name] = {
            "order": [list(p) for p in order],
            "removed": curve["removed"],
            "accuracy": rounded(curve["accuracy"]),
            "margin": rounded(curve["margin"]),
        }
    return {
        "description": "Head ablation of all-MiniLM-L6-v2 on mha/data/sentence_pairs.json, written by "
        "mha.chapters.pretrained_analysis.ablation_study "
        "(python scripts/make_ablation_cache.py). A removed head's "
        "context is zeroed before W_O.",
        "model": PIP_REQUIREMENT,
        "pairs_sha256": pairs_digest(),
        "seed": seed,
        "full": {"accuracy": full.accuracy, "margin": round(full.margin, 6)},
        "single_head": {"accuracy": rounded(single["accuracy"]), "margin": rounded(single["margin"])},
        "pruning": curves,
    }


def load_ablation_study(path=None) -> dict:
    """The stored :func:`ablation_study` results, with numpy arrays for the (L, H) tables.

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
    return study


# ---------------------------------------------------------------------------------------------
# Writing the stored study (python scripts/make_ablation_cache.py)
# ---------------------------------------------------------------------------------------------


def write_ablation_study(study: dict, path=None) -> Path:
    """Write :func:`ablation_study`'s results as JSON, one line per innermost list (diff-friendly)."""
    import re

    path = ABLATION_RESULTS if path is None else Path(path)
    text = json.dumps(study, indent=1)
    text = re.sub(r"\[\s+([^\[\]{}]*?)\s+\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", text)
    path.write_text(text + "\n")
    return path
