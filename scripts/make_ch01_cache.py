"""Train the single-head-limits chapter's grid of models (relations r x heads h x seeds x readouts) and its learning
curves, and cache the results.

Usage: python scripts/make_ch01_cache.py [--fresh] [--only grid|curves] [--readout mlp|linear]
       [--reverse] [--out FILE] [--merge FILE]

The grid: 80 runs of 1,500 Adam steps on one CPU thread (about 4 s each on an idle core, 5 min).
The curves: 35 runs (:data:`mha.chapters.heads.head_count.CURVE_SETTINGS` x 5 seeds), each trained once
to its largest budget (6,000 to 24,000 steps) and evaluated at every budget on the way (about
22 min). The file is rewritten after every run and runs already in it are skipped, so an
interrupted build resumes; ``--fresh`` starts over (do that after changing anything in
``mha/chapters/heads/task.py`` or ``mha/chapters/heads/head_count.py``).
To use two cores: run ``--only curves --out /tmp/curves.json`` beside ``--only grid``, then
``--merge /tmp/curves.json`` (adds that file's runs and finishes whatever is missing).

Writes ``mha/data/head_count_grid.json``: the held-out accuracy of every grid run; for the
chapter's main setting (r = 4, MLP readout), every head's attention map on the first held-out
sequence, which the chapter's explorer shows; and every curve (training and held-out accuracy at
each budget). Also writes ``mha/data/relation_model_h2_seed0.pt``,
the trained weights that ``mha.chapters.heads.head_count.trained_model()`` loads. The chapter re-runs two
entries live and the tests re-run one; both check them against the bands of
``mha/data/portability.json`` (``scripts/measure_portability.py``).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

from mha.chapters.heads import head_count as E
from mha.chapters.heads import task
from mha.provenance import provenance

CONFIG_NAMES = ("D_MODEL", "VOCAB_SIZE", "SEQ_LEN", "STEPS", "BATCH_SIZE", "LEARNING_RATE", "NUM_TRAIN", "NUM_TEST")


def round_nested(x, digits):
    if isinstance(x, list):
        return [round_nested(v, digits) for v in x]
    return round(float(x), digits)


def grid_key(r: dict) -> tuple:
    return (r["readout"], r["num_relations"], r["num_heads"], r["seed"])


def curve_key(r: dict) -> tuple:
    return (r["readout"], r["num_relations"], r["num_heads"], r["seed"], r["steps"])


def write(path: Path, cache: dict) -> None:
    order = {key: i for i, key in enumerate(E.grid_runs())}
    for kind in ("runs", "maps"):
        cache[kind].sort(key=lambda r: order.get(grid_key(r), -1))
    curve_order = {key: i for i, key in enumerate(E.curve_runs())}
    cache["curves"].sort(key=lambda r: curve_order.get(curve_key(r), -1))
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(cache, separators=(",", ":")) + "\n")


def progress(total: int):
    """A tqdm bar (None without tqdm, or with TQDM_DISABLE set: then one line per run)."""
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover
        return None
    return tqdm(total=total, desc="head-count grid and curves", unit="run")


def train_curve(cache: dict, key: tuple) -> None:
    """Train one learning-curve run to its largest budget and append it to the cache."""
    readout, k, h, seed, steps = key
    checkpoints = [s for s in E.CURVE_STEPS if s <= steps]
    r = E.head_count_experiment(h, seed=seed, num_relations=k, readout=readout, steps=steps, checkpoints=checkpoints)
    curve = [{name: round_nested(v, 4) if name != "steps" else v for name, v in p.items()} for p in r["curve"]]
    cache["curves"].append(
        {"readout": readout, "num_relations": k, "num_heads": h, "seed": seed, "steps": steps, "curve": curve}
    )


def report(bar, i: int, total: int, key: tuple, accuracy: float, start: float) -> None:
    label = f"{key[0]} r={key[1]} h={key[2]} seed={key[3]}" + (f" {key[4]:,} steps" if len(key) == 5 else "")
    if bar is None:
        print(f"[{i}/{total}] {label}: accuracy {accuracy:.4f} ({time.perf_counter() - start:.0f} s)", flush=True)
    else:
        bar.set_postfix_str(f"{label}: {accuracy:.4f}")
        bar.update()


def option(argv, name):
    return argv[argv.index(name) + 1] if name in argv else None


def main(argv: list[str]) -> int:
    config = {name.lower(): getattr(task, name) for name in CONFIG_NAMES}
    path = Path(option(argv, "--out") or E.CACHE_PATH)
    cache = {"config": config, "runs": [], "maps": [], "curves": []}
    record = provenance(
        "python scripts/make_ch01_cache.py",
        **config,
        grid_relations=list(E.GRID_RELATIONS),
        grid_heads=list(E.GRID_HEADS),
        grid_seeds={k: list(v) for k, v in E.GRID_SEEDS.items()},
        curve_settings=[[r, k, h, steps] for (r, k, h), steps in E.CURVE_SETTINGS.items()],
        curve_seeds=list(E.CURVE_SEEDS),
        curve_steps=list(E.CURVE_STEPS),
        training="CPU, one thread, float32 (mha.chapters.heads.task.train_and_evaluate)",
    )
    if path.exists() and "--fresh" not in argv:
        old = json.loads(path.read_text())
        if old["config"] == config:
            cache = old
            cache.setdefault("curves", [])
    done = {grid_key(r) for r in cache["runs"]}
    curves_done = {curve_key(r) for r in cache["curves"]}
    if option(argv, "--merge"):
        other = json.loads(Path(option(argv, "--merge")).read_text())
        if other["config"] != config:
            raise SystemExit(f"{option(argv, '--merge')} was made with another configuration")
        for kind in ("runs", "maps"):
            for entry in other[kind]:
                if grid_key(entry) not in done:
                    cache[kind].append(entry)
        for entry in other.get("curves", []):
            if curve_key(entry) not in curves_done:
                cache["curves"].append(entry)
        done |= {grid_key(r) for r in cache["runs"]}
        curves_done |= {curve_key(r) for r in cache["curves"]}
    readout_only, part = option(argv, "--readout"), option(argv, "--only")
    todo = [] if part == "curves" else [key for key in E.grid_runs() if key not in done]
    todo += [] if part == "grid" else [key for key in E.curve_runs() if key not in curves_done]
    todo = [key for key in todo if readout_only in (None, key[0])]
    if "--reverse" in argv:  # a second worker can start from the other end of the list
        todo.reverse()
    start = time.perf_counter()
    bar = progress(len(todo))
    for i, key in enumerate(todo, 1):
        if len(key) == 5:  # a learning curve
            train_curve(cache, key)
            cache["provenance"] = record
            write(path, cache)
            report(bar, i, len(todo), key, cache["curves"][-1]["curve"][-1]["accuracy"], start)
            continue
        readout, k, h, seed = key
        keep_model = (h, seed, k, readout) == E.CACHED_MODEL and path == E.CACHE_PATH
        r = E.head_count_experiment(h, seed=seed, num_relations=k, readout=readout, return_model=keep_model)
        if keep_model:
            torch.save(r["model"].state_dict(), E.MODEL_PATH)
        cache["runs"].append(
            {
                "readout": readout,
                "num_relations": k,
                "num_heads": h,
                "seed": seed,
                "accuracy": round(r["accuracy"], 4),
                "relation_accuracy": round_nested(r["relation_accuracy"], 4),
                "train_accuracy": round(r["train_accuracy"], 4),
                "params": r["params"],
                "attention_params": r["attention_params"],
            }
        )
        if readout == "mlp" and k == E.DEFAULT_RELATIONS:
            cache["maps"].append(
                {
                    "num_heads": h,
                    "seed": seed,
                    "num_relations": k,
                    "readout": readout,
                    "tokens": r["example_tokens"].tolist(),
                    "weights": round_nested(r["example_weights"].tolist(), 3),
                }
            )
        cache["provenance"] = record
        write(path, cache)
        report(bar, i, len(todo), key, r["accuracy"], start)
    if bar is not None:
        bar.close()
    cache.setdefault("provenance", record)
    write(path, cache)  # sorted, and written even when nothing was left to train
    if path != E.CACHE_PATH:
        print(f"{path}: {len(cache['runs'])} runs, {len(cache['curves'])} curves")
        return 0
    if not E.MODEL_PATH.exists() or "--fresh" in argv:
        num_heads, seed, k, readout = E.CACHED_MODEL
        r = E.head_count_experiment(num_heads, seed=seed, num_relations=k, readout=readout, return_model=True)
        torch.save(r["model"].state_dict(), E.MODEL_PATH)
        print(f"wrote {E.MODEL_PATH} ({E.MODEL_PATH.stat().st_size / 1024:.0f} KiB)")
    print(f"{path}: {len(cache['runs'])} runs, {len(cache['curves'])} curves, {path.stat().st_size / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
