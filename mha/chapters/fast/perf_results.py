"""The making-it-fast chapter's stored benchmark results: load a ``benchmarks/results/<device>.json`` file and read it.

``python -m benchmarks.bench_attention`` (``make bench``) writes the file; nothing here times
anything. Every timing in a report is a list of samples taken **side by side**: in each round the
benchmark runs every implementation once, in an order shuffled anew each round (older runs, stored
without a ``method`` record, rotated one fixed order), so a burst of load from another process slows all of them in
that round rather than one implementation's whole measurement. A time is the median of its samples
with the interquartile range (IQR) as its spread; a comparison of two implementations is the
median of the per-round ratios, and a difference is called only when its interval, corrected for
every comparison the chapter makes (:func:`comparison_family`), excludes 1
(:mod:`mha.chapters.fast.perf_stats`).

Shape legend: B batch, H heads, T query length, S key length, D d_model.
"""

from __future__ import annotations

import json
import statistics
import textwrap
from dataclasses import dataclass
from pathlib import Path

from . import perf_stats

#: The layers the benchmark compares with the shape of BERT-base's attention, in table order.
LOOPED = "looped (mha.LoopedMultiHeadAttention)"
WEIGHTS = "mha.MultiHeadAttention, need_weights=True"
READABLE_SDPA = "mha.MultiHeadAttention, need_weights=False"
FUSED = "mha.FusedMultiHeadAttention, need_weights=False"
TORCH_DEFAULT = "nn.MultiheadAttention (default)"
TORCH_FAST = "nn.MultiheadAttention, need_weights=False"
BARE = "bare PyTorch (F.linear, SDPA, F.linear)"
#: Causal self-attention: the flag, the same layer with an explicit mask, the bare layer.
FUSED_CAUSAL = "mha.FusedMultiHeadAttention, is_causal=True"
FUSED_CAUSAL_MASK = "mha.FusedMultiHeadAttention, causal mask"
BARE_CAUSAL = "bare PyTorch, is_causal=True"
#: Grouped-query attention (G = H / 4) and multi-query attention (G = 1), with K and V read by the
#: kernel (``enable_gqa``, what mha does) or copied per query head first (``repeat_interleave``).
GQA = "GQA g=H/4, enable_gqa"
GQA_REPEAT = "GQA g=H/4, repeat_interleave"
MQA = "MQA g=1, enable_gqa"
MQA_REPEAT = "MQA g=1, repeat_interleave"

MAIN_IMPLS = (LOOPED, WEIGHTS, READABLE_SDPA, FUSED, TORCH_DEFAULT, TORCH_FAST, BARE)
CAUSAL_IMPLS = (FUSED_CAUSAL, FUSED_CAUSAL_MASK, BARE_CAUSAL)
GQA_IMPLS = (GQA, GQA_REPEAT, MQA, MQA_REPEAT)
IMPLS = MAIN_IMPLS + CAUSAL_IMPLS + GQA_IMPLS
#: Short names for plots and tables.
SHORT_NAMES = {
    LOOPED: "mha looped",
    WEIGHTS: "mha weights",
    READABLE_SDPA: "mha SDPA",
    FUSED: "mha fused SDPA",
    TORCH_DEFAULT: "torch default",
    TORCH_FAST: "torch no weights",
    BARE: "bare PyTorch",
    FUSED_CAUSAL: "mha is_causal",
    FUSED_CAUSAL_MASK: "mha causal mask",
    BARE_CAUSAL: "bare is_causal",
    GQA: "GQA enable_gqa",
    GQA_REPEAT: "GQA repeat",
    MQA: "MQA enable_gqa",
    MQA_REPEAT: "MQA repeat",
}
MEASURES = ("forward", "forward_backward")
#: The two variants of mha.MultiHeadAttention that the torch.compile benchmark compiles.
COMPILE_FLAGS = ("need_weights=True", "need_weights=False")
#: Keys every stored report must have (:func:`check_report`).
REPORT_KEYS = (
    "environment",
    "batch_size",
    "d_model",
    "num_heads",
    "rounds",
    "timings",
    "memory",
    "sdpa_backend",
    "decoding",
    "summary",
)
ENVIRONMENT_KEYS = (
    "device",
    "device_name",
    "cpu_model",
    "cpu_count",
    "torch",
    "isa",
    "threads",
    "dtype",
    "python",
    "load_average",
    "load_average_after",
)


