"""The Chinese notebooks: what the Chinese edition's run box and ``make lab-zh`` hand out.

Each chapter's learner notebook (``scripts/notebooks.learner_notebook``) with its Markdown in Chinese,
from the chapter's catalogue (``notebooks.translate_notebook``), and a first cell that makes its
checkers answer in Chinese. Checked without a build: no English prose is left in its Markdown (the
rule of the edition's browser test: Han characters outnumber the English words left several times,
and no paragraph is English only), its code and outputs are the English notebook's, and the
translator keeps what is not prose (math, code, labels, directives' options).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import code_comments  # noqa: E402
import notebooks  # noqa: E402

CHAPTERS = sorted(p.stem for p in (ROOT / "book").glob("[0-9][0-9]_*.ipynb"))
#: What is not prose: inline code and math, roles' targets, directives' and figures' options, links.
NOT_PROSE = re.compile(r"`[^`]*`|\$\$.*?\$\$|\$[^$\n]*\$|\{[a-z]+\}|<[^>]*>|\]\([^)]*\)|^\s*:[\w-]+:.*$", re.M | re.S)


def chinese_notebook(name: str):
    nb = notebooks.learner_notebook(nbformat.read(ROOT / "book" / f"{name}.ipynb", as_version=4))
    return notebooks.translate_notebook(nb, notebooks.chapter_messages(name, "zh_CN"), "zh_CN")


def prose(markdown: str) -> str:
    """``markdown`` without code blocks (their fences, and the lines of a block that is not a directive)."""
    kept, code = [], False
    for line in markdown.splitlines():
        fence = line.strip().startswith(("```", ":::"))
        if fence:
            code = not code and not re.match(r"\s*(```|:::)\{(?!code)", line) and line.strip().strip("`:") != ""
            continue
        if not code:
            kept.append(line)
    return NOT_PROSE.sub(" ", "\n".join(kept))


@pytest.mark.parametrize("name", CHAPTERS)
def test_a_chinese_notebook_has_no_english_prose(name):
    nb = chinese_notebook(name)
    text = " ".join(prose(c.source) for c in nb.cells if c.cell_type == "markdown")
    han, words = len(re.findall(r"[\u4e00-\u9fff]", text)), len(re.findall(r"[A-Za-z]{3,}", text))
    assert han > 5 * words, f"{name}: {han} Han characters, {words} English words left"
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for paragraph in re.split(r"\n\s*\n", prose(cell.source)):
            english = re.findall(r"[A-Za-z]{3,}", paragraph)
            assert len(english) < 8 or re.search(r"[\u4e00-\u9fff]", paragraph), (
                f"{name}: a paragraph left in English: {paragraph.strip()[:160]!r}"
            )


#: Chapters whose stored outputs hold checker verdicts (at least one each).
VERDICT_CHAPTERS = {"01_single_head_limits", "03_worked_example", "04_build_it_yourself", "05_parameter_analysis"}


@pytest.mark.parametrize("name", CHAPTERS)
def test_a_chinese_notebook_runs_the_same_code_and_sets_its_language(name):
    english = notebooks.learner_notebook(nbformat.read(ROOT / "book" / f"{name}.ipynb", as_version=4))
    chinese = chinese_notebook(name)
    first, rest = chinese.cells[0], chinese.cells[1:]
    assert first.cell_type == "code" and 'set_language("zh_CN")' in first.source
    assert chinese.metadata["language"] == "zh_CN"
    assert len(rest) == len(english.cells)
    verdicts = 0
    for a, b in zip(english.cells, rest):
        assert a.cell_type == b.cell_type
        if a.cell_type == "code":  # the same code (comments apart: tests/zh_CN/test_zh_comments.py), the same outputs
            assert code_comments.translate_code(a.source, code_comments.load("zh_CN")) == b.source
            for x, y in zip(a.get("outputs", []), b.get("outputs", []), strict=True):
                verdict = x.get("metadata", {}).get("mha", {}).get("verdict")
                if verdict:  # a checker's verdict: its stored Chinese text
                    assert y["data"]["text/plain"] == verdict["zh_CN"] and y["metadata"] == x["metadata"]
                    verdicts += 1
                else:
                    assert x == y
    assert verdicts or name not in VERDICT_CHAPTERS


def test_the_translator_keeps_what_is_not_prose():
    messages = {
        "A head reads `x` and $y$.": "一个头读取 `x` 和 $y$。",
        "Step one": "第一步",
        "first item, which goes on": "第一项，接着写",
        "Answer": "答案",
        "Inside a box.": "框里的一句。",
    }
    source = (
        "(ch-label)=\n# Step one\n\nA head reads `x`\nand $y$.\n\n- first item,\n  which goes on\n- kept\n\n"
        "$$\nx = 1\n$$\n\n```python\nA head reads `x` and $y$.\n```\n\n"
        ":::{admonition} Answer\n:class: dropdown\nInside a box.\n:::\n\nNot in the catalogue."
    )
    out = notebooks.translate_markdown(source, messages)
    assert out.splitlines()[:2] == ["(ch-label)=", "# 第一步"]
    assert "一个头读取 `x` 和 $y$。" in out and "- 第一项，接着写" in out and "- kept" in out
    assert "$$\nx = 1\n$$" in out and "```python\nA head reads `x` and $y$.\n```" in out
    assert ":::{admonition} 答案\n:class: dropdown\n框里的一句。\n:::" in out
    assert out.endswith("Not in the catalogue.")
