"""Attention modules against torch.nn.MultiheadAttention, F.scaled_dot_product_attention and each other."""

import math

import pytest
import torch
from conftest import randn
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import mha

TOL = {torch.float32: 1e-5, torch.float64: 1e-12}


#: The readable layer and the same layer on the fast path (mha.fused): both must match PyTorch.
MHA_CLASSES = [mha.MultiHeadAttention, mha.FusedMultiHeadAttention]


def torch_pair(
    d_model,
    num_heads,
    bias=True,
    dtype=torch.float32,
    device="cpu",
    batch_first=True,
    seed=0,
    cls=mha.MultiHeadAttention,
):
    torch.manual_seed(seed)
    ref = nn.MultiheadAttention(d_model, num_heads, bias=bias, batch_first=batch_first).to(device, dtype).eval()
    return ref, cls.from_torch(ref).eval()


@pytest.mark.parametrize("cls", MHA_CLASSES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("d_model,num_heads", [(8, 1), (12, 3), (32, 4)])
def test_matches_nn_multihead_attention(device, dtype, bias, d_model, num_heads, cls):
    ref, ours = torch_pair(d_model, num_heads, bias, dtype, device, cls=cls)
    x = randn(2, 5, d_model, seed=1, dtype=dtype, device=device)
    ref_out, ref_w = ref(x, x, x, average_attn_weights=False)
    out, w = ours(x)
    assert torch.allclose(out, ref_out, atol=TOL[dtype])
    assert torch.allclose(w, ref_w, atol=TOL[dtype])
    fast, none = ours(x, need_weights=False)
    assert none is None and torch.allclose(fast, ref_out, atol=TOL[dtype])


@pytest.mark.parametrize("cls", MHA_CLASSES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cross_attention_with_masks(device, dtype, cls):
    """S != T, causal-style mask and key padding, against nn.MultiheadAttention's opposite bool convention."""
    ref, ours = torch_pair(16, 4, dtype=dtype, device=device, seed=3, cls=cls)
    query = randn(3, 4, 16, seed=1, dtype=dtype, device=device)
    memory = randn(3, 6, 16, seed=2, dtype=dtype, device=device)
    may_attend = mha.causal_mask(4, 6, device=device)  # (T, S), True = may attend
    padding = torch.zeros(3, 6, dtype=torch.bool, device=device)
    padding[1, 4:] = True  # the last two keys of example 1 are padding
    ref_out, ref_w = ref(
        query, memory, memory, attn_mask=~may_attend, key_padding_mask=padding, average_attn_weights=False
    )
    for need_weights in (True, False):
        out, w = ours(query, memory, mask=may_attend, key_padding_mask=padding, need_weights=need_weights)
        assert torch.allclose(out, ref_out, atol=TOL[dtype])
    out, w = ours(query, memory, mask=may_attend, key_padding_mask=padding)
    assert torch.allclose(w, ref_w, atol=TOL[dtype])
    assert torch.equal(w[1, :, :, 4:], torch.zeros_like(w[1, :, :, 4:]))


def test_float_mask_matches_torch():
    ref, ours = torch_pair(8, 2, seed=4)
    x = randn(2, 5, 8, seed=5)
    additive = randn(5, 5, seed=6)
    ref_out, _ = ref(x, x, x, attn_mask=additive)
    for need_weights in (True, False):
        assert torch.allclose(ours(x, mask=additive, need_weights=need_weights)[0], ref_out, atol=1e-5)


@pytest.mark.parametrize("cls", MHA_CLASSES)
def test_batch_first_false_and_round_trip(cls):
    ref, ours = torch_pair(12, 3, batch_first=False, seed=7, cls=cls)
    x = randn(2, 5, 12, seed=8)
    ref_out, _ = ref(x.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1))
    assert torch.allclose(ours(x)[0], ref_out.transpose(0, 1), atol=1e-5)
    back = ours.to_torch(batch_first=True).eval()
    assert back.batch_first
    assert torch.allclose(back(x, x, x)[0], ours(x)[0], atol=1e-6)
    for name, p in ref.named_parameters():
        assert torch.equal(p, dict(back.named_parameters())[name])


@pytest.mark.parametrize("cls", MHA_CLASSES)
def test_to_torch_without_bias(cls):
    ours = cls(8, 2, bias=False)
    back = ours.to_torch()
    assert back.in_proj_bias is None and back.out_proj.bias is None
    x = randn(1, 3, 8, seed=1)
    assert torch.allclose(back(x, x, x)[0], ours(x)[0], atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("bias", [True, False])
def test_looped_equals_batched(device, dtype, bias):
    torch.manual_seed(0)
    batched = mha.MultiHeadAttention(12, 3, bias=bias).to(device, dtype)
    looped = mha.LoopedMultiHeadAttention.from_multi_head(batched)
    x, memory = randn(2, 4, 12, seed=1, dtype=dtype, device=device), randn(2, 6, 12, seed=2, dtype=dtype, device=device)
    padding = torch.tensor([[False] * 6, [False] * 3 + [True] * 3], device=device)
    for kwargs in ({}, {"mask": mha.causal_mask(4, 6, device=device), "key_padding_mask": padding}):
        out_b, w_b = batched(x, memory, **kwargs)
        out_l, w_l = looped(x, memory, **kwargs)
        assert torch.allclose(out_b, out_l, atol=TOL[dtype])
        assert torch.allclose(w_b, w_l, atol=TOL[dtype])


def test_looped_from_torch():
    ref, _ = torch_pair(8, 4, seed=2)
    looped = mha.LoopedMultiHeadAttention.from_torch(ref)
    x = randn(1, 5, 8, seed=3)
    assert torch.allclose(looped(x)[0], ref(x, x, x)[0], atol=1e-6)


def test_single_head_attention_is_one_head_mha():
    torch.manual_seed(1)
    batched = mha.MultiHeadAttention(6, 1)
    single = mha.SingleHeadAttention(6)
    looped = mha.LoopedMultiHeadAttention.from_multi_head(batched)
    single.head.load_state_dict(looped.heads[0].state_dict())
    single.out_proj.load_state_dict(batched.out_proj.state_dict())
    x = randn(2, 4, 6, seed=2)
    out, w = single(x)
    out_b, w_b = batched(x)
    assert w.shape == (2, 4, 4)
    assert torch.allclose(out, out_b, atol=1e-6) and torch.allclose(w, w_b[:, 0], atol=1e-6)
    assert mha.SingleHeadAttention(6, head_dim=2)(x)[0].shape == (2, 4, 6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fused_layer_is_the_readable_layer(device, dtype):
    """FusedMultiHeadAttention computes MultiHeadAttention's function with the same parameters."""
    torch.manual_seed(9)
    readable = mha.MultiHeadAttention(16, 4).to(device, dtype)
    fast = mha.FusedMultiHeadAttention.from_multi_head(readable)
    assert isinstance(fast, mha.GroupedQueryAttention) and fast.num_kv_heads == fast.num_heads == 4
    assert [n for n, _ in fast.named_parameters()] == [n for n, _ in readable.named_parameters()]
    x, memory = randn(2, 5, 16, seed=1, dtype=dtype, device=device), randn(2, 7, 16, seed=2, dtype=dtype, device=device)
    padding = torch.zeros(2, 7, dtype=torch.bool, device=device)
    padding[0, 5:] = True
    for args, kwargs in (
        ((x,), {"mask": mha.causal_mask(5, device=device)}),
        ((x, memory), {"key_padding_mask": padding}),
    ):
        for need_weights in (True, False):
            out_r, w_r = readable(*args, need_weights=need_weights, **kwargs)
            out_f, w_f = fast(*args, need_weights=need_weights, **kwargs)
            assert torch.allclose(out_r, out_f, atol=TOL[dtype])
            assert (w_r is None and w_f is None) or torch.allclose(w_r, w_f, atol=TOL[dtype])
    back = fast.to_multi_head()
    assert type(back) is mha.MultiHeadAttention and back.training == fast.training
    for (name, p), q in zip(back.named_parameters(), readable.parameters()):
        assert torch.equal(p, q), name


def test_fused_layer_decodes_with_a_cache():
    torch.manual_seed(10)
    fast = mha.FusedMultiHeadAttention(8, 2).double().eval()
    x = randn(1, 4, 8, seed=3, dtype=torch.float64)
    cache = fast.new_cache(1, 4)
    steps = torch.cat([fast.decode_step(x[:, t : t + 1], cache)[0] for t in range(4)], dim=1)
    full, _ = fast.to_multi_head()(x, mask=mha.causal_mask(4))
    assert torch.allclose(steps, full, atol=1e-12)


def test_gqa_with_all_kv_heads_is_mha(device):
    torch.manual_seed(2)
    mha_module = mha.MultiHeadAttention(16, 4).to(device)
    gqa = mha.GroupedQueryAttention(16, 4, num_kv_heads=4).to(device)
    gqa.load_state_dict(mha_module.state_dict())
    x = randn(2, 5, 16, seed=3, device=device)
    assert torch.allclose(gqa(x)[0], mha_module(x)[0], atol=1e-6)


@pytest.mark.parametrize("num_kv_heads", [1, 2])
def test_gqa_against_loop_over_heads(num_kv_heads):
    """Query head i must use key/value head i // (H / G); with G = 1 every head shares one (MQA)."""
    torch.manual_seed(3)
    gqa = mha.GroupedQueryAttention(16, 4, num_kv_heads=num_kv_heads).double()
    x = randn(2, 5, 16, seed=4, dtype=torch.float64)
    out, w = gqa(x)
    dh, group = 4, 4 // num_kv_heads
    q = gqa.q_proj(x)
    k, v = gqa.k_proj(x), gqa.v_proj(x)
    contexts = []
    for head in range(4):
        kv = head // group
        q_h = q[..., head * dh : (head + 1) * dh]
        k_h, v_h = k[..., kv * dh : (kv + 1) * dh], v[..., kv * dh : (kv + 1) * dh]
        ctx, w_h = mha.scaled_dot_product_attention(q_h, k_h, v_h)
        assert torch.allclose(w_h, w[:, head], atol=1e-12)
        contexts.append(ctx)
    assert torch.allclose(out, gqa.out_proj(torch.cat(contexts, -1)), atol=1e-12)
    if num_kv_heads == 1:  # MQA: every head's keys are the same
        assert gqa.k_proj.weight.shape == (4, 16)


@pytest.mark.parametrize("num_heads,num_kv_heads", [(4, 4), (4, 2), (4, 1)])
@pytest.mark.parametrize("chunks", [[1] * 7, [3, 1, 1, 2]])
def test_kv_cache_decoding_equals_full_causal_pass(device, num_heads, num_kv_heads, chunks):
    torch.manual_seed(4)
    module = mha.GroupedQueryAttention(16, num_heads, num_kv_heads).to(device).double()
    x = randn(2, 7, 16, seed=5, dtype=torch.float64, device=device)
    full, full_w = module(x, mask=mha.causal_mask(7, device=device))
    cache = module.new_cache(batch_size=2, max_seq_len=7)
    outputs, start = [], 0
    for size in chunks:
        out, w = module.decode_step(x[:, start : start + size], cache, need_weights=True)
        assert torch.allclose(w, full_w[:, :, start : start + size, : start + size], atol=1e-12)
        outputs.append(out)
        start += size
    assert cache.length == 7
    assert torch.allclose(torch.cat(outputs, dim=1), full, atol=1e-12)
    assert cache.nbytes == mha.kv_cache_bytes(2, 7, 1, num_kv_heads, 4, bytes_per_element=8)


def test_kv_cache_errors():
    cache = mha.KVCache(1, 2, 2, 4)
    with pytest.raises(ValueError, match=r"k must have shape \(B, G, T_new, Dh\)"):
        cache.append(torch.zeros(1, 3, 1, 4), torch.zeros(1, 3, 1, 4))
    cache.append(torch.zeros(1, 2, 2, 4), torch.zeros(1, 2, 2, 4))
    with pytest.raises(ValueError, match="the cache holds max_seq_len=2 tokens; it has 2"):
        cache.append(torch.zeros(1, 2, 1, 4), torch.zeros(1, 2, 1, 4))
    cache.reset()
    assert cache.length == 0
    module = mha.FusedMultiHeadAttention(8, 2)  # decoding lives on the fast path and in GQA
    with pytest.raises(TypeError, match="cache must be an mha.KVCache, found dict"):
        module.decode_step(torch.zeros(1, 1, 8), {})


def test_gradients_flow_to_every_parameter():
    torch.manual_seed(5)
    for module in (
        mha.MultiHeadAttention(8, 2),
        mha.LoopedMultiHeadAttention(8, 2),
        mha.GroupedQueryAttention(8, 2, 1),
        mha.SingleHeadAttention(8),
        mha.FusedMultiHeadAttention(8, 2),
    ):
        x = randn(2, 3, 8, seed=6).requires_grad_()
        out, _ = module(x)
        out.square().sum().backward()
        assert torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0
        for name, p in module.named_parameters():
            assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_fully_padded_example_gives_zero_context():
    torch.manual_seed(6)
    module = mha.MultiHeadAttention(8, 2)
    x = randn(2, 3, 8, seed=7)
    padding = torch.tensor([[False] * 3, [True] * 3])
    for need_weights in (True, False):
        out, _ = module(x, key_padding_mask=padding, need_weights=need_weights)
        assert torch.isfinite(out).all()
        # Zero context vectors: only the output bias remains.
        assert torch.allclose(out[1], module.out_proj.bias.expand(3, 8), atol=1e-6)


@pytest.mark.parametrize("cls", MHA_CLASSES)
@pytest.mark.parametrize("need_weights", [True, False])
def test_dropout_only_in_training(cls, need_weights):
    torch.manual_seed(7)
    module = cls(8, 2, dropout=0.5)
    x = randn(1, 4, 8, seed=8)
    module.eval()
    assert torch.equal(module(x, need_weights=need_weights)[0], module(x, need_weights=need_weights)[0])
    module.train()
    assert not torch.equal(module(x, need_weights=need_weights)[0], module(x, need_weights=need_weights)[0])


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), seq_len=st.integers(2, 8), num_heads=st.sampled_from([1, 2, 4]))
def test_permutation_equivariance(seed, seq_len, num_heads):
    """Without a mask or positions, permuting the tokens permutes the outputs the same way."""
    torch.manual_seed(seed)
    module = mha.MultiHeadAttention(8, num_heads).double()
    x = randn(1, seq_len, 8, seed=seed, dtype=torch.float64)
    perm = torch.randperm(seq_len, generator=torch.Generator().manual_seed(seed))
    out, w = module(x)
    out_p, w_p = module(x[:, perm])
    assert torch.allclose(out_p, out[:, perm], atol=1e-12)
    assert torch.allclose(w_p, w[:, :, perm][:, :, :, perm], atol=1e-12)


# --- bad input ---


@pytest.mark.parametrize(
    "cls,args,exc,msg",
    [
        (mha.MultiHeadAttention, (10, 3), ValueError, r"d_model \(10\) must be divisible by num_heads \(3\)"),
        (mha.MultiHeadAttention, (0, 1), ValueError, "d_model must be a positive int, found 0"),
        (mha.MultiHeadAttention, (8, -2), ValueError, "num_heads must be a positive int, found -2"),
        (mha.MultiHeadAttention, (8.0, 2), TypeError, r"d_model must be a positive int, found float \(8.0\)"),
        (mha.GroupedQueryAttention, (16, 4, 3), ValueError, r"num_heads \(4\) must be divisible by num_kv_heads \(3\)"),
        (mha.GroupedQueryAttention, (16, 4, 0), ValueError, "num_kv_heads must be a positive int, found 0"),
        (mha.LoopedMultiHeadAttention, (10, 4), ValueError, r"d_model \(10\) must be divisible by num_heads \(4\)"),
        (mha.SingleHeadAttention, (8, 0), ValueError, "head_dim must be a positive int, found 0"),
    ],
)
def test_constructor_errors(cls, args, exc, msg):
    with pytest.raises(exc, match=msg):
        cls(*args)


@pytest.mark.parametrize("cls", MHA_CLASSES)
def test_dropout_error(cls):
    with pytest.raises(ValueError, match=r"dropout must be a float in \[0, 1\), found 1.5"):
        cls(8, 2, dropout=1.5)


def test_forward_errors():
    module = mha.MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match=r"query must have shape \(B, T, D\) \(3 dimensions\), found shape \(4, 8\)"):
        module(torch.zeros(4, 8))
    with pytest.raises(ValueError, match=r"query must have last dimension 8 \(d_model\), found 6"):
        module(torch.zeros(1, 4, 6))
    with pytest.raises(TypeError, match="query must be a floating-point tensor"):
        module(torch.zeros(1, 4, 8, dtype=torch.long))
    with pytest.raises(
        ValueError, match=r"mask must broadcast to \(B, H, T, S\) = \(1, 2, 4, 4\), found shape \(4, 5\)"
    ):
        module(torch.zeros(1, 4, 8), mask=torch.ones(4, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"key_padding_mask must have shape \(B, S\) = \(1, 4\), found \(4,\)"):
        module(torch.zeros(1, 4, 8), key_padding_mask=torch.zeros(4, dtype=torch.bool))
    with pytest.raises(TypeError, match="key_padding_mask must be a bool tensor .* found torch.float32"):
        module(torch.zeros(1, 4, 8), key_padding_mask=torch.zeros(1, 4))
    with pytest.raises(ValueError, match="key and value must share"):
        module(torch.zeros(1, 4, 8), torch.zeros(1, 5, 8), torch.zeros(1, 6, 8))
    with pytest.raises(ValueError, match="query and key must share the batch size"):
        module(torch.zeros(1, 4, 8), torch.zeros(2, 5, 8))


def test_from_torch_errors():
    with pytest.raises(TypeError, match="m must be a torch.nn.MultiheadAttention, found Linear"):
        mha.MultiHeadAttention.from_torch(nn.Linear(2, 2))
    with pytest.raises(ValueError, match=r"kdim = vdim = embed_dim \(8\), found kdim 4, vdim 4"):
        mha.MultiHeadAttention.from_torch(nn.MultiheadAttention(8, 2, kdim=4, vdim=4))
    with pytest.raises(TypeError, match="m must be an mha.MultiHeadAttention"):
        mha.LoopedMultiHeadAttention.from_multi_head(nn.Linear(2, 2))
    with pytest.raises(TypeError, match="m must be an mha.MultiHeadAttention, found GroupedQueryAttention"):
        mha.FusedMultiHeadAttention.from_multi_head(mha.GroupedQueryAttention(8, 2, 1))
    with pytest.raises(TypeError, match="m must be a torch.nn.MultiheadAttention, found Linear"):
        mha.FusedMultiHeadAttention.from_torch(nn.Linear(2, 2))


#: Every constructor option of nn.MultiheadAttention, with the values tried (other than the default)
#: and what from_torch must do: None = carry it over exactly, else the ValueError it must raise.
#: A torch release that adds an option fails test_every_constructor_option_is_covered until the
#: option is added here: a new option may change what the module computes (as add_zero_attn did,
#: which from_torch once copied silently, giving a different function).
TORCH_MHA_OPTIONS = {
    "embed_dim": ([12], None),
    "num_heads": ([1, 4], None),
    "dropout": ([0.25], None),
    "bias": ([False], None),
    "add_bias_kv": ([True], "add_bias_kv=False"),
    "add_zero_attn": ([True], "add_zero_attn=False"),
    "kdim": ([6], r"kdim = vdim = embed_dim \(12\), found kdim 6, vdim 12"),
    "vdim": ([6], r"kdim = vdim = embed_dim \(12\), found kdim 12, vdim 6"),
    "batch_first": ([True], None),
    "device": (["cpu"], None),
    "dtype": ([torch.float64], None),
}


def option_cases():
    for name, (values, error) in TORCH_MHA_OPTIONS.items():
        for value in values:
            yield pytest.param(name, value, error, id=f"{name}={value}")
    yield pytest.param("kdim", 12, None, id="kdim=embed_dim")  # spelled out, still the same layer
    yield pytest.param("vdim", 12, None, id="vdim=embed_dim")


def test_every_constructor_option_is_covered():
    import inspect

    options = [p for p in inspect.signature(nn.MultiheadAttention.__init__).parameters if p != "self"]
    assert sorted(options) == sorted(TORCH_MHA_OPTIONS), (
        "nn.MultiheadAttention's constructor options changed: decide for each new one whether "
        "from_torch carries it over exactly or refuses it, and add it to TORCH_MHA_OPTIONS"
    )


@pytest.mark.parametrize("cls", MHA_CLASSES)
@pytest.mark.parametrize("name,value,error", list(option_cases()))
def test_from_torch_each_option_round_trips_or_is_refused(cls, name, value, error):
    kwargs = {"embed_dim": 12, "num_heads": 2, name: value}
    torch.manual_seed(0)
    ref = nn.MultiheadAttention(**kwargs)
    if error is not None:
        with pytest.raises(ValueError, match=error):
            cls.from_torch(ref)
        return
    ours = cls.from_torch(ref)
    dtype = ref.out_proj.weight.dtype
    x = randn(2, 5, ref.embed_dim, seed=1, dtype=dtype)
    x_ref = x if ref.batch_first else x.transpose(0, 1)  # (B, T, D) or (T, B, D)
    for training in (False, True):  # in training mode dropout draws the same mask from the same seed
        ref.train(training)
        ours = cls.from_torch(ref)
        assert ours.training == training
        torch.manual_seed(2)
        ref_out, ref_w = ref(x_ref, x_ref, x_ref, average_attn_weights=False)
        torch.manual_seed(2)
        out, w = ours(x)
        out_ref = ref_out if ref.batch_first else ref_out.transpose(0, 1)
        assert out.dtype == dtype and (out - out_ref).abs().max() < TOL[dtype]
        if not training or ref.dropout == 0:  # PyTorch returns the weights after dropout, mha before
            assert (w - ref_w).abs().max() < TOL[dtype]
    # and back: to_torch rebuilds the same options and the same parameters, bit for bit
    back = ours.to_torch(batch_first=ref.batch_first)
    for attr in ("embed_dim", "num_heads", "dropout", "batch_first", "kdim", "vdim", "add_zero_attn", "training"):
        assert getattr(back, attr) == getattr(ref, attr), attr
    assert back.bias_k is None and back.in_proj_weight.device == ref.in_proj_weight.device
    ref_params, back_params = dict(ref.named_parameters()), dict(back.named_parameters())
    assert ref_params.keys() == back_params.keys()
    assert all(torch.equal(p, back_params[n]) and p.dtype == back_params[n].dtype for n, p in ref_params.items())


def test_add_zero_attn_is_a_different_function():
    """Why from_torch refuses it: PyTorch appends a zero key and value, which takes softmax weight."""
    torch.manual_seed(0)
    ref = nn.MultiheadAttention(8, 2, add_zero_attn=True, batch_first=True).eval()
    plain = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    plain.load_state_dict(ref.state_dict())
    x = randn(2, 5, 8, seed=1)
    assert (ref(x, x, x)[0] - plain(x, x, x)[0]).abs().max() > 1e-2


@pytest.mark.cuda
def test_runs_on_cuda():
    device = mha.get_device()
    assert device.type == "cuda"
    for cls in MHA_CLASSES:
        ref, ours = torch_pair(32, 4, device=device, cls=cls)
        x = randn(2, 16, 32, seed=1, device=device)
        assert torch.allclose(ours(x, need_weights=False)[0], ref(x, x, x)[0], atol=1e-4)


def test_fused_projection_gradients_match_separate_projections():
    """Self-attention projects Q, K, V in one matmul with a custom backward; it must agree exactly."""
    torch.manual_seed(8)
    for module in (
        mha.FusedMultiHeadAttention(8, 2).double(),
        mha.GroupedQueryAttention(8, 4, 2, bias=False).double(),
        mha.MultiHeadAttention(8, 2).double(),
    ):
        x = randn(2, 3, 8, seed=9, dtype=torch.float64).requires_grad_()
        assert torch.autograd.gradcheck(lambda t: module(t)[0], (x,))  # noqa: B023 (called within this iteration)
        fused_out = module(x)[0]
        separate_out = module(x, x.clone(), x.clone())[0]  # distinct tensors: three separate projections
        assert torch.allclose(fused_out, separate_out, atol=1e-12)
        grads_fused = torch.autograd.grad(fused_out.sum(), [x, *module.parameters()])
        y = x.detach().clone().requires_grad_()
        grads_separate = torch.autograd.grad(module(y, y * 1, y * 1)[0].sum(), [y, *module.parameters()])
        for a, b in zip(grads_fused, grads_separate):
            assert torch.allclose(a, b, atol=1e-12)


# --- is_causal, enable_gqa and dropout on the fast path ---


@pytest.mark.parametrize("cls", [*MHA_CLASSES, mha.GroupedQueryAttention])
@pytest.mark.parametrize("need_weights", [True, False])
def test_is_causal_equals_the_explicit_causal_mask(device, cls, need_weights):
    torch.manual_seed(11)
    module = (cls(16, 4, 2) if cls is mha.GroupedQueryAttention else cls(16, 4)).to(device).double()
    x = randn(2, 6, 16, seed=12, dtype=torch.float64, device=device)
    padding = torch.zeros(2, 6, dtype=torch.bool, device=device)
    padding[1, 3:] = True
    for kwargs in ({}, {"key_padding_mask": padding}):
        out, w = module(x, is_causal=True, need_weights=need_weights, **kwargs)
        ref, ref_w = module(x, mask=mha.causal_mask(6, device=device), need_weights=need_weights, **kwargs)
        assert torch.allclose(out, ref, atol=1e-12)
        assert (w is None and ref_w is None) or torch.allclose(w, ref_w, atol=1e-12)


@pytest.mark.parametrize("cls", MHA_CLASSES)
def test_is_causal_matches_nn_multihead_attention(device, cls):
    ref, ours = torch_pair(16, 4, dtype=torch.float64, device=device, seed=13, cls=cls)
    x = randn(2, 7, 16, seed=14, dtype=torch.float64, device=device)
    blocked = ~mha.causal_mask(7, device=device)  # nn.MultiheadAttention: True = blocked
    expected, _ = ref(x, x, x, attn_mask=blocked, need_weights=False)
    for need_weights in (True, False):
        assert torch.allclose(ours(x, is_causal=True, need_weights=need_weights)[0], expected, atol=1e-12)


def test_is_causal_cross_attention_is_top_left(device):
    """T != S: query i sees keys 0..i, as F.scaled_dot_product_attention(is_causal=True)."""
    torch.manual_seed(15)
    module = mha.GroupedQueryAttention(16, 4, 2).to(device).double()
    query = randn(2, 3, 16, seed=16, dtype=torch.float64, device=device)
    memory = randn(2, 5, 16, seed=17, dtype=torch.float64, device=device)
    top_left = mha.causal_mask(3, 5, align="top-left", device=device)
    for need_weights in (True, False):
        out, _ = module(query, memory, is_causal=True, need_weights=need_weights)
        ref, _ = module(query, memory, mask=top_left, need_weights=need_weights)
        assert torch.allclose(out, ref, atol=1e-12)


@pytest.mark.parametrize("num_kv_heads", [1, 2, 4])
def test_gqa_fast_path_equals_explicit_path(device, num_kv_heads):
    """The fast path reads the G key/value heads in the kernel (enable_gqa); the explicit path
    copies them per query head: the same function."""
    torch.manual_seed(18)
    module = mha.GroupedQueryAttention(16, 4, num_kv_heads).to(device).double()
    x = randn(2, 6, 16, seed=19, dtype=torch.float64, device=device)
    for kwargs in ({}, {"is_causal": True}, {"mask": mha.causal_mask(6, device=device)}):
        assert torch.allclose(module(x, need_weights=False, **kwargs)[0], module(x, **kwargs)[0], atol=1e-12)


@pytest.mark.parametrize("cls", [mha.MultiHeadAttention, mha.GroupedQueryAttention])
def test_dropout_in_training_is_unbiased_on_both_paths(cls):
    """Dropout scales what it keeps by 1 / (1 - p): averaged over many draws, the training output
    approaches the evaluation output, on the explicit path and in the fused kernel alike."""
    torch.manual_seed(20)
    module = (cls(8, 2, 1, dropout=0.3) if cls is mha.GroupedQueryAttention else cls(8, 2, dropout=0.3)).double()
    x = randn(1, 5, 8, seed=21, dtype=torch.float64)
    expected = module.eval()(x)[0]
    module.train()
    with torch.no_grad():
        for need_weights in (True, False):
            draws = torch.stack([module(x, need_weights=need_weights)[0] for _ in range(2000)])
            sd_of_mean = draws.std(0) / math.sqrt(len(draws))
            assert ((draws.mean(0) - expected).abs() <= 5 * sd_of_mean + 1e-9).all(), need_weights
            assert (draws.std(0) > 0).all()  # dropout does act in training


def test_single_token_decoding_uses_no_mask(monkeypatch):
    """One new token may attend every cached token: decode_step passes no mask (a mask would rule
    out FlashAttention on a GPU) and still equals the full causal pass."""
    torch.manual_seed(22)
    module = mha.GroupedQueryAttention(16, 4, 2).double().eval()
    x = randn(1, 5, 16, seed=23, dtype=torch.float64)
    seen, original = [], mha.modules.fused_attention

    def spy(q, k, v, mask=None, **kwargs):
        seen.append(mask)
        return original(q, k, v, mask, **kwargs)

    monkeypatch.setattr(mha.modules, "fused_attention", spy)
    cache = module.new_cache(1, 5)
    module.decode_step(x[:, :3], cache)
    steps = [module.decode_step(x[:, t : t + 1], cache)[0] for t in (3, 4)]
    assert seen[0] is not None and seen[1:] == [None, None]
    full, _ = module(x, is_causal=True)
    assert torch.allclose(torch.cat(steps, 1), full[:, 3:], atol=1e-12)


def test_is_causal_errors():
    module = mha.MultiHeadAttention(8, 2)
    with pytest.raises(TypeError, match=r"is_causal must be True or False, found int \(1\)"):
        module(torch.zeros(1, 3, 8), is_causal=1)
    with pytest.raises(TypeError, match="is_causal must be True or False, found NoneType"):
        mha.GroupedQueryAttention(8, 2, 1)(torch.zeros(1, 3, 8), is_causal=None, need_weights=False)
