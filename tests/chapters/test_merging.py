"""The merging-heads chapter's merges: shapes, the concat == MultiHeadAttention identity, costs against real modules,
which merges fold into one another, and the gated merge's counterexample (not affine on one token)."""

import pytest
import torch
from conftest import randn
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

import mha
from mha.chapters.merging import figures as merging_figures
from mha.chapters.merging import merge_exercises, merge_folding, merging, role_heads
from mha.chapters.merging.merging import MERGES, STRATEGIES, MergedMultiHeadAttention


def n_params(module):
    return sum(p.numel() for p in module.parameters())


def seeded_module(d_model, num_heads, merge, bias=True, seed=0, dtype=torch.float32):
    torch.manual_seed(seed)
    m = MergedMultiHeadAttention(d_model, num_heads, merge, bias=bias).to(dtype)
    if merge == "weighted":  # move away from the uniform start so the weights matter
        with torch.no_grad():
            m.merge_layer.head_logits.copy_(randn(num_heads, seed=seed + 1, dtype=dtype))
    return m


@pytest.mark.parametrize("merge", STRATEGIES)
@pytest.mark.parametrize("d_model,num_heads,T,S", [(8, 1, 3, 3), (12, 3, 4, 6), (16, 4, 5, 5)])
def test_shapes(merge, d_model, num_heads, T, S, device):
    m = seeded_module(d_model, num_heads, merge).to(device)
    q, kv = randn(2, T, d_model, seed=1, device=device), randn(2, S, d_model, seed=2, device=device)
    out, weights = m(q, kv, kv)
    assert out.shape == (2, T, d_model)
    assert weights.shape == (2, num_heads, T, S)
    assert torch.allclose(weights.sum(-1), torch.ones(2, num_heads, T, device=device), atol=1e-5)
    heads, _ = m.head_outputs(q, kv, kv)
    assert heads.shape == (2, num_heads, T, d_model // num_heads)
    out2, none = m(q, kv, kv, need_weights=False)
    assert none is None and torch.equal(out, out2)
    coeff = m.head_coefficients(q, kv, kv)
    if merge.startswith("concat"):
        assert coeff is None
    else:
        assert coeff.shape == (2, T, num_heads)
        assert torch.allclose(coeff.sum(-1), torch.ones(2, T, device=device), atol=1e-5)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("d_model,num_heads", [(8, 2), (12, 3), (16, 16)])
def test_concat_equals_multi_head_attention(bias, dtype, d_model, num_heads, device):
    torch.manual_seed(3)
    ref = mha.MultiHeadAttention(d_model, num_heads, bias=bias).to(device, dtype)
    m = MergedMultiHeadAttention.from_multi_head(ref)
    assert n_params(m) == n_params(ref) == mha.attention_params(d_model, num_heads, bias=bias)
    q, kv = (
        randn(2, 4, d_model, seed=4, dtype=dtype, device=device),
        randn(2, 6, d_model, seed=5, dtype=dtype, device=device),
    )
    pad = torch.tensor([[False] * 6, [False] * 4 + [True] * 2], device=device)
    mask = torch.rand(4, 6, generator=torch.Generator().manual_seed(6)).to(device) > 0.3
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    for kwargs in ({}, {"mask": mask}, {"key_padding_mask": pad}, {"mask": mask, "key_padding_mask": pad}):
        out_ref, w_ref = ref(q, kv, kv, **kwargs)
        out, w = m(q, kv, kv, **kwargs)
        assert torch.allclose(out, out_ref, atol=tol, rtol=0)
        assert torch.allclose(w, w_ref, atol=tol, rtol=0)


def test_concat_equals_torch_module():
    torch.manual_seed(7)
    ref = nn.MultiheadAttention(16, 4, batch_first=True)
    m = MergedMultiHeadAttention.from_multi_head(mha.MultiHeadAttention.from_torch(ref))
    x = randn(3, 5, 16, seed=8)
    out_ref, w_ref = ref(x, x, x, average_attn_weights=False)
    out, w = m(x)
    assert torch.allclose(out, out_ref, atol=1e-5) and torch.allclose(w, w_ref, atol=1e-6)


def loop_merge(m, x):
    """Reference for every merge, one head and one token at a time."""
    heads, _ = m.head_outputs(x)  # (B, H, T, Dh)
    layer, (B, H, T, _) = m.merge_layer, heads.shape
    out = torch.zeros(B, T, m.d_model, dtype=x.dtype)
    for b in range(B):
        for t in range(T):
            if m.merge == "concat":
                vec = torch.cat([heads[b, h, t] for h in range(H)])
            elif m.merge == "concat_lowrank":
                vec = layer.down.weight @ torch.cat([heads[b, h, t] for h in range(H)])
            else:
                if m.merge == "average":
                    c = [1.0 / H] * H
                elif m.merge == "weighted":
                    e = [float(torch.exp(v)) for v in layer.head_logits]
                    c = [v / sum(e) for v in e]
                else:
                    logits = layer.gate.weight @ x[b, t] + layer.gate.bias
                    e = [float(torch.exp(v)) for v in logits]
                    c = [v / sum(e) for v in e]
                vec = sum(c[h] * heads[b, h, t] for h in range(H))
            out[b, t] = layer.out_proj.weight @ vec + layer.out_proj.bias
    return out


@pytest.mark.parametrize("merge", STRATEGIES)
def test_each_merge_against_a_loop(merge):
    m = seeded_module(12, 3, merge, dtype=torch.float64, seed=9)
    x = randn(2, 4, 12, seed=10, dtype=torch.float64)
    with torch.no_grad():
        assert torch.allclose(m(x)[0], loop_merge(m, x), atol=1e-12)


def test_fresh_weighted_merge_is_the_average():
    torch.manual_seed(11)
    avg = MergedMultiHeadAttention(8, 2, "average")
    torch.manual_seed(11)
    weighted = MergedMultiHeadAttention(8, 2, "weighted")
    weighted.merge_layer.out_proj.load_state_dict(avg.merge_layer.out_proj.state_dict())
    for name in ("q_proj", "k_proj", "v_proj"):
        getattr(weighted, name).load_state_dict(getattr(avg, name).state_dict())
    x = randn(2, 3, 8, seed=12)
    assert torch.allclose(avg(x)[0], weighted(x)[0], atol=1e-7)


def test_average_and_mix_functions():
    heads = randn(2, 3, 4, 5, seed=13, dtype=torch.float64)  # (B, H, T, Dh)
    manual = (heads[:, 0] + heads[:, 1] + heads[:, 2]) / 3
    assert torch.allclose(merging.average_head_outputs(heads), manual)
    assert torch.allclose(merging.mix_heads(heads, torch.full((3,), 1 / 3, dtype=torch.float64)), manual)
    c = torch.tensor([0.5, 0.25, 0.25], dtype=torch.float64)
    assert torch.allclose(merging.mix_heads(heads, c), 0.5 * heads[:, 0] + 0.25 * heads[:, 1] + 0.25 * heads[:, 2])
    with pytest.raises(ValueError, match=r"coefficients must have shape \(H,\) = \(3,\)"):
        merging.mix_heads(heads, torch.ones(2, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"heads must have shape \(B, H, T, Dh\)"):
        merging.average_head_outputs(heads[0])
    with pytest.raises(TypeError, match="heads must be a torch.Tensor"):
        merging.average_head_outputs([1.0])


def test_averaging_loses_who_did_what():
    """Two inputs whose heads carry swapped information: same average, different concatenation."""
    cat, mouse = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])
    a = torch.stack([cat, mouse])[None, :, None]  # (1, H=2, T=1, Dh=2): head 1 subject, head 2 object
    b = torch.stack([mouse, cat])[None, :, None]
    assert torch.equal(merging.average_head_outputs(a), merging.average_head_outputs(b))
    assert not torch.equal(mha.merge_heads(a), mha.merge_heads(b))
    # The hand-built module reproduces it from real attention.
    for merge in ("average", "concat"):
        m = role_heads.role_heads_example(merge)
        xa = role_heads.encode_sentence("cat chases mouse")
        xb = role_heads.encode_sentence("mouse chases cat")
        out_a, out_b = m(xa)[0][0, 1], m(xb)[0][0, 1]
        if merge == "average":
            assert torch.allclose(out_a, out_b, atol=1e-6)
        else:
            assert (out_a - out_b).abs().max() > 0.9


