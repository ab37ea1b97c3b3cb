"""The pretrained-heads chapter's exercise checkers: a head importance score, and the margins of a twin pair.

:func:`check_importance` checks a head importance score computed from the gradients (Michel et al.
2019), :func:`check_twin_margins` the margins one head gives a twin pair's two referents. Each says
which step is wrong and recognises the usual slips; it never prints the expected numbers.
"""

from __future__ import annotations

import numpy as np
import torch

from ..checking.answers import Message, Verdict, fit_to_page, say
from .pretrained_analysis import importance_scores, token_position

# ---------------------------------------------------------------------------------------------
# Exercise checkers: say which step is wrong, never print the expected numbers
# ---------------------------------------------------------------------------------------------


def Check(ok: bool, first_error: str | None, lines: tuple) -> Verdict:  # noqa: N802 (reads as a type)
    """A :class:`~mha.chapters.checking.answers.Verdict`, each line wrapped to fit the book's code column."""
    return fit_to_page(Verdict(ok, first_error, tuple(lines)))


def _refuse(step: str, message: Message) -> Check:
    return Check(False, step, (message,))


def _as_array(name: str | Message, values, shape: tuple) -> tuple[np.ndarray | None, Message | None]:
    """``values`` as a float array of ``shape``, or None and a message saying what is wrong."""
    if isinstance(values, (str, bytes)):
        return None, say("{name} must be numbers, found a string ({value!r:.40})", name=name, value=values)
    try:
        array = np.asarray(values.detach().cpu() if isinstance(values, torch.Tensor) else values, dtype=float)
    except (TypeError, ValueError):
        return None, say(
            "{name} must be numbers of shape {shape}, found {type}", name=name, shape=shape, type=type(values).__name__
        )
    if array.shape != shape and array.shape == shape[::-1]:
        return None, say(
            "{name} must have shape {expected}, found {found} (rows are layers, columns heads: transpose it)",
            name=name,
            expected=shape,
            found=array.shape,
        )
    if array.shape != shape:
        return None, say(
            "{name} must have shape {expected}, found {found}", name=name, expected=shape, found=array.shape
        )
    if not np.isfinite(array).all():
        return None, say("{name} holds NaN or infinite entries: compute every entry", name=name)
    return array, None


#: The exercises ask for 3 decimals: an answer right to 2 is told so, not given a hint on the method.
ROUNDED, CLOSE = 0.0051, say("close: give them to 3 decimals (they are right to 2)")


def check_importance(answer, gradients, tol: float = 1e-3) -> Check:
    """Check an importance table (L, H) computed by hand from ``gradients`` (N, L, H), the
    derivatives d m_i / d xi_h of :func:`mha.chapters.pretrained.pretrained_pruning.margin_gradients`.

    The right answer is :func:`importance_scores` (``normalize=True``) of the same gradients. Hints
    recognise the usual slips: the signed mean, |mean| instead of mean |.|, no normalisation,
    normalising the whole table or by the sum. Malformed input gets a message, not an exception.
    """
    try:
        grads = None if isinstance(gradients, (str, bytes)) else np.asarray(gradients, dtype=float)
    except (TypeError, ValueError):
        grads = None
    if grads is None or grads.ndim != 3 or not np.isfinite(grads).all():
        return _refuse("gradients", say("gradients must be the (N, L, H) array margin_gradients returned"))
    mine, problem = _as_array(say("your answer"), answer, grads.shape[1:])
    if problem:
        return _refuse("answer", problem)
    expected = importance_scores(grads)
    if np.allclose(mine, expected, atol=tol):
        return Check(
            True, None, (say("importance scores correct: mean |d m_i / d xi_h| over pairs, l2-normalised per layer"),)
        )
    if np.allclose(mine, expected, atol=ROUNDED):
        return Check(False, "importance", (say("importance scores {close}", close=CLOSE),))
    wrong = [f"L{i + 1}" for i in range(mine.shape[0]) if not np.allclose(mine[i], expected[i], atol=tol)]
    hints = _importance_slips(mine, grads, tol) or [
        say("score = mean over pairs of |gradient|, then divide each layer by its l2 norm")
    ]
    return Check(
        False,
        "importance",
        (
            say("importance scores wrong in layers {layers}", layers=", ".join(wrong)),
            *(say("hint: {hint}", hint=h) for h in hints),
        ),
    )


def _importance_slips(mine, grads, tol) -> list[Message]:
    """The usual slips (how the pairs are averaged x how the table is normalised) that give ``mine``."""
    averages = {
        None: np.abs(grads).mean(axis=0),  # right: mean over pairs of |derivative|
        say("you took |mean|: take the absolute value of each pair's derivative first, then the mean"): np.abs(
            grads.mean(axis=0)
        ),
        say(
            "no absolute value: the score averages |dL/d xi_h|, so a head that helps some pairs "
            "and hurts others counts as important"
        ): grads.mean(axis=0),
    }
    norms = {
        None: lambda t: np.linalg.norm(t, axis=1, keepdims=True),  # right: each layer's l2 norm
        say("not normalised: divide each layer's row by its l2 norm"): lambda t: 1.0,
        say("you normalised the whole table: normalise each layer (row) by its own l2 norm"): np.linalg.norm,
        say("you divided by the row's sum: the normalisation uses the l2 norm, sqrt(sum of squares)"): lambda t: t.sum(
            axis=1, keepdims=True
        ),
    }
    for average_hint, table in averages.items():
        for norm_hint, norm in norms.items():
            if (average_hint or norm_hint) and np.allclose(mine, table / norm(table), atol=tol):
                return [h for h in (average_hint, norm_hint) if h]
    return []


