"""The chapters' explorers on the fast path: each LiveFigure's ``update`` changes one
figure in place and gives the picture a new figure would, its ``draw`` is the chapter's plot
function (the book's frames), layouts are drawn ahead, and the worked example's and the
pretrained-heads chapter's typed input is checked with a one-line message.
"""

import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from PIL import Image  # noqa: E402

from mha import bert  # noqa: E402
from mha.chapters.costs import figures as costs_figures  # noqa: E402
from mha.chapters.fast import figures as fast_figures  # noqa: E402
from mha.chapters.fast import perf_results  # noqa: E402
from mha.chapters.heads import figures as heads_figures  # noqa: E402
from mha.chapters.merging import figures as merging_figures  # noqa: E402
from mha.chapters.multi_head_math import figures as multi_head_math_figures  # noqa: E402
from mha.chapters.pretrained import figures as pretrained_figures  # noqa: E402
from mha.chapters.pretrained import pretrained_analysis as P  # noqa: E402
from mha.chapters.pretrained import pretrained_twins as TW  # noqa: E402
from mha.chapters.worked_example import figures as worked_example_figures  # noqa: E402
from mha.chapters.worked_example import worked, worked_edit  # noqa: E402
from mha.viz import widgets  # noqa: E402
from mha.viz.controls import Choice, FloatRange, Text  # noqa: E402
from mha.viz.frames import canvas_png  # noqa: E402
from mha.viz.live import Painter, updates_in_place  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def no_figures_left(monkeypatch):
    monkeypatch.setattr(widgets, "_id_counts", {})
    monkeypatch.delenv("MHA_EXPLORERS", raising=False)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    yield
    plt.close("all")


def pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)


def fresh(plot, values) -> np.ndarray:
    fig = plot.draw(**values)
    plt.close(fig)
    return pixels(canvas_png(fig))


