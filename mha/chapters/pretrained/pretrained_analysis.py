"""The pretrained-heads chapter's analyses of all-MiniLM-L6-v2: what each of its heads does, and how much it matters.

The model itself (configuration, weights, tokenizer, forward pass) is :mod:`mha.bert`; the
figures are in :mod:`mha.chapters.pretrained.figures`. Here:

* looking at the heads: every head's weights on a sentence (:func:`attention_maps`), which heads
  send "it" to its antecedent (:func:`it_resolution`), a census of what each head mostly does
  (:func:`head_scores`, :func:`classify_heads`) and how alike two heads are (:func:`head_similarity`);
* what a head writes, not only where it looks: Kobayashi et al. 2020's vector norms
  (:func:`head_value_vectors`, :func:`value_norms`);
* the yardstick for removing heads: the quality of the sentence embeddings on the course's
  paraphrase pairs (:func:`paraphrase_quality`, :func:`pair_margins`) with some heads gated off
  (:func:`quality_with_heads`), and Michel et al.'s importance score (:func:`importance_scores`);
  the pruning study itself is :mod:`mha.chapters.pretrained.pretrained_pruning`, the Winograd-style twins
  :mod:`mha.chapters.pretrained.pretrained_twins`;
* the exercise checkers are in :mod:`mha.chapters.pretrained.pretrained_exercises`.

Shape legend: B batch, T tokens, D d_model, H heads, L layers, N pairs.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from ...attention import split_heads
from ...bert import (
    Batch,
    BertConfig,
    BertEncoder,
    sentence_embeddings,
    tokenize,
)
from .. import DATA_DIR

#: The sentence-pair data set written for this course (see :func:`load_sentence_pairs`).
SENTENCE_PAIRS = DATA_DIR / "sentence_pairs.json"


# ---------------------------------------------------------------------------------------------
# Looking at the heads
# ---------------------------------------------------------------------------------------------

#: The sentence tutorials use to show a coreference head (the single-head-limits chapter's), and its twin: "it" is the
#: animal when it is tired, the street when it is wide. Only the last word differs, so every token
#: sits at the same position in both.
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
    is [CLS] or [SEP], so that no weight counts twice with "special". They are therefore averaged
    over different rows ("previous" leaves out the first word, "next" the last), and both can
    exceed 0.5: in a three-word sentence, 0.75 each (see the tests). "entropy" is the row's entropy
    divided by log(T), the entropy of the uniform row: 0 = one key, 1 = all keys alike.

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


def pair_margins(emb_a: torch.Tensor, emb_b: torch.Tensor) -> torch.Tensor:
    """Each pair's margin cos(a_i, b_i) - mean_{j != i} cos(a_i, b_j), differentiable.

    Shapes: emb_a, emb_b (N, D), unit length, row i of each a paraphrase pair. Returns (N,).
    """
    sims = emb_a @ emb_b.T  # (N, N) cosine similarities
    positive = sims.diagonal()  # (N,)
    others = (sims.sum(dim=1) - positive) / (sims.shape[0] - 1)  # (N,) mean similarity to the other b's
    return positive - others


def paraphrase_quality(emb_a: torch.Tensor, emb_b: torch.Tensor) -> Quality:
    """Shapes: emb_a, emb_b (N, D), unit length, row i of each a paraphrase pair."""
    emb_a, emb_b = emb_a.detach().to("cpu", torch.float64), emb_b.detach().to("cpu", torch.float64)
    sims = emb_a @ emb_b.T  # (N, N) cosine similarities
    target = torch.arange(sims.shape[0])
    hits = (sims.argmax(dim=1) == target).sum() + (sims.argmax(dim=0) == target).sum()
    return Quality(float(hits) / (2 * sims.shape[0]), float(pair_margins(emb_a, emb_b).mean()))


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


def importance_scores(gradients: np.ndarray, normalize: bool = True) -> np.ndarray:
    """Michel et al.'s head importance I_h = mean over examples of |dL/d xi_h|, here L = -margin.

    The absolute value is taken per pair, *before* averaging: a head that helps one pair and
    hurts another is important to both. With ``normalize`` each layer's scores are divided by their
    l2 norm, as Michel et al. do before pruning across layers.

    Shapes: gradients (N, L, H). Returns (L, H).
    """
    score = np.abs(gradients).mean(axis=0)  # (L, H)
    if normalize:
        score = score / np.linalg.norm(score, axis=1, keepdims=True)  # each layer's row: unit l2 norm
    return score


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


# ---------------------------------------------------------------------------------------------
# Weight is not all a head writes: Kobayashi et al. 2020's vector norms
# ---------------------------------------------------------------------------------------------


def head_value_vectors(attn, x: torch.Tensor) -> torch.Tensor:
    """f_h(x_j) = (x_j W_V + b_V)_h W_O^h: what head h adds to the output for each unit of weight on
    token j (Kobayashi et al. 2020). A head's output is sum_j A[i, j] f_h(x_j); the sum over heads,
    plus W_O's bias, is the attention block's output.

    Shapes: x (B, T, D), the input of the attention block ``attn`` (:class:`mha.MultiHeadAttention`).
    Returns (B, H, T, D). The pretrained-heads chapter prints the body: keep its lines within 74 characters.
    """
    values = split_heads(attn.v_proj(x), attn.num_heads)  # (B, H, T, Dh)
    shape = (x.shape[-1], attn.num_heads, attn.head_dim)
    w_o = attn.out_proj.weight.view(shape)  # (D, H*Dh) -> (D, H, Dh)
    return torch.einsum("bhtk,dhk->bhtd", values, w_o)  # (B, H, T, D)


def value_norms(model: BertEncoder, tokenizer, sentences) -> dict:
    """How much of what each head writes comes from [CLS], by weight and by vector norm.

    For a word query i of head h: weight share of [CLS] = A[i, CLS]; norm share of [CLS] =
    ||A[i, CLS] f(x_CLS)|| / sum_j ||A[i, j] f(x_j)||. Averaged over the word queries of all
    ``sentences``. Also ``cls_norm_ratio``, ||f(x_CLS)|| over the mean ||f(x_j)|| of the words, and
    ``output_norm``, the mean norm of the head's output ||sum_j A[i, j] f(x_j)|| at a word.

    Returns a dict of (L, H) float64 arrays: cls_weight, cls_norm_share, cls_norm_ratio, output_norm.
    """
    batch = tokenize(tokenizer, sentences)
    device = next(model.parameters()).device
    lengths = batch.attention_mask.sum(dim=1)  # (B,) real tokens, [CLS] ... [SEP]
    positions = torch.arange(batch.input_ids.shape[1])  # (T,)
    words = ((positions >= 1) & (positions < lengths[:, None] - 1)).to(torch.float64)  # (B, T): word tokens
    per_word = words / words.sum(dim=1, keepdim=True)  # (B, T): averages over a sentence's words
    result = {k: [] for k in ("cls_weight", "cls_norm_share", "cls_norm_ratio", "output_norm")}
    with torch.no_grad():
        out = model(*batch.to(device)[:3])
        for layer, block in enumerate(model.layers):
            f = head_value_vectors(block.self_attn, out.hidden_states[layer]).to("cpu", torch.float64)  # (B, H, T, D)
            weights = out.attentions[layer].to("cpu", torch.float64)  # (B, H, T, T), 0 on padding keys
            f_norm = f.norm(dim=-1)  # (B, H, T)
            weighted = weights * f_norm[:, :, None, :]  # (B, H, T, T): ||A[i, j] f(x_j)||
            output = torch.einsum("bhij,bhjd->bhid", weights, f)  # (B, H, T, D)
            rows = {
                "cls_weight": weights[..., 0],
                "cls_norm_share": weighted[..., 0] / weighted.sum(-1).clamp_min(1e-300),
                "output_norm": output.norm(dim=-1),
            }  # each (B, H, T): one value per query row
            for key, value in rows.items():  # mean over each sentence's word queries, then over sentences
                result[key].append((value * per_word[:, None, :]).sum(-1).mean(0))  # (H,)
            word_norm = (f_norm * per_word[:, None, :]).sum(-1)  # (B, H): mean ||f(x_j)|| over the words
            result["cls_norm_ratio"].append((f_norm[..., 0] / word_norm).mean(0))  # (H,)
    return {k: torch.stack(v).numpy() for k, v in result.items()}  # (L, H) each
