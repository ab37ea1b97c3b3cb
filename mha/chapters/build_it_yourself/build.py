"""The build-it-yourself chapter: checkers for the learner's own attention, mask, head split and module.

Each checker runs the learner's code on inputs made to expose the usual slips (shapes that are all
different, T != S != Dh != Dv, so a missing transpose cannot pass by luck; several batch and head counts
and an unbatched (T, Dh) query; a mask that blocks something in every row but never a whole row; scores
large enough that the scale matters), compares it in float64 with a reference that PyTorch computes
(``F.scaled_dot_product_attention``, ``nn.MultiheadAttention``), and returns a
:class:`~mha.chapters.checking.answers.Verdict`. When the result is wrong it recomputes the reference with each
usual slip built in and names the one that matches. It never raises, whatever the learner's code does.
"""

from __future__ import annotations

import re

import torch
import torch.nn.functional as F

from .. import chapter
from ..checking.answers import Message, Verdict, malformed, right, say, wrong
from .build_diagnosis import (
    UNBATCHED_HINT,
    changed_inputs,
    close,
    diagnose_weights,
    for_case,
    raised_hint,
    read_returned,
    read_tensor,
    readable,
    run_learner,
)
from .build_reference import (
    ATTENTION_SLIPS,
    MHA_SLIPS,
    SPLIT_SLIPS,
    attention_with_slip,
    bias_note,
    build_module,
    mha_with_slip,
    random_mask,
    reference_module,
    split_with_slip,
)

# ------------------------------------------------------------------------------------------------
# Step 1: scaled dot-product attention
# ------------------------------------------------------------------------------------------------


def _attention_cases():
    """``(where, q, k, v, mask)``: two leading axes (batch, heads), one, and none (an unbatched
    ``(T, Dh)`` query), T, S, Dh, Dv all different. The unbatched case comes last, so that a function
    that needs a batch axis is told so after it has passed the batched cases."""
    gen = torch.Generator().manual_seed(0)
    cases = []
    for lead, t, s, dh, dv, masked in [
        ((2, 3), 4, 6, 5, 7, False),
        ((2, 3), 4, 6, 5, 7, True),
        ((5,), 3, 2, 8, 3, True),
        ((3,), 5, 5, 4, 6, True),  # T == S: code that is right only when T != S fails here
        ((2,), 4, 4, 3, 5, False),
        ((), 4, 6, 5, 7, True),
    ]:
        q, k = (torch.randn(*lead, n, dh, generator=gen, dtype=torch.float64) * 2 for n in (t, s))
        v = torch.randn(*lead, s, dv, generator=gen, dtype=torch.float64)
        mask = None
        if masked:  # each row blocks something and keeps something
            mask = torch.rand(t, s, generator=gen) < 0.5
            mask[torch.arange(t), torch.arange(t) % s] = True
            mask[torch.arange(t), (torch.arange(t) + 1) % s] = False
        shapes = {"q": tuple(q.shape), "k": tuple(k.shape), "v": tuple(v.shape)}
        if masked:
            shape = say("q {q}, k {k}, v {v}, mask {mask}", **shapes, mask=tuple(mask.shape))
        else:
            shape = say("q {q}, k {k}, v {v}, no mask", **shapes)
        where = say("the unbatched {shapes} (no batch or head axis)", shapes=shape) if not lead else shape
        cases.append((where, q, k, v, mask))
    return cases


