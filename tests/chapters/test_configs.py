"""The parameter-analysis chapter's numbers: published configurations, parameter/FLOP/KV-cache tables and explorers.

Every formula is compared with something independent: ``sum(p.numel())`` of real torch and mha
modules, ``FlopCounterMode`` on a real forward pass, the bytes of real ``mha.KVCache`` tensors
during decoding, and numbers worked out by hand.
"""

import pytest
import torch
from conftest import randn
from torch import nn

import mha
from mha.chapters.costs import config_exercises as X
from mha.chapters.costs import configs as C
from mha.chapters.costs import figures as costs_figures
from mha.chapters.costs import tables

ALL_CONFIGS = C.CLASSIC_CONFIGS + C.LLAMA2_CONFIGS


def numel(module):
    return sum(p.numel() for p in module.parameters())


# ---------------------------------------------------------------------------------------------
# Parameters of one layer
# ---------------------------------------------------------------------------------------------

SHAPES = [(8, 1), (8, 2), (12, 3), (64, 8), (96, 12), (768, 12), (1024, 16), (1280, 20), (1600, 25)]


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("d_model,num_heads", SHAPES)
def test_attention_params_match_torch_and_mha_modules(d_model, num_heads, bias):
    expected = mha.attention_params(d_model, num_heads, bias=bias)
    with torch.device("meta"):  # shapes only: no memory, no initialisation cost
        modules = [
            nn.MultiheadAttention(d_model, num_heads, bias=bias),
            mha.MultiHeadAttention(d_model, num_heads, bias=bias),
            mha.GroupedQueryAttention(d_model, num_heads, num_heads, bias=bias),
            mha.LoopedMultiHeadAttention(d_model, num_heads, bias=bias),
        ]
    for module in modules:
        assert numel(module) == expected
    assert expected == 4 * d_model**2 + (4 * d_model if bias else 0)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize(
    "d_model,num_heads,num_kv_heads",
    [(8, 2, 1), (16, 4, 2), (64, 8, 1), (64, 8, 4), (96, 12, 3), (4096, 32, 8), (8192, 64, 8)],
)
def test_gqa_params_match_modules_and_closed_form(d_model, num_heads, num_kv_heads, bias):
    with torch.device("meta"):
        module = mha.GroupedQueryAttention(d_model, num_heads, num_kv_heads, bias=bias)
    count = mha.attention_params(d_model, num_heads, num_kv_heads, bias)
    assert numel(module) == count
    head_dim = d_model // num_heads
    weights = (2 * num_heads + 2 * num_kv_heads) * head_dim * d_model
    assert count == weights + ((2 * d_model + 2 * num_kv_heads * head_dim) if bias else 0)
    parts = C.attention_params_by_matrix(d_model, num_heads, num_kv_heads, bias)
    assert parts["W_Q"] == module.q_proj.weight.numel() and parts["W_O"] == module.out_proj.weight.numel()
    assert parts["W_K"] == module.k_proj.weight.numel() and parts["W_V"] == module.v_proj.weight.numel()
    biases = sum(p.numel() for name, p in module.named_parameters() if name.endswith("bias"))
    assert parts["biases"] == biases and parts["total"] == count


def test_hand_worked_bert_base_numbers_and_the_737k_mistake():
    assert mha.attention_params(768, 12) == 2_362_368
    assert mha.attention_params(768, 12, bias=False) == 2_359_296
    torch_module = nn.MultiheadAttention(768, 12)
    assert torch_module.in_proj_weight.numel() == 1_769_472  # 12 heads x (W_Q, W_K, W_V) of 768 x 64
    assert torch_module.out_proj.weight.numel() == 589_824
    assert numel(torch_module) == 2_362_368
    assert numel(mha.SingleHeadAttention(768, bias=True)) == 2_362_368  # one full-width head: the same
    # the common "≈737K": one head's W_Q, W_K, W_V (3 x 49,152) plus the whole W_O.
    assert C.tutorial_single_head_count(768, 12) == 3 * 49_152 + 589_824 == 737_280
    one_head = mha.AttentionHead(768, 64, bias=False)
    assert numel(one_head) == 147_456
    assert 12 * numel(one_head) + 589_824 == 2_359_296


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("d_model,num_heads,head_dim", [(64, 1, 16), (64, 4, 16), (64, 8, 16), (48, 3, 64)])
def test_fixed_head_dim_count_matches_a_module_of_heads(d_model, num_heads, head_dim, bias):
    heads = nn.ModuleList(mha.AttentionHead(d_model, head_dim, bias) for _ in range(num_heads))
    out_proj = nn.Linear(num_heads * head_dim, d_model, bias=bias)
    assert C.params_fixed_head_dim(d_model, num_heads, head_dim, bias) == numel(heads) + numel(out_proj)