@pytest.mark.parametrize("merge", ["concat", "concat_lowrank", "average", "weighted"])
def test_to_concat_is_the_same_function(merge):
    m = seeded_module(12, 4, merge, dtype=torch.float64, seed=14)
    c = merge_folding.to_concat(m)
    x = randn(2, 5, 12, seed=15, dtype=torch.float64)
    assert torch.allclose(m(x)[0], c(x)[0], atol=1e-12)
    rank = merge_folding.numerical_rank(merge_folding.equivalent_out_proj(m))
    assert rank == (12 if merge == "concat" else 3)  # averaging: rank Dh = D / H at most


def test_equivalent_out_proj_errors():
    with pytest.raises(ValueError, match="merge 'gated' has no equivalent W_O"):
        merge_folding.equivalent_out_proj(MergedMultiHeadAttention(8, 2, "gated"))
    with pytest.raises(TypeError, match="module must be an mha.chapters.merging.merging.MergedMultiHeadAttention"):
        merge_folding.equivalent_out_proj(mha.MultiHeadAttention(8, 2))


@pytest.mark.parametrize("merge", STRATEGIES)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("d_model,num_heads", [(768, 12), (1024, 16), (32, 4), (12, 3)])
def test_merge_params_match_modules(merge, bias, d_model, num_heads):
    m = MergedMultiHeadAttention(d_model, num_heads, merge, bias=bias)
    assert merging.merge_params(d_model, num_heads, merge, bias) == n_params(m.merge_layer)
    assert merging.merged_attention_params(d_model, num_heads, merge, bias) == n_params(m)


