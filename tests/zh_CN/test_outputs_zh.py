"""What the chapters print, in the Chinese edition: every stored output translated as ``make book-zh``
translates it (``_ext/mha_outputs.py`` with ``locales/zh_CN/outputs.json``), checked without a browser.

For every printed output (a stream or a ``text/plain`` result; checker verdicts have their own stored Chinese)
of every notebook in ``book/``:

* **no English left**: by the rule the browser test applies to the built page's outputs
  (``zh_text.english_in_output``: a printed source or exception is code; a line fails on a run of two or more
  English words outside code, names and the reviewed ``ALLOWED_WORDS`` / ``TABLE_LABELS``);
* **the same numbers, in the same order**: only words change;
* **columns still aligned**: fields that shared a left or right edge in the English (a table's column) share
  one in the Chinese, counting a CJK character as two columns, and no line gains or loses a field.

``test_the_checks_fail_on_each_defect`` feeds each check the defect it looks for.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from zh_text import english_in_output

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "_ext"))

import mha_outputs  # noqa: E402 (the book's extension, from _ext/)

NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))
BOOK = mha_outputs.phrasebook_for(ROOT, "zh_CN")
NUMBER = re.compile(r"\d+(?:\.\d+)?")


def printed(notebook: Path) -> list[tuple[int, str]]:
    return list(mha_outputs.stored_outputs(json.loads(notebook.read_text(encoding="utf-8"))))


def changed_numbers(english: str, chinese: str) -> list[str]:
    """The numbers of ``english`` and ``chinese`` where their sequences part (empty: the same, in order)."""
    a, b = NUMBER.findall(english), NUMBER.findall(chinese)
    if a == b:
        return []
    at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return [f"number {at}: {a[at : at + 3]} became {b[at : at + 3]} ({len(a)} numbers became {len(b)})"]


def misaligned(english: str, chinese: str) -> list[str]:
    """Where the translated lines no longer line up as the English ones do."""
    en, zh = english.split("\n"), chinese.split("\n")
    if len(en) != len(zh):
        return [f"{len(en)} lines became {len(zh)}"]
    problems, edges = [], {}
    for row, (a, b) in enumerate(zip(en, zh)):
        fields, translated = mha_outputs.columns(a), mha_outputs.columns(b)
        if len(fields) != len(translated):
            problems.append(f"line {row}: {len(fields)} fields became {len(translated)}: {b!r}")
            continue
        for (start, end, _), (start_zh, end_zh, _) in zip(fields, translated):
            kind = mha_outputs.alignment(en, row, start, end)
            if kind:
                edge = (kind, end if kind == "right" else start)
                edges.setdefault(edge, {})[end_zh if kind == "right" else start_zh] = b
    for (kind, column), found in edges.items():
        if len(found) > 1:
            lines = "\n".join(f"  {line!r}" for line in list(found.values())[:3])
            problems.append(f"fields {kind}-aligned at column {column} now at columns {sorted(found)}:\n{lines}")
    return problems


def test_the_phrasebook_is_there_and_used():
    assert BOOK is not None and len(BOOK) >= 100, "locales/zh_CN/outputs.json is missing or nearly empty"
    outputs = [text for notebook in NOTEBOOKS for _, text in printed(notebook)]
    translated = [text for text in outputs if mha_outputs.translate_output(text, BOOK) != text]
    assert len(outputs) >= 100 and len(translated) >= 80, (len(outputs), len(translated))


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda path: path.stem)
def test_every_printed_output_reads_in_chinese_with_its_numbers_and_columns(notebook):
    problems = []
    for cell, english in printed(notebook):
        chinese = mha_outputs.translate_output(english, BOOK)
        found = [f"English left: {sorted(set(words))}" for words in [english_in_output(chinese)] if words]
        found += changed_numbers(english, chinese) + misaligned(english, chinese)
        problems += [f"cell {cell}: {problem}\n{chinese[:400]}" for problem in found]
    assert not problems, f"{notebook.name}:\n" + "\n".join(problems[:10])


def test_code_and_verdicts_stay_as_they_are():
    """A printed source and an exception shown on purpose are code; a verdict is not among the printed outputs."""
    for text in ("def forward(self, x):\n    return x  # (B, T, D)", "ValueError: MHA_DEVICE must name a device"):
        assert mha_outputs.translate_output(text, BOOK) == text
    notebook = {"cells": [{"outputs": [{"output_type": "execute_result", "metadata": {"mha": {"verdict": {}}}}]}]}
    assert list(mha_outputs.stored_outputs(notebook)) == []
    verdict = {"metadata": {"mha": {"verdict": {"zh_CN": "正确"}}}, "data": {"text/plain": ["correct"]}}
    assert list(mha_outputs.stored_outputs({"cells": [{"outputs": [verdict]}]})) == []


TABLE = """       model  d_model     all params  attn %
   BERT-base      768    109,482,240   25.9%
 GPT-2 small      768    124,439,808   22.8%"""


def test_a_table_keeps_its_columns():
    """Header words translated (narrower or wider), the numbers stay right-aligned under them."""
    book = mha_outputs.Phrasebook({"fields": {"model": "模型", "all params": "全部的参数个数", "attn %": "注意力 %"}})
    chinese = mha_outputs.translate_output(TABLE, book)
    assert chinese.splitlines()[0].split() == ["模型", "d_model", "全部的参数个数", "注意力", "%"]
    assert not misaligned(TABLE, chinese) and not changed_numbers(TABLE, chinese), chinese
    ends = {mha_outputs.columns(line)[2][1] for line in chinese.splitlines()}
    assert len(ends) == 1, chinese  # 全部的参数个数 is wider than "all params": the column moved, all of it


def test_the_checks_fail_on_each_defect():
    """Each check reports the defect it looks for: English left, a number lost or moved, a column broken."""
    untranslated = "h = 1: held-out accuracy 0.78 (mean of 3 seeds)"
    assert {"held", "out", "accuracy"} <= set(english_in_output(untranslated))
    assert english_in_output(mha_outputs.translate_output(untranslated, BOOK)) == []
    assert english_in_output("         the   cat   saw   the   dog") == []  # the worked example's token labels
    assert {"saw", "ran"} <= set(english_in_output("the cat saw the dog and ran"))  # a sentence, not labels
    reordered = mha_outputs.Phrasebook({"phrases": {"{a:num} of {b:num}": "{b} 中的 {a}"}})
    assert changed_numbers("35 of 40", mha_outputs.translate_output("35 of 40", reordered))
    dropped = mha_outputs.Phrasebook({"phrases": {"(mean of {n:num} seeds)": "（平均值）"}})
    assert changed_numbers(untranslated, mha_outputs.translate_output(untranslated, dropped))
    naive = TABLE.replace("all params", "全部参数")  # words swapped, the columns not laid out again
    assert misaligned(TABLE, naive) and not changed_numbers(TABLE, naive)
    squeezed = TABLE.replace("768    109", "768 109")  # two fields run together
    assert any("fields became" in p for p in misaligned(TABLE, squeezed))


def test_wide_characters_take_two_columns_on_the_page():
    """The code font has no CJK glyphs; the fallback's are not two digits wide: each is boxed 2 ch wide."""
    page = (
        "<html><head></head><body>"
        '<div class="output stream highlight-myst-ansi notranslate"><div class="highlight"><pre>'
        "低秩拼接   6,720  留出</pre></div></div>"
        '<div class="highlight-python"><div class="highlight"><pre>print("留出")</pre></div></div></body></html>'
    )
    boxed = mha_outputs.two_columns(page)
    box = '<span class="mha-wide">{}</span>'.format
    assert "".join(map(box, "低秩拼接")) + "   6,720  " + box("留") + box("出") + "</pre>" in boxed
    assert ".mha-wide{display:inline-block;width:2ch;" in boxed
    assert 'print("留出")' in boxed and boxed.count("<style>") == 1  # code cells are left alone
    assert mha_outputs.two_columns(boxed) == boxed  # once only
