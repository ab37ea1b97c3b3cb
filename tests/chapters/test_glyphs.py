"""The live explorers' text cache (:mod:`mha.viz.glyphs`): a canvas that renders each glyph once
gives the pixels of matplotlib's plain Agg canvas, bit for bit, on its first draw and on every
later one, and renders nothing again for text it has drawn before."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402

from mha.chapters.worked_example.figures import WorkedPlot  # noqa: E402
from mha.viz import glyphs  # noqa: E402
from mha.viz.glyphs import GlyphCanvas, GlyphRenderer  # noqa: E402
from mha.viz.live import Painter  # noqa: E402

pytestmark = pytest.mark.skipif(not glyphs.SUPPORTED, reason="this matplotlib lacks the private parts the cache uses")


@pytest.fixture(autouse=True)
def fresh_cache():
    glyphs.clear()
    yield
    glyphs.clear()
    plt.close("all")


def every_kind_of_text(numbers=0.0):
    """Cell numbers in two colours (one also at another size), rotated tick labels, mathtext, a transparent title, a
    monospace panel of several lines, text clipped by its axes, text without antialiasing."""
    fig, (ax, panel) = plt.subplots(1, 2, figsize=(7, 3.5), dpi=80)
    ax.imshow(np.arange(25).reshape(5, 5), cmap="viridis")
    for i in range(5):
        for j in range(5):
            ax.text(j, i, f"{(i * 5 + j) / 25 + numbers:.2f}", ha="center", va="center", fontsize=8, color="wk"[i % 2])
    ax.set_xticks(range(5), ["the", "cat", "saw", "a", "dog"], rotation=45, ha="right")
    ax.set_title(r"weights, $\sqrt{d_k}$ = 2", alpha=0.5)
    ax.text(0.6, 0.5, "clipped at the edge", transform=ax.transAxes, fontsize=20, clip_on=True)
    panel.axis("off")
    rows = "\n".join(f"q{k}  " + " ".join(f"{np.sin(k + c + numbers):6.3f}" for c in range(5)) for k in range(4))
    panel.text(0, 1, rows, family="monospace", fontsize=9, va="top")
    panel.text(0, 0, "no antialiasing √τ", antialiased=False, fontsize=12)
    panel.text(0.6, 0.2, "0.00", fontsize=14)  # a cell's string at another size
    fig.suptitle(f"temperature {1 + numbers:g}, √d τ")
    return fig


def drawn(fig, canvas_class) -> np.ndarray:
    canvas_class(fig)
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba()).copy()


def test_the_cached_canvas_draws_the_plain_canvas_pixels_then_renders_nothing_again():
    plain = drawn(every_kind_of_text(), FigureCanvasAgg)
    fig = every_kind_of_text()
    first = drawn(fig, GlyphCanvas)
    assert isinstance(fig.canvas.get_renderer(), GlyphRenderer)
    assert glyphs.stats["glyph_misses"] > 0 and glyphs.stats["layout_misses"] > 0
    np.testing.assert_array_equal(first, plain)
    misses = dict(glyphs.stats)
    fig.canvas.draw()
    np.testing.assert_array_equal(np.asarray(fig.canvas.buffer_rgba()), plain)
    assert glyphs.stats["glyph_misses"] == misses["glyph_misses"]
    assert glyphs.stats["layout_misses"] == misses["layout_misses"]
    assert glyphs.stats["glyph_hits"] > misses["glyph_hits"]


def test_new_numbers_reuse_the_digits_and_still_match_the_plain_canvas():
    drawn(every_kind_of_text(), GlyphCanvas)
    before = dict(glyphs.stats)
    changed = drawn(every_kind_of_text(numbers=0.37), GlyphCanvas)
    np.testing.assert_array_equal(changed, drawn(every_kind_of_text(numbers=0.37), FigureCanvasAgg))
    new_glyphs = glyphs.stats["glyph_misses"] - before["glyph_misses"]
    reused = glyphs.stats["glyph_hits"] - before["glyph_hits"]
    assert reused > 3 * new_glyphs  # most digits were rendered before, at the same sub-pixel offsets


def test_the_caches_stay_within_their_bounds(monkeypatch):
    monkeypatch.setattr(glyphs, "MAX_GLYPHS", 20)
    monkeypatch.setattr(glyphs, "MAX_LAYOUTS", 5)
    image = drawn(every_kind_of_text(), GlyphCanvas)
    np.testing.assert_array_equal(image, drawn(every_kind_of_text(), FigureCanvasAgg))
    assert len(glyphs._glyphs) == 20 and len(glyphs._layouts) == 5


def test_without_the_private_parts_it_draws_as_the_plain_canvas(monkeypatch):
    monkeypatch.setattr(glyphs, "SUPPORTED", False)
    image = drawn(every_kind_of_text(), GlyphCanvas)
    np.testing.assert_array_equal(image, drawn(every_kind_of_text(), FigureCanvasAgg))
    assert glyphs.stats["glyph_misses"] == glyphs.stats["glyph_hits"] == 0


def test_live_explorers_draw_on_the_cached_canvas():
    painter = Painter(WorkedPlot(), "worked example")
    painter.png({"dog_type": "noun", "temperature": 1.0})
    assert isinstance(painter.figure.canvas, GlyphCanvas)
    misses = glyphs.stats["glyph_misses"]
    painter.png({"dog_type": "noun", "temperature": 1.5})
    painter.png({"dog_type": "noun", "temperature": 1.0})
    assert glyphs.stats["glyph_misses"] - misses < misses / 2
