"""The build-it-yourself checkers: a right solution passes, each usual slip is named, nothing raises."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from mha.chapters.build_it_yourself import build, build_diagnosis, build_reference
from mha.chapters.checking import answers


def said(verdict) -> str:
    """The verdict's text with its line breaks undone (the checkers wrap long lines)."""
    return " ".join(repr(verdict).split())


# ---------------------------------------------------------------- step 1: attention


def attention(q, k, v, mask=None, *, scale=None, axis=-1, invert=False, use_mask=True):
    scores = q @ k.transpose(-2, -1) / (math.sqrt(q.shape[-1]) if scale is None else scale)
    if mask is not None and use_mask:
        scores = scores.masked_fill(mask if invert else ~mask, float("-inf"))
    weights = scores.softmax(dim=axis)
    return weights @ v, weights


def test_attention_right():
    verdict = build.check_attention(attention)
    assert verdict.ok, verdict
    assert "F.scaled_dot_product_attention" in said(verdict)


@pytest.mark.parametrize(
    "slip, words",
    [
        (lambda q, k, v, mask=None: attention(q, k, v, mask, scale=1.0), "not scaled"),
        (lambda q, k, v, mask=None: attention(q, k, v, mask, scale=q.shape[-1]), "divided by Dh"),
        (lambda q, k, v, mask=None: attention(q, k, v, mask, axis=-2), "over the queries"),
        (lambda q, k, v, mask=None: attention(q, k, v, mask, invert=True), "mask is inverted"),
        (lambda q, k, v, mask=None: attention(q, k, v, mask, use_mask=False), "mask is not applied"),
        (lambda q, k, v, mask=None: (attention(q, k, v, mask)[1] @ k, attention(q, k, v, mask)[1]), "output"),
        (lambda q, k, v, mask=None: attention(q, k, v, mask)[0], "pair"),
        (
            lambda q, k, v, mask=None: (attention(q, k, v, mask)[0], attention(q, k, v, mask)[1].transpose(-2, -1)),
            "(T, S)",
        ),
        (lambda q, k, v, mask=None: tuple(t.float() for t in attention(q, k, v, mask)), "dtype"),
    ],
)
def test_attention_slips(slip, words):
    verdict = build.check_attention(slip)
    assert not verdict.ok and words in said(verdict), verdict


def _in_place(q, k, v, mask=None):
    q /= math.sqrt(q.shape[-1])  # changes the caller's tensor
    return attention(q, k, v, mask, scale=1.0)


def _causal_when_square(q, k, v, mask=None):
    if q.shape[-2] == k.shape[-2]:  # wrong: a mask nobody asked for
        causal = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
        mask = causal if mask is None else mask & causal
    return attention(q, k, v, mask)


def _mask_after_softmax(q, k, v, mask=None):
    weights = attention(q, k, v)[1]
    weights = weights if mask is None else weights.masked_fill(~mask, 0.0)
    return weights @ v, weights


