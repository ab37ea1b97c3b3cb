"""The build-it-yourself chapter, steps 5 and 6: checkers for the learner's grouped-query attention and
for one decode step with a KV cache.

Like the checkers of steps 1-4 (:mod:`mha.chapters.build_it_yourself.build`), each runs the learner's function on inputs
whose sizes all differ (B, H, G, T, S, Dh), compares it in float64 with a reference that PyTorch
computes, and returns a :class:`~mha.chapters.checking.answers.Verdict` that names the slip when one explains the
result: found against expected, and the one change to make. It never raises, whatever the learner's
code does.

* Step 5, ``gqa_attention(q, k, v, mask=None)``: H query heads share G key/value heads, query head i
  (counting from 0) reading K/V head i // (H/G). Reference: ``F.scaled_dot_product_attention(...,
  enable_gqa=True)``. The cases have H/G = 2 and 3, G = 1 (multi-query) and G = H (multi-head).
* Step 6, ``decode_step(q_new, k_new, v_new, k_cache, v_cache)``: the new token's K and V appended to
  the caches along the sequence axis, its query attending over all S + 1 keys. Reference: the last row
  of a full causal pass over the whole sequence (``is_causal=True``).
"""

from __future__ import annotations

import re

import torch
import torch.nn.functional as F

from ..checking.answers import Message, Verdict, malformed, right, say, wrong
from .build_diagnosis import (
    changed_inputs,
    close,
    diagnose_weights,
    for_case,
    read_returned,
    read_tensor,
    readable,
    run_learner,
)


def _attention(q, k, v, mask=None, scale=None, axis=-1):
    """softmax(q kᵀ · scale + mask) v, the scale 1/√Dh unless given; mask True = may attend.

    Shapes: q (..., T, Dh), k (..., S, Dh), v (..., S, Dh), mask (T, S) -> (..., T, Dh), (..., T, S).
    """
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = q @ k.transpose(-2, -1) * scale  # (..., T, S)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=axis)  # (..., T, S)
    return weights @ v, weights  # (..., T, Dh), (..., T, S)


def _clones(tensors: dict) -> dict:
    return {name: None if t is None else t.clone() for name, t in tensors.items()}


# ------------------------------------------------------------------------------------------------
# Step 5: grouped-query attention
# ------------------------------------------------------------------------------------------------


