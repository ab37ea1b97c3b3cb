"""Measuring attention (chapter 6): saved activations, memory formulas and stored benchmark results.

Timings are never taken here: they come from ``python -m benchmarks.bench_attention``, which
writes ``benchmarks/results/<device>.json``. This module loads and checks such a file, reads
tables out of it (:mod:`mha.viz.perf` plots them). What *can* be computed exactly (bytes kept for the backward
pass, bytes of a (B, H, T, S) weight tensor) is computed here, so the chapter can compare
the stored file with a live count.

Shape legend: B batch, H heads, T query length, S key length, D d_model.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from ..checks import check_positive_int

#: The implementations the benchmark compares, in the order its tables list them.
IMPLS = (
    "looped (mha.LoopedMultiHeadAttention)",
    "mha, need_weights=True (matmul + softmax)",
    "mha, need_weights=False (SDPA)",
    "nn.MultiheadAttention (default)",
    "nn.MultiheadAttention, need_weights=False",
)
#: Short names for plots and tables.
SHORT_NAMES = {
    "looped (mha.LoopedMultiHeadAttention)": "mha looped",
    "mha, need_weights=True (matmul + softmax)": "mha weights",
    "mha, need_weights=False (SDPA)": "mha SDPA",
    "nn.MultiheadAttention (default)": "torch default",
    "nn.MultiheadAttention, need_weights=False": "torch no weights",
}
#: Keys every stored report must have (``check_report``).
REPORT_KEYS = ("environment", "batch_size", "d_model", "num_heads", "timings", "memory", "decoding", "summary")
ENVIRONMENT_KEYS = ("device", "device_name", "torch", "threads", "dtype", "python")


def saved_tensors(forward, x, exclude=()) -> list[dict]:
    """The distinct tensors autograd keeps for, and reads during, the backward pass.

    Runs ``forward(x).sum().backward()`` with ``saved_tensors_hooks``. A tensor counts when the
    backward pass unpacks it (a saved tensor whose graph node is freed during the forward pass,
    e.g. behind a ``.detach()``, is not kept and does not count). Tensors sharing a storage count
    once, with the storage's size; storages of ``exclude`` (e.g. the parameters) are left out.

    Returns:
        list of dicts ``shape``, ``dtype``, ``nbytes``, one per storage, in order of first use.
    """
    excluded = {t.untyped_storage().data_ptr() for t in exclude}
    packed, used = [], {}

    def pack(t):
        packed.append(t)
        return len(packed) - 1

    def unpack(index):
        t = packed[index]
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr not in excluded and ptr not in used:
            used[ptr] = {
                "shape": tuple(t.shape),
                "dtype": str(t.dtype).replace("torch.", ""),
                "nbytes": storage.nbytes(),
            }
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        forward(x).sum().backward()
    return list(used.values())


def saved_activation_bytes(forward, x, exclude=()) -> int:
    """Bytes of the distinct tensors the backward pass reads (see :func:`saved_tensors`)."""
    return sum(t["nbytes"] for t in saved_tensors(forward, x, exclude))


def attention_matrix_bytes(
    batch_size: int, num_heads: int, seq_len: int, key_len: int | None = None, bytes_per_element: int = 4
) -> int:
    """Bytes of one (B, H, T, S) tensor of scores or weights: B·H·T·S·bytes (S defaults to T)."""
    key_len = seq_len if key_len is None else key_len
    sizes = [
        check_positive_int(name, v)
        for name, v in (
            ("batch_size", batch_size),
            ("num_heads", num_heads),
            ("seq_len", seq_len),
            ("key_len", key_len),
            ("bytes_per_element", bytes_per_element),
        )
    ]
    total = 1
    for size in sizes:
        total *= size
    return total


def count_attention_matrices(
    tensors: list[dict], batch_size: int, num_heads: int, seq_len: int, key_len: int | None = None
) -> int:
    """How many of ``tensors`` (from :func:`saved_tensors`) are (T, S) matrices for all B·H heads.

    A tensor counts when its last two sizes are (T, S) and it has B·H·T·S elements, whether it is
    shaped (B, H, T, S) or (B·H, T, S) (PyTorch's module folds the heads into the batch).
    """
    key_len = seq_len if key_len is None else key_len
    numel = batch_size * num_heads * seq_len * key_len
    count = 0
    for t in tensors:
        n = 1
        for size in t["shape"]:
            n *= size
        count += n == numel and tuple(t["shape"][-2:]) == (seq_len, key_len)
    return count


# ---------------------------------------------------------------------------------------------
# Stored results of benchmarks/bench_attention.py
# ---------------------------------------------------------------------------------------------


def check_report(report) -> dict:
    """Raise ``ValueError`` naming what is missing when ``report`` is not a benchmark report."""
    if not isinstance(report, dict):
        raise ValueError(f"a benchmark report must be a dict, found {type(report).__name__}")
    missing = [k for k in REPORT_KEYS if k not in report]
    if missing:
        raise ValueError(f"benchmark report lacks keys {missing}")
    missing = [k for k in ENVIRONMENT_KEYS if k not in report["environment"]]
    if missing:
        raise ValueError(f"benchmark report's environment lacks keys {missing}")
    for i, row in enumerate(report["timings"]):
        for key in ("impl", "seq_len", "forward", "forward_backward"):
            if key not in row:
                raise ValueError(f"timings[{i}] lacks key {key!r}")
        for key in ("forward", "forward_backward"):
            if not row[key].get("median_ms", 0) > 0:
                raise ValueError(f"timings[{i}][{key!r}] needs a positive median_ms, found {row[key]}")
    for i, row in enumerate(report["memory"]):
        if not {"impl", "seq_len", "saved_activation_bytes"} <= set(row):
            raise ValueError(f"memory[{i}] needs impl, seq_len and saved_activation_bytes, found {sorted(row)}")
    missing = [impl for impl in IMPLS if impl not in {r["impl"] for r in report["timings"]}]
    if missing:
        raise ValueError(f"benchmark report has no timings for {missing}")
    return report


def load_results(path) -> list[dict]:
    """The reports (one per dtype) of a ``benchmarks/results/<device>.json`` file, checked."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no benchmark results at {path}: run python -m benchmarks.bench_attention")
    reports = json.loads(path.read_text())
    if not isinstance(reports, list) or not reports:
        raise ValueError(f"{path} must hold a non-empty list of reports, found {type(reports).__name__}")
    return [check_report(r) for r in reports]


