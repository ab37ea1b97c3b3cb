"""Cache provenance and the measured bands that chapters check live training runs against."""

import importlib.util
import json
from pathlib import Path

import pytest

from mha import provenance

ROOT = Path(__file__).resolve().parents[1]
#: Every cache of trained or long-accumulated numbers, and the script that rebuilds it.
CACHES = {
    "head_count_grid.json": "python scripts/make_ch01_cache.py",
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


def test_bands_hold_every_measured_value_and_follow_the_rule():
    data = provenance.load_portability()
    runs = data["provenance"]["settings"]["runs"]
    emulations = [r for r in runs if "ATEN_CPU_CAPABILITY" in r]
    assert {e["OMP_NUM_THREADS"] for e in emulations} == {"1", "2"}
    assert len({e["ATEN_CPU_CAPABILITY"] for e in emulations}) >= 3
    assert len({e["MKL_ENABLE_INSTRUCTIONS"] for e in emulations}) >= 3
    assert len([r for r in runs if "MHA_PERTURB_SEED" in r]) >= 5
    band = measure_script().band
    for name, probe in data["probes"].items():
        values = probe["values"]
        assert len(values) == len(runs), name
        low, high = probe["band"]
        assert low <= min(values) and max(values) <= high, name
        assert probe["band"] == band(values), name
        assert provenance.live_band(name) == (low, high)


def test_bands_are_tight_enough_to_catch_a_regression():
    # each live check must still tell apart the outcomes its chapter contrasts
    band = provenance.live_band
    assert band("ch01.heads1")[1] < band("ch01.heads2")[0]  # two heads beat one on every CPU
    assert band("ch05.average_seed2")[1] < band("ch05.concat_seed0")[0]  # averaging fails, concat solves
    for name in ("ch01.heads1", "ch01.heads2", "ch01.linear_k2_heads1", "ch05.concat_seed0", "ch05.average_seed2"):
        low, high = band(name)
        assert high - low < 0.2, f"{name}: band {low, high} is too wide to catch anything"


def test_band_rule_by_hand():
    band = measure_script().band
    assert band([0.5, 0.6]) == [0.38, 0.72]  # margin 0.02 + 0.1
    assert band([1.0, 1.0]) == [0.98, 1.0]  # clipped at 1
    assert band([0.0]) == [0.0, 0.02]


def test_errors_name_what_is_missing(tmp_path):
    with pytest.raises(KeyError, match="no measured band for 'ch09.nothing'; known: "):
        provenance.live_band("ch09.nothing")
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