def test_merge_params_hand_numbers():
    assert merging.merge_params(768, 12, "concat") == 768 * 768 + 768 == 590_592
    assert merging.merge_params(768, 12, "average") == 64 * 768 + 768 == 49_920
    assert merging.merge_params(768, 12, "average", bias=False) == 49_152
    assert merging.merge_params(768, 12, "weighted") == 49_920 + 12
    assert merging.merge_params(768, 12, "gated") == 49_920 + 768 * 12 + 12
    assert merging.merge_params(768, 12, "concat_lowrank") == 768 * 64 + 64 * 768 + 768 == 99_072
    assert merging.merge_params(32, 4, "concat_lowrank") == 32 * 8 + 8 * 32 + 32 == 544
    assert merging.merged_attention_params(768, 12, "concat") == mha.attention_params(768, 12) == 2_362_368


@pytest.mark.parametrize("merge", STRATEGIES)
@pytest.mark.parametrize("d_model,num_heads,T", [(32, 4, 7), (48, 6, 3)])
def test_merge_flops_match_flop_counter(merge, d_model, num_heads, T):
    m = MergedMultiHeadAttention(d_model, num_heads, merge)
    heads = randn(1, num_heads, T, d_model // num_heads, seed=16)
    x = randn(1, T, d_model, seed=17)
    with FlopCounterMode(display=False) as counter:
        m.merge_layer(heads, x)
    assert counter.get_total_flops() == merging.merge_flops(T, d_model, num_heads, merge)
    parts = merging.merge_flops_breakdown(T, d_model, num_heads, merge)
    assert parts["total"] == parts["gate"] + parts["mix"] + parts["project"]


def test_merge_flops_hand_numbers():
    assert merging.merge_flops(512, 768, 12, "concat") == 2 * 512 * 768 * 768
    assert merging.merge_flops(512, 768, 12, "average") == 2 * 512 * 768 + 2 * 512 * 64 * 768
    assert merging.merge_flops(512, 768, 12, "concat_lowrank") == 2 * (2 * 512 * 768 * 64)


def test_cost_table_rows():
    rows = merging.merge_cost_table({"BERT-base": (768, 12)})
    assert [r["merge"] for r in rows] == list(STRATEGIES)
    assert rows[0]["params_vs_concat"] == 1.0
    assert rows[2]["params"] == 49_920
    assert [r["merge"] for r in merging.merge_cost_table({"x": (8, 2)}, merges=MERGES)] == list(MERGES)


def test_errors():
    with pytest.raises(
        ValueError, match="merge must be one of 'concat', 'concat_lowrank', 'average', 'weighted', 'gated', found 'sum'"
    ):
        MergedMultiHeadAttention(8, 2, "sum")
    with pytest.raises(ValueError, match=r"d_model \(10\) must be divisible by num_heads \(3\)"):
        MergedMultiHeadAttention(10, 3)
    with pytest.raises(ValueError, match=r"d_model \(10\) must be divisible by num_heads \(3\)"):
        merging.merge_params(10, 3, "concat")
    with pytest.raises(ValueError, match="merge must be one of"):
        merging.merge_flops(4, 8, 2, "max")
    with pytest.raises(TypeError, match="m must be an mha.MultiHeadAttention"):
        MergedMultiHeadAttention.from_multi_head(nn.Linear(2, 2))
    with pytest.raises(ValueError, match=r"query must have last dimension 8 \(d_model\)"):
        MergedMultiHeadAttention(8, 2)(torch.zeros(1, 3, 4))


@pytest.mark.parametrize("merge", MERGES)
def test_role_example_numbers(merge):
    ex = role_heads.merge_example(merge, "cat chases mouse")
    heads = ex["heads"]  # (H, T, Dh); at the verb: head 1 = cat, head 2 = mouse
    assert torch.allclose(heads[0, 1], torch.tensor([1.0, 0, 0, 0], dtype=torch.float64), atol=1e-5)
    assert torch.allclose(heads[1, 1], torch.tensor([0, 0, 1.0, 0], dtype=torch.float64), atol=1e-5)
    expected = {
        "concat": [1, 0, 0, 0, 0, 0, 1, 0],
        "average": [0.5, 0, 0.5, 0],
        "weighted": [0.75, 0, 0.25, 0],
        "gated": [0.9526, 0, 0.0474, 0],
    }[merge]
    assert torch.allclose(ex["merged"][1], torch.tensor(expected, dtype=torch.float64), atol=1e-4)
    assert ex["output"].shape == (3, 8)
    with pytest.raises(ValueError, match=r"sentence must be 3 words from \('cat', 'chases', 'mouse', 'dog'\)"):
        role_heads.encode_sentence("cat chases")


def test_explorer_render_and_alt():
    import matplotlib
    import matplotlib.pyplot as plt

    for merge in MERGES:
        fig = merging_figures.plot_merge_example(merge, "mouse chases cat")
        assert isinstance(fig, matplotlib.figure.Figure) and len(fig.axes) == 3
        plt.close(fig)
    assert role_heads.merge_example_alt("average", "cat chases mouse").endswith("cat 0.50, mouse 0.50.")


def test_out_proj_blocks_figure():
    """One panel per merge, its rank in the title (float32 noise must not raise a rank-Dh matrix)."""
    import matplotlib.pyplot as plt

    names = ("concat", "concat_lowrank", "average")
    mats = {m: merge_folding.equivalent_out_proj(seeded_module(16, 4, m)) for m in names}
    fig = merging_figures.plot_out_proj_blocks(mats, num_heads=4)
    titles = [ax.get_title() for ax in fig.axes if ax.axison]
    assert titles == ["concat: rank 16", "concat_lowrank: rank 4", "average: rank 4"]
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == [f"head {i}" for i in range(1, 5)]
    assert not fig.axes[3].axison  # the empty fourth panel is switched off
    plt.close(fig)


def test_hand_built_example_covers_the_four_merges():
    with pytest.raises(ValueError, match="the hand-built example covers the merges"):
        role_heads.role_heads_example("concat_lowrank")


@pytest.mark.parametrize("merge", ["concat", "concat_lowrank", "average", "weighted"])
def test_concat_is_a_sum_of_per_head_projections(merge):
    """concat(H) W_O = sum_i H_i W_O_i, and every fixed merge is one W_O: the identity by hand."""
    m = seeded_module(12, 3, merge, dtype=torch.float64, seed=21)
    x = randn(2, 4, 12, seed=22, dtype=torch.float64)
    heads, _ = m.head_outputs(x)  # (B, H, T, Dh)
    w_o = merge_folding.equivalent_out_proj(m)  # (D, D), nn.Linear layout
    summed = merging.sum_of_head_projections(heads, w_o)
    assert torch.allclose(summed, mha.merge_heads(heads) @ w_o.T, atol=1e-12)
    by_hand = sum(heads[:, i] @ w_o[:, 4 * i : 4 * (i + 1)].T for i in range(3))  # blocks of Dh = 4
    assert torch.allclose(summed, by_hand, atol=1e-12)
    with torch.no_grad():
        assert torch.allclose(m(x)[0], summed + m.merge_layer.out_proj.bias, atol=1e-12)
    blocks = w_o.view(12, 3, 4)  # (D, H, Dh): every block equal exactly for the average
    equal = all(torch.allclose(blocks[:, 0], blocks[:, i]) for i in range(3))
    assert equal == (merge == "average")
    if merge == "average":
        assert torch.allclose(blocks[:, 0], m.merge_layer.out_proj.weight / 3)


def test_sum_of_head_projections_errors():
    heads = randn(1, 2, 3, 4)
    with pytest.raises(ValueError, match=r"out_proj_weight must have shape \(D_out, H\*Dh\) = \(D_out, 8\)"):
        merging.sum_of_head_projections(heads, randn(8, 6))
    with pytest.raises(TypeError, match="out_proj_weight must be a torch.Tensor"):
        merging.sum_of_head_projections(heads, [[1.0]])


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("num_kv_heads", [1, 2, 4])
def test_mean_pool_kv_heads(bias, num_kv_heads):
    """Ainslie et al.'s conversion: exact when the heads of a group already share K and V."""
    torch.manual_seed(23)
    m = mha.MultiHeadAttention(16, 4, bias=bias).double()
    group = 4 // num_kv_heads
    with torch.no_grad():
        for proj in (m.k_proj, m.v_proj):
            w = proj.weight.view(num_kv_heads, group, 4, 16)  # (G, H/G, Dh, D)
            w.copy_(w[:, :1].expand_as(w).clone())
            if bias:
                b = proj.bias.view(num_kv_heads, group, 4)
                b.copy_(b[:, :1].expand_as(b).clone())
    gqa = merge_folding.mean_pool_kv_heads(m, num_kv_heads)
    assert isinstance(gqa, mha.GroupedQueryAttention) and gqa.num_kv_heads == num_kv_heads
    x = randn(2, 5, 16, seed=24, dtype=torch.float64)
    with torch.no_grad():
        assert torch.allclose(m(x)[0], gqa(x)[0], atol=1e-12)
    # in general it is an approximation, and its K/V rows are the group means
    fresh = mha.MultiHeadAttention(16, 4, bias=bias)
    pooled = merge_folding.mean_pool_kv_heads(fresh, num_kv_heads)
    expected = fresh.k_proj.weight.view(num_kv_heads, group, 4, 16).mean(dim=1).reshape(-1, 16)
    assert torch.allclose(pooled.k_proj.weight, expected)
    assert torch.equal(pooled.q_proj.weight, fresh.q_proj.weight) and torch.equal(
        pooled.out_proj.weight, fresh.out_proj.weight
    )
    with pytest.raises(TypeError, match="m must be an mha.MultiHeadAttention"):
        merge_folding.mean_pool_kv_heads(nn.Linear(2, 2), 1)


def random_module(merge, bias=True, seed=25):
    """A float64 module with every parameter drawn from N(0, 1), biases included."""
    m = MergedMultiHeadAttention(12, 3, merge, bias=bias).double()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64))
    return m


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("merge", ["concat_lowrank", "weighted", "average"])
def test_low_rank_and_weighted_fold_into_the_average(merge, bias):
    """The low-rank control is a reparameterisation of averaging: W_V_i' = h · W_V_i · W_down_i."""
    m = random_module(merge, bias)
    folded = merge_folding.fold_into_average(m)
    assert folded.merge == "average"
    x = randn(2, 6, 12, seed=26, dtype=torch.float64)
    mask = mha.causal_mask(6)
    with torch.no_grad():
        for kwargs in ({}, {"mask": mask}):
            out = m(x, **kwargs)[0]
            assert torch.allclose(folded(x, **kwargs)[0], out, atol=1e-12 * out.abs().max().item(), rtol=0)
    # the folded value weights, by hand, in the formula layout (x W_V, W_down: D x Dh)
    w_v, h, dh = m.v_proj.weight.T, 3, 4
    if merge == "concat_lowrank":
        blocks = [m.merge_layer.down.weight.T[i * dh : (i + 1) * dh] for i in range(h)]  # W_down_i
    else:
        a = torch.softmax(m.merge_layer.head_logits, 0) if merge == "weighted" else torch.full((h,), 1 / h)
        blocks = [a[i] * torch.eye(dh, dtype=torch.float64) for i in range(h)]
    for i in range(h):
        expected = h * w_v[:, i * dh : (i + 1) * dh] @ blocks[i]
        assert torch.allclose(folded.v_proj.weight.T[:, i * dh : (i + 1) * dh], expected, atol=1e-12)
    for name in ("q_proj", "k_proj"):
        assert torch.equal(getattr(folded, name).weight, getattr(m, name).weight)
    assert torch.equal(folded.merge_layer.out_proj.weight, m.merge_layer.out_proj.weight)


