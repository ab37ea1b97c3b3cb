"""The making-it-fast chapter's exercise checkers: the bytes of an attention matrix, the bytes a decoding
step reads (both accountings), and one step of the online softmax. Each returns a
:class:`~mha.chapters.checking.answers.Verdict`.
"""

from __future__ import annotations

import math

from ...counting import kv_cache_bytes
from ..checking.answers import (
    Verdict,
    close_verdict,
    compare_number,
    malformed,
    matches,
    precision_words,
    read_number,
    right,
    say,
    wrong,
)
from ..checking.verdict_i18n import Message
from ..costs.models import config
from .perf import DECODE_MODEL, attention_matrix_bytes, model_step_weight_bytes

# ---------------------------------------------------------------------------------------------
# Exercise checkers (mha.chapters.checking.answers.Verdict): the wrong step and a hint; a message, never a traceback
# ---------------------------------------------------------------------------------------------


def _read_size(name: str, answer):
    """(value, None) for one finite number >= 0, else (None, what is wrong with it)."""
    value, problem = read_number(name, answer)
    if problem is None and value < 0:
        problem = say(
            "{name} must be >= 0 (a number of bytes or a sum of exponentials), found {value:g}", name=name, value=value
        )
    return (None, problem) if problem else (value, None)


#: The precision each answer is asked for (the exercises say it): bytes exactly, the online
#: softmax's m exactly and its l to 3 decimals.
BYTES_DECIMALS, M_DECIMALS, L_DECIMALS = 0, 0, 3
#: A slip given in other units (GiB, MiB, GB) is recognised within this relative tolerance: those
#: answers are rounded.
UNIT_SLIP_RTOL = 1e-2
#: An answer this close (relative) but not to the asked precision was rounded: "close", not wrong.
ROUNDED_RTOL = 1e-3


def _in_units(unit: str) -> Message:
    """The hint for an answer given in ``unit`` (GiB, MiB, GB) instead of bytes."""
    return say("that is {unit}; give the answer in bytes", unit=unit)


def _verdict(title, step, value, expected, slips, decimals=BYTES_DECIMALS) -> Verdict:
    """Compare ``value`` with ``expected`` to ``decimals`` (:func:`~mha.chapters.checking.answers.compare_number`:
    right to that precision is right, a near miss is "close") and with each slip, ``(wrong value,
    hint)`` at the same precision or ``(wrong value, hint, relative tolerance)`` for rounded units."""
    verdict = compare_number(value, expected, decimals=decimals)
    if verdict.right:
        return right(title)
    for wrong_value, hint, *slip_tol in slips:
        if slip_tol:
            if matches(value, wrong_value, slip_tol[0]):
                return wrong(title, step, hint)
        elif compare_number(value, wrong_value, decimals=decimals).right:
            return wrong(title, step, hint)
    if verdict.status == "close":
        return close_verdict(title, step, verdict.message)
    if matches(value, expected, ROUNDED_RTOL):
        if decimals == 0:
            return close_verdict(title, step, say("close: that is rounded; give it to 0 decimals"))
        words = precision_words(decimals=decimals)
        return close_verdict(title, step, say("close: that is rounded; give it to {words}", words=words))
    ratio = value / expected if expected else math.inf
    if abs(ratio - 1) < 0.05:
        return wrong(title, step, say("within 5 % of the right value, but not it: recount step by step"))
    return wrong(title, step, say("{ratio:.3g} times the right value: recount step by step", ratio=ratio))


def check_matrix_bytes(answer, batch_size: int = 8, num_heads: int = 12, seq_len: int = 4096) -> Verdict:
    """Exercise 1: the bytes of one fp32 (B, H, T, T) attention-weight tensor.

    Recognises the usual slips: elements instead of bytes, 2 bytes (bf16), both kept matrices,
    a missing square, batch or heads, GiB or MiB instead of bytes, bits.
    """
    title = say("bytes of one fp32 (B, H, T, T) tensor")
    value, problem = _read_size("answer", answer)
    if problem:
        return malformed(title, problem)
    b, h, n = batch_size, num_heads, seq_len
    expected = attention_matrix_bytes(b, h, n)
    slips = [
        (expected / 4, say("that is the number of elements; an fp32 element takes 4 bytes")),
        (expected / 2, say("that counts 2 bytes per element (bf16); these weights are fp32, 4 bytes")),
        (2 * expected, say("that is two matrices (the explicit path keeps two); the question asks for one")),
        (expected / n, say("a head's weights are T x T: one per (query, key) pair, so T appears squared")),
        (expected / h, say("the tensor holds every head's matrix: multiply by H")),
        (expected / b, say("the tensor holds every sequence of the batch: multiply by B")),
        (expected / 2**30, _in_units("GiB"), UNIT_SLIP_RTOL),
        (expected / 2**20, _in_units("MiB"), UNIT_SLIP_RTOL),
        (expected / 1e9, _in_units("GB"), UNIT_SLIP_RTOL),
        (8 * expected, say("that is bits; a byte is 8 bits")),
    ]
    return _verdict(title, "bytes", value, expected, slips)


