"""Train chapter 1's grid of models (relations k x heads h x seeds x readouts) and cache the results.

Usage: python scripts/make_ch01_cache.py [--fresh] [--readout mlp|linear] [--reverse] [--out FILE]
       [--merge FILE]

About 80 runs of 1,500 Adam steps on one CPU thread (a few seconds each on an idle core). The
file is rewritten after every run and runs already in it are skipped, so an interrupted build
resumes; ``--fresh`` starts over (do that after changing anything in ``mha/chapters/task.py`` or
``mha/chapters/head_count.py``).
To use two cores: run ``--readout linear --out /tmp/linear.json`` beside ``--readout mlp``, then
``--merge /tmp/linear.json`` (adds that file's runs and finishes whatever is missing).

Writes ``mha/data/head_count_grid.json``: the held-out accuracy of every run and, for the
chapter's main setting (k = 4, MLP readout), every head's attention map on the first held-out
sequence, which the chapter's explorer shows. Also writes ``mha/data/relation_model_h2_seed0.pt``,
the trained weights that ``mha.chapters.head_count.trained_model()`` loads. The chapter re-runs two
entries live and the tests re-run one; both check them against the bands of
``mha/data/portability.json`` (``scripts/measure_portability.py``).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

from mha.chapters import head_count as E
from mha.chapters import task
from mha.provenance import provenance

CONFIG_NAMES = ("D_MODEL", "VOCAB_SIZE", "SEQ_LEN", "STEPS", "BATCH_SIZE", "LEARNING_RATE", "NUM_TRAIN", "NUM_TEST")


def round_nested(x, digits):
    if isinstance(x, list):
        return [round_nested(v, digits) for v in x]
    return round(float(x), digits)


def write(path: Path, cache: dict) -> None:
    order = {key: i for i, key in enumerate(E.grid_runs())}
    for kind in ("runs", "maps"):
        cache[kind].sort(key=lambda r: order.get((r["readout"], r["num_relations"], r["num_heads"], r["seed"]), -1))
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(cache, separators=(",", ":")) + "\n")


def progress(total: int):
    """A tqdm bar (None without tqdm, or with TQDM_DISABLE set: then one line per run)."""
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover
        return None
    return tqdm(total=total, desc="chapter 1 grid", unit="run")


def option(argv, name):
    return argv[argv.index(name) + 1] if name in argv else None


def main(argv: list[str]) -> int:
    config = {name.lower(): getattr(task, name) for name in CONFIG_NAMES}
    path = Path(option(argv, "--out") or E.CACHE_PATH)
    cache = {"config": config, "runs": [], "maps": []}
    record = provenance(
        "python scripts/make_ch01_cache.py",
        **config,
        grid_relations=list(E.GRID_RELATIONS),
        grid_heads=list(E.GRID_HEADS),
        grid_seeds={k: list(v) for k, v in E.GRID_SEEDS.items()},
        training="CPU, one thread, float32 (mha.chapters.task.train_and_evaluate)",
    )
    if path.exists() and "--fresh" not in argv:
        old = json.loads(path.read_text())
        if old["config"] == config:
            cache = old
    done = {(r["readout"], r["num_relations"], r["num_heads"], r["seed"]) for r in cache["runs"]}
    if option(argv, "--merge"):
        other = json.loads(Path(option(argv, "--merge")).read_text())
        if other["config"] != config:
            raise SystemExit(f"{option(argv, '--merge')} was made with another configuration")
        for kind in ("runs", "maps"):
            for entry in other[kind]:
                key = (entry["readout"], entry["num_relations"], entry["num_heads"], entry["seed"])
                if key not in done:
                    cache[kind].append(entry)
        done |= {(r["readout"], r["num_relations"], r["num_heads"], r["seed"]) for r in cache["runs"]}
    only = option(argv, "--readout")
    todo = [key for key in E.grid_runs() if key not in done and only in (None, key[0])]
    if "--reverse" in argv:  # a second worker can start from the other end of the list
        todo.reverse()
    start = time.perf_counter()
    bar = progress(len(todo))
    for i, (readout, k, h, seed) in enumerate(todo, 1):
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
        message = (
            f"[{i}/{len(todo)}] {readout} k={k} h={h} seed={seed}: accuracy {r['accuracy']:.4f} "
            f"({time.perf_counter() - start:.0f} s)"
        )
        if bar is None:
            print(message, flush=True)
        else:
            bar.set_postfix_str(f"{readout} k={k} h={h} seed={seed}: {r['accuracy']:.4f}")
            bar.update()
    if bar is not None:
        bar.close()
    cache.setdefault("provenance", record)
    write(path, cache)  # sorted, and written even when nothing was left to train
    if path != E.CACHE_PATH:
        print(f"{path}: {len(cache['runs'])} runs")
        return 0
    if not E.MODEL_PATH.exists() or "--fresh" in argv:
        num_heads, seed, k, readout = E.CACHED_MODEL
        r = E.head_count_experiment(num_heads, seed=seed, num_relations=k, readout=readout, return_model=True)
        torch.save(r["model"].state_dict(), E.MODEL_PATH)
        print(f"wrote {E.MODEL_PATH} ({E.MODEL_PATH.stat().st_size / 1024:.0f} KiB)")
    print(f"{path}: {len(cache['runs'])} runs, {E.CACHE_PATH.stat().st_size / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
