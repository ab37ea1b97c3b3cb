"""The making-it-fast chapter's figures: stored benchmark timings (medians with IQR error bars), memory,
the decoding roofline, and the explorer's frames.

The numbers come from :mod:`mha.chapters.fast.perf_results` (which reads
``benchmarks/results/<device>.json``) and :mod:`mha.chapters.fast.perf` (exact byte counts).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

from ...viz.controls import Choice
from ...viz.live import LiveFigure
from ...viz.plotting import HEAD_COLORS, use_style
from .perf import DECODE_MODEL, model_decode_step_bytes, model_step_weight_bytes
from .perf_results import (
    IMPLS,
    LOOPED,
    MAIN_IMPLS,
    MEASURES,
    SHORT_NAMES,
    WEIGHTS,
    explorer_controls,
    judged,
    memory_bytes,
    seq_lens,
    timing,
)

GIB = 2**30


def _plain_log_ticks(ax) -> None:
    """Log axis labelled 30, 100, 200 rather than 3x10^1, 10^2, 2x10^2."""
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.yaxis.set_minor_formatter(NullFormatter())


def _color(impl) -> str:
    return HEAD_COLORS[IMPLS.index(impl) % len(HEAD_COLORS)] if impl in IMPLS else "0.5"


def _axes(ax):
    use_style()
    return plt.subplots() if ax is None else (ax.figure, ax)


def _log2_lengths(ax, lengths) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(lengths, [str(t) for t in lengths])
    ax.set_xlabel("sequence length T (tokens)")


def plot_time_vs_seq_len(report, *, key: str = "forward_backward", impls=MAIN_IMPLS, ax=None):
    """Median time against T, one line per implementation (log-log), the IQR as error bars."""
    fig, ax = _axes(ax)
    lengths = seq_lens(report)
    for impl in impls:
        records = [timing(report, impl, t, key) for t in lengths]
        medians = np.array([r["median_ms"] for r in records])
        spread = np.array([[m - r["q1_ms"], r["q3_ms"] - m] for m, r in zip(medians, records)]).T
        label = SHORT_NAMES.get(impl, impl)
        ax.errorbar(lengths, medians, yerr=spread, fmt="o-", capsize=3, color=_color(impl), label=label)
    _log2_lengths(ax, lengths)
    ax.set_yscale("log")
    ax.set_ylabel("median time (ms), bars: IQR")
    _plain_log_ticks(ax)
    what = "forward + backward" if key == "forward_backward" else "forward"
    ax.set_title(f"{what}, {report['environment']['device']} {report['environment']['dtype']}")
    ax.legend(fontsize=9)
    return fig


def plot_ratio_vs_seq_len(report, pairs, *, ax=None, title=None):
    """Per-round ratio against T for each ``(numerator, denominator, key)`` of the chapter's
    comparisons: the median, and as bars its interval corrected for every comparison
    (:func:`~mha.chapters.fast.perf_results.judged`; none where the rounds are too few for one). The
    dashed line at 1 is 'equally fast': a bar that crosses it calls no difference."""
    fig, ax = _axes(ax)
    lengths = seq_lens(report)
    for i, (top, bottom, key) in enumerate(pairs):
        stats = [judged(report, top, bottom, t, key) for t in lengths]
        medians = np.array([s["median"] for s in stats])
        spread = np.array(
            [[m - s["low"], s["high"] - m] if s["low"] is not None else [0.0, 0.0] for m, s in zip(medians, stats)]
        ).T
        what = "forward + backward" if key == "forward_backward" else "forward"
        label = f"{SHORT_NAMES.get(top, top)} / {SHORT_NAMES.get(bottom, bottom)}, {what}"
        ax.errorbar(lengths, medians, yerr=spread, fmt="o-", capsize=3, color=HEAD_COLORS[i], label=label)
    ax.axhline(1.0, color="0.4", linestyle="--", linewidth=1)
    _log2_lengths(ax, lengths)
    ax.set_ylabel("time ratio per round (median, interval)")
    ax.set_title(title or "time ratios")
    ax.legend(fontsize=9)
    return fig


def plot_looped_vs_batched(report, *, ax=None):
    """Looped / batched (both returning weights), forward and forward + backward, per round."""
    pairs = [(LOOPED, WEIGHTS, key) for key in MEASURES]
    return plot_ratio_vs_seq_len(report, pairs, ax=ax, title="loop over heads / one batched product")


def plot_memory_vs_seq_len(report, *, impls=MAIN_IMPLS, ax=None):
    """Activations saved for the backward pass (MiB) against T, from a stored report.

    Implementations that save exactly the same bytes at every length share one line, and its
    legend entry names them all ("mha SDPA = bare PyTorch"): drawn apart, one would hide the other."""
    fig, ax = _axes(ax)
    lengths = seq_lens(report, "memory")
    groups: dict[tuple, list] = {}
    for impl in impls:
        groups.setdefault(tuple(memory_bytes(report, impl, t) for t in lengths), []).append(impl)
    for saved, members in groups.items():
        names = [SHORT_NAMES.get(impl, impl) for impl in members]
        label = (
            " = ".join(names)
            if len(names) < 3
            else " =\n".join(" = ".join(names[i : i + 2]) for i in range(0, len(names), 2))
        )
        ax.plot(lengths, np.array(saved) / 2**20, "o-", color=_color(members[0]), label=label)
    _log2_lengths(ax, lengths)
    ax.set_yscale("log")
    ax.set_ylabel("saved for backward (MiB)")
    _plain_log_ticks(ax)
    ax.set_title(f"memory, batch {report['batch_size']}, {report['num_heads']} heads")
    ax.legend(fontsize=9, loc="upper left", title="“=”: the same bytes at every T", title_fontsize=9)
    return fig


def render_benchmark(report, measure: str = "forward+backward", seq_len: int | None = None):
    """Explorer frame: horizontal bars of median time per implementation at one T, IQR as error bars.

    ``measure`` is ``"forward"`` or ``"forward+backward"``. Each bar is labelled with its median
    and how many times the fastest median it is.
    """
    key = {"forward": "forward", "forward+backward": "forward_backward"}.get(measure)
    if key is None:
        raise ValueError(f"measure must be 'forward' or 'forward+backward', found {measure!r}")
    seq_len = seq_lens(report)[-1] if seq_len is None else seq_len
    use_style()
    records = [timing(report, impl, seq_len, key) for impl in MAIN_IMPLS]
    times = [r["median_ms"] for r in records]
    spread = np.array([[t - r["q1_ms"], r["q3_ms"] - t] for t, r in zip(times, records)]).T
    fastest = min(times)
    fig, ax = plt.subplots(figsize=(6.4, 3.0))
    y = list(range(len(MAIN_IMPLS)))[::-1]
    ax.barh(y, times, xerr=spread, capsize=3, color=[_color(i) for i in MAIN_IMPLS])
    ax.set_yticks(y, [SHORT_NAMES[i] for i in MAIN_IMPLS])
    for yi, t, r in zip(y, times, records):  # clear of the error bar's cap
        ax.annotate(
            f"{t:.0f} ms ({t / fastest:.2f}×)",
            (r["q3_ms"], yi),
            xytext=(6, 0),
            textcoords="offset points",
            va="center",
            fontsize=9,
        )
    ax.set_xlim(0, max(r["q3_ms"] for r in records) * 1.45)
    ax.set_xlabel("median time (ms), bars: IQR")
    ax.set_title(
        f"{measure}, $T$ = {seq_len}, batch {report['batch_size']}, $d_{{\\mathrm{{model}}}}$ {report['d_model']}"
    )
    # fixed margins: tight_layout would draw the figure once more, a third of a frame's time
    fig.subplots_adjust(left=0.25, right=0.97, bottom=0.16, top=0.9)
    return fig


#: What the reader sees for the stored-benchmark explorer's controls.
BENCHMARK_LABELS = {"measure": "measure", "seq_len": "sequence length T (tokens)"}


def benchmark_controls(report) -> dict:
    """The stored-benchmark explorer's controls (:func:`~mha.chapters.fast.perf_results.explorer_controls`),
    labelled."""
    return {name: Choice(values, label=BENCHMARK_LABELS[name]) for name, values in explorer_controls(report).items()}


class StoredBenchmark(LiveFigure):
    """:func:`render_benchmark` for a live explorer. Its controls are choices only (two measures,
    a few lengths), so each combination is a layout of its own: the first is drawn when the cell
    runs, the others while the kernel is idle after it, and a move shows a figure already drawn."""

    def __init__(self, report):
        self.report = report

    def draw(self, measure: str = "forward+backward", seq_len: int | None = None):
        return render_benchmark(self.report, measure, seq_len)

    def layout(self, measure: str = "forward+backward", seq_len: int | None = None):
        return measure, seq_len

    def update(self, fig, measure: str = "forward+backward", seq_len: int | None = None):
        return None  # the figure of this layout already shows these values

    def artists(self, fig):
        return []  # nothing moves: the whole figure is its own background


def plot_decode_roofline(*, kv_heads=(32, 8, 1), model: str = DECODE_MODEL, ax=None):
    """Bytes one decoding step of ``model`` (fp16) reads against batch x context, for MHA, GQA and
    MQA (log-log): solid with the weights held as published, dashed for a model of the same shape
    whose W_K and W_V shrink with g; the published weights alone as a dotted floor."""
    fig, ax = _axes(ax)
    tokens = np.logspace(8, 21, 40, base=2)  # batch x context, 256 .. 2M
    num_heads = max(kv_heads)
    for i, g in enumerate(kv_heads):
        name = "MHA" if g == num_heads else "MQA" if g == 1 else "GQA"
        gib = [model_decode_step_bytes(1, int(t), g, model) / GIB for t in tokens]
        ax.plot(tokens, gib, color=HEAD_COLORS[i], label=f"{name}, g = {g}")
        if g != num_heads:
            shrunk = [model_decode_step_bytes(1, int(t), g, model, fixed_weights=False) / GIB for t in tokens]
            ax.plot(tokens, shrunk, "--", color=HEAD_COLORS[i], label=f"{name}, g = {g}, same shape")
    weights = model_step_weight_bytes(1, model)  # batch 1: one row of the input embedding gathered
    ax.axhline(weights / GIB, color="0.4", linestyle=":", linewidth=1, label="weights alone")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("batch x context (tokens in the KV cache)")
    ax.set_ylabel("bytes read per step (GiB)")
    _plain_log_ticks(ax)
    ax.set_title(f"one decoding step of {model}, fp16")
    ax.legend(fontsize=9)
    return fig


def plot_decode_steps(decoding, *, ax=None):
    """Measured time of one decoding step against the bytes it reads (weights + cache), one colour per
    number of KV heads, with the roofline bytes / bandwidth (the measured read bandwidth)."""
    fig, ax = _axes(ax)
    steps = decoding["steps"]
    bandwidth = decoding["bandwidth"]["bytes_per_s"]
    for i, g in enumerate(sorted({s["num_kv_heads"] for s in steps}, reverse=True)):
        mine = [s for s in steps if s["num_kv_heads"] == g]
        mib = np.array([(s["weight_bytes"] + s["cache_bytes"]) / 2**20 for s in mine])
        med = np.array([s["time"]["median_ms"] for s in mine])
        spread = np.array([[m - s["time"]["q1_ms"], s["time"]["q3_ms"] - m] for m, s in zip(med, mine)]).T
        ax.errorbar(mib, med, yerr=spread, fmt="o", capsize=3, color=HEAD_COLORS[i], label=f"measured, g = {g}")
    span = np.array(
        [
            min(s["weight_bytes"] + s["cache_bytes"] for s in steps),
            max(s["weight_bytes"] + s["cache_bytes"] for s in steps),
        ]
    )
    ax.plot(span / 2**20, span / bandwidth * 1e3, "--", color="0.4", label=f"bytes / {bandwidth / 1e9:.0f} GB/s")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("bytes read per step (MiB): weights + KV cache")
    ax.set_ylabel("median step time (ms), bars: IQR")
    ax.set_title("one decoding step, measured against its roofline")
    ax.legend(fontsize=9)
    return fig
