"""The parameter-analysis chapter's exercise checkers: parameters of an attention layer, the longest context
a KV-cache budget allows, and the most key/value heads that fit. Each returns a
:class:`~mha.chapters.checking.answers.Verdict`.
"""

from __future__ import annotations

import math

from ...counting import attention_params, kv_cache_bytes
from ..checking.answers import fit_to_page, malformed, read_number, right, say, wrong
from ..checking.verdict_i18n import Message
from .configs import BYTES_PER_ELEMENT, GIB, cache_bytes_per_token, divisors
from .models import config
from .tables import format_bytes

# ---------------------------------------------------------------------------------------------
# Exercises: checkers that answer back (a Verdict, never a traceback)
# ---------------------------------------------------------------------------------------------


def _first_match(value: float, slips) -> Message | None:
    for slip, hint in slips:
        if slip is not None and math.isclose(value, slip, rel_tol=1e-6, abs_tol=0.5):
            return hint
    return None


def check_attention_params(answer, d_model: int, num_heads: int, num_kv_heads: int | None = None, bias: bool = True):
    """Exercise: the parameters of one attention layer (``num_kv_heads`` < ``num_heads``: GQA/MQA).

    Recognises the usual slips: W_O left out (:func:`tutorial_kv_params`), the MHA count, biases
    added or forgotten, only one of K and V shrunk, "one head plus W_O" (:func:`tutorial_single_head_count`).
    """
    title = say(
        "parameters of one layer: d_model {d_model}, h {h}, g {g}, bias {bias}",
        d_model=d_model,
        h=num_heads,
        g=num_kv_heads or num_heads,
        bias=bias,
    )
    value, problem = read_number("answer", answer)
    if problem:
        return malformed(title, problem)
    target = attention_params(d_model, num_heads, num_kv_heads, bias)
    if value == target:
        return right(title, say("correct: {count:,}", count=target))
    g = num_heads if num_kv_heads is None else num_kv_heads
    head_dim = d_model // num_heads
    biases = target - attention_params(d_model, num_heads, num_kv_heads, False)
    slips = [
        (
            target - d_model * d_model - (d_model if bias else 0),
            say("W_O is missing: GQA and MQA keep the output projection"),
        ),
        (
            attention_params(d_model, num_heads, None, bias) if g != num_heads else None,
            say("that is multi-head attention; only W_K and W_V shrink, to d_model x g·d_k with g = {g}", g=g),
        ),
        (
            target - biases if bias else None,
            say("the biases are missing: {count:,} of them (Q, K, V and O)", count=biases),
        ),
        (
            None if bias else attention_params(d_model, num_heads, num_kv_heads, True),
            say("bias=False: no biases to add"),
        ),
        (
            (3 * num_heads + g) * head_dim * d_model if g != num_heads else None,
            say("both W_K and W_V shrink, not one"),
        ),
        (
            3 * d_model * head_dim + d_model * d_model,
            say("one head's W_Q, W_K, W_V plus the whole W_O counts no real layer"),
        ),
    ]
    hint = _first_match(value, slips) or say("add W_Q (d·h·d_k), W_K and W_V (d·g·d_k each) and W_O (h·d_k·d)")
    return wrong(title, "count", hint)


