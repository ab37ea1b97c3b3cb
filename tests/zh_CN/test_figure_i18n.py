"""The words inside the figures and explorer frames of the Chinese edition, without a browser.

Every stored figure and frame of ``book/*.ipynb`` has a Chinese twin (``locales/zh_CN/figures`` and
``frames``, drawn by :mod:`mha.viz.figure_i18n` when the chapters are executed), no twin is left that no
image names, each twin draws the same numbers as its English image and no English word outside
:data:`ALLOWED`, at about the same size, and the CJK font the twins are drawn in has every character
the phrasebooks use. The translator itself is checked first, on figures made here.
"""

from __future__ import annotations

import collections
import hashlib
import io
import json
import re
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from mha.viz import figure_i18n  # noqa: E402
from mha.viz.frames import figure_png  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))
TWINS = ROOT / "locales" / "zh_CN"

#: English words a Chinese figure may draw (reviewed): the example sentences' tokens (the model reads
#: English; "didn't" is split into didn + 't by BERT's tokenizer), code and library names, proper
#: names and abbreviations, units.
TOKENS = (
    "the cat chased mouse chases saw dog bit The animal didn didn't cross street because it was too tired wide CLS SEP"
).split()
CODE = (
    "softmax mha torch SDPA PyTorch BERT MiniLM Adam concat concat_lowrank average weighted gated "
    "fp bf int GQA MQA MHA KV CPU cpu GPU float d_model head_dim seq_len num_heads log nn MultiheadAttention "
    "average_attn_weights view transpose Dh MLP"
).split()
NAMES = "Llama Michel".split()  # a model, an author (Michel et al., 2019)
UNITS = "ms MB GB KB KiB MiB GiB kB FLOPs GFLOP IQR".split()
ALLOWED = set(TOKENS) | set(CODE) | set(NAMES) | set(UNITS)
#: Phrases that are code as a whole: the benchmarked implementations' names (as the explorers' own
#: dropdowns show them) and the pretrained-heads chapter's formula
#: weight(it -> noun).
CODE_PHRASES = re.compile(
    r"mha (?:looped|weights|fused SDPA|SDPA|is_causal|causal mask)|torch (?:default|no weights)|bare is_causal|"
    r"weight\(it -> \w+\)"
)
WORD = re.compile(r"[A-Za-z][A-Za-z_']+")
NUMBER = re.compile(r"\d+(?:\.\d+)?")


def english_words(text: str) -> list[str]:
    """The English words of a drawn string that are not allowed (math and code spans aside)."""
    text = CODE_PHRASES.sub("", re.sub(r"\$[^$]*\$", "", text))
    return [w for w in WORD.findall(text) if w not in ALLOWED and w.strip("'") not in ALLOWED]


def numbers(texts) -> collections.Counter:
    """The numbers drawn, math written as plain text (``$8\\,n$`` draws 8 and n)."""
    plain = (figure_i18n.plain_math(text) if "$" in text else text for text in texts)
    return collections.Counter(n for text in plain for n in NUMBER.findall(text))


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


# --------------------------------------------------------------------------------------------
# The translator, on strings and figures made here
# --------------------------------------------------------------------------------------------


def test_template_holds_numbers_and_math():
    assert figure_i18n.template("head 3 of $d_k$ = 0.25") == ("head {0} of {1} = {2}", ["3", "$d_k$", "0.25"])
    assert figure_i18n.template("{x}: $d_{\\mathrm{model}}$") == ("{{x}}: {0}", ["$d_{\\mathrm{model}}$"])
    assert figure_i18n.translate("block: $6\\,d_{\\mathrm{model}}$") == "块：$6\\,d_{\\mathrm{model}}$"  # math as drawn


def test_translate_copies_numbers_and_keeps_what_it_cannot_translate():
    assert figure_i18n.translate("head 12") == "头 12"
    assert figure_i18n.translate("  head 12\n") == "  头 12\n"
    assert figure_i18n.translate("0.25") == "0.25"
    figure_i18n.MISSING.discard("no such words here")
    assert figure_i18n.translate("no such words here") == "no such words here"
    assert "no such words here" in figure_i18n.MISSING


def test_in_chinese_draws_chinese_and_restores_the_figure():
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.bar(["head 1", "head 2"], [1, 2])
    ax.set_title("head 3")
    english = figure_png(fig)
    twin, pairs = figure_i18n.draw_in_chinese(fig, figure_png)
    assert ["head 1", "头 1"] in pairs and ["head 3", "头 3"] in pairs  # tick labels set by a formatter too
    assert twin != english
    assert figure_png(fig) == english  # the English figure is untouched
    assert ax.get_title() == "head 3" and ax.get_title() in [t for t, _ in pairs]


def test_the_font_has_every_character_of_the_translations():
    from fontTools.ttLib import TTFont
    from matplotlib import font_manager

    cmap = TTFont(figure_i18n.FONT_FILE).getBestCmap()
    latin = TTFont(font_manager.findfont("DejaVu Sans")).getBestCmap()  # drawn first, the subset after it
    used = {c for path in figure_i18n.PHRASEBOOKS for v in json.loads(path.read_text("utf-8")).values() for c in v}
    lacking = sorted(c for c in used if c.isprintable() and ord(c) not in cmap and ord(c) not in latin)
    assert lacking == [], f"run scripts/subset_cjk_font.py: the font lacks {''.join(lacking)}"
    assert figure_i18n.FONT_FILE.stat().st_size < 400_000
    assert (figure_i18n.FONT_FILE.parent / "OFL.txt").exists()


