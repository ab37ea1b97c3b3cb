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
    assert set(env) >= {"device", "torch", "threads", "dtype"}
    assert (out / f"tiny-{device}.md").read_text().startswith("# Attention benchmark")


def test_every_implementation_timed(tiny_report):
    report = tiny_report[0][0]
    impls = {r["impl"] for r in report["timings"]}
    assert len(impls) == 7
    for row in report["timings"]:
        for key in ("forward", "forward_backward"):
            assert row[key]["median_ms"] > 0 and row[key]["repeats"] >= 1
    assert {m["impl"] for m in report["memory"]} == impls
    assert all(m["saved_activation_bytes"] > 0 for m in report["memory"])


def test_decoding_matches_and_cache_bytes_equal_formula(tiny_report):
    for entry in tiny_report[0][0]["decoding"]:
        assert entry["max_abs_diff"] < 1e-5
        assert entry["cache_bytes_equal_formula"] and entry["cache_bytes"] == entry["kv_cache_bytes_formula"]


def test_summary_ratios_are_positive(tiny_report):
    summary = tiny_report[0][0]["summary"]
    assert all(value > 0 for key, value in summary.items() if key != "seq_len")