def quartiles(values) -> tuple[float, float, float]:
    """(first quartile, median, third quartile) of ``values``, the definition every table uses.

    Linear interpolation between order statistics (``statistics.quantiles(..., method="inclusive")``);
    one value is its own three quartiles.
    """
    values = [float(v) for v in values]
    if not values:
        raise ValueError("quartiles of an empty list")
    if len(values) == 1:
        return values[0], values[0], values[0]
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def summarize_samples(samples_ms) -> dict:
    """``{"median_ms", "q1_ms", "q3_ms", "iqr_ms", "repeats", "samples_ms"}`` of timing samples (ms)."""
    q1, median, q3 = quartiles(samples_ms)
    return {
        "median_ms": median,
        "q1_ms": q1,
        "q3_ms": q3,
        "iqr_ms": q3 - q1,
        "repeats": len(samples_ms),
        "samples_ms": [float(s) for s in samples_ms],
    }


def check_report(report) -> dict:
    """Raise ``ValueError`` naming what is missing when ``report`` is not a benchmark report."""
    if not isinstance(report, dict):
        raise ValueError(f"a benchmark report must be a dict, found {type(report).__name__}")
    missing = [k for k in REPORT_KEYS if k not in report]
    if missing:
        raise ValueError(f"benchmark report lacks keys {missing} (written by an older benchmark? run make bench)")
    missing = [k for k in ENVIRONMENT_KEYS if k not in report["environment"]]
    if missing:
        raise ValueError(f"benchmark report's environment lacks keys {missing}")
    for i, row in enumerate(report["timings"]):
        for key in ("impl", "seq_len", *MEASURES):
            if key not in row:
                raise ValueError(f"timings[{i}] lacks key {key!r}")
        for key in MEASURES:
            samples = row[key].get("samples_ms", [])
            if not samples or not all(s > 0 for s in samples) or not row[key].get("median_ms", 0) > 0:
                raise ValueError(f"timings[{i}][{key!r}] needs positive samples_ms and median_ms")
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


def load_history(path) -> list[dict]:
    """The summaries of earlier runs, one per line of ``benchmarks/results/<device>-history.jsonl``."""
    path = Path(path)
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def seq_lens(report, table: str = "timings") -> list[int]:
    """The sequence lengths of a report's ``timings`` or ``memory`` table, sorted."""
    return sorted({r["seq_len"] for r in report[table]})


def timing(report, impl: str, seq_len: int, key: str = "forward_backward") -> dict:
    """The timing record (median, quartiles, samples in ms) of ``impl`` at ``seq_len``."""
    if key not in MEASURES:
        raise ValueError(f"key must be one of {MEASURES}, found {key!r}")
    for row in report["timings"]:
        if row["impl"] == impl and row["seq_len"] == seq_len:
            return row[key]
    raise KeyError(f"no timing for {impl!r} at seq_len {seq_len}")


def median_ms(report, impl: str, seq_len: int, key: str = "forward_backward") -> float:
    """Median time (ms) of ``impl`` at ``seq_len``; ``key`` is ``forward`` or ``forward_backward``."""
    return timing(report, impl, seq_len, key)["median_ms"]


def memory_bytes(report, impl: str, seq_len: int) -> int:
    """Saved-activation bytes of ``impl`` at ``seq_len`` in a report."""
    for row in report["memory"]:
        if row["impl"] == impl and row["seq_len"] == seq_len:
            return row["saved_activation_bytes"]
    raise KeyError(f"no memory entry for {impl!r} at seq_len {seq_len}")


def time_ratio(report, numerator: str, denominator: str, seq_len: int, key: str = "forward_backward") -> float:
    """median(numerator) / median(denominator): below 1 means ``numerator`` is faster."""
    return median_ms(report, numerator, seq_len, key) / median_ms(report, denominator, seq_len, key)


def round_ratios(report, numerator: str, denominator: str, seq_len: int, key: str = "forward_backward") -> list:
    """time(numerator) / time(denominator) in each round, in the order of the rounds.

    Round ``r`` ran both implementations within seconds of each other, so its ratio is what a
    change of load between rounds does not move. Below 1 means ``numerator`` was faster.
    """
    top = timing(report, numerator, seq_len, key)["samples_ms"]
    bottom = timing(report, denominator, seq_len, key)["samples_ms"]
    if len(top) != len(bottom):
        raise ValueError(f"{numerator!r} and {denominator!r} have {len(top)} and {len(bottom)} rounds")
    return [a / b for a, b in zip(top, bottom)]