# --------------------------------------------------------------------------------------------
# The stored twins
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stored():
    """``{kind: {sha256: English image bytes}}`` of every stored figure and frame."""
    found = {kind: {} for kind in figure_i18n.KINDS}
    for path in NOTEBOOKS:
        for kind, images in figure_i18n.notebook_images(json.loads(path.read_text("utf-8"))).items():
            found[kind].update({hashlib.sha256(image).hexdigest(): image for image in images})
    return found


@pytest.mark.parametrize("kind", figure_i18n.KINDS)
def test_every_stored_image_has_its_twin_and_no_twin_is_stale(stored, kind):
    index = figure_i18n.twin_index(TWINS, kind)
    assert stored[kind], "no stored images found"
    assert sorted(set(stored[kind]) - set(index)) == [], "run scripts/execute_notebooks.py on their chapters"
    assert sorted(set(index) - set(stored[kind])) == [], "stale twins: scripts/execute_notebooks.py prunes them"
    files = {p.name for p in (TWINS / kind).iterdir()} - {"index.json"}
    assert files == {entry["file"] for entry in index.values()}


@pytest.mark.parametrize("kind", figure_i18n.KINDS)
def test_twins_draw_the_same_numbers_and_no_english_word(kind):
    left, changed = {}, []
    for digest, entry in figure_i18n.twin_index(TWINS, kind).items():
        english = [en for en, _ in entry["texts"]]
        chinese = [zh for _, zh in entry["texts"]]
        assert numbers(english) == numbers(chinese), (digest, entry["texts"])
        for zh in chinese:
            for word in english_words(zh):
                left.setdefault(word, zh)
        changed.append(english != chinese)
    assert left == {}, f"English words left in the {kind}' twins: {left}"
    assert all(changed), "a twin whose strings are all the English ones"


@pytest.mark.parametrize("kind", figure_i18n.KINDS)
def test_twins_keep_their_images_size(stored, kind):
    from PIL import Image

    for digest, entry in figure_i18n.twin_index(TWINS, kind).items():
        english = Image.open(io.BytesIO(stored[kind][digest]))
        twin = Image.open(TWINS / kind / entry["file"])
        assert twin.size == tuple(entry["size"])
        for a, b in zip(english.size, twin.size):  # the same size class: the page's layout holds
            assert 0.8 <= b / a <= 1.25, (digest, english.size, twin.size)


# --------------------------------------------------------------------------------------------
# Chinese words have other widths: the layout checks hold on the twins
# --------------------------------------------------------------------------------------------


def book_figures():
    """The figures ``tests/book/test_figure_layout.py`` holds to its measures, drawn as the chapters draw them."""
    from mha.chapters.costs import figures as costs_figures
    from mha.chapters.fast import figures as fast_figures
    from mha.chapters.fast import perf_results
    from mha.chapters.heads import figures as heads_figures
    from mha.chapters.merging import figures as merging_figures
    from mha.chapters.merging import merge_training

    cpu = perf_results.load_results(ROOT / "benchmarks" / "results" / "cpu.json")[0]
    runs = merge_training.load_merge_results()
    yield "ch08 curves", lambda: heads_figures.plot_curve_panels()
    yield "ch09 merge curves", lambda: merging_figures.plot_merge_curves(runs)
    yield "ch09 lr sweep", lambda: merging_figures.plot_lr_sweep(runs)
    yield "ch09 merge results", lambda: merging_figures.plot_merge_results(runs, 1500)
    yield "ch10 benchmark", lambda: fast_figures.render_benchmark(cpu, "forward", perf_results.seq_lens(cpu)[0])
    for values in [(1, 32, 1, "fp16"), (32, 80, 8, "8-bit")]:
        yield f"ch05 kv {values}", lambda values=values: costs_figures.render_kv(*values)


def test_chinese_twins_keep_texts_apart_and_off_the_data():
    from tests.book.test_figure_layout import clean

    found = {}
    for name, draw in book_figures():
        fig = draw()
        assert clean(fig) == {}, name  # the English figure, as test_figure_layout checks it
        with figure_i18n.in_chinese(fig):
            problems = clean(fig)
            drawn = [t.get_text() for t in figure_i18n.drawn_texts(fig)]
        if problems:
            found[name] = problems
        assert any(re.search(r"[\u4e00-\u9fff]", t) for t in drawn), f"{name}: no Chinese drawn"
        plt.close(fig)
    assert found == {}


def test_a_glyph_the_font_lacks_is_reported_not_printed(recwarn):
    fig, ax = plt.subplots(figsize=(2, 1))
    ax.set_title("\N{CJK UNIFIED IDEOGRAPH-9F98}")  # 龘: in no phrasebook, so not in the subset
    figure_png(fig)
    recwarn.clear()
    figure_i18n.draw_in_chinese(fig, figure_png)
    assert not [w for w in recwarn if "Glyph" in str(w.message)]  # nothing reaches the cell's output
    assert any("Glyph 40856" in text for text in figure_i18n.MISSING)


@pytest.mark.parametrize("kind", figure_i18n.KINDS)
def test_twins_draw_the_phrasebooks_translations_of_today(kind):
    """A translation changed since the twins were drawn: re-execute the chapters that draw it."""
    stale = {
        en: zh
        for entry in figure_i18n.twin_index(TWINS, kind).values()
        for en, zh in entry["texts"]
        if figure_i18n.translate(en) != zh
    }
    assert stale == {}, "run scripts/execute_notebooks.py on the chapters that draw these strings"