def test_fixed_head_dim_grows_linearly_and_agrees_with_split_heads():
    counts = [C.params_fixed_head_dim(768, h, 64, bias=False) for h in (1, 2, 3, 4)]
    assert [b - a for a, b in zip(counts, counts[1:])] == [4 * 64 * 768] * 3
    for h in (1, 2, 4, 8, 16):
        assert C.params_fixed_head_dim(512, h, 512 // h) == mha.attention_params(512, h)


def test_tutorial_gqa_formula_leaves_out_w_o():
    for d_model, h, g in [(768, 12, 1), (768, 12, 4), (8192, 64, 8)]:
        d_k = d_model // h
        missing = mha.attention_params(d_model, h, g, bias=False) - C.tutorial_kv_params(d_model, h, g)
        assert missing == h * d_k * d_model == d_model**2
    # Llama-2-70B's layer by hand: (2·64 + 2·8)·128·8192
    assert mha.attention_params(8192, 64, 8, bias=False) == 144 * 128 * 8192 == 150_994_944


# ---------------------------------------------------------------------------------------------
# Whole models
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cfg", ALL_CONFIGS, ids=lambda c: c.name)
def test_total_params_match_skeleton_and_released_checkpoint(cfg):
    assert C.total_params(cfg) == numel(C.build_skeleton(cfg)) == cfg.published_params


@pytest.mark.parametrize("cfg", C.CLASSIC_CONFIGS, ids=lambda c: c.name)
def test_head_dim_64_rule(cfg):
    assert cfg.head_dim == 64 and cfg.d_model == 64 * cfg.num_heads


def test_paper_figures_are_rounded_and_gpt2_undercounts():
    millions = {c.name: C.total_params(c) / 1e6 for c in C.CLASSIC_CONFIGS}
    assert round(millions["BERT-base"], -1) == 110 and abs(millions["BERT-large"] / 340 - 1) < 0.02
    for name, paper in [("GPT-2 small", 117), ("GPT-2 medium", 345), ("GPT-2 large", 762), ("GPT-2 XL", 1542)]:
        assert millions[name] > paper  # the GPT-2 paper's sizes are all below the released models'
    assert round(millions["GPT-2 small"]) == 124 and round(millions["GPT-2 XL"]) == 1558


def test_param_table_by_hand():
    rows = {r["model"]: r for r in C.param_table()}
    gpt2 = rows["GPT-2 small"]
    assert gpt2["attn_per_layer"] == 2_362_368 and gpt2["attn_stack"] == 12 * 2_362_368 == 28_348_416
    assert gpt2["total"] == 124_439_808 and gpt2["attn_share"] == pytest.approx(0.2278, abs=5e-5)
    assert rows["GPT-2 XL"]["attn_per_layer"] == 10_246_400 and rows["BERT-large"]["attn_per_layer"] == 4_198_400
    # GPT-2's block is 12·D² + 13·D: attention is a third of a block's weights
    for cfg in C.CLASSIC_CONFIGS:
        if cfg.family == "gpt2":
            assert C.layer_params(cfg) == 12 * cfg.d_model**2 + 13 * cfg.d_model
    shares = [r["attn_share"] for r in C.param_table() if r["model"].startswith("GPT-2")]
    assert shares == sorted(shares) and shares[-1] < 1 / 3


def test_llama_layer_params_match_modules():
    cfg = C.config("Llama-2-7B")
    assert C.layer_params(cfg) == 4 * 4096**2 + 3 * 4096 * 11008 + 2 * 4096 == 202_383_360
    assert C.cache_bytes_per_token(cfg) == 2 * 32 * 32 * 128 * 2 == 524_288
    assert C.cache_bytes_per_token(C.config("Llama-2-70B")) == 2 * 80 * 8 * 128 * 2 == 327_680


# ---------------------------------------------------------------------------------------------
# FLOPs
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "d_model,num_heads,num_kv_heads,seq_len",
    [(32, 1, 1, 5), (32, 4, 4, 7), (32, 4, 2, 7), (48, 6, 1, 9), (64, 8, 8, 16)],
)
def test_flops_match_flop_counter(d_model, num_heads, num_kv_heads, seq_len):
    x = randn(2, seq_len, d_model, seed=1)
    module = mha.GroupedQueryAttention(d_model, num_heads, num_kv_heads).eval()
    counted = C.count_forward_flops(module, x, need_weights=True)
    assert counted == 2 * mha.attention_flops(seq_len, d_model, num_heads, num_kv_heads)  # batch of 2


