"""mha.chapters.fast.perf and perf_results: byte counts against hand counts, the references, the roofline,
the exercise checkers, stored-report readers and plots (no timings)."""

import json
import math
import statistics

import matplotlib
import pytest
import torch
from conftest import skip_or_fail
from torch import nn

import mha
from mha.chapters.fast import figures as fast_figures
from mha.chapters.fast import perf, perf_exercises
from mha.chapters.fast import perf_results as pr

matplotlib.use("Agg")


def test_saved_tensors_counts_what_backward_reads():
    x = torch.randn(3, 5, requires_grad=True)
    # exp saves its output (15 floats); multiplying by a Python number saves nothing
    tensors = perf.saved_tensors(lambda x: (x * 2).exp(), x)
    assert [t["shape"] for t in tensors] == [(3, 5)]
    assert perf.saved_activation_bytes(lambda x: (x * 2).exp(), x) == 15 * 4


def test_saved_tensors_skip_nodes_freed_in_forward():
    x = torch.randn(4, 6, requires_grad=True)
    # amax saves its input, but its node dies with the detached result: nothing is kept
    assert perf.saved_activation_bytes(lambda x: x - x.amax(-1, keepdim=True).detach(), x) == 0


def test_exclude_leaves_out_parameters_and_shared_storage_counts_once():
    torch.manual_seed(0)
    linear = nn.Linear(6, 6, bias=False)
    x = torch.randn(2, 6, requires_grad=True)
    assert perf.saved_activation_bytes(linear, x, linear.parameters()) == 2 * 6 * 4
    both = perf.saved_activation_bytes(lambda x: linear(x) + linear(x).exp(), x, list(linear.parameters()))
    assert both == 2 * 6 * 4 + 2 * 6 * 4  # x once (shared by both matmuls), exp's output once


@pytest.mark.parametrize("cls", [mha.MultiHeadAttention, mha.FusedMultiHeadAttention])
@pytest.mark.parametrize("batch_size, seq_len", [(1, 12), (2, 16)])  # != head_dim 8
def test_attention_matrices_kept_per_path(batch_size, seq_len, cls):
    torch.manual_seed(0)
    d_model, num_heads = 32, 4
    ref = nn.MultiheadAttention(d_model, num_heads, batch_first=True)
    ours = cls.from_torch(ref)
    params = list(ref.parameters()) + list(ours.parameters())
    x = torch.randn(batch_size, seq_len, d_model)
    count = {}
    for name, forward in {
        "weights": lambda x: ours(x)[0],
        "sdpa": lambda x: ours(x, need_weights=False)[0],
        "torch": lambda x: ref(x, x, x)[0],
    }.items():
        tensors = perf.saved_tensors(forward, x.clone().requires_grad_(), params)
        count[name] = perf.count_attention_matrices(tensors, batch_size, num_heads, seq_len)
    assert count == {"weights": 2, "sdpa": 0, "torch": 1}


@pytest.mark.parametrize("cls", [mha.FusedMultiHeadAttention, mha.MultiHeadAttention])
def test_fused_projection_keeps_no_concatenated_weight(cls):
    """The fast layer projects Q, K, V in one matmul yet keeps exactly the bytes nn.MultiheadAttention
    keeps (and so does the readable layer, with its three separate projections)."""
    torch.manual_seed(0)
    d_model, num_heads = 32, 4
    ref = nn.MultiheadAttention(d_model, num_heads, batch_first=True)
    ours = cls.from_torch(ref)
    params = list(ref.parameters()) + list(ours.parameters())
    x = torch.randn(2, 8, d_model)
    mine = perf.saved_activation_bytes(lambda x: ours(x, need_weights=False)[0], x.clone().requires_grad_(), params)
    theirs = perf.saved_activation_bytes(
        lambda x: ref(x, x, x, need_weights=False)[0], x.clone().requires_grad_(), params
    )
    assert mine == theirs


def test_attention_matrix_bytes():
    assert perf.attention_matrix_bytes(8, 12, 1024) == 8 * 12 * 1024 * 1024 * 4
    assert perf.attention_matrix_bytes(2, 3, 5, 7, bytes_per_element=2) == 2 * 3 * 5 * 7 * 2
    with pytest.raises(ValueError, match="seq_len"):
        perf.attention_matrix_bytes(1, 1, 0)


# --- peak working set: the online softmax never holds a (T, S) matrix ---


def test_peak_live_bytes_counts_what_python_holds():
    x = torch.zeros(100, dtype=torch.float64)
    assert perf.peak_live_bytes(lambda x: x + 1, x) == 800  # one new tensor
    assert perf.peak_live_bytes(lambda x: x[10:].transpose(0, 0), x) == 0  # views of the input are free
    # (x + 1) and (x + 1) * 2 are alive together only while the expression runs
    assert perf.peak_live_bytes(lambda x: (x + 1) * 2, x) == 1600
    assert perf.peak_live_bytes(lambda x: [x + i for i in range(3)], x) == 2400  # three kept at once


