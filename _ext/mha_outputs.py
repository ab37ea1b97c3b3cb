"""What the chapters' code prints, in the Chinese edition.

The notebooks are executed once, in English, and their stored outputs are the same in both editions.
The Chinese edition translates the text an output shows (a stream, or a ``text/plain`` result) when the
book is built, from the phrasebook ``locales/<language>/outputs.json``, with the placeholders of
:mod:`mha.chapters.checking.verdict_i18n` (``{x:num}``, ``{s:shape}``, ``{w:word}``, ``{c:code}``, or ``{name}``
for any text, itself translated). Its two sections:

* ``"fields"``: a whole field (a table's header or label, ``all params``, ``yes``), matched only whole;
* ``"phrases"``: a phrase matched anywhere in a field, longest template first.

A printed line is cut into **fields** at runs of two or more spaces (a table's columns), and each field is
translated alone. Numbers, shapes and code are copied, so the editions cannot disagree on one.

**Columns stay aligned.** A translated field keeps the edge its column is aligned on in the English (the
right edge of a column of numbers and its header, the left edge of a label), counting a CJK character as
two columns (``unicodedata.east_asian_width``, :func:`~mha.chapters.checking.verdict_i18n.width`): a narrower
field is padded, a wider one takes the spaces beside it (at least two stay between two fields).

Left English on purpose: checker verdicts (their stored Chinese text is shown: ``mha_i18n``), printed
source code and exceptions shown on purpose (``CODE_LISTING``), and what no template matches (names,
code, a Python repr).
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

from docutils import nodes

from mha.chapters.checking.verdict_i18n import compile_template, width

#: The outputs' phrasebook, per language, relative to the book's root.
OUTPUTS = "locales/{language}/outputs.json"
#: A field of a printed line: text without a run of two spaces, but for a bracketed list ``[0.7 0.  0.3]``.
FIELD = re.compile(r"(?:\[[^\]]*\]|\S)+(?: (?:\[[^\]]*\]|\S)+)*")
#: A printed source (a def, a loop, a shape comment) or an exception shown on purpose: code, kept whole.
CODE_LISTING = re.compile(
    r"^\s*(?:def|class|import|from|return|@\w+)\b|^\s*(?:for|with|if) .*:$|# \(|^\w+(?:Error|Exception): ", re.M
)
CJK = re.compile(r"[\u4e00-\u9fff]")


class Phrasebook:
    """The compiled templates of one phrasebook: whole fields, and phrases, longest English first."""

    def __init__(self, entries: dict):
        def compiled(table: dict):
            ordered = sorted(table.items(), key=lambda item: (-len(re.sub(r"\{[^}]*\}", "", item[0])), item[0]))
            return tuple((compile_template(en), re.sub(r"\{(\w+):\w+\}", r"{\1}", zh)) for en, zh in ordered if zh)

        self.fields = compiled(entries.get("fields", {}))
        self.phrases = compiled(entries.get("phrases", {}))

    def __len__(self) -> int:
        return len(self.fields) + len(self.phrases)


@functools.cache
def load(path: str) -> Phrasebook:
    """The phrasebook in the JSON file ``path`` (``{"fields": {...}, "phrases": {...}}``)."""
    return Phrasebook(json.loads(Path(path).read_text(encoding="utf-8")))


def phrasebook_for(srcdir, language: str) -> Phrasebook | None:
    """``language``'s phrasebook for the book in ``srcdir`` (None when it has none)."""
    path = Path(srcdir) / OUTPUTS.format(language=language)
    return load(str(path)) if path.exists() else None