def _attention_case(fn, title: Message, where: Message, q, k, v, mask) -> Verdict | None:
    """The verdict on one case of :func:`check_attention`, or None when ``fn`` gets it right."""
    passed = {"q": q.clone(), "k": k.clone(), "v": v.clone(), "mask": None if mask is None else mask.clone()}
    result, problem = run_learner(fn, passed["q"], passed["k"], passed["v"], mask=passed["mask"])
    hint = raised_hint(fn, problem, q, k, v, mask) if problem else None
    if hint:
        return wrong(title, "shapes", say("for {where}, {problem}: {hint}", where=where, problem=problem, hint=hint))
    result, verdict = read_returned(title, where, result, problem, {"q": q, "k": k, "v": v, "mask": mask}, passed)
    if verdict:
        return verdict
    expected_out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # PyTorch's, True = may attend
    expected_w = attention_with_slip(q, k, v, mask)[1]
    shapes = tuple(tuple(r.shape) if isinstance(r, torch.Tensor) else None for r in result)
    if shapes == (tuple(expected_w.shape), tuple(expected_out.shape)) and expected_w.shape != expected_out.shape:
        return wrong(title, "order", for_case(where, say("output and weights are swapped: return (output, weights)")))
    weights, problem = read_tensor("weights", result[1], expected_w.shape, allow_nan=True)
    transposed = expected_w.shape[:-2] + (expected_w.shape[-1], expected_w.shape[-2])
    if problem and isinstance(result[1], torch.Tensor) and tuple(result[1].shape) == transposed:
        problem = say("{problem}: the scores are (T, S), q @ k.transpose(-2, -1), one row per query", problem=problem)
    if problem:
        return wrong(title, "weights", for_case(where, problem))
    if not close(weights, expected_w):
        slips = [s for s in ATTENTION_SLIPS if (mask is not None or "mask" not in s)]
        named = next((s for s in slips if close(weights, attention_with_slip(q, k, v, mask, s)[1])), None)
        hint = ATTENTION_SLIPS[named] if named else diagnose_weights(weights, q, k, v, mask)
        if hint is None and q.shape[-2] == k.shape[-2]:
            hint = say("right when T != S but not here, where T == S: does your code treat that case apart?")
        return wrong(
            title, "weights", for_case(where, hint or say("the weights differ: check the scores, mask, softmax"))
        )
    output, problem = read_tensor("output", result[0], expected_out.shape)
    if problem or not close(output, expected_out):
        return wrong(
            title, "output", for_case(where, problem or say("the weights are right; the output is weights @ v"))
        )
    if result[0].dtype != q.dtype:
        dtypes = say("the output is {found}, the inputs {expected}: keep it", found=result[0].dtype, expected=q.dtype)
        return wrong(title, "dtype", for_case(where, dtypes))
    return None


@readable
def check_attention(fn) -> Verdict:
    """Step 1: ``fn(q, k, v, mask=None)`` returns ``(output, weights)``; mask boolean, True = may attend.

    The cases have two leading axes (batch, heads), one, and none: an unbatched (T, Dh) query with
    (S, Dh) keys and (S, Dv) values. A function that only works with leading axes is told so, with
    the shapes of the unbatched case.

    Shapes:
        q (..., T, Dh), k (..., S, Dh), v (..., S, Dv), mask broadcastable to (..., T, S)
        -> output (..., T, Dv), weights (..., T, S).
    """
    title = say("{name}", name="scaled_dot_product_attention")
    if not callable(fn):
        return malformed(title, say("give your function, found {type}", type=type(fn).__name__))
    for where, q, k, v, mask in _attention_cases():
        verdict = _attention_case(fn, title, where, q, k, v, mask)
        if verdict is not None:
            if q.dim() == 2:  # the batched cases passed: say what differs
                verdict = Verdict(verdict.ok, verdict.first_error, (*verdict.lines, UNBATCHED_HINT.indented(2)))
            return verdict
    return right(
        title,
        say("correct: equal to F.scaled_dot_product_attention on every shape and mask tried, batched and unbatched"),
    )


# ------------------------------------------------------------------------------------------------
# Step 2: the causal mask
# ------------------------------------------------------------------------------------------------


