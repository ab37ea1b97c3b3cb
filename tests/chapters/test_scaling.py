"""mha.chapters.multi_head_math.scaling: the √d_k experiment, the head-split picture and the multi-head-math
exercise check."""

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import mha  # noqa: E402
from mha import viz  # noqa: E402
from mha.chapters.multi_head_math import figures as multi_head_math_figures  # noqa: E402
from mha.chapters.multi_head_math import head_split, scaling  # noqa: E402


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
    fig = multi_head_math_figures.plot_scaling_sweep(sweep)
    assert len(fig.axes) == 4 and all(ax.get_title() for ax in fig.axes)


@pytest.mark.parametrize("scale", list(scaling.SCALES))
def test_render_scaling(scale):
    fig = multi_head_math_figures.render_scaling(64, scale)
    assert isinstance(fig, matplotlib.figure.Figure) and len(fig.axes) == 2
    assert fig.axes[1].get_title().startswith("all 500 queries: mean largest weight")  # every query, not one
    assert "d_k = 64" in scaling.describe_scaling(64, scale)


def test_sorted_weight_profile_is_a_statistic_of_all_queries():
    for d_k, scale in [(4, "1 (no scaling)"), (64, "1/√d_k"), (512, "1/d_k")]:
        profile = scaling.sorted_weight_profile(d_k, scale)
        stats = scaling.softmax_stats(d_k, scale)
        assert profile.shape == (scaling.NUM_KEYS,) and math.isclose(profile.sum().item(), 1.0, rel_tol=1e-12)
        assert torch.all(profile[:-1] >= profile[1:])  # sorted
        assert math.isclose(profile[0].item(), stats["max_weight"], rel_tol=1e-12)
    # a single query's largest weight is noise: it scatters widely where the mean over queries does not
    scores, _, _ = scaling.sample_scores(64, "1/√d_k")
    singles = torch.softmax(scores[:5], dim=-1).max(dim=-1).values
    assert singles.max() - singles.min() > 0.2


def test_table_variance_is_the_mean_squared_norm_of_the_shared_keys():
    """Why the sweep shows 4.9 at d_k = 4 where dot_product_variance shows 4.0."""
    for d_k in (4, 16, 64):
        table = scaling.softmax_stats(d_k, "1 (no scaling)")["variance"]
        assert abs(table / scaling.mean_squared_key_norm(d_k) - 1) < 0.05
    assert round(scaling.mean_squared_key_norm(4), 1) == 5.0 and round(scaling.dot_product_variance(4), 1) == 4.0
    # with more keys, the shared-key effect averages out
    assert abs(scaling.mean_squared_key_norm(4, num_keys=4000) / 4 - 1) < 0.05


def test_count_operations():
    x = torch.randn(1, 5, 8, generator=torch.Generator().manual_seed(0))
    for num_heads in (1, 2, 4):
        batched = mha.MultiHeadAttention(8, num_heads)
        ops = scaling.count_operations(batched, x)
        assert ops["matrix_products"] == 6 and ops["softmaxes"] == 1  # 4 projections, q kᵀ, weights v
        looped = scaling.count_operations(mha.LoopedMultiHeadAttention.from_multi_head(batched), x)
        assert looped["matrix_products"] == 3 * num_heads + 1 + 2 * num_heads and looped["softmaxes"] == num_heads
    # a function that does everything inside counts as one call of its own: PyTorch's layer
    ref = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    assert scaling.count_operations(ref, x, x, x)["calls"]["multi_head_attention_forward"] == 1


