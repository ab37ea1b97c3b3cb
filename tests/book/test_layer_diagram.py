"""The multi-head-math chapter's whole-layer diagram: the committed SVGs are what the code draws, legible, in
both languages."""

import re
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import mha  # noqa: E402
from mha.chapters.multi_head_math import layer_diagram  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CHAPTER = ROOT / "chapters" / "02_multi_head_math.md"
sys.path.insert(0, str(ROOT / "scripts"))
import make_figures  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.mark.parametrize("path", list(make_figures.figure_files()), ids=lambda p: p.name)
def test_committed_svg_is_what_the_script_draws(path):
    expected = make_figures.figure_files()[path]
    assert path.exists(), f"{path.name} is missing: run python scripts/make_figures.py"
    assert path.read_text(encoding="utf-8") == expected, f"{path.name} is stale: run python scripts/make_figures.py"


def test_svg_is_deterministic_and_keeps_text_as_text():
    first, second = layer_diagram.layer_svg("en"), layer_diagram.layer_svg("en")
    assert first == second
    assert "<text" in first and "One multi-head attention layer" in first  # text, not glyph paths
    assert "dc:date" not in first and "Matplotlib v" not in first  # no date, no version


def _displayed_width(image: str) -> float:
    """The ``:width:`` (px) of the chapter's ``{figure}`` directive that shows ``image``."""
    text = CHAPTER.read_text(encoding="utf-8")
    match = re.search(r"```\{figure\} images/" + re.escape(image) + r"\n((?::[^\n]*\n)*)", text)
    assert match, f"the multi-head-math chapter shows no {{figure}} images/{image}"
    width = re.search(r"^:width: (\d+)px$", match.group(1), re.M)
    assert width, "the figure directive must give its :width: in px"
    return float(width.group(1))


def test_chapter_displays_the_figure_at_the_width_the_module_assumes():
    assert _displayed_width("mha_layer.svg") == layer_diagram.DISPLAY_WIDTH_PX


@pytest.mark.parametrize("lang", list(layer_diagram.LANGUAGES))
def test_smallest_text_is_legible_at_column_width_and_on_a_phone(lang):
    svg = layer_diagram.layer_svg(lang)
    width = _displayed_width("mha_layer.svg")
    assert layer_diagram.smallest_font_px(svg, width) >= 9.0  # the book's column
    # on a 390-px phone the image shrinks to the column (max-width: 100%), never below PHONE_WIDTH_PX
    assert layer_diagram.smallest_font_px(svg, min(width, layer_diagram.PHONE_WIDTH_PX)) >= 9.0
    assert layer_diagram.svg_width(svg) < layer_diagram.DISPLAY_WIDTH_PX  # drawn narrow, not scaled down
    height = float(re.search(r'viewBox="0 0 [\d.]+ ([\d.]+)"', svg).group(1))
    assert height > 1.5 * layer_diagram.svg_width(svg)  # tall rather than wide


def test_smallest_font_px_scales_with_the_displayed_width():
    svg = '<svg viewBox="0 0 200 400"><text style="font-size: 10px">a</text>'
    svg += '<tspan style="font-size: 8px">b</tspan></svg>'
    assert layer_diagram.font_sizes(svg) == [10.0, 8.0]
    assert layer_diagram.smallest_font_px(svg, 400) == 16.0
    with pytest.raises(ValueError, match="viewBox"):
        layer_diagram.svg_width("<svg></svg>")


def test_labels_in_the_reader_language():
    assert set(layer_diagram.LABELS["en"]) == set(layer_diagram.LABELS["zh_CN"])
    zh = layer_diagram.layer_svg("zh_CN")
    for label in ("一个多头注意力层", "分数", "权重", "拼接", "头 1"):
        assert label in zh
    english_words = [v for v in layer_diagram.LABELS["en"].values() if re.search(r"[a-z]{4}", v)]
    assert not [w for w in english_words if w.format(n=5, d_model=8, h=2, d_k=4, i=1) in zh]
    assert re.search(r"[\u4e00-\u9fff]", zh) and not re.search(r"[\u4e00-\u9fff]", layer_diagram.layer_svg("en"))


@pytest.mark.parametrize("n, m", [(5, 5), (5, 7)])
def test_layer_shapes_are_those_of_the_module(n, m):
    """The shapes the figure prints are those of mha.MultiHeadAttention's tensors (batch of one)."""
    torch.manual_seed(0)
    attn = mha.MultiHeadAttention(8, 2).double()
    x = torch.randn(1, n, 8, dtype=torch.float64)
    memory = torch.randn(1, m, 8, dtype=torch.float64)
    q, k, v = (mha.split_heads(p(t), 2) for p, t in ((attn.q_proj, x), (attn.k_proj, memory), (attn.v_proj, memory)))
    context, weights = mha.scaled_dot_product_attention(q, k, v)
    merged = mha.merge_heads(context)
    output, _ = attn(x, memory, memory)
    got = {
        "x": x[0].shape,
        "q": attn.q_proj(x)[0].shape,
        "k": attn.k_proj(memory)[0].shape,
        "v": attn.v_proj(memory)[0].shape,
        "q_heads": q[0].shape,
        "k_heads": k[0].shape,
        "v_heads": v[0].shape,
        "scores": weights[0].shape,
        "weights": weights[0].shape,
        "context": context[0].shape,
        "concat": merged[0].shape,
        "output": output[0].shape,
    }
    assert {name: tuple(s) for name, s in got.items()} == layer_diagram.layer_shapes(n, 8, 2, m=m)


def test_draw_layer_refuses_what_it_cannot_draw():
    with pytest.raises(ValueError, match="lang must be one of"):
        layer_diagram.draw_layer(lang="fr")
    with pytest.raises(ValueError, match="one cell per number"):
        layer_diagram.draw_layer(n=50)
    with pytest.raises(ValueError, match=r"d_model \(8\) must be divisible by num_heads \(3\)"):
        layer_diagram.layer_shapes(5, 8, 3)
    fig = layer_diagram.draw_layer(4, 6, 3)  # other sizes draw too
    assert fig.get_figwidth() == layer_diagram.WIDTH_PT / 72
