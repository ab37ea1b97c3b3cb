"""Time every explorer's live update: what a running notebook does when a control moves.

Usage: python -m benchmarks.bench_explorers [--strict] [book/NN_x.ipynb ...]

Runs each chapter's code cells in this process, with explorers live (``MHA_EXPLORERS=live``, as
in a kernel that ``make lab`` started: nothing precomputed) and ``mha.viz.widgets.explorer``
wrapped by a timer. For each explorer it builds the live widget, then moves one control at a
time through its live values, from the values the explorer opens on: a slider of a
:class:`~mha.viz.controls.FloatRange`/:class:`~mha.viz.controls.IntRange` through 21 positions
across its range (grid points and the values between them), a list or :class:`Choice` through its
values, a :class:`Text` box through its grid's texts. Each update is timed kernel-side, from the
change to the widget holding the new PNG: ``render`` (a new figure), or a
:class:`~mha.viz.live.LiveFigure`'s ``update`` of the one figure, its draw and the encoding. The
first figure (the cell's own cost) is reported apart.

Writes ``benchmarks/results/explorers-<device>.json`` and ``.md``. Target (a slider that feels instant): median
under 50 ms and worst under 150 ms, unless the render declares its own ``budget_ms`` (the pretrained-heads
chapter's model run: 300 ms); with ``--strict`` the exit status is 1 when an explorer misses it. The record
includes the machine's load average: on a busy machine every update takes longer.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
#: Positions of a slider that the benchmark visits.
SLIDER_POSITIONS = 21
#: What the benchmark types into a text box of this name, after the grid's texts: the
#: pretrained-heads chapter's sentence of 20 tokens ([CLS] and [SEP] included), the target of its 300 ms budget.
TEXT_SAMPLES = {
    "sentence": ["The old fisherman told his grandson a long story about the storm that sank the boat last winter"],
    "tokens": ["the cat chased a mouse"],
}


def live_values(spec, name: str = "") -> list:
    """The values a reader reaches with one control: across a range, or each option / text."""
    from mha.viz.controls import FloatRange, Text

    if isinstance(spec, FloatRange):
        if spec.log:
            lo, hi = math.log(spec.lo), math.log(spec.hi)
            raw = [math.exp(lo + (hi - lo) * k / (SLIDER_POSITIONS - 1)) for k in range(SLIDER_POSITIONS)]
        else:
            raw = [spec.lo + (spec.hi - spec.lo) * k / (SLIDER_POSITIONS - 1) for k in range(SLIDER_POSITIONS)]
        return list(dict.fromkeys(spec.clean(v) for v in raw))
    if isinstance(spec, Text):
        return list(dict.fromkeys([spec.value, *spec.grid, *TEXT_SAMPLES.get(name, [])]))
    return list(spec.grid)


def time_updates(ex) -> tuple[float, float, list[float]]:
    """The first figure's time, the time to draw the other layouts ahead (what a live kernel does
    while idle after the cell runs), then the time of each update as each control moves in turn."""
    start = time.perf_counter()
    view = ex.view  # builds the widget and draws the first figure
    first = (time.perf_counter() - start) * 1e3
    start = time.perf_counter()
    view.warm_all()
    ahead = (time.perf_counter() - start) * 1e3
    current = view.values()
    for name, spec in ex.specs.items():
        for value in live_values(spec, name):
            if value == current[name]:
                continue
            current = {**current, name: value}
            view.show(current)
            if view.status.value:
                raise RuntimeError(f"explorer {ex.title!r}: {current} failed: {view.status.value}")
    return first, ahead, view.timings[1:]


def timed_explorer_factory(records, notebook, original):
    """An ``explorer`` that builds the real (live) explorer, then times its updates."""
    from mha.viz.live import budget_ms

    def timed_explorer(render, controls, *, title, **kwargs):
        ex = original(render, controls, title=title, **kwargs)
        first, ahead, updates = time_updates(ex)
        median_budget, worst_budget = budget_ms(render)
        median, worst = statistics.median(updates), max(updates)
        if not ex.view.live:
            path = "precomputed frames"
        elif ex.in_place:
            path = "in place, blit" if ex.painter.moving is not None else "in place"
        else:
            path = "new figure"
        records.append(
            {
                "notebook": notebook,
                "title": title,
                "frames": len(ex.combos),  # the book's grid
                "path": path,
                "updates": len(updates),
                "first_ms": first,
                "layouts_ms": ahead,
                "layouts": len(ex.painter.figures) if ex.painter is not None else 0,
                "median_ms": median,
                "max_ms": worst,
                "budget_ms": [median_budget, worst_budget],
                "within_budget": median < median_budget and worst < worst_budget,
            }
        )
        return ex

    return timed_explorer


def run_notebook(path: Path, records: list) -> None:
    import nbformat
    from IPython.core.interactiveshell import InteractiveShell

    import mha.viz.widgets

    nb = nbformat.read(path, as_version=4)
    original = mha.viz.widgets.explorer
    mha.viz.widgets.explorer = timed_explorer_factory(records, path.name, original)
    saved_mode = os.environ.get("MHA_EXPLORERS")
    os.environ["MHA_EXPLORERS"] = "live"
    shell = InteractiveShell.instance()
    cwd = os.getcwd()
    os.chdir(path.parent)
    try:
        for cell in nb.cells:
            if cell.cell_type == "code":
                result = shell.run_cell(cell.source, silent=True)
                if not result.success:
                    raise RuntimeError(
                        f"{path.name}: a cell failed: {result.error_in_exec or result.error_before_exec}"
                    )
    finally:
        mha.viz.widgets.explorer = original
        if saved_mode is None:
            os.environ.pop("MHA_EXPLORERS", None)
        else:
            os.environ["MHA_EXPLORERS"] = saved_mode
        os.chdir(cwd)
        shell.reset()
        import matplotlib.pyplot as plt

        plt.close("all")


def main(argv):
    os.environ.setdefault("MPLBACKEND", "Agg")
    os.environ.setdefault("MHA_DEVICE", "cpu")
    import torch

    strict = "--strict" in argv
    paths = [Path(p).resolve() for p in argv if p != "--strict"] or sorted((ROOT / "book").glob("*.ipynb"))
    load_before = round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None
    records = []
    for path in paths:
        run_notebook(path, records)
    RESULTS.mkdir(parents=True, exist_ok=True)
    device = os.environ["MHA_DEVICE"].split(":")[0]
    meta = {
        "device": device,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "target_ms": [50.0, 150.0],
        "cpu_count": os.cpu_count(),
        "load_average": load_before,
        "load_average_after": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
    }
    (RESULTS / f"explorers-{device}.json").write_text(
        json.dumps({"environment": meta, "explorers": records}, indent=1) + "\n"
    )
    lines = [
        f"# Live explorer update times ({device}, torch {meta['torch']}, {meta['threads']} threads)",
        "",
        f"1-minute load average {meta['load_average']} before, {meta['load_average_after']} after "
        f"({meta['cpu_count']} CPUs). An update is what the kernel does when a control moves in a live "
        "notebook, from the change to the widget holding the new figure; each control is moved in turn "
        "through its live values (a slider through 21 positions). Path: *new figure*, the render "
        "function draws a new figure (the fallback); *in place*, a LiveFigure updates one figure; "
        "*blit*, only the artists that change are redrawn. First: the first figure, drawn when the "
        "cell runs. Layouts: the figures kept, one per layout (say, per number of heads); those "
        "beyond the first are drawn ahead while the kernel is idle after the cell runs (ahead, "
        "in ms), so that a move to another layout is an update in place too. Budget: median / worst "
        "(50 / 150 ms, a slider that feels instant; the pretrained-heads chapter's model run 300 / 300).",
        "",
        "| chapter | explorer | path | updates | first (ms) | layouts (ahead, ms) | median (ms) | worst (ms) "
        "| budget (ms) | within |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    lines += [
        f"| {r['notebook']} | {r['title']} | {r['path']} | {r['updates']} | {r['first_ms']:.0f} | "
        f"{r['layouts']} ({r['layouts_ms']:.0f}) | "
        f"{r['median_ms']:.1f} | {r['max_ms']:.1f} | {r['budget_ms'][0]:.0f} / {r['budget_ms'][1]:.0f} | "
        f"{'yes' if r['within_budget'] else 'no'} |"
        for r in records
    ]
    (RESULTS / f"explorers-{device}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    over = [r for r in records if not r["within_budget"]]
    print(f"{len(records) - len(over)} of {len(records)} explorers within their update budget")
    return 1 if strict and over else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
