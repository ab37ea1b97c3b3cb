"""Write the README's table of chapters from ``mha.chapters.CHAPTERS``: each chapter, its code, figures and hints.

Usage: python scripts/chapter_table.py [--check]

Rewrites the block between the two marker comments of ``README.md`` (:data:`BEGIN`, :data:`END`) with
one row per chapter: the number the book shows and its title (from the chapter's source, linked), its
part (``_toc.yml``), its label (what code calls it), its topic's folder in ``mha/chapters/``, the modules
its code uses (those of another topic by ``topic.module``), the modules that draw its figures, and the
phrasebook of its checkers' Chinese hints (``<topic>/zh_CN.json``). Nothing else of the README changes.
``--check`` writes nothing and exits 1 when the block differs from what the map gives now
(``tests/book/test_chapter_map.py`` checks the same).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mha.chapters import CHAPTERS, SHARED, Chapter  # noqa: E402

README = ROOT / "README.md"
BEGIN = "<!-- chapter table: written by scripts/chapter_table.py from mha.chapters.CHAPTERS; do not edit -->"
END = "<!-- end of chapter table -->"


def title(chapter: Chapter) -> str:
    """The chapter's title: the first ``# `` heading of its source."""
    text = (ROOT / chapter.source).read_text(encoding="utf-8")
    return re.search(r"^# (.+)$", text, re.M).group(1).strip()


def parts() -> dict[str, str]:
    """Page -> the caption of its part in ``_toc.yml`` ("The course", "Deep dives")."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    return {entry["file"]: part["caption"] for part in toc["parts"] for entry in part.get("chapters", [])}


def phrasebooks(chapter: Chapter) -> list[str]:
    """The phrasebook of the chapter's checkers, ``zh_CN.json`` in its topic's folder, if the chapter calls a
    checker (``.check_...(``)."""
    calls = re.search(r"\.check_\w+\(", (ROOT / chapter.source).read_text(encoding="utf-8"))
    return ["zh_CN.json"] if calls and (ROOT / chapter.folder / "zh_CN.json").exists() else []


def code(names, topic: str = "") -> str:
    """Module names as code, those of ``topic`` without it: ``worked``, ``heads.task``."""
    return ", ".join(f"`{n.removeprefix(topic + '.') if topic else n}`" for n in names) or "-"


def table() -> str:
    """The block, markers included."""
    part_of = parts()
    rows = [
        BEGIN,
        "| | chapter | part | label | folder (`mha/chapters/`) | code | figures | Chinese hints |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for number, chapter in CHAPTERS.items():
        rows.append(
            f"| {number} | [{title(chapter)}]({chapter.source}) | {part_of.get(chapter.page, '-')} | "
            f"`{chapter.label}` | [`{chapter.topic}/`]({chapter.folder}) | {code(chapter.modules, chapter.topic)} | "
            f"{code(chapter.figures, chapter.topic)} | {code(phrasebooks(chapter))} |"
        )
    rows.append("")
    rows.append(
        f"Every checker uses {code(SHARED)}. Code names a chapter by its label "
        '(`mha.chapters.chapter("worked_example")`), never by its number.'
    )
    rows.append(END)
    return "\n".join(rows)


def rewritten(text: str) -> str:
    """``text`` (the README) with its block replaced by :func:`table`; ``ValueError`` without both markers."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"README.md lacks the markers {BEGIN!r} ... {END!r}")
    return text[:start] + table() + text[end + len(END) :]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if the table is out of date")
    args = parser.parse_args(argv)
    text = README.read_text(encoding="utf-8")
    new = rewritten(text)
    if new == text:
        return 0
    if args.check:
        print("README.md's chapter table is stale: run python scripts/chapter_table.py", file=sys.stderr)
        return 1
    README.write_text(new, encoding="utf-8")
    print("wrote the chapter table of README.md")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