@readable
def check_causal_mask(fn) -> Verdict:
    """Step 2: ``fn(T)`` returns the boolean (T, T) causal mask, True = may attend (key j <= query i)."""
    title = say("{name}", name="causal_mask")
    if not callable(fn):
        return malformed(title, say("give your function, found {type}", type=type(fn).__name__))
    for seq_len in (4, 7, 1):
        expected = torch.ones(seq_len, seq_len, dtype=torch.bool).tril()  # (T, T)
        mask, problem = run_learner(fn, seq_len)
        if problem:
            return malformed(title, say("for T = {t}, {problem}", t=seq_len, problem=problem))
        if not isinstance(mask, torch.Tensor):
            return malformed(
                title,
                say("for T = {t}, your function returned {type}, not a tensor", t=seq_len, type=type(mask).__name__),
            )
        if tuple(mask.shape) != (seq_len, seq_len):
            found = say("expected {expected}, found {found}", expected=(seq_len, seq_len), found=tuple(mask.shape))
            return wrong(title, "shape", say("for T = {t}: {problem}", t=seq_len, problem=found))
        if mask.dtype != torch.bool:
            if mask.is_floating_point() and bool((mask == float("-inf")).any()):
                hint = say(
                    "found {dtype}; return a boolean mask (dtype torch.bool), True = may attend: an additive "
                    "float mask (0 and -inf) is the other convention",
                    dtype=mask.dtype,
                )
            else:
                hint = say(
                    "found {dtype}; return a boolean mask (dtype torch.bool), True = may attend", dtype=mask.dtype
                )
            return wrong(title, "dtype", say("for T = {t}: {problem}", t=seq_len, problem=hint))
        mask = mask.detach().cpu()
        if torch.equal(mask, expected):
            continue
        slips = [
            (
                ~expected,
                say("True must mean *may attend*: that is the blocked mask (nn.MultiheadAttention's attn_mask)"),
            ),
            (expected.tril(-1), say("a token may attend to itself: keep the diagonal (tril, not tril(-1))")),
            (
                torch.ones_like(expected).tril(1),
                say("tril(diagonal=1) also lets each token see the next one: use tril(), diagonal 0"),
            ),
            (expected.T, say("row i is query i, which may see keys j <= i: that is the transpose (use tril)")),
        ]
        hint = next((h for m, h in slips if torch.equal(mask, m)), say("query i may attend key j exactly when j <= i"))
        return wrong(title, "values", say("for T = {t}: {problem}", t=seq_len, problem=hint))
    return right(title, say("correct: True on and below the diagonal for every T tried"))


# ------------------------------------------------------------------------------------------------
# Step 3: split and merge the heads
# ------------------------------------------------------------------------------------------------


