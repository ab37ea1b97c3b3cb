"""The single-head-limits chapter's hand-built example: one head that splits its attention between two tokens.

In "cat chases mouse" (猫 追 老鼠) the verb needs *both* its subject and its object. Give the verb
one head whose weights put ``split`` on "cat" and ``1 - split`` on "mouse". The head returns the
weighted average of the two value vectors; with ``split = 0.5`` the average is the same whichever
noun came first, so "cat chases mouse" and "mouse chases cat" become indistinguishable.

The value vectors are one-hot on two features, "cat" and "mouse", so every output can be read
off by eye: the output *is* the pair of weights, ``[split, 1 - split]`` or its mirror image.

The uneven split works only because the keys carry **positions**: the head can give "the first
word" more weight whatever that word is. :func:`content_only` takes positions away (the keys are
the words themselves): the weights then follow the words, and the verb gets the same vector in
both sentences whatever the weights. That is permutation equivariance (:func:`permutation_gap`):
without positional information, permuting the tokens only permutes the outputs.

Exercises: :func:`check_split` and :func:`check_content_only` check a reader's answers.
"""

from __future__ import annotations

import math

import torch

from ...attention import scaled_dot_product_attention
from ..checking.answers import Report, Verdict, close, compare_number, read_numbers, say

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
#: Where the split explorer opens: the even split, at which the two sentences look the same.
INITIAL_SPLIT = 0.5


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


def content_only(prefer_cat: float, words=SENTENCE):
    """The verb's head when the keys carry the words but no positions.

    Key j is the one-hot vector of word j's identity (cat, chases, mouse), so the verb's query can
    only prefer a *word*: it scores "cat" ``log(p / (1 - p))`` higher than "mouse" (``p`` =
    ``prefer_cat``), and the mask hides the verb itself. Values as in :func:`verb_attention`.

    Shapes:
        returns output (T, 2) float64 and weights (T, T), T = 3.
    """
    p = min(max(_check_split(prefer_cat), 1e-12), 1.0 - 1e-12)
    vocab = ("cat", "chases", "mouse")
    keys = torch.tensor([[float(w == v) for v in vocab] for w in words], dtype=torch.float64)  # (T, 3)
    query = torch.zeros(len(vocab), dtype=torch.float64)
    query[0] = math.log(p / (1.0 - p))  # the verb prefers the word "cat", wherever it stands
    queries = 50.0 * keys  # (T, 3): other tokens look at their own word
    queries[QUERY] = query
    mask = torch.ones(len(words), len(words), dtype=torch.bool)  # True = may attend
    mask[QUERY, QUERY] = False
    values = torch.tensor([VALUES[w] for w in words], dtype=torch.float64)  # (T, 2)
    return scaled_dot_product_attention(queries, keys, values, mask, scale=1.0)  # (T, 2), (T, T)


def permutation_gap(
    seed: int = 0, *, positions: bool = False, causal: bool = False, seq_len: int = 5, d_model: int = 8
) -> float:
    """Largest difference between ``attention(P x)`` and ``P attention(x)`` for a random permutation P.

    One head with random W_Q, W_K, W_V (float64, drawn from ``seed``) on random tokens ``x``
    (T, D). Without positional information and without a mask the gap is at rounding level (about
    1e-16): self-attention is permutation-equivariant. With ``positions=True`` a fixed position
    vector is added to each *slot* before attention (as an embedding layer does), and the gap is of
    order 1. So it is with ``causal=True``: the causal mask lets each slot see itself and the slots
    before it, which is positional information too.
    """
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(seq_len, d_model, generator=gen, dtype=torch.float64)  # (T, D)
    w_q, w_k, w_v = (torch.randn(d_model, d_model, generator=gen, dtype=torch.float64) for _ in range(3))
    pos = (
        torch.randn(seq_len, d_model, generator=gen, dtype=torch.float64)
        if positions
        else torch.zeros(seq_len, d_model, dtype=torch.float64)
    )
    perm = torch.randperm(seq_len, generator=gen)
    while torch.equal(perm, torch.arange(seq_len)):  # a permutation that moves something
        perm = torch.randperm(seq_len, generator=gen)

    def attend(tokens):
        h = tokens + pos  # (T, D): the position vector belongs to the slot, not to the token
        out, _ = scaled_dot_product_attention(h @ w_q, h @ w_k, h @ w_v, is_causal=causal)  # (T, D)
        return out

    return (attend(x[perm]) - attend(x)[perm]).abs().max().item()


def split_alt(split: float = 0.5) -> str:
    """Alt text of :func:`mha.chapters.heads.figures.render_split`'s figure."""
    r = two_sentences(split)
    a, b = (f"[{v[0]:.1f}, {v[1]:.1f}]" for v in (r["output"], r["output_swapped"]))
    return (
        f"The verb puts weight {split:.1f} on 'cat' and {1 - split:.1f} on 'mouse'; its output is {a} "
        f"in 'cat chases mouse' and {b} in 'mouse chases cat'."
    )


# --------------------------------------------------------------------------------------------
# Exercises
# --------------------------------------------------------------------------------------------


