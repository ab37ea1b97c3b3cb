"""The benchmark suite runs at tiny sizes so it cannot rot (no timing assertions)."""

import json

import pytest

from benchmarks import bench_attention


@pytest.fixture(scope="module")
def tiny_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    reports = bench_attention.run(tiny=True, out_dir=out)
    return reports, out


def test_files_and_environment(tiny_report):
    reports, out = tiny_report
    device = reports[0]["environment"]["device"]
    stored = json.loads((out / f"tiny-{device}.json").read_text())
    assert stored == json.loads(json.dumps(reports))
    env = stored[0]["environment"]
    assert set(env) >= {"device", "torch", "threads", "dtype", "load_average", "load_average_after"}
    assert (out / f"tiny-{device}.md").read_text().startswith("# Attention benchmark")


def test_every_implementation_timed(tiny_report):
    report = tiny_report[0][0]
    impls = {r["impl"] for r in report["timings"]}
    assert len(impls) == 7
    for row in report["timings"]:
        for key in ("forward", "forward_backward"):
            assert row[key]["median_ms"] > 0 and row[key]["repeats"] >= 1
    assert {(m["impl"], m["seq_len"]) for m in report["memory"]} == {(i, t) for i in impls for t in (8, 16)}
    assert all(m["saved_activation_bytes"] > 0 for m in report["memory"])


def test_decoding_matches_and_cache_bytes_equal_formula(tiny_report):
    for entry in tiny_report[0][0]["decoding"]:
        assert entry["max_abs_diff"] < 1e-5
        assert entry["cache_bytes_equal_formula"] and entry["cache_bytes"] == entry["kv_cache_bytes_formula"]


def test_summary_ratios_are_positive(tiny_report):
    summary = tiny_report[0][0]["summary"]
    assert summary["seq_len"] == summary["memory_seq_len"] == 16
    assert all(value > 0 for key, value in summary.items() if not key.endswith("seq_len"))


def test_report_passes_the_chapter_checks(tiny_report):
    from mha.chapters import perf

    for report in tiny_report[0]:
        assert perf.check_report(report) is report
        assert perf.seq_lens(report) == perf.seq_lens(report, "memory") == [8, 16]


def test_time_it_takes_at_least_min_repeats():
    calls = []
    result = bench_attention.time_it(lambda: calls.append(1), 0.0, min_repeats=4)
    assert result["repeats"] >= 4 and result["median_ms"] >= 0 and result["iqr_ms"] >= 0
    assert len(calls) >= 4


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
