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

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "_ext"))

import i18n  # noqa: E402
import mha_i18n  # noqa: E402

from mha.chapters.checking import verdict_i18n  # noqa: E402


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
        # one rendering per term, as d2l-zh has it
        ("词序要靠位置嵌入。", "位置编码"),
        ("旋转位置嵌入（RoPE）按位置旋转查询和键。", "位置编码"),
        ("远低于 H100 约 295 的拐点。", "脊点"),
        ("达到带宽上界的 34% 到 54%。", "带宽下界"),
        ("去掉一个头后的释义间隔。", "复述句"),
        ("`mha` 的快速层对纯 PyTorch 层。", "精简层"),
        ("逐一核对形状的方程。", "公式"),
        ("每个头的宽度为 $d_k$。", "头维度"),
        ("横轴为头大小。", "头维度"),
        ("在可运行的 notebook 中打开本章。", "运行中的 notebook"),
        ("在实时运行的 notebook 中显示进度条。", "运行中的 notebook"),
        ("（那只动物没有过马路，因为它太累了）", "动物没有过街"),
        ("拼接在 250 步内解出了每个种子。", "学会"),
        ("把输出与保存的输出进行比较。", "比较"),
        ("GQA-8 读取的字节少 1.12 倍。", "1.12 倍"),
        ("缓存比多头注意力的小 $h / g$ 倍。", "N 倍"),
        ("会把缓存低估 64 倍。", "N 倍"),
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
        "旋转位置编码（RoPE）",
        "H100 的脊点",
        "带宽下界",
        "复述句",
        "精简层",
        "公式",
        "头维度为 $d_k$",
        "在运行中的 notebook 里",
        "动物没有过街，因为它太累了",
        "五个种子都学会了任务",
        "与保存的输出比较",
        "MHA 读取的字节是 GQA-8 的 1.12 倍",
        "生成快了 5.2 到 6.0 倍",
        "它是最快中位数的多少倍",
        "缓存只有多头注意力的 $h / g$ 分之一",
    ):
        assert i18n.rendering_problems(right) == [], right


@pytest.mark.parametrize(
    "chinese, rule",
    [
        ("教程说参数「随头数线性增长」。", "“”"),
        ("每个头都把超过 94 % 的权重放在单个偏移量上。", "no space before %"),
        ("**多查询注意力, MQA**：所有查询头共享一个键头。", "full-width punctuation"),
        ("为什么一个头不够?", "full-width punctuation"),
        ("输入过于分散、以致接近 独热 的 softmax。", "no space between two Chinese characters"),
    ],
)
def test_typography_as_d2l_zh(chinese, rule):
    problems = i18n.typography_problems(chinese)
    assert len(problems) == 1 and rule in problems[0], problems


def test_typography_leaves_code_math_and_latin_alone():
    for right in (
        "教程说参数“随头数线性增长”。",
        "94% 的位置，而不是全部。",
        "查询头 `i` 读取的是 K/V 头 `i % G`。",
        "**多查询注意力（MQA）**：所有查询头共享一个键头（$g = 1$）。",
        "列名是 “attn %”，即 BERT, GPT-2 的比例。",
        "当 $a, b$ 固定时：$x: y$。",
        "以“cat chases mouse”（猫追老鼠）为例。",
    ):
        assert i18n.typography_problems(right) == [], right


@pytest.mark.parametrize(
    "chinese, shows_stars",
    [
        ("词序要靠**{term}`位置编码 <positional embedding>`**进来。", True),  # ** then a role, after 靠
        ("教程里有人说参数**“随头数线性增长”**。", True),  # ** then a quotation mark, after 数
        ("一个**$h$ 个头**的层。", True),  # ** then math, after 个
        ("它的**`merge`**参数。", True),
        ("词序要靠 **{term}`位置编码 <positional embedding>`** 进来。", False),
        ("教程里有人说参数“**随头数线性增长**”。", False),
        ("**{term}`投影 <projection>`** 就是乘以一个矩阵。", False),
        ("这一点**很重要**，也*很*简单。", False),
        ("它是 `a**2`，不是粗体。", False),
    ],
)
def test_checker_catches_bold_shown_as_literal_stars(chinese, shows_stars):
    english = "Positions come in through the **{term}`positional embedding`**, as `a**2` shows."
    problems = i18n.markup_problems(english, chinese)
    assert bool(problems) == shows_stars, problems
    assert bool(i18n.literal_stars(chinese)) == shows_stars


def test_every_new_check_runs_in_message_problems():
    english = "Each head puts over 94 % of its weight on one offset ({term}`multi-head attention`)."
    chinese = "每个头都把超过 94 % 的权重放在「单个」偏移量上（**{term}`多头注意力 <multi-head attention>`**之外）。"
    problems = "\n".join(i18n.message_problems(english, chinese, TERMS))
    assert "no space before %" in problems and "“”" in problems and "literal *" in problems, problems


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
    assert "越低越尖锐。预先计算了 6 个取值：温度 \N{ELEMENT OF} {0.25, 0.5}。" in out
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


def test_the_intros_checker_words_are_the_ones_the_chinese_verdicts_print():
    """The intro teaches the words a Chinese reader's verdicts show: each is in the phrasebooks."""
    printed = " ".join(
        value
        for path in verdict_i18n.phrasebook_files("zh_CN")
        for value in json.loads(path.read_text(encoding="utf-8")).values()
        if isinstance(value, str)
    )
    intro = (ROOT / "locales" / "zh_CN" / "LC_MESSAGES" / "book" / "intro.po").read_text(encoding="utf-8")
    for english, chinese in i18n.VERDICT_WORDS.items():
        assert chinese in printed, f"{chinese!r} ({english!r}) is in no Chinese verdict"
        assert f"`{chinese}`" in intro, f"the Chinese intro does not show {english!r} as {chinese!r}"
