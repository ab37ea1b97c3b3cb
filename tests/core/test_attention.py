"""scaled_dot_product_attention, masks and head reshapes against independent references."""

import math

import pytest
import torch
import torch.nn.functional as F
from conftest import randn

import mha

TOL = {torch.float32: 1e-5, torch.float64: 1e-12}


def loop_attention(q, k, v, scale):
    """Reference: one query at a time, plain Python softmax."""
    out = torch.zeros(q.shape[0], v.shape[1], dtype=q.dtype)
    weights = torch.zeros(q.shape[0], k.shape[0], dtype=q.dtype)
    for i in range(q.shape[0]):
        logits = [float(q[i] @ k[j]) * scale for j in range(k.shape[0])]
        top = max(logits)
        exps = [math.exp(x - top) for x in logits]
        total = sum(exps)
        for j, e in enumerate(exps):
            weights[i, j] = e / total
            out[i] += (e / total) * v[j]
    return out, weights


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("T,S,dh", [(1, 1, 1), (3, 5, 4), (7, 7, 8)])
def test_matches_loop(dtype, T, S, dh):
    q, k, v = randn(T, dh, seed=1, dtype=dtype), randn(S, dh, seed=2, dtype=dtype), randn(S, 3, seed=3, dtype=dtype)
    out, w = mha.scaled_dot_product_attention(q, k, v)
    ref_out, ref_w = loop_attention(q, k, v, 1 / math.sqrt(dh))
    assert torch.allclose(out, ref_out, atol=TOL[dtype])
    assert torch.allclose(w, ref_w, atol=TOL[dtype])


