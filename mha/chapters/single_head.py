"""Chapter 1's hand-built example: one head that splits its attention between two tokens.

In "cat chases mouse" (猫 追 老鼠) the verb needs *both* its subject and its object. Give the verb
one head whose weights put ``split`` on "cat" and ``1 - split`` on "mouse". The head returns the
weighted average of the two value vectors; with ``split = 0.5`` the average is the same whichever
noun came first, so "cat chases mouse" and "mouse chases cat" become indistinguishable.

The value vectors are one-hot on two features, "cat" and "mouse", so every output can be read
off by eye: the output *is* the pair of weights, ``[split, 1 - split]`` or its mirror image.
"""

from __future__ import annotations

import math

import torch

from ..attention import scaled_dot_product_attention

#: The two sentences compared: the same words, the roles swapped.
SENTENCE = ("cat", "chases", "mouse")
SWAPPED = ("mouse", "chases", "cat")
#: The value vector of each word: one feature per noun (the verb carries neither).
FEATURES = ("cat", "mouse")
VALUES = {"cat": (1.0, 0.0), "mouse": (0.0, 1.0), "chases": (0.0, 0.0)}
#: Query position (the verb) and the two positions it attends to.
QUERY, FIRST, LAST = 1, 0, 2
#: The splits offered by the chapter's slider.
SPLITS = tuple(round(0.1 * i, 1) for i in range(11))


def _check_split(split) -> float:
    if isinstance(split, bool) or not isinstance(split, (int, float)):
        raise TypeError(f"split must be a number in [0, 1], found {type(split).__name__}")
    if not 0.0 <= split <= 1.0:
        raise ValueError(f"split must be in [0, 1], found {split}")
    return float(split)


def verb_attention(split: float, words=SENTENCE):
    """The verb's head: weight ``split`` on the first word, ``1 - split`` on the last one.

    Built with :func:`mha.scaled_dot_product_attention`: the keys are one-hot positions, the
    verb's query scores the first word ``log(split / (1 - split))`` higher than the last, and a
    mask hides the verb itself. Other rows attend to themselves.

    Shapes:
        returns output (T, 2) (float64, features "cat" and "mouse") and weights (T, T), T = 3.
    """
    split = _check_split(split)
    p = min(max(split, 1e-12), 1.0 - 1e-12)  # keep the logit finite at 0 and 1
    seq_len = len(words)
    keys = torch.eye(seq_len, dtype=torch.float64)  # (T, T): key j is the one-hot vector of position j
    queries = 50.0 * torch.eye(seq_len, dtype=torch.float64)  # (T, T): others look at themselves
    queries[QUERY] = 0.0
    queries[QUERY, FIRST] = math.log(p / (1.0 - p))
    mask = torch.ones(seq_len, seq_len, dtype=torch.bool)  # True = may attend
    mask[QUERY, QUERY] = False  # the verb looks only at the two nouns
    values = torch.tensor([VALUES[w] for w in words], dtype=torch.float64)  # (T, 2)
    return scaled_dot_product_attention(queries, keys, values, mask, scale=1.0)  # (T, 2), (T, T)


def two_sentences(split: float) -> dict:
    """What the verb's head returns in "cat chases mouse" and in "mouse chases cat".

    Returns:
        dict with ``weights`` (T, T) (the same in both sentences: the head looks at positions),
        ``output`` and ``output_swapped`` (2,) float64 (the verb's output in each sentence) and
        ``distance``, the Euclidean distance between them: ``|2 split - 1| * sqrt(2)``, zero at 0.5.
    """
    out, weights = verb_attention(split, SENTENCE)
    out_swapped, _ = verb_attention(split, SWAPPED)
    return {
        "weights": weights,
        "output": out[QUERY],
        "output_swapped": out_swapped[QUERY],
        "distance": torch.linalg.vector_norm(out[QUERY] - out_swapped[QUERY]).item(),
    }


def split_alt(split: float = 0.5) -> str:
    """Alt text of :func:`mha.viz.single_head.render_split`'s figure."""
    r = two_sentences(split)
    a, b = (f"[{v[0]:.1f}, {v[1]:.1f}]" for v in (r["output"], r["output_swapped"]))
    return (
        f"The verb puts weight {split:.1f} on 'cat' and {1 - split:.1f} on 'mouse'; its output is {a} "
        f"in 'cat chases mouse' and {b} in 'mouse chases cat'."
    )


#: Relations a reader finds in the chapter's two sentences: (query word, attended word, relation).
#: Indices are word positions. One colour per kind of relation.
RELATION_SENTENCES = {
    "cat chases mouse": (
        ("cat", "chases", "mouse"),
        ((1, 0, "subject"), (1, 2, "object"), (2, 1, "previous word")),
    ),
    "The animal didn't cross the street because it was too tired": (
        ("The", "animal", "didn't", "cross", "the", "street", "because", "it", "was", "too", "tired"),
        (
            (7, 1, "coreference"),
            (3, 1, "subject"),
            (3, 5, "object"),
            (10, 7, "modifier"),
            (6, 10, "cause"),
            (6, 3, "cause"),
        ),
    ),
}
RELATION_KINDS = ("subject", "object", "coreference", "modifier", "cause", "previous word")
