"""How long the sentences of the core path are: words per sentence of the prose, outside code and math.

Usage: python scripts/sentence_length.py [--limit N] [--list] [PAGE ...]

The measure, on the text sources (``chapters/NAME.md``, ``book/intro.md``):
  * prose is the Markdown outside code cells, fenced code, display math, directive option lines,
    labels, tables and figure markup; folded boxes count (a reader who opens them reads them);
  * inline math (``$...$``) and inline code (```...```) count as one word each, a role such as
    ``{term}`head``` as the words it shows, a link as its text;
  * a sentence ends at ``.``, ``!`` or ``?`` followed by a space and then a capital, a digit or an
    opening mark, or at the end of a paragraph, a list item or a heading; the abbreviations of
    :data:`ABBREVIATIONS` do not end one.
The course's rule: no sentence of the core path (the intro and the chapters of "The course" in ``_toc.yml``)
over 35 words (:data:`LIMIT`); ``tests/book/test_prose.py`` keeps it.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 35
CORE_PAGES = ("book/intro.md",) + tuple(f"chapters/{p.name}" for p in sorted((ROOT / "chapters").glob("0[1-7]_*.md")))
ABBREVIATIONS = ("e.g.", "i.e.", "et al.", "etc.", "Fig.", "fig.", "vs.", "cf.", "Eq.", "eq.", "No.", "p.")
FENCE = re.compile(r"^\s*(`{3,}|~{3,}|:{3,})")
DISPLAY = re.compile(r"\$\$.*?\$\$", re.DOTALL)
INLINE_MATH = re.compile(r"(?<![\\$])\$(?!\$)[^$\n]+?\$")
INLINE_CODE = re.compile(r"`[^`\n]+`")
ROLE = re.compile(r"\{[\w:-]+\}`([^`<]*?)(?:\s*<[^>]*>)?`")
LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
END = re.compile(r"(?<=[.!?])[\"')\]*_]*\s+(?=[\"'(\[*_]*[A-Z0-9§$`])")


def prose_blocks(text: str) -> list[str]:
    """The paragraphs, list items and headings of a MyST text, code and display math left out."""
    text = re.sub(r"^---\n.*?\n---\n", "", text, count=1, flags=re.DOTALL)  # front matter
    text = DISPLAY.sub(" ", text)
    blocks, current, in_code = [], [], None
    for line in text.splitlines():
        stripped = line.strip()
        fence = FENCE.match(line)
        if in_code is not None:
            if fence and stripped == in_code:
                in_code = None
            continue
        if fence:
            rest = stripped[len(fence.group(1)) :]
            if rest.startswith(("{code-cell}", "{math}", "{code}", "{code-block}")) or rest[:1].isalnum() or rest == "":
                if rest:  # a fence that opens code: skip to its closing fence
                    in_code = fence.group(1)
                blocks.append(" ".join(current))
                current = []
                continue
            blocks.append(" ".join(current))  # a directive (admonition, figure): its body is prose
            current = []
            continue
        if (
            not stripped
            or stripped.startswith(("|", "+++", "<"))
            or re.match(r"^:[\w-]+:", stripped)
            or re.match(r"^\(.*\)=$", stripped)
        ):
            blocks.append(" ".join(current))
            current = []
            continue
        if re.match(r"^(#+|[-*+]|\d+\.)\s", stripped):  # a heading or a list item starts a block
            blocks.append(" ".join(current))
            current = [re.sub(r"^(#+|[-*+]|\d+\.)\s+", "", stripped)]
            continue
        current.append(stripped)
    blocks.append(" ".join(current))
    return [b for b in blocks if b.strip()]


def sentences(block: str) -> list[str]:
    """The sentences of one block, inline math and code each one token."""
    block = ROLE.sub(lambda m: m.group(1) or "TERM", block)
    block = LINK.sub(lambda m: m.group(1), block)
    block = INLINE_MATH.sub("MATH", block)
    block = INLINE_CODE.sub("CODE", block)
    for i, abbreviation in enumerate(ABBREVIATIONS):
        block = block.replace(abbreviation, f"ABBR{i}")
    parts = END.split(block)
    for i, abbreviation in enumerate(ABBREVIATIONS):
        parts = [p.replace(f"ABBR{i}", abbreviation) for p in parts]
    return [p.strip() for p in parts if p.strip()]


def words(sentence: str) -> int:
    return sum(1 for token in sentence.split() if any(ch.isalnum() for ch in token))


def measure(page: str) -> list[tuple[int, str]]:
    """``(words, sentence)`` for each sentence of one page, in order."""
    text = (ROOT / page).read_text(encoding="utf-8")
    return [(words(s), s) for block in prose_blocks(text) for s in sentences(block)]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pages", nargs="*", default=list(CORE_PAGES))
    parser.add_argument("--limit", type=int, default=LIMIT)
    parser.add_argument("--list", action="store_true", help="print each sentence over the limit")
    args = parser.parse_args(argv)
    total_over = 0
    for page in args.pages:
        counts = measure(page)
        over = [(n, s) for n, s in counts if n > args.limit]
        total_over += len(over)
        lengths = [n for n, _ in counts]
        print(
            f"{page:40s} {len(counts):4d} sentences, median {statistics.median(lengths):4.1f} words,"
            f" {len(over):3d} over {args.limit}"
        )
        if args.list:
            for n, s in over:
                print(f"   {n:3d}: {s}")
    print(f"over {args.limit} words: {total_over}")
    return 1 if total_over else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