def paired_ratio(report, numerator: str, denominator: str, seq_len: int, key: str = "forward_backward") -> dict:
    """The ratio of two implementations round by round (:func:`round_ratios`), summarised:
    ``{"median", "q1", "q3", "rounds"}``. Below 1 means ``numerator`` is faster."""
    ratios = round_ratios(report, numerator, denominator, seq_len, key)
    q1, median, q3 = quartiles(ratios)
    return {"median": median, "q1": q1, "q3": q3, "rounds": len(ratios)}


# ---------------------------------------------------------------------------------------------
# The comparisons the chapter makes, fixed before a run, and their verdicts
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    """time(numerator) / time(denominator), round by round. Each side names where its samples are:
    ``("layers", impl, seq_len, measure)``, ``("compile", name)``, ``("generation", "cache" or
    "recompute", G)`` or ``("step", B, context, G)`` (:func:`samples_at`)."""

    label: str
    numerator: tuple
    denominator: tuple


def _layers(a, b, seq_len, key="forward_backward") -> Comparison:
    what = "forward" if key == "forward" else "forward+backward"
    label = f"{SHORT_NAMES[a]} / {SHORT_NAMES[b]}, {what}, T = {seq_len}"
    return Comparison(label, ("layers", a, seq_len, key), ("layers", b, seq_len, key))


def comparison_family(
    lengths, target_len: int, num_heads: int, decode_grid=(), kv_heads=(), compile_flags=()
) -> list[Comparison]:
    """Every comparison the making-it-fast chapter states a verdict on, for a benchmark of this configuration.

    Fixed before a run (the benchmark stores the labels it was run with), so that the correction
    counts every comparison and none is chosen after seeing the data:

    * the loop over heads against the batched explicit path, forward and forward+backward, at
      every length; the fused Q, K, V projection against three, and the causal flag against a
      mask, at every length;
    * at ``target_len``: the weights against none in the same layer, mha's fast layer and the
      readable one against the bare PyTorch layer, mha's fast layer against
      ``nn.MultiheadAttention(need_weights=False)`` and PyTorch's default against it, the causal
      flag against the bare causal layer and against the full layer, ``enable_gqa`` against
      copying K and V (G = H/4 and G = 1);
    * torch.compile: compiled against eager for each ``need_weights`` flag, and the compiled
      explicit path against the eager fast one;
    * generation: recomputing the prefix against the cache for every G in ``kv_heads``, and the
      cache with fewer KV heads against the cache with H;
    * one decoding step with H KV heads against one with G, at every (batch, context) of
      ``decode_grid``.
    """
    family = [_layers(LOOPED, WEIGHTS, t, key) for key in MEASURES for t in lengths]
    family += [_layers(FUSED, READABLE_SDPA, t) for t in lengths]
    family += [
        _layers(a, b, target_len)
        for a, b in (
            (WEIGHTS, READABLE_SDPA),
            (FUSED, BARE),
            (READABLE_SDPA, BARE),
            (FUSED, TORCH_FAST),
            (TORCH_DEFAULT, FUSED),
        )
    ]
    family += [_layers(FUSED_CAUSAL, FUSED_CAUSAL_MASK, t) for t in lengths]
    family += [
        _layers(a, b, target_len)
        for a, b in ((FUSED_CAUSAL, BARE_CAUSAL), (FUSED_CAUSAL, FUSED), (GQA, GQA_REPEAT), (MQA, MQA_REPEAT))
    ]
    for flag in compile_flags:
        family.append(
            Comparison(f"compiled / eager, {flag}", ("compile", f"compiled, {flag}"), ("compile", f"eager, {flag}"))
        )
    if compile_flags:
        family.append(
            Comparison(
                "compiled need_weights=True / eager need_weights=False",
                ("compile", "compiled, need_weights=True"),
                ("compile", "eager, need_weights=False"),
            )
        )
    for g in kv_heads:
        family.append(
            Comparison(f"recompute / cache, g = {g}", ("generation", "recompute", g), ("generation", "cache", g))
        )
    for g in kv_heads:
        if g != num_heads:
            label = f"cache g = {g} / cache g = {num_heads}"
            family.append(Comparison(label, ("generation", "cache", g), ("generation", "cache", num_heads)))
    for b, n in decode_grid:
        for g in kv_heads:
            if g != num_heads:
                label = f"step g = {num_heads} / step g = {g}, b = {b}, n = {n}"
                family.append(Comparison(label, ("step", b, n, num_heads), ("step", b, n, g)))
    return family