@pytest.mark.parametrize("num_heads", [1, 2, 3, 4, 6, 12])
def test_head_blocks_match_split_heads(num_heads):
    x = torch.arange(12.0).reshape(1, 1, 12)  # feature j holds the value j
    heads = mha.split_heads(x, num_heads)  # (1, H, 1, Dh)
    for i, cols in enumerate(head_split.head_blocks(12, num_heads)):
        assert heads[0, i, 0].tolist() == [float(c) for c in cols]
    fig = multi_head_math_figures.render_head_split(num_heads)
    assert f"h = {num_heads} heads" in fig.axes[0].get_title()
    labels = [t.get_text() for t in fig.axes[0].texts]
    assert any(label.startswith("$XW^Q$") and "all input features" in label for label in labels)  # not X
    assert str(12 // num_heads) in head_split.describe_head_split(num_heads)
    assert "X W_Q" in head_split.describe_head_split(num_heads)


def test_every_head_reads_every_input_feature():
    """split_heads cuts X W_Q, not X: each head's queries depend on all d_model input features."""
    torch.manual_seed(0)
    module = mha.MultiHeadAttention(12, 3).double()
    x = torch.randn(1, 1, 12, dtype=torch.float64)
    jac = torch.autograd.functional.jacobian(lambda t: mha.split_heads(module.q_proj(t), 3), x).reshape(3, 4, 12)
    assert torch.all(jac.abs().amax(dim=1) > 0)


def test_head_blocks_errors():
    with pytest.raises(ValueError, match=r"d_model \(12\) must be divisible by num_heads \(5\)"):
        head_split.head_blocks(12, 5)


def test_check_merge_heads():
    assert scaling.check_merge_heads(mha.merge_heads).ok
    by_hand = lambda x: x.transpose(1, 2).reshape(x.shape[0], x.shape[2], -1)  # noqa: E731
    assert scaling.check_merge_heads(by_hand).ok
    by_cat = lambda x: torch.cat(x.unbind(dim=1), dim=-1)  # noqa: E731  concat along features
    assert scaling.check_merge_heads(by_cat).ok
    no_transpose = lambda x: x.reshape(x.shape[0], x.shape[2], -1)  # noqa: E731  mixes tokens
    verdict = scaling.check_merge_heads(no_transpose)
    assert verdict.first_error == "values" and "transpose(1, 2) first" in repr(verdict)
    stacked = lambda x: x.reshape(x.shape[0], -1, x.shape[-1] * x.shape[1])  # noqa: E731
    assert scaling.check_merge_heads(stacked).first_error in ("shape", "values")
    rows = lambda x: x.reshape(x.shape[0], -1, x.shape[-1])  # noqa: E731  a vertical stack of heads
    verdict = scaling.check_merge_heads(rows)
    assert verdict.first_error == "shape" and "vertical stack" in repr(verdict) and "expected shape" in repr(verdict)
    reversed_heads = lambda x: torch.cat(x.flip(1).unbind(dim=1), dim=-1)  # noqa: E731  heads out of order
    assert "in order" in repr(scaling.check_merge_heads(reversed_heads))


def test_check_merge_heads_refuses_a_view_of_the_transposed_heads():
    """It works on split_heads' own strides, and raises on the contiguous heads attention returns."""

    def merge(x):
        b, h, t, d = x.shape
        return x.transpose(1, 2).view(b, t, h * d)

    x = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(0))
    assert torch.equal(merge(mha.split_heads(x, 2)), x)  # right on split_heads' strides: the old check passed it
    with pytest.raises(RuntimeError, match="view"):
        merge(torch.randn(2, 2, 5, 4))  # weights @ v is contiguous
    verdict = scaling.check_merge_heads(merge)
    flat = " ".join(repr(verdict).split())  # the verdict is wrapped to the page's width
    assert not verdict.ok and "not contiguous, so .view cannot merge it" in flat, repr(verdict)
    assert ".reshape(B, T, D)" in flat


def test_check_merge_heads_answers_malformed_input():
    def raises(x):
        raise RuntimeError("oops")

    cases = [
        ("not a function", "give a function"),
        (raises, "your function raised RuntimeError: oops"),
        (lambda x: "merged", "returned str, not a tensor"),
        (lambda x: torch.full_like(mha.merge_heads(x), float("nan")), "NaN or infinity"),
    ]
    for fn, message in cases:
        verdict = scaling.check_merge_heads(fn)
        assert not verdict.ok and message in " ".join(repr(verdict).split()), repr(verdict)


