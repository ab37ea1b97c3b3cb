"""mha.EncoderLayer against torch.nn.TransformerEncoderLayer and against its own equations."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from mha import MultiHeadAttention, causal_mask
from mha.encoder import EncoderLayer

D, H, D_FF, B, T = 16, 4, 32, 3, 7


def torch_layer(norm_first, activation="gelu", dtype=torch.float64, seed=0, bias=True):
    torch.manual_seed(seed)
    layer = nn.TransformerEncoderLayer(
        D, H, D_FF, dropout=0.1, activation=activation, batch_first=True, norm_first=norm_first, bias=bias, dtype=dtype
    )
    with torch.no_grad():  # non-trivial LayerNorm parameters, so a swapped norm would show
        for norm in (layer.norm1, layer.norm2):
            norm.weight.uniform_(0.5, 1.5)
            if bias:
                norm.bias.uniform_(-0.5, 0.5)
    return layer.eval()


def inputs(dtype=torch.float64, seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, D, generator=g, dtype=dtype)
    padding = torch.zeros(B, T, dtype=torch.bool)
    padding[0, 5:] = True  # sequence 0 has 5 real tokens, sequence 2 has 3
    padding[2, 3:] = True
    return x, padding


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["gelu", "relu"])
@pytest.mark.parametrize("use_padding", [False, True])
@pytest.mark.parametrize("grad", [False, True])  # no_grad lets torch take its fused fast path
def test_matches_torch_encoder_layer(norm_first, activation, use_padding, grad):
    ref = torch_layer(norm_first, activation)
    ours = EncoderLayer.from_torch(ref)
    assert not ours.training and ours.norm_first == norm_first and ours.activation_name == activation
    x, padding = inputs()
    kpm = padding if use_padding else None
    with torch.set_grad_enabled(grad):
        expected = ref(x, src_key_padding_mask=kpm)
        got, weights = ours(x, key_padding_mask=kpm)
    assert weights is None
    keep = ~padding[..., None] if use_padding else torch.ones(B, T, 1, dtype=torch.bool)
    # torch's fast path may write zeros at padded positions; compare the real tokens
    assert torch.allclose(got * keep, expected * keep, atol=1e-12, rtol=0)


@pytest.mark.parametrize("norm_first", [False, True])
def test_mask_conventions(norm_first):
    """Our bool mask says True = may attend; torch's bool src_mask says True = blocked."""
    ref = torch_layer(norm_first)
    ours = EncoderLayer.from_torch(ref)
    x, padding = inputs()
    allowed = causal_mask(T)  # (T, T), True = may attend
    expected = ref(x, src_mask=~allowed, src_key_padding_mask=padding)
    got, _ = ours(x, mask=allowed, key_padding_mask=padding)
    # every query sees at least key 0, so no row is fully masked
    assert torch.allclose(got, expected, atol=1e-12, rtol=0)
    float_mask = torch.zeros(T, T, dtype=torch.float64).masked_fill(~allowed, float("-inf"))
    got_float, _ = ours(x, mask=float_mask, key_padding_mask=padding)
    assert torch.allclose(got_float, expected, atol=1e-12, rtol=0)
    # the classic bug: handing torch's convention to our layer blocks the wrong keys
    wrong, _ = ours(x, mask=~allowed | torch.eye(T, dtype=torch.bool))
    assert (wrong - expected).abs().max() > 1e-2


def test_float32_agreement():
    ref = torch_layer(False, dtype=torch.float32)
    ours = EncoderLayer.from_torch(ref)
    assert ours.linear1.weight.dtype == torch.float32
    x, padding = inputs(torch.float32)
    with torch.no_grad():
        expected = ref(x)
        got, _ = ours(x)
    assert (got - expected).abs().max() < 1e-5