@pytest.mark.parametrize("merge", ["average", "weighted"])
def test_to_lowrank_gives_the_average_back(merge):
    """Blocks a_i·I (I / h for the average) make the low-rank concat compute the summing merge."""
    m = random_module(merge)
    low = merge_folding.to_lowrank(m)
    x = randn(2, 5, 12, seed=27, dtype=torch.float64)
    with torch.no_grad():
        assert torch.allclose(low(x)[0], m(x)[0], atol=1e-12, rtol=0)
    if merge == "average":
        assert torch.equal(low.merge_layer.down.weight, torch.cat([torch.eye(4, dtype=torch.float64) / 3] * 3, dim=1))
    assert merge_folding.numerical_rank(merge_folding.equivalent_out_proj(low)) == 4  # the same rank-d_k bottleneck


def test_fold_errors():
    for merge in ("concat", "gated"):
        with pytest.raises(ValueError, match=f"merge '{merge}' cannot be folded into an average"):
            merge_folding.fold_into_average(MergedMultiHeadAttention(8, 2, merge))
    with pytest.raises(ValueError, match="to_lowrank takes an 'average' or 'weighted' module, found merge 'concat'"):
        merge_folding.to_lowrank(MergedMultiHeadAttention(8, 2, "concat"))
    for fn in (merge_folding.fold_into_average, merge_folding.to_lowrank):
        with pytest.raises(TypeError, match="module must be an mha.chapters.merging.merging.MergedMultiHeadAttention"):
            fn(mha.MultiHeadAttention(8, 2))