def test_blockwise_attention_holds_blocks_not_the_score_matrix():
    q = torch.randn(64, 8, dtype=torch.float64)
    peaks = {}
    for key_len in (256, 1024):
        k, v = torch.randn(key_len, 8, dtype=torch.float64), torch.randn(key_len, 8, dtype=torch.float64)
        full = perf.peak_live_bytes(lambda q, k, v: mha.scaled_dot_product_attention(q, k, v)[0], q, k, v)
        blocks = perf.peak_live_bytes(lambda q, k, v: mha.attention.blockwise_attention(q, k, v, 32), q, k, v)
        assert full >= 2 * 64 * key_len * 8  # scores and weights, (T, S) each, alive together
        assert blocks >= 64 * 32 * 8  # at least one block of scores
        peaks[key_len] = blocks
    assert peaks[256] == peaks[1024]  # the blockwise working set does not grow with S
    assert peaks[1024] < 64 * 1024 * 8  # less than one (T, S) matrix


# --- the references the benchmark times mha against ---


@pytest.mark.parametrize("is_causal", [False, True])
def test_bare_layer_is_nn_multihead_attention(is_causal):
    torch.manual_seed(0)
    ref = nn.MultiheadAttention(16, 4, batch_first=True).double()
    x = torch.randn(2, 6, 16, dtype=torch.float64)
    blocked = ~mha.causal_mask(6) if is_causal else None
    expected, _ = ref(x, x, x, attn_mask=blocked, need_weights=False)
    assert torch.allclose(perf.bare_attention_layer(ref, x, is_causal=is_causal), expected, atol=1e-12)


@pytest.mark.parametrize("num_kv_heads", [1, 2])
def test_repeat_kv_variant_computes_the_same_and_keeps_the_copies(num_kv_heads):
    torch.manual_seed(1)
    batch, seq_len, d_model, heads = 2, 6, 16, 4
    gqa = mha.GroupedQueryAttention(d_model, heads, num_kv_heads).double()
    x = torch.randn(batch, seq_len, d_model, dtype=torch.float64)
    for is_causal in (False, True):
        expected = gqa(x, need_weights=False, is_causal=is_causal)[0]
        assert torch.allclose(perf.gqa_repeat_kv_forward(gqa, x, is_causal=is_causal), expected, atol=1e-12)
    params = list(gqa.parameters())
    mine = perf.saved_activation_bytes(lambda x: gqa(x, need_weights=False)[0], x.clone().requires_grad_(), params)
    copies = perf.saved_activation_bytes(
        lambda x: perf.gqa_repeat_kv_forward(gqa, x), x.clone().requires_grad_(), params
    )
    head_dim = d_model // heads
    # the copies, K and V with H heads, are kept on top of the projection's output (which holds the
    # G-head originals either way): 2 * B * H * T * Dh more elements
    assert copies - mine == 2 * batch * heads * seq_len * head_dim * 8
    with pytest.raises(TypeError, match="module must be an mha.GroupedQueryAttention, found Linear"):
        perf.gqa_repeat_kv_forward(nn.Linear(2, 2), x)


# --- decoding: bytes per step, the roofline ---


def test_decode_step_bytes_of_llama_at_4k_tokens():
    mha_bytes = perf.model_decode_step_bytes(1, 4096, 32)
    gqa_bytes = perf.model_decode_step_bytes(1, 4096, 8)
    # Llama-2-7B's published parameter count, fp16, less the 32,000 x 4096 input embedding table
    # but the one row the step gathers
    weights = (6_738_415_616 - 32_000 * 4096 + 4096) * 2
    assert mha_bytes - weights == 2 * 2**30  # 2 (K, V) x 4096 tokens x 32 layers x 4096 features x 2 bytes
    assert mha_bytes - gqa_bytes == 2 * 2**30 * 3 // 4  # GQA-8 stores a quarter of the cache
    assert 0.10 < 1 - gqa_bytes / mha_bytes < 0.11  # about 10 % fewer bytes per step, not h/g = 4x


