"""The explorers' alt texts and caption option lists in the Chinese edition, without a browser.

For every explorer stored in ``book/*.ipynb``, the HTML the Chinese edition shows
(``mha_i18n.translate_explorer_html`` with ``locales/zh_CN/explorer_alts.json``):

* every frame's alt text (the JSON data's ``alts`` and the ``<img alt>`` of the frame it opens on) is
  Chinese: no English word left outside code (identifiers, calls, shapes, units), quoted example
  sentences (which the model reads in English) and ``ALLOWED``; with the same numbers in the same order
  as the English alt;
* the caption's option lists show the names the dropdowns show (``{名词, 动词, 限定词, 无}``).

``test_the_alt_check_catches_english_and_changed_numbers`` shows the checks fail on each defect.
"""

from __future__ import annotations

import html
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "_ext"))
import mha_alts  # noqa: E402
import mha_i18n  # noqa: E402

LABELS = json.loads((ROOT / "locales/zh_CN/explorers.json").read_text(encoding="utf-8"))
PHRASES = mha_alts.alt_phrases(ROOT, "zh_CN")
DATA = re.compile(r'<script type="application/json" id="mha-explorer-[^"]*-data">(.*?)</script>', re.S)

#: Latin words an alt text may keep (reviewed): names, units and abbreviations.
ALLOWED = {
    "mha": "the course's package, a name (mha 逐头循环 is one of its implementations)",
    "torch": "PyTorch's package, a name (torch 默认)",
    "PyTorch": "a name",
    "SDPA": "scaled_dot_product_attention, PyTorch's function, by its usual abbreviation",
    "FLOPs": "the unit of floating-point operations, as the prose writes it",
    "ms": "milliseconds",
    "fp16": "a number format's name",
}
#: Code and symbols in an alt: quoted text, identifiers and calls (view(1, 3, 2, 6), d_k, 1/√d_k,
#: contiguous().view), shapes, units (GiB, KiB, MiB), one-letter symbols and tokens like [CLS].
CODE = re.compile(
    r"“[^”]*”"
    r"|\[[A-Z]+\]"
    r"|[\w.]*[_\d./()\[\]√·+=-][\w.()\[\]√/+=-]*"
    r"|\b(?:view|transpose|reshape|contiguous)\b"
    r"|\b[KMG]iB\b"
)
NUMBER = re.compile(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def english_left(text: str) -> list[str]:
    """The English words of a translated alt text outside code, quotes and ``ALLOWED``."""
    return [
        word
        for word in re.findall(r"[A-Za-z][A-Za-z']+", CODE.sub(" ", text))
        if word not in ALLOWED and not (word.isupper() and len(word) <= 3)
    ]


def problems(english: str, chinese: str) -> list[str]:
    """What is wrong with ``chinese`` as the translation of the alt text ``english``."""
    found = []
    if english_left(chinese):
        found.append(f"English left {english_left(chinese)}")
    if NUMBER.findall(english) != NUMBER.findall(chinese):
        found.append(f"numbers {NUMBER.findall(english)} became {NUMBER.findall(chinese)}")
    if not re.search(r"[\u4e00-\u9fff]", chinese):
        found.append("no Chinese")
    return found


def stored_explorers() -> list[tuple[str, str]]:
    """``(notebook name, explorer HTML)`` of every explorer stored in the book's notebooks."""
    found = []
    for notebook in sorted((ROOT / "book").glob("*.ipynb")):
        for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
            for output in cell.get("outputs", []):
                text = output.get("data", {}).get("text/html", "")
                text = "".join(text) if isinstance(text, list) else text
                if "mha-explorer-frame" in text:
                    found.append((notebook.stem, text))
    return found


EXPLORERS = stored_explorers()


def test_there_are_explorers_with_alt_texts():
    alts = [alt for _, text in EXPLORERS for m in DATA.finditer(text) for alt in json.loads(m.group(1))["alts"]]
    assert len(EXPLORERS) >= 12 and len(alts) >= 140, (len(EXPLORERS), len(alts))


@pytest.mark.parametrize("name, explorer", EXPLORERS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(EXPLORERS)])
def test_every_alt_text_is_chinese_with_the_same_numbers(name, explorer):
    translated = mha_i18n.translate_explorer_html(explorer, LABELS, PHRASES)
    english = json.loads(DATA.search(explorer).group(1))
    chinese = json.loads(DATA.search(translated).group(1))
    assert len(chinese["alts"]) == len(english["alts"]) == len(english["frames"])
    wrong = {en: (zh, problems(en, zh)) for en, zh in zip(english["alts"], chinese["alts"]) if problems(en, zh)}
    assert not wrong, f"{name}: " + "\n".join(f"{en}\n  -> {zh}\n  {p}" for en, (zh, p) in wrong.items())
    shown = html.unescape(re.search(r'<img class="mha-explorer-frame"[^>]*? alt="([^"]*)"', translated).group(1))
    assert shown in chinese["alts"], f"{name}: the opening frame's <img alt> is not translated: {shown!r}"
    assert english["frames"] == chinese["frames"], "the frames must stay the same"


def test_caption_option_lists_show_the_dropdowns_names():
    captions = [
        mha_i18n.translate_explorer_html(text, LABELS, PHRASES)
        for _, text in EXPLORERS
        if "{noun, verb, det, none}" in text or "{average, concat}" in text
    ]
    assert len(captions) == 2, len(captions)
    joined = "\n".join(captions)
    assert "{名词, 动词, 限定词, 无}" in joined and "{平均, 拼接}" in joined
    assert not re.search(r"\u2208 \{[^}]*\b(?:noun|verb|average|concat)\b", joined)


def test_every_listed_option_is_shown_as_its_dropdown_shows_it():
    """Each value a caption lists is the text of an option of the same explorer (values that are not
    options, such as numbers on a slider, are left as they are)."""
    for name, text in EXPLORERS:
        translated = mha_i18n.translate_explorer_html(text, LABELS, PHRASES)
        options = {html.unescape(o) for o in re.findall(r"<option [^>]*>(.*?)</option>", translated)}
        caption = html.unescape(re.search(r"<figcaption[^>]*>(.*?)</figcaption>", translated, re.S).group(1))
        for values in re.findall(r"\u2208 \{([^{}]*)\}", caption):
            listed = values.split(", ")
            if any(v in options for v in listed):
                missing = [v for v in listed if v not in options]
                assert not missing, f"{name}: {missing} listed but not an option ({sorted(options)})"


def test_the_alt_check_catches_english_and_changed_numbers():
    english = "Heads' outputs for 'cat chases mouse' and the average merge; at the verb the merged vector is cat 0.50."
    good = mha_alts.translate_alt(english, PHRASES, LABELS)
    assert problems(english, good) == [], good
    assert "English left" in problems(english, "“cat chases mouse” 的各头输出与 average merge；向量为 0.50。")[0]
    assert "numbers" in problems(english, good.replace("0.50", "0.5"))[0]
    assert problems(english, english)  # untranslated
    assert mha_alts.translate_alt("A sentence nobody translated, 3 times.", PHRASES, LABELS).count("sentence")
    assert english_left("头 1 把 view(1, 3, 2, 6) 用于 “the cat” 与 [CLS]，1/√d_k，24 GiB，mha 逐头循环") == []
