"""The benchmark suite runs at tiny sizes so it cannot rot (no assertion on how fast anything is)."""

import copy
import json

import pytest
import torch

import mha
from benchmarks import bench_attention, timing
from mha.chapters.fast import perf_results as pr


@pytest.fixture(scope="module")
def tiny_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    reports = bench_attention.run(tiny=True, out_dir=out)
    return reports, out


def test_files_environment_and_history(tiny_report):
    reports, out = tiny_report
    device = reports[0]["environment"]["device"]
    stored = json.loads((out / f"tiny-{device}.json").read_text())
    assert stored == json.loads(json.dumps(reports))
    env = stored[0]["environment"]
    assert set(env) >= {"cpu_model", "cpu_count", "torch", "isa", "threads", "load_average", "load_average_after"}
    assert env["cpu_model"] and env["isa"] == torch.backends.cpu.get_cpu_capability()
    assert (out / f"tiny-{device}.md").read_text().startswith("# Attention benchmark")
    history = [json.loads(line) for line in (out / f"tiny-{device}-history.jsonl").read_text().splitlines()]
    assert [line["summary"] for line in history] == [r["summary"] for r in stored]
    assert [line["method"] for line in history] == [r["method"] for r in stored]


def test_every_implementation_timed_side_by_side(tiny_report):
    report = tiny_report[0][0]
    assert [r["impl"] for r in report["timings"] if r["seq_len"] == 8] == list(pr.IMPLS)
    for row in report["timings"]:
        for key in pr.MEASURES:
            assert len(row[key]["samples_ms"]) == report["rounds"] == 3
            assert row[key]["q1_ms"] <= row[key]["median_ms"] <= row[key]["q3_ms"]
    assert {(m["impl"], m["seq_len"]) for m in report["memory"]} == {(i, t) for i in pr.IMPLS for t in (8, 16)}
    assert all(m["saved_activation_bytes"] > 0 for m in report["memory"])
    # the explicit paths call no SDPA; every fast path names the backend it ran
    assert report["sdpa_backend"][pr.WEIGHTS] is None and report["sdpa_backend"][pr.LOOPED] is None
    assert all(report["sdpa_backend"][impl] for impl in (pr.FUSED, pr.BARE, pr.FUSED_CAUSAL, pr.GQA, pr.MQA_REPEAT))


def test_gqa_copies_cost_bytes(tiny_report):
    report = tiny_report[0][0]
    for t in (8, 16):
        assert pr.memory_bytes(report, pr.GQA, t) < pr.memory_bytes(report, pr.GQA_REPEAT, t)
        assert pr.memory_bytes(report, pr.FUSED_CAUSAL, t) == pr.memory_bytes(report, pr.BARE_CAUSAL, t)


def test_decoding(tiny_report):
    decoding = tiny_report[0][0]["decoding"]
    assert [d["num_kv_heads"] for d in decoding["generation"]] == [4, 1]
    for entry in decoding["generation"]:
        assert entry["max_abs_diff"] < 1e-5
        assert entry["cache_bytes"] == entry["kv_cache_bytes_formula"]
    assert {(s["batch_size"], s["context_len"]) for s in decoding["steps"]} == {(1, 8), (2, 16)}
    for step in decoding["steps"]:
        assert step["cache_bytes"] == mha.kv_cache_bytes(
            step["batch_size"], step["context_len"], 1, step["num_kv_heads"], 8, 4
        )
        assert step["time"]["median_ms"] > 0
    assert decoding["bandwidth"]["bytes_per_s"] > 0 and decoding["bandwidth"]["bytes"] == 2**20


def test_compile_is_measured_apart_from_compiling(tiny_report):
    result = tiny_report[0][0]["compile"]
    assert result["backend"] == "eager"  # the tiny run checks the code path, not Inductor
    assert list(result["first_call_s"]) == ["need_weights=True", "need_weights=False"]
    assert all(t > 0 for t in result["first_call_s"].values()) and result["warmup_compile_s"] > 0
    assert sorted(result["compile_order"]) == sorted(result["first_call_s"])  # the order drawn, recorded
    assert len(result["timings"]) == 4 and set(result["compiled_over_eager"]) == set(result["first_call_s"])


