"""Parameter, FLOP and KV-cache formulas against real modules, real tensors and hand-worked numbers."""

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

import mha


def numel(module):
    return sum(p.numel() for p in module.parameters())


def test_bert_base_numbers_by_hand():
    assert mha.attention_params(768, 12) == 2_362_368  # 4·768² + 4·768
    assert mha.attention_params(768, 12, bias=False) == 2_359_296  # 4·768²
    assert numel(nn.MultiheadAttention(768, 12)) == 2_362_368


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("d_model,num_heads", [(64, 1), (64, 4), (96, 12), (768, 12)])
def test_mha_params_match_modules(d_model, num_heads, bias):
    expected = mha.attention_params(d_model, num_heads, bias=bias)
    assert numel(nn.MultiheadAttention(d_model, num_heads, bias=bias)) == expected
    assert numel(mha.MultiHeadAttention(d_model, num_heads, bias=bias)) == expected
    assert numel(mha.LoopedMultiHeadAttention(d_model, num_heads, bias=bias)) == expected


def test_count_params_counts_all_or_only_trainable():
    module = nn.Sequential(nn.Linear(4, 3), nn.LayerNorm(3))  # 12 + 3 weights/biases, 3 + 3
    assert mha.count_params(module) == numel(module) == 21
    module[1].weight.requires_grad_(False)
    assert mha.count_params(module) == 21
    assert mha.count_params(module, trainable_only=True) == 18
    assert mha.count_params(mha.MultiHeadAttention(8, 2)) == mha.attention_params(8, 2)
    with pytest.raises(TypeError, match="module must be a torch.nn.Module, found Tensor"):
        mha.count_params(torch.zeros(3))


def test_mha_params_independent_of_heads_when_head_dim_shrinks():
    counts = {mha.attention_params(512, h) for h in (1, 2, 4, 8, 16)}
    assert counts == {4 * 512 * 512 + 4 * 512}


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("num_heads,num_kv_heads", [(8, 8), (8, 4), (8, 2), (8, 1)])
def test_gqa_params_match_modules(num_heads, num_kv_heads, bias):
    module = mha.GroupedQueryAttention(64, num_heads, num_kv_heads, bias=bias)
    assert numel(module) == mha.attention_params(64, num_heads, num_kv_heads, bias=bias)


@pytest.mark.parametrize("h,g", [(8, 8), (8, 1), (8, 2), (12, 4)])
def test_gqa_closed_forms_without_bias(h, g):
    d_k = 16
    d_model = h * d_k
    assert mha.attention_params(d_model, h, g, bias=False) == (2 * h + 2 * g) * d_k * d_model
    if g == h:
        assert mha.attention_params(d_model, h, g, bias=False) == 4 * h * d_k * d_model
    if g == 1:
        assert mha.attention_params(d_model, h, g, bias=False) == (2 * h + 2) * d_k * d_model


def test_flops_by_hand():
    # T=2, D=4, H=2: projections 4 · 2·T·D² = 128, scores and weighted sum 2 · 2·T²·D = 64.
    parts = mha.attention_flops_breakdown(2, 4, 2)
    assert parts == {"q_proj": 64, "kv_proj": 128, "scores": 32, "weighted_sum": 32, "out_proj": 64, "total": 320}
    assert mha.attention_flops(2, 4, 2) == 320
    # Splitting into heads does not change the FLOPs.
    assert {mha.attention_flops(128, 512, h) for h in (1, 2, 8, 16)} == {8 * 128 * 512**2 + 4 * 128**2 * 512}


@pytest.mark.parametrize("num_heads,num_kv_heads", [(4, 4), (4, 2), (4, 1)])
def test_flops_match_torch_flop_counter(num_heads, num_kv_heads):
    """torch's FlopCounterMode counts the matmuls of a real forward pass (2 FLOPs per multiply-add)."""
    module = mha.GroupedQueryAttention(32, num_heads, num_kv_heads, bias=False)
    x = torch.zeros(1, 10, 32)
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        module(x)
    assert counter.get_total_flops() == mha.attention_flops(10, 32, num_heads, num_kv_heads)


def test_kv_cache_bytes_by_hand():
    # A 7B-class MHA model: 32 layers, 32 heads of 128, fp16, 4096 tokens, batch 1 -> 2 GiB.
    assert mha.kv_cache_bytes(1, 4096, 32, 32, 128) == 2 * 4096 * 32 * 32 * 128 * 2 == 2 * 1024**3
    assert mha.kv_cache_bytes(1, 4096, 32, 32, 128, bytes_per_element=1) == 1024**3


@pytest.mark.parametrize("num_kv_heads", [1, 2, 4])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_kv_cache_bytes_match_real_cache(num_kv_heads, dtype):
    module = mha.GroupedQueryAttention(32, 4, num_kv_heads).to(dtype)
    cache = module.new_cache(batch_size=3, max_seq_len=9)
    module.decode_step(torch.zeros(3, 9, 32, dtype=dtype), cache)
    element = torch.tensor([], dtype=dtype).element_size()
    assert cache.nbytes == mha.kv_cache_bytes(3, 9, 1, num_kv_heads, 8, bytes_per_element=element)
    assert cache.nbytes == cache.keys.untyped_storage().nbytes() + cache.values.untyped_storage().nbytes()


@pytest.mark.parametrize(
    "call,exc,msg",
    [
        (lambda: mha.attention_params(10, 3), ValueError, r"d_model \(10\) must be divisible by num_heads \(3\)"),
        (
            lambda: mha.attention_params(12, 4, 3),
            ValueError,
            r"num_heads \(4\) must be divisible by num_kv_heads \(3\)",
        ),
        (lambda: mha.attention_flops(0, 8, 2), ValueError, "seq_len must be a positive int, found 0"),
        (
            lambda: mha.kv_cache_bytes(1, 8, 2, 2, 4, bytes_per_element=0),
            ValueError,
            "bytes_per_element must be a positive int",
        ),
        (lambda: mha.kv_cache_bytes(1, "8", 2, 2, 4), TypeError, "seq_len must be a positive int, found str"),
    ],
)
def test_errors(call, exc, msg):
    with pytest.raises(exc, match=msg):
        call()