def translate_field(text: str, book: Phrasebook, depth: int = 0) -> str:
    """One field translated: a whole-field template, else phrase by phrase; placeholders' text in turn."""

    def values(match) -> dict[str, str]:
        return {k: translate_field(v, book, depth + 1) if depth < 4 else v for k, v in match.groupdict().items()}

    for pattern, target in book.fields:
        match = pattern.fullmatch(text)
        if match:
            return target.format(**values(match))
    english = text
    for pattern, target in book.phrases:
        text = pattern.sub(lambda match, target=target: target.format(**values(match)), text)
    # a full-width mark takes no space after it (a template's “：” before the printed value)
    if text != english:  # full-width marks where Chinese meets them, and no space after one
        text = re.sub(r"([:,]) (?=[\u4e00-\u9fff“])", lambda m: "：" if m.group(1) == ":" else "，", text)
        text = re.sub(r"(?<=[：，；])[^\S\n]+", "", text)
    return text


@functools.lru_cache(maxsize=4096)
def columns(line: str) -> tuple[tuple[int, int, str], ...]:
    """``(start, end, text)`` of each field of ``line``, in display columns (a CJK character is two)."""
    return tuple((width(line[: m.start()]), width(line[: m.end()]), m.group()) for m in FIELD.finditer(line))


def alignment(lines: list[str], row: int, start: int, end: int) -> str | None:
    """How the field ``[start, end)`` of ``lines[row]`` lines up with the other lines: ``"right"`` when more of
    their fields end where it ends than start where it starts (a column of numbers), ``"left"`` when some
    start there, None when it lines up with nothing (a line of its own)."""
    left = right = 0
    for i, other in enumerate(lines):
        if i != row:
            for s, e, _ in columns(other):
                left += s == start
                right += e == end
    if left and right and " " in lines[row][len(lines[row]) - len(lines[row].lstrip()) :].strip():
        field = next(f for s, e, f in columns(lines[row]) if s == start)
        if " " in field and re.search(r"[A-Za-z]", field):  # a label starting where others start, however it ends
            return "left"
    return "right" if right > left else "left" if left else None


def lay_out(lines: list[str], translated: list[list[str]]) -> list[str]:
    """The ``lines`` with their fields replaced by ``translated``: fields that lined up on an edge still do.

    Column by column, from the left: an edge that fields share goes where the one furthest right needs it, each
    field keeping its English gap to the field before it (a row left as it was keeps the column where it was; a
    wider header moves the whole column; a column whose every field got narrower moves left, all of it); a
    field that lines up with nothing keeps its gap to the field before it."""
    fields = [columns(line) for line in lines]
    kinds = [[alignment(lines, r, s, e) for s, e, _ in row] for r, row in enumerate(fields)]
    place: list[list[int]] = [[0] * len(row) for row in fields]
    ends, done = [0] * len(lines), [0] * len(lines)

    def gap(r: int, i: int) -> int:
        return fields[r][i][0] - (fields[r][i - 1][1] if i else 0)

    def free_up_to(r: int, stop: int) -> None:  # fields that line up with nothing, placed after their neighbour
        while done[r] < stop:
            i = done[r]
            place[r][i] = ends[r] + gap(r, i)
            ends[r], done[r] = place[r][i] + width(translated[r][i]), i + 1

    anchors: dict[int, list[tuple[int, int]]] = {}
    for r, row in enumerate(fields):
        for i, (s, e, _) in enumerate(row):
            if kinds[r][i]:
                anchors.setdefault(e if kinds[r][i] == "right" else s, []).append((r, i))
    for x in sorted(anchors):
        for r, i in anchors[x]:
            free_up_to(r, i)
        # where the column's edge goes: as far left as each of its fields allows, keeping its English gap
        at = max(
            ends[r] + gap(r, i) + (width(translated[r][i]) if kinds[r][i] == "right" else 0) for r, i in anchors[x]
        )
        for r, i in anchors[x]:
            w = width(translated[r][i])
            place[r][i] = at - (w if kinds[r][i] == "right" else 0)
            ends[r], done[r] = place[r][i] + w, i + 1
    out = []
    for r, line in enumerate(lines):
        free_up_to(r, len(fields[r]))
        text, at = "", 0
        for i, field in enumerate(translated[r]):
            text += " " * (place[r][i] - at) + field
            at = place[r][i] + width(field)
        out.append(text + line[len(line.rstrip()) :] if fields[r] else line)
    return out