def seq_lens(report, table: str = "timings") -> list[int]:
    """The sequence lengths of a report's ``timings`` or ``memory`` table, sorted."""
    return sorted({r["seq_len"] for r in report[table]})


def median_ms(report, impl: str, seq_len: int, key: str = "forward_backward") -> float:
    """Median time (ms) of ``impl`` at ``seq_len``; ``key`` is ``forward`` or ``forward_backward``."""
    for row in report["timings"]:
        if row["impl"] == impl and row["seq_len"] == seq_len:
            return row[key]["median_ms"]
    raise KeyError(f"no timing for {impl!r} at seq_len {seq_len}")


def memory_bytes(report, impl: str, seq_len: int) -> int:
    """Saved-activation bytes of ``impl`` at ``seq_len`` in a report."""
    for row in report["memory"]:
        if row["impl"] == impl and row["seq_len"] == seq_len:
            return row["saved_activation_bytes"]
    raise KeyError(f"no memory entry for {impl!r} at seq_len {seq_len}")


def time_ratio(report, numerator: str, denominator: str, seq_len: int, key: str = "forward_backward") -> float:
    """median(numerator) / median(denominator): below 1 means ``numerator`` is faster."""
    return median_ms(report, numerator, seq_len, key) / median_ms(report, denominator, seq_len, key)


def describe(report) -> str:
    """One line naming the machine and versions a report was measured with."""
    env = report["environment"]
    load = f", load average {env['load_average']:.1f}" if "load_average" in env else ""
    return (
        f"{env['device']} ({env['device_name']}), torch {env['torch']}, {env['threads']} threads, {env['dtype']}{load}"
    )


# ---------------------------------------------------------------------------------------------
# The explorer's controls and alt text (mha.viz.perf.render_benchmark draws its frames)
# ---------------------------------------------------------------------------------------------


#: Controls of the chapter's explorer over a stored report (2 x 4 = 8 frames at most).
def explorer_controls(report) -> dict:
    """``{"measure": ["forward", "forward+backward"], "seq_len": [...]}`` for :func:`mha.viz.perf.render_benchmark`."""
    return {"measure": ["forward", "forward+backward"], "seq_len": seq_lens(report)}


def benchmark_alt(report, measure: str = "forward+backward", seq_len: int | None = None) -> str:
    """Alt text of a :func:`mha.viz.perf.render_benchmark` frame."""
    key = "forward" if measure == "forward" else "forward_backward"
    seq_len = seq_lens(report)[-1] if seq_len is None else seq_len
    parts = [f"{SHORT_NAMES[i]} {median_ms(report, i, seq_len, key):.0f} ms" for i in IMPLS]
    return f"Median {measure} time at T = {seq_len}: " + ", ".join(parts) + "."