@pytest.mark.parametrize("d_model,seq_len", [(32, 5)])
def test_splitting_into_heads_does_not_change_flops(d_model, seq_len):
    x = randn(1, seq_len, d_model, seed=2)
    formula = mha.attention_flops(seq_len, d_model, 1)
    assert C.count_forward_flops(mha.SingleHeadAttention(d_model), x) == formula
    for h in (1, 2, 4, 8):
        assert mha.attention_flops(seq_len, d_model, h) == formula
        assert C.count_forward_flops(mha.MultiHeadAttention(d_model, h).eval(), x) == formula
        assert C.count_forward_flops(mha.LoopedMultiHeadAttention(d_model, h), x) == formula
        torch_module = nn.MultiheadAttention(d_model, h, batch_first=True).eval()
        assert C.count_forward_flops(torch_module, x, x, x, need_weights=True) == formula


@pytest.mark.parametrize("seq_len", [5, 24, 32])
@pytest.mark.parametrize("batch_size", [1, 2])
def test_scaling_and_softmax_run_over_h_score_matrices(seq_len, batch_size):
    """The element-wise work FlopCounterMode leaves out grows with h: 6·h·n² per sequence."""
    x = randn(batch_size, seq_len, 64, seed=4)
    one_head = C.count_score_elementwise(mha.SingleHeadAttention(64), x)
    assert one_head == C.score_elementwise_flops(seq_len, 1, batch_size) == 6 * batch_size * seq_len**2
    for h in (1, 2, 4, 8):
        expected = C.score_elementwise_flops(seq_len, h, batch_size)
        assert expected == h * one_head
        assert C.count_score_elementwise(mha.MultiHeadAttention(64, h).eval(), x) == expected
        assert C.count_score_elementwise(mha.MultiHeadAttention(64, h).eval(), x, is_causal=True) == expected
        assert C.count_score_elementwise(mha.LoopedMultiHeadAttention(64, h), x) == expected
        # ...while the matrix products do not change with h
        assert C.count_forward_flops(mha.MultiHeadAttention(64, h).eval(), x) == C.count_forward_flops(
            mha.SingleHeadAttention(64), x
        )


def test_scaling_and_softmax_for_gpt2_small():
    """The numbers the parameter-analysis chapter quotes: GPT-2 small at 1,024 tokens, 12 heads against one."""
    twelve, one = C.score_elementwise_flops(1024, 12), C.score_elementwise_flops(1024, 1)
    assert twelve == 6 * 12 * 1024**2 == 75_497_472 and one == 6_291_456
    matrix_products = mha.attention_flops(1024, 768, 12)
    assert matrix_products == 8_053_063_680
    assert 0.0085 < (twelve - one) / matrix_products < 0.0087


def test_flops_split_and_crossover():
    for d_model, h in [(768, 12), (1024, 16), (1600, 25)]:
        assert C.crossover_seq_len(d_model, h) == 2 * d_model
        at = C.flops_split(2 * d_model, d_model, h)
        assert at["projections"] == at["attention"] == 8 * (2 * d_model) * d_model**2
        below, above = C.flops_split(2 * d_model - 1, d_model, h), C.flops_split(2 * d_model + 1, d_model, h)
        assert below["attention"] < below["projections"] and above["attention"] > above["projections"]
    assert C.crossover_seq_len(8192, 64, 8) == 8192 + 8 * 128 == 9216
    split = C.flops_split(100, 64, 4)
    assert split["projections"] == 8 * 100 * 64**2 and split["attention"] == 4 * 100**2 * 64
    assert split["total"] == mha.attention_flops(100, 64, 4)