def test_check_score_variance():
    assert scaling.check_score_variance(1 / 64, 64, "1/d_k").ok
    assert scaling.check_score_variance(0.0156, 64, "1/d_k").ok  # 3 significant digits
    assert (
        scaling.check_score_variance(1.0, 64, "1/√d_k").ok and scaling.check_score_variance(64, 64, "1 (no scaling)").ok
    )
    for answer, hint in {64: "before scaling", 1.0: "not by c", 0.125: "multiply by scale²"}.items():
        verdict = scaling.check_score_variance(answer, 64, "1/d_k")
        assert not verdict.ok and verdict.first_error == "variance" and hint in repr(verdict), repr(verdict)
    assert "1 is the variance with 1/√d_k" in repr(scaling.check_score_variance(1.0, 16, "1 (no scaling)"))
    for bad, message in [("1/64", "found the string"), (float("nan"), "finite"), ([1], "found list")]:
        verdict = scaling.check_score_variance(bad)
        assert verdict.first_error == "input" and message in repr(verdict)


def test_check_score_variance_honours_2_significant_figures():
    assert scaling.VARIANCE_SIG_FIGS == 2  # the exercise asks "to 2 significant figures"
    for answer in (1 / 64, 0.015625, 0.0156, 0.016):  # exact, more figures, rounded to 2 figures
        verdict = scaling.check_score_variance(answer, 64, "1/d_k")
        assert verdict.ok, (answer, repr(verdict))
    verdict = scaling.check_score_variance(0.02, 64, "1/d_k")  # one figure fewer
    assert not verdict.ok and verdict.first_error == "variance"
    assert "close: give 2 significant figures (found 0.02" in repr(verdict) and "hint" not in repr(verdict)
    assert "0.016" not in repr(verdict) and "0.0156" not in repr(verdict)
    verdict = scaling.check_score_variance(0.017, 64, "1/d_k")  # one unit off
    assert verdict.first_error == "variance" and "off by one" in repr(verdict) and "hint" not in repr(verdict)
    verdict = scaling.check_score_variance(0.5, 64, "1/d_k")  # wrong: the method
    assert "hint: Var(q·k) = d_k" in repr(verdict)
    assert scaling.check_score_variance(1.0, 64, "1/√d_k").ok and scaling.check_score_variance(1.04, 64, "1/√d_k").ok
    assert scaling.check_score_variance("0.016").first_error == "input"


def test_check_layer_params():
    from mha.encoder import EncoderLayer

    for d_model, num_heads, d_ff in [(768, 12, 3072), (32, 4, 128), (12, 3, 20)]:
        count = sum(p.numel() for p in EncoderLayer(d_model, num_heads, d_ff).parameters())
        assert scaling.check_layer_params(count, d_model, num_heads, d_ff).ok
    total = 7_087_872
    slips = {
        total - 3072: "gain and a bias",
        total - 1536: "two LayerNorms",
        total - 4 * 768 - 3072 - 768: "every linear layer has a bias",
        2_362_368: "attention alone",
        4_722_432: "feed-forward block alone",
        737_280: "counts no real layer",
        4 * 768**2 + 2 * 768 * 3072: "biases are missing",
        1: "add attention",
    }
    for answer, hint in slips.items():
        verdict = scaling.check_layer_params(answer)
        assert not verdict.ok and verdict.first_error == "count" and hint in repr(verdict), (answer, repr(verdict))
    for bad in ("7087872", None, float("inf"), torch.ones(3)):
        assert scaling.check_layer_params(bad).first_error == "input"


def test_explorer_opens_on_the_tables_first_row():
    """The explorer shows its first combination until a control moves: the chapter's text describes it."""
    first = {"d_k": scaling.EXPLORER_D_KS[0], "scale": list(scaling.SCALES)[0]}
    assert first == {"d_k": 4, "scale": "1 (no scaling)"}
    assert scaling.EXPLORER_D_KS[0] in scaling.DEFAULT_D_KS  # a row of the chapter's table
    assert round(scaling.softmax_stats(**first)["max_weight"], 2) == 0.44


