"""Time what text costs a live explorer: two 5 x 5 heatmaps' cell numbers (50 labels) rewritten
with new values and drawn, on matplotlib's plain Agg canvas and on the glyph-caching canvas the
live explorers use (:mod:`mha.viz.glyphs`).

Usage: python -m benchmarks.bench_text [rounds]

Prints the first round (every glyph new to the cache) and the median of the rounds after it, in ms.
"""

from __future__ import annotations

import statistics
import sys
import time


def time_labels(canvas_class, rounds: int = 40) -> tuple[float, float]:
    import matplotlib.pyplot as plt
    import numpy as np

    rng = np.random.default_rng(0)
    fig, axes = plt.subplots(1, 2, figsize=(7, 3.5), dpi=80)
    texts = [
        ax.text(j, i, "0.00", ha="center", va="center", fontsize=9) for ax in axes for i in range(5) for j in range(5)
    ]
    for ax in axes:
        ax.set_xlim(-0.5, 4.5)
        ax.set_ylim(4.5, -0.5)
    canvas_class(fig)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    times = []
    for _ in range(rounds):
        for text in texts:
            text.set_text(f"{rng.random():.2f}")
        start = time.perf_counter()
        for text in texts:
            text.draw(renderer)
        times.append((time.perf_counter() - start) * 1e3)
    plt.close(fig)
    return times[0], statistics.median(times[1:])


def main(argv) -> int:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from mha.viz import glyphs

    rounds = int(argv[0]) if argv else 40
    glyphs.clear()
    for name, canvas in (("plain Agg canvas", FigureCanvasAgg), ("glyph cache (mha.viz.glyphs)", glyphs.GlyphCanvas)):
        first, median = time_labels(canvas, rounds)
        print(f"{name:30s} 50 labels: first {first:5.1f} ms, then median {median:5.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
