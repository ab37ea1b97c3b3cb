"""Checker verdicts in the reader's language: English, or Chinese (``zh_CN``).

The checkers write their verdicts in English. A verdict shown in another language is translated line
by line with a phrasebook: ``mha/chapters/<topic>/<language>.json``, one file per topic beside its
checkers (:func:`phrasebook_files`), each an object ``{English template: translated template}``. A
template is a sentence or a clause with placeholders::

    "{name} must have shape {expected:shape}, found {found:shape}": "{name} 的形状应为 {expected}，实际是 {found}"

A placeholder is ``{name}`` (any text, as little as possible; up to the end of the line when it ends
the template) or ``{name:kind}`` with a kind from :data:`KINDS` (a number, a shape, one word, ...).
The templates are tried longest first, anywhere in the line, so a line built from several clauses is
translated clause by clause; a placeholder's text is translated too (it may be a clause itself).
Numbers, shapes, code and names are copied unchanged, so the two editions can never disagree on one.

Which language: :func:`set_language`, else the environment variable ``MHA_LANG`` (``zh_CN``, ``zh``
or ``en``), else English. The book is executed in English; its Chinese edition shows the Chinese
verdict that each stored output carries in its metadata
(:meth:`~mha.chapters.checking.answers.Verdict._repr_mimebundle_`).
"""

from __future__ import annotations

import functools
import json
import os
import re
import unicodedata
from pathlib import Path

#: The languages a verdict can be shown in.
LANGUAGES = ("en", "zh_CN")
#: The folder of the topics (:mod:`mha.chapters`), each holding its checkers' phrasebook per language.
PHRASEBOOKS = Path(__file__).resolve().parents[1]
#: The labels of a verdict's parts, in every language.
PART_LABELS = Path(__file__).resolve().parent / "part_labels.json"

#: What a typed placeholder ``{name:kind}`` matches.
KINDS = {
    "num": r"[-+−]?(?:\d[\d,_]*)?\.?\d+(?:e[-+]?\d+)?%?",
    "shape": r"\((?:[^()]|\([^()]*\))*\)",
    "word": r"[^\s:;,]+",
    "code": r"`[^`]+`",
    "dtype": r"torch\.\w+",
}

_chosen: str | None = None
_CJK = re.compile(r"[\u4e00-\u9fff]")


def normalise(language: str | None) -> str:
    """``"zh"``, ``"zh-CN"``, ``"zh_CN"`` -> ``"zh_CN"``; ``"en"``, ``"en_US"``, ``""``, None -> ``"en"``.

    Raises:
        ValueError: any other language, naming the ones there are.
    """
    text = (language or "en").strip().replace("-", "_")
    if text.lower() in ("zh", "zh_cn", "zh_hans"):
        return "zh_CN"
    if text.lower() == "en" or text.lower().startswith("en_") or text.upper() in ("C", "POSIX"):
        return "en"
    raise ValueError(f"language must be one of {', '.join(LANGUAGES)} (or zh, en), found {language!r}")


def set_language(language: str | None) -> None:
    """Shows the checkers' verdicts in ``language`` (``"zh_CN"`` or ``"en"``); None follows ``MHA_LANG``."""
    global _chosen
    _chosen = None if language is None else normalise(language)


def language() -> str:
    """The language verdicts are shown in now: :func:`set_language`'s, else ``MHA_LANG``'s, else English."""
    return _chosen or normalise(os.environ.get("MHA_LANG"))


def compile_template(template: str) -> re.Pattern:
    """The regular expression of one English ``template``: its text literal, each placeholder a named group
    (``{x:num}`` a number, ``{name}`` any text), never starting or ending inside a word."""
    parts, at = [], 0
    fields = list(re.finditer(r"\{(\w+)(?::(\w+))?\}", template))
    for i, field in enumerate(fields):
        parts.append(re.escape(template[at : field.start()]))
        name, kind = field.groups()
        if kind is not None and kind not in KINDS:
            raise ValueError(f"placeholder kind must be one of {sorted(KINDS)}, found {kind!r} in {template!r}")
        last = i == len(fields) - 1 and field.end() == len(template)
        parts.append(f"(?P<{name}>{KINDS[kind] if kind else ('.+' if last else '.+?')})")
        at = field.end()
    parts.append(re.escape(template[at:]))
    # a phrase never starts or ends inside a word: "correct" is not translated inside "incorrect"
    before = r"(?<!\w)" if re.match(r"\w", template) else ""
    after = r"(?!\w)" if re.search(r"\w$", template) else ""
    return re.compile(before + "".join(parts) + after)