def report_family(report) -> list[Comparison]:
    """:func:`comparison_family` for the configuration a stored report was measured with."""
    decoding = report["decoding"]
    grid = list(dict.fromkeys((s["batch_size"], s["context_len"]) for s in decoding["steps"]))
    kv_heads = [entry["num_kv_heads"] for entry in decoding["generation"]]
    compiled = report.get("compile", {}).get("timings", {})
    flags = [flag for flag in COMPILE_FLAGS if f"eager, {flag}" in compiled]
    return comparison_family(seq_lens(report), report["summary"]["seq_len"], report["num_heads"], grid, kv_heads, flags)


def samples_at(report, where: tuple) -> list[float]:
    """The per-round samples (ms) at ``where`` (see :class:`Comparison`)."""
    kind, *rest = where
    if kind == "layers":
        impl, seq_len, key = rest
        return timing(report, impl, seq_len, key)["samples_ms"]
    if kind == "compile":
        return report["compile"]["timings"][rest[0]]["samples_ms"]
    if kind == "generation":
        what, g = rest
        for entry in report["decoding"]["generation"]:
            if entry["num_kv_heads"] == g:
                return entry[what]["samples_ms"]
    elif kind == "step":
        b, n, g = rest
        for step in report["decoding"]["steps"]:
            if (step["batch_size"], step["context_len"], step["num_kv_heads"]) == (b, n, g):
                return step["time"]["samples_ms"]
    else:
        raise ValueError(f"where must start with layers, compile, generation or step, found {kind!r}")
    raise KeyError(f"no samples at {where!r}")


def comparison_ratios(report, comparison: Comparison) -> list[float]:
    """time(numerator) / time(denominator) in each round of ``comparison``."""
    top, bottom = samples_at(report, comparison.numerator), samples_at(report, comparison.denominator)
    if len(top) != len(bottom):
        raise ValueError(f"{comparison.label}: {len(top)} and {len(bottom)} rounds")
    return [a / b for a, b in zip(top, bottom)]


def verdicts(report, alpha: float = perf_stats.ALPHA) -> dict:
    """``{label: result}`` for every comparison of :func:`report_family`: the median per-round
    ratio and its interval at the Bonferroni level for the whole family
    (:func:`mha.chapters.fast.perf_stats.compare`), with the verdict."""
    family = report_family(report)
    return {c.label: perf_stats.compare(comparison_ratios(report, c), len(family), alpha) for c in family}


def judged(report, numerator, denominator, seq_len: int | None = None, key: str = "forward_backward") -> dict:
    """The result of one comparison of the family (:func:`verdicts`): two implementations at
    ``seq_len`` (``key`` forward or forward_backward), or two sample locations (tuples, see
    :class:`Comparison`). A comparison outside the family raises KeyError: the chapter may state
    a verdict only on what the correction counted."""
    if seq_len is not None:
        numerator, denominator = ("layers", numerator, seq_len, key), ("layers", denominator, seq_len, key)
    family = report_family(report)
    for c in family:
        if (c.numerator, c.denominator) == (numerator, denominator):
            return perf_stats.compare(comparison_ratios(report, c), len(family))
    raise KeyError(f"{numerator} / {denominator} is not one of the {len(family)} comparisons of the family")


def order_of(report) -> str:
    """How the report's rounds ordered the implementations: ``"shuffled, seed N"`` (the order of
    each round drawn from a seeded generator and recorded) or ``"rotated"`` (older runs, whose report
    has no ``method``: one fixed order, rotated by one each round)."""
    method = report.get("method")
    if method is None:
        return "rotated"
    return f"{method['order']}, seed {method['order_seed']}"


def verdict_line(label: str, result: dict, digits: int = 3, width: int = 0, max_width: int = 0) -> str:
    """One comparison as text: ``label: median [low, high]  verdict``, the label and its colon
    padded to ``width`` characters. With ``max_width``, a line that would be wider puts the
    numbers on a second line, indented by 4 (a page's text column holds 74 characters)."""
    if result["low"] is None:
        span = "no interval"
    else:
        span = f"[{result['low']:.{digits}f}, {result['high']:.{digits}f}]"
    numbers = f"{result['median']:.{digits}f} {span}  {result['verdict']}"
    line = f"{label + ':':{width}s} {numbers}"
    if max_width and len(line) > max_width:
        return f"{label}:\n    {numbers}"
    return line