@pytest.mark.parametrize("norm_first", [False, True])
def test_equations_by_hand(norm_first):
    """The forward pass written out with functional calls, as in the module docstring."""
    torch.manual_seed(3)
    layer = EncoderLayer(D, H, D_FF, norm_first=norm_first).double().eval()
    x, padding = inputs()
    got, weights = layer(x, key_padding_mask=padding, need_weights=True)
    attn = lambda y: layer.self_attn(y, key_padding_mask=padding)[0]
    ff = lambda y: layer.linear2(F.gelu(layer.linear1(y), approximate="none"))
    if norm_first:
        y = x + attn(layer.norm1(x))
        expected = y + ff(layer.norm2(y))
    else:
        y = layer.norm1(x + attn(x))
        expected = layer.norm2(y + ff(y))
    assert torch.allclose(got, expected, atol=1e-12, rtol=0)
    assert weights.shape == (B, H, T, T)
    assert torch.allclose(weights.sum(-1), torch.ones(B, H, T, dtype=torch.float64))
    assert weights[0, :, :, 5:].abs().max() == 0  # padded keys get no weight


def test_post_norm_output_is_normalised():
    torch.manual_seed(4)
    layer = EncoderLayer(D, H, D_FF).double().eval()  # LayerNorm gain 1, bias 0 at init
    x, _ = inputs()
    out, _ = layer(10.0 * x)
    assert torch.allclose(out.mean(-1), torch.zeros(B, T, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(out.var(-1, unbiased=False), torch.ones(B, T, dtype=torch.float64), atol=1e-3)


def test_self_attn_is_mha_and_roundtrip_to_torch():
    torch.manual_seed(5)
    layer = EncoderLayer(D, H, D_FF, norm_first=True, activation="relu", layer_norm_eps=1e-6).double().eval()
    assert isinstance(layer.self_attn, MultiHeadAttention)
    ref = layer.to_torch()
    assert isinstance(ref, nn.TransformerEncoderLayer) and ref.norm_first and ref.norm1.eps == 1e-6
    x, padding = inputs()
    got, _ = layer(x, key_padding_mask=padding)
    expected = ref(x, src_key_padding_mask=padding)
    assert torch.allclose(got, expected, atol=1e-12, rtol=0)
    # same parameter count as torch's layer
    assert sum(p.numel() for p in layer.parameters()) == sum(p.numel() for p in ref.parameters())


def test_no_bias_and_training_dropout():
    ref = torch_layer(False, bias=False)
    ours = EncoderLayer.from_torch(ref)
    assert ours.linear1.bias is None and ours.norm1.bias is None
    x, _ = inputs()
    assert torch.allclose(ours(x)[0], ref(x), atol=1e-12, rtol=0)
    ours.train()
    torch.manual_seed(0)
    a, _ = ours(x)
    b, _ = ours(x)
    assert not torch.allclose(a, b)  # dropout is active in training


def test_errors():
    with pytest.raises(ValueError, match="activation must be one of"):
        EncoderLayer(D, H, D_FF, activation="tanh")
    with pytest.raises(ValueError, match=r"d_model \(16\) must be divisible by num_heads \(3\)"):
        EncoderLayer(D, 3, D_FF)
    with pytest.raises(ValueError, match="d_ff must be a positive int"):
        EncoderLayer(D, H, 0)
    with pytest.raises(TypeError, match="norm_first must be a bool"):
        EncoderLayer(D, H, D_FF, norm_first="yes")
    with pytest.raises(ValueError, match="layer_norm_eps must be a positive float"):
        EncoderLayer(D, H, D_FF, layer_norm_eps=0.0)
    with pytest.raises(TypeError, match="layer must be a torch.nn.TransformerEncoderLayer"):
        EncoderLayer.from_torch(nn.Linear(2, 2))
    ref = nn.TransformerEncoderLayer(D, H, D_FF, activation=torch.tanh, batch_first=True)
    with pytest.raises(ValueError, match="layer.activation must be relu or gelu"):
        EncoderLayer.from_torch(ref)
    layer = EncoderLayer(D, H, D_FF)
    with pytest.raises(ValueError, match=r"x must have shape \(B, T, D\)"):
        layer(torch.zeros(T, D))
    with pytest.raises(TypeError, match="x must be a floating-point tensor"):
        layer(torch.zeros(B, T, D, dtype=torch.long))
