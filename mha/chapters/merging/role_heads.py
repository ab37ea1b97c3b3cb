"""The merging-heads chapter's hand-built example: two heads with two roles, "who chases" and "who is chased".

Three-word sentences over four words (:data:`ROLE_VOCAB`). :func:`role_heads_example` sets the
weights of a two-head :class:`mha.chapters.merging.merging.MergedMultiHeadAttention` by hand so that, at the
verb, head 1 returns the subject and head 2 the object; :func:`merge_example` shows what each merge
makes of the two. The explorer's frames are drawn by :func:`mha.chapters.merging.figures.plot_merge_example`.

Shape legend: T = 3 tokens, D = d_model = 8, H = 2 heads, Dh = 4.
"""

from __future__ import annotations

import torch

from ...attention import merge_heads
from .merging import MERGES, MergedMultiHeadAttention, check_merge, mix_heads

#: Words of the hand-built example; a token vector is [one-hot word (4) | one-hot position (3) | 0].
ROLE_VOCAB = ("cat", "chases", "mouse", "dog")
#: The sentences the chapter and its explorer use (three words: subject, verb, object).
ROLE_SENTENCES = ("cat chases mouse", "mouse chases cat", "dog chases mouse")
_ROLE_LEN = 3
_ROLE_SHARPNESS = 30.0  # query scale: softmax weights within 1e-6 of one-hot


def encode_sentence(sentence: str) -> torch.Tensor:
    """Token vectors of a three-word sentence over :data:`ROLE_VOCAB`: word one-hot in features
    0-3, position one-hot in features 4-6, feature 7 zero.

    Shapes:
        returns (1, 3, 8) float32.
    """
    words = sentence.split() if isinstance(sentence, str) else None
    if words is None or len(words) != _ROLE_LEN or any(w not in ROLE_VOCAB for w in words):
        raise ValueError(f"sentence must be {_ROLE_LEN} words from {ROLE_VOCAB}, found {sentence!r}")
    x = torch.zeros(1, _ROLE_LEN, 8)
    for t, word in enumerate(words):
        x[0, t, ROLE_VOCAB.index(word)] = 1.0
        x[0, t, 4 + t] = 1.0
    return x  # (1, T, D)


def role_heads_example(merge: str = "concat") -> MergedMultiHeadAttention:
    """A d_model = 8, two-head module with hand-set weights (d_k = 4, no learning involved).

    Head 1 makes each token look at the *previous* position, head 2 at the *next* one (queries and
    keys read only the position features), and both heads' values are the word one-hot. For the
    verb of "cat chases mouse", head 1 therefore returns "cat" (who chases) and head 2 "mouse"
    (who is chased). The merge layer: concat W_O = identity (features 0-3: head 1's word, 4-7:
    head 2's word); the others' W_up copies the mixed word one-hot into features 0-3. Weighted:
    softmax weights (0.75, 0.25). Gated: the word "chases" pushes the gate towards head 1
    (logits +1.5 / -1.5, weights 0.953 / 0.047); every other word gets (0.5, 0.5).
    Built for the four merges of :data:`mha.chapters.merging.merging.MERGES` (the low-rank control of the
    experiment has no hand-built version).
    """
    check_merge(merge)
    if merge not in MERGES:
        raise ValueError(f"the hand-built example covers the merges {MERGES}, found {merge!r}")
    m = MergedMultiHeadAttention(8, 2, merge)
    with torch.no_grad():
        for p in m.parameters():
            p.zero_()
        for j in range(_ROLE_LEN):  # keys: position one-hot, the same in both heads
            m.k_proj.weight[j, 4 + j] = 1.0
            m.k_proj.weight[4 + j, 4 + j] = 1.0
        for j in range(1, _ROLE_LEN):  # queries: head 1 asks for position t - 1, head 2 for t + 1
            m.q_proj.weight[j - 1, 4 + j] = _ROLE_SHARPNESS
            m.q_proj.weight[4 + j, 4 + j - 1] = _ROLE_SHARPNESS
        for j in range(len(ROLE_VOCAB)):  # values: the word, in both heads
            m.v_proj.weight[j, j] = 1.0
            m.v_proj.weight[4 + j, j] = 1.0
        layer = m.merge_layer
        if merge == "concat":
            layer.out_proj.weight.copy_(torch.eye(8))
        else:
            layer.out_proj.weight[:4].copy_(torch.eye(4))
        if merge == "weighted":
            layer.head_logits.copy_(torch.tensor([3.0, 1.0]).log())
        if merge == "gated":
            layer.gate.weight[:, ROLE_VOCAB.index("chases")] = torch.tensor([1.5, -1.5])
    return m


def merge_example(merge: str, sentence: str) -> dict:
    """Everything the explorer shows for one strategy and one sentence, as float64 CPU tensors.

    Returns:
        dict with ``words`` (3 strings), ``heads`` (H=2, T=3, Dh=4): each head's output,
        ``weights`` (2, 3, 3): each head's attention, ``merged`` (T, D) for concat or (T, Dh) for
        the others: the vector the final projection receives, ``coefficients`` (T, H) or None,
        and ``output`` (T, D).
    """
    m = role_heads_example(merge)
    x = encode_sentence(sentence)
    with torch.no_grad():
        heads, weights = m.head_outputs(x)  # (1, H, T, Dh), (1, H, T, T)
        coefficients = m.merge_layer.coefficients(heads, x)  # (1, T, H) or None
        merged = merge_heads(heads) if merge == "concat" else mix_heads(heads, coefficients)
        output, _ = m(x)  # (1, T, D)

    def cpu(t):
        return None if t is None else t[0].to("cpu", torch.float64)

    return {
        "words": sentence.split(),
        "heads": cpu(heads),
        "weights": cpu(weights),
        "merged": cpu(merged),
        "coefficients": cpu(coefficients),
        "output": cpu(output),
    }


def merge_example_alt(merge: str, sentence: str) -> str:
    """Alt text for an explorer frame."""
    ex = merge_example(merge, sentence)
    verb = ex["merged"][1]
    cols = ROLE_VOCAB if merge != "concat" else [f"head {h + 1} {w}" for h in range(2) for w in ROLE_VOCAB]
    parts = ", ".join(f"{c} {v:.2f}" for c, v in zip(cols, verb.tolist()) if abs(v) >= 0.005)
    return f"Heads' outputs for '{sentence}' and the {merge} merge; at the verb the merged vector is {parts}."
