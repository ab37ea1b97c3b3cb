"""Train the head-count experiments' control, and cache it: one head on r = 4 with other learning rates
and a wider readout.

Usage: python scripts/make_ch08_control.py [--fresh]

The grid of ``scripts/make_ch01_cache.py`` trains every head count at one learning rate (0.003) with one
readout (an MLP of 128 hidden units). One head hands that readout a single 32-d mixture of r symbols,
so its failure could be the readout's or the rate's. The control trains one head on the headline task
(r = 4) at every learning rate of ``E.CONTROL_RATES`` and readout width of ``E.CONTROL_WIDTHS``, on
``E.CONTROL_SEEDS`` (the grid's data, initial weights and batch order), once each to
``E.CONTROL_STEPS`` steps, evaluated at every ``E.CONTROL_CHECKPOINTS`` on the way: 18 runs
(34 min on a busy 2-core machine; each narrow run about 45 s on an idle core, the wide ones
longer). What the chapter compares and what counts as solved were fixed before the first run
(``mha.chapters.heads.head_count``'s docstring).

It also measures how one head splits its weight on r = 2 (MLP readout, the grid's seeds and
1,500 steps): the average weight on each offset over every held-out sequence (under 1 min).

Writes ``mha/data/head_count_control.json`` after every run; runs already there are skipped, so an
interrupted build resumes (``--fresh`` starts over).
"""

from __future__ import annotations

import json
import sys
import time

from mha.chapters.heads import head_count as E
from mha.chapters.heads import task
from mha.provenance import provenance

CONFIG_NAMES = ("D_MODEL", "VOCAB_SIZE", "SEQ_LEN", "BATCH_SIZE", "NUM_TRAIN", "NUM_TEST")


def rounded(x, digits: int = 4):
    if isinstance(x, list):
        return [rounded(v, digits) for v in x]
    return round(float(x), digits)


def control_run(lr: float, width: int, seed: int) -> dict:
    r = E.head_count_experiment(
        E.CONTROL_HEADS,
        seed=seed,
        num_relations=E.CONTROL_RELATIONS,
        lr=lr,
        readout_width=width,
        steps=E.CONTROL_STEPS,
        checkpoints=E.CONTROL_CHECKPOINTS,
    )
    curve = [{name: v if name == "steps" else rounded(v) for name, v in point.items()} for point in r["curve"]]
    return {
        "lr": lr,
        "readout_width": width,
        "seed": seed,
        "num_heads": E.CONTROL_HEADS,
        "num_relations": E.CONTROL_RELATIONS,
        "steps": E.CONTROL_STEPS,
        "params": r["params"],
        "curve": curve,
    }


def split_run(seed: int) -> dict:
    r = E.head_count_experiment(1, seed=seed, num_relations=E.SPLIT_RELATIONS, return_model=True)
    profile = E.held_out_profile(r["model"], task.make_task(E.SPLIT_RELATIONS, seed=seed), E.SPLIT_RELATIONS)
    return {
        "seed": seed,
        "num_relations": E.SPLIT_RELATIONS,
        "steps": r["steps"],
        "accuracy": rounded(r["accuracy"]),
        "relation_accuracy": rounded(r["relation_accuracy"]),
        "profile": rounded(profile[0].tolist()),
    }


def main(argv: list[str]) -> int:
    config = {name.lower(): getattr(task, name) for name in CONFIG_NAMES}
    record = provenance(
        "python scripts/make_ch08_control.py",
        **config,
        num_heads=E.CONTROL_HEADS,
        num_relations=E.CONTROL_RELATIONS,
        rates=list(E.CONTROL_RATES),
        readout_widths=list(E.CONTROL_WIDTHS),
        seeds=list(E.CONTROL_SEEDS),
        steps=E.CONTROL_STEPS,
        checkpoints=list(E.CONTROL_CHECKPOINTS),
        split_relations=E.SPLIT_RELATIONS,
        split_seeds=list(E.SPLIT_SEEDS),
        split_steps=task.STEPS,
        training="CPU, one thread, float32 (mha.chapters.heads.task.train_and_evaluate)",
    )
    path = E.CONTROL_PATH
    cache = {"config": config, "runs": [], "splits": []}
    if path.exists() and "--fresh" not in argv:
        old = json.loads(path.read_text())
        if old["config"] == config and old["provenance"]["settings"] == record["settings"]:
            cache = old
    done = {(r["lr"], r["readout_width"], r["seed"]) for r in cache["runs"]}
    todo = [key for key in E.control_runs() if key not in done]
    todo += [("split", seed) for seed in E.SPLIT_SEEDS if seed not in {s["seed"] for s in cache["splits"]}]
    start = time.perf_counter()
    for i, key in enumerate(todo, 1):
        if key[0] == "split":
            cache["splits"].append(split_run(key[1]))
            result = cache["splits"][-1]["accuracy"]
        else:
            cache["runs"].append(control_run(*key))
            result = cache["runs"][-1]["curve"][-1]["accuracy"]
        order = {k: j for j, k in enumerate(E.control_runs())}
        cache["runs"].sort(key=lambda r: order[(r["lr"], r["readout_width"], r["seed"])])
        cache["splits"].sort(key=lambda r: r["seed"])
        cache["provenance"] = record
        path.write_text(json.dumps(cache, separators=(",", ":")) + "\n")
        print(f"[{i}/{len(todo)}] {key}: {result:.4f} ({time.perf_counter() - start:.0f} s)", flush=True)
    print(f"{path}: {len(cache['runs'])} control runs, {len(cache['splits'])} weight splits")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
