"""mha.perf: saved-activation counts against hand counts, report checks, plots (no timings)."""

import json

import matplotlib
import pytest
import torch
from conftest import skip_or_fail
from torch import nn

import mha
from mha import viz
from mha.chapters import perf

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


def fake_report(seq_lens=(8, 16)):
    rows, memory = [], []
    for t in seq_lens:
        for i, impl in enumerate(perf.IMPLS):
            timing = {"median_ms": float((i + 1) * t), "iqr_ms": 0.1, "repeats": 5}
            rows.append({"impl": impl, "seq_len": t, "forward": timing, "forward_backward": dict(timing)})
            memory.append({"impl": impl, "seq_len": t, "saved_activation_bytes": (i + 1) * t * t})
    env = {"device": "cpu", "device_name": "x86_64", "torch": "2", "threads": 2, "dtype": "float32", "python": "3"}
    return {
        "environment": env,
        "batch_size": 2,
        "d_model": 32,
        "num_heads": 4,
        "timings": rows,
        "memory": memory,
        "decoding": [],
        "summary": {},
    }


def test_report_readers():
    report = fake_report()
    assert perf.check_report(report) is report
    assert perf.seq_lens(report) == [8, 16] and perf.seq_lens(report, "memory") == [8, 16]
    assert perf.median_ms(report, perf.IMPLS[2], 16) == 48.0
    assert perf.time_ratio(report, perf.IMPLS[0], perf.IMPLS[1], 8) == 0.5
    assert perf.memory_bytes(report, perf.IMPLS[1], 16) == 2 * 256
    assert perf.describe(report).startswith("cpu (x86_64), torch 2, 2 threads, float32")
    with pytest.raises(KeyError, match="no timing"):
        perf.median_ms(report, "nope", 8)
    with pytest.raises(KeyError, match="no memory entry"):
        perf.memory_bytes(report, perf.IMPLS[0], 99)


def test_check_report_errors():
    with pytest.raises(ValueError, match="must be a dict"):
        perf.check_report([])
    report = fake_report()
    del report["memory"]
    with pytest.raises(ValueError, match=r"lacks keys \['memory'\]"):
        perf.check_report(report)
    report = fake_report()
    del report["environment"]["torch"]
    with pytest.raises(ValueError, match="environment lacks keys"):
        perf.check_report(report)
    report = fake_report()
    report["timings"][0]["forward"]["median_ms"] = 0.0
    with pytest.raises(ValueError, match="positive median_ms"):
        perf.check_report(report)
    report = fake_report()
    report["timings"] = [r for r in report["timings"] if r["impl"] != perf.IMPLS[0]]
    with pytest.raises(ValueError, match="no timings for"):
        perf.check_report(report)
    report = fake_report()
    del report["memory"][0]["saved_activation_bytes"]
    with pytest.raises(ValueError, match=r"memory\[0\] needs"):
        perf.check_report(report)


def test_load_results(tmp_path):
    path = tmp_path / "cpu.json"
    path.write_text(json.dumps([fake_report()]))
    assert perf.load_results(path) == [fake_report()]
    with pytest.raises(FileNotFoundError, match="bench_attention"):
        perf.load_results(tmp_path / "missing.json")
    path.write_text("[]")
    with pytest.raises(ValueError, match="non-empty list"):
        perf.load_results(path)


def test_plots_and_explorer_frames():
    import matplotlib.pyplot as plt

    report = fake_report()
    for fig in (
        viz.perf.plot_time_vs_seq_len(report),
        viz.perf.plot_memory_vs_seq_len(report),
        viz.perf.plot_time_vs_seq_len(report, key="forward"),
    ):
        assert len(fig.axes[0].lines) == len(perf.IMPLS)
        plt.close(fig)
    controls = perf.explorer_controls(report)
    assert controls == {"measure": ["forward", "forward+backward"], "seq_len": [8, 16]}
    fig = viz.perf.render_benchmark(report, measure="forward", seq_len=8)
    assert len(fig.axes[0].patches) == len(perf.IMPLS)
    plt.close(fig)
    assert "mha looped 8 ms" in perf.benchmark_alt(report, "forward", 8)
    with pytest.raises(ValueError, match="measure must be"):
        viz.perf.render_benchmark(report, measure="backward")


def test_stored_results_are_valid():
    """The repository's stored results (when present) pass the same checks the chapter makes."""
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "cpu.json"
    if not path.is_file():
        skip_or_fail("no stored CPU results yet")
    for report in perf.load_results(path):
        for entry in report["decoding"]:
            assert (
                entry["cache_bytes"]
                == entry["kv_cache_bytes_formula"]
                == mha.kv_cache_bytes(
                    1, entry["new_tokens"], 1, entry["num_kv_heads"], report["d_model"] // report["num_heads"], 4
                )
            )
        summary = report["summary"]
        sdpa, torch_fast = perf.IMPLS[2], perf.IMPLS[4]
        assert summary["ours_over_torch_need_weights_false"] == perf.time_ratio(
            report, sdpa, torch_fast, summary["seq_len"]
        )