# ---------------------------------------------------------------------------------------------
# KV cache
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("d_model,num_heads,d_ff,seq_len", [(64, 4, 256, 32), (48, 3, 192, 17), (32, 8, 100, 9)])
@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_block_flops_match_flop_counter_on_torch_layer(d_model, num_heads, d_ff, seq_len, dropout):
    """A whole block: nn.TransformerEncoderLayer (training mode, whatever attention kernel it picks)."""
    cfg = C.ModelConfig("tiny", "gpt2", d_model, num_heads, 1, d_ff, 1)
    layer = nn.TransformerEncoderLayer(d_model, num_heads, d_ff, dropout=dropout, batch_first=True)
    counted = C.count_forward_flops(layer, randn(1, seq_len, d_model, seed=1))
    parts = C.block_flops_split(seq_len, cfg)
    assert counted == parts["total"] == parts["linear"] + parts["attention"]
    assert parts["mlp"] == 2 * 2 * seq_len * d_model * d_ff
    # the course's own encoder layer computes (and is counted as) the same
    assert C.count_forward_flops(mha.EncoderLayer(d_model, num_heads, d_ff), randn(1, seq_len, d_model)) == counted


def test_block_crossover():
    for cfg in C.CLASSIC_CONFIGS:  # 4·d MLP: the block's linear layers cost 24·n·d², attention 4·n²·d
        assert C.block_crossover_seq_len(cfg) == 6 * cfg.d_model
        at = C.block_flops_split(6 * cfg.d_model, cfg)
        assert at["linear"] == at["attention"]
    assert C.block_crossover_seq_len(C.config("GPT-2 small")) == 4608
    llama = C.config("Llama-2-7B")  # SwiGLU: three D x F matrices
    assert C.block_flops_split(1, llama)["mlp"] == 3 * 2 * 4096 * 11008
    assert C.block_crossover_seq_len(llama) == 2 * 4096 + 1.5 * 11008
    assert all(cfg.train_context == cfg.max_positions for cfg in C.CLASSIC_CONFIGS)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("num_heads,num_kv_heads", [(4, 4), (4, 2), (4, 1)])
def test_kv_cache_bytes_during_decoding(dtype, num_heads, num_kv_heads):
    batch_size, d_model, num_layers, steps = 2, 32, 3, 6
    layers = [mha.GroupedQueryAttention(d_model, num_heads, num_kv_heads).to(dtype).eval() for _ in range(num_layers)]
    caches = [layer.new_cache(batch_size, steps) for layer in layers]
    head_dim, size = d_model // num_heads, torch.empty((), dtype=dtype).element_size()
    allocated = sum(c.nbytes for c in caches)
    assert allocated == mha.kv_cache_bytes(batch_size, steps, num_layers, num_kv_heads, head_dim, size)
    x = randn(batch_size, steps, d_model, seed=3).to(dtype)
    with torch.no_grad():
        for t in range(steps):
            h = x[:, t : t + 1]
            for layer, cache in zip(layers, caches):
                h, _ = layer.decode_step(h, cache)
            used = sum(c.keys[:, :, : c.length].nbytes + c.values[:, :, : c.length].nbytes for c in caches)
            assert used == mha.kv_cache_bytes(batch_size, t + 1, num_layers, num_kv_heads, head_dim, size)
    if num_kv_heads == num_heads:  # the common 2·b·d_model·L: elements of one layer
        elements = C.tutorial_cache_elements(batch_size, steps, d_model)
        assert elements == caches[0].keys.numel() + caches[0].values.numel()
        assert elements * num_layers * size == allocated


def test_eight_bit_cache_bytes():
    cache = mha.KVCache(2, 16, 2, 8, dtype=torch.float8_e4m3fn)
    assert cache.nbytes == mha.kv_cache_bytes(2, 16, 1, 2, 8, C.BYTES_PER_ELEMENT["8-bit"]) == 1024


