"""The pretrained-heads chapter's coreference test on Winograd-style twins: does any head send a pronoun
to its referent?

A twin pair is two sentences that differ in one word, and that word decides which of two nouns the
pronoun names: *The trophy didn't fit into the suitcase because it was too big / small.* The data
set (``mha/data/winograd_twins.json``, :func:`load_twin_pairs`) was written for the course; a few
pairs adapt well-known Winograd schemas. Pronoun and nouns are single tokens of the model's
tokenizer (checked by :func:`token_problems` and the tests).

For each head and each sentence, the *margin* is the weight from the pronoun to the right noun minus
the weight to the other noun. A head **resolves** a pair when both margins are positive: a head that
always prefers the same noun, or the nearer one, resolves no pair at all. :func:`twin_study` computes
the margins of every head on every pair, and the same test for the token vectors the layers output
(cosine similarity instead of attention weight).

Shape legend: N pairs, L layers, H heads per layer.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from ...bert import BertEncoder, tokenize
from .. import DATA_DIR
from .pretrained_analysis import attention_maps, token_position

#: The twin pairs written for the course (see :func:`load_twin_pairs`).
WINOGRAD_TWINS = DATA_DIR / "winograd_twins.json"


class TwinPair(NamedTuple):
    """Two sentences that differ in one word; ``referents[k]`` is what ``pronoun`` names in
    ``sentences[k]``, one of the two ``candidates`` (tokens as the tokenizer writes them)."""

    pronoun: str
    candidates: tuple[str, str]
    sentences: tuple[str, str]
    referents: tuple[str, str]


def load_twin_pairs(path=None) -> list[TwinPair]:
    """The twin pairs of ``mha/data/winograd_twins.json``, checked for consistency.

    Raises ValueError naming the pair when its two sentences do not differ in exactly one word,
    or its referents are not the two candidates, one per sentence.
    """
    path = WINOGRAD_TWINS if path is None else Path(path)
    pairs = [
        TwinPair(p["pronoun"], tuple(p["candidates"]), tuple(p["sentences"]), tuple(p["referents"]))
        for p in json.loads(path.read_text())["pairs"]
    ]
    for i, pair in enumerate(pairs):
        words = [s.split() for s in pair.sentences]
        differ = len(words[0]) == len(words[1]) and sum(a != b for a, b in zip(*words)) == 1
        if not differ:
            raise ValueError(f"pair {i} ({pair.sentences[0]!r}): its two sentences must differ in exactly one word")
        if len(pair.candidates) != 2 or sorted(pair.referents) != sorted(pair.candidates):
            raise ValueError(
                f"pair {i}: the referents {pair.referents} must be the candidates {pair.candidates}, one each"
            )
    return pairs


def token_problems(tokenizer, pairs) -> list[str]:
    """Every sentence whose pronoun or candidates are not exactly one token occurring once."""
    problems = []
    for i, pair in enumerate(pairs):
        for tokens in tokenize(tokenizer, list(pair.sentences)).tokens:
            for word in (pair.pronoun, *pair.candidates):
                if tokens.count(word) != 1:
                    problems.append(f"pair {i}: {word!r} is not one token occurring once in {tokens}")
    return problems


def _cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


def twin_study(model: BertEncoder, tokenizer, pairs=None) -> dict:
    """Every head's margins on every twin pair, and the token vectors' margins.

    Returns a dict:
        ``margins`` (N, 2, L, H): weight(pronoun -> referent) - weight(pronoun -> other noun),
        for the first and the second sentence of each pair;
        ``resolves`` (N, L, H) bool: both margins positive;
        ``moves`` (N, L, H) bool: the sum of the two margins is positive, i.e. the head's weight
        moves toward the right noun when the word changes (weaker than resolving);
        ``vector_margins`` (N, 2, L + 1): cos(pronoun, referent) - cos(pronoun, other noun) of the
        token vectors after the embeddings and after each layer;
        ``vector_resolves`` (N, L + 1) bool;
        ``pairs``, and ``tokens`` and ``maps`` ((L, H, T, T) weights) of sentence k of pair i at
        index 2 i + k.
    """
    pairs = load_twin_pairs() if pairs is None else pairs
    batch = tokenize(tokenizer, [s for pair in pairs for s in pair.sentences])
    device = next(model.parameters()).device
    with torch.no_grad():
        out = model(*batch.to(device)[:3])
    weights = out.attentions.to("cpu", torch.float64).numpy()  # (L, 2N, H, T, T)
    hidden = out.hidden_states.to("cpu", torch.float64).numpy()  # (L+1, 2N, T, D)
    num_layers, _, num_heads = weights.shape[:3]
    margins = np.zeros((len(pairs), 2, num_layers, num_heads))
    vector_margins = np.zeros((len(pairs), 2, num_layers + 1))
    for i, pair in enumerate(pairs):
        for k, referent in enumerate(pair.referents):
            b, tokens = 2 * i + k, batch.tokens[2 * i + k]
            other = pair.candidates[1] if referent == pair.candidates[0] else pair.candidates[0]
            p, r, o = (token_position(tokens, w) for w in (pair.pronoun, referent, other))
            margins[i, k] = weights[:, b, :, p, r] - weights[:, b, :, p, o]  # (L, H)
            vectors = hidden[:, b]  # (L+1, T, D)
            vector_margins[i, k] = _cosine(vectors[:, p], vectors[:, r]) - _cosine(vectors[:, p], vectors[:, o])
    return {
        "pairs": list(pairs),
        "tokens": batch.tokens,
        "maps": [weights[:, b, :, : len(t), : len(t)] for b, t in enumerate(batch.tokens)],
        "margins": margins,
        "resolves": (margins > 0).all(axis=1),
        "moves": margins.sum(axis=1) > 0,
        "vector_margins": vector_margins,
        "vector_resolves": (vector_margins > 0).all(axis=1),
    }


def binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p): how often chance does at least as well."""
    return sum(math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(k, n + 1))


