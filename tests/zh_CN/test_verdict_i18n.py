"""Checker verdicts in the reader's language: templates, the phrasebooks, the layout, the language.

A checker says each message once with ``say(template, **args)``; the phrasebooks are extracted from those
calls (``scripts/verdict_strings.py``). Every verdict any test creates is also rendered in Chinese and
checked (tests/conftest.py); this file tests the mechanism itself and the phrasebooks as data.
"""

from __future__ import annotations

import json
import pickle
import re
import string
import sys
from pathlib import Path

import pytest

from mha.chapters.checking import answers, verdict_i18n
from mha.chapters.checking.verdict_i18n import Message, english_left, normalise, say, say_in, width, wrap

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "_ext"))

import i18n  # noqa: E402
import mha_i18n  # noqa: E402
import verdict_strings  # noqa: E402

FIELDS = string.Formatter()


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
    verdict = answers.wrong("t", "weights", say("first part to fix: {part}", part="scores"))
    data, metadata = verdict._repr_mimebundle_()
    assert data == {"text/plain": verdict.render("en")}
    assert metadata["mha"]["verdict"]["en"] == verdict.render("en")
    assert metadata["mha"]["verdict"]["zh_CN"].splitlines()[1:] == ["  weights：错误", "  提示：首先要改的部分：scores"]


SHAPE = "{name} must hold {length} numbers, found shape {shape}"


def test_a_message_is_its_english_text_and_keeps_its_template():
    message = say(SHAPE, name="x", length=3, shape=(2, 2))
    assert isinstance(message, Message) and isinstance(message, str)
    assert message == "x must hold 3 numbers, found shape (2, 2)"
    assert message.template == SHAPE and message.args == {"name": "x", "length": 3, "shape": (2, 2)}
    again = pickle.loads(pickle.dumps(message))
    assert again == message and again.template == SHAPE
    moved = say("hint: {hint}", hint=message).indented(4)
    assert moved == "    hint: x must hold 3 numbers, found shape (2, 2)" and moved.args["hint"] is message
    with pytest.raises(KeyError):
        say(SHAPE, name="x")


def test_a_message_is_said_from_its_templates_translation():
    message = say(SHAPE, name="x", length=3, shape=(2, 2))
    assert say_in(message, "zh_CN") == "x 应包含 3 个数，实际形状为 (2, 2)"
    # an argument that is a message is said in the same language; indentation is kept
    assert say_in(say("  hint: {hint}", hint=message), "zh_CN") == "  提示：x 应包含 3 个数，实际形状为 (2, 2)"
    # a number is formatted as the English template formats it, in either language
    close = answers.compare_number(0.80, 0.84, decimals=2).message
    assert "found 0.8," in close and "你给的是 0.8，" in say_in(close, "zh_CN")
    # a template made of fields only needs no entry; one the phrasebook lacks stays English
    assert say_in(say("  {detail}", detail=say("correct")), "zh_CN") == "  正确"
    assert say_in(say("nothing here matches {x}", x=1), "zh_CN") == "nothing here matches 1"
    # anything that is not a message (code, a learner's own words) is shown as it is
    assert say_in("weights", "zh_CN") == "weights"


def test_english_is_returned_untouched():
    message = answers.compare_number(0.8, 0.84, decimals=2).message
    assert say_in(message, "en") == str(message) == "close: give 2 decimals (found 0.8, the answer to 2 decimals is …?)"


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
# The phrasebooks as data, extracted from the code
# --------------------------------------------------------------------------------------------

BOOKS = verdict_i18n.phrasebook_files("zh_CN")


def test_there_are_phrasebooks():
    assert len(BOOKS) >= 5 and sum(len(json.loads(p.read_text(encoding="utf-8"))) for p in BOOKS) >= 200


def test_the_phrasebooks_hold_exactly_what_the_checkers_say():
    """Each topic's phrasebook translates every template its modules say, and holds nothing else:
    ``python scripts/i18n.py strings`` lists what is new or gone (``--write`` adds and drops them)."""
    _, problems = verdict_strings.said()
    assert problems == [], "\n".join(problems)
    found = verdict_strings.differences()
    assert found == {}, verdict_strings.report(found)


def test_the_extraction_reads_each_say_call():
    source = 'say("a {x}", x=1)\nanswers.say("b " "c")\nsay(f"d {y}")\nprint("e")\n'
    assert verdict_strings.say_calls(source) == [(1, "a {x}"), (2, "b c"), (3, None)]


def _names(template: str) -> list[str]:
    return [name for _, name, _, _ in FIELDS.parse(template) if name is not None]


def _literal(template: str) -> str:
    return "".join(literal for literal, *_ in FIELDS.parse(template))


@pytest.mark.parametrize("path", BOOKS, ids=lambda p: p.parent.name)
def test_each_translation_keeps_its_fields_numbers_and_terms(path):
    problems = []
    for en, zh in json.loads(path.read_text(encoding="utf-8")).items():
        if not zh:
            problems.append(f"{en!r}: untranslated")
            continue
        plain = [(name, spec, conversion) for _, name, spec, conversion in FIELDS.parse(zh) if name is not None]
        if any(spec or conversion for _, spec, conversion in plain):
            problems.append(f"{zh!r}: a translation's fields are plain names (the English template formats them)")
        if set(_names(en)) != set(_names(zh)):
            problems.append(f"{en!r}: fields {sorted(set(_names(en)))} -> {sorted(set(_names(zh)))}")
        if sorted(re.findall(r"\d+", _literal(en))) != sorted(re.findall(r"\d+", _literal(zh))):
            problems.append(f"{en!r}: numbers differ in {zh!r}")
        problems += [f"{zh!r}: {p}" for p in i18n.rendering_problems(zh)]
        left = english_left(_literal(zh))
        if left:
            problems.append(f"{zh!r}: English left: {left}")
    assert not problems, "\n".join(problems)


def test_a_template_in_two_phrasebooks_reads_the_same_in_both():
    seen: dict[str, tuple[str, str]] = {}
    differ = []
    for path in BOOKS:
        for en, zh in json.loads(path.read_text(encoding="utf-8")).items():
            if en in seen and seen[en][1] != zh:
                differ.append(f"{en!r}: {seen[en][0]} says {seen[en][1]!r}, {path.parent.name} {zh!r}")
            seen.setdefault(en, (path.parent.name, zh))
    assert not differ, "\n".join(differ)


def test_a_bad_placeholder_kind_is_named(tmp_path):
    with pytest.raises(ValueError, match="placeholder kind must be one of .* found 'number'"):
        verdict_i18n.compile_template("{x:number} heads")


# --------------------------------------------------------------------------------------------
# The Chinese edition reads the Chinese verdict from the stored output's metadata
# --------------------------------------------------------------------------------------------


def test_the_book_finds_each_stored_verdicts_translation(tmp_path):
    verdict = answers.wrong("causal_mask", "values", say(SHAPE, name="x", length=3, shape=(2, 2)))
    data, metadata = verdict._repr_mimebundle_()
    output = {"output_type": "execute_result", "data": data, "metadata": metadata, "execution_count": 1}
    plain = {"output_type": "stream", "name": "stdout", "text": "causal_mask\n"}
    notebook = {"cells": [{"cell_type": "code", "source": "", "outputs": [plain, output]}]}
    path = tmp_path / "page.ipynb"
    path.write_text(json.dumps(notebook), encoding="utf-8")
    table = mha_i18n.stored_verdicts(path, "zh_CN")
    assert table == {verdict.render("en"): verdict.render("zh_CN")}
    assert "提示：" in table[verdict.render("en")]
