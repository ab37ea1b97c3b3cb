"""The Chinese edition: complete, up to date with the English text, and consistent with the glossary.

* Every message of every page is translated and none is fuzzy; cross-references, inline math,
  inline code, links and numbers are the same as in the English; every glossary term the English
  uses appears in its Chinese form (``scripts/i18n.py check``).
* The catalogues hold exactly the messages of the current English pages: after an English paragraph
  changes, this test fails until ``make gettext`` has updated the catalogues and the paragraph is
  translated again.
* The checker itself catches each kind of mistake (tests below feed it wrong translations).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from babel.messages.pofile import read_po

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "_ext"))

import i18n  # noqa: E402
import mha_i18n  # noqa: E402


@pytest.fixture(scope="module")
def extracted() -> dict[str, set[str]]:
    """The messages of the current English pages, by page (a gettext build into _build/i18n)."""
    i18n.gettext()
    pages = {}
    for pot in sorted(i18n.POT_DIR.rglob("*.pot")):
        with pot.open("rb") as f:
            pages[str(pot.relative_to(i18n.POT_DIR).with_suffix(""))] = {m.id for m in read_po(f) if m.id}
    return pages


def test_every_page_has_a_catalogue_with_its_current_messages(extracted):
    catalogues = i18n.catalogues()
    assert set(catalogues) == set(extracted), (
        f"pages without a catalogue: {sorted(set(extracted) - set(catalogues))}; catalogues of no page: "
        f"{sorted(set(catalogues) - set(extracted))}. Run `make gettext`."
    )
    assert len(extracted) >= 12, f"only {len(extracted)} pages extracted"
    for page, messages in extracted.items():
        with catalogues[page].open("rb") as f:
            translated = {m.id for m in read_po(f) if m.id}
        new, gone = messages - translated, translated - messages
        assert not new and not gone, (
            f"{page}: the English text changed since the catalogue was updated: {len(new)} new or changed "
            f"messages (e.g. {sorted(new)[:2]}), {len(gone)} no longer in the page. Run `make gettext`, "
            "then translate the entries it marks (untranslated or fuzzy) in "
            f"locales/zh_CN/LC_MESSAGES/{page}.po."
        )


def test_every_message_is_translated_and_passes_the_checks():
    problems = i18n.check()
    assert not problems, f"{len(problems)} problems in the Chinese catalogues, e.g.:\n" + "\n".join(problems[:15])
    rows = i18n.status()
    assert sum(total for _, total, *_ in rows) >= 700, "the catalogues hold fewer messages than the book"


def test_explorer_labels_cover_every_stored_explorer():
    labels = json.loads(i18n.EXPLORER_LABELS.read_text(encoding="utf-8"))
    strings = i18n.stored_explorer_strings()
    assert strings, "no explorer strings found in the stored notebooks"
    assert not sorted(strings - labels.keys()), "run `python scripts/i18n.py explorers` and translate"
    assert all(labels[s] for s in strings)


# ----- the checker catches what it must -----------------------------------------------------------------

TERMS = {"multi-head attention": ("多头注意力",), "KV cache": ("键值缓存",), "token": ("词元",)}


@pytest.mark.parametrize(
    ("chinese", "problem"),
    [
        ("本章计算 {term}`多头注意力 <multi-head attention>` 的 $h = 2$ 个头，共 1,500 步。", None),
        ("本章计算多头注意力的 $h = 2$ 个头，共 1,500 步。", "cross-references differ"),
        ("本章计算 {term}`多头注意力 <multi-head attention>` 的 $h = 3$ 个头，共 1,500 步。", "inline math"),
        ("本章计算 {term}`多头注意力 <multi-head attention>` 的 $h = 2$ 个头，共 1,600 步。", "numbers differ"),
        ("本章计算 {term}`多头关注 <multi-head attention>` 的 $h = 2$ 个头，共 1,500 步。", "glossary term"),
    ],
)
def test_checker_catches_each_kind_of_mistake(chinese, problem):
    english = "This chapter computes the $h = 2$ heads of {term}`multi-head attention` for 1,500 steps."
    problems = i18n.message_problems(english, chinese, TERMS)
    if problem is None:
        assert problems == []
    else:
        assert any(problem in p for p in problems), problems


def test_checker_requires_plain_multi_word_terms_and_code():
    english = "The KV cache of `nn.Linear` grows with every token."
    assert i18n.message_problems(english, "`nn.Linear` 的键值缓存随词元增长。", TERMS) == []
    wrong = i18n.message_problems(english, "`nn.Linear` 的 KV 缓存随词元增长。", TERMS)
    assert any("'KV cache'" in p for p in wrong)
    wrong = i18n.message_problems(english, "nn.Linear 的键值缓存随词元增长。", TERMS)
    assert any("inline code" in p for p in wrong)


@pytest.mark.parametrize(
    "chinese, instead",
    [
        ("在原教程中，头是光束。", "一些教程"),
        ("移动交互式浏览器的滑块。", "探索器"),
        ("隐藏单元会检查每个数字。", "隐藏的代码单元格"),
        ("下面的代码单元打印结果。", "单元格"),
        ("每组共享一个键/值头。", "键值头"),
        ("查询的得分除以温度。", "分数"),
        ("热图的每一行是一个查询。", "热力图"),
        ("检查函数会给出提示。", "检查器"),
        ("自动微分算出梯度。", "自动求导"),
        ("值是 one-hot 向量。", "独热"),
        ("见符号表一页。", "符号说明"),
        ("在笔记本中运行。", "notebook"),
    ],
)
def test_one_rendering_per_term(chinese, instead):
    problems = i18n.rendering_problems(chinese)
    assert len(problems) == 1 and instead in problems[0], problems


def test_one_rendering_per_term_leaves_the_right_words_alone():
    for right in (
        "用符号表示：头 $i$",
        "获得分数",
        "隐藏的代码单元格",
        "在 `one-hot` 里",
        "笔记本电脑",
        "分数和热力图",
    ):
        assert i18n.rendering_problems(right) == [], right


def test_glossary_gives_every_term_a_chinese_form():
    terms = i18n.glossary_terms()
    assert len(terms) >= 40
    assert terms["multi-head attention"] == ("多头注意力",)
    assert terms["grouped-query attention"] == ("分组查询注意力", "GQA")
    assert terms["KV cache"] == ("键值缓存",)


def test_explorer_html_is_translated_and_frames_are_not():
    page = (
        '<figure class="mha-explorer"><div id="mha-explorer-t-1-title" style="x">Softmax temperature</div>'
        '<label for="mha-explorer-t-1-c0" style="y">temperature</label>'
        '<select id="mha-explorer-t-1-c1"><option value="0">noun</option><option value="1">0.5</option></select>'
        '<img class="mha-explorer-frame" src="data:image/webp;base64,AAAA" alt="temperature 1">'
        "<figcaption>Lower is sharper. Precomputed for 6 values: temperature \N{ELEMENT OF} {0.25, 0.5}.</figcaption>"
    )
    assert mha_i18n.explorer_strings(page) == ["Lower is sharper.", "Softmax temperature", "noun", "temperature"]
    labels = {
        "Softmax temperature": "softmax 温度",
        "temperature": "温度",
        "noun": "名词",
        "Lower is sharper.": "越低越尖锐。",
    }
    out = mha_i18n.translate_explorer_html(page, labels)
    assert ">softmax 温度</div>" in out and ">温度</label>" in out and ">名词</option>" in out
    assert "越低越尖锐。 预先计算了 6 个取值：温度 \N{ELEMENT OF} {0.25, 0.5}。" in out
    assert 'src="data:image/webp;base64,AAAA"' in out and ">0.5</option>" in out


def test_explorer_values_are_echoed_in_the_editions_language():
    """A control's echo (<output>, a live region), a slider's aria-valuetext and the labels the
    explorer's script echoes from are translated; numbers and the frames are left as they are."""
    data = {"labels": [["noun", "verb"], ["1", "0.5"]], "index": [0, 1, 2, 3], "alts": ["a"], "frames": ["data:F"]}
    page = (
        '<select id="mha-explorer-t-1-c0" data-mha-control="0"><option value="0">noun</option></select>'
        '<output id="mha-explorer-t-1-c0-value" for="mha-explorer-t-1-c0" aria-live="polite">noun</output>'
        '<input type="range" id="mha-explorer-t-1-c1" data-mha-control="1" min="0" max="1" value="0" '
        'aria-valuetext="1" style="width:14em"><output id="mha-explorer-t-1-c1-value" for="x">1</output>'
        f'<script type="application/json" id="mha-explorer-t-1-data">{json.dumps(data, separators=(",", ":"))}</script>'
    )
    out = mha_i18n.translate_explorer_html(page, {"noun": "名词", "verb": "动词"})
    assert 'aria-live="polite">名词</output>' in out and 'aria-valuetext="1"' in out
    script = out.split('id="mha-explorer-t-1-data">')[1].split("</script>")[0]
    assert json.loads(script) == {**data, "labels": [["名词", "动词"], ["1", "0.5"]]}
    assert "<" not in script and "\\u540d" in script  # ASCII JSON, as mha.viz.widgets writes it
    assert mha_i18n.translate_explorer_html(page, {}) == page


def test_a_redirect_page_sends_the_reader_on_in_its_language():
    """Issue 33: an old address (before the files were named in reading order) leads to the page."""
    import mha_redirects

    page = mha_redirects.redirect_page("book/where_next", "book/07_where_next", "Where next & why", "en")
    assert 'href="07_where_next.html"' in page and '"07_where_next.html" + location.hash' in page
    assert 'content="0; url=07_where_next.html"' in page and "Where next &amp; why</a>" in page
    assert '<html lang="en">' in page and "This page is now" in page
    zh = mha_redirects.redirect_page("book/how_to_use", "book/for_teachers", "给教师", "zh")
    assert '<html lang="zh-CN">' in zh and "本页现在是" in zh and 'href="for_teachers.html"' in zh
    assert 'href="book/intro.html"' in mha_redirects.redirect_page("index2", "book/intro", "Intro", "en")