def phrasebook_files(language: str) -> list[Path]:
    """The phrasebooks of ``language``, one per topic: ``mha/chapters/<topic>/<language>.json``."""
    return sorted(PHRASEBOOKS.glob(f"*/{language}.json"))


@functools.cache
def phrasebook(language: str) -> tuple[tuple[re.Pattern, str, str], ...]:
    """``(pattern, translated template, English template)`` of every phrase, longest English first."""
    entries = {}
    for path in phrasebook_files(language):
        entries.update(json.loads(path.read_text(encoding="utf-8")))
    ordered = sorted(entries.items(), key=lambda item: (-len(re.sub(r"\{[^}]*\}", "", item[0])), item[0]))
    return tuple((compile_template(en), re.sub(r"\{(\w+):\w+\}", r"{\1}", zh), en) for en, zh in ordered if zh)


@functools.cache
def part_labels(language: str) -> dict[str, str]:
    """The labels of a verdict's parts that are no name in the learner's code (``count``, ``tokens``,
    ``shape``), in ``language`` (``mha/chapters/checking/part_labels.json``); an argument's name
    (``output``, ``weights``, ``w_o``) is code and stays."""
    return json.loads(PART_LABELS.read_text(encoding="utf-8")).get(language, {})


def translate(text: str, language: str = "zh_CN", *, _depth: int = 0) -> str:
    """``text`` (one line of a verdict) translated phrase by phrase; English comes back unchanged."""
    language = normalise(language)
    if language == "en" or not text.strip():
        return text
    indent = text[: len(text) - len(text.lstrip())]
    line, quoted = text.strip(), []
    if _depth == 0:  # a quoted message (a learner's exception) is copied, never translated

        def hide(match):
            quoted.append(match.group(1))
            return f"“\ue000{len(quoted) - 1}\ue001”"

        line = re.sub(r"“([^”]*)”", hide, line)
    for pattern, target, _ in phrasebook(language):

        def fill(match, target=target):
            values = {
                k: translate(v, language, _depth=_depth + 1) if _depth < 3 else v for k, v in match.groupdict().items()
            }
            return target.format(**values)

        line = pattern.sub(fill, line)
    if _depth == 0 and _CJK.search(line):  # a part's name before Chinese text takes a full-width colon
        line = re.sub(r"^([\w.]+): (?=\S)", r"\1：", line)
        # a part's label that is no name in the learner's code (count, tokens) in the reader's words
        line = re.sub(
            r"^([\w.]+)：", lambda match: part_labels(language).get(match.group(1), match.group(1)) + "：", line
        )
    if _depth == 0:  # a space between Chinese and Latin letters or digits, as d2l-zh writes
        line = re.sub(r"([\u4e00-\u9fff])([A-Za-z0-9(`])", r"\1 \2", line)
        line = re.sub(r"([A-Za-z0-9)`])([\u4e00-\u9fff])", r"\1 \2", line)
        line = re.sub("\ue000(\\d+)\ue001", lambda match: quoted[int(match.group(1))], line)
    return indent + line


# ------------------------------------------------------------------------------------------------
# Laying a translated line out: the page's code column counts a CJK character as two
# ------------------------------------------------------------------------------------------------


