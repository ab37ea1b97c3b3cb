"""Time every explorer's update in the book: what a live notebook does when a control moves.

Usage: python -m benchmarks.bench_explorers [--strict] [book/NN_x.ipynb ...]

Runs each chapter's code cells in this process with ``mha.viz.widgets.explorer`` wrapped by a
timer that builds the real explorer, then times its live update for every combination of
control values (a precomputed-frame lookup by default) and, for reference, a fresh render
(matplotlib draw + PNG encode: what a move would cost without the frames). Writes
``benchmarks/results/explorers-<device>.json`` and ``.md``. Target: median under 50 ms; with
``--strict`` the exit status is 1 when an explorer misses it. The record includes the machine's
load average: on a busy machine every frame takes longer.
"""

from __future__ import annotations

import io
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
TARGET_MS = 50.0


def timed_explorer_factory(records, notebook, original):
    """An ``explorer`` that builds the real explorer, then times what a control move costs:
    the live widget's update (``show_values``), and, for reference, a fresh render + encode."""
    import matplotlib.pyplot as plt

    def timed_explorer(render, controls, *, title, caption=None, alt=None, **kwargs):
        ex = original(render, controls, title=title, caption=caption, alt=alt, **kwargs)
        ex.widget  # noqa: B018 (the property builds the widget)
        updates, renders = [], []
        for values in ex.combos:
            start = time.perf_counter()
            ex.show_values(values)
            updates.append((time.perf_counter() - start) * 1e3)
        for values in ex.combos[:5]:
            start = time.perf_counter()
            fig = render(**values)
            fig.savefig(io.BytesIO(), format="png")
            renders.append((time.perf_counter() - start) * 1e3)
            plt.close(fig)
        records.append(
            {
                "notebook": notebook,
                "title": title,
                "frames": len(updates),
                "live": ex.live,
                "median_ms": statistics.median(updates),
                "max_ms": max(updates),
                "render_median_ms": statistics.median(renders),
                "under_target": statistics.median(updates) < TARGET_MS,
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
        "target_ms": TARGET_MS,
        "cpu_count": os.cpu_count(),
        "load_average": load_before,
        "load_average_after": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
    }
    (RESULTS / f"explorers-{device}.json").write_text(
        json.dumps({"environment": meta, "explorers": records}, indent=1) + "\n"
    )
    lines = [
        f"# Explorer update times ({device}, torch {meta['torch']}, {meta['threads']} threads)",
        "",
        f"1-minute load average {meta['load_average']} before, {meta['load_average_after']} after "
        f"({meta['cpu_count']} CPUs). Update: the live widget's response to a control move; render: "
        "a fresh matplotlib render + PNG encode (median of 5), what the update would cost without "
        "precomputed frames.",
        "",
        "| chapter | explorer | frames | update median (ms) | update max (ms) | render median (ms) "
        "| update under 50 ms |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    lines += [
        f"| {r['notebook']} | {r['title']} | {r['frames']} | {r['median_ms']:.2f} | {r['max_ms']:.2f} | "
        f"{r['render_median_ms']:.1f} | {r['under_target']} |"
        for r in records
    ]
    (RESULTS / f"explorers-{device}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    over = [r for r in records if not r["under_target"]]
    print(f"{len(records) - len(over)} of {len(records)} explorers under {TARGET_MS:.0f} ms median")
    return 1 if strict and over else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
