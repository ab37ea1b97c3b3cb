"""The build-it-yourself chapter, steps 5 and 6: right solutions in several styles pass, each usual slip is
named, nothing raises."""

import math

import pytest
import torch
import torch.nn.functional as F

from mha.chapters.build_it_yourself import build_steps


def said(verdict) -> str:
    """The verdict's text with its line breaks undone (the checkers wrap long lines)."""
    return " ".join(repr(verdict).split())


def attention(q, k, v, mask=None, *, scale=None, axis=-1):
    scores = q @ k.transpose(-2, -1) / (math.sqrt(q.shape[-1]) if scale is None else scale)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=axis)
    return weights @ v, weights


# ---------------------------------------------------------------- step 5: grouped-query attention


def gqa_repeat_interleave(q, k, v, mask=None):
    group = q.shape[1] // k.shape[1]
    return attention(q, k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1), mask)


def gqa_expand_reshape(q, k, v, mask=None):
    b, h, t, dh = q.shape
    g, s = k.shape[1], k.shape[2]
    k = k[:, :, None].expand(b, g, h // g, s, dh).reshape(b, h, s, dh)
    v = v[:, :, None].expand(b, g, h // g, s, dh).reshape(b, h, s, dh)
    return attention(q, k, v, mask)


def gqa_loop(q, k, v, mask=None):
    group = q.shape[1] // k.shape[1]
    outs, weights = [], []
    for i in range(q.shape[1]):
        o, w = attention(q[:, i], k[:, i // group], v[:, i // group], mask)
        outs.append(o)
        weights.append(w)
    return torch.stack(outs, dim=1), torch.stack(weights, dim=1)


def gqa_sdpa_grouped(q, k, v, mask=None):
    """Queries viewed as (B, G, H/G, T, Dh): each K/V head broadcasts over its group."""
    b, h, t, dh = q.shape
    g = k.shape[1]
    qg = q.view(b, g, h // g, t, dh)
    out, w = attention(qg, k[:, :, None], v[:, :, None], mask)
    return out.reshape(b, h, t, dh), w.reshape(b, h, t, -1)


@pytest.mark.parametrize("fn", [gqa_repeat_interleave, gqa_expand_reshape, gqa_loop, gqa_sdpa_grouped])
def test_gqa_right_in_every_style(fn):
    verdict = build_steps.check_gqa_attention(fn)
    assert verdict.ok, verdict
    assert "enable_gqa=True" in said(verdict)


def _gqa_repeat(q, k, v, mask=None):
    group = q.shape[1] // k.shape[1]
    return attention(q, k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1), mask)


def _gqa_expand_wrong_axis(q, k, v, mask=None):
    b, h, t, dh = q.shape
    g, s = k.shape[1], k.shape[2]
    k = k[:, None].expand(b, h // g, g, s, dh).reshape(b, h, s, dh)
    v = v[:, None].expand(b, h // g, g, s, dh).reshape(b, h, s, dh)
    return attention(q, k, v, mask)


def _gqa_reversed_groups(q, k, v, mask=None):
    group = q.shape[1] // k.shape[1]
    k, v = (x.flip(1).repeat_interleave(group, dim=1) for x in (k, v))
    return attention(q, k, v, mask)


def _gqa_not_expanded(q, k, v, mask=None):
    return attention(q, k, v, mask)


def _gqa_scale(width):
    def fn(q, k, v, mask=None):
        group, scale = q.shape[1] // k.shape[1], math.sqrt(width(q, k))
        k, v = (x.repeat_interleave(group, dim=1) for x in (k, v))
        return attention(q, k, v, mask, scale=scale)

    return fn


def _gqa_axis(q, k, v, mask=None):
    group = q.shape[1] // k.shape[1]
    k, v = (x.repeat_interleave(group, dim=1) for x in (k, v))
    return attention(q, k, v, mask, axis=-2)


def _gqa_values_tiled(q, k, v, mask=None):
    group = q.shape[1] // k.shape[1]
    return attention(q, k.repeat_interleave(group, dim=1), v.repeat(1, group, 1, 1), mask)


def _gqa_in_place(q, k, v, mask=None):
    q /= math.sqrt(q.shape[-1])
    group = q.shape[1] // k.shape[1]
    return attention(q, k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1), mask, scale=1.0)


@pytest.mark.parametrize(
    "slip, words",
    [
        (_gqa_repeat, "head i reads K/V head i % G"),
        (_gqa_repeat, "use k.repeat_interleave(H // G, dim=1)"),
        (_gqa_expand_wrong_axis, "interleaved"),
        (_gqa_reversed_groups, "groups of the wrong heads: query heads 0 … 5 read K/V heads [2, 2, 1, 1, 0, 0]"),
        (_gqa_not_expanded, "expand each K/V head"),
        (_gqa_not_expanded, "G always divides H"),
        (_gqa_scale(lambda q, k: q.shape[-1] * q.shape[1]), "the model width"),
        (_gqa_scale(lambda q, k: q.shape[-1] * k.shape[1]), "the width of all K/V heads"),
        (_gqa_scale(lambda q, k: q.shape[-1] ** 2), "1/Dh"),
        (_gqa_scale(lambda q, k: k.shape[2]), "S = the number of keys"),
        (_gqa_axis, "softmax over the keys, dim=-1"),
        (_gqa_values_tiled, "v.repeat_interleave(H // G, dim=1)"),
        (_gqa_in_place, "in place"),
        (lambda q, k, v, mask=None: gqa_repeat_interleave(q, k, v, mask)[0], "pair"),
        (lambda q, k, v, mask=None: gqa_repeat_interleave(q, k, v, mask)[::-1], "swapped"),
        (lambda q, k, v, mask=None: tuple(x.float() for x in gqa_repeat_interleave(q, k, v, mask)), "dtype"),
    ],
)
def test_gqa_slips(slip, words):
    verdict = build_steps.check_gqa_attention(slip)
    assert not verdict.ok and words in said(verdict), verdict


def test_gqa_reference_and_expected_groups():
    assert build_steps.expected_groups(6, 2) == [0, 0, 0, 1, 1, 1]
    assert build_steps.expected_groups(4, 1) == [0, 0, 0, 0]
    for _, q, k, v, mask in build_steps._gqa_cases():
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
        assert torch.allclose(gqa_loop(q, k, v, mask)[0], out)
    shapes = [(q.shape[1], k.shape[1]) for _, q, k, v, _ in build_steps._gqa_cases()]
    ratios = {h // g for h, g in shapes}
    assert {2, 3} <= ratios and any(g == 1 for _, g in shapes) and any(h == g for h, g in shapes)


# ---------------------------------------------------------------- step 6: one decode step


def decode_cat(q_new, k_new, v_new, k_cache, v_cache):
    k_cache = torch.cat([k_cache, k_new], dim=2)
    v_cache = torch.cat([v_cache, v_new], dim=2)
    return attention(q_new, k_cache, v_cache)[0], k_cache, v_cache


def decode_sdpa(q_new, k_new, v_new, k_cache, v_cache):
    k_cache = torch.cat((k_cache, k_new), dim=-2)
    v_cache = torch.cat((v_cache, v_new), dim=-2)
    return F.scaled_dot_product_attention(q_new, k_cache, v_cache), k_cache, v_cache


def decode_preallocated(q_new, k_new, v_new, k_cache, v_cache):
    b, h, s, dh = k_cache.shape
    k_all = k_cache.new_empty(b, h, s + 1, dh)
    v_all = v_cache.new_empty(b, h, s + 1, dh)
    k_all[:, :, :s], k_all[:, :, s:] = k_cache, k_new
    v_all[:, :, :s], v_all[:, :, s:] = v_cache, v_new
    scores = torch.einsum("bhqd,bhkd->bhqk", q_new, k_all) / math.sqrt(dh)
    return torch.einsum("bhqk,bhkd->bhqd", scores.softmax(-1), v_all), k_all, v_all


@pytest.mark.parametrize("fn", [decode_cat, decode_sdpa, decode_preallocated])
def test_decode_right_in_every_style(fn):
    verdict = build_steps.check_decode_step(fn)
    assert verdict.ok, verdict
    assert "is_causal=True" in said(verdict)


def _decode_axis(dim):
    def fn(q_new, k_new, v_new, k_cache, v_cache):
        k_cache = torch.cat([k_cache, k_new], dim=dim)
        v_cache = torch.cat([v_cache, v_new], dim=dim)
        return attention(q_new, k_cache, v_cache)[0], k_cache, v_cache

    return fn


def _decode_old_only(q_new, k_new, v_new, k_cache, v_cache):
    out = attention(q_new, k_cache, v_cache)[0]
    return out, torch.cat([k_cache, k_new], dim=2), torch.cat([v_cache, v_new], dim=2)


def _decode_dropped(q_new, k_new, v_new, k_cache, v_cache):
    return attention(q_new, k_cache, v_cache)[0], k_cache, v_cache


def _decode_unchanged(q_new, k_new, v_new, k_cache, v_cache):
    out = decode_cat(q_new, k_new, v_new, k_cache, v_cache)[0]
    return out, k_cache, v_cache


def _decode_new_only(q_new, k_new, v_new, k_cache, v_cache):
    out = attention(q_new, k_new, v_new)[0]
    return out, torch.cat([k_cache, k_new], dim=2), torch.cat([v_cache, v_new], dim=2)


def _decode_causal_tril(q_new, k_new, v_new, k_cache, v_cache):
    k_all, v_all = torch.cat([k_cache, k_new], dim=2), torch.cat([v_cache, v_new], dim=2)
    mask = torch.ones(1, k_all.shape[2], dtype=torch.bool).tril()
    return attention(q_new, k_all, v_all, mask)[0], k_all, v_all


def _decode_is_causal(q_new, k_new, v_new, k_cache, v_cache):
    k_all, v_all = torch.cat([k_cache, k_new], dim=2), torch.cat([v_cache, v_new], dim=2)
    return F.scaled_dot_product_attention(q_new, k_all, v_all, is_causal=True), k_all, v_all


def _decode_prepended(q_new, k_new, v_new, k_cache, v_cache):
    k_all, v_all = torch.cat([k_new, k_cache], dim=2), torch.cat([v_new, v_cache], dim=2)
    return attention(q_new, k_all, v_all)[0], k_all, v_all


def _decode_swapped_return(q_new, k_new, v_new, k_cache, v_cache):
    out, k_all, v_all = decode_cat(q_new, k_new, v_new, k_cache, v_cache)
    return out, v_all, k_all


def _decode_in_place(q_new, k_new, v_new, k_cache, v_cache):
    q_new /= math.sqrt(q_new.shape[-1])
    k_all, v_all = torch.cat([k_cache, k_new], dim=2), torch.cat([v_cache, v_new], dim=2)
    return attention(q_new, k_all, v_all, scale=1.0)[0], k_all, v_all


def _decode_scale(width):
    def fn(q_new, k_new, v_new, k_cache, v_cache):
        k_all, v_all = torch.cat([k_cache, k_new], dim=2), torch.cat([v_cache, v_new], dim=2)
        return attention(q_new, k_all, v_all, scale=width(q_new, k_all))[0], k_all, v_all

    return fn


@pytest.mark.parametrize(
    "slip, words",
    [
        (_decode_axis(1), "grown along the heads axis"),
        (_decode_axis(-1), "grown along the features axis"),
        (_decode_axis(0), "grown along the batch axis"),
        (_decode_old_only, "does not attend to itself"),
        (_decode_dropped, "K and V are dropped"),
        (_decode_unchanged, "returned unchanged"),
        (_decode_new_only, "the cache is ignored"),
        (_decode_causal_tril, "keeps only key 0"),
        (_decode_is_causal, "use no mask"),
        (_decode_prepended, "it goes last"),
        (_decode_swapped_return, "swapped"),
        (_decode_in_place, "in place"),
        (_decode_scale(lambda q, k: 1.0), "not scaled"),
        (_decode_scale(lambda q, k: q.shape[-1]), "divided by Dh"),
        (_decode_scale(lambda q, k: math.sqrt(k.shape[2])), "the number of keys"),
        (lambda *a: decode_cat(*a)[0], "return (output, k_cache, v_cache)"),
        (lambda *a: (decode_cat(*a)[0][:, :, 0],) + decode_cat(*a)[1:], "output must have shape"),
        (lambda *a: (decode_cat(*a)[0].float(),) + decode_cat(*a)[1:], "dtype"),
    ],
)
def test_decode_slips(slip, words):
    verdict = build_steps.check_decode_step(slip)
    assert not verdict.ok and words in said(verdict), verdict


def test_decode_reference_is_the_last_row_of_the_causal_pass():
    for _, q_past, q_new, k_new, v_new, k_cache, v_cache in build_steps._decode_cases():
        out = decode_cat(q_new, k_new, v_new, k_cache, v_cache)[0]
        q_all = torch.cat([q_past, q_new], dim=2)
        k_all, v_all = torch.cat([k_cache, k_new], dim=2), torch.cat([v_cache, v_new], dim=2)
        mask = torch.ones(q_all.shape[2], k_all.shape[2], dtype=torch.bool).tril()
        assert torch.allclose(out, attention(q_all, k_all, v_all, mask)[0][:, :, -1:])
    sizes = [t[5].shape for t in build_steps._decode_cases()]
    assert any(s[2] == 1 for s in sizes) and all(len(set(s)) >= 3 for s in sizes)


# ---------------------------------------------------------------- junk never raises


def _raises(*args, **kwargs):
    raise ValueError("boom")


def _stub(*args, **kwargs):
    raise NotImplementedError("your code here")


@pytest.mark.parametrize("check", [build_steps.check_gqa_attention, build_steps.check_decode_step])
@pytest.mark.parametrize(
    "junk",
    [
        None,
        42,
        _raises,
        lambda *a, **k: None,
        lambda *a, **k: "text",
        lambda *a, **k: (torch.zeros(2), torch.zeros(3)),
        lambda *a, **k: (torch.zeros(2), torch.zeros(3), torch.zeros(4)),
        lambda *a, **k: (None, None, None),
        lambda *a, **k: tuple(torch.full((1,), float("nan")) for _ in range(3)),
        lambda *a, **k: (torch.ones(2, 3, dtype=torch.long),) * 3,
    ],
)
def test_junk_never_raises(check, junk):
    verdict = check(junk)
    assert not verdict.ok and verdict.lines
    assert all(len(line) <= 74 for line in verdict.lines), verdict


@pytest.mark.parametrize("check", [build_steps.check_gqa_attention, build_steps.check_decode_step])
def test_stub_is_answered_as_not_written(check):
    verdict = check(_stub)
    assert not verdict.ok and verdict.first_error == "not written" and "not written yet" in said(verdict)


def test_verdict_lines_fit_the_page():
    for verdict in (
        build_steps.check_gqa_attention(_gqa_repeat),
        build_steps.check_gqa_attention(_gqa_not_expanded),
        build_steps.check_decode_step(_decode_axis(1)),
        build_steps.check_decode_step(_decode_causal_tril),
        build_steps.check_decode_step(decode_cat),
    ):
        assert all(len(line) <= 74 for line in verdict.lines), verdict
