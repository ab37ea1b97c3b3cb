"""Checker verdicts in the reader's language: the phrasebook, the layout, the choice of language.

Every verdict any test creates is also rendered in Chinese and checked (tests/conftest.py); this file
tests the mechanism itself and the phrasebooks as data.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from mha.chapters.checking import answers, verdict_i18n
from mha.chapters.checking.verdict_i18n import english_left, normalise, translate, width, wrap

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "_ext"))

import i18n  # noqa: E402
import mha_i18n  # noqa: E402

FIELD = re.compile(r"\{(\w+)(?::\w+)?\}")


@pytest.mark.parametrize(
    ("given", "expected"),
    [("zh", "zh_CN"), ("zh-CN", "zh_CN"), ("zh_CN", "zh_CN"), ("en", "en"), ("en_US", "en"), ("", "en"), (None, "en")],
)
def test_language_names(given, expected):
    assert normalise(given) == expected


def test_unknown_language_is_refused_by_name():
    with pytest.raises(ValueError, match=r"language must be one of en, zh_CN .* found 'fr'"):
        normalise("fr")


def test_the_language_follows_set_language_then_mha_lang(monkeypatch):
    verdict = answers.right("causal_mask")
    monkeypatch.delenv("MHA_LANG", raising=False)
    assert repr(verdict) == "causal_mask\n  correct"
    monkeypatch.setenv("MHA_LANG", "zh_CN")
    assert repr(verdict) == "causal_mask\n  正确"
    verdict_i18n.set_language("en")
    try:
        assert repr(verdict) == "causal_mask\n  correct"
    finally:
        verdict_i18n.set_language(None)
    assert str(verdict) == "causal_mask\n  正确"


def test_jupyter_shows_the_current_language_and_stores_both(monkeypatch):
    monkeypatch.delenv("MHA_LANG", raising=False)
    verdict = answers.wrong("t", "weights", "first part to fix: scores")
    data, metadata = verdict._repr_mimebundle_()
    assert data == {"text/plain": verdict.render("en")}
    assert metadata["mha"]["verdict"]["en"] == verdict.render("en")
    assert metadata["mha"]["verdict"]["zh_CN"].splitlines()[1] == "  weights：错误"


def test_a_template_matches_clause_by_clause_and_copies_values():
    line = "answer must be a number, found the string '0.4' (write it without quotes)"
    assert translate(line) == "answer 应是一个数，实际是字符串 '0.4'（去掉引号再写）"
    # a typed placeholder takes only its kind; a phrase never matches inside a word
    assert translate("x must hold 3 numbers, found shape (2, 2)") == "x 应包含 3 个数，实际形状为 (2, 2)"
    assert translate("incorrect") == "incorrect"
    # text the phrasebook does not know comes back unchanged, indentation kept
    assert translate("  nothing here matches") == "  nothing here matches"
    assert translate("  hint: nothing here matches") == "  提示：nothing here matches"


def test_english_is_returned_untouched():
    line = "  close: give 2 decimals (found 0.8, the answer to 2 decimals is …?)"
    assert translate(line, "en") == line


def test_wrap_counts_a_cjk_character_as_two_columns():
    assert width("注意力 ab") == 9
    line = "  提示：" + "注意力权重" * 12 + " k.transpose(-2, -1) 0.8485"
    lines = wrap(line, 30)
    assert all(width(part) <= 30 for part in lines)
    assert "".join(part.strip() for part in lines).replace(" ", "") == line.strip().replace(" ", "")
    assert all(part.startswith("    ") for part in lines[1:])  # continuation: indented two more
    # never inside a number or code, never before closing punctuation
    assert any("k.transpose(-2," in part for part in lines) and any("0.8485" in part for part in lines)
    assert not any(part.strip()[0] in "，。：）" for part in lines)


def test_english_left_finds_sentences_not_code():
    assert english_left("提示：the scores are not scaled") == ["the scores are not scaled"]
    assert english_left("提示：用 k.transpose(-2, -1) 和 softmax(dim=-1)") == []
    assert english_left("代码抛出了 RuntimeError：“shape mismatch in view”") == []
    assert english_left("`raise NotImplementedError(...)` 换成你的代码") == []


# --------------------------------------------------------------------------------------------
# The phrasebooks as data
# --------------------------------------------------------------------------------------------

BOOKS = verdict_i18n.phrasebook_files("zh_CN")


def test_there_are_phrasebooks():
    assert len(BOOKS) >= 5 and sum(len(json.loads(p.read_text(encoding="utf-8"))) for p in BOOKS) >= 200


@pytest.mark.parametrize("path", BOOKS, ids=lambda p: p.name)
def test_each_phrase_keeps_its_placeholders_numbers_and_terms(path):
    problems = []
    for en, zh in json.loads(path.read_text(encoding="utf-8")).items():
        if not zh:
            problems.append(f"{en!r}: untranslated")
            continue
        names = FIELD.findall(en)
        if len(names) != len(set(names)):
            problems.append(f"{en!r}: a placeholder name appears twice (use name2)")
        if sorted(names) != sorted(FIELD.findall(zh)):
            problems.append(f"{en!r}: placeholders {sorted(names)} -> {sorted(FIELD.findall(zh))}")
        digits = [FIELD.sub("", t) for t in (en, zh)]
        if sorted(re.findall(r"\d+", digits[0])) != sorted(re.findall(r"\d+", digits[1])):
            problems.append(f"{en!r}: numbers differ in {zh!r}")
        problems += [f"{zh!r}: {p}" for p in i18n.rendering_problems(zh)]
        left = english_left(FIELD.sub("", zh))
        if left:
            problems.append(f"{zh!r}: English left: {left}")
    assert not problems, "\n".join(problems)


def test_no_phrase_is_in_two_phrasebooks():
    seen: dict[str, str] = {}
    twice = []
    for path in BOOKS:
        for en in json.loads(path.read_text(encoding="utf-8")):
            if en in seen:
                twice.append(f"{en!r}: {seen[en]} and {path.name}")
            seen[en] = path.name
    assert not twice, "\n".join(twice)


def test_a_bad_placeholder_kind_is_named(tmp_path):
    with pytest.raises(ValueError, match="placeholder kind must be one of .* found 'number'"):
        verdict_i18n.compile_template("{x:number} heads")


# --------------------------------------------------------------------------------------------
# The Chinese edition reads the Chinese verdict from the stored output's metadata
# --------------------------------------------------------------------------------------------


def test_the_book_finds_each_stored_verdicts_translation(tmp_path):
    verdict = answers.wrong("causal_mask", "values", "x must hold 3 numbers, found shape (2, 2)")
    data, metadata = verdict._repr_mimebundle_()
    output = {"output_type": "execute_result", "data": data, "metadata": metadata, "execution_count": 1}
    plain = {"output_type": "stream", "name": "stdout", "text": "causal_mask\n"}
    notebook = {"cells": [{"cell_type": "code", "source": "", "outputs": [plain, output]}]}
    path = tmp_path / "page.ipynb"
    path.write_text(json.dumps(notebook), encoding="utf-8")
    table = mha_i18n.stored_verdicts(path, "zh_CN")
    assert table == {verdict.render("en"): verdict.render("zh_CN")}
    assert "提示：" in table[verdict.render("en")]