@readable
def check_split_merge(split_heads, merge_heads) -> Verdict:
    """Step 3: ``split_heads(x, num_heads)``: (B, T, D) -> (B, H, T, Dh), head i holding features
    i·Dh … (i+1)·Dh − 1 (PyTorch's layout); ``merge_heads``: its inverse, (B, H, T, Dh) -> (B, T, D)."""
    title = say("{first} and {second}", first="split_heads", second="merge_heads")
    for name, fn in (("split_heads", split_heads), ("merge_heads", merge_heads)):
        if not callable(fn):
            return malformed(title, say("give {name} as a function, found {type}", name=name, type=type(fn).__name__))
    gen = torch.Generator().manual_seed(3)
    for b, t, d, h in [(2, 5, 12, 3), (1, 3, 8, 2), (3, 2, 6, 6), (2, 4, 8, 1)]:
        x = torch.randn(b, t, d, generator=gen, dtype=torch.float64)  # (B, T, D)
        where, expected = say("x of shape {shape}, num_heads = {h}", shape=(b, t, d), h=h), split_with_slip(x, h)
        given = x.clone()
        heads, problem = run_learner(split_heads, given, h)
        if problem and "NotImplementedError" not in problem and t % h:
            even = torch.randn(b, h * 2, d, generator=gen, dtype=torch.float64)  # T a multiple of H
            if run_learner(split_heads, even, h)[1] is None:
                problem = say(
                    "{problem}: it runs only when T is a multiple of num_heads, so it cuts the tokens; cut the "
                    "features (the last axis, D = H·Dh) into the heads, view(B, T, H, Dh)",
                    problem=problem,
                )
        if problem:
            return malformed(title, say("split_heads, for {where}: {problem}", where=where, problem=problem))
        changed = changed_inputs({"x": x}, {"x": given})
        if changed:
            return wrong(title, "split_heads", for_case(where, changed))
        got, problem = read_tensor("split_heads(x)", heads, expected.shape)
        if problem:
            found = tuple(heads.shape) if isinstance(heads, torch.Tensor) else None
            if found == (b, t, h, d // h):
                problem = say("{problem}: move the head axis before the tokens, transpose(1, 2)", problem=problem)
            elif found and len(found) == 4 and found[0] == b and found[1] != h and found[1] * found[3] == d:
                problem = say(
                    "{problem}: that is {heads} heads, not num_heads = {h}: use the argument num_heads",
                    problem=problem,
                    heads=found[1],
                    h=h,
                )
            return wrong(title, "split_heads", for_case(where, problem))
        if not torch.equal(got, expected):
            named = next((s for s in SPLIT_SLIPS if torch.equal(got, split_with_slip(x, h, s))), None)
            hint = (
                SPLIT_SLIPS[named]
                if named
                else say("head i (counting from 0) must hold features i·Dh … (i+1)·Dh − 1 of every token")
            )
            return wrong(title, "split_heads", for_case(where, hint))
        # a fresh contiguous (B, H, T, Dh) tensor, as attention's output is: a view of its transpose fails
        heads_given = expected.clone(memory_format=torch.contiguous_format)
        merged, problem = run_learner(merge_heads, heads_given)
        if problem and "view" in problem and h > 1 and t > 1:
            problem = say(
                "{problem}: after transpose(1, 2) the tensor is not contiguous, so .view cannot merge it; "
                "use .reshape(B, T, D) or .contiguous().view(B, T, D)",
                problem=problem,
            )
        if problem:
            return malformed(
                title,
                say(
                    "merge_heads, for a contiguous (B, H, T, Dh) input and {where}: {problem}",
                    where=where,
                    problem=problem,
                ),
            )
        changed = changed_inputs({"heads": expected}, {"heads": heads_given})
        if changed:
            return wrong(title, "merge_heads", for_case(where, changed))
        back, problem = read_tensor("merge_heads(heads)", merged, x.shape)
        if problem:
            found = tuple(merged.shape) if isinstance(merged, torch.Tensor) else None
            if found == (b, h * t, d // h):
                problem = say(
                    "{problem}: that stacks the heads vertically; concatenate them along the features", problem=problem
                )
            elif found == (b, t, d // h) and h > 1:
                problem = say(
                    "{problem}: the heads were averaged or summed; concatenate them along the features, (B, T, H·Dh)",
                    problem=problem,
                )
            return wrong(title, "merge_heads", for_case(where, problem))
        if not torch.equal(back, x):
            hint = say("merge_heads(split_heads(x)) must give x back")
            if h > 1 and t > 1 and torch.equal(back, expected.reshape(b, t, d)):
                hint = say("tokens are mixed: transpose(1, 2) back to (B, T, H, Dh) before the reshape to (B, T, D)")
            return wrong(title, "merge_heads", for_case(where, hint))
    return right(
        title, say("correct: PyTorch's head layout, and merge_heads(split_heads(x)) == x for every shape tried")
    )


# ------------------------------------------------------------------------------------------------
# Step 4: the module
# ------------------------------------------------------------------------------------------------


#: Said when two calls on the same input differ.
RANDOM_HINT = say(
    "two calls on the same input give different outputs: dropout is active after .eval(); use "
    "nn.Dropout, or F.dropout(w, p, training=self.training)"
)

#: Where a case of :func:`check_multi_head_attention` runs: its kind, and the sizes in brackets.
MODULE_CASES = {
    "self-attention": lambda **sizes: say(
        "self-attention (d_model = {d_model}, h = {h}, B = {b}, T = {t}, S = {s})", **sizes
    ),
    "cross-attention": lambda **sizes: say(
        "cross-attention (d_model = {d_model}, h = {h}, B = {b}, T = {t}, S = {s})", **sizes
    ),
    "self-attention with a causal mask": lambda **sizes: say(
        "self-attention with a causal mask (d_model = {d_model}, h = {h}, B = {b}, T = {t}, S = {s})", **sizes
    ),
    "cross-attention with T == S": lambda **sizes: say(
        "cross-attention with T == S (d_model = {d_model}, h = {h}, B = {b}, T = {t}, S = {s})", **sizes
    ),
    "self-attention with a random mask": lambda **sizes: say(
        "self-attention with a random mask (d_model = {d_model}, h = {h}, B = {b}, T = {t}, S = {s})", **sizes
    ),
    "cross-attention with a random mask": lambda **sizes: say(
        "cross-attention with a random mask (d_model = {d_model}, h = {h}, B = {b}, T = {t}, S = {s})", **sizes
    ),
}


@readable
def check_multi_head_attention(cls) -> Verdict:
    """Step 4: ``cls(d_model, num_heads)``, an ``nn.Module`` with ``q_proj``, ``k_proj``, ``v_proj``,
    ``out_proj`` (each ``nn.Linear(d_model, d_model)``, with bias) and ``forward(query, key, value,
    mask=None)``, batch first, mask True = may attend, returning ``(output, weights)``.

    The checker copies a seeded ``nn.MultiheadAttention``'s weights in and compares, in float64:
    self-attention, cross-attention (S != T), a causal mask, and a random mask (one that keeps at
    least one key in every row) in self- and cross-attention, so that a module that reads only
    whether a mask was given (``is_causal=mask is not None``) cannot pass.

    Shapes:
        query (B, T, D), key and value (B, S, D), mask (T, S) -> output (B, T, D), weights (B, H, T, S).
    """
    title = say("{name}", name="MultiHeadAttention")
    if not callable(cls):
        return malformed(title, say("give your class, found {type}", type=type(cls).__name__))
    gen = torch.Generator().manual_seed(4)
    for d_model, num_heads, where, b, t, s, mask_kind in [
        (12, 3, "self-attention", 2, 5, 5, None),
        (12, 3, "cross-attention", 2, 4, 6, None),
        (12, 3, "self-attention with a causal mask", 3, 5, 5, "causal"),
        (8, 2, "cross-attention", 1, 3, 7, None),
        (12, 3, "cross-attention with T == S", 2, 5, 5, None),
        (12, 3, "self-attention with a random mask", 2, 5, 5, "random"),
        (8, 2, "cross-attention with a random mask", 2, 4, 6, "random"),
    ]:
        ref = reference_module(d_model, num_heads)
        module, params, problem, missing = build_module(cls, ref, d_model)
        if problem:
            return wrong(title, problem[0], problem[1])
        verdict = _module_case(module, ref, params, title, where, b, t, s, d_model, num_heads, mask_kind, gen)
        if verdict is not None:
            if missing:  # name both: what the computation gets wrong, and the missing bias
                also = say("{hint}; also, {note}", hint=verdict.lines[-1], note=bias_note(missing))
                return Verdict(False, verdict.first_error, (*verdict.lines[:-1], also))
            return verdict
    if missing:  # the layout of the last case: every case builds the same class
        return wrong(title, missing[0], say("the computation is right without it, but {note}", note=bias_note(missing)))
    if params["fused"]:
        return right(
            title,
            say(
                "correct: equal to nn.MultiheadAttention with 3 heads and with 2, for self-attention, "
                "cross-attention, a causal mask and a random one (one input projection, self.{name}, read as its "
                "in_proj: rows of q, k, v)",
                name=params["fused"],
            ),
        )
    return right(
        title,
        say(
            "correct: equal to nn.MultiheadAttention with 3 heads and with 2, for self-attention, "
            "cross-attention, a causal mask and a random one"
        ),
    )


def _module_case(module, ref, params, title, where, b, t, s, d_model, num_heads, mask_kind, gen):
    """The verdict on one case of :func:`check_multi_head_attention`, or None when it is right."""
    query = torch.randn(b, t, d_model, generator=gen, dtype=torch.float64)
    key = (
        query
        if s == t and not where.startswith("cross")
        else torch.randn(b, s, d_model, generator=gen, dtype=torch.float64)
    )
    # in cross-attention the values are a third tensor: a module that mixes up key and value fails
    value = key if key is query else torch.randn(b, s, d_model, generator=gen, dtype=torch.float64)
    mask = random_mask(t, s, gen) if mask_kind == "random" else None
    if mask_kind == "causal":
        mask = torch.ones(t, s, dtype=torch.bool).tril()  # (T, S)
    where = MODULE_CASES[where](d_model=d_model, h=num_heads, b=b, t=t, s=s)
    originals = {"query": query, "key": key, "value": value, "mask": mask}
    passed = {name: None if x is None else x.clone() for name, x in originals.items()}
    with torch.no_grad():
        expected, expected_w = ref(
            query, key, value, attn_mask=None if mask is None else ~mask, average_attn_weights=False
        )  # nn.MultiheadAttention: True = blocked
        result, problem = run_learner(module, passed["query"], passed["key"], passed["value"], mask=passed["mask"])
    if problem and re.search(r"positional argument|multiple values for argument|unexpected keyword", problem):
        problem = say(
            "{problem}: forward takes (query, key, value, mask=None), as nn.MultiheadAttention's does", problem=problem
        )
    result, verdict = read_returned(title, where, result, problem, originals, passed)
    if verdict:
        return verdict
    weights, problem = read_tensor("weights", result[1], expected_w.shape, allow_nan=True)
    found = tuple(result[1].shape) if isinstance(result[1], torch.Tensor) else None
    if problem and found == (b, t, s):
        problem = say(
            "{problem}: the weights are averaged over the heads; return each head's, (B, H, T, S)", problem=problem
        )
    elif problem and found == (b, d_model // num_heads, t, s) and d_model // num_heads != num_heads:
        problem = say(
            "{problem}: that is {heads} heads of width {width}: head_dim and num_heads are swapped; "
            "view(B, T, num_heads, head_dim)",
            problem=problem,
            heads=found[1],
            width=num_heads,
        )
    elif problem and found == (t, num_heads, b, b if s == t else s) and b != t:
        problem = say(
            "{problem}: your layer reads its inputs as (T, B, D), sequence first; they are batch first, (B, T, D)",
            problem=problem,
        )
    elif problem and s != t and found == (b, ref.num_heads, t, t):
        problem = say("{problem}: {hint}", problem=problem, hint=MHA_SLIPS["kv_from_query"])
    output, out_problem = read_tensor("output", result[0], expected.shape, allow_nan=True)
    if problem or out_problem:
        return wrong(title, "weights" if problem else "output", for_case(where, problem or out_problem))
    if close(output, expected) and close(weights, expected_w):
        return None
    cross = key is not query
    slips = [
        x
        for x in MHA_SLIPS
        if ("mask" not in x or mask is not None)
        and (x not in ("kv_from_query", "kv_swapped", "key_from_value", "value_from_key") or cross)
        and (x != "always_causal" or mask is None)
        and (x != "causal_for_any_mask" or mask_kind == "random")
    ]
    named = next((x for x in slips if close(output, mha_with_slip(params, query, key, value, mask, x)[0])), None)
    if named:
        return wrong(title, "output", for_case(where, MHA_SLIPS[named]))
    if close(output, expected):
        return wrong(title, "weights", for_case(where, say("the output is right, the weights returned are not")))
    with torch.no_grad():
        again, _ = run_learner(module, query.clone(), key.clone(), value.clone(), mask=mask)
    if (
        isinstance(again, (tuple, list))
        and isinstance(again[0], torch.Tensor)
        and not close(again[0].detach().cpu().to(torch.float64), output)
    ):
        return wrong(title, "output", for_case(where, RANDOM_HINT))
    # the reader knows the multi-head-math chapter by its number
    hint = say(
        "check each step against chapter {chapter}: project, split, attend, merge, out_proj",
        chapter=chapter("multi_head_math").number,
    )
    rows = output.var(-1, unbiased=False)
    if torch.allclose(output.mean(-1), torch.zeros_like(rows), atol=1e-6) and torch.allclose(
        rows, torch.ones_like(rows), atol=1e-3
    ):
        hint = say(
            "each output row has mean 0 and variance 1: a LayerNorm inside the module? "
            "The layer returns out_proj(...); normalisation belongs to the block around it"
        )
    if not torch.isfinite(output).all():
        hint = say("the output holds NaN or infinity: is a whole row blocked, or -inf added outside the mask?")
    return wrong(title, "output", for_case(where, hint))
    return None
