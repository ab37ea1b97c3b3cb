"""What keeps a phone's main thread free while a chapter arrives (_ext/mha_speed.py), and the trace
arithmetic behind the page-speed table (scripts/measure_pages.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "_ext"))
sys.path.insert(0, str(ROOT / "scripts"))

import measure_pages  # noqa: E402
import mha_speed  # noqa: E402


def _theme_script() -> str:
    import pydata_sphinx_theme

    folder = Path(pydata_sphinx_theme.__file__).parent / "theme" / "pydata_sphinx_theme" / "static" / "scripts"
    return (folder / "pydata-sphinx-theme.js").read_text(encoding="utf-8")


def test_the_themes_load_time_scan_is_found_once_and_emptied():
    script = _theme_script()
    patched = mha_speed.without_theme_scan(script)
    assert len(mha_speed.THEME_SCAN.findall(script)) == 1
    assert mha_speed.THEME_SCAN.search(patched) is None
    assert patched.count('":not(*)"') == script.count('":not(*)"') + 1
    # everything else in the theme's script is left as it was
    assert len(patched) == len(script) - len(mha_speed.THEME_SCAN.search(script).group(0)) + len('":not(*)"')
    assert mha_speed.without_theme_scan(patched) == patched  # a second build leaves it alone


def test_a_theme_without_the_scan_stops_the_build():
    with pytest.raises(RuntimeError, match="pydata-sphinx-theme changed"):
        mha_speed.without_theme_scan("function I(){document.querySelectorAll('pre')}")


def _task(ts_ms: float, dur_ms: float, tid: int = 1) -> dict:
    return {"name": "RunTask", "ph": "X", "pid": 7, "tid": tid, "ts": ts_ms * 1000, "dur": dur_ms * 1000}


def test_blocking_time_counts_what_each_task_runs_over_50_ms_after_the_first_paint():
    paint = {"name": "firstContentfulPaint", "ph": "I", "pid": 7, "tid": 1, "ts": 1000 * 1000}
    events = [
        paint,
        _task(100, 400),  # before the paint: not counted
        _task(900, 180),  # straddles it: 80 ms after, 30 over 50
        _task(1500, 120),  # 70 over
        _task(1700, 50),  # exactly 50: 0
        _task(1800, 300, tid=2),  # another thread: not counted
    ]
    blocking = measure_pages.blocking_from_trace(events)
    assert blocking["tbt"] == 30 + 70
    assert blocking["tasks"] == [80, 120]


def test_a_trace_without_a_paint_blocks_nothing():
    assert measure_pages.blocking_from_trace([_task(0, 500)]) == {"tbt": 0, "tasks": []}
