"""mha.scaling: the √d_k experiment, the head-split picture and the chapter-2 exercise check."""

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import mha  # noqa: E402
from mha import viz  # noqa: E402
from mha.chapters import scaling  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.mark.parametrize("d_k", [1, 16, 256])
def test_dot_product_variance_is_d_k(d_k):
    raw = scaling.dot_product_variance(d_k, num_samples=4000)
    assert abs(raw / d_k - 1) < 0.1
    scaled = scaling.dot_product_variance(d_k, scale="1/√d_k", num_samples=4000)
    assert abs(scaled - 1) < 0.1
    assert math.isclose(scaled, raw / d_k, rel_tol=1e-12)  # same draws, scaled by 1/d_k in variance


def test_scale_value():
    assert scaling.scale_value(64, "1 (no scaling)") == 1.0
    assert scaling.scale_value(64, "1/√d_k") == 0.125
    assert scaling.scale_value(64, "1/d_k") == 1 / 64
    assert scaling.scale_value(64, 0.5) == 0.5
    with pytest.raises(ValueError, match="scale must be one of"):
        scaling.scale_value(64, "sqrt")
    with pytest.raises(ValueError, match="scale must be one of"):
        scaling.scale_value(64, -1.0)
    with pytest.raises(ValueError, match="d_k must be a positive int"):
        scaling.scale_value(0, 1.0)
    with pytest.raises(ValueError, match="num_samples must be a positive int"):
        scaling.dot_product_variance(4, num_samples=0)


def test_stats_against_autograd():
    """The closed-form Jacobian norms equal the ones autograd computes."""
    d_k, scale = 8, "1/√d_k"
    stats = scaling.softmax_stats(d_k, scale, num_queries=5, num_keys=4)
    gen = torch.Generator().manual_seed(0)
    keys = torch.randn(4, d_k, generator=gen, dtype=torch.float64)
    queries = torch.randn(5, d_k, generator=gen, dtype=torch.float64)
    factor = 1 / math.sqrt(d_k)
    jac_norms, grad_norms, largest = [], [], []
    for q in queries:
        scores = keys @ q * factor
        jac = torch.autograd.functional.jacobian(lambda s: torch.softmax(s, -1), scores)  # (S, S)
        grad_q = torch.autograd.functional.jacobian(lambda v: torch.softmax(keys @ v * factor, -1), q)  # (S, Dk)
        jac_norms.append(jac.norm())
        grad_norms.append(grad_q.norm())
        largest.append(torch.softmax(scores, -1).max())
    assert math.isclose(stats["jacobian_norm"], torch.stack(jac_norms).median().item(), rel_tol=1e-9)
    assert math.isclose(stats["grad_q_norm"], torch.stack(grad_norms).median().item(), rel_tol=1e-9)
    assert math.isclose(stats["max_weight"], torch.stack(largest).mean().item(), rel_tol=1e-9)
    assert stats["scale"] == factor and stats["d_k"] == d_k


def test_saturation_without_scale():
    unscaled = scaling.softmax_stats(512, "1 (no scaling)")
    scaled = scaling.softmax_stats(512, "1/√d_k")
    assert unscaled["variance"] > 400 and abs(scaled["variance"] - 1) < 0.1
    assert unscaled["max_weight"] > 0.9 and scaled["max_weight"] < 0.35
    assert unscaled["saturated"] > 0.5 and scaled["saturated"] == 0.0
    assert unscaled["entropy_bits"] < 0.5 < 3.0 < scaled["entropy_bits"] < 4.0  # log2(16) = 4
    assert unscaled["jacobian_norm"] < 1e-2 < 0.2 < scaled["jacobian_norm"]
    assert unscaled["grad_q_norm"] < 0.05 < 0.2 < scaled["grad_q_norm"]


def test_sweep_shapes_and_trend():
    sweep = scaling.scaling_sweep([4, 64, 1024], num_queries=200)
    assert sweep["d_k"] == [4, 64, 1024]
    raw, scaled = sweep["1 (no scaling)"], sweep["1/√d_k"]
    assert raw["jacobian_norm"][0] > raw["jacobian_norm"][1] > raw["jacobian_norm"][2]
    assert all(0.2 < j < 0.4 for j in scaled["jacobian_norm"])
    fig = viz.scaling.plot_scaling_sweep(sweep)
    assert len(fig.axes) == 4 and all(ax.get_title() for ax in fig.axes)


@pytest.mark.parametrize("scale", list(scaling.SCALES))
def test_render_scaling(scale):
    fig = viz.scaling.render_scaling(64, scale)
    assert isinstance(fig, matplotlib.figure.Figure) and len(fig.axes) == 2
    assert "d_k = 64" in scaling.describe_scaling(64, scale)


@pytest.mark.parametrize("num_heads", [1, 2, 3, 4, 6, 12])
def test_head_blocks_match_split_heads(num_heads):
    x = torch.arange(12.0).reshape(1, 1, 12)  # feature j holds the value j
    heads = mha.split_heads(x, num_heads)  # (1, H, 1, Dh)
    for i, cols in enumerate(scaling.head_blocks(12, num_heads)):
        assert heads[0, i, 0].tolist() == [float(c) for c in cols]
    fig = viz.scaling.render_head_split(num_heads)
    assert f"h = {num_heads} heads" in fig.axes[0].get_title()
    assert str(12 // num_heads) in scaling.describe_head_split(num_heads)


def test_head_blocks_errors():
    with pytest.raises(ValueError, match=r"d_model \(12\) must be divisible by num_heads \(5\)"):
        scaling.head_blocks(12, 5)


def test_render_head_map():
    maps = torch.softmax(torch.randn(2, 3, 4, 4, generator=torch.Generator().manual_seed(0)), -1)
    labels = [list("abcd"), list("efgh")]
    fig = viz.scaling.render_head_map(maps, labels, head=3, example=2)
    assert fig.axes[0].get_title() == "input 2, head 3"
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == list("efgh")


def test_check_merge_heads():
    assert scaling.check_merge_heads(mha.merge_heads) is True
    by_hand = lambda x: x.transpose(1, 2).reshape(x.shape[0], x.shape[2], -1)  # noqa: E731
    assert scaling.check_merge_heads(by_hand) is True
    by_cat = lambda x: torch.cat(x.unbind(dim=1), dim=-1)  # noqa: E731  concat along features
    assert scaling.check_merge_heads(by_cat) is True
    stacked = lambda x: x.reshape(x.shape[0], -1, x.shape[-1] * x.shape[1])  # noqa: E731  no transpose
    with pytest.raises(AssertionError, match=r"merge\(split\(x\)\) != x"):
        scaling.check_merge_heads(stacked)
    rows = lambda x: x.reshape(x.shape[0], -1, x.shape[-1])  # noqa: E731  a vertical stack of heads
    with pytest.raises(AssertionError, match="expected shape"):
        scaling.check_merge_heads(rows)