def test_a_step_gathers_embedding_rows_and_reads_every_other_weight():
    """The input embedding is indexed, one row per new token; every other weight is read once for
    the whole batch. Counted on the skeleton's own modules: the output layer is a separate weight."""
    from mha.chapters.costs.configs import build_skeleton
    from mha.chapters.costs.models import config

    cfg = config(perf.DECODE_MODEL)
    skeleton = build_skeleton(cfg)
    table = skeleton["embed"].weight.numel()
    assert table == cfg.vocab_size * cfg.d_model == 131_072_000
    everything = sum(p.numel() for p in skeleton.parameters())
    for batch in (1, 16, 64):
        assert perf.model_step_weight_bytes(batch) == (everything - table + batch * cfg.d_model) * 2
    assert perf.model_weight_bytes() - perf.model_step_weight_bytes(1) == (table - cfg.d_model) * 2
    assert 0.019 < table / everything < 0.02  # what counting the whole table added: about 2 %
    assert perf.model_step_weight_bytes(1, num_kv_heads=8) == perf.model_step_weight_bytes(1) - 805_306_368 * 2
    with pytest.raises(ValueError, match="counts Llama-family models"):
        perf.model_step_weight_bytes(1, "GPT-2 small")
    assert perf.decode_step_bytes(0, 2, 3, 4, 5, 6, 2) == mha.kv_cache_bytes(2, 3, 4, 5, 6, 2)
    with pytest.raises(ValueError, match="weight_bytes must be an int >= 0"):
        perf.decode_step_bytes(-1, 1, 1, 1, 1, 1)


def test_speedup_bound_approaches_h_over_g_only_when_the_cache_dominates():
    weights, per_token = 1000, 10
    assert perf.decode_speedup_bound(weights, 1, per_token, 8, 2) == pytest.approx((1000 + 80) / (1000 + 20))
    assert perf.decode_speedup_bound(weights, 10**9, per_token, 8, 2) == pytest.approx(4, rel=1e-6)
    tokens = perf.tokens_for_speedup(weights, per_token, 8, 2, 0.9)
    assert perf.decode_speedup_bound(weights, round(tokens), per_token, 8, 2) == pytest.approx(0.9 * 4, rel=1e-3)
    with pytest.raises(ValueError, match="fraction must be in"):
        perf.tokens_for_speedup(weights, per_token, 8, 8, 0.5)
    with pytest.raises(ValueError, match=r"num_heads \(8\) must be divisible by g \(3\)"):
        perf.decode_speedup_bound(weights, 1, per_token, 8, 3)


# --- the exercise checkers ---

RIGHT_MATRIX = 8 * 12 * 4096 * 4096 * 4


