"""Measure how far the chapters' live training runs move on other CPUs, and store the bands.

Usage:
    python scripts/measure_portability.py              # every emulated CPU below (about 10 min on 2 idle cores)
    python scripts/measure_portability.py --quick      # two emulated CPUs (a smoke test)
    python scripts/measure_portability.py --rebands    # recompute the bands from the stored values (no training)
    python scripts/measure_portability.py --probes     # (internal) run the probes here, print JSON

Each *probe* is one number a chapter or a test computes live by training (the head-count and the
merging experiments, and the tests; the probes' name prefixes are those chapters' former file names). Each runs in a
fresh process

* under every combination in :data:`EMULATIONS`: PyTorch's own kernels (``ATEN_CPU_CAPABILITY``),
  MKL's (``MKL_ENABLE_INSTRUCTIONS``) and oneDNN's (``ONEDNN_MAX_CPU_ISA``) forced to another
  instruction set, with 1 or 2 threads. That is how a machine with another CPU computes (downwards
  only: this machine cannot run instructions it lacks; a GPU runner trains these models on its CPU
  too, see the chapters). Training pins one thread, so a two-thread run repeats its one-thread run
  bit for bit (it checks that it does), and setups that reach the same kernels repeat each other:
  the stored 12 emulated runs are 2 distinct computations (PyTorch's default kernels and its
  vectorised ones; the MKL and oneDNN settings changed nothing);
* and, because those emulations reach only a few distinct kernels, with every initial weight
  multiplied by ``1 + eps * z`` (``eps`` = float32's machine epsilon, ``z`` standard normal, one
  draw per :data:`PERTURBATIONS` seed), on this machine's own kernels: a last-bit change of exactly
  the kind another CPU makes, which training then amplifies as it would amplify the other CPU's.

The values go to ``mha/data/portability.json``. Runs that agree on every probe count once
(:func:`mha.provenance.distinct_runs`); from one value per distinct computation the band is the
99 % prediction interval of :func:`mha.provenance.prediction_band`, ``mean ± t · sd · sqrt(1 + 1/n)``,
at least one scored position either way, widened to hold every measured value: its width comes from
the measured spread alone. Chapters assert that a live run lands in its band
(``mha.provenance.in_band``); ``tests/book/test_provenance.py`` checks that every band holds every
measured value, is no wider than its spread needs, and stays narrower than the effect the chapter
shows.
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
    """Make every model built by ``mha.chapters.heads.task.make_model`` start one last bit away (see above)."""
    import torch

    from mha.chapters.heads import head_count, task

    build = task.make_model
    gen = torch.Generator().manual_seed(seed)

    def make_model(*args, **kwargs):
        model = build(*args, **kwargs)
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(1 + torch.finfo(torch.float32).eps * torch.randn(p.shape, generator=gen))
        return model

    task.make_model = make_model  # merge_training.merge_experiment calls it through the module
    head_count.make_model = make_model  # the head-count experiment imported the name


#: Every probe: which experiment, with which arguments (always seed 0 unless given, 1,500 steps).
PROBES = {
    "ch01.heads1": ("head_count", dict(num_heads=1, seed=0, num_relations=4)),
    "ch01.heads2": ("head_count", dict(num_heads=2, seed=0, num_relations=4)),
    "ch01.linear_k2_heads1": ("head_count", dict(num_heads=1, seed=0, num_relations=2, readout="linear")),
    "ch05.concat_seed0": ("merge", dict(strategy="concat", seed=0, num_relations=4)),
    "ch05.average_seed0": ("merge", dict(strategy="average", seed=0, num_relations=4)),
    "ch05.average_seed2": ("merge", dict(strategy="average", seed=2, num_relations=4)),
}


def resolution(name: str) -> float:
    """One scored held-out position of probe ``name``: the accuracy's step, 1 / (NUM_TEST · (SEQ_LEN - k))."""
    from mha.chapters.heads import task

    k = PROBES[name][1]["num_relations"]
    return 1.0 / (task.NUM_TEST * (task.SEQ_LEN - k))