def _fill_zero(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = scores if mask is None else scores.masked_fill(~mask, 0.0)
    weights = scores.softmax(-1)
    return weights @ v, weights


def _log_softmax(q, k, v, mask=None):
    out, weights = attention(q, k, v, mask)
    return out, weights.log()


def _scale_after(q, k, v, mask=None):
    weights = attention(q, k, v, mask, scale=1.0)[1] / math.sqrt(q.shape[-1])
    return weights @ v, weights


def _softmax_dim_1(q, k, v, mask=None):
    return attention(q, k, v, mask, axis=1) if q.dim() == 4 else attention(q, k, v, mask)


@pytest.mark.parametrize(
    "slip, words",
    [
        (_in_place, "changed its input q in place"),
        (_causal_when_square, "T == S"),
        (lambda q, k, v, mask=None: attention(q, k, v, mask, scale=math.sqrt(k.shape[-2])), "1/√S"),
        (lambda q, k, v, mask=None: attention(q, k, v, mask, scale=math.sqrt(v.shape[-1])), "1/√Dv"),
        (lambda q, k, v, mask=None: attention(q, k, v, mask, scale=0.3), "multiplied by 3.333"),
        (_mask_after_softmax, "after the softmax"),
        (_fill_zero, "blocked keys get weight"),
        (_log_softmax, "log_softmax"),
        (_scale_after, "factor applied after the softmax"),
        (_softmax_dim_1, "over a batch or head axis (dim -3 of 4)"),
        (lambda q, k, v, mask=None: attention(q, k, v, mask)[::-1], "swapped"),
    ],
)
def test_attention_diagnoses_from_properties(slip, words):
    """Slips outside the list are named by what the code did, found against expected."""
    verdict = build.check_attention(slip)
    assert not verdict.ok and words in said(verdict), verdict


def test_scale_read_back_from_the_weights():
    gen = torch.Generator().manual_seed(1)
    q, k = torch.randn(2, 4, 5, generator=gen, dtype=torch.float64), torch.randn(2, 6, 5, generator=gen)
    k = k.double()
    for c in (1.0, 0.2, 3.0):
        weights = (q @ k.transpose(-2, -1) * c).softmax(-1)
        found = build_diagnosis.infer_scale(weights, q @ k.transpose(-2, -1), torch.ones(2, 4, 6, dtype=torch.bool))
        assert math.isclose(found, c, rel_tol=1e-9)
    scores, visible = q @ k.transpose(-2, -1), torch.ones(2, 4, 6, dtype=torch.bool)
    assert build_diagnosis.infer_scale(torch.full((2, 4, 6), 1 / 6), scores, visible) == 0.0  # uniform: c = 0
    linear = scores - scores.amin(-1, keepdim=True) + 1  # positive, but not a softmax of anything scaled
    assert build_diagnosis.infer_scale(linear / linear.sum(-1, keepdim=True), scores, visible) is None


def test_attention_never_raises():
    def raises(q, k, v, mask=None):
        raise RuntimeError("shapes do not match")

    def nan(q, k, v, mask=None):
        out, w = attention(q, k, v, mask)
        return out * float("nan"), w

    def stub(q, k, v, mask=None):
        raise NotImplementedError("your code here")

    for fn, words in [
        (raises, "RuntimeError: “shapes do not match”"),
        (nan, "NaN"),
        (stub, "not written yet"),
        (lambda q, k, v, mask=None: (1, 2), "must be a tensor"),
        (lambda q, k, v, mask=None: None, "pair"),
        (lambda q, k, v, mask=None: (attention(q, k, v, mask)[0].long(), attention(q, k, v, mask)[1]), "float"),
        ("not a function", "give your function"),
    ]:
        verdict = build.check_attention(fn)
        assert not verdict.ok and words in said(verdict), (words, verdict)
        assert all(len(line) <= answers.WIDTH == 74 for line in verdict.lines[1:])  # fits the page


def test_attention_tries_an_unbatched_query():
    """A (T, Dh) query with (S, Dh) keys and (S, Dv) values: a right function passes it, one that needs
    a batch axis is told so, with the unbatched shapes."""
    unbatched = [case for case in build._attention_cases() if case[1].dim() == 2]
    assert len(unbatched) == 1 and unbatched[0][4] is not None  # with a mask, as the batched cases
    where, q, k, v, mask = unbatched[0]
    assert q.shape == (4, 5) and k.shape == (6, 5) and v.shape == (6, 7) and "unbatched" in where
    out, weights = attention(q, k, v, mask)
    assert build._attention_case(attention, "t", where, q, k, v, mask) is None
    assert torch.allclose(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    verdict = build.check_attention(attention)
    assert verdict.ok and "batched and unbatched" in said(verdict), verdict

    def mask_with_batch_axis(q, k, v, mask=None):  # works for (..., T, S) scores with leading axes only
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            scores = scores.masked_fill(~mask.unsqueeze(0), float("-inf"))
        weights = scores.softmax(dim=-1)
        return weights @ v, weights

    def flattens_leading_axes(q, k, v, mask=None):  # torch.bmm needs one leading axis: raises on 2-D input
        lead = q.shape[:-2]
        qf, kf, vf = (t.flatten(0, -3) for t in (q, k, v))
        weights = torch.bmm(qf, kf.transpose(1, 2)) / math.sqrt(q.shape[-1])
        if mask is not None:
            weights = weights.masked_fill(~mask, float("-inf"))
        weights = weights.softmax(dim=-1)
        return torch.bmm(weights, vf).reshape(*lead, q.shape[-2], v.shape[-1]), weights.reshape(
            *lead, *weights.shape[1:]
        )

    for fn, words in [
        (mask_with_batch_axis, "weights must have shape (4, 6), found (1, 4, 6)"),
        (flattens_leading_axes, "IndexError"),
    ]:
        assert build._attention_case(fn, "t", "batched", *build._attention_cases()[1][1:]) is None  # batched: right
        verdict = build.check_attention(fn)
        text = said(verdict)
        assert not verdict.ok and words in text, verdict
        assert "the unbatched q (4, 5), k (6, 5), v (6, 7), mask (4, 6)" in text, verdict
        assert "works with batch and head axes but not without them" in text, verdict


def test_attention_reference_is_pytorchs():
    for _, q, k, v, mask in build._attention_cases():
        out, weights = build_reference.attention_with_slip(q, k, v, mask)
        assert torch.allclose(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
        assert torch.allclose(weights.sum(dim=-1), torch.ones(weights.shape[:-1], dtype=torch.float64))
        if mask is not None:  # every row blocks something and keeps something
            assert bool(mask.any(dim=-1).all()) and not bool(mask.all(dim=-1).any())


# ---------------------------------------------------------------- step 2: causal mask


def test_causal_mask():
    assert build.check_causal_mask(lambda t: torch.ones(t, t, dtype=torch.bool).tril()).ok
    slips = [
        (lambda t: torch.ones(t, t, dtype=torch.bool).triu(1), "blocked mask"),
        (lambda t: torch.ones(t, t, dtype=torch.bool).tril(-1), "keep the diagonal"),
        (lambda t: torch.ones(t, t, dtype=torch.bool).triu(), "transpose"),
        (lambda t: torch.ones(t, t).tril(), "torch.bool"),
        (lambda t: torch.full((t, t), float("-inf")).triu(1), "additive float mask"),
        (lambda t: torch.ones(t, t + 1, dtype=torch.bool), "shape"),
        (lambda t: [[True]], "not a tensor"),
        (lambda t: 1 / 0, "ZeroDivisionError"),
    ]
    for fn, words in slips:
        verdict = build.check_causal_mask(fn)
        assert not verdict.ok and words in said(verdict), (words, verdict)


# ---------------------------------------------------------------- step 3: split and merge


def split(x, num_heads):
    b, t, d = x.shape
    return x.view(b, t, num_heads, d // num_heads).transpose(1, 2)


def merge(x):
    b, h, t, dh = x.shape
    return x.transpose(1, 2).reshape(b, t, h * dh)


def test_split_merge():
    assert build.check_split_merge(split, merge).ok
    slips = [
        (lambda x, h: x.reshape(x.shape[0], h, x.shape[1], -1), merge, "tokens are mixed"),
        (lambda x, h: x.view(*x.shape[:2], -1, h).permute(0, 3, 1, 2), merge, "features of different heads"),
        (lambda x, h: x.view(*x.shape[:2], h, -1), merge, "transpose(1, 2)"),
        (split, lambda x: x.reshape(x.shape[0], x.shape[2], -1), "transpose(1, 2) back"),
        (split, lambda x: x.reshape(x.shape[0], -1, x.shape[-1]), "vertically"),
        (split, lambda x: x.flip(1).transpose(1, 2).reshape(x.shape[0], x.shape[2], -1), "give x back"),
        (split, lambda x: 1 / 0, "ZeroDivisionError"),
        (lambda x, h: None, merge, "must be a tensor"),
        (split, "merge", "give merge_heads"),
        # a view of the transposed heads works on split's own output but not on a
        # contiguous (B, H, T, Dh) tensor, such as attention's output
        (split, lambda x: x.transpose(1, 2).view(x.shape[0], x.shape[2], -1), "not contiguous"),
        (lambda x, h: split(x.mul_(1.0).add_(0.0).div_(2.0).mul_(2.0).add_(1.0), h), merge, "in place"),
    ]
    for s, m, words in slips:
        verdict = build.check_split_merge(s, m)
        assert not verdict.ok and words in said(verdict), (words, verdict)


# ---------------------------------------------------------------- step 4: the module


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, slip=None):
        super().__init__()
        self.num_heads, self.slip = num_heads, slip
        self.q_proj, self.k_proj, self.v_proj = (nn.Linear(d_model, d_model) for _ in range(3))
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, query, key, value, mask=None):
        if self.slip == "kv_from_query":
            key = value = query
        if self.slip == "kv_swapped":
            key, value = value, key
        if self.slip == "always_causal" and mask is None:
            mask = torch.ones(query.shape[1], key.shape[1], dtype=torch.bool).tril()
        if self.slip == "is_causal_if_masked" and mask is not None:  # is_causal=mask is not None
            mask = torch.ones(query.shape[1], key.shape[1], dtype=torch.bool).tril()
        v_proj = self.k_proj if self.slip == "values_through_k_proj" else self.v_proj
        if self.slip == "x_at_w":
            q, k, v = (
                split(x @ p.weight + p.bias, self.num_heads)
                for p, x in ((self.q_proj, query), (self.k_proj, key), (v_proj, value))
            )
        else:
            q, k, v = (
                split(p(x), self.num_heads) for p, x in ((self.q_proj, query), (self.k_proj, key), (v_proj, value))
            )
        out, weights = attention(
            q,
            k,
            v,
            mask,
            scale=1.0 if self.slip == "no_scale" else None,
            invert=self.slip == "mask_inverted",
        )
        merged = merge(out)
        if self.slip == "average":
            weights = weights.mean(dim=1)
        output = merged if self.slip == "no_out_proj" else self.out_proj(merged)
        if self.slip == "residual":
            output = output + query
        if self.slip == "layer_norm":
            output = nn.functional.layer_norm(output + query, output.shape[-1:])
        return output, weights


def with_slip(slip):
    return lambda d_model, num_heads: MultiHeadAttention(d_model, num_heads, slip)


def test_multi_head_attention_right():
    verdict = build.check_multi_head_attention(MultiHeadAttention)
    assert verdict.ok, verdict


@pytest.mark.parametrize(
    "slip, words",
    [
        ("no_out_proj", "out_proj is not applied"),
        ("kv_from_query", "keys and values come from the query"),
        ("no_scale", "not scaled"),
        ("mask_inverted", "mask is inverted"),
        ("average", "averaged over the heads"),
        # every cross-attention case has key != value (else a swap goes unseen), and T == S as well as T != S
        ("kv_swapped", "keys and values are swapped"),
        ("values_through_k_proj", "values go through k_proj"),
        ("x_at_w", "x @ W.T + b"),
        ("residual", "a residual"),
        ("layer_norm", "LayerNorm inside the module"),
        ("always_causal", "causal mask when none is given"),
        # the review's module: F.scaled_dot_product_attention(..., is_causal=mask is not None)
        ("is_causal_if_masked", "causal mask whenever a mask is given"),
    ],
)
def test_multi_head_attention_slips(slip, words):
    verdict = build.check_multi_head_attention(with_slip(slip))
    assert not verdict.ok and words in said(verdict), verdict


def test_multi_head_attention_with_sdpa_and_is_causal_is_refused():
    """The review's module, as written: SDPA with is_causal=mask is not None, weights built with tril."""

    class IsCausal(MultiHeadAttention):
        def forward(self, query, key, value, mask=None):
            h = self.num_heads
            q, k, v = (split(p(x), h) for p, x in ((self.q_proj, query), (self.k_proj, key), (self.v_proj, value)))
            out = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=mask is not None)
            scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
            if mask is not None:
                keep = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool).tril()
                scores = scores.masked_fill(~keep, float("-inf"))
            return self.out_proj(merge(out)), scores.softmax(-1)

    verdict = build.check_multi_head_attention(IsCausal)
    assert not verdict.ok and "random mask" in said(verdict), verdict
    assert "causal mask whenever a mask is given" in said(verdict)
    # a padding-style mask, honoured, passes: the random cases are masks like any other
    assert build.check_multi_head_attention(MultiHeadAttention).ok