@pytest.mark.parametrize("bias", [True, False])
def test_fully_masked_row_paths(bias):
    """NaN when nn.MultiheadAttention returns the weights or takes its inference fast path; exactly 0
    (the output is out_proj's bias) when it calls F.scaled_dot_product_attention."""
    torch.manual_seed(0)
    module = nn.MultiheadAttention(8, 2, batch_first=True, bias=bias, dtype=torch.float64)
    x = torch.randn(1, 5, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    mask = torch.ones(5, 5, dtype=torch.bool).tril()
    mask[3] = False  # query 4 may attend to nothing
    found = scaling.fully_masked_row_paths(module, x, mask, row=3)
    assert len(found) == 8 and module.training  # every path tried; the module itself is left as it was
    for (training, need_weights, autograd), value in found.items():
        fast_path = bias and not training and not need_weights and not autograd  # the fast path needs biases
        assert value == ("NaN" if need_weights or fast_path else "0"), (training, need_weights, autograd)
    # the other rows are finite on every path, and the sdpa path's zero row is F.scaled_dot_product_attention's
    q = torch.randn(1, 2, 5, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    assert torch.all(F.scaled_dot_product_attention(q, q, q, attn_mask=mask)[0, :, 3] == 0)
    found_row_0 = scaling.fully_masked_row_paths(module, x, mask, row=0)
    assert set(found_row_0.values()) == {"other"}


# ---- the head split's index mapping: (B, T, D) -> (B, T, H, Dh) -> (B, H, T, Dh) -------------

RIGHT, SLIP = head_split.SPLIT_RESHAPES


def grid_of(fig, gid):
    """The texts with ``gid`` as a grid read off the picture: rows top to bottom, cells left to
    right; returns (labels per row, x of each cell in the top row)."""
    texts = [t for t in fig.axes[0].texts if t.get_gid() == gid]
    rows = {}
    for t in texts:
        rows.setdefault(round(t.get_position()[1], 6), []).append(t)
    ordered = [sorted(rows[y], key=lambda t: t.get_position()[0]) for y in sorted(rows, reverse=True)]
    return [[t.get_text() for t in row] for row in ordered], [t.get_position()[0] for t in ordered[0]] if rows else []


def labels(tensor):
    """t·f labels (counted from 1) of an index tensor's entries t·12 + f, computed here by hand."""
    return [[f"{v // 12 + 1}·{v % 12 + 1}" for v in row] for row in tensor.tolist()]


@pytest.mark.parametrize("reshape", [RIGHT, SLIP])
@pytest.mark.parametrize("num_heads", [1, 2, 3, 4, 6, 12])
def test_head_index_picture_draws_what_the_ops_produce(num_heads, reshape):
    head_dim = 12 // num_heads
    x = torch.arange(36).view(1, 3, 12)  # (B, T, D): entry t·12 + f
    if reshape == RIGHT:
        heads = x.view(1, 3, num_heads, head_dim).transpose(1, 2)  # (B, H, T, Dh)
        assert torch.equal(heads, mha.split_heads(x.double(), num_heads).long())
    else:
        heads = x.view(1, num_heads, 3, head_dim)  # (B, H, T, Dh), the slip
    fig = multi_head_math_figures.render_head_index(num_heads, reshape)
    # (a) the input, one token per row
    drawn, _ = grid_of(fig, "input-cell")
    assert drawn == labels(x[0])
    # (c) the heads: panel h (columns h·Dh .. (h+1)·Dh - 1 of the picture) is heads[h], a row per position
    drawn, xs = grid_of(fig, "head-cell")
    assert drawn == labels(torch.cat(list(heads[0]), dim=1))  # (T, H·Dh): panels side by side
    steps = [b - a for a, b in zip(xs, xs[1:])]
    boundaries = [i + 1 for i, step in enumerate(steps) if step > 1.0 + 1e-9]
    assert boundaries == [head_dim * h for h in range(1, num_heads)]  # a gap between panels only
    names = [t.get_text() for t in fig.axes[0].texts if t.get_gid() == "head-name"]
    # (b) exists only for view + transpose: each token's row cut into the heads' blocks
    drawn, _ = grid_of(fig, "view-cell")
    if reshape == RIGHT:
        assert drawn == labels(x.view(1, 3, num_heads, head_dim)[0].reshape(3, 12))
        assert len(names) == 2 * num_heads
    else:
        assert drawn == [] and len(names) == num_heads
    # a red edge on exactly the cells that the slip puts elsewhere than split_heads
    right = x.view(1, 3, num_heads, head_dim).transpose(1, 2)
    edges = [
        p
        for p in fig.axes[0].patches
        if p.get_edgecolor()[:3] == matplotlib.colors.to_rgb(multi_head_math_figures.WRONG_EDGE)
    ]
    assert len(edges) == int((heads != right).sum())
    title = next(t.get_text() for t in fig.axes[0].texts if t.get_fontsize() == 11)
    if reshape == RIGHT:
        assert title.startswith("Right:")
    elif num_heads > 1:
        assert title.startswith("Wrong:") and f"view(1, {num_heads}, 3, {head_dim})" in title
    else:
        assert "the same as view + transpose" in title


@pytest.mark.parametrize("num_heads", [1, 2, 3, 4, 6, 12])
def test_head_index_input_cells_are_coloured_by_the_head_they_land_in(num_heads):
    head_dim = 12 // num_heads
    x = torch.arange(36).view(1, 3, 12)
    for reshape, heads in (
        (RIGHT, x.view(1, 3, num_heads, head_dim).transpose(1, 2)),
        (SLIP, x.view(1, num_heads, 3, head_dim)),
    ):
        fig = multi_head_math_figures.render_head_index(num_heads, reshape)
        cells = fig.axes[0].patches[:36]  # (a) is drawn first, token by token
        for value, cell in enumerate(cells):
            head = int((heads[0] == value).nonzero()[0, 0])
            assert cell.get_facecolor()[:3] == pytest.approx(
                multi_head_math_figures._light(viz.plotting.head_color(head))
            )


@pytest.mark.parametrize("num_heads", [1, 2, 3, 4, 6, 12])
def test_the_slip_differs_from_split_heads_unless_one_head_or_one_token(num_heads):
    for seq_len in (1, 2, 3, 5):
        slip = head_split.split_steps(num_heads, SLIP, seq_len=seq_len)
        right = head_split.split_steps(num_heads, RIGHT, seq_len=seq_len)
        assert right["right"] and right["view"].shape == (1, seq_len, num_heads, 12 // num_heads)
        assert slip["view"] is None and slip["heads"].shape == right["heads"].shape
        same = torch.equal(slip["heads"], right["heads"])
        assert slip["right"] == same == (num_heads == 1 or seq_len == 1)


def test_describe_head_index_names_the_mapping():
    text = head_split.describe_head_index(3, RIGHT)
    assert "(B, T, D) = (1, 3, 12)" in text and "view(1, 3, 3, 4)" in text and "transpose(1, 2)" in text
    assert "head 1: token 1 features 1-4, token 2 features 1-4, token 3 features 1-4" in text
    assert "head 2: token 1 features 5-8, token 2 features 5-8" in text and "contiguous" in text
    text = head_split.describe_head_index(2, SLIP)
    assert text.count("Wrong") == 1 and "view(1, 2, 3, 6) without transpose" in text
    assert "head 1: token 1 features 1-6, token 1 features 7-12, token 2 features 1-6" in text
    assert "head 2: token 2 features 7-12, token 3 features 1-6, token 3 features 7-12" in text
    text = head_split.describe_head_index(1, SLIP)
    assert "Wrong" not in text and "The same as view + transpose" in text
    assert head_split.describe_head_index(12, SLIP).count("head ") >= 12
    assert "a view of the transposed tensor raises an error" in head_split.describe_head_index(6, RIGHT)
    assert "here a view would work too" in head_split.describe_head_index(12, RIGHT)  # dₖ = 1
    assert "here a view would work too" in head_split.describe_head_index(1, RIGHT)
    for num_heads in (1, 2, 3, 4, 6, 12):
        for reshape in (RIGHT, SLIP):
            steps = head_split.split_steps(num_heads, reshape)
            for i, head in enumerate(steps["heads"][0]):
                row = head_split.describe_row(head[-1].tolist())
                if reshape == SLIP or i < 2:
                    assert row in head_split.describe_head_index(num_heads, reshape)


@pytest.mark.parametrize("seq_len", [1, 3])
@pytest.mark.parametrize("num_heads", [1, 2, 3, 4, 6, 12])
def test_merging_back_needs_contiguous_or_reshape(num_heads, seq_len):
    """The caption's claim: a view of the transposed heads fails (h > 1 heads of dₖ > 1 features,
    T > 1 tokens); contiguous().view or reshape works."""
    x = torch.arange(seq_len * 12).view(1, seq_len, 12)  # (B, T, D)
    out = mha.split_heads(x.double(), num_heads).contiguous()  # (B, H, T, Dh), as attention returns it
    back = out.transpose(1, 2)  # (B, T, H, Dh): its memory is still in head order
    if num_heads > 1 and 12 // num_heads > 1 and seq_len > 1:
        with pytest.raises(RuntimeError, match="view size is not compatible"):
            back.view(1, seq_len, 12)
    else:  # a head of one feature, or one head, or one token: the strides still allow a view
        assert torch.equal(back.view(1, seq_len, 12).long(), x)
    assert torch.equal(back.contiguous().view(1, seq_len, 12).long(), x)
    assert torch.equal(back.reshape(1, seq_len, 12).long(), x)
    assert torch.equal(mha.merge_heads(out).long(), x)


def test_head_index_errors():
    with pytest.raises(ValueError, match=r"reshape must be one of \['view \+ transpose', 'view, no transpose'\]"):
        head_split.split_steps(2, "reshape")
    with pytest.raises(ValueError, match=r"d_model \(12\) must be divisible by num_heads \(5\)"):
        head_split.split_steps(5)
    with pytest.raises(ValueError, match="seq_len"):
        head_split.index_tensor(0)


def test_head_index_explorer_frames():
    """The chapter's explorer: 10 frames, one per (h, reshape), legible at the book's width."""
    from mha.viz import describe, widgets
    from mha.viz.controls import Choice

    ex = widgets.explorer(
        multi_head_math_figures.HeadIndexPlot(),
        {
            "num_heads": Choice([1, 2, 3, 4, 6], label="number of heads h"),
            "reshape": Choice(list(head_split.SPLIT_RESHAPES), label="reshape", names=head_split.SPLIT_RESHAPE_NAMES),
        },
        title="Which feature of which token lands in which head",
        alt=head_split.describe_head_index,
        initial={"num_heads": 3},
        live="frames",
    )
    assert ex.frame_count == 10 and len(ex.frames) == 10  # every frame differs, h = 1 too (step (b))
    assert ex.combos[ex.start] == {"num_heads": 3, "reshape": RIGHT}
    assert describe.text_px(ex.text_pt, ex.dpi, ex.frame_size[0], describe.EXPLORER_COLUMN_PX) >= describe.MIN_TEXT_PX
    assert ex.alts[ex.start] == head_split.describe_head_index(3, RIGHT)
    assert "view(B, H, T, Dh), no transpose" in ex.html


def test_head_index_plot_shows_a_drawn_figure_for_each_choice():
    from mha.viz.live import Painter

    plot = multi_head_math_figures.HeadIndexPlot()
    fig = plot.draw(2, SLIP)
    assert plot.update(fig, 2, SLIP) is None and plot.update(fig, 2, RIGHT) is False
    painter = Painter(plot, "index")
    first = painter.png({"num_heads": 2, "reshape": SLIP})
    painter.png({"num_heads": 3, "reshape": RIGHT})
    assert painter.png({"num_heads": 2, "reshape": SLIP}) == first and len(painter.figures) == 2
