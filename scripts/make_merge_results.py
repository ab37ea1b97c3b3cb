"""Train every run of the merging experiments' sweeps and cache the results with their learning curves.

Usage: python scripts/make_merge_results.py [--fresh]

The sweeps are :data:`mha.chapters.merging.merge_training.SWEEPS`: the four-relation task with every
strategy (the four merges and the rank-d_k concatenation) on 5 seeds to 12,000 steps; the same at
two other learning rates on 3 seeds to 6,000 steps; the two-relation task on 5 seeds to 1,500
steps. 80 runs on one CPU thread, each trained once to its largest budget and evaluated at every
budget on the way (about 17 min on an idle core). The file is rewritten after every run and runs
already in it are skipped, so an interrupted build resumes; ``--fresh`` starts over (do that after
changing ``mha/chapters/heads/task.py``, ``merging.py`` or ``merge_training.py``).

Writes ``mha/data/merge_results.json``; the merging experiments read it and re-runs two runs live, checked
against the bands of ``mha/data/portability.json`` (``scripts/measure_portability.py``).
"""

from __future__ import annotations

import json
import sys
import time

from mha.chapters.heads import task as relation_task
from mha.chapters.merging import merge_training as M
from mha.provenance import provenance


def rounded(point: dict) -> dict:
    def r(v):
        return [round(float(x), 4) for x in v] if isinstance(v, list) else round(float(v), 4)

    return {key: (value if key == "steps" else r(value)) for key, value in point.items()}


def main(argv: list[str]) -> int:
    settings = {
        "sweeps": {
            name: {k: list(v) if isinstance(v, tuple) else v for k, v in s.items()} for name, s in M.SWEEPS.items()
        },
        "strategies": list(M.STRATEGIES),
        "checkpoints": list(M.CHECKPOINTS),
        "num_heads": M.NUM_HEADS,
        "readout": M.READOUT,
        "d_model": relation_task.D_MODEL,
        "batch_size": relation_task.BATCH_SIZE,
        "training": "CPU, one thread, float32 (mha.chapters.heads.task.train_and_evaluate)",
    }
    data = {
        "about": "the merging experiments' merge sweeps; made by scripts/make_merge_results.py",
        "settings": settings,
        "runs": [],
    }
    path = M.RESULTS_PATH
    if path.exists() and "--fresh" not in argv:
        old = json.loads(path.read_text())
        if old.get("settings") == settings:
            data = old
    done = {M.run_key(r) for r in data["runs"]}
    todo = [run for run in M.sweep_runs() if M.run_key(run) not in done]
    try:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(todo), desc="merging-experiments sweeps", unit="run")
    except ImportError:  # pragma: no cover
        bar = None
    start = time.perf_counter()
    record = provenance("python scripts/make_merge_results.py", **settings)
    for i, run in enumerate(todo, 1):
        checkpoints = [s for s in M.CHECKPOINTS if s <= run["steps"]]
        r = M.merge_experiment(
            run["strategy"],
            seed=run["seed"],
            num_relations=run["num_relations"],
            steps=run["steps"],
            lr=run["lr"],
            checkpoints=checkpoints,
        )
        entry = {"sweep": run["sweep"], **{k: v for k, v in r.items() if k != "curve"}}
        entry.update(
            accuracy=round(r["accuracy"], 4),
            train_accuracy=round(r["train_accuracy"], 4),
            relation_accuracy=[round(a, 4) for a in r["relation_accuracy"]],
            curve=[rounded(p) for p in r["curve"]],
        )
        data["runs"].append(entry)
        order = {M.run_key(x): j for j, x in enumerate(M.sweep_runs())}
        data["runs"].sort(key=lambda x: order.get(M.run_key(x), -1))
        data["provenance"] = record
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(data, separators=(",", ":")) + "\n")
        label = f"{run['sweep']} lr={run['lr']:g} {run['strategy']} seed={run['seed']}: {r['accuracy']:.4f}"
        if bar is None:
            print(f"[{i}/{len(todo)}] {label} ({time.perf_counter() - start:.0f} s)", flush=True)
        else:
            bar.set_postfix_str(label)
            bar.update()
    if bar is not None:
        bar.close()
    print(f"wrote {path}: {len(data['runs'])} runs ({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