def _index(name: str, value, size: int) -> tuple[int | None, Message | None]:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 1 <= value <= size:
        return None, say(
            "{name} must be a whole number from 1 to {size} (counted from 1, as on the page), found {value!r}",
            name=name,
            size=size,
            value=value,
        )
    return int(value) - 1, None


def _twin_slip(mine, twins, i, layer, head, tol) -> Message:
    """Name the usual slip that produces ``mine`` instead of pair i's margins, if one does."""
    expected = twins["margins"][i, :, layer, head]
    pair = twins["pairs"][i]
    if np.allclose(mine, -expected, atol=tol):
        return say("the signs are reversed: margin = weight(pronoun -> referent) - weight(pronoun -> other noun)")
    if np.allclose(mine, expected * [1, -1], atol=tol) or np.allclose(mine, expected * [-1, 1], atol=tol):
        first, second = pair.referents
        return say(
            "the referent changes between the twins ({first!r}, then {second!r}): one margin uses the wrong noun",
            first=first,
            second=second,
        )
    columns = []
    for k, referent in enumerate(pair.referents):
        tokens, weights = twins["tokens"][2 * i + k], twins["maps"][2 * i + k][layer, head]
        other = pair.candidates[1] if referent == pair.candidates[0] else pair.candidates[0]
        p, r, o = (token_position(tokens, w) for w in (pair.pronoun, referent, other))
        columns.append(weights[r, p] - weights[o, p])
    if np.allclose(mine, columns, atol=tol):
        return say("you read the column (how much each noun attends to the pronoun): use the pronoun's row")
    num_pairs, _, num_layers, num_heads = twins["margins"].shape
    for di, dl, dh in ((0, 1, 1), (0, 1, 0), (0, 0, 1), (1, 0, 0)):
        if i + di < num_pairs and layer + dl < num_layers and head + dh < num_heads:
            if np.allclose(mine, twins["margins"][i + di, :, layer + dl, head + dh], atol=tol):
                return say(
                    "these are another head's or pair's margins: the page counts from 1, arrays from 0 (subtract 1)"
                )
    return say("in each sentence, read the pronoun's row of this head's map: referent's weight minus the other noun's")


def check_twin_margins(twins: dict, pair: int, layer: int, head: int, margins, resolves, tol: float = 1e-3) -> Check:
    """Check one head's two margins on one twin pair, and the verdict "resolves", done by hand.

    Args:
        twins: :func:`mha.chapters.pretrained.pretrained_twins.twin_study`'s result.
        pair, layer, head: numbered from 1, as on the page (L4H2 is ``layer=4, head=2``).
        margins: your (m_1, m_2), one per sentence of the pair.
        resolves: your verdict, True or False.
    Returns:
        :class:`Check`; malformed input gets a message, not an exception.
    """
    num_pairs, _, num_layers, num_heads = np.shape(twins["margins"])
    i, problem = _index("pair", pair, num_pairs)
    layer0, problem = (None, problem) if problem else _index("layer", layer, num_layers)
    head0, problem = (None, problem) if problem else _index("head", head, num_heads)
    if problem:
        return _refuse("arguments", problem)
    mine, problem = _as_array("margins", margins, (2,))
    if problem:
        return _refuse("margins", problem)
    if not isinstance(resolves, (bool, np.bool_)):
        return _refuse("resolves", say("resolves must be True or False, found {value!r}", value=resolves))
    expected = twins["margins"][i, :, layer0, head0]
    lines, first = [say("pair {pair}, L{layer}H{head}", pair=pair, layer=layer, head=head)], None
    if np.allclose(mine, expected, atol=tol):
        lines.append(say("  margins  correct"))
    elif np.allclose(mine, expected, atol=ROUNDED):
        first, lines = "margins", [*lines, say("  margins  {close}", close=CLOSE)]
    else:
        first = "margins"
        lines += [say("  margins  wrong"), say("  hint: {hint}", hint=_twin_slip(mine, twins, i, layer0, head0, tol))]
    right_verdict = bool((expected > 0).all())
    if bool(resolves) == right_verdict:
        lines.append(say("  resolves correct"))
    elif first and bool(resolves) == bool((mine > 0).all()):
        lines += [
            say("  resolves wrong"),
            say("  hint: {hint}", hint=say("it follows from your margins: fix them first")),
        ]
    else:
        first = first or "resolves"
        lines += [
            say("  resolves wrong"),
            say("  hint: {hint}", hint=say("a head resolves a pair only when *both* margins are positive")),
        ]
    lines.append(say("all steps correct") if first is None else say("first step to fix: {first}", first=first))
    return Check(first is None, first, tuple(lines))
