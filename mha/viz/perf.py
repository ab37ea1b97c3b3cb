"""Chapter 6's figures: stored benchmark timings and memory against sequence length, and its explorer.

The numbers come from :mod:`mha.chapters.perf` (which reads ``benchmarks/results/<device>.json``).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

from ..chapters.perf import IMPLS, SHORT_NAMES, median_ms, memory_bytes, seq_lens
from .plotting import HEAD_COLORS, use_style


def _plain_log_ticks(ax) -> None:
    """Log axis labelled 30, 100, 200 rather than 3x10^1, 10^2, 2x10^2."""
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.yaxis.set_minor_formatter(NullFormatter())


def _color(impl: str) -> str:

    return HEAD_COLORS[IMPLS.index(impl) % len(HEAD_COLORS)] if impl in IMPLS else "0.5"


def plot_time_vs_seq_len(report, *, key: str = "forward_backward", impls=IMPLS, ax=None):
    """Median time against T, one line per implementation (log-log), from a stored report."""
    what = "forward + backward" if key == "forward_backward" else "forward"
    title = f"{what}, {report['environment']['device']} {report['environment']['dtype']}"
    return _plot_vs_seq_len(
        report, "timings", lambda impl, t: median_ms(report, impl, t, key), "median time (ms)", title, impls, ax
    )


def plot_memory_vs_seq_len(report, *, impls=IMPLS, ax=None):
    """Activations saved for the backward pass (MiB) against T, from a stored report."""
    title = f"memory, batch {report['batch_size']}, {report['num_heads']} heads"
    return _plot_vs_seq_len(
        report,
        "memory",
        lambda impl, t: memory_bytes(report, impl, t) / 2**20,
        "saved for backward (MiB)",
        title,
        impls,
        ax,
    )


def _plot_vs_seq_len(report, table, value, ylabel, title, impls, ax):
    """One line per implementation of ``value(impl, T)`` against T, both axes logarithmic."""
    use_style()
    fig, ax = plt.subplots() if ax is None else (ax.figure, ax)
    lengths = seq_lens(report, table)
    for impl in impls:
        ax.plot(lengths, [value(impl, t) for t in lengths], "o-", color=_color(impl), label=SHORT_NAMES.get(impl, impl))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(lengths, [str(t) for t in lengths])
    ax.set_xlabel("sequence length T (tokens)")
    ax.set_ylabel(ylabel)
    _plain_log_ticks(ax)
    ax.set_title(title)
    ax.legend(fontsize=8)
    return fig


def render_benchmark(report, measure: str = "forward+backward", seq_len: int | None = None):
    """Explorer frame: horizontal bars of median time per implementation at one T.

    ``measure`` is ``"forward"`` or ``"forward+backward"``. The fastest bar is labelled 1.00x and
    each other bar with how many times slower it is.
    """
    key = {"forward": "forward", "forward+backward": "forward_backward"}.get(measure)
    if key is None:
        raise ValueError(f"measure must be 'forward' or 'forward+backward', found {measure!r}")
    seq_len = seq_lens(report)[-1] if seq_len is None else seq_len
    use_style()
    times = [median_ms(report, impl, seq_len, key) for impl in IMPLS]
    fastest = min(times)
    fig, ax = plt.subplots(figsize=(6.4, 2.8))
    y = list(range(len(IMPLS)))[::-1]
    ax.barh(y, times, color=[_color(i) for i in IMPLS])
    ax.set_yticks(y, [SHORT_NAMES[i] for i in IMPLS])
    for yi, t in zip(y, times):
        ax.text(t, yi, f" {t:.0f} ms ({t / fastest:.2f}x)", va="center", fontsize=8)
    ax.set_xlim(0, max(times) * 1.35)
    ax.set_xlabel("median time (ms)")
    ax.set_title(f"{measure}, T = {seq_len}, batch {report['batch_size']}, d_model {report['d_model']}")
    # fixed margins: tight_layout would draw the figure once more, a third of a frame's time
    fig.subplots_adjust(left=0.25, right=0.97, bottom=0.17, top=0.89)
    return fig