def expected_groups(num_heads: int, num_kv_heads: int) -> list[int]:
    """The K/V head each query head reads, counting from 0: head i reads head i // (H/G)."""
    return [i // (num_heads // num_kv_heads) for i in range(num_heads)]


def _gqa(q, k, v, mask=None, scale=None):
    """Grouped-query attention, K/V heads expanded with ``repeat_interleave``.

    Shapes: q (B, H, T, Dh), k and v (B, G, S, Dh) -> (B, H, T, Dh), weights (B, H, T, S)."""
    group = q.shape[1] // k.shape[1]  # H / G query heads per K/V head
    k, v = (x.repeat_interleave(group, dim=1) for x in (k, v))  # (B, H, S, Dh)
    return _attention(q, k, v, mask, scale)


def _gqa_cases():
    """``(where, q, k, v, mask)``, B, H, G, T, S, Dh different in each: H/G = 2 and 3, G = 1 and
    G = H, T == S once; a mask blocks something in every row, never a whole row."""
    gen = torch.Generator().manual_seed(5)
    cases = []
    for b, h, g, t, s, dh, masked in [
        (2, 6, 3, 4, 5, 8, False),  # H/G = 2
        (3, 6, 2, 5, 7, 4, True),  # H/G = 3
        (2, 4, 1, 3, 6, 5, True),  # G = 1: multi-query attention
        (1, 3, 3, 4, 6, 2, False),  # G = H: multi-head attention
        (2, 8, 4, 5, 5, 3, True),  # T == S
    ]:
        q = torch.randn(b, h, t, dh, generator=gen, dtype=torch.float64) * 2
        k = torch.randn(b, g, s, dh, generator=gen, dtype=torch.float64) * 2
        v = torch.randn(b, g, s, dh, generator=gen, dtype=torch.float64)
        mask = None
        if masked:
            mask = torch.rand(t, s, generator=gen) < 0.5
            mask[torch.arange(t), torch.arange(t) % s] = True
            mask[torch.arange(t), (torch.arange(t) + 1) % s] = False
        shapes = {"q": tuple(q.shape), "kv": tuple(k.shape), "h": h, "g": g}
        if masked:
            where = say("q {q}, k and v {kv} (H = {h}, G = {g}), a mask", **shapes)
        else:
            where = say("q {q}, k and v {kv} (H = {h}, G = {g}), no mask", **shapes)
        cases.append((where, q, k, v, mask))
    return cases


def _found_groups(output, q, k, v, mask) -> list[int] | None:
    """The K/V head each query head of ``output`` read, if every head matches one; else None."""
    found = []
    for i in range(q.shape[1]):
        match = [j for j in range(k.shape[1]) if close(output[:, i], _attention(q[:, i], k[:, j], v[:, j], mask)[0])]
        if not match:
            return None
        found.append(match[0])
    return found


def _groups_hint(found: list[int], h: int, g: int) -> Message:
    expected = expected_groups(h, g)
    if found == [i % g for i in range(h)]:
        return say(
            "the groups are interleaved: query head i reads K/V head i % G, found {found}, expected "
            "{expected} (head i reads K/V head i // (H/G), counting from 0); k.repeat tiles the K/V heads, "
            "use k.repeat_interleave(H // G, dim=1) (and the same for v)",
            found=found,
            expected=expected,
        )
    return say(
        "groups of the wrong heads: query heads 0 … {last} read K/V heads {found}, expected {expected} "
        "(head i reads K/V head i // (H/G), counting from 0); expand with k.repeat_interleave(H // G, dim=1)",
        last=h - 1,
        found=found,
        expected=expected,
    )


#: Scales a GQA slip uses: the width of all query heads (d_model) or of all K/V heads.
def _gqa_scales(h: int, g: int, dh: int) -> dict:
    return {
        say("1/√(H·Dh) = 1/√{width} (the model width)", width=h * dh): (h * dh) ** -0.5,
        say("1/√(G·Dh) = 1/√{width} (the width of all K/V heads)", width=g * dh): (g * dh) ** -0.5,
    }


def _gqa_case(fn, title: Message, where: Message, q, k, v, mask) -> Verdict | None:
    """The verdict on one case of :func:`check_gqa_attention`, or None when ``fn`` gets it right."""
    (b, h, t, dh), (g, s) = q.shape, k.shape[1:3]
    originals = {"q": q, "k": k, "v": v, "mask": mask}
    passed = _clones(originals)
    result, problem = run_learner(fn, passed["q"], passed["k"], passed["v"], mask=passed["mask"])
    sizes = re.search(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)", problem or "")
    found = {int(sizes.group(1)), int(sizes.group(2))} - {h} if sizes and h in map(int, sizes.groups()) else set()
    if len(found) == 1 and next(iter(found)) % g == 0 and next(iter(found)) != g:  # expanded by the wrong factor
        factor = next(iter(found)) // g
        return wrong(
            title,
            "heads",
            say(
                "for {where}: {problem}; your k and v have {heads} heads, each of the G = {g} repeated "
                "{factor} times: repeat each by H // G = {ratio} (H = {h}), not by {factor}",
                where=where,
                problem=problem,
                heads=factor * g,
                g=g,
                factor=factor,
                ratio=h // g,
                h=h,
            ),
        )
    if sizes and {int(sizes.group(1)), int(sizes.group(2))} == {h, g} and h != g:  # H query heads against G
        return wrong(
            title,
            "heads",
            say(
                "for {where}: {problem}; k and v have G = {g} heads and q has H = {h}: expand each K/V head "
                "to the H/G = {ratio} query heads of its group, k.repeat_interleave(H // G, dim=1), "
                "before the scores (G always divides H)",
                where=where,
                problem=problem,
                g=g,
                h=h,
                ratio=h // g,
            ),
        )
    result, verdict = read_returned(title, where, result, problem, originals, passed)
    if verdict:
        return verdict
    expected_out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)  # (B, H, T, Dh)
    expected_w = _gqa(q, k, v, mask)[1]  # (B, H, T, S)
    shapes = tuple(tuple(r.shape) if isinstance(r, torch.Tensor) else None for r in result)
    if shapes == (tuple(expected_w.shape), tuple(expected_out.shape)) and s != dh:
        return wrong(title, "order", for_case(where, say("output and weights are swapped: return (output, weights)")))
    weights, problem = read_tensor("weights", result[1], expected_w.shape, allow_nan=True)
    if problem and shapes[1] == (b, g, t, s):
        problem = say(
            "{problem}: one row of weights per query head, (B, H, T, S); expand k to H heads first", problem=problem
        )
    elif problem and shapes[1] == (b, h, t, s * (h // g)) and h > g:
        problem = say(
            "{problem}: the keys were repeated along the sequence axis; repeat the K/V heads, dim=1", problem=problem
        )
    output, out_problem = read_tensor("output", result[0], expected_out.shape, allow_nan=True)
    if problem or out_problem:
        return wrong(title, "weights" if problem else "output", for_case(where, problem or out_problem))
    if close(output, expected_out) and close(weights, expected_w):
        if result[0].dtype != q.dtype:
            dtypes = say("the output is {found}, the inputs {expected}", found=result[0].dtype, expected=q.dtype)
            return wrong(title, "dtype", for_case(where, dtypes))
        return None
    found = _found_groups(output, q, k, v, mask)
    if found is not None and found != expected_groups(h, g):
        return wrong(title, "groups", for_case(where, _groups_hint(found, h, g)))
    if not close(weights, expected_w):
        named = next((n for n, c in _gqa_scales(h, g, dh).items() if close(weights, _gqa(q, k, v, mask, c)[1])), None)
        k_all, v_all = (x.repeat_interleave(h // g, dim=1) for x in (k, v))
        hint = None
        if named:
            hint = say(
                "the scores are multiplied by {name}; expected 1/√Dh = 1/√{dh} (Dh = q.shape[-1], the width of one "
                "head)",
                name=named,
                dh=dh,
            )
        hint = hint or diagnose_weights(weights, q, k_all, v_all, mask)
        if hint is None and t == s:
            hint = say("right when T != S but not here, where T == S: does your code treat that case apart?")
        return wrong(title, "weights", for_case(where, hint or say("the weights differ: check the scores and softmax")))
    return wrong(
        title,
        "output",
        for_case(
            where,
            say(
                "the weights are right, the output is not: multiply them by v expanded to H heads "
                "exactly as k is, v.repeat_interleave(H // G, dim=1)"
            ),
        ),
    )


@readable
def check_gqa_attention(fn) -> Verdict:
    """Step 5: ``fn(q, k, v, mask=None)`` returns ``(output, weights)``: H query heads share G K/V
    heads, query head i reading K/V head i // (H/G); mask boolean (T, S), True = may attend.

    Shapes:
        q (B, H, T, Dh), k and v (B, G, S, Dh), G dividing H
        -> output (B, H, T, Dh), weights (B, H, T, S).
    """
    title = say("{name}", name="gqa_attention")
    if not callable(fn):
        return malformed(title, say("give your function, found {type}", type=type(fn).__name__))
    for where, q, k, v, mask in _gqa_cases():
        verdict = _gqa_case(fn, title, where, q, k, v, mask)
        if verdict is not None:
            return verdict
    return right(
        title,
        say(
            "correct: equal to F.scaled_dot_product_attention(..., enable_gqa=True) for H/G = 2 and 3, "
            "G = 1 (multi-query) and G = H (multi-head), with and without a mask"
        ),
    )


# ------------------------------------------------------------------------------------------------
# Step 6: one decode step with a KV cache
# ------------------------------------------------------------------------------------------------

AXES = {
    0: say("the batch axis"),
    1: say("the heads axis"),
    2: say("the sequence axis"),
    3: say("the features axis (Dh)"),
}
APPEND = say("append along the sequence axis: torch.cat([k_cache, k_new], dim=2), the same for v")

DECODE_SLIPS = {
    "old_only": say(
        "the new token does not attend to itself: its keys stop at the old cache; append "
        "k_new and v_new first and attend over all S + 1 keys"
    ),
    "new_only": say(
        "the cache is ignored: the new token attends only to itself; attend over the whole "
        "cache with the new K and V appended, torch.cat([k_cache, k_new], dim=2)"
    ),
    "causal": say(
        "a causal mask on a one-token query keeps only key 0 (torch.ones(1, S + 1).tril(), and "
        "is_causal=True, align it top-left): the new token is the last position and sees every key, so "
        "use no mask"
    ),
    "kv_swapped": say(
        "keys and values are swapped in the attention: the scores use the keys, the output averages the values"
    ),
    "no_scale": say("the scores are not scaled: divide q kᵀ by √Dh (Dh = q_new.shape[-1])"),
    "scale_by_d": say("the scores are divided by Dh: the scale is 1/√Dh"),
    "scale_by_len": say("the scores are divided by √(S + 1), the number of keys: the scale is 1/√Dh"),
    "wrong_axis": say("the softmax runs over the single query (every weight is 1): use dim=-1, over the keys"),
}


def _decode_slip(slip: str, q_new, k_new, v_new, k_cache, v_cache):
    """The decode step's output with one slip built in. Shapes: q_new (B, H, 1, Dh), caches (B, H, S, Dh)."""
    k_all, v_all = torch.cat([k_cache, k_new], dim=2), torch.cat([v_cache, v_new], dim=2)  # (B, H, S+1, Dh)
    dh, n = q_new.shape[-1], k_all.shape[2]
    if slip == "old_only":
        return _attention(q_new, k_cache, v_cache)[0]
    if slip == "new_only":
        return _attention(q_new, k_new, v_new)[0]
    if slip == "causal":
        return _attention(q_new, k_all, v_all, torch.ones(1, n, dtype=torch.bool).tril())[0]
    if slip == "kv_swapped":
        return _attention(q_new, v_all, k_all)[0]
    if slip == "wrong_axis":
        return _attention(q_new, k_all, v_all, axis=-2)[0]
    scale = {"no_scale": 1.0, "scale_by_d": 1.0 / dh, "scale_by_len": n**-0.5}[slip]
    return _attention(q_new, k_all, v_all, scale=scale)[0]


def _decode_cases():
    """``(where, q_past, q_new, k_new, v_new, k_cache, v_cache)``: B, H, S, Dh different in each, S = 1
    once; ``q_past`` holds the earlier tokens' queries, for the full causal pass of the reference."""
    gen = torch.Generator().manual_seed(6)
    cases = []
    for b, h, s, dh in [(2, 3, 5, 4), (4, 2, 6, 3), (3, 2, 1, 6), (1, 4, 7, 5)]:
        q_past, k_cache = (torch.randn(b, h, s, dh, generator=gen, dtype=torch.float64) * 2 for _ in range(2))
        q_new, k_new = (torch.randn(b, h, 1, dh, generator=gen, dtype=torch.float64) * 2 for _ in range(2))
        v_cache = torch.randn(b, h, s, dh, generator=gen, dtype=torch.float64)
        v_new = torch.randn(b, h, 1, dh, generator=gen, dtype=torch.float64)
        where = say("caches {cache} and a new token {new}", cache=(b, h, s, dh), new=(b, h, 1, dh))
        cases.append((where, q_past, q_new, k_new, v_new, k_cache, v_cache))
    return cases


def _cache_problem(name: str, got, expected, old, new, other_expected, others: dict) -> Message | str | None:
    """What is wrong with a returned cache, or None; the word ``"unchanged"`` when it is the old cache.
    ``others`` are the step's other new rows by name (``q_new``, ...), which a slip appends instead."""
    if not isinstance(got, torch.Tensor):
        return say("return the new {name} as a tensor, found {type}", name=name, type=type(got).__name__)
    found = tuple(got.shape)
    if found == tuple(old.shape) and torch.equal(got.detach().cpu().to(old.dtype), old):
        return "unchanged"
    if found != tuple(expected.shape):
        grew = [d for d in range(min(len(found), 4)) if found[d] > old.shape[d]]
        shapes = {"name": name, "expected": tuple(expected.shape), "found": found, "append": APPEND}
        if len(found) == 4 and grew:
            return say(
                "the new {name} must have shape {expected}, found {found} (it grew along dim {dim}, {axis}): {append}",
                **shapes,
                dim=grew[0],
                axis=AXES[grew[0]],
            )
        return say("the new {name} must have shape {expected}, found {found}: {append}", **shapes)
    got = got.detach().cpu().to(torch.float64)
    if close(got, expected):
        return None
    new_name = name.replace("cache", "new")
    if close(got, torch.cat([new, old], dim=2)):
        return say(
            "the new token is put first in {name}: it goes last, torch.cat([{name}, {new}], dim=2)",
            name=name,
            new=new_name,
        )
    if close(got, other_expected):
        return say("k_cache and v_cache are swapped: return (output, k_cache, v_cache)")
    for other, row in others.items():
        if close(got, torch.cat([old, row], dim=2)):
            return say(
                "the row appended to {name} is {other}: append {new}, torch.cat([{name}, {new}], dim=2)",
                name=name,
                other=other,
                new=new_name,
            )
    return say("the new {name} must be the old one with the new token appended: {append}", name=name, append=APPEND)


def _decode_case(fn, title: Message, where: Message, q_past, q_new, k_new, v_new, k_cache, v_cache) -> Verdict | None:
    """The verdict on one case of :func:`check_decode_step`, or None when ``fn`` gets it right."""
    originals = {"q_new": q_new, "k_new": k_new, "v_new": v_new, "k_cache": k_cache, "v_cache": v_cache}
    passed = _clones(originals)
    result, problem = run_learner(fn, *passed.values())
    axis = re.search(r"except in dimension (\d+)", problem or "")
    if axis and int(axis.group(1)) in AXES and int(axis.group(1)) != 2:
        grown = say(
            "for {where}: {problem}: the cache is grown along {axis}; {append}",
            where=where,
            problem=problem,  # ends with the quoted error, “...”
            axis=AXES[int(axis.group(1))],
            append=APPEND,
        )
        return wrong(title, "cache", grown)
    if problem:
        return malformed(title, say("for {where}, {problem}", where=where, problem=problem))
    if isinstance(result, (tuple, list)) and len(result) != 3:
        found = say(
            "return (output, k_cache, v_cache), found a {type} of length {length}",
            type=type(result).__name__,
            length=len(result),
        )
        return malformed(title, for_case(where, found))
    if not isinstance(result, (tuple, list)):
        found = say("return (output, k_cache, v_cache), found a {type}", type=type(result).__name__)
        return malformed(title, for_case(where, found))
    changed = changed_inputs(originals, passed)
    if changed:
        return wrong(title, "inputs", for_case(where, changed))
    expected_k, expected_v = torch.cat([k_cache, k_new], dim=2), torch.cat([v_cache, v_new], dim=2)
    q_all = torch.cat([q_past, q_new], dim=2)  # (B, H, S+1, Dh)
    expected = F.scaled_dot_product_attention(q_all, expected_k, expected_v, is_causal=True)[:, :, -1:]
    output, out_problem = read_tensor("output", result[0], expected.shape, allow_nan=True)
    caches = [
        _cache_problem("k_cache", result[1], expected_k, k_cache, k_new, expected_v, {"q_new": q_new, "v_new": v_new}),
        _cache_problem("v_cache", result[2], expected_v, v_cache, v_new, expected_k, {"q_new": q_new, "k_new": k_new}),
    ]
    if "unchanged" in caches:
        dropped = output is not None and close(output, _decode_slip("old_only", q_new, k_new, v_new, k_cache, v_cache))
        hint = (
            say(
                "the new token's K and V are dropped: it attends the old cache only and the caches come back "
                "unchanged; {append}, attend over the result and return it",
                append=APPEND,
            )
            if dropped
            else say(
                "the caches are returned unchanged: return them with the new token's K and V; {append}", append=APPEND
            )
        )
        return wrong(title, "cache", for_case(where, hint))
    problem = next((c for c in caches if c is not None), None)
    if problem:
        return wrong(title, "cache", for_case(where, problem))
    if out_problem:
        return wrong(title, "output", for_case(where, out_problem))
    if not close(output, expected):
        named = next(
            (x for x in DECODE_SLIPS if close(output, _decode_slip(x, q_new, k_new, v_new, k_cache, v_cache))), None
        )
        hint = DECODE_SLIPS[named] if named else None
        if hint is None and not torch.isfinite(output).all():
            hint = say("the output holds NaN or infinity: is every key blocked?")
        hint = hint or say(
            "the output must be the last row of the full causal pass: softmax(q_new kᵀ / √Dh) v over "
            "the S + 1 keys of the grown cache"
        )
        return wrong(title, "output", for_case(where, hint))
    if result[0].dtype != q_new.dtype:
        dtypes = say("the output is {found}, the inputs {expected}", found=result[0].dtype, expected=q_new.dtype)
        return wrong(title, "dtype", for_case(where, dtypes))
    return None


@readable
def check_decode_step(fn) -> Verdict:
    """Step 6: ``fn(q_new, k_new, v_new, k_cache, v_cache)`` returns ``(output, k_cache, v_cache)``:
    the new token's K and V appended to the caches (sequence axis), its query attending over all of
    them, unmasked. Compared with the last row of a full causal pass over the whole sequence.

    Shapes:
        q_new, k_new, v_new (B, H, 1, Dh), k_cache and v_cache (B, H, S, Dh)
        -> output (B, H, 1, Dh), k_cache and v_cache (B, H, S + 1, Dh).
    """
    title = say("{name}", name="decode_step")
    if not callable(fn):
        return malformed(title, say("give your function, found {type}", type=type(fn).__name__))
    for where, *tensors in _decode_cases():
        verdict = _decode_case(fn, title, where, *tensors)
        if verdict is not None:
            return verdict
    return right(
        title,
        say(
            "correct: equal to the last row of a full causal pass (F.scaled_dot_product_attention, "
            "is_causal=True) for every shape tried, and the caches grown by one token"
        ),
    )
