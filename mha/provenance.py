"""Where a cached result came from, and how far a re-run on other hardware may land from it.

Every file under ``mha/data/`` that holds trained or long-accumulated numbers records a
:func:`provenance` block: the script and settings that made it, and the machine it ran on (torch
version, CPU model, the instruction set PyTorch's kernels used, thread count, the environment
variables that cap those kernels). Chapters show it next to the numbers they read.

Why it matters: a model trained for a few thousand float32 steps ends in a measurably different
place on another CPU (another instruction set changes the last bits of every matrix product, and
training amplifies them) or on a GPU. A cached number is a property of the run that made it; what
a chapter may assert about a re-run is a *band* measured over emulated CPUs and seeds, which
``scripts/measure_portability.py`` records in ``mha/data/portability.json`` and
:func:`live_band` reads.

**Counting what is distinct.** Runs that give the same value on every probe are one computation
(:func:`distinct_runs`): training pins one thread, so an emulated CPU's two-thread run repeats its
one-thread run bit for bit, and instruction-set setups that reach the same kernels repeat each
other. :func:`measurement` counts the runs behind a band that way.

**The band rule** (:func:`prediction_band`). One value per distinct computation is a sample of n
outcomes of the same training on machines that differ in the last bits. A machine not measured is
one more draw; the two-sided :data:`PREDICTION_LEVEL` prediction interval of a normal sample,
``mean ± t · sd · sqrt(1 + 1/n)`` (t the Student quantile with n - 1 degrees of freedom), is where
it lands but for 1 % of machines. The band is that interval, widened to hold every measured value,
never narrower than :data:`MIN_HALF_WIDTH` (0.01, the two decimals a chapter prints a live re-run
at) or one scored position either way, clipped to [0, 1] and rounded outward to 4 decimals. The
floor matters only where every computation gave the same value, so that the spread gives no scale:
emulated CPUs cover only two distinct kernel sets, and a real AVX2 machine measured neither emulated
value (the head-count experiments' one-head probe: 0.7795), so a band of one position would test the emulation, not
portability. Elsewhere the width comes from the measured spread alone.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
from pathlib import Path

import torch

DATA_DIR = Path(__file__).resolve().parent / "data"
PORTABILITY_PATH = DATA_DIR / "portability.json"
#: The variables that choose which kernels PyTorch, MKL and oneDNN run (and so the last bits).
KERNEL_VARIABLES = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA", "OMP_NUM_THREADS")
#: The share of machines not measured that a band is meant to hold (see :func:`prediction_band`).
PREDICTION_LEVEL = 0.99
#: The narrowest half-width of a band: the chapters print a live re-run to two decimals.
MIN_HALF_WIDTH = 0.01


def cpu_model() -> str:
    """The processor's model name (from ``/proc/cpuinfo`` on Linux), else ``platform.processor()``."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict:
    """What the numbers of a run depend on, besides the code and the seeds."""
    return {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpu": cpu_model(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
        "kernel_env": {name: os.environ[name] for name in KERNEL_VARIABLES if name in os.environ},
    }


def provenance(script: str, **settings) -> dict:
    """A JSON-ready record of how a cache file was made: ``script`` (the command that makes it),
    the ``settings`` it used (seeds, steps, ...), the machine and the date."""
    return {"script": script, "settings": settings, "machine": machine(), "date": datetime.date.today().isoformat()}


def describe(record: dict) -> str:
    """One line for a chapter: ``made by <script> with torch X on <cpu> (<ISA>, N threads)``."""
    m = record["machine"]
    return (
        f"made by `{record['script']}` with torch {m['torch']} on {m['cpu']} "
        f"({m['cpu_capability']} kernels, {m['threads']} thread{'s' if m['threads'] != 1 else ''})"
    )


def of(filename: str) -> dict:
    """The provenance record stored in ``mha/data/<filename>`` (a JSON cache file)."""
    path = DATA_DIR / filename
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run `make caches`")
    record = json.loads(path.read_text()).get("provenance")
    if record is None:
        raise ValueError(f"{path} records no provenance: rebuild it with `make caches`")
    return record