def test_random_masks_keep_a_key_in_every_row_and_are_not_causal():
    gen = torch.Generator().manual_seed(0)
    for t, s in ((5, 5), (4, 6), (1, 3)):
        mask = build.random_mask(t, s, gen)
        assert mask.shape == (t, s) and mask.any(dim=-1).all()
        assert not torch.equal(mask, torch.ones(t, s, dtype=torch.bool).tril())


def test_multi_head_attention_structure_and_errors():
    class NoOut(nn.Module):
        def __init__(self, d_model, num_heads):
            super().__init__()
            self.q_proj, self.k_proj, self.v_proj = (nn.Linear(d_model, d_model) for _ in range(3))

    class NoBias(MultiHeadAttention):
        def __init__(self, d_model, num_heads):
            super().__init__(d_model, num_heads)
            self.k_proj = nn.Linear(d_model, d_model, bias=False)

    class Raises(MultiHeadAttention):
        def forward(self, query, key, value, mask=None):
            raise NotImplementedError("your code here")

    class Nan(MultiHeadAttention):
        def forward(self, query, key, value, mask=None):
            out, weights = super().forward(query, key, value, mask)
            return out * float("nan"), weights

    def bad_init(d_model, num_heads):
        raise TypeError("missing argument")

    class SmallOut(MultiHeadAttention):
        def __init__(self, d_model, num_heads):
            super().__init__(d_model, num_heads)
            self.out_proj = nn.Linear(d_model // num_heads, d_model)

    cases = [
        (NoOut, "out_proj is forgotten"),
        (NoBias, "needs its bias"),
        (Raises, "not written yet"),
        (Nan, "NaN"),
        (bad_init, "TypeError: “missing argument”"),
        (SmallOut, "must be nn.Linear(d_model, d_model) = nn.Linear(12, 12), found nn.Linear(4, 12)"),
        (lambda d, h: "module", "nn.Module"),
        (42, "give your class"),
    ]
    for cls, words in cases:
        verdict = build.check_multi_head_attention(cls)
        assert not verdict.ok and words in said(verdict), (words, verdict)


def test_reference_slips_are_exact_and_distinct():
    """The slipped references the checker names differ from the right one on every case it runs."""
    ref = build.reference_module()
    params = build_reference.module_params(ref)
    gen = torch.Generator().manual_seed(0)
    query, key, value = (
        torch.randn(2, 5, 12, generator=gen, dtype=torch.float64),
        torch.randn(2, 6, 12, generator=gen, dtype=torch.float64),
        torch.randn(2, 6, 12, generator=gen, dtype=torch.float64),
    )
    causal = torch.ones(5, 6, dtype=torch.bool).tril()
    for slip in [None, *build_reference.MHA_SLIPS]:
        mask = causal if slip is None or "mask" in slip else None
        if slip == "causal_for_any_mask":  # the same as the right layer under a causal mask, by design
            mask = build.random_mask(5, 6, gen)
        with torch.no_grad():
            kwargs = {"attn_mask": None if mask is None else ~mask, "average_attn_weights": False}
            expected, expected_w = ref(query, key, value, **kwargs)
        out, weights = build_reference.mha_with_slip(params, query, key, value, mask, slip)
        if slip is None:
            assert torch.allclose(out, expected) and torch.allclose(weights, expected_w)
        else:
            assert not torch.allclose(out, expected, equal_nan=True), slip


# ---------------------------------------------------------------- float32 arithmetic is right arithmetic


def float32_softmax_attention(q, k, v, mask=None):
    """Right attention whose softmax runs in float32, as many libraries compute it (2-5e-7 off float64)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.float().softmax(dim=-1).to(q.dtype)
    return weights @ v, weights


def test_float32_arithmetic_is_accepted_in_every_step():
    from mha.chapters.build_it_yourself import build_steps

    assert build.check_attention(float32_softmax_attention).ok

    class Float32Module(MultiHeadAttention):
        def forward(self, query, key, value, mask=None):
            h = self.num_heads
            q, k, v = (split(p(x), h) for p, x in ((self.q_proj, query), (self.k_proj, key), (self.v_proj, value)))
            out, weights = float32_softmax_attention(q, k, v, mask)
            return self.out_proj(merge(out)), weights

    assert build.check_multi_head_attention(Float32Module).ok

    def gqa(q, k, v, mask=None):
        group = q.shape[1] // k.shape[1]
        return float32_softmax_attention(q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1), mask)

    def decode(q_new, k_new, v_new, k_cache, v_cache):
        k_cache, v_cache = torch.cat([k_cache, k_new], dim=2), torch.cat([v_cache, v_new], dim=2)
        return float32_softmax_attention(q_new, k_cache, v_cache)[0], k_cache, v_cache

    assert build_steps.check_gqa_attention(gqa).ok
    assert build_steps.check_decode_step(decode).ok
    # float32 is not a licence for a slip: the scale by d_k is still named
    assert not build.check_attention(lambda q, k, v, mask=None: attention(q, k, v, mask, scale=1 / q.shape[-1])).ok


def test_a_mask_filled_with_minus_infinity_after_the_softmax_is_named():
    def after(q, k, v, mask=None):
        weights = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(-1)
        if mask is not None:
            weights = weights.masked_fill(~mask, float("-inf"))
        return weights @ v, weights

    verdict = build.check_attention(after)
    assert not verdict.ok and "mask was applied after the softmax" in said(verdict), verdict


def test_a_module_without_biases_is_judged_on_its_maths_and_told_of_both():
    class NoBiases(MultiHeadAttention):  # right maths, no biases anywhere
        def __init__(self, d_model, num_heads):
            super().__init__(d_model, num_heads)
            self.q_proj, self.k_proj, self.v_proj, self.out_proj = (
                nn.Linear(d_model, d_model, bias=False) for _ in range(4)
            )

    verdict = build.check_multi_head_attention(NoBiases)
    assert not verdict.ok and verdict.first_error == "q_proj", verdict
    assert "the computation is right without it" in said(verdict) and "needs its bias" in said(verdict)

    class NoBiasesNoScale(NoBiases):  # and a slip in the maths: both are named
        def forward(self, query, key, value, mask=None):
            h = self.num_heads
            q, k, v = (split(p(x), h) for p, x in ((self.q_proj, query), (self.k_proj, key), (self.v_proj, value)))
            out, weights = attention(q, k, v, mask, scale=1.0)
            return self.out_proj(merge(out)), weights

    verdict = build.check_multi_head_attention(NoBiasesNoScale)
    assert not verdict.ok and "not scaled" in said(verdict) and "needs its bias" in said(verdict), verdict


class Fused(nn.Module):
    """The layout of nn.MultiheadAttention and GPT-2: one projection to q, k and v, split after it."""

    def __init__(self, d_model, num_heads, bias=True, merge_slip=False):
        super().__init__()
        self.num_heads, self.merge_slip = num_heads, merge_slip
        self.c_attn = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, query, key, value, mask=None):
        d = query.shape[-1]
        w, b = self.c_attn.weight, self.c_attn.bias
        parts = [
            F.linear(x, w[i * d : (i + 1) * d], None if b is None else b[i * d : (i + 1) * d])
            for i, x in enumerate((query, key, value))
        ]
        q, k, v = (split(p, self.num_heads) for p in parts)
        out, weights = attention(q, k, v, mask)
        batch, heads, t, dh = out.shape
        merged = out.reshape(batch, t, d) if self.merge_slip else merge(out)
        return self.out_proj(merged), weights


def test_a_module_with_one_fused_input_projection_is_judged_on_its_maths():
    verdict = build.check_multi_head_attention(Fused)
    assert verdict.ok and "one input projection, self.c_attn" in said(verdict), verdict
    slipped = build.check_multi_head_attention(lambda d, h: Fused(d, h, merge_slip=True))
    assert not slipped.ok and "tokens are mixed when the heads are merged" in said(slipped), slipped
    bare = build.check_multi_head_attention(lambda d, h: Fused(d, h, bias=False))
    assert not bare.ok and bare.first_error == "c_attn" and "self.c_attn needs its bias" in said(bare), bare
    narrow = build.check_multi_head_attention(lambda d, h: type("Narrow", (Fused,), {})(d, h))
    assert narrow.ok  # a subclass keeps the layout

    class TooNarrow(Fused):
        def __init__(self, d_model, num_heads):
            super().__init__(d_model, num_heads)
            self.c_attn = nn.Linear(d_model, 2 * d_model)

    verdict = build.check_multi_head_attention(TooNarrow)
    assert not verdict.ok and "self.c_attn must be nn.Linear(d_model, 3 * d_model)" in said(verdict), verdict
