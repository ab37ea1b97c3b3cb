"""Timing side by side, and the record of the machine a timing was taken on.

Every benchmark here times its implementations **in rounds**: each round calls every
implementation once, in an order shuffled anew for each round by a seeded generator, and records
one sample per call with its position in the round. A burst of load from another process then
slows every implementation of the rounds it hits, instead of the one implementation that happened
to be measured at that moment, and the ratio of two implementations within a round cancels most of
it. Shuffling keeps the rest fair: no implementation always runs after the same predecessor (whose
caches, memory and frequency it would inherit) or at the same place in the round
(``mha.chapters.fast.perf_stats`` decides what the ratios show).
"""

from __future__ import annotations

import math
import os
import platform
import random
import re
import subprocess
import time

import torch

from mha.chapters.fast.perf_results import summarize_samples


def load_average():
    """1-minute load average (None where the OS does not report it)."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, else ``lscpu``, else ``platform.processor()``."""
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10, check=False).stdout
        match = re.search(r"^Model name:\s*(.+)$", out, re.MULTILINE)
        if match:
            return match.group(1).strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return platform.processor() or platform.machine()


def environment(device: torch.device, dtype: torch.dtype) -> dict:
    """What a timing depends on: device, CPU model and count, torch, ISA, threads, load, date."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "device": device.type,
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_model(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": usable,
        "torch": torch.__version__,
        "cuda": torch.version.cuda if device.type == "cuda" else None,
        "isa": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
        "dtype": str(dtype).replace("torch.", ""),
        "python": platform.python_version(),
        "load_average": load_average(),
        "date": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
    }


def synchronizer(device: torch.device):
    """A function that waits for the device to finish its queued work (a no-op on the CPU)."""
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


def time_side_by_side(
    fns: dict, rounds: int, sync=lambda: None, min_sample_s: float = 0.0, warmup: int = 1, order=0
) -> dict:
    """``{name: timing record}`` of each ``fns[name]()``, measured in interleaved rounds.

    After ``warmup`` calls of each, one round calls every function once (``inner`` times in a
    row for calls shorter than ``min_sample_s``, so a GPU's launch latency does not dominate),
    in an order shuffled for each round by ``order`` (a seed, or a ``random.Random`` that several
    calls share). Each record holds the median, quartiles and every sample in ms
    (:func:`mha.chapters.fast.perf_results.summarize_samples`) and ``positions``, the place (0 first)
    at which it ran in each round; sample ``r`` of every record comes from round ``r``.
    """
    rng = order if isinstance(order, random.Random) else random.Random(order)
    names = list(fns)
    inner = dict.fromkeys(names, 1)
    for name in names:
        for _ in range(warmup):
            fns[name]()
        if min_sample_s > 0:  # calibrate: how many calls make one sample
            sync()
            start = time.perf_counter()
            fns[name]()
            sync()
            single = time.perf_counter() - start
            inner[name] = max(1, math.ceil(min_sample_s / max(single, 1e-9)))
    samples = {name: [] for name in names}
    positions = {name: [] for name in names}
    for _ in range(rounds):
        this_round = rng.sample(names, len(names))
        for position, name in enumerate(this_round):
            sync()
            start = time.perf_counter()
            for _ in range(inner[name]):
                fns[name]()
            sync()
            samples[name].append((time.perf_counter() - start) / inner[name] * 1e3)
            positions[name].append(position)
    return {name: {**summarize_samples(samples[name]), "positions": positions[name]} for name in names}


def round_orders(records: dict) -> list[list[str]]:
    """The order of every round, read back from the ``positions`` of :func:`time_side_by_side`'s records."""
    rounds = len(next(iter(records.values()))["positions"])
    orders = []
    for r in range(rounds):
        orders.append(sorted(records, key=lambda name: records[name]["positions"][r]))
    return orders


#: PyTorch's operator behind each backend of F.scaled_dot_product_attention.
SDPA_KERNELS = {
    "aten::_scaled_dot_product_flash_attention_for_cpu": "flash (CPU)",
    "aten::_scaled_dot_product_flash_attention": "flash",
    "aten::_scaled_dot_product_efficient_attention": "memory-efficient",
    "aten::_scaled_dot_product_cudnn_attention": "cuDNN",
    "aten::_scaled_dot_product_attention_math": "math",
    "aten::_scaled_dot_product_fused_attention_overrideable": "overrideable",
}


def sdpa_backend(fn) -> str | None:
    """Which backend(s) of ``F.scaled_dot_product_attention`` one call of ``fn()`` ran, read from
    the profiler's operator names; None when it calls no SDPA (the explicit matmul + softmax)."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=activities) as prof:
        fn()
    found = sorted({SDPA_KERNELS[e.name] for e in prof.events() if e.name in SDPA_KERNELS})
    return ", ".join(found) or None