# --------------------------------------------------------------------------------------------
# The gated merge is outside both families: on one token it is not affine, and it has rank d_k
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("d_model,num_heads", [(8, 2), (12, 3), (32, 4)])
def test_gated_merge_is_not_affine_on_one_token(d_model, num_heads, seed):
    """Concatenation and the fixed merges are affine in x on a one-token input; the gated merge is not."""
    torch.manual_seed(seed)
    deviation = {m: merging.affine_deviation(seeded_module(d_model, num_heads, m, seed=seed)) for m in STRATEGIES}
    for merge, value in deviation.items():
        if merge == "gated":
            assert value > 0.05, f"gated, d_model {d_model}, h {num_heads}: deviation {value:.3g}, expected far from 0"
        else:
            assert value < 1e-13, f"{merge}: deviation {value:.3g} from affine, expected float64 rounding"
    torch.manual_seed(seed)
    assert merging.affine_deviation(mha.MultiHeadAttention(d_model, num_heads)) < 1e-13


def test_gated_deviation_comes_from_the_gate():
    """With the gate's weights at zero the mix is constant (softmax of b_gate) and the module is affine again."""
    m = seeded_module(8, 2, "gated", seed=3)
    assert merging.affine_deviation(m) > 0.05
    with torch.no_grad():
        m.merge_layer.gate.weight.zero_()
    assert merging.affine_deviation(m) < 1e-13
    assert m.merge_layer.gate.weight.dtype == torch.float32  # the measurement used a float64 copy