def width(text: str) -> int:
    """Columns ``text`` takes in a monospaced font: wide (CJK) characters take two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


#: Characters a line should not begin with (closing punctuation) or end with (opening punctuation).
_CLOSING = set("，。；：、）》”’！？,.;:)]")
_OPENING = set("（《“‘([")


#: One unit a line never breaks inside: code in backticks, or a run of non-space non-CJK characters in
#: which a parenthesised group without CJK (a shape, a call's arguments) may hold spaces:
#: ``(2, 10, 4)``, ``k.repeat_interleave(H // G, dim=1)``.
_UNIT = re.compile(
    r"\s+|`[^`]+`[^\s\u2e80-\u9fff\u3000-\u303f\uff00-\uffef]*"
    r"|(?:\((?:[^()\u2e80-\u9fff\u3000-\u303f\uff00-\uffef]|\([^()]*\))*\)|[^\s()\u2e80-\u9fff\u3000-\u303f\uff00-\uffef])+"
    r"|."
)
#: The longest group kept whole: a shape or a short call; a longer one (a line of code) breaks at its spaces.
UNIT_MAX = 40
#: Where a Chinese line breaks best when it must break: after a clause's punctuation.
_CLAUSE_END = tuple("，；：。、")


def _units(text: str) -> list[str]:
    """``text`` cut where a line may break: code, a run of non-space non-CJK characters (a shape or a
    call whole), one CJK character, or spaces; opening punctuation stays with what follows it, closing
    punctuation with what precedes."""
    tokens = []
    for token in _UNIT.findall(text):  # a group longer than a shape or a short call breaks at its spaces
        tokens += re.findall(r"\s+|\S+", token) if len(token) > UNIT_MAX and " " in token else [token]
    units: list[str] = []
    glue = False
    for token in tokens:
        if units and not token.isspace() and (glue or token[0] in _CLOSING):
            units[-1] += token
        else:
            units.append(token)
        glue = not token.isspace() and token[-1] in _OPENING
    return units


def wrap(line: str, columns: int) -> list[str]:
    """``line`` cut into lines of at most ``columns`` columns (a CJK character is two), continuation
    lines indented two more than the first; it breaks at a space or between CJK characters, never
    inside a Latin word, a number, a shape or code, never before closing or after opening punctuation,
    and, where a line must break within its last third, after a clause's punctuation (，；：).
    """
    if width(line) <= columns:
        return [line]
    indent = line[: len(line) - len(line.lstrip())]
    lines: list[str] = []
    current: list[str] = [indent]
    for unit in _units(line.strip()):
        text = "".join(current)
        if width(text + unit.rstrip()) > columns and text.strip() and not unit.isspace():
            cut = len(current)
            for i in range(len(current) - 1, 1, -1):  # the last clause's end, if it leaves a full line
                if current[i].endswith(_CLAUSE_END):
                    if width("".join(current[: i + 1])) >= columns * 2 // 3:
                        cut = i + 1
                    break
            lines.append("".join(current[:cut]).rstrip())
            rest = [u for u in current[cut:]]
            while rest and rest[0].isspace():
                rest.pop(0)
            current = [indent + "  ", *rest]
        if not ("".join(current).strip() == "" and unit.isspace()):
            current.append(unit)
    lines.append("".join(current).rstrip())
    return lines


def render(lines, language: str, columns: int | None = None) -> str:
    """A verdict's logical ``lines`` translated into ``language`` and, given ``columns``, wrapped."""
    out = []
    for line in lines:
        text = translate(line, language)
        out += wrap(text, columns) if columns else [text]
    return "\n".join(out)


# ------------------------------------------------------------------------------------------------
# What the tests call untranslated: English words outside code, names and quoted messages
# ------------------------------------------------------------------------------------------------

_CODE = re.compile(
    r"`[^`]*`"  # code in backticks
    r"|“[^”]*”"  # a quoted message (a learner's exception, PyTorch's words)
    r"|[\w.]*[_.()\[\]=@/*<>+\d][\w.()\[\]=@/*<>+,\-]*"  # identifiers, calls, shapes, numbers
)
#: Two or more words, the first in lower case (Dh, Dv, T, S are symbols, not words).
_WORDS = re.compile(r"\b[a-z][A-Za-z]+(?:[ '-]+[A-Za-z]{2,})+\b")


def english_left(text: str) -> list[str]:
    """The runs of two or more English words in a translated verdict, outside code and quotes."""
    return _WORDS.findall(_CODE.sub(" ", text))
