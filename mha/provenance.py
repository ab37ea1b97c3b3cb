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
"""

from __future__ import annotations

import datetime
import json
import os
import platform
from pathlib import Path

import torch

DATA_DIR = Path(__file__).resolve().parent / "data"
PORTABILITY_PATH = DATA_DIR / "portability.json"
#: The variables that choose which kernels PyTorch, MKL and oneDNN run (and so the last bits).
KERNEL_VARIABLES = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA", "OMP_NUM_THREADS")


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