def test_gated_outputs_on_one_token_have_rank_d_k():
    """The converse: the gated merge cannot compute concatenation's full-rank maps of one token."""
    x = randn(64, 1, 12, seed=4, dtype=torch.float64)
    ranks = {}
    for merge in ("gated", "concat"):
        m = seeded_module(12, 3, merge, dtype=torch.float64, seed=5)
        with torch.no_grad():
            out = m(x)[0][:, 0]  # (64, D)
        ranks[merge] = int(torch.linalg.matrix_rank(out - out.mean(dim=0)))
    assert ranks == {"gated": 4, "concat": 12}


class Square(nn.Module):
    """f(x) = x * x: not affine, with a midpoint defect known by hand, -(x - y)^2 / 4."""

    d_model = 3

    def forward(self, x):
        return x * x, None


def test_affine_deviation_by_hand():
    gen = torch.Generator().manual_seed(7)
    x, y = torch.randn(2, 16, 1, 3, generator=gen, dtype=torch.float64)
    expected = ((x - y) ** 2 / 4).abs().max() / (x * x - y * y).abs().max()
    assert merging.affine_deviation(Square(), num_pairs=16, seed=7) == pytest.approx(expected.item(), rel=1e-12)


def test_affine_deviation_errors():
    with pytest.raises(TypeError, match="module must be an nn.Module with an int d_model"):
        merging.affine_deviation(nn.Linear(4, 4))
    with pytest.raises(ValueError, match="num_pairs"):
        merging.affine_deviation(MergedMultiHeadAttention(8, 2), num_pairs=0)


