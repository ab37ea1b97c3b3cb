"""Cache provenance and the measured bands that chapters check live training runs against."""

import importlib.util
import json
import math
from pathlib import Path

import pytest

from mha import provenance

ROOT = Path(__file__).resolve().parents[2]
#: Every cache of trained or long-accumulated numbers, and the script that rebuilds it.
CACHES = {
    "head_count_grid.json": "python scripts/make_ch01_cache.py",
    "head_count_control.json": "python scripts/make_ch08_control.py",  # the head-count experiments' control
    "merge_results.json": "python scripts/make_merge_results.py",
    "minilm_head_ablation.json": "python scripts/make_ablation_cache.py",
    "portability.json": "python scripts/measure_portability.py",
}


def measure_script():
    spec = importlib.util.spec_from_file_location("measure_portability", ROOT / "scripts" / "measure_portability.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("filename", sorted(CACHES))
def test_every_cache_records_how_it_was_made(filename):
    record = provenance.of(filename)
    assert record["script"] == CACHES[filename]
    assert record["settings"], f"{filename}: no settings recorded"
    machine = record["machine"]
    assert {"torch", "python", "cpu", "cpu_capability", "threads", "kernel_env"} <= set(machine)
    assert machine["torch"].startswith("2.") and machine["threads"] >= 1 and machine["cpu"]
    assert (ROOT / CACHES[filename].split()[-1]).exists()
    line = provenance.describe(record)
    assert line.startswith(f"made by `{CACHES[filename]}` with torch {machine['torch']} on ")


def test_every_json_cache_is_listed():
    data = {p.name for p in provenance.DATA_DIR.glob("*.json")} - {"sentence_pairs.json", "winograd_twins.json"}
    assert data == set(CACHES), "a new cache file needs its provenance test (and `make caches`)"


def test_machine_describes_this_process():
    m = provenance.machine()
    assert m["cpu_capability"] in ("DEFAULT", "AVX2", "AVX512", "NO AVX", "SVE256", "ZVECTOR") or m["cpu_capability"]
    assert isinstance(m["kernel_env"], dict)
    assert provenance.provenance("x", seed=1)["settings"] == {"seed": 1}


def test_two_thread_runs_repeat_the_one_thread_runs():
    """Training pins one thread: each emulated setup gives the same value at 1 and 2 threads, on every probe."""
    data = provenance.load_portability()
    runs = data["provenance"]["settings"]["runs"]
    emulations = [r for r in runs if "ATEN_CPU_CAPABILITY" in r]
    assert {e["OMP_NUM_THREADS"] for e in emulations} == {"1", "2"}
    assert len({e["ATEN_CPU_CAPABILITY"] for e in emulations}) >= 3
    assert len({e["MKL_ENABLE_INSTRUCTIONS"] for e in emulations}) >= 3
    by_setup = {}
    for i, env in enumerate(runs):
        if "ATEN_CPU_CAPABILITY" in env:
            setup = tuple(sorted((k, v) for k, v in env.items() if k != "OMP_NUM_THREADS"))
            by_setup.setdefault(setup, set()).add(tuple(p["values"][i] for p in data["probes"].values()))
    assert all(len(results) == 1 for results in by_setup.values())


def test_distinct_counts():
    """What the chapters may say about the runs behind the bands: 20 runs, 10 distinct computations."""
    data = provenance.load_portability()
    counts = {name: provenance.measurement(name) for name in data["probes"]}
    first = counts["ch01.heads1"]
    assert (first["runs"], first["computations"]) == (20, 10)
    assert (first["emulated"], first["setups"], first["thread_counts"], first["threads_agree"]) == (12, 6, [1, 2], True)
    assert (first["emulated_computations"], first["perturbations"], first["perturbed_computations"]) == (2, 8, 8)
    assert {name: c["distinct_values"] for name, c in counts.items()} == {
        "ch01.heads1": 9,
        "ch01.heads2": 1,
        "ch01.linear_k2_heads1": 10,
        "ch05.concat_seed0": 1,
        "ch05.average_seed0": 10,
        "ch05.average_seed2": 1,
    }
    assert data["distinct"] == {**{k: v for k, v in first.items() if k not in ("distinct_values", "min", "max")},
                                "groups": provenance.distinct_runs(data["probes"])}  # fmt: skip


def test_distinct_runs_by_hand():
    probes = {"a": {"values": [0.5, 0.5, 0.7, 0.5]}, "b": {"values": [1.0, 1.0, 1.0, 0.9]}}
    assert provenance.distinct_runs(probes) == [[0, 1], [2], [3]]  # run 3 agrees with 0 on "a" only
    with pytest.raises(ValueError, match="one value per run"):
        provenance.distinct_runs({"a": {"values": [1.0]}, "b": {"values": [1.0, 2.0]}})


def needed_band(probe: dict, groups: list[list[int]]) -> list[float]:
    """The band the measured spread needs, recomputed from the raw values (not the stored sample)."""
    sample = [probe["values"][members[0]] for members in groups]
    return provenance.prediction_band(sample, probe["resolution"])["band"]


def too_wide(band: list[float], probe: dict, groups: list[list[int]]) -> bool:
    """True when ``band`` reaches further than the spread needs on either side (4-decimal rounding allowed)."""
    low, high = needed_band(probe, groups)
    return band[0] < low - 1e-9 or band[1] > high + 1e-9


def test_every_probe_is_measured():
    assert list(provenance.load_portability()["probes"]) == list(measure_script().PROBES)


@pytest.mark.parametrize("name", sorted(provenance.load_portability()["probes"]))
def test_no_band_is_wider_than_its_spread_needs(name):
    data = provenance.load_portability()
    groups = provenance.distinct_runs(data["probes"])
    probe = data["probes"][name]
    values, (low, high) = probe["values"], probe["band"]
    assert len(values) == len(data["provenance"]["settings"]["runs"])
    assert low <= min(values) and max(values) <= high, f"{name}: band {low, high} misses a measured value"
    assert not too_wide(probe["band"], probe, groups), (
        f"{name}: band {low, high}, the spread needs {needed_band(probe, groups)}"
    )
    assert probe["band"] == needed_band(probe, groups)
    assert probe["sample"] == [values[members[0]] for members in groups]
    assert provenance.live_band(name) == (low, high)
    # the resolution is one scored position: every value is a whole number of positions
    positions = 1 / probe["resolution"]
    assert all(abs(v * positions - round(v * positions)) < 0.01 for v in values)
    assert probe["resolution"] == measure_script().resolution(name)


def test_the_rule_rejects_the_old_blanket_margin():
    """The check above can fail: the band that a blanket margin drew for ch05.average_seed0 (0.02 + range)."""
    data = provenance.load_portability()
    groups = provenance.distinct_runs(data["probes"])
    probe = data["probes"]["ch05.average_seed0"]
    assert too_wide([0.1377, 0.9768], probe, groups)
    assert too_wide([0.98, 1.0], data["probes"]["ch05.concat_seed0"], groups)
    low, high = probe["band"]
    assert high - low < 0.6 and high < 0.99  # the live value could still fail it: a solved run (>= 0.99)


def test_bands_are_tight_enough_to_catch_a_regression():
    # each live check must still tell apart the outcomes its chapter contrasts
    band = provenance.live_band
    assert band("ch01.heads1")[1] < band("ch01.heads2")[0]  # two heads beat one on every CPU
    assert band("ch05.average_seed2")[1] < band("ch05.concat_seed0")[0]  # averaging fails, concat solves
    for name in ("ch01.heads1", "ch01.heads2", "ch01.linear_k2_heads1", "ch05.concat_seed0", "ch05.average_seed2"):
        low, high = band(name)
        assert high - low < 0.2, f"{name}: band {low, high} is too wide to catch anything"


def test_band_rule_by_hand():
    # n = 5, mean 0.74, sd 0.0316228; t(0.995, 4 df) = 4.6041 (tables); sqrt(1 + 1/5) = 1.0954451
    rule = provenance.prediction_band([0.70, 0.72, 0.74, 0.76, 0.78], resolution=1 / 4096)
    assert rule["half_width"] == pytest.approx(4.6041 * 0.0316228 * 1.0954451, abs=1e-4)
    assert rule["band"] == [0.5805, 0.8995]
    # no spread: the printed precision (0.01) either way, clipped at 1; a coarser resolution wins
    assert provenance.prediction_band([1.0] * 10, resolution=1 / 4096)["band"] == [0.99, 1.0]
    assert provenance.prediction_band([0.25, 0.25], resolution=0.001)["band"] == [0.24, 0.26]
    assert provenance.prediction_band([0.25, 0.25], resolution=0.05)["band"] == [0.2, 0.3]
    # an outlier widens the interval beyond the range on the other side too, and the range is always held
    rule = provenance.prediction_band([0.1, 0.6, 0.6, 0.6], resolution=0.001)
    assert rule["band"][0] <= 0.1 and rule["band"][1] == 1.0
    with pytest.raises(ValueError, match="at least 2 distinct computations"):
        provenance.prediction_band([0.5], resolution=0.001)
    with pytest.raises(ValueError, match="resolution must be > 0"):
        provenance.prediction_band([0.5, 0.6], resolution=0)


def test_t_quantile():
    # by hand: df 1 is the Cauchy distribution, t = tan(pi level / 2); tables for the others
    assert provenance.t_quantile(0.99, 1) == pytest.approx(math.tan(math.pi * 0.99 / 2), rel=1e-10)
    assert provenance.t_quantile(0.99, 2) == pytest.approx(9.9248, abs=1e-4)
    assert provenance.t_quantile(0.99, 9) == pytest.approx(3.2498, abs=1e-4)
    assert provenance.t_quantile(0.95, 30) == pytest.approx(2.0423, abs=1e-4)
    with pytest.raises(ValueError, match="df must be a positive int"):
        provenance.t_quantile(0.99, 0)
    with pytest.raises(ValueError, match="level must lie strictly between 0 and 1"):
        provenance.t_quantile(1.0, 3)


def test_t_quantile_against_scipy():
    stats = pytest.importorskip("scipy.stats")
    for df in (1, 2, 3, 4, 7, 9, 10, 19, 40):
        for level in (0.9, 0.99, 0.999):
            expected = stats.t.ppf(1 - (1 - level) / 2, df)
            assert provenance.t_quantile(level, df) == pytest.approx(expected, rel=1e-9), (df, level)


def test_errors_name_what_is_missing(tmp_path):
    with pytest.raises(KeyError, match="no measured band for 'ch09.nothing'; known: "):
        provenance.live_band("ch09.nothing")
    with pytest.raises(KeyError, match="no measured band for 'ch09.nothing'; known: "):
        provenance.measurement("ch09.nothing")
    with pytest.raises(FileNotFoundError, match="run `make caches`"):
        provenance.load_portability(tmp_path / "none.json")
    with pytest.raises(FileNotFoundError, match="missing: run `make caches`"):
        provenance.of("no_such_cache.json")
    (provenance.DATA_DIR / "sentence_pairs.json").exists()
    with pytest.raises(ValueError, match="records no provenance"):
        provenance.of("sentence_pairs.json")


def test_in_band():
    low, high = provenance.live_band("ch01.heads2")
    assert provenance.in_band("ch01.heads2", high) and not provenance.in_band("ch01.heads2", low - 0.01)
    assert json.loads((provenance.PORTABILITY_PATH).read_text())["probes"]["ch01.heads2"]["band"] == [low, high]


def test_summarize_counts_each_computation_once():
    """The script's summary: two runs that agree on every probe are one computation (one sample value)."""
    script = measure_script()
    isa = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    runs = [
        {**isa, "OMP_NUM_THREADS": "1"},
        {**isa, "OMP_NUM_THREADS": "2"},
        {"MHA_PERTURB_SEED": "1"},
        {"MHA_PERTURB_SEED": "2"},
    ]
    table = {name: [0.5, 0.5, 0.75, 0.625] for name in script.PROBES}
    data = script.summarize(runs, table)
    assert data["distinct"]["groups"] == [[0, 1], [2], [3]]
    assert (data["distinct"]["computations"], data["distinct"]["emulated_computations"]) == (3, 1)
    probe = data["probes"]["ch01.heads1"]
    assert probe["sample"] == [0.5, 0.75, 0.625] and probe["distinct_values"] == 3
    assert probe["band"] == provenance.prediction_band([0.5, 0.75, 0.625], 1 / 4096)["band"]