@pytest.mark.parametrize(
    "answer,hint",
    [
        (RIGHT_MATRIX // 4, "number of elements"),
        (RIGHT_MATRIX // 2, "bf16"),
        (2 * RIGHT_MATRIX, "two matrices"),
        (8 * 12 * 4096 * 4, "squared"),
        (8 * 4096 * 4096 * 4, "multiply by H"),
        (12 * 4096 * 4096 * 4, "multiply by B"),
        (6, "GiB"),
        (6.0, "GiB"),
        (6144, "MiB"),
        (6.44, "GB"),
        (8 * RIGHT_MATRIX, "bits"),
        (12345, "recount"),
    ],
)
def test_check_matrix_bytes_names_the_slip(answer, hint):
    check = perf_exercises.check_matrix_bytes(answer)
    assert not check.ok and hint in repr(check)


def test_check_matrix_bytes_accepts_the_answer_in_any_number_type():
    import numpy as np

    for answer in (RIGHT_MATRIX, float(RIGHT_MATRIX), np.int64(RIGHT_MATRIX), torch.tensor(RIGHT_MATRIX)):
        check = perf_exercises.check_matrix_bytes(answer)
        assert check.ok and repr(check).endswith("correct"), answer


def test_exercise_checkers_honour_their_stated_precision():
    """Bytes exactly, m exactly, l to 3 decimals; a rounded answer is "close", never a method slip."""
    rounded = perf_exercises.check_matrix_bytes(6.4425e9)
    assert not rounded.ok and "close: that is rounded; give it to 0 decimals" in repr(rounded)
    off_by_one = perf_exercises.check_matrix_bytes(RIGHT_MATRIX + 1)
    assert not off_by_one.ok and "close" in repr(off_by_one) and "recount" not in repr(off_by_one)
    assert not perf_exercises.check_matrix_bytes(RIGHT_MATRIX + 5_000).ok  # no longer within 1e-4
    exact_l = (1 + math.exp(-1)) * math.exp(-2) + 1 + math.exp(-1)
    for l_value in (1.553, 1.5530, round(exact_l, 6), 1.5534):
        assert perf_exercises.check_online_softmax(4, l_value).ok, l_value
    for l_value, words in ((1.55, "close"), (1.552, "close"), (1.56, "within 5 %"), (2.0, "1.29 times")):
        check = perf_exercises.check_online_softmax(4, l_value)
        assert not check.ok and words in repr(check) and "exp(m_old" not in repr(check), (l_value, check)
    assert "a later block" in repr(perf_exercises.check_online_softmax(2, exact_l))


@pytest.mark.parametrize(
    "answer,message",
    [
        ("6 GiB", "must be a number, found the string '6 GiB'"),
        (None, "must be a number, found NoneType"),
        (True, "must be a number, found bool"),
        (float("nan"), "finite"),
        (float("inf"), "finite"),
        (-5, "must be >= 0"),
        ([1, 2], "must be a number, found list"),
        (torch.ones(2, 3), r"one number, found a tensor of shape \(2, 3\)"),
    ],
)
def test_checkers_answer_malformed_input_with_a_message(answer, message):
    import re

    for check in (
        perf_exercises.check_matrix_bytes(answer),
        perf_exercises.check_decode_bytes(answer, 8),
        perf_exercises.check_online_softmax(4.0, answer),
    ):
        assert not check.ok and check.first_error == "input"
        assert "cannot check this answer" in check.lines[1] and re.search(message, repr(check)), repr(check)


def test_check_decode_bytes_accepts_both_accountings_and_names_them():
    right = perf.model_decode_step_bytes(1, 4096, 8)
    assert right == 13_751_566_336
    published = perf_exercises.check_decode_bytes(right, 8)
    assert published.ok and "weights held as published" in repr(published)
    assert perf_exercises.check_decode_bytes(perf.model_decode_step_bytes(1, 4096, 32), 32).ok
    # a GQA-8 model of the same shape: W_K and W_V shrink by 32 layers x 2 x 4096 x (4096 - 1024);
    # the step gathers one of the 32,000 rows of the input embedding
    shrunk_weights = (6_738_415_616 - 32 * 2 * 4096 * (4096 - 1024) - 31_999 * 4096) * 2
    same_shape = shrunk_weights + mha.kv_cache_bytes(1, 4096, 32, 8, 128, 2)
    assert same_shape == perf.model_decode_step_bytes(1, 4096, 8, fixed_weights=False) == 12_140_953_600
    check = perf_exercises.check_decode_bytes(same_shape, 8)
    assert check.ok and "W_K and W_V shrink" in repr(check), repr(check)
    assert not perf_exercises.check_decode_bytes(same_shape, 32).ok  # with g = 32 the two accountings are one


@pytest.mark.parametrize("fixed_weights", [True, False])
def test_check_decode_bytes_names_the_slip_in_either_accounting(fixed_weights):
    weights = perf.model_step_weight_bytes(1, num_kv_heads=None if fixed_weights else 8)
    cache = mha.kv_cache_bytes(1, 4096, 32, 8, 128, 2)
    right = weights + cache
    slips = [
        (perf.model_weight_bytes(num_kv_heads=None if fixed_weights else 8) + cache, "whole input embedding table"),
        (cache, "KV cache alone"),
        (weights, "weights alone"),
        (weights + cache // 2, "keys *and* values"),
        (weights + cache // 32, "32 layers"),
        (2 * right, "fp16"),
        (right / 2**30, "GiB"),
        (round(right / 2**30, 2), "GiB"),
        (right / 1e9, "GB"),
    ]
    if fixed_weights:  # with shrunk weights, the full cache adds exactly what W_K and W_V lost (n = D)
        slips.append((weights + 4 * cache, "8 key/value heads"))
    for wrong, hint in slips:
        check = perf_exercises.check_decode_bytes(wrong, 8)
        assert not check.ok and hint in repr(check), (wrong, repr(check))


def test_decode_step_flops_match_the_flop_counter():
    from mha.chapters.costs.configs import count_forward_flops

    d_model, heads, head_dim = 64, 8, 8
    for g, batch, context in [(8, 1, 5), (2, 3, 9), (1, 2, 16)]:
        torch.manual_seed(0)
        layer = mha.GroupedQueryAttention(d_model, heads, g).eval()
        cache = layer.new_cache(batch, context)
        cache.append(torch.randn(batch, g, context - 1, head_dim), torch.randn(batch, g, context - 1, head_dim))
        x = torch.randn(batch, 1, d_model)
        with torch.no_grad():
            counted = count_forward_flops(lambda x, layer=layer, cache=cache: layer.decode_step(x, cache), x)
        flops = perf.decode_step_flops(
            mha.attention_params(d_model, heads, g, bias=False), batch, context, 1, heads, head_dim
        )
        assert counted == flops["total"] == flops["weights"] + flops["attention"], g
        assert flops["attention"] == 4 * batch * context * heads * head_dim  # does not depend on g
    with pytest.raises(ValueError, match="matmul_params must be an int >= 0"):
        perf.decode_step_flops(-1, 1, 1, 1, 1, 1)


def test_model_matmul_params_are_the_linear_weights_of_the_skeleton():
    from dataclasses import replace

    from mha.chapters.costs.configs import build_skeleton
    from mha.chapters.costs.models import config

    cfg = config(perf.DECODE_MODEL)
    for g in (None, 8, 1):
        skeleton = build_skeleton(cfg if g is None else replace(cfg, num_kv_heads=g))
        linear = sum(m.weight.numel() for m in skeleton.modules() if isinstance(m, nn.Linear))
        assert perf.model_matmul_params(num_kv_heads=g) == linear, g
    with pytest.raises(ValueError, match="counts Llama-family models"):
        perf.model_matmul_params("GPT-2 small")


def test_gqa_model_of_the_same_shape_reads_fewer_weights():
    published = perf.model_weight_bytes()
    gqa8 = perf.model_weight_bytes(num_kv_heads=8)
    assert (published - gqa8) // 2 == 32 * 2 * 4096 * (4096 - 1024) == 805_306_368
    mha_step = perf.model_decode_step_bytes(1, 4096, 32)
    assert mha_step == perf.model_decode_step_bytes(1, 4096, 32, fixed_weights=False)
    assert round(mha_step / perf.model_decode_step_bytes(1, 4096, 8), 2) == 1.12
    assert round(mha_step / perf.model_decode_step_bytes(1, 4096, 8, fixed_weights=False), 2) == 1.27


def test_decode_intensity_weights_about_b_cache_h_over_g():
    for batch, g in [(1, 32), (1, 8), (4, 1), (163, 8)]:
        for fixed in (True, False):
            i = perf.model_decode_intensity(batch, 4096, g, fixed_weights=fixed)
            assert i["cache"] == 32 / g  # fp16: 2 FLOPs per element and query head over 2 bytes
            assert 0.9998 * batch < i["weights"] < batch  # the norm scales and B embedding rows: read, not multiplied
            assert min(i["weights"], i["cache"]) <= i["step"] <= max(i["weights"], i["cache"])
    ridge = perf.H100_SXM["bf16_flops_per_s"] / perf.H100_SXM["bytes_per_s"]
    assert 290 < ridge < 300


def test_generation_bytes_sum_the_steps():
    weights, per_token = 1000, mha.kv_cache_bytes(1, 1, 1, 2, 4, 4)
    assert perf.generation_bytes(weights, 3, 2, 4) == 3 * weights + (1 + 2 + 3) * per_token
    with pytest.raises(ValueError, match="new_tokens"):
        perf.generation_bytes(weights, 0, 2, 4)


def test_check_online_softmax():
    (a, b), (c, d) = perf_exercises.ONLINE_SOFTMAX_BLOCKS
    m = max(a, b, c, d)
    right = sum(math.exp(s - m) for s in (a, b, c, d))
    assert perf_exercises.check_online_softmax(m, right).ok
    assert perf_exercises.check_online_softmax(m, round(right, 3)).ok
    first = max(a, b)
    stale = math.exp(a - first) + math.exp(b - first) + math.exp(c - m) + math.exp(d - m)
    for m_answer, l_answer, hint in [
        (first, right, "a later block holds a larger score"),
        (m, stale, "multiply it by exp(m_old - m_new)"),
        (m, sum(math.exp(s) for s in (a, b, c, d)), "subtract the running maximum"),
        (m, 1.0, "sum of the softmax weights"),
    ]:
        check = perf_exercises.check_online_softmax(m_answer, l_answer)
        assert not check.ok and hint in repr(check)
    malformed = perf_exercises.check_online_softmax("four", right)
    assert malformed.first_error == "input" and "running_max must be a number" in repr(malformed)
    negative = perf_exercises.check_online_softmax(-1.5, 1.0 + math.exp(-0.5), blocks=((-2.0,), (-1.5,)))
    assert negative.ok and negative.lines[1:] == ("  m: correct", "  l: correct")  # a maximum may be negative
    assert perf_exercises.check_online_softmax(first, stale).first_error == "m"  # the first wrong step


# --- stored reports ---


def fake_report(seq_lens=(8, 16), rounds=3):
    rows, memory = [], []
    for t in seq_lens:
        for i, impl in enumerate(pr.IMPLS):
            samples = [float((i + 1) * t + r) for r in range(rounds)]
            rows.append(
                {
                    "impl": impl,
                    "seq_len": t,
                    "forward": pr.summarize_samples(samples),
                    "forward_backward": pr.summarize_samples([2 * s for s in samples]),
                }
            )
            memory.append({"impl": impl, "seq_len": t, "saved_activation_bytes": (i + 1) * t * t})
    env = {
        "device": "cpu",
        "device_name": "x86_64",
        "cpu_model": "a CPU",
        "cpu_count": 2,
        "torch": "2",
        "isa": "AVX2",
        "threads": 2,
        "dtype": "float32",
        "python": "3",
        "load_average": 0.5,
        "load_average_after": 1.5,
    }
    return {
        "environment": env,
        "batch_size": 2,
        "d_model": 32,
        "num_heads": 4,
        "rounds": rounds,
        "timings": rows,
        "memory": memory,
        "sdpa_backend": {},
        "decoding": {"generation": [], "steps": [], "bandwidth": {}},
        "summary": {"seq_len": seq_lens[-1]},
    }


def test_quartiles_match_numpy_linear_percentiles():
    import numpy as np

    for values in ([3.0], [1.0, 2.0], [5.0, 1.0, 4.0, 2.0, 3.0], list(np.random.default_rng(0).random(11))):
        expected = np.percentile(values, [25, 50, 75])
        assert np.allclose(pr.quartiles(values), expected)
    with pytest.raises(ValueError, match="empty"):
        pr.quartiles([])
    record = pr.summarize_samples([4.0, 1.0, 3.0, 2.0])
    assert record["median_ms"] == statistics.median([1, 2, 3, 4]) and record["iqr_ms"] == pytest.approx(1.5)


def test_report_readers():
    report = fake_report()
    assert pr.check_report(report) is report
    assert pr.seq_lens(report) == [8, 16] and pr.seq_lens(report, "memory") == [8, 16]
    assert pr.median_ms(report, pr.IMPLS[2], 16, "forward") == 49.0
    assert pr.time_ratio(report, pr.IMPLS[0], pr.IMPLS[1], 8) == 9 / 17
    assert pr.memory_bytes(report, pr.IMPLS[1], 16) == 2 * 256
    ratio = pr.paired_ratio(report, pr.IMPLS[1], pr.IMPLS[0], 8, "forward")
    assert ratio["rounds"] == 3 and ratio["median"] == 17 / 9 and ratio["q1"] < ratio["median"] < ratio["q3"]
    assert pr.describe(report).startswith("cpu (x86_64, 2 CPUs, AVX2), torch 2, 2 threads, float32, load average 0.5")
    wrapped = pr.describe(report, width=40)  # a page's column: the same words, lines of at most 40
    assert max(len(line) for line in wrapped.splitlines()) <= 40 < len(pr.describe(report))
    assert wrapped.split() == pr.describe(report).split() and "\n" in wrapped
    with pytest.raises(KeyError, match="no timing"):
        pr.median_ms(report, "nope", 8)
    with pytest.raises(ValueError, match="key must be one of"):
        pr.timing(report, pr.IMPLS[0], 8, "backward")
    with pytest.raises(KeyError, match="no memory entry"):
        pr.memory_bytes(report, pr.IMPLS[0], 99)


def test_check_report_errors():
    with pytest.raises(ValueError, match="must be a dict"):
        pr.check_report([])
    report = fake_report()
    del report["memory"]
    with pytest.raises(ValueError, match=r"lacks keys \['memory'\]"):
        pr.check_report(report)
    report = fake_report()
    del report["environment"]["isa"]
    with pytest.raises(ValueError, match="environment lacks keys"):
        pr.check_report(report)
    report = fake_report()
    report["timings"][0]["forward"]["samples_ms"] = []
    with pytest.raises(ValueError, match="positive samples_ms"):
        pr.check_report(report)
    report = fake_report()
    report["timings"] = [r for r in report["timings"] if r["impl"] != pr.IMPLS[0]]
    with pytest.raises(ValueError, match="no timings for"):
        pr.check_report(report)
    report = fake_report()
    del report["memory"][0]["saved_activation_bytes"]
    with pytest.raises(ValueError, match=r"memory\[0\] needs"):
        pr.check_report(report)


def test_load_results_and_history(tmp_path):
    path = tmp_path / "cpu.json"
    path.write_text(json.dumps([fake_report()]))
    assert pr.load_results(path) == [fake_report()]
    with pytest.raises(FileNotFoundError, match="bench_attention"):
        pr.load_results(tmp_path / "missing.json")
    path.write_text("[]")
    with pytest.raises(ValueError, match="non-empty list"):
        pr.load_results(path)
    assert pr.load_history(tmp_path / "none.jsonl") == []
    (tmp_path / "h.jsonl").write_text('{"summary": 1}\n\n{"summary": 2}\n')
    assert pr.load_history(tmp_path / "h.jsonl") == [{"summary": 1}, {"summary": 2}]


def test_plots_and_explorer_frames():
    import matplotlib.pyplot as plt

    report = fake_report()
    for fig in (
        fast_figures.plot_time_vs_seq_len(report),
        fast_figures.plot_memory_vs_seq_len(report),
        fast_figures.plot_time_vs_seq_len(report, key="forward"),
    ):
        assert len(fig.axes[0].lines) >= len(pr.MAIN_IMPLS)
        assert fig.axes[0].get_title() and fig.axes[0].get_xlabel() and fig.axes[0].get_ylabel()
        plt.close(fig)
    fig = fast_figures.plot_looped_vs_batched(report)
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()][0].startswith("mha looped / mha weights")
    plt.close(fig)
    controls = pr.explorer_controls(report)
    assert controls == {"measure": ["forward", "forward+backward"], "seq_len": [8, 16]}
    fig = fast_figures.render_benchmark(report, measure="forward", seq_len=8)
    assert len(fig.axes[0].patches) == len(pr.MAIN_IMPLS)
    plt.close(fig)
    assert "mha looped 9 ms (IQR 1)" in pr.benchmark_alt(report, "forward", 8)
    with pytest.raises(ValueError, match="measure must be"):
        fast_figures.render_benchmark(report, measure="backward")
    fig = fast_figures.plot_decode_roofline()
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == [
        "MHA, g = 32",
        "GQA, g = 8",
        "GQA, g = 8, same shape",
        "MQA, g = 1",
        "MQA, g = 1, same shape",
        "weights alone",
    ]
    plt.close(fig)
    decoding = {
        "steps": [
            {"num_kv_heads": g, "time": pr.summarize_samples([1.0, 2.0]), "weight_bytes": 10, "cache_bytes": 5 * g}
            for g in (4, 1)
        ],
        "bandwidth": {"bytes_per_s": 1e9},
    }
    fig = fast_figures.plot_decode_steps(decoding)
    assert len(fig.axes[0].get_legend().get_texts()) == 3
    plt.close(fig)


def test_stored_results_are_valid():
    """The repository's stored results pass the checks the chapter makes and agree with the formulas."""
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "cpu.json"
    if not path.is_file():
        skip_or_fail("no stored CPU results yet")
    for report in pr.load_results(path):
        head_dim = report["d_model"] // report["num_heads"]
        for entry in report["decoding"]["generation"]:
            assert (
                entry["cache_bytes"]
                == entry["kv_cache_bytes_formula"]
                == mha.kv_cache_bytes(1, entry["new_tokens"], 1, entry["num_kv_heads"], head_dim, 4)
            )
        for step in report["decoding"]["steps"]:
            g, b, n = step["num_kv_heads"], step["batch_size"], step["context_len"]
            assert step["cache_bytes"] == mha.kv_cache_bytes(b, n, 1, g, head_dim, 4)
            assert step["weight_bytes"] == mha.attention_params(report["d_model"], report["num_heads"], g) * 4
        summary = report["summary"]
        assert summary["fused_over_bare"] == pr.paired_ratio(report, pr.FUSED, pr.BARE, summary["seq_len"])
        if "method" in report:  # newer runs: the comparisons were fixed before the run, all judged
            assert report["method"]["comparisons"] == [c.label for c in pr.report_family(report)]
            assert summary["comparisons"] == pr.verdicts(report)


def test_the_comparison_family_counts_what_the_chapter_compares():
    """37 comparisons for the CPU benchmark's configuration, each named once; a verdict outside
    the family is refused, so the chapter cannot judge a comparison the correction did not count."""
    family = pr.comparison_family(
        [128, 256, 512], 512, 12, [(1, 512), (1, 4096), (4, 4096), (16, 4096)], [12, 3, 1], pr.COMPILE_FLAGS
    )
    labels = [c.label for c in family]
    assert len(family) == 6 + 3 + 5 + 3 + 4 + 3 + 3 + 2 + 8 == 37 and len(set(labels)) == 37
    assert sum((c.numerator[0], c.denominator[0]) == ("layers", "layers") for c in family) == 21
    implementations = {c.numerator[1] for c in family if c.numerator[0] == "layers"}
    implementations |= {c.denominator[1] for c in family if c.denominator[0] == "layers"}
    assert implementations == set(pr.IMPLS)  # every timed implementation takes part in a comparison
    report = fake_report(rounds=12)  # implementation i: (i + 1) T + r ms in round r, so looped < weights
    found = pr.verdicts(report)
    assert list(found) == [c.label for c in pr.report_family(report)]
    looped = pr.judged(report, pr.LOOPED, pr.WEIGHTS, 8, "forward")
    assert looped == found["mha looped / mha weights, forward, T = 8"] and looped["verdict"] == "A faster"
    assert looped["comparisons"] == len(pr.report_family(report)) == 17  # two lengths, no decoding or compile
    assert pr.judged(report, pr.TORCH_DEFAULT, pr.FUSED, 16)["verdict"] == "A slower"
    with pytest.raises(KeyError, match="is not one of the 17 comparisons"):
        pr.judged(report, pr.BARE, pr.LOOPED, 16)
    assert pr.verdict_line("x / y", looped, 2) == "x / y: 0.63 [0.50, 0.70]  A faster"
    # too wide for max_width: the numbers go to a second, indented line; narrow enough: one line
    assert pr.verdict_line("x / y", looped, 2, max_width=20) == "x / y:\n    0.63 [0.50, 0.70]  A faster"
    assert pr.verdict_line("x / y", looped, 2, max_width=74) == "x / y: 0.63 [0.50, 0.70]  A faster"
    assert pr.order_of(report) == "rotated"
    report["method"] = {"order": "shuffled", "order_seed": 3}
    assert pr.order_of(report) == "shuffled, seed 3"


def test_samples_at_every_kind_of_timing():
    report = fake_report()
    report["compile"] = {"timings": {"eager, need_weights=True": {"samples_ms": [1.0]}}}
    report["decoding"] = {
        "generation": [{"num_kv_heads": 4, "cache": {"samples_ms": [2.0]}, "recompute": {"samples_ms": [3.0]}}],
        "steps": [{"batch_size": 1, "context_len": 8, "num_kv_heads": 4, "time": {"samples_ms": [4.0]}}],
    }
    assert pr.samples_at(report, ("compile", "eager, need_weights=True")) == [1.0]
    assert pr.samples_at(report, ("generation", "recompute", 4)) == [3.0]
    assert pr.samples_at(report, ("step", 1, 8, 4)) == [4.0]
    assert pr.samples_at(report, ("layers", pr.LOOPED, 8, "forward")) == [8.0, 9.0, 10.0]
    with pytest.raises(KeyError, match="no samples"):
        pr.samples_at(report, ("step", 2, 8, 4))
    with pytest.raises(ValueError, match="where must start with"):
        pr.samples_at(report, ("memory", 1))


def test_timing_table():
    table = pr.timing_table(fake_report(), key="forward").splitlines()
    assert len(table) == 1 + len(pr.MAIN_IMPLS) and "T = 16" in table[0]
    assert table[1].split() == ["mha", "looped", "9.0", "(", "1.0)", "17.0", "(", "1.0)"]


def test_decode_speedups_pair_rounds_and_count_bytes():
    report = fake_report()
    report["num_heads"] = 4
    report["decoding"] = {
        "bandwidth": {"bytes_per_s": 1e6},
        "steps": [
            {
                "num_kv_heads": 4,
                "batch_size": 2,
                "context_len": 8,
                "weight_bytes": 100,
                "cache_bytes": 300,
                "time": pr.summarize_samples([4.0, 8.0, 6.0]),
            },
            {
                "num_kv_heads": 1,
                "batch_size": 2,
                "context_len": 8,
                "weight_bytes": 60,
                "cache_bytes": 40,
                "time": pr.summarize_samples([2.0, 2.0, 3.0]),
            },
        ],
    }
    speedups = pr.decode_speedups(report)
    assert list(speedups) == [(2, 8, 1)]
    sp = speedups[2, 8, 1]
    assert sp["median"] == 2.0 and (sp["q1"], sp["q3"]) == (2.0, 3.0)  # rounds: 4/2, 8/2, 6/3
    assert sp["bytes_ratio"] == 4.0 and sp["mha_ms"] == 6.0 and sp["mha_bound_ms"] == pytest.approx(0.4)


def test_round_ratios_pair_the_rounds_that_paired_ratio_summarises():
    report = fake_report()  # looped: (t, t + 1, t + 2) ms, weights: (2t, 2t + 1, 2t + 2) ms
    ratios = pr.round_ratios(report, pr.LOOPED, pr.WEIGHTS, 8, "forward")
    assert ratios == [8 / 16, 9 / 17, 10 / 18]
    summary = pr.paired_ratio(report, pr.LOOPED, pr.WEIGHTS, 8, "forward")
    assert (summary["q1"], summary["median"], summary["q3"]) == pr.quartiles(ratios) and summary["rounds"] == 3


def test_source_lines_shows_the_named_lines_without_the_docstring():
    from mha.chapters.costs.tables import source_lines

    whole = source_lines(perf.bare_attention_layer)
    assert whole.startswith("def bare_attention_layer") and '"""' not in whole and "return F.linear" in whole
    method = source_lines(mha.fused.FusedLinear.forward)  # a method: dedented, decorator kept
    assert method.splitlines()[:2] == ["@staticmethod", "def forward(ctx, x, bias, *weights):"]
    part = source_lines(mha.attention.blockwise_attention, "for start in range", "row_max = new_max")
    lines = part.splitlines()
    assert lines[0].startswith("for start in range") and lines[-1].strip() == "row_max = new_max"
    assert lines[1].startswith("    ")  # the loop body keeps its indentation relative to the loop
    assert source_lines(perf.bare_attention_layer, "return F.linear").startswith("return F.linear")  # to the end
    with pytest.raises(ValueError, match="start marker 'no such line' not found"):
        source_lines(perf.bare_attention_layer, "no such line")
    with pytest.raises(ValueError, match="stop marker 'no such line' not found"):
        source_lines(perf.bare_attention_layer, "qkv = F.linear", "no such line")