def test_exercise_1_checker_knows_w_down_has_no_bias():
    right = {"concat": 1_049_600, "average": 66_560, "concat_lowrank": 132_096}
    layer = MergedMultiHeadAttention(1024, 16, "concat_lowrank").merge_layer
    assert layer.down.bias is None and n_params(layer) == right["concat_lowrank"]
    assert merge_exercises.check_merge_costs(**right).ok
    slip = merge_exercises.check_merge_costs(concat_lowrank=right["concat_lowrank"] + 64)  # a bias on W_down
    assert not slip.ok and "W_down has no bias" in repr(slip)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_numerical_rank_reads_a_products_rank_at_its_own_precision(dtype):
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(768, 64, generator=gen).to(dtype)
    b = torch.randn(64, 768, generator=gen).to(dtype)
    assert merge_folding.numerical_rank(a @ b) == 64  # 768 x 768, rank 64 in exact arithmetic
    assert merge_folding.numerical_rank(torch.randn(768, 768, generator=gen).to(dtype)) == 768
    assert merge_folding.numerical_rank(torch.zeros(3, 5, dtype=dtype)) == 0
    # the float64 SVD agrees with matrix_rank's own tolerance where float32's SVD is sound
    m = torch.randn(40, 30, generator=gen).to(dtype) @ torch.randn(30, 50, generator=gen).to(dtype)
    assert merge_folding.numerical_rank(m) == int(torch.linalg.matrix_rank(m)) == 30


def test_numerical_rank_rejects_what_is_not_a_matrix():
    with pytest.raises(ValueError, match=r"matrix must be a 2-D floating-point tensor, found shape \(2, 3, 4\)"):
        merge_folding.numerical_rank(torch.zeros(2, 3, 4))
    with pytest.raises(ValueError, match="torch.int64"):
        merge_folding.numerical_rank(torch.zeros(2, 3, dtype=torch.long))