def translate_output(text: str, book: Phrasebook | None) -> str:
    """An output's printed ``text`` in the phrasebook's language, its columns aligned; code is kept whole."""
    if book is None or not book or CODE_LISTING.search(text) or CJK.search(text):
        return text
    lines = text.split("\n")
    translated = [[translate_field(field, book) for _, _, field in columns(line)] for line in lines]
    if all(t == [f for _, _, f in columns(line)] for t, line in zip(translated, lines)):
        return text
    return "\n".join(lay_out(lines, translated))


def stored_outputs(notebook: dict):
    """``(cell index, output)`` of every output of ``notebook`` that a page shows as printed text: a stream,
    or a result whose only text is ``text/plain``; checker verdicts (``mha.verdict`` metadata) left out."""
    for index, cell in enumerate(notebook.get("cells", [])):
        for output in cell.get("outputs", []):
            if output.get("metadata", {}).get("mha", {}).get("verdict"):
                continue
            if output.get("output_type") == "stream":
                yield index, "".join(output.get("text", ""))
            else:
                data = output.get("data", {})
                if "text/plain" in data and not any(k in data for k in ("text/html", "image/png", "image/svg+xml")):
                    yield index, "".join(data["text/plain"])


def translate_outputs(app, doctree, docname) -> None:
    """Shows what each code cell printed in this edition's language (a Chinese page: 中文输出)."""
    language = "zh_CN" if (app.config.language or "en").startswith("zh") else "en"
    book = phrasebook_for(app.srcdir, language) if language != "en" else None
    if book is None:
        return
    for container in doctree.findall(nodes.container):
        if container.get("nb_element") != "cell_code_output":
            continue
        for block in list(container.findall(nodes.literal_block)):
            text = block.astext()
            translated = translate_output(text, book)
            if translated != text:
                block.children = []
                block += nodes.Text(translated)
                block.rawsource = translated


# ------------------------------------------------------------------------------------------------
# Two columns on the page too: a CJK character set in exactly two widths of the code font's digit
# ------------------------------------------------------------------------------------------------

#: A printed output's ``<pre>`` in a built page (a stream or a ``text/plain`` result).
OUTPUT_PRE = re.compile(
    r'(<div class="output (?:stream|text_plain)[^"]*"><div class="highlight"><pre>)(.*?)(</pre>)', re.S
)
#: The characters :func:`~mha.chapters.checking.verdict_i18n.width` counts as two columns.
WIDE = re.compile(
    r"[\u1100-\u115f\u2e80-\u303e\u3041-\u33ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7a3\uf900-\ufaff\ufe30-\ufe4f\uff00-\uff60\uffe0-\uffe6]+"
)
#: A code font has no CJK glyphs: the fallback font's are about 1.67 digits wide, not 2, so each is set in a box
#: of exactly two digits (``ch``), and a table's columns line up in any font.
WIDE_CSS = ".mha-wide{display:inline-block;width:2ch;text-align:center}"


def two_columns(page_html: str) -> str:
    """``page_html`` with each wide character of a printed output set two code-font digits wide
    (a page that has them boxed already is returned as it is)."""
    if WIDE_CSS in page_html:
        return page_html

    def box(match):
        return "".join(f'<span class="mha-wide">{character}</span>' for character in match.group(0))

    found = OUTPUT_PRE.sub(lambda m: m.group(1) + WIDE.sub(box, m.group(2)) + m.group(3), page_html)
    if found != page_html and WIDE_CSS not in found:
        found = found.replace("</head>", f"<style>{WIDE_CSS}</style>\n</head>", 1)
    return found


def outputs_two_columns(app, exception) -> None:
    """Sets the wide characters of every printed output two columns wide, in every page of this edition."""
    if exception is not None or app.builder.format != "html" or not (app.config.language or "en").startswith("zh"):
        return
    for page in Path(app.outdir).rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        boxed = two_columns(text)
        if boxed != text:
            page.write_text(boxed, encoding="utf-8")