def test_kv_cache_table_by_hand():
    rows = {(r["model"], r["seq_len"], r["precision"]): r["bytes"] for r in C.kv_cache_table()}
    assert rows[("Llama-2-7B", 4096, "fp16")] == 2 * C.GIB
    assert rows[("Llama-2-7B", 32768, "fp16")] == 16 * C.GIB
    assert rows[("Llama-2-7B", 32768, "8-bit")] == 8 * C.GIB
    assert rows[("Llama-2-70B", 4096, "fp16")] == 5 * C.GIB // 4
    assert rows[("Llama-2-70B", 32768, "fp16")] == 10 * C.GIB
    assert rows[("Llama-2-70B", 4096, "8-bit")] == 640 * 2**20
    # the common per-layer elements x layers x bytes for the 7B model at 4k context
    assert C.tutorial_cache_elements(1, 4096, 4096) * 32 * 2 == rows[("Llama-2-7B", 4096, "fp16")]


def test_cache_matches_weights_tokens():
    """Where the KV cache of a published model takes as many bytes as its weights (any precision)."""
    for cfg in C.LLAMA2_CONFIGS:
        tokens = C.cache_matches_weights_tokens(cfg)
        for size in (1, 2, 4):
            weights = C.total_params(cfg) * size
            below, above = int(tokens), int(tokens) + 1
            assert mha.kv_cache_bytes(1, below, cfg.num_layers, cfg.kv_heads, cfg.head_dim, size) <= weights
            assert mha.kv_cache_bytes(1, above, cfg.num_layers, cfg.kv_heads, cfg.head_dim, size) > weights
    assert int(C.cache_matches_weights_tokens(C.config("Llama-2-7B"))) == 25_705
    assert int(C.cache_matches_weights_tokens(C.config("Llama-2-70B"))) == 421_000


def test_max_context_is_the_largest_that_fits():
    budget = 24 * C.GIB
    for layers, g, dh, size, batch in [
        (32, 32, 128, 2, 1),
        (80, 8, 128, 2, 1),
        (32, 32, 128, 1, 1),
        (32, 8, 128, 2, 8),
        (12, 12, 64, 4, 3),
    ]:
        n = C.max_context(budget, layers, g, dh, size, batch_size=batch)
        assert mha.kv_cache_bytes(batch, n, layers, g, dh, size) <= budget
        assert mha.kv_cache_bytes(batch, n + 1, layers, g, dh, size) > budget
    assert C.max_context(budget, 32, 32, 128, 2) == 49_152
    assert C.max_context(budget, 32, 32, 128, 1) == 98_304
    assert C.max_context(budget, 80, 8, 128, 2) == 78_643
    assert C.max_context(100, 32, 32, 128, 2) == 0


def test_gqa_sweep_matches_modules():
    rows = C.gqa_sweep(64, 8, num_layers=2, seq_len=10, bytes_per_element=4)
    assert [r["kv_heads"] for r in rows] == [1, 2, 4, 8]
    for r in rows:
        module = mha.GroupedQueryAttention(64, 8, r["kv_heads"], bias=False)
        assert r["params_per_layer"] == numel(module)
        assert r["cache_bytes"] == 2 * module.new_cache(1, 10).nbytes
    ratios = [r["cache_bytes"] / rows[-1]["cache_bytes"] for r in rows]
    assert ratios == [1 / 8, 2 / 8, 4 / 8, 1.0]  # MQA and GQA divide the MHA cache by h and h/g
    assert C.divisors(64) == [1, 2, 4, 8, 16, 32, 64] and C.divisors(1) == [1]


def test_calculator():
    c = C.calculator(4096, 32, 8, 32, 4096, batch_size=2, bytes_per_element=2)
    assert c["head_dim"] == 128 and c["params_per_layer"] == mha.attention_params(4096, 32, 8, bias=False)
    assert c["params_stack"] == 32 * c["params_per_layer"]
    assert c["cache_bytes"] * 4 == c["cache_bytes_mha"] == 4 * C.GIB
    assert (  # FLOPs for the whole batch, like the cache
        c["projection_flops"] + c["attention_flops"]
        == c["flops_per_layer"]
        == 2 * mha.attention_flops(4096, 4096, 32, 8)
    )
    one = C.calculator(4096, 32, 8, 32, 4096, batch_size=1, bytes_per_element=2)
    assert 2 * one["cache_bytes"] == c["cache_bytes"] and 2 * one["flops_per_layer"] == c["flops_per_layer"]
    assert c["crossover_seq_len"] == 4096 + 8 * 128