def check_decode_bytes(answer, num_kv_heads: int, batch_size: int = 1, context_len: int = 4096) -> Verdict:
    """Exercise 2: the bytes one decoding step of Llama-2-7B (fp16) reads with G key/value heads.

    The weights a step reads are every weight but the input embedding table, of which it gathers
    the B rows of its new tokens (:func:`model_step_weight_bytes`). Two accountings are right, and
    the verdict says which one the answer used: the weights held as published (only the cache
    changes with G) or a model of the same shape whose W_K and W_V shrink with G
    (:func:`model_decode_step_bytes`, ``fixed_weights=False``). Recognises, in either: the whole
    embedding table read, the cache alone, the weights alone, keys without values, one layer's
    cache, H heads cached instead of G, fp32 instead of fp16, GiB or GB instead of bytes.
    """
    title = say("bytes one decoding step reads, g = {g}", g=num_kv_heads)
    value, problem = _read_size("answer", answer)
    if problem:
        return malformed(title, problem)
    cfg = config(DECODE_MODEL)
    s, layers = 2, cfg.num_layers
    cache = kv_cache_bytes(batch_size, context_len, layers, num_kv_heads, cfg.head_dim, s)
    full = kv_cache_bytes(batch_size, context_len, layers, cfg.num_heads, cfg.head_dim, s)
    accountings = {model_step_weight_bytes(batch_size, DECODE_MODEL, s): say("the weights held as published")}
    if num_kv_heads != cfg.num_heads:
        shrunk = model_step_weight_bytes(batch_size, DECODE_MODEL, s, num_kv_heads)
        accountings[shrunk] = say(
            "a model of the same shape with {g} key/value heads: W_K and W_V shrink", g=num_kv_heads
        )
    for weights, how in accountings.items():
        if compare_number(value, weights + cache, decimals=BYTES_DECIMALS).right:
            return right(title, say("correct ({how})", how=how))
    table = (cfg.vocab_size - batch_size) * cfg.d_model * s  # the embedding rows a step does not gather
    slips = [(cache, say("that is the KV cache alone; every step also reads the weights of the model once"))]
    for weights in accountings:
        expected = weights + cache
        slips += [
            (
                expected + table,
                say("that reads the whole input embedding table; a step gathers one row per new token"),
            ),
            (
                weights,
                say("that is the weights alone; the step also reads the keys and values of every earlier token"),
            ),
            (weights + cache / 2, say("the cache holds keys *and* values: two tensors per layer")),
            (weights + cache / layers, say("each of the {layers} layers has its own cache", layers=layers)),
            (2 * expected, say("Llama-2-7B is stored in fp16: 2 bytes per element, not 4")),
            (expected / 2**30, _in_units("GiB"), UNIT_SLIP_RTOL),
            (expected / 1e9, _in_units("GB"), UNIT_SLIP_RTOL),
        ]
        if num_kv_heads != cfg.num_heads:
            slips.append(
                (weights + full, say("with {g} key/value heads only those are cached, not all h", g=num_kv_heads))
            )
    published = next(iter(accountings))
    return _verdict(title, "bytes", value, published + cache, slips)


#: Exercise 3's row of scores, in two blocks of keys.
ONLINE_SOFTMAX_BLOCKS = ((2.0, 1.0), (4.0, 3.0))


def check_online_softmax(running_max, running_sum, blocks=ONLINE_SOFTMAX_BLOCKS) -> Verdict:
    """Exercise 3: the running maximum m and sum l of exp(score - m) after the last block.

    Recognises: m not updated by a later block, the sum without rescaling the earlier blocks by
    exp(m_old - m_new), the sum of plain exp(score) (no maximum subtracted), the softmax
    weights' sum (1).
    """
    title = say("online softmax over the blocks {blocks}", blocks=blocks)
    m_value, problem = read_number("running_max", running_max)
    if problem:
        return malformed(title, problem)
    l_value, problem = _read_size("running_sum", running_sum)
    if problem:
        return malformed(title, problem)
    scores = [s for block in blocks for s in block]
    m, first_max = max(scores), max(blocks[0])
    m_slips = [(first_max, say("a later block holds a larger score: m is the maximum of every score so far"))]
    stale = sum(math.exp(s - first_max) for s in blocks[0]) + sum(math.exp(s - m) for s in blocks[1])
    l_slips = [
        (stale, say("the first block's sum was taken under its own maximum: multiply it by exp(m_old - m_new)")),
        (sum(math.exp(s) for s in scores), say("that is the sum of exp(score); subtract the running maximum first")),
        (1.0, say("that is the sum of the softmax weights; l is the sum of exp(score - m) before dividing")),
    ]
    steps = (
        ("m", _verdict(title, "m", m_value, m, m_slips if first_max != m else [], M_DECIMALS)),
        ("l", _verdict(title, "l", l_value, sum(math.exp(s - m) for s in scores), l_slips, L_DECIMALS)),
    )
    lines, first_error = [title], None
    for step, verdict in steps:
        lines += [say("  {step}: correct", step=step)] if verdict.ok else list(verdict.lines[1:])
        first_error = first_error or verdict.first_error
    return Verdict(ok=first_error is None, first_error=first_error, lines=tuple(lines))