def timing_table(report, impls=MAIN_IMPLS, key: str = "forward_backward") -> str:
    """Median (IQR) in ms of ``impls`` at every length of a report, as aligned text."""
    lengths = seq_lens(report)
    width = max(len(SHORT_NAMES.get(i, i)) for i in impls)
    lines = [f"{'':{width}s}" + "".join(f"{'T = ' + str(t):>18s}" for t in lengths)]
    for impl in impls:
        cells = []
        for t in lengths:
            record = timing(report, impl, t, key)
            cells.append(f"{record['median_ms']:>9.1f} ({record['iqr_ms']:5.1f})")
        lines.append(f"{SHORT_NAMES.get(impl, impl):{width}s}" + "".join(f"{c:>18s}" for c in cells))
    return "\n".join(lines)


def decode_speedups(report) -> dict:
    """Measured speed-up of one decoding step with fewer KV heads, against the bytes it saves.

    For every (batch, context) of ``report["decoding"]["steps"]`` and every G below H:
    ``{(B, n, G): {"median", "q1", "q3"}}`` of the per-round ratio time(MHA) / time(G), with
    ``bytes_ratio`` = bytes(MHA) / bytes(G) (weights + cache: the most a memory-bound step could
    gain), ``mha_ms`` the measured MHA step and ``mha_bound_ms`` its bytes / measured bandwidth.
    """
    decoding = report["decoding"]
    bandwidth = decoding["bandwidth"]["bytes_per_s"]
    steps = {(s["batch_size"], s["context_len"], s["num_kv_heads"]): s for s in decoding["steps"]}
    heads = report["num_heads"]
    found = {}
    for (b, n, g), step in sorted(steps.items(), key=lambda item: (item[0][0] * item[0][1], -item[0][2])):
        if g == heads:
            continue
        base = steps[b, n, heads]
        q1, median, q3 = quartiles([a / c for a, c in zip(base["time"]["samples_ms"], step["time"]["samples_ms"])])
        base_bytes = base["weight_bytes"] + base["cache_bytes"]
        found[b, n, g] = {
            "median": median,
            "q1": q1,
            "q3": q3,
            "bytes_ratio": base_bytes / (step["weight_bytes"] + step["cache_bytes"]),
            "mha_ms": base["time"]["median_ms"],
            "mha_bound_ms": base_bytes / bandwidth * 1e3,
        }
    return found


def describe(report, width: int = 0) -> str:
    """One line naming the machine, versions and load a report was measured with; with ``width``,
    wrapped into lines of at most ``width`` characters (a page's text column holds 74)."""
    env = report["environment"]
    text = (
        f"{env['device']} ({env['device_name']}, {env['cpu_count']} CPUs, {env['isa']}), torch {env['torch']}, "
        f"{env['threads']} threads, {env['dtype']}, load average {env['load_average']:.1f} before and "
        f"{env['load_average_after']:.1f} after"
    )
    return textwrap.fill(text, width) if width else text


# ---------------------------------------------------------------------------------------------
# The explorer's controls and alt text (mha.chapters.fast.figures.render_benchmark draws its frames)
# ---------------------------------------------------------------------------------------------


def explorer_controls(report) -> dict:
    """``{"measure": ["forward", "forward+backward"], "seq_len": [...]}`` for
    :func:`mha.chapters.fast.figures.render_benchmark`."""
    return {"measure": ["forward", "forward+backward"], "seq_len": seq_lens(report)}


def benchmark_alt(report, measure: str = "forward+backward", seq_len: int | None = None) -> str:
    """Alt text of a :func:`mha.chapters.fast.figures.render_benchmark` frame."""
    key = "forward" if measure == "forward" else "forward_backward"
    seq_len = seq_lens(report)[-1] if seq_len is None else seq_len
    parts = []
    for impl in MAIN_IMPLS:
        t = timing(report, impl, seq_len, key)
        parts.append(f"{SHORT_NAMES[impl]} {t['median_ms']:.0f} ms (IQR {t['iqr_ms']:.0f})")
    return f"Median {measure} time at T = {seq_len}: " + ", ".join(parts) + "."
