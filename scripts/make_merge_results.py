"""Train every (task, merge, seed) of chapter 5's sweep and cache the results.

Usage: python scripts/make_merge_results.py     (40 runs of a few seconds each on one CPU thread)

Writes ``mha/data/merge_results.json``; chapter 5 reads it and re-runs one run live to check it.
"""

from __future__ import annotations

import json
import sys

import torch

from mha.chapters import merging
from mha.chapters import task as experiments  # chapter 1's task and training settings
from mha.provenance import provenance


def main() -> int:
    sweep = merging.SWEEP
    total = len(sweep["num_relations"]) * len(merging.MERGES) * len(sweep["seeds"])
    try:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, desc="chapter 5 merge sweep", unit="run")
    except ImportError:  # pragma: no cover
        bar = None

    def log(r):
        message = f"k={r['num_relations']} {r['strategy']:8s} seed={r['seed']} accuracy={r['accuracy']:.4f}"
        if bar is None:
            print(message, flush=True)
        else:
            bar.set_postfix_str(message)
            bar.update()

    runs = merging.run_merge_sweep(log=log)
    if bar is not None:
        bar.close()
    settings = sweep | {"steps": experiments.STEPS, "d_model": experiments.D_MODEL}
    data = {
        "about": "chapter 5 merge sweep; made by scripts/make_merge_results.py",
        "torch": torch.__version__,
        "sweep": settings,
        "provenance": provenance(
            "python scripts/make_merge_results.py",
            **settings,
            training="CPU, one thread, float32 (mha.chapters.task.train_and_evaluate)",
        ),
        "runs": runs,
    }
    merging.RESULTS_PATH.parent.mkdir(exist_ok=True)
    with open(merging.RESULTS_PATH, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    print(f"wrote {merging.RESULTS_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