# ---------------------------------------------------------------------------------------------
# Explorers, plots, formatting, errors
# ---------------------------------------------------------------------------------------------


def test_explorer_grids_are_small_and_valid():
    from mha.viz.widgets import frame_count, grid

    for controls in (costs_figures.COST_CONTROLS, costs_figures.KV_CONTROLS):
        assert frame_count(controls) <= 30
    for values in grid(costs_figures.COST_CONTROLS):
        assert values["d_model"] % values["num_heads"] == 0
        assert "parameters" in costs_figures.cost_alt(**values)
    for values in grid(costs_figures.KV_CONTROLS):
        assert C.KV_EXPLORER_MODEL["num_heads"] % values["num_kv_heads"] == 0
        v = C.kv_explorer_values(**values)
        assert v["at_32k"] == 32768 * v["per_token"] and v["at_4k"] == 4096 * v["per_token"]
        assert v["max_context"] == C.max_context(
            24 * C.GIB,
            values["num_layers"],
            values["num_kv_heads"],
            128,
            C.BYTES_PER_ELEMENT[values["precision"]],
            values["batch_size"],
        )
        assert f"{v['max_context']} tokens" in costs_figures.kv_alt(**values)


def test_render_functions_return_figures():
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    figs = [
        costs_figures.render_cost(768, 4, 2048),
        costs_figures.render_kv(8, 32, 1, "fp16"),
        costs_figures.plot_flops_vs_seq_len(768, 12, [64, 1024, 8192], mark=1024),
        costs_figures.plot_gqa_sweep(C.gqa_sweep(64, 8, 2, 10), title="sweep"),
    ]
    try:
        for fig in figs:
            assert isinstance(fig, Figure) and all(ax.get_title() for ax in fig.axes)
        assert "g = 8 of h = 32" in figs[1].axes[0].get_title()
    finally:
        for fig in figs:
            plt.close(fig)


def test_format_helpers():
    assert C.format_bytes(2 * C.GIB) == "2.00 GiB" and C.format_bytes(327_680) == "320.00 KiB"
    assert C.format_bytes(640 * 2**20) == "640.00 MiB" and C.format_bytes(12) == "12 B"
    table = C.format_table([{"a": 1, "b": 0.5}], {"a": ("A", ","), "b": ("bee", ".1%")})
    assert table.splitlines() == ["A    bee", "-  -----", "1  50.0%"]


def test_chapter_tables():
    params = tables.param_table_text(C.param_table(C.CLASSIC_CONFIGS)).splitlines()
    assert params[0].split()[:4] == ["model", "d_model", "h", "d_k"] and len(params) == 2 + len(C.CLASSIC_CONFIGS)
    assert "124,439,808" in next(line for line in params if "GPT-2 small" in line)
    assert params[-1].endswith("31.6%")  # GPT-2 XL's attention share
    kv = tables.kv_table_text(C.kv_cache_table(C.LLAMA2_CONFIGS, seq_lens=(4096,), precisions=("fp16",)))
    assert [line.split()[-2:] for line in kv.splitlines()[2:]] == [["2.00", "GiB"], ["1.25", "GiB"]]
    values = C.calculator(8192, 64, 8, 80, 4096, batch_size=4, bytes_per_element=2)
    lines = tables.calculator_text(values).splitlines()
    assert len(lines) == len(values) == len(tables.CALCULATOR_LABELS)
    assert lines[-2].endswith("5.00 GiB") and lines[-1].endswith("40.00 GiB") and lines[1].endswith("150,994,944")
    # the page's code column shows 74 characters: no printed table scrolls sideways
    assert params[0].split()[5:] == ["attn/layer", "all", "params", "attn", "%"]
    for text in (params, kv.splitlines(), lines):
        assert max(len(line) for line in text) <= 74, max(text, key=len)