#: (figure, values in the order a reader moves through them, the share of pixels allowed to differ
#: from a new figure: 0 where the layout is fixed; a little where a new figure's tight_layout
#: would move a margin for longer tick labels, which an in-place update keeps where it was).
CASES = {
    "ch01 split": (heads_figures.SplitPlot(), [{"split": s} for s in (0.0, 0.5, 0.37, 1.0)], 0.0),
    "ch01 head maps": (
        heads_figures.HeadMaps(),
        [{"num_heads": h, "seed": s} for h, s in ((1, 0), (1, 2), (4, 0), (4, 1), (1, 0))],
        0.15,
    ),
    "ch02 scaling": (
        multi_head_math_figures.ScalingPlot(),
        [{"d_k": d, "scale": s} for d, s in ((4, "1 (no scaling)"), (4, "1/d_k"), (1000, "1/√d_k"), (4, "1/√d_k"))],
        0.1,
    ),
    "ch02 split heads": (
        multi_head_math_figures.HeadSplitPlot(),
        [{"num_heads": h} for h in (1, 12, 3, 4, 6, 2, 1)],
        0.0,
    ),
    "ch03 explorer": (
        worked_example_figures.WorkedPlot(),
        [{"dog_type": d, "temperature": t} for d, t in (("noun", 1), ("verb", 1), ("none", 0.37), ("det", 2.0))],
        0.0,
    ),
    "ch03 own example": (
        worked_example_figures.SentenceExample(),
        [
            {"tokens": w, "temperature": t}
            for w, t in (("the cat saw the dog", 1), ("the dog the cat saw", 0.5), ("a cat bit a mouse", 1.7))
        ],
        0.0,
    ),
    "ch04 cost": (
        costs_figures.CostPlot(),
        [{"d_model": 768, "num_heads": 12, "seq_len": n} for n in (1024, 64, 30000, 4608)],
        0.0,
    ),
    "ch04 kv": (
        costs_figures.KVPlot(),
        [
            {"num_kv_heads": g, "num_layers": 32, "batch_size": b, "precision": "fp16"}
            for g, b in ((32, 1), (8, 1), (1, 1), (32, 40), (32, 1))
        ],
        0.1,
    ),
    "ch05 merge": (
        merging_figures.MergePlot(),
        [
            {"merge": m, "sentence": s}
            for m, s in (("average", "cat chases mouse"), ("gated", "mouse chases cat"), ("concat", "dog chases mouse"))
        ],
        0.01,
    ),
    "ch06 stored benchmark": (
        fast_figures.StoredBenchmark(perf_results.load_results(ROOT / "benchmarks" / "results" / "cpu.json")[0]),
        [{"measure": m, "seq_len": t} for m, t in (("forward", 512), ("forward+backward", 128), ("forward", 512))],
        0.0,
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_an_update_in_place_looks_like_a_new_figure(name):
    plot, moves, tolerance = CASES[name]
    assert updates_in_place(plot)
    painter = Painter(plot, name)
    for values in moves:
        shown = pixels(painter.png(values))
        expected = fresh(plot, values)
        assert shown.shape == expected.shape, (values, shown.shape, expected.shape)
        differ = float((np.abs(shown - expected).sum(axis=-1) > 0).mean())
        assert differ <= tolerance, f"{name} {values}: {differ:.3%} of the pixels differ from a new figure"
    layouts = {painter._layout(v) for v in moves}
    assert len(painter.figures) == len(layouts)  # one figure per layout, every other move in place


def test_draw_is_the_chapters_plot_function():
    pairs = [
        (heads_figures.SplitPlot().draw(split=0.3), heads_figures.render_split(0.3)),
        (heads_figures.HeadMaps().draw(num_heads=2, seed=1), heads_figures.render_head_maps(2, 1)),
        (
            multi_head_math_figures.ScalingPlot().draw(d_k=16, scale="1/d_k"),
            multi_head_math_figures.render_scaling(16, "1/d_k"),
        ),
        (
            worked_example_figures.WorkedPlot().draw(dog_type="verb", temperature=0.5),
            worked_example_figures.render_explorer("verb", 0.5),
        ),
        (costs_figures.CostPlot().draw(768, 3, 4608), costs_figures.render_cost(768, 3, 4608)),
        (costs_figures.KVPlot().draw(8, 80, 8, "8-bit"), costs_figures.render_kv(8, 80, 8, "8-bit")),
        (
            merging_figures.MergePlot().draw("weighted", "dog chases mouse"),
            merging_figures.plot_merge_example("weighted", "dog chases mouse"),
        ),
    ]
    for a, b in pairs:
        plt.close("all")
        assert np.array_equal(pixels(canvas_png(a)), pixels(canvas_png(b)))


def test_the_split_title_keeps_the_books_decimals():
    assert heads_figures._split_text(0.5) == "0.5" and heads_figures._split_text(0.0) == "0.0"
    assert heads_figures._split_text(0.37) == "0.37"


def test_other_layouts_are_drawn_ahead_and_then_updated_in_place():
    ex = widgets.Explorer(
        heads_figures.HeadMaps(), {"num_heads": [1, 2, 4, 8], "seed": [0, 1, 2]}, title="Maps", mode="live"
    )
    view = ex.view
    assert list(ex.painter.figures) == [1] and [v["num_heads"] for v in ex.painter.pending] == [2, 4, 8]
    view.warm_all()
    assert sorted(ex.painter.figures) == [1, 2, 4, 8] and not ex.painter.pending
    figures = dict(ex.painter.figures)
    ex.inputs["num_heads"].value = 8
    ex.inputs["seed"].value = 2
    assert ex.painter.figures == figures  # no new figure: the one drawn ahead, updated
    assert np.array_equal(pixels(view.data)[..., :3], pixels(ex.painter.png({"num_heads": 8, "seed": 2})))


def test_a_figure_without_layouts_plans_nothing():
    painter = Painter(multi_head_math_figures.HeadSplitPlot(), "split")
    assert painter.plan_warm({"num_heads": Choice([1, 2])}, {"num_heads": 1}) == 0
    assert painter.warm_step() is False


# ---- the worked example: your own five words -------------------------------------------------------


def test_a_sentence_becomes_the_pages_input_layout():
    assert torch.equal(worked_edit.sentence_x("the cat saw the dog"), worked.canonical_x())
    ex = worked_edit.sentence_example(["The", "dog", "the", "cat", "saw"], temperature=0.5)
    assert ex.tokens == ["the", "dog", "the", "cat", "saw"] and ex.temperature == 0.5
    assert torch.allclose(ex.weights.sum(-1), torch.ones(2, 5, dtype=torch.float64))
    assert "head 2 puts its largest weight" in worked_edit.sentence_alt("the dog the cat saw")


@pytest.mark.parametrize(
    "tokens, error, match",
    [
        ("", ValueError, "tokens must be 5 words, found 0"),
        ("the cat sat on the mat", ValueError, "tokens must be 5 words, found 6"),
        ("the cat sat the dog", ValueError, "'sat' is not in the vocabulary; pick words from det: the, a; noun:"),
        (5, TypeError, "tokens must be a string of 5 words, found int"),
        (["the", 1], TypeError, "found list"),
    ],
)
def test_bad_words_get_one_line_naming_the_problem(tokens, error, match):
    with pytest.raises(error, match=match):
        worked_edit.sentence_example(tokens)


def test_a_bad_sentence_in_the_live_box_shows_a_message_and_keeps_the_figure():
    ex = widgets.Explorer(
        worked_example_figures.SentenceExample(),
        {"tokens": Text("the cat saw the dog"), "temperature": FloatRange(0.1, 2, 0.01, grid=[1])},
        title="Own",
        mode="live",
    )
    before = ex.view.data
    ex.inputs["tokens"].value = "the cat sat the dog"
    assert "ValueError: &#x27;sat&#x27; is not in the vocabulary" in ex.view.status.value
    assert "Traceback" not in ex.view.status.value and ex.view.data == before
    ex.inputs["tokens"].value = "a mouse bit a cat"
    assert ex.view.status.value == "" and ex.view.data != before


# ---- the pretrained-heads chapter: your own sentence -----------------------------------------------


@pytest.fixture(scope="module")
def model_and_tokenizer():
    try:
        folder = bert.model_dir()
    except ModuleNotFoundError as exc:
        pytest.skip(str(exc))
    return bert.load_model(folder).double(), bert.load_tokenizer(folder)


def test_your_own_sentence_runs_the_model_and_updates_in_place(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    twins = P.it_resolution(model, tokenizer)
    plot = pretrained_figures.twin_sentence_heads(model, tokenizer, twins)
    tired = P.TWIN_SENTENCES["tired"]
    book = pretrained_figures.layer_explorer(twins)(layer=2, sentence="tired")  # the book's frame, as before
    plt.close("all")
    assert np.array_equal(pixels(canvas_png(plot.draw(layer=2, sentence=tired))), pixels(canvas_png(book)))
    long = "The old fisherman told his grandson a long story about the storm that sank the boat last winter"
    painter = Painter(plot, "own")
    for values in ({"layer": 2, "sentence": tired}, {"layer": 3, "sentence": long}, {"layer": 1, "sentence": tired}):
        assert np.array_equal(pixels(painter.png(values)), fresh(plot, values)), values
    assert len(painter.figures) == 1 and plot.budget_ms == (300.0, 300.0)
    tokens, maps = plot.recent[long]
    assert len(tokens) == 20 and maps.shape == (6, 12, 20, 20)


@pytest.mark.parametrize(
    "sentence, error, match",
    [
        ("", ValueError, "sentence is empty: type a sentence and press Enter"),
        ("  \n ", ValueError, "sentence is empty"),
        ("word " * 50, ValueError, "sentence has 52 tokens with \\[CLS\\] and \\[SEP\\], more than the 40"),
        (None, TypeError, "sentence must be a string, found NoneType"),
    ],
)
def test_a_bad_sentence_is_refused_with_one_line(model_and_tokenizer, sentence, error, match):
    model, tokenizer = model_and_tokenizer
    with pytest.raises(error, match=match):
        TW.sentence_attention(model, tokenizer, sentence)


def test_a_bad_layer_is_refused(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    plot = pretrained_figures.SentenceHeads(model, tokenizer)
    with pytest.raises(ValueError, match="layer must be a layer number 1..6, found 7"):
        plot.draw(layer=7, sentence="A cat sat.")
