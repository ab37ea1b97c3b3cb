"""Checker verdicts in the reader's language: English, or Chinese (``zh_CN``).

A checker says each message once, as a template with named arguments (:func:`say`)::

    say("{name} must hold {length} numbers, found shape {shape}", name=name, length=3, shape=(2, 2))

The result is a :class:`Message`: its English text, which keeps the template and the arguments. In
another language (:func:`say_in`) the template's translation is looked up in the phrasebook of the
checker's topic, ``mha/chapters/<topic>/<language>.json`` (:func:`phrasebook_files`), an object
``{English template: translated template}``::

    "{name} must hold {length} numbers, found shape {shape}": "{name} 应包含 {length} 个数，实际形状为 {shape}"

and filled with the same arguments: an argument that is a message (a hint, a clause) is said in that
language too; any other (a number, a shape, code, the learner's own words) is formatted as the English
template formats it, so the two editions can never disagree on a number. No text is parsed back: the
phrasebooks are extracted from the code's ``say(...)`` calls (``python scripts/i18n.py strings``
lists the templates new or gone), as gettext extracts the prose. A translated line is then set as
Chinese is written (:func:`typeset`) and wrapped to the page's width (:func:`wrap`).

Which language: :func:`set_language`, else the environment variable ``MHA_LANG`` (``zh_CN``, ``zh``
or ``en``), else English. The book is executed in English; its Chinese edition shows the Chinese
verdict that each stored output carries in its metadata
(:meth:`~mha.chapters.checking.answers.Verdict._repr_mimebundle_`).

:func:`compile_template` and :data:`KINDS` are the other stores' placeholders (what the chapters print,
``locales/zh_CN/outputs.json``, and the explorers' alt texts), which the book's extensions match in
text that has no template behind it.
"""

from __future__ import annotations

import functools
import json
import os
import re
import string
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
def part_labels(language: str) -> dict[str, str]:
    """The labels of a verdict's parts that are no name in the learner's code (``count``, ``tokens``,
    ``shape``), in ``language`` (``mha/chapters/checking/part_labels.json``); an argument's name
    (``output``, ``weights``, ``w_o``) is code and stays."""
    return json.loads(PART_LABELS.read_text(encoding="utf-8")).get(language, {})


# ------------------------------------------------------------------------------------------------
# What a checker says: a template and its arguments, said in either language
# ------------------------------------------------------------------------------------------------


class Message(str):
    """A sentence a checker says, as English text that keeps the template and the arguments it was made
    from (:func:`say`), so that :func:`say_in` can say it in another language from its phrasebook entry.

    It is a ``str`` (its English text): a checker compares, joins and wraps it like any other string.
    """

    template: str
    args: dict

    def __new__(cls, template: str, args: dict):
        self = super().__new__(cls, template.format(**args))
        self.template, self.args = template, args
        return self

    def __reduce__(self):
        return (Message, (self.template, self.args))

    def indented(self, spaces: int) -> Message:
        """The same sentence, ``spaces`` further in (an aligned hint under its part)."""
        return Message(" " * spaces + self.template, self.args)


def say(template: str, /, **args) -> Message:
    """The sentence ``template.format(**args)``, kept with its template so that it can be translated.

    ``template`` is a literal with named fields (``{found}``, ``{found:g}``, ``{value!r}``): the
    phrasebooks are extracted from the code's ``say(...)`` calls (``python scripts/i18n.py strings``)
    and key each translation by this template, which a translation fills with the same arguments. An
    argument that is itself a :class:`Message` (a hint, a clause) is said in the same language; any other
    (a number, a shape, code, the learner's own words) is formatted as the English template formats it,
    so the two editions can never disagree on one. Leading spaces are indentation, not part of the key.

    Raises:
        KeyError: a field of ``template`` has no argument.
    """
    return Message(template, args)


_FIELDS = string.Formatter()


@functools.cache
def templates(language: str) -> dict[str, str]:
    """``{English template: translated template}`` of every topic's phrasebook in ``language``."""
    entries = {}
    for path in phrasebook_files(language):
        entries.update(json.loads(path.read_text(encoding="utf-8")))
    return {en: zh for en, zh in entries.items() if zh and not en.startswith("_")}


def fields(template: str) -> list[tuple[str, str, str | None]]:
    """``(name, format spec, conversion)`` of each field of ``template``, in order."""
    return [(name, spec, conversion) for _, name, spec, conversion in _FIELDS.parse(template) if name is not None]


def say_in(text, language: str) -> str:
    """``text`` said in ``language``: a :class:`Message` from its template's translation (its English if the
    phrasebook has none), anything else as it is."""
    if not isinstance(text, Message) or normalise(language) == "en":
        return str(text)
    language = normalise(language)
    filled = {}
    for name, spec, conversion in fields(text.template):
        value = text.args[name]
        if isinstance(value, Message):
            value = say_in(value, language)
        elif conversion:
            value = _FIELDS.convert_field(value, conversion)
        filled[name] = format(value, spec)
    key = text.template.strip()
    indent = text.template[: len(text.template) - len(text.template.lstrip())]
    target = templates(language).get(key)
    if target is None:
        if not only_fields(key):
            return str(text)  # not translated yet: the tests name the template (scripts/i18n.py strings)
        target = "".join(lit + ("" if name is None else f"{{{name}}}") for lit, name, _, _ in _FIELDS.parse(key))
    return indent + target.format(**filled)


def only_fields(template: str) -> bool:
    """True for a template with no words of its own (``"{name:8s} {message}"``): it needs no translation,
    each language says its fields with the spaces between them."""
    return not "".join(literal for literal, *_ in _FIELDS.parse(template)).strip()


def typeset(line: str, language: str) -> str:
    """A translated ``line`` set as the reader's language writes it: in Chinese, a part's name before
    Chinese text takes a full-width colon (and its label, when it is no name in the learner's code, the
    reader's word), and a space separates Chinese from Latin letters or digits, as d2l-zh writes; a quoted
    message (a learner's exception) is left as it is."""
    if normalise(language) == "en" or not line.strip():
        return line
    indent = line[: len(line) - len(line.lstrip())]
    quoted: list[str] = []

    def hide(match):
        quoted.append(match.group(1))
        return f"“\ue000{len(quoted) - 1}\ue001”"

    line = re.sub(r"“([^”]*)”", hide, line.strip())
    if _CJK.search(line):
        line = re.sub(r"^([\w.]+): (?=\S)", r"\1：", line)
        line = re.sub(
            r"^([\w.]+)：", lambda match: part_labels(language).get(match.group(1), match.group(1)) + "：", line
        )
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
        text = typeset(say_in(line, language), language)
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