def test_summary_and_targets(tiny_report):
    report = tiny_report[0][0]
    summary = report["summary"]
    assert summary["seq_len"] == 16
    assert summary["fused_over_bare"] == pr.paired_ratio(report, pr.FUSED, pr.BARE, 16)
    assert set(summary["looped_over_batched"]["forward"]) == {"8", "16"}
    target = summary["targets"]["cpu float32"]
    assert (target["impl"], target["reference"], target["limit"]) == (pr.FUSED, pr.BARE, 1.05)
    assert target["met"] == (target["ratio"]["median"] <= 1.05)


def test_gpu_target_is_the_causal_bf16_layer(tiny_report):
    """What a CUDA run would check, on the CPU report relabelled: the bf16 causal layer against the
    bare causal layer, within 1.1."""
    report = copy.deepcopy(tiny_report[0][0])
    report["environment"].update(device="cuda", dtype="bfloat16")
    targets = bench_attention.summarize(report, 16)["targets"]
    assert list(targets) == ["cuda bfloat16"]
    assert (targets["cuda bfloat16"]["impl"], targets["cuda bfloat16"]["limit"]) == (pr.FUSED_CAUSAL, 1.1)


def test_bf16_layers_run(tmp_path):
    """The dtype of the GPU's target, on the CPU at tiny sizes: every implementation runs in bf16."""
    rows, memory, backends = bench_attention.bench_layers(
        2, 32, 4, [8], [8], torch.device("cpu"), torch.bfloat16, rounds=1, min_sample_s=0.0
    )
    assert len(rows) == len(pr.IMPLS) and all(r["forward_backward"]["median_ms"] > 0 for r in rows)


def test_report_passes_the_chapter_checks(tiny_report):
    for report in tiny_report[0]:
        assert pr.check_report(report) is report
        assert pr.seq_lens(report) == pr.seq_lens(report, "memory") == [8, 16]


def test_time_side_by_side_shuffles_each_round_from_a_seed():
    calls = []
    fns = {name: (lambda name=name: calls.append(name)) for name in "abcde"}
    result = timing.time_side_by_side(fns, rounds=40, warmup=0, order=7)
    rounds = [calls[5 * r : 5 * r + 5] for r in range(40)]
    assert all(sorted(r) == list("abcde") for r in rounds)  # every round runs each once
    assert timing.round_orders(result) == rounds  # the recorded positions give the order back
    assert len({tuple(r) for r in rounds}) > 20  # not one rotated order: 40 rounds, many orders
    predecessors = {name: {r[r.index(name) - 1] for r in rounds if r.index(name)} for name in "abcde"}
    assert all(len(p) == 4 for p in predecessors.values())  # each follows every other one
    assert all(set(result[n]["positions"]) == set(range(5)) for n in "abcde")  # and runs at every place
    calls.clear()
    again = timing.time_side_by_side(fns, rounds=40, warmup=0, order=7)
    assert [calls[5 * r : 5 * r + 5] for r in range(40)] == rounds  # the seed reproduces the orders
    assert [again[n]["positions"] for n in "abcde"] == [result[n]["positions"] for n in "abcde"]
    assert all(r["repeats"] == 40 and r["median_ms"] >= 0 for r in result.values())
    calls.clear()
    timing.time_side_by_side({"slow": lambda: calls.append(1)}, rounds=2, min_sample_s=1e-3, warmup=0)
    assert len(calls) > 3  # a call far shorter than min_sample_s is repeated within each sample