@pytest.mark.slow  # precomputes every frame of both explorers: about 8 s on 2 cores
def test_chapter_explorers_open_on_the_chapters_cases():
    cost, kv = costs_figures.cost_explorer(), costs_figures.kv_explorer()
    assert costs_figures.COST_EXPLORER_TEXT["title"] in cost.html
    assert costs_figures.KV_EXPLORER_TEXT["title"] in kv.html


@pytest.mark.parametrize(
    "call,exc,msg",
    [
        (lambda: C.config("GPT-5"), ValueError, r"name must be one of .* found 'GPT-5'"),
        (lambda: C.ModelConfig("x", "t5", 64, 4, 1, 256, 100), ValueError, r"family must be 'bert', 'gpt2' or 'llama'"),
        (
            lambda: C.ModelConfig("x", "gpt2", 64, 5, 1, 256, 100),
            ValueError,
            r"d_model \(64\) must be divisible by num_heads \(5\)",
        ),
        (lambda: C.params_fixed_head_dim(64, 4, 0), ValueError, r"head_dim must be a positive int, found 0"),
        (lambda: C.max_context(0, 32, 32, 128), ValueError, r"budget_bytes must be a positive int, found 0"),
        (lambda: C.divisors(2.5), TypeError, r"n must be a positive int, found float"),
    ],
)
def test_errors(call, exc, msg):
    with pytest.raises(exc, match=msg):
        call()


# ---------------------------------------------------------------------------------------------
# Exercise checkers: right answers, each typical slip, malformed input
# ---------------------------------------------------------------------------------------------

MALFORMED = [
    ("49152", "found the string '49152'"),
    (float("nan"), "finite number, found nan"),
    (float("inf"), "finite number, found inf"),
    (None, "found NoneType"),
    ([49152], "found list"),
    (torch.ones(2), "found a tensor of shape (2,)"),
    (True, "found bool"),
]


@pytest.mark.parametrize("bad,message", MALFORMED)
def test_checkers_answer_malformed_input_with_a_message(bad, message):
    for verdict in (
        X.check_max_context(bad, "Llama-2-7B"),
        X.check_attention_params(bad, 8192, 64, 8, bias=False),
        X.check_max_kv_heads(bad),
    ):
        assert not verdict.ok and verdict.first_error == "input"
        assert message in repr(verdict) and "cannot check this answer" in repr(verdict)