def probes() -> dict:
    """Every live training number the chapters and tests check (run in this process)."""

    from mha.chapters.heads import head_count as E
    from mha.chapters.merging import merge_training

    if os.environ.get("MHA_PERTURB_SEED"):
        perturb_initial_weights(int(os.environ["MHA_PERTURB_SEED"]))
    out = {}
    for name, (experiment, kwargs) in PROBES.items():
        if experiment == "head_count":
            kwargs = dict(kwargs)
            out[name] = E.head_count_experiment(kwargs.pop("num_heads"), **kwargs)["accuracy"]
        else:
            kwargs = dict(kwargs)
            out[name] = merge_training.merge_experiment(kwargs.pop("strategy"), **kwargs)["accuracy"]
    return out


def run_one(env: dict) -> dict:
    full_env = {**os.environ, **env, "TQDM_DISABLE": "1", "MHA_DEVICE": "cpu"}
    done = subprocess.run(
        [sys.executable, __file__, "--probes"], env=full_env, cwd=ROOT, capture_output=True, text=True, check=True
    )
    return {"env": env, "values": json.loads(done.stdout.strip().splitlines()[-1])}


ABOUT = (
    "Live training probes of the head-count and the merging experiments (their name prefixes are those "
    "chapters' former file names) under emulated CPUs and last-bit perturbations of the initial weights. "
    "Runs that agree on every probe are one computation (distinct.groups). Per probe: values (one per run), "
    "sample (one per computation), resolution (one scored position), and band = the 99 % normal prediction interval "
    "mean +- t sd sqrt(1 + 1/n) of the sample, at least 0.01 and one resolution either way, widened to hold every "
    "value, clipped to [0, 1], rounded outward to 4 decimals (mha.provenance.prediction_band)."
)


def summarize(runs: list[dict], table: dict) -> dict:
    """The ``distinct`` counts and the ``probes`` entries of ``portability.json`` from the runs'
    settings and the measured values (``table``: probe name -> one value per run)."""
    from mha import provenance

    probes = {name: {"values": [round(v, 6) for v in values]} for name, values in table.items()}
    groups = provenance.distinct_runs(probes)
    data = {"provenance": {"settings": {"runs": runs}}, "probes": probes}
    counts = provenance.measurement(next(iter(probes)), data)
    distinct = {key: counts[key] for key in counts if key not in ("distinct_values", "min", "max")}
    distinct["groups"] = groups
    for name, probe in probes.items():
        values = probe["values"]
        sample = [values[members[0]] for members in groups]
        rule = provenance.prediction_band(sample, resolution(name))
        probe.update(
            sample=sample,
            distinct_values=len(set(values)),
            min=min(values),
            max=max(values),
            resolution=resolution(name),
            mean=round(rule["mean"], 6),
            sd=round(rule["sd"], 6),
            half_width=round(rule["half_width"], 6),
            band=rule["band"],
        )
    return {"distinct": distinct, "probes": probes}


def report(data: dict) -> None:
    distinct = data["distinct"]
    for name, probe in data["probes"].items():
        print(f"{name:24s} min {probe['min']:.4f} max {probe['max']:.4f} sd {probe['sd']:.4f} band {probe['band']}")
    print(
        f"{distinct['runs']} runs of every probe, {distinct['computations']} distinct computations: "
        f"{distinct['emulated']} emulated runs ({distinct['setups']} instruction-set setups x threads "
        f"{distinct['thread_counts']}) give {distinct['emulated_computations']}, "
        f"{distinct['perturbations']} perturbations give {distinct['perturbed_computations']}"
    )


def main(argv: list[str]) -> int:
    if "--probes" in argv:
        print(json.dumps(probes()))
        return 0
    sys.path.insert(0, str(ROOT))
    from mha.provenance import PORTABILITY_PATH, load_portability, provenance

    if "--rebands" in argv:  # the stored measurements, new bands: no training
        stored = load_portability()
        runs = stored["provenance"]["settings"]["runs"]
        data = {"about": ABOUT, "provenance": stored["provenance"]}
        data.update(summarize(runs, {name: probe["values"] for name, probe in stored["probes"].items()}))
        PORTABILITY_PATH.write_text(json.dumps(data, indent=1) + "\n")
        report(data)
        print(f"rewrote the bands of {PORTABILITY_PATH.relative_to(ROOT)} from its stored values")
        return 0

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
    table = {name: [r["values"][name] for r in results] for name in PROBES}
    data = {"about": ABOUT, "provenance": provenance("python scripts/measure_portability.py", runs=configs)}
    data.update(summarize(configs, table))
    PORTABILITY_PATH.write_text(json.dumps(data, indent=1) + "\n")
    report(data)
    print(f"wrote {PORTABILITY_PATH.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