def load_portability(path: Path | str = PORTABILITY_PATH) -> dict:
    """The measured spreads and bands (see ``scripts/measure_portability.py``)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run `make caches` (scripts/measure_portability.py)")
    return json.loads(path.read_text())


def live_band(name: str) -> tuple[float, float]:
    """``(low, high)``: where a live re-run of probe ``name`` lands on any CPU, as measured.

    Raises KeyError (naming the known probes) for an unknown name.
    """
    probes = load_portability()["probes"]
    if name not in probes:
        raise KeyError(f"no measured band for {name!r}; known: {sorted(probes)}")
    low, high = probes[name]["band"]
    return float(low), float(high)


def in_band(name: str, value: float) -> bool:
    """True when ``value`` lies in :func:`live_band` ``(name)``."""
    low, high = live_band(name)
    return low <= value <= high


# --------------------------------------------------------------------------------------------
# What the bands were measured on, counted by what is distinct, and the band rule
# --------------------------------------------------------------------------------------------


def distinct_runs(probes: dict) -> list[list[int]]:
    """Group the measured runs into computations: runs whose values agree on every probe.

    ``probes``: name -> ``{"values": [one value per run], ...}`` (the ``"probes"`` of
    ``portability.json``), every list as long as the others. Returns the groups of run indices,
    each sorted, in the order of their first run.
    """
    lengths = {len(probe["values"]) for probe in probes.values()}
    if len(lengths) != 1:
        raise ValueError(f"every probe must have one value per run, found lists of lengths {sorted(lengths)}")
    groups: dict[tuple, list[int]] = {}
    for run in range(lengths.pop()):
        groups.setdefault(tuple(probe["values"][run] for probe in probes.values()), []).append(run)
    return list(groups.values())


def measurement(name: str, data: dict | None = None) -> dict:
    """What the band of probe ``name`` was measured on, counted by what is distinct.

    Returns:
        dict with ``runs`` (every measured run), ``computations`` (distinct runs, :func:`distinct_runs`),
        ``emulated`` (runs on an emulated CPU), ``setups`` (distinct instruction-set settings among
        them), ``thread_counts``, ``threads_agree`` (each setup gave the same values at every thread
        count), ``emulated_computations`` (distinct computations among the emulated runs),
        ``perturbations`` and ``perturbed_computations`` (runs with last-bit perturbed initial
        weights, on the measuring machine's own kernels), ``distinct_values`` (distinct values of
        this probe), ``min`` and ``max``.
    """
    data = load_portability() if data is None else data
    if name not in data["probes"]:
        raise KeyError(f"no measured band for {name!r}; known: {sorted(data['probes'])}")
    runs = data["provenance"]["settings"]["runs"]
    groups = distinct_runs(data["probes"])
    group_of = {run: g for g, members in enumerate(groups) for run in members}
    emulated = [i for i, env in enumerate(runs) if "ATEN_CPU_CAPABILITY" in env]
    perturbed = [i for i, env in enumerate(runs) if "MHA_PERTURB_SEED" in env]
    by_setup: dict[tuple, set] = {}
    for i in emulated:
        setup = tuple(sorted((k, v) for k, v in runs[i].items() if k != "OMP_NUM_THREADS"))
        by_setup.setdefault(setup, set()).add(group_of[i])
    values = data["probes"][name]["values"]
    return {
        "runs": len(runs),
        "computations": len(groups),
        "emulated": len(emulated),
        "setups": len(by_setup),
        "thread_counts": sorted({int(runs[i].get("OMP_NUM_THREADS", 1)) for i in emulated}),
        "threads_agree": all(len(members) == 1 for members in by_setup.values()),
        "emulated_computations": len({group_of[i] for i in emulated}),
        "perturbations": len(perturbed),
        "perturbed_computations": len({group_of[i] for i in perturbed}),
        "distinct_values": len(set(values)),
        "min": min(values),
        "max": max(values),
    }


def _t_two_sided(t: float, df: int) -> float:
    """P(|T| <= t) for Student's t with ``df`` degrees of freedom, t >= 0 (closed form for an
    integer ``df``: Abramowitz and Stegun 26.7.3 and 26.7.4, with theta = atan(t / sqrt(df)))."""
    theta = math.atan(t / math.sqrt(df))
    sin, cos = math.sin(theta), math.cos(theta)
    if df % 2:  # odd: (2/pi) (theta + sin (cos + 2/3 cos^3 + 2·4/(3·5) cos^5 + ...)), df - 1 terms / 2
        term, series = cos, 0.0
        for j in range(1, (df - 1) // 2 + 1):
            series += term
            term *= cos * cos * (2 * j) / (2 * j + 1)
        return 2 / math.pi * (theta + sin * series)
    term, series = 1.0, 0.0  # even: sin (1 + 1/2 cos^2 + 1·3/(2·4) cos^4 + ...), df / 2 terms
    for j in range(1, df // 2 + 1):
        series += term
        term *= cos * cos * (2 * j - 1) / (2 * j)
    return sin * series


def t_quantile(level: float, df: int) -> float:
    """The t with ``P(|T| <= t) = level`` for Student's t with ``df`` (a positive int) degrees of
    freedom: the factor of a two-sided ``level`` interval (3.2498 for level 0.99, df 9)."""
    if isinstance(df, bool) or not isinstance(df, int) or df < 1:
        raise ValueError(f"df must be a positive int, found {df!r}")
    if not 0 < level < 1:
        raise ValueError(f"level must lie strictly between 0 and 1, found {level!r}")
    low, high = 0.0, 1.0
    while _t_two_sided(high, df) < level:
        high *= 2
    for _ in range(200):  # bisection to float precision
        mid = (low + high) / 2
        low, high = (mid, high) if _t_two_sided(mid, df) < level else (low, mid)
    return (low + high) / 2


def prediction_band(sample, resolution: float, level: float = PREDICTION_LEVEL) -> dict:
    """The band a live re-run must land in, from one value per distinct computation (see the module
    docstring): ``mean ± t · sd · sqrt(1 + 1/n)``, at least ``resolution`` (one scored position)
    and :data:`MIN_HALF_WIDTH` either way, widened to hold every value of ``sample``, clipped to
    [0, 1], rounded outward to 4 decimals.

    Returns:
        dict with ``n``, ``mean``, ``sd``, ``half_width`` (what the spread needs, before widening and
        rounding) and ``band`` ``[low, high]``.
    """
    sample = [float(v) for v in sample]
    if len(sample) < 2:
        raise ValueError(f"a prediction band needs at least 2 distinct computations, found {len(sample)}")
    if not resolution > 0:
        raise ValueError(f"resolution must be > 0, found {resolution!r}")
    n = len(sample)
    mean = sum(sample) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in sample) / (n - 1))
    half_width = max(t_quantile(level, n - 1) * sd * math.sqrt(1 + 1 / n), resolution, MIN_HALF_WIDTH)
    low = max(0.0, min(mean - half_width, min(sample)))
    high = min(1.0, max(mean + half_width, max(sample)))
    band = [math.floor(round(low * 1e4, 6)) / 1e4, math.ceil(round(high * 1e4, 6)) / 1e4]
    return {"n": n, "mean": mean, "sd": sd, "half_width": half_width, "band": band}
