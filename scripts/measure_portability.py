"""Measure how far the chapters' live training runs move on other CPUs, and store the bands.

Usage:
    python scripts/measure_portability.py              # every emulated CPU below, ~5 min on 2 cores
    python scripts/measure_portability.py --quick      # two emulated CPUs (a smoke test)
    python scripts/measure_portability.py --probes     # (internal) run the probes here, print JSON

Each *probe* is one number a chapter or a test computes live by training (chapters 1, 2 and 5).
Each runs in a fresh process

* under every combination in :data:`EMULATIONS`: PyTorch's own kernels (``ATEN_CPU_CAPABILITY``),
  MKL's (``MKL_ENABLE_INSTRUCTIONS``) and oneDNN's (``ONEDNN_MAX_CPU_ISA``) forced to another
  instruction set, with 1 or 2 threads. That is how a machine with another CPU computes (downwards
  only: this machine cannot run instructions it lacks; a GPU runner trains these models on its CPU
  too, see the chapters);
* and, because those emulations reach only a few distinct kernels, with every initial weight
  multiplied by ``1 + eps * z`` (``eps`` = float32's machine epsilon, ``z`` standard normal, one
  draw per :data:`PERTURBATIONS` seed): a last-bit change of exactly the kind another CPU makes,
  which training then amplifies as it would amplify the other CPU's.

The values go to ``mha/data/portability.json`` with

    band = [min - margin, max + margin],  margin = 0.02 + (max - min)

(clipped to the probe's range): the measured spread, plus as much again, plus two points of
accuracy for CPUs we could not emulate. Chapters assert that a live run lands in its band
(``mha.provenance.in_band``); ``tests/test_provenance.py`` checks every band holds every
measured value and stays narrower than the effect the chapter shows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Emulated CPUs: (ATEN_CPU_CAPABILITY, MKL_ENABLE_INSTRUCTIONS, ONEDNN_MAX_CPU_ISA) x threads.
ISAS = [
    ("default", "SSE4_2", "SSE41"),
    ("avx2", "AVX2", "AVX2"),
    ("avx512", "AVX512", "AVX512_CORE"),
    ("default", "AVX512", "AVX2"),
    ("avx512", "SSE4_2", "SSE41"),
    ("avx2", "AVX512", "SSE41"),
]
EMULATIONS = [
    dict(ATEN_CPU_CAPABILITY=a, MKL_ENABLE_INSTRUCTIONS=m, ONEDNN_MAX_CPU_ISA=o, OMP_NUM_THREADS=str(t))
    for a, m, o in ISAS
    for t in (1, 2)
]
#: Seeds of the last-bit perturbation of the initial weights (run on this machine's own kernels).
PERTURBATIONS = list(range(1, 9))
QUICK = [EMULATIONS[0], EMULATIONS[3], {"MHA_PERTURB_SEED": "1"}]


def perturb_initial_weights(seed: int) -> None:
    """Make every model built by ``mha.chapters.task.make_model`` start one last bit away (see above)."""
    import torch

    from mha.chapters import head_count, task

    build = task.make_model
    gen = torch.Generator().manual_seed(seed)

    def make_model(*args, **kwargs):
        model = build(*args, **kwargs)
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(1 + torch.finfo(torch.float32).eps * torch.randn(p.shape, generator=gen))
        return model

    task.make_model = make_model  # chapter 5's merge_experiment (merge_training) calls it through the module
    head_count.make_model = make_model  # chapter 1's experiment imported the name


def probes() -> dict:
    """Every live training number the chapters and tests check (run in this process)."""

    from mha.chapters import head_count as E
    from mha.chapters import merge_training

    if os.environ.get("MHA_PERTURB_SEED"):
        perturb_initial_weights(int(os.environ["MHA_PERTURB_SEED"]))
    out = {}
    for h in (1, 2):  # chapter 1: one head against two, k = 4
        out[f"ch01.heads{h}"] = E.head_count_experiment(h, seed=0, num_relations=4)["accuracy"]
    out["ch01.linear_k2_heads1"] = E.head_count_experiment(1, seed=0, num_relations=2, readout="linear")["accuracy"]
    for strategy, seed in (("concat", 0), ("average", 0), ("average", 2)):  # chapter 5
        out[f"ch05.{strategy}_seed{seed}"] = merge_training.merge_experiment(strategy, seed=seed, num_relations=4)[
            "accuracy"
        ]
    return out


def run_one(env: dict) -> dict:
    full_env = {**os.environ, **env, "TQDM_DISABLE": "1", "MHA_DEVICE": "cpu"}
    done = subprocess.run(
        [sys.executable, __file__, "--probes"], env=full_env, cwd=ROOT, capture_output=True, text=True, check=True
    )
    return {"env": env, "values": json.loads(done.stdout.strip().splitlines()[-1])}


def band(values: list[float]) -> list[float]:
    low, high = min(values), max(values)
    margin = 0.02 + (high - low)
    return [round(max(0.0, low - margin), 4), round(min(1.0, high + margin), 4)]


def main(argv: list[str]) -> int:
    if "--probes" in argv:
        print(json.dumps(probes()))
        return 0
    sys.path.insert(0, str(ROOT))
    from mha.provenance import PORTABILITY_PATH, provenance

    configs = QUICK if "--quick" in argv else EMULATIONS + [{"MHA_PERTURB_SEED": str(s)} for s in PERTURBATIONS]
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover
        tqdm = None
    bar = tqdm(total=len(configs), desc="emulated CPUs and perturbations") if tqdm else None
    results = []
    with ThreadPoolExecutor(max_workers=2) as pool:  # one training thread per process: two at once
        for result in pool.map(run_one, configs):
            results.append(result)
            if bar:
                bar.update()
            else:
                print(".", end="", flush=True)
    if bar:
        bar.close()
    names = list(results[0]["values"])
    table = {name: [r["values"][name] for r in results] for name in names}
    data = {
        "about": "Live training probes of chapters 1, 2 and 5 under emulated CPUs and last-bit "
        "perturbations of the initial weights; band = [min - margin, max + margin], "
        "margin = 0.02 + (max - min).",
        "provenance": provenance("python scripts/measure_portability.py", runs=configs),
        "probes": {
            name: {
                "values": [round(v, 6) for v in vals],
                "min": round(min(vals), 6),
                "max": round(max(vals), 6),
                "band": band(vals),
            }
            for name, vals in table.items()
        },
    }
    PORTABILITY_PATH.write_text(json.dumps(data, indent=1) + "\n")
    for name, probe in data["probes"].items():
        print(f"{name:32s} min {probe['min']:.4f} max {probe['max']:.4f} band {probe['band']}")
    print(f"wrote {PORTABILITY_PATH.relative_to(ROOT)} ({len(configs)} runs of every probe)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