def test_hand_worked_numbers():
    # q·k = [0, 2] scaled by 1/√2 -> softmax([0, √2]) = [1/(1+e^√2), e^√2/(1+e^√2)]
    q = torch.tensor([[1.0, 1.0]], dtype=torch.float64)
    k = torch.tensor([[1.0, -1.0], [1.0, 1.0]], dtype=torch.float64)
    v = torch.tensor([[10.0], [20.0]], dtype=torch.float64)
    out, w = mha.scaled_dot_product_attention(q, k, v)
    p = math.exp(math.sqrt(2)) / (1 + math.exp(math.sqrt(2)))
    assert w[0, 1].item() == pytest.approx(p, abs=1e-15)
    assert out[0, 0].item() == pytest.approx(10 * (1 - p) + 20 * p, abs=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("mask_kind", [None, "bool", "float", "causal"])
def test_matches_torch_sdpa(device, dtype, mask_kind):
    q, k, v = (randn(2, 3, 6, 8, seed=s, dtype=dtype, device=device) for s in (1, 2, 3))
    mask = None
    if mask_kind == "bool":
        mask = randn(2, 1, 6, 6, seed=4, device=device) > -0.5
        mask[..., 0] = True  # keep every row non-empty for the reference
    elif mask_kind == "float":
        mask = randn(6, 6, seed=5, dtype=dtype, device=device)
    elif mask_kind == "causal":
        mask = mha.causal_mask(6, device=device)
    out, _ = mha.scaled_dot_product_attention(q, k, v, mask)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert torch.allclose(out, ref, atol=TOL[dtype] * 10)


def test_custom_scale_matches_torch():
    q, k, v = (randn(4, 5, seed=s) for s in (1, 2, 3))
    out, _ = mha.scaled_dot_product_attention(q, k, v, scale=0.3)
    assert torch.allclose(out, F.scaled_dot_product_attention(q, k, v, scale=0.3), atol=1e-6)


def test_dropout_drops_weights_before_the_weighted_sum():
    q, k, v = (randn(2, 5, 4, seed=s) for s in (1, 2, 3))
    torch.manual_seed(11)
    out, w = mha.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    torch.manual_seed(11)
    dropped = F.dropout(w, 0.5)  # the same draws: dropout is the only random step
    assert torch.allclose(out, dropped @ v, atol=1e-6)
    assert torch.allclose(w.sum(-1), torch.ones(2, 5), atol=1e-6)  # the weights returned are undropped
    assert not torch.allclose(out, w @ v)
    with pytest.raises(ValueError, match=r"dropout_p must be a float in \[0, 1\), found 1.0"):
        mha.scaled_dot_product_attention(q, k, v, dropout_p=1.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("mask_kind", [None, "bool", "float"])
def test_fused_attention_matches_the_explicit_recipe(device, dtype, mask_kind):
    """mha.fused.fused_attention (PyTorch's kernel) returns scaled_dot_product_attention's output,
    including the zero vector for a query that may attend to nothing."""
    q, k, v = (randn(2, 3, 6, 8, seed=s, dtype=dtype, device=device) for s in (1, 2, 3))
    allowed = randn(2, 1, 6, 6, seed=4, device=device) > -0.5
    allowed[0, 0, 2] = False  # query 3 of the first sequence sees no key
    mask = {
        None: None,
        "bool": allowed,
        "float": torch.zeros(2, 1, 6, 6, dtype=dtype, device=device).masked_fill(~allowed, float("-inf")),
    }[mask_kind]
    expected, _ = mha.scaled_dot_product_attention(q, k, v, mask)
    assert torch.allclose(mha.fused.fused_attention(q, k, v, mask), expected, atol=TOL[dtype] * 10)


@pytest.mark.parametrize("seed", range(3))
def test_rows_sum_to_one(seed):
    q, k, v = randn(2, 4, 5, 8, seed=seed), randn(2, 4, 7, 8, seed=seed + 10), randn(2, 4, 7, 8, seed=seed + 20)
    _, w = mha.scaled_dot_product_attention(q, k, v)
    assert w.shape == (2, 4, 5, 7)
    assert torch.allclose(w.sum(-1), torch.ones(2, 4, 5), atol=1e-6)
    assert (w >= 0).all()


@pytest.mark.parametrize("magnitude", [1e2, 1e4])
def test_extreme_logits_stay_finite(magnitude):
    q = torch.full((3, 4), magnitude)
    k = torch.tensor([[1.0] * 4, [-1.0] * 4, [0.5] * 4])
    v = torch.eye(3)
    out, w = mha.scaled_dot_product_attention(q, k, v)
    assert torch.isfinite(out).all() and torch.isfinite(w).all()
    assert torch.allclose(w[:, 0], torch.ones(3))  # the largest logit takes all the weight


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_fully_masked_row_gives_zeros_and_finite_gradients(kind):
    q, k, v = (randn(3, 4, seed=s).requires_grad_() for s in (1, 2, 3))
    allowed = torch.tensor([[True, True, True], [False, False, False], [True, False, False]])
    mask = allowed if kind == "bool" else torch.zeros(3, 3).masked_fill(~allowed, float("-inf"))
    out, w = mha.scaled_dot_product_attention(q, k, v, mask)
    assert torch.equal(out[1], torch.zeros(4)) and torch.equal(w[1], torch.zeros(3))
    assert torch.allclose(w[2], torch.tensor([1.0, 0.0, 0.0]))
    out.sum().backward()
    for t in (q, k, v):
        assert torch.isfinite(t.grad).all()


def test_gradients_flow():
    q, k, v = (randn(2, 5, 4, seed=s, dtype=torch.float64).requires_grad_() for s in (1, 2, 3))
    assert torch.autograd.gradcheck(lambda a, b, c: mha.scaled_dot_product_attention(a, b, c)[0], (q, k, v))


def test_causal_mask():
    assert torch.equal(mha.causal_mask(3), torch.tensor([[1, 0, 0], [1, 1, 0], [1, 1, 1]], dtype=torch.bool))
    # The last 2 queries of a 4-token sequence see keys up to their own position.
    assert torch.equal(mha.causal_mask(2, 4), torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.bool))


@pytest.mark.parametrize("num_heads", [1, 2, 3, 6])
def test_split_merge_round_trip(num_heads):
    x = randn(2, 5, 12, seed=num_heads)
    heads = mha.split_heads(x, num_heads)
    assert heads.shape == (2, num_heads, 5, 12 // num_heads)
    # Head h holds features h·Dh .. (h+1)·Dh of every token.
    dh = 12 // num_heads
    for h in range(num_heads):
        assert torch.equal(heads[:, h], x[..., h * dh : (h + 1) * dh])
    assert torch.equal(mha.merge_heads(heads), x)


def test_average_heads():
    w = torch.stack([torch.eye(3), torch.ones(3, 3) / 3])[None]  # (1, 2, 3, 3)
    assert torch.allclose(mha.average_heads(w)[0], (torch.eye(3) + 1 / 3) / 2)


# --- bad input: each mistake a learner makes gets a message naming the argument ---


def test_error_non_floating():
    x = torch.ones(2, 3, dtype=torch.long)
    with pytest.raises(TypeError, match=r"q must be a floating-point tensor .* found torch.int64"):
        mha.scaled_dot_product_attention(x, x, x)


def test_error_not_a_tensor():
    with pytest.raises(TypeError, match="q must be a torch.Tensor, found list"):
        mha.scaled_dot_product_attention([[1.0]], torch.ones(1, 1), torch.ones(1, 1))


def test_error_rank():
    with pytest.raises(ValueError, match=r"k must have at least 2 dimensions, found shape \(3,\)"):
        mha.scaled_dot_product_attention(torch.ones(2, 3), torch.ones(3), torch.ones(3))


def test_error_last_dim_mismatch():
    with pytest.raises(
        ValueError, match=r"q and k must have the same last dimension \(head_dim\), found q \(2, 3\) and k \(4, 5\)"
    ):
        mha.scaled_dot_product_attention(torch.ones(2, 3), torch.ones(4, 5), torch.ones(4, 5))


def test_error_kv_length_mismatch():
    with pytest.raises(ValueError, match="k and v must have the same length S"):
        mha.scaled_dot_product_attention(torch.ones(2, 3), torch.ones(4, 3), torch.ones(5, 3))


def test_error_batch_dims():
    with pytest.raises(ValueError, match="leading .* must broadcast"):
        mha.scaled_dot_product_attention(torch.ones(2, 2, 3), torch.ones(3, 4, 3), torch.ones(3, 4, 3))


def test_error_dtype_mismatch():
    with pytest.raises(TypeError, match="q, k and v must share a dtype"):
        mha.scaled_dot_product_attention(torch.ones(2, 3), torch.ones(4, 3, dtype=torch.float64), torch.ones(4, 3))


def test_error_mask_shape():
    x = torch.ones(2, 4, 3)
    with pytest.raises(
        ValueError, match=r"mask must broadcast to \(\.\.\., T, S\) = \(2, 4, 4\), found shape \(3, 4\)"
    ):
        mha.scaled_dot_product_attention(x, x, x, torch.ones(3, 4, dtype=torch.bool))


def test_error_mask_nan():
    x = torch.ones(4, 3)
    mask = torch.zeros(4, 4)
    mask[0, 0] = float("nan")
    with pytest.raises(ValueError, match="mask must not contain NaN"):
        mha.scaled_dot_product_attention(x, x, x, mask)


def test_error_mask_dtype():
    x = torch.ones(4, 3)
    with pytest.raises(TypeError, match="mask must be a bool tensor .* found torch.int64"):
        mha.scaled_dot_product_attention(x, x, x, torch.ones(4, 4, dtype=torch.long))


@pytest.mark.parametrize(
    "args,exc,msg",
    [
        ((0,), ValueError, "T must be a positive int, found 0"),
        ((2.5,), TypeError, r"T must be a positive int, found float \(2.5\)"),
        ((4, 2), ValueError, r"S \(2\) must be >= T \(4\)"),
    ],
)
def test_error_causal_mask(args, exc, msg):
    with pytest.raises(exc, match=msg):
        mha.causal_mask(*args)


def test_error_split_heads():
    with pytest.raises(ValueError, match=r"d_model \(10\) must be divisible by num_heads \(3\)"):
        mha.split_heads(torch.ones(1, 2, 10), 3)
    with pytest.raises(ValueError, match=r"x must have shape \(B, T, D\)"):
        mha.split_heads(torch.ones(1, 1, 2, 10), 2)
    with pytest.raises(ValueError, match=r"x must have shape \(B, H, T, Dh\)"):
        mha.merge_heads(torch.ones(1, 1, 1, 2, 10))


# --- is_causal: PyTorch's flag and convention, equal to the explicit mask ---


@pytest.mark.parametrize("T,S", [(5, 5), (3, 7), (7, 3)])
def test_top_left_causal_mask_is_pytorchs_convention(T, S):
    assert torch.equal(mha.causal_mask(T, S, align="top-left"), torch.ones(T, S, dtype=torch.bool).tril())
    if T <= S:  # bottom-right: the last T of S positions
        expected = torch.tensor([[j <= i + S - T for j in range(S)] for i in range(T)])
        assert torch.equal(mha.causal_mask(T, S), expected)
    if T == S:
        assert torch.equal(mha.causal_mask(T, S, align="top-left"), mha.causal_mask(T))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("T,S", [(6, 6), (4, 9), (9, 4)])
def test_is_causal_matches_torch_sdpa(device, dtype, T, S):
    q = randn(2, 3, T, 8, seed=1, dtype=dtype, device=device)
    k, v = (randn(2, 3, S, 8, seed=s, dtype=dtype, device=device) for s in (2, 3))
    out, w = mha.scaled_dot_product_attention(q, k, v, is_causal=True)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert torch.allclose(out, ref, atol=TOL[dtype] * 10)
    assert torch.allclose(mha.fused.fused_attention(q, k, v, is_causal=True), ref, atol=TOL[dtype] * 10)
    allowed = mha.causal_mask(T, S, align="top-left", device=device)
    assert torch.equal(w == 0, ~allowed.expand_as(w))  # exactly the future keys get no weight
    explicit, w_explicit = mha.scaled_dot_product_attention(q, k, v, allowed)
    assert torch.equal(out, explicit) and torch.equal(w, w_explicit)


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_is_causal_with_a_mask_needs_both(kind):
    q, k, v = (randn(2, 6, 4, seed=s, dtype=torch.float64) for s in (1, 2, 3))
    allowed = randn(2, 6, 6, seed=4) > 0
    allowed[..., 0] = True
    mask = allowed if kind == "bool" else torch.zeros(2, 6, 6, dtype=torch.float64).masked_fill(~allowed, -math.inf)
    both = allowed & mha.causal_mask(6)
    out, w = mha.scaled_dot_product_attention(q, k, v, mask, is_causal=True)
    expected, expected_w = mha.scaled_dot_product_attention(q, k, v, both)
    assert torch.allclose(out, expected, atol=1e-12) and torch.allclose(w, expected_w, atol=1e-12)
    fused = mha.fused.fused_attention(q[:, None], k[:, None], v[:, None], mask[:, None], is_causal=True)
    assert torch.allclose(fused[:, 0], expected, atol=1e-12)


def test_intersect_masks():
    allowed = torch.tensor([[True, False], [True, True]])
    assert mha.attention.intersect_masks(None, allowed) is allowed
    bool_mask = torch.tensor([[True, True], [False, True]])
    assert torch.equal(mha.attention.intersect_masks(bool_mask, allowed), torch.tensor([[True, False], [False, True]]))
    float_mask = torch.tensor([[0.0, 1.0], [-math.inf, 2.0]])
    expected = torch.tensor([[0.0, -math.inf], [-math.inf, 2.0]])
    assert torch.equal(mha.attention.intersect_masks(float_mask, allowed), expected)


def test_error_is_causal_and_align():
    x = torch.ones(4, 3)
    with pytest.raises(TypeError, match=r"is_causal must be True or False, found int \(1\)"):
        mha.scaled_dot_product_attention(x, x, x, is_causal=1)
    with pytest.raises(TypeError, match="is_causal must be True or False, found str"):
        mha.fused.fused_attention(x[None, None], x[None, None], x[None, None], is_causal="yes")
    with pytest.raises(ValueError, match="align must be 'bottom-right' or 'top-left', found 'left'"):
        mha.causal_mask(3, align="left")
    assert mha.causal_mask(4, 2, align="top-left").shape == (4, 2)  # top-left allows S < T


# --- grouped-query attention in the fused kernel (enable_gqa) ---


@pytest.mark.parametrize("num_kv_heads", [1, 2, 6])
@pytest.mark.parametrize("is_causal", [False, True])
def test_fused_attention_reads_shared_kv_heads(device, num_kv_heads, is_causal):
    q = randn(2, 6, 5, 4, seed=1, dtype=torch.float64, device=device)
    k, v = (randn(2, num_kv_heads, 5, 4, seed=s, dtype=torch.float64, device=device) for s in (2, 3))
    group = 6 // num_kv_heads
    expected, _ = mha.scaled_dot_product_attention(
        q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1), is_causal=is_causal
    )
    assert torch.allclose(mha.fused.fused_attention(q, k, v, is_causal=is_causal), expected, atol=1e-12)


def test_error_fused_attention_heads():
    with pytest.raises(ValueError, match=r"q's heads \(dimension -3\) must be a multiple of k's"):
        mha.fused.fused_attention(torch.ones(1, 4, 2, 3), torch.ones(1, 3, 2, 3), torch.ones(1, 3, 2, 3))


# --- dropout: PyTorch's semantics, checked statistically against PyTorch's kernel ---


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_dropout_statistics_match_pytorch(p):
    """With v = identity the output rows *are* the dropped weights: each is 0 with probability p,
    else w / (1 - p), so their mean is w. Both mha and F.scaled_dot_product_attention must pass."""
    q, k = randn(1, 1, 6, 4, seed=1), randn(1, 1, 8, 4, seed=2)
    identity = torch.eye(8).expand(1, 1, 8, 8)
    _, w = mha.scaled_dot_product_attention(q, k, identity)
    draws = 400
    torch.manual_seed(0)
    ours = torch.stack([mha.scaled_dot_product_attention(q, k, identity, dropout_p=p)[0] for _ in range(draws)])
    theirs = torch.stack([F.scaled_dot_product_attention(q, k, identity, dropout_p=p) for _ in range(draws)])
    n = ours.numel()
    for out in (ours, theirs):
        kept = out != 0
        assert torch.allclose(out[kept], (w / (1 - p)).expand_as(out)[kept], rtol=1e-5)
        dropped_fraction = 1 - kept.double().mean().item()
        assert abs(dropped_fraction - p) < 5 * math.sqrt(p * (1 - p) / n)  # 5 standard deviations
        sd_of_mean = w * math.sqrt(p / ((1 - p) * draws))
        assert ((out.mean(0) - w).abs() <= 5 * sd_of_mean + 1e-6).all()  # unbiased: E[output] = w
    # and the two differ in their draws, not in their law: an all-equal pair would mean no dropout
    assert not torch.equal(ours, theirs)


# --- online softmax: attention block by block over the keys ---


@pytest.mark.parametrize("block_size", [1, 3, 8, 19, 64])
@pytest.mark.parametrize("seed", range(2))
def test_blockwise_attention_equals_full_softmax(block_size, seed):
    q = randn(2, 3, 7, 5, seed=seed, dtype=torch.float64)
    k = randn(2, 3, 19, 5, seed=seed + 10, dtype=torch.float64) * 4  # large scores: the max matters
    v = randn(2, 3, 19, 6, seed=seed + 20, dtype=torch.float64)
    expected, _ = mha.scaled_dot_product_attention(q, k, v)
    assert torch.allclose(mha.attention.blockwise_attention(q, k, v, block_size), expected, atol=1e-12, rtol=0)
    assert torch.allclose(F.scaled_dot_product_attention(q, k, v), expected, atol=1e-12)


def test_blockwise_attention_extreme_logits_and_errors():
    q = torch.full((3, 4), 1e4, dtype=torch.float64)
    k = torch.tensor([[1.0] * 4, [-1.0] * 4, [0.5] * 4], dtype=torch.float64)
    out = mha.attention.blockwise_attention(q, k, torch.eye(3, dtype=torch.float64), 1)
    assert torch.isfinite(out).all() and torch.allclose(out[:, 0], torch.ones(3, dtype=torch.float64))
    with pytest.raises(ValueError, match="block_size must be a positive int, found 0"):
        mha.attention.blockwise_attention(q, k, k, 0)
