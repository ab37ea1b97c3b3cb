"""No figure of the book hides its own data, measured on the drawn figure.

The measures (:mod:`mha.viz.layout`) are checked first on small figures made here, each with the
defect and without it; then the book's figures that had one are drawn as their chapters draw them,
from the stored results, and held to every measure:

* the making-it-fast chapter's memory plot: no line hidden under another (the legend named 7, 3 showed);
* the making-it-fast chapter's benchmark explorer: no bar label on its error bar;
* the head-count experiments' learning curves and the merging experiments' figures: no legend on the data;
* the merging experiments' parameter scatter: an x axis that spans the data, with a modest margin;
* the pretrained-heads chapter's margin scatter: no two labels on each other, no label on a point;
* the parameter-analysis chapter's KV-cache explorer (every frame, and the live figure as a reader moves it): the note
  on no line, the legend on no line.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from mha import viz  # noqa: E402
from mha.chapters.costs import figures as costs_figures  # noqa: E402
from mha.chapters.fast import figures as fast_figures  # noqa: E402
from mha.chapters.fast import perf_results  # noqa: E402
from mha.chapters.heads import figures as heads_figures  # noqa: E402
from mha.chapters.merging import figures as merging_figures  # noqa: E402
from mha.chapters.merging import merge_training  # noqa: E402
from mha.chapters.pretrained import figures as pretrained_figures  # noqa: E402
from mha.viz import layout  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MARGIN = 0.15  # the largest share of an axis a scatter may leave empty on either side of its data


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def clean(fig) -> dict:
    """Every measure that found something, by name: ``{}`` for a figure that hides nothing."""
    found = {
        "texts on texts": layout.overlapping_texts(fig),
        "texts on data": layout.texts_over_data(fig),
        "legends on data": layout.legends_over_data(fig),
        "hidden lines": [pair for ax in fig.axes for pair in layout.hidden_lines(ax)],
    }
    return {name: what for name, what in found.items() if what}


# --------------------------------------------------------------------------------------------
# The measures, on figures made here
# --------------------------------------------------------------------------------------------


def test_overlapping_texts_finds_two_labels_on_each_other():
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1], [0, 1])
    ax.text(0.5, 0.5, "L5H5")
    ax.text(0.52, 0.49, "L6H4")
    assert layout.overlapping_texts(fig) == [("L5H5", "L6H4")]
    ax.texts[1].set_position((0.52, 0.2))
    assert layout.overlapping_texts(fig) == []


def test_overlapping_texts_skips_tick_labels_that_are_not_drawn():
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1], [0, 1])
    ax.set_xticks([0, 0.5, 1, 5])  # 5 is off the axis: matplotlib keeps its label but draws none
    ax.set_xlim(0, 1)
    ax.text(0.98, -0.02, "near the edge")
    texts = [t.get_text() for t in layout.visible_texts(fig)]
    assert "5" not in texts and "1.0" in texts


def test_texts_over_data_finds_a_label_on_an_error_bar_cap():
    fig, ax = plt.subplots(figsize=(5, 2))
    ax.barh([0], [40], xerr=[[5], [5]], capsize=3)
    ax.set_xlim(0, 80)
    ax.text(45, 0, " 40 ms", va="center")  # where the making-it-fast chapter put it: on the cap
    assert layout.texts_over_data(fig)
    ax.texts[0].remove()
    ax.annotate("40 ms", (45, 0), xytext=(6, 0), textcoords="offset points", va="center")
    assert layout.texts_over_data(fig) == []


def test_texts_over_data_finds_a_note_on_a_dotted_line():
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.axvline(0.1, ls=":")
    ax.text(0.02, 0.9, "a note across the line", transform=ax.transAxes)
    assert layout.texts_over_data(fig)
    ax.texts[0].set_x(0.2)
    assert layout.texts_over_data(fig) == []


def test_legends_over_data_finds_a_legend_on_a_line():
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1], [0.5, 0.5], label="across the middle")
    ax.legend(loc="center")
    assert layout.legends_over_data(fig)
    layout.outside_legend(ax)
    assert layout.legends_over_data(fig) == []


def test_legends_over_data_reads_a_figure_legend_and_bars():
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.bar([0, 1], [1, 1], label="bars")
    fig.legend(loc="center")
    assert set(layout.legends_over_data(fig)) == {("bars", "bar", 1)}


def test_hidden_lines_finds_a_legend_entry_with_no_line_of_its_own():
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([1, 2, 4], [1, 4, 16], "o-", label="a")
    ax.plot([1, 2, 4], [1, 4, 16], "o-", label="b (same as a)")
    ax.plot([1, 2, 4], [1, 2, 4], "o-", label="c")
    ax.set_yscale("log")
    ax.legend()
    assert layout.hidden_lines(ax) == [("a", "b (same as a)")]
    ax.lines[1].remove()
    ax.legend()
    assert layout.hidden_lines(ax) == []


@pytest.mark.parametrize("scale", ["linear", "log"])
def test_empty_share_is_the_axis_outside_the_data(scale):
    fig, ax = plt.subplots()
    ax.scatter([10, 100], [0, 1])
    ax.set_xscale(scale)
    ax.set_xlim(1, 1000) if scale == "log" else ax.set_xlim(0, 190)
    low, high = layout.empty_share(ax)
    assert (low, high) == pytest.approx((1 / 3, 1 / 3) if scale == "log" else (10 / 190, 90 / 190))


def test_place_labels_keeps_labels_apart():
    fig, ax = plt.subplots(figsize=(5, 4))
    points = [(0.50, 0.50), (0.51, 0.49), (0.52, 0.51)]
    ax.scatter(*zip(*points), s=22)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    for (x, y), label in zip(points, ["L5H5", "L6H4", "L1H1"]):  # the old way: each up and right
        ax.annotate(label, (x, y), xytext=(4, 4), textcoords="offset points", fontsize=8)
    assert layout.overlapping_texts(fig)
    for text in list(ax.texts):
        text.remove()
    layout.place_labels(ax, points, ["L5H5", "L6H4", "L1H1"], fontsize=8)
    assert layout.overlapping_texts(fig) == [] and layout.texts_over_data(fig) == []


# --------------------------------------------------------------------------------------------
# The book's figures
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cpu():
    return perf_results.load_results(ROOT / "benchmarks" / "results" / "cpu.json")[0]


@pytest.fixture(scope="module")
def runs():
    return merge_training.load_merge_results()


def test_ch10_memory_shows_every_implementation_it_names(cpu):
    viz.plotting.use_style()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))  # as the making-it-fast chapter draws it
    fast_figures.plot_memory_vs_seq_len(cpu, ax=ax)
    assert clean(fig) == {}
    entries = [t.get_text() for t in ax.get_legend().get_texts()]
    named = [name.strip() for entry in entries for name in entry.replace("\n", " ").split(" = ")]
    assert sorted(named) == sorted(perf_results.SHORT_NAMES[i] for i in perf_results.MAIN_IMPLS)
    assert len(ax.lines) == len(entries) < len(perf_results.MAIN_IMPLS)  # the stored run has equal ones


def test_ch10_bar_labels_stand_clear_of_their_error_bars(cpu):
    for measure, seq_len in itertools.product(("forward", "forward+backward"), perf_results.seq_lens(cpu)):
        fig = fast_figures.render_benchmark(cpu, measure, seq_len)
        assert clean(fig) == {}, (measure, seq_len)
        plt.close(fig)


def test_ch08_legend_is_off_the_curves():
    fig = heads_figures.plot_curve_panels()
    assert clean(fig) == {}
    (legend,) = [ax.get_legend() for ax in fig.axes if ax.get_legend()]  # one for both panels
    assert [t.get_text() for t in legend.get_texts()] == ["h = 1", "h = 2", "h = 4", "h = 8"]


def test_ch09_figures_keep_legends_off_the_data(runs):
    assert clean(merging_figures.plot_merge_curves(runs)) == {}
    assert clean(merging_figures.plot_lr_sweep(runs)) == {}


@pytest.mark.parametrize("steps", [1500, 12_000])
def test_ch09_parameter_axis_spans_the_data(runs, steps):
    fig = merging_figures.plot_merge_results(runs, steps)
    (ax,) = fig.axes
    low, high = layout.empty_share(ax, "x")
    assert 0 < low <= MARGIN and 0 < high <= MARGIN, (ax.get_xlim(), low, high)
    assert "does not start at 0" in ax.get_xlabel()
    assert clean(fig) == {}


def test_ch11_margin_labels_overlap_nothing():
    from mha import bert
    from mha.chapters.pretrained import pretrained_analysis

    try:
        folder = bert.model_dir()
    except ModuleNotFoundError as exc:
        pytest.skip(str(exc))
    model = bert.load_model(folder).double()  # as the pretrained-heads chapter runs it
    twins = pretrained_analysis.it_resolution(model, bert.load_tokenizer(folder))
    fig = pretrained_figures.plot_it_margins(twins)
    assert clean(fig) == {}
    labels = [t.get_text() for t in fig.axes[0].texts if t.get_text().startswith("L")]
    assert {"L5H5", "L6H4", "L4H2", "L6H12"} <= set(labels)


KV_FRAMES = list(itertools.product(*costs_figures.KV_CONTROLS.values()))


@pytest.mark.parametrize("values", KV_FRAMES, ids=["-".join(map(str, v)) for v in KV_FRAMES])
def test_ch05_kv_frames_keep_the_note_and_legend_off_the_lines(values):
    assert clean(costs_figures.render_kv(*values)) == {}


def test_ch05_kv_live_figure_keeps_the_note_off_the_lines():
    plot = costs_figures.KVPlot()
    fig = plot.draw()
    for batch_size in (1, 3, 17, 64):  # the live slider runs 1 to 64
        for g, layers in ((1, 32), (32, 80)):
            plot.update(fig, g, layers, batch_size, "fp16")
            assert clean(fig) == {}, (g, layers, batch_size)