def check_max_context(answer, model: str, precision: str = "fp16", budget_bytes: int = 24 * GIB, batch_size=1):
    """Exercise: the longest context whose KV cache fits in ``budget_bytes`` (a whole number of tokens).

    Recognises: K or V forgotten, the layers forgotten, h instead of g, decimal GB, the wrong
    element size, the batch forgotten, rounding up.
    """
    cfg = config(model)
    size = BYTES_PER_ELEMENT[precision]
    title = say(
        "longest context: {model}, {precision}, batch {batch}, budget {budget}",
        model=model,
        precision=precision,
        batch=batch_size,
        budget=format_bytes(budget_bytes),
    )
    value, problem = read_number("answer", answer)
    if problem:
        return malformed(title, problem)
    per_token = cache_bytes_per_token(cfg, size) * batch_size
    target = budget_bytes // per_token
    if value == target:
        return right(
            title,
            say("correct: {tokens:,} tokens ({size} per token)", tokens=target, size=format_bytes(per_token)),
        )
    if value != int(value):
        return wrong(title, "tokens", say("a context is a whole number of tokens: round the quotient down"))
    slips = [
        (target + 1, say("one token too many: round down, the last partial token does not fit")),
        (2 * target, say("keys AND values: the cache holds 2 tensors per layer")),
        (
            cfg.num_layers * target,
            say("every one of the {layers} layers keeps its own cache", layers=cfg.num_layers),
        ),
        (
            budget_bytes // (per_token * cfg.num_heads // cfg.kv_heads) if cfg.kv_heads != cfg.num_heads else None,
            say("only the g = {g} key/value heads are cached, not all h = {h}", g=cfg.kv_heads, h=cfg.num_heads),
        ),
        (budget_bytes * 10**9 // 2**30 // per_token, say("binary units: 1 GiB is 2^30 bytes, not 10^9")),
        (
            budget_bytes // (per_token // size * 4) if size != 4 else None,
            say("{precision} takes {size} bytes, not 4", precision=precision, size=size),
        ),
        (
            budget_bytes // (per_token // size * 2) if size != 2 else None,
            say("{precision} takes {size} byte(s), not 2", precision=precision, size=size),
        ),
        (
            target * batch_size if batch_size > 1 else None,
            say("each of the {count} sequences has its own cache", count=batch_size),
        ),
    ]
    hint = _first_match(value, slips)
    # the answer for another element size of the same exercise (fp16 and 8-bit are both asked): say
    # so first, since a doubled fp16 answer is also the 8-bit one, and blame no slip alone
    other = next(
        (p for p, s in BYTES_PER_ELEMENT.items() if s != size and value == budget_bytes // (per_token // size * s)),
        None,
    )
    if other is not None:
        first = say(
            'that is the answer in {other} ({size} byte(s) per element): pass "{other}"',
            other=other,
            size=BYTES_PER_ELEMENT[other],
        )
        hint = (
            say("{first}; as an answer in {precision}: {hint}", first=first, precision=precision, hint=hint)
            if hint
            else first
        )
    hint = hint or say("divide the budget by 2 · b · L · g · d_k · s bytes per token, then round down")
    return fit_to_page(wrong(title, "tokens", hint))


def check_max_kv_heads(
    answer,
    num_layers=32,
    num_heads=32,
    head_dim=128,
    batch_size=8,
    seq_len=32768,
    precision="fp16",
    budget_bytes: int = 24 * GIB,
):
    """Exercise: the largest number of key/value heads g (a divisor of h) whose cache fits."""
    size = BYTES_PER_ELEMENT[precision]
    title = say(
        "largest g: h {h}, L {layers}, batch {batch}, {tokens:,} tokens, {precision}",
        h=num_heads,
        layers=num_layers,
        batch=batch_size,
        tokens=seq_len,
        precision=precision,
    )
    value, problem = read_number("answer", answer)
    if problem:
        return malformed(title, problem)
    fits = [
        g
        for g in divisors(num_heads)
        if kv_cache_bytes(batch_size, seq_len, num_layers, g, head_dim, size) <= budget_bytes
    ]
    target = max(fits) if fits else 0
    if value == target:
        return right(title, say("correct: g = {g}", g=target))
    if value != int(value) or value < 1:
        return wrong(title, "g", say("g counts key/value heads: a whole number from 1 to h"))
    g = int(value)
    if num_heads % g:
        return wrong(
            title, "g", say("g must divide h = {h}: each key/value head serves h / g query heads", h=num_heads)
        )
    need = kv_cache_bytes(batch_size, seq_len, num_layers, g, head_dim, size)
    if need > budget_bytes:
        return wrong(
            title,
            "g",
            say(
                "g = {g} needs {need}, more than {budget}",
                g=g,
                need=format_bytes(need),
                budget=format_bytes(budget_bytes),
            ),
        )
    return wrong(
        title,
        "g",
        say("g = {g} fits ({need}), but a larger divisor of {h} fits too", g=g, need=format_bytes(need), h=num_heads),
    )