def test_every_implementation_has_weights_of_its_own():
    """No two implementations read one weight tensor (none finds another's weights in a cache), yet
    they hold the same values: the implementations of one function agree."""
    fns, modules = bench_attention.implementations(32, 4, torch.device("cpu"), torch.float32)
    storages = {name: {p.untyped_storage().data_ptr() for p in m.parameters()} for name, m in modules.items()}
    names = list(storages)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            assert not storages[a] & storages[b], (a, b)
    x = torch.randn(2, 6, 32, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        out = {name: f(x) for name, f in fns.items()}
    for group in (pr.MAIN_IMPLS, (pr.FUSED_CAUSAL, pr.FUSED_CAUSAL_MASK, pr.BARE_CAUSAL)):
        assert all(torch.allclose(out[group[0]], out[name], atol=1e-5) for name in group), group
    assert torch.allclose(out[pr.GQA], out[pr.GQA_REPEAT], atol=1e-5)
    assert torch.allclose(out[pr.MQA], out[pr.MQA_REPEAT], atol=1e-5)


def test_the_comparisons_are_fixed_before_the_run_and_all_judged(tiny_report):
    report = tiny_report[0][0]
    method = report["method"]
    assert (method["order"], method["order_seed"], method["own_weights"]) == ("shuffled", 0, True)
    assert method["comparisons"] == [c.label for c in pr.report_family(report)]
    assert list(report["summary"]["comparisons"]) == method["comparisons"]
    assert report["summary"]["comparisons"] == pr.verdicts(report)
    for row in report["timings"]:  # every timing records where it ran in each round
        assert len(row["forward"]["positions"]) == report["rounds"]
    assert pr.order_of(report) == "shuffled, seed 0"


def test_automatic_dynamic_shapes_recompile_once():
    """What the making-it-fast chapter says of a new shape: the first new shape recompiles the function as one
    dynamic graph, which then serves every later shape (torch's automatic dynamic shapes)."""
    from torch._dynamo.testing import CompileCounter

    torch.compiler.reset()
    counter = CompileCounter()
    compiled = torch.compile(mha.MultiHeadAttention(32, 4).eval(), backend=counter)
    with torch.no_grad():
        for seq_len in (8, 16, 24, 32, 48):
            compiled(torch.randn(2, seq_len, 32))
    torch.compiler.reset()
    assert counter.frame_count == 2  # the static graph for 8, then one dynamic graph for the rest


def test_sdpa_backend_reads_the_kernel_that_ran():
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q = torch.randn(1, 2, 8, 4)
    assert timing.sdpa_backend(lambda: (q @ q.mT).softmax(-1) @ q) is None
    with sdpa_kernel(SDPBackend.MATH):
        assert timing.sdpa_backend(lambda: F.scaled_dot_product_attention(q, q, q)) == "math"
    assert timing.cpu_model() and timing.load_average() is None or timing.load_average() >= 0


def test_bench_explorers_times_every_frame(tmp_path):
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    import mha.viz.widgets
    from benchmarks import bench_explorers

    source = (
        "import matplotlib.pyplot as plt\nfrom mha.viz.widgets import explorer\n"
        "def render(n):\n    fig, ax = plt.subplots()\n    ax.plot(range(n))\n    return fig\n"
        "explorer(render, {'n': [2, 3, 4]}, title='toy')"
    )
    path = tmp_path / "toy.ipynb"
    nbformat.write(new_notebook(cells=[new_code_cell(source)]), path)
    original = mha.viz.widgets.explorer
    records = []
    bench_explorers.run_notebook(path, records)
    assert mha.viz.widgets.explorer is original  # the timer is removed again
    assert [(r["notebook"], r["title"], r["frames"]) for r in records] == [("toy.ipynb", "toy", 3)]
    assert records[0]["median_ms"] > 0 and records[0]["max_ms"] >= records[0]["median_ms"]


@pytest.mark.cuda
def test_causal_flag_keeps_a_fused_backend_on_cuda():
    """On a GPU the causal flag must not fall back to the math backend, and an explicit mask rules
    out FlashAttention (unverified here: runs only with MHA_DEVICE=cuda on a GPU)."""
    device = torch.device("cuda")
    torch.manual_seed(0)
    layer = mha.FusedMultiHeadAttention(768, 12).to(device, torch.bfloat16)
    x = torch.randn(2, 256, 768, device=device, dtype=torch.bfloat16)
    with torch.no_grad():
        flag = timing.sdpa_backend(lambda: layer(x, need_weights=False, is_causal=True))
        masked = timing.sdpa_backend(lambda: layer(x, need_weights=False, mask=mha.causal_mask(256, device=device)))
    assert flag and "math" not in flag, flag
    assert masked and "flash" not in masked.split(", "), masked


@pytest.mark.cuda
def test_tiny_benchmark_on_cuda_in_bf16(tmp_path):
    reports = bench_attention.run(tiny=True, out_dir=tmp_path, device=torch.device("cuda"))
    assert [r["environment"]["dtype"] for r in reports] == ["float32", "bfloat16"]
    assert "cuda bfloat16" in reports[1]["summary"]["targets"]
    assert all(reports[1]["sdpa_backend"][impl] for impl in (pr.FUSED_CAUSAL, pr.BARE_CAUSAL))
    assert all("cuda_peak_bytes" in m for m in reports[1]["memory"])


def test_bench_text_times_both_canvases(capsys):
    from benchmarks import bench_text

    assert bench_text.main(["3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ["plain", "glyph"]
    assert all("50 labels: first" in line and "then median" in line for line in lines)
