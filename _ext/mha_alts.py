"""The explorers' alt texts and caption option lists in the Chinese edition.

An explorer (``mha.viz.widgets``) stores one alt text per frame, written in English by the chapter's
alt function: in its JSON data (``alts``, which its script shows as the frame changes) and on the
``<img>`` of the frame it opens on. The Chinese edition translates them when the book is built, from
the phrasebook ``locales/<language>/explorer_alts.json`` (English template -> Chinese template), with
the placeholders of :mod:`mha.chapters.checking.verdict_i18n` (``{x:num}``, ``{s:shape}``, ``{w:word}``,
``{c:code}``, or ``{name}`` for any text, itself translated). An alt is cut into sentences and clauses
(at ``. `` and ``; ``) and each clause is translated phrase by phrase, longest template first, as
verdicts are; a placeholder's text that is one of the explorer's own labels (``noun``, ``average``)
takes the translation the dropdown shows (``locales/<language>/explorers.json``). Numbers, shapes
and code are copied, so the two editions cannot disagree on one; quoted words (the example sentences,
which the model reads in English) are kept and set in Chinese quotation marks.

The grid sentence of a caption lists each control's values (``word type of dog ∈ {noun, verb, det,
none}``): the values a dropdown shows translated are translated there too (``{名词, 动词, 限定词, 无}``).
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

from mha.chapters.checking.verdict_i18n import compile_template

#: The alt texts' phrasebook, per language, relative to the book's root.
EXPLORER_ALTS = "locales/{language}/explorer_alts.json"
CJK = r"\u4e00-\u9fff"
#: Quoted text: 'cat chases mouse' (an apostrophe inside a word, dog's, is not a quote) or "...".
QUOTED = re.compile(r"(?<![\w'])'([^']+)'(?![\w])|\"([^\"]+)\"")
HIDDEN = re.compile("\ue000(\\d+)\ue001")


@functools.cache
def phrasebook(path: str) -> tuple[tuple[re.Pattern, str], ...]:
    """``(pattern, translated template)`` of every phrase in the JSON file ``path``, longest English first."""
    entries = json.loads(Path(path).read_text(encoding="utf-8"))
    ordered = sorted(entries.items(), key=lambda item: (-len(re.sub(r"\{[^}]*\}", "", item[0])), item[0]))
    return tuple((compile_template(en), re.sub(r"\{(\w+):\w+\}", r"{\1}", zh)) for en, zh in ordered if zh)


def translate_clause(clause: str, phrases, labels: dict[str, str], depth: int = 0) -> str:
    """One clause translated phrase by phrase; a placeholder's text is a label or is translated in turn."""
    if clause.strip() in labels:
        return labels[clause.strip()]
    for pattern, target in phrases:

        def fill(match, target=target):
            values = {
                name: labels.get(value, translate_clause(value, phrases, labels, depth + 1) if depth < 4 else value)
                for name, value in match.groupdict().items()
            }
            return target.format(**values)

        clause = pattern.sub(fill, clause)
    return clause


def translate_alt(alt: str, phrases, labels: dict[str, str]) -> str:
    """An explorer frame's English alt text in Chinese: sentence by sentence, clause by clause."""
    quoted: list[str] = []

    def hide(match):
        quoted.append(match.group(1) or match.group(2))
        return f"\ue000{len(quoted) - 1}\ue001"

    text = QUOTED.sub(hide, alt.strip())
    sentences = []
    for sentence in re.split(r"\. (?=[A-Z])", text):
        sentence = sentence[:-1] if sentence.endswith(".") else sentence
        clauses = [translate_clause(c, phrases, labels) for c in sentence.split("; ")]
        sentences.append("；".join(clauses) + "。")
    text = "".join(sentences)
    # full-width punctuation where Chinese text meets it; a space between Chinese and Latin or digits
    text = re.sub(rf"(?<=[{CJK}”）]), ?", "，", text)
    text = re.sub(rf", (?=[{CJK}“])", "，", text)
    text = re.sub(rf"(?<=[{CJK}”）]): ", "：", text)
    text = re.sub(rf"(?<=[”）]) (?=[{CJK}])|(?<=[{CJK}]) (?=[“（])", "", text)
    text = re.sub(rf"([{CJK}])([A-Za-z0-9(\[\ue000])", r"\1 \2", text)
    text = re.sub(rf"([A-Za-z0-9)\]\ue001])([{CJK}])", r"\1 \2", text)
    text = HIDDEN.sub(lambda m: f"“{quoted[int(m.group(1))]}”", text)
    return re.sub(rf"(?<=[{CJK}，：；]) (?=“)|(?<=”) (?=[{CJK}，。；])", "", text)


#: A caption's list of a control's values, ``name ∈ {a, b, c}``.
VALUE_LIST = re.compile(r"(\u2208 \{)([^{}]*)(\})")


def translate_value_lists(caption: str, labels: dict[str, str]) -> str:
    """``caption`` with each listed value that the controls show translated (``{平均, 拼接}``)."""

    def swap(match):
        listed, shown = match.group(2), []
        while listed:  # a value may hold ", " itself (view(B, H, T, Dh), no transpose): the longest label first
            known = [v for v in labels if listed.startswith(v) and listed[len(v) :][:2] in ("", ", ")]
            value = max(known, key=len) if known else listed.split(", ")[0]
            shown.append(labels.get(value) or value)
            listed = listed[len(value) + 2 :]
        return match.group(1) + ", ".join(shown) + match.group(3)

    return VALUE_LIST.sub(swap, caption)


def translate_alts_in_data(data: dict, phrases, labels: dict[str, str]) -> dict:
    """An explorer's JSON data with its ``alts`` in the phrasebook's language."""
    if data.get("alts"):
        data = {**data, "alts": [translate_alt(alt, phrases, labels) for alt in data["alts"]]}
    return data


def alt_phrases(srcdir, language: str):
    """The phrasebook of ``language`` (empty when the book has none)."""
    path = Path(srcdir) / EXPLORER_ALTS.format(language=language)
    return phrasebook(str(path)) if path.exists() else ()