def held_out_best(resolves: np.ndarray, choose, judge) -> dict:
    """Pick the head that resolves the most pairs among ``choose`` (indices), then count what it
    resolves among ``judge``: the honest score of "the best head", which was picked on other pairs.

    Shapes: resolves (N, L, H) bool. Returns ``head`` (layer, head), ``chosen`` and ``judged`` counts.
    """
    counts = resolves[list(choose)].sum(axis=0)  # (L, H)
    layer, head = np.unravel_index(int(counts.argmax()), counts.shape)
    return {
        "head": (int(layer), int(head)),
        "chosen": int(counts[layer, head]),
        "judged": int(resolves[list(judge), layer, head].sum()),
    }


# --------------------------------------------------------------------------------------------
# Your own sentence: every head of the model on any text (the pretrained-heads chapter's explorer)
# --------------------------------------------------------------------------------------------

#: The longest sentence the explorer shows, in tokens with [CLS] and [SEP] (its labels stay readable).
MAX_SENTENCE_TOKENS = 40


def sentence_attention(model, tokenizer, sentence, *, max_tokens: int = MAX_SENTENCE_TOKENS):
    """Every head's weights on one sentence the reader typed.

    Bad input is refused with one line that names the problem: a ValueError for an empty sentence
    or one longer than ``max_tokens`` tokens, a TypeError for anything but a string.

    Returns:
        tokens (T strings, [CLS] ... [SEP]) and weights, float64 numpy (L, H, T, T).
    """
    if not isinstance(sentence, str):
        raise TypeError(f"sentence must be a string, found {type(sentence).__name__}")
    text = " ".join(sentence.split())
    if not text:
        raise ValueError("sentence is empty: type a sentence and press Enter")
    count = len(tokenizer.encode(text).tokens)
    if count > max_tokens:
        raise ValueError(
            f"sentence has {count} tokens with [CLS] and [SEP], more than the {max_tokens} the figure "
            "can label: shorten it"
        )
    tokens, maps = attention_maps(model, tokenizer, [text])
    return tokens[0], maps[0]