def _check_output(report, part, value, expected, slips) -> None:
    """Mark the output ``part`` (2 numbers, or None when not given) right, or wrong with the hint
    of the first slip ``(wrong value, hint)`` that matches."""
    if value is None:
        report.skipped(part)
        return
    mine, problem = read_numbers(part, value, (2,))
    if problem:
        report.wrong(part, problem, say("give two numbers: the 'cat' feature, then the 'mouse' feature"))
        return
    if close(mine, expected, 1e-3):
        report.right(part)
        return
    for wrong, hint in slips:
        if close(mine, wrong, 1e-3):
            report.wrong(part, say("{value} is not it", value=mine.tolist()), hint)
            return
    report.wrong(
        part,
        say("{value} is not it", value=mine.tolist()),
        say("the output is sum_j a_j v_j: weight times value vector, added up"),
    )


#: The precision exercise 1 asks for the distance: 2 decimals.
DISTANCE_DECIMALS = 2


def check_split(split, output=None, output_swapped=None, distance=None) -> Verdict:
    """Check exercise 1: the verb's output in both sentences, and their distance, for a split.

    Args:
        split: the weight on the first word, a number in [0, 1].
        output: the verb's output (2 numbers: "cat" and "mouse" features) in "cat chases mouse".
        output_swapped: the same in "mouse chases cat".
        distance: the Euclidean distance between the two, to ``DISTANCE_DECIMALS`` = 2 decimals
            (more digits are fine; one decimal fewer, or one unit off, is "close").

    Returns:
        :class:`mha.chapters.checking.answers.Verdict` (prints as a report). Malformed input gives a
        message in the report, never an exception.
    """
    report = Report(say("split λ = {split!r}", split=split))
    s, problem = read_numbers("split", split, ())
    if problem or not 0.0 <= float(s) <= 1.0:
        report.wrong(
            "split",
            problem or say("must lie in [0, 1], found {value}", value=float(s)),
            say("λ is a weight: between 0 and 1"),
        )
        return report.done()
    s = float(s)
    r = two_sentences(s)
    for part, value, expected, other in (
        ("output", output, r["output"], r["output_swapped"]),
        ("output_swapped", output_swapped, r["output_swapped"], r["output"]),
    ):
        slips = [
            (
                other,
                say("that is the other sentence's vector: λ is the weight on the *first* word, whichever noun it is"),
            ),
            (torch.tensor([0.5, 0.5]), say("0.5 / 0.5 is the even split; here the first word gets λ")),
            (torch.tensor([s, s]), say("each noun's value is one-hot: the 'cat' feature gets cat's weight only")),
        ]
        _check_output(report, part, value, expected, slips)
    if distance is None:
        report.skipped("distance")
    else:
        d, problem = read_numbers("distance", distance, ())
        gap = abs(2 * s - 1)
        if problem:
            report.wrong("distance", problem, say("give one number"))
            return report.done()
        d, target = float(d), float(r["distance"])
        verdict = compare_number(d, target, decimals=DISTANCE_DECIMALS)
        slips = (
            (gap, say("that is the gap in one feature; both features differ by it: sqrt(2) times")),
            (2 * gap, say("that sums the absolute gaps (L1); Euclidean: the root of the sum of squares")),
            (2 * gap**2, say("that is the squared distance: take its square root")),
        )
        # a slip is named only when it is told apart from the answer at this precision
        slip = next(
            (
                hint
                for value, hint in slips
                if gap > 0
                and compare_number(d, value, decimals=DISTANCE_DECIMALS).right
                and compare_number(value, target, decimals=DISTANCE_DECIMALS).status == "wrong"
            ),
            None,
        )
        if verdict.right:
            report.right("distance")
        elif slip is None and verdict.status == "close":
            report.close("distance", verdict.message)
        else:
            hint = slip or say("subtract the two vectors, square, add, take the root")
            report.wrong("distance", say("{value:g} is not it", value=d), hint)
    return report.done()


def check_content_only(prefer_cat, output=None, output_swapped=None) -> Verdict:
    """Check exercise 2: the verb's output in both sentences when the keys carry no positions.

    Args:
        prefer_cat: the verb's weight on the word "cat" (a number in [0, 1]).
        output, output_swapped: the verb's output in "cat chases mouse" and "mouse chases cat"
            (2 numbers each: "cat" and "mouse" features).

    Returns:
        :class:`mha.chapters.checking.answers.Verdict`; malformed input gives a message, never an exception.
    """
    report = Report(say("content-only keys, weight on 'cat' = {prefer_cat!r}", prefer_cat=prefer_cat))
    p, problem = read_numbers("prefer_cat", prefer_cat, ())
    if problem or not 0.0 <= float(p) <= 1.0:
        report.wrong(
            "prefer_cat",
            problem or say("must lie in [0, 1], found {value}", value=float(p)),
            say("it is a weight: in [0, 1]"),
        )
        return report.done()
    p = float(p)
    expected = content_only(p, SENTENCE)[0][QUERY]
    positional = two_sentences(p)
    for part, value, by_position in (
        ("output", output, positional["output"]),
        ("output_swapped", output_swapped, positional["output_swapped"]),
    ):
        slips = [
            (by_position, say("positions in the keys do that; weight follows cat")),
            (torch.tensor([1 - p, p]), say("the weight p is on cat, so the 'cat' feature gets p")),
        ]
        _check_output(report, part, value, expected, slips)
    return report.done()