def test_check_max_context():
    budget = 24 * C.GIB
    for model, precision, expected in [
        ("Llama-2-7B", "fp16", 49_152),
        ("Llama-2-7B", "8-bit", 98_304),
        ("Llama-2-70B", "fp16", 78_643),
    ]:
        cfg = C.config(model)
        assert (
            C.max_context(budget, cfg.num_layers, cfg.kv_heads, cfg.head_dim, C.BYTES_PER_ELEMENT[precision])
            == expected
        )
        assert X.check_max_context(expected, model, precision).ok
        assert X.check_max_context(torch.tensor(expected), model, precision).ok
    slips = {
        49_153: "round down",
        98_304: "keys AND values",
        32 * 49_152: "32 layers",
        24 * 10**9 // (512 * 2**10): "binary units",
        24_576: "takes 2 bytes, not 4",
        49_152.5: "whole number of tokens",
        1000: "divide the budget",
    }
    for answer, hint in slips.items():
        verdict = X.check_max_context(answer, "Llama-2-7B", "fp16")
        flat = " ".join(repr(verdict).split())  # wrapped to the page's width
        assert not verdict.ok and verdict.first_error == "tokens" and hint in flat, (answer, repr(verdict))
    assert "only the g = 8 key/value heads" in repr(X.check_max_context(78_643 // 8, "Llama-2-70B"))
    assert "not 2" in repr(X.check_max_context(98_304 // 2, "Llama-2-7B", "8-bit"))
    assert "own cache" in repr(X.check_max_context(49_152, "Llama-2-7B", batch_size=8))
    assert X.check_max_context(49_152 // 8, "Llama-2-7B", batch_size=8).ok


def test_check_max_context_blames_no_slip_that_another_answer_of_the_exercise_equals():
    """98,304 forgets K or V in fp16 and is the 8-bit answer; 157,286 likewise for the 70B model."""
    for answer, model in ((98_304, "Llama-2-7B"), (157_286, "Llama-2-70B")):
        assert X.check_max_context(answer, model, "8-bit").ok
        flat = " ".join(repr(X.check_max_context(answer, model, "fp16")).split())
        assert flat.index('that is the answer in 8-bit (1 byte(s) per element): pass "8-bit"') < flat.index(
            "keys AND values"
        ), flat
    flat = " ".join(repr(X.check_max_context(24_576, "Llama-2-7B", "fp16")).split())
    assert 'the answer in fp32 (4 byte(s) per element): pass "fp32"' in flat
    # a slip no other answer equals is named alone
    assert "answer in" not in repr(X.check_max_context(32 * 49_152, "Llama-2-7B", "fp16"))


def test_check_attention_params():
    right = mha.attention_params(8192, 64, 8, bias=False)
    assert right == 150_994_944 and X.check_attention_params(right, 8192, 64, 8, bias=False).ok
    assert X.check_attention_params(mha.attention_params(768, 12), 768, 12).ok
    assert X.check_attention_params(float(right), 8192, 64, 8, bias=False).ok
    slips = {
        C.tutorial_kv_params(8192, 64, 8): "W_O is missing",
        4 * 8192**2: "that is multi-head attention",
        (3 * 64 + 8) * 128 * 8192: "both W_K and W_V shrink",
        C.tutorial_single_head_count(8192, 64): "one head's W_Q, W_K, W_V",
        mha.attention_params(8192, 64, 8, bias=True): "no biases to add",
        12345: "add W_Q",
    }
    for answer, hint in slips.items():
        verdict = X.check_attention_params(answer, 8192, 64, 8, bias=False)
        assert not verdict.ok and verdict.first_error == "count" and hint in repr(verdict), (answer, repr(verdict))
    verdict = X.check_attention_params(mha.attention_params(768, 12, bias=False), 768, 12, bias=True)
    assert "biases are missing: 3,072" in repr(verdict)


def test_check_max_kv_heads():
    assert X.check_max_kv_heads(4).ok
    for answer, hint in {
        6: "must divide h = 32",
        8: "needs 32.00 GiB",
        2: "a larger divisor of 32 fits too",
        0: "whole number from 1 to h",
        2.5: "whole number from 1 to h",
    }.items():
        verdict = X.check_max_kv_heads(answer)
        assert not verdict.ok and hint in repr(verdict), (answer, repr(verdict))
    assert X.check_max_kv_heads(1, batch_size=32).ok  # only MQA fits: 32 sequences need 16 GiB with g = 1


def test_explorers_open_on_the_case_the_text_discusses():
    """An explorer opens on the case the text discusses, and its sliders grow to the right."""
    for controls in (costs_figures.COST_CONTROLS, costs_figures.KV_CONTROLS):
        for values in controls.values():
            assert isinstance(values[0], str) or values == sorted(values), values
    opening_cost = dict(costs_figures.COST_INITIAL)
    gpt2 = C.config("GPT-2 small")
    assert opening_cost == {"d_model": gpt2.d_model, "num_heads": gpt2.num_heads, "seq_len": gpt2.train_context}
    opening_kv = dict(costs_figures.KV_INITIAL)
    llama = C.config("Llama-2-7B")
    assert opening_kv == {
        "num_kv_heads": llama.kv_heads,
        "num_layers": llama.num_layers,
        "batch_size": 8,  # not batch 1, whose 49,152 tokens are exercise 1's answer
        "precision": "fp16",
    }
    values = C.kv_explorer_values(**opening_kv)
    assert values["max_context"] == 6_144 <= costs_figures.KV_EXPLORER_MAX_LEN  # the crossing is on the axis
    assert values["max_context"] != C.kv_explorer_values(**{**opening_kv, "batch_size": 1})["max_context"]
    # not a flat line: the opening cache reaches the budget within the plotted range
    assert costs_figures.KV_EXPLORER_MAX_LEN * values["per_token"] > C.KV_EXPLORER_MODEL["budget_bytes"]
