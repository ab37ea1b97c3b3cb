"""Code names a chapter by its label, never by its number; the README's table of chapters is current.

The book numbers its chapters in reading order, and that order has changed: a number written into a
docstring ("Chapter 4's exercise checkers") went stale when the parameter-analysis chapter became the
fifth. So the code under ``mha/``, ``_ext/``, ``scripts/`` and ``benchmarks/`` names a chapter by its
label or topic ("the parameter-analysis chapter", ``chapter("parameter_analysis")``) and reads a
number, where a reader must see one, from :data:`mha.chapters.CHAPTERS`. Page file names
(``book/05_parameter_analysis``) are names, not prose, and the pattern does not see them.

:data:`ALLOWED` is the whole allow-list, each entry with its reason.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import chapter_table  # noqa: E402  (scripts/chapter_table.py)

#: A chapter named by its number: "Chapter 4", "chapters 1-7", "chapter-3", "chapter three", "ch. 3",
#: "ch 3", "ch05" (any case). Not ``chapter {n}`` (a number read from the map) nor ``make_ch01_cache``.
CHAPTER_NUMBER = re.compile(
    r"\bchapters?[ -](?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|eleven)\b|\bch\.? ?\d+\b",
    re.IGNORECASE,
)
#: The folders (and files) whose code and docstrings are checked.
CHECKED = ("mha", "_ext", "scripts", "benchmarks")
#: (file, the whole word around a match) -> why it may stay. Keep this short.
ALLOWED = {
    # The live-training probes' ids: keys of mha/data/portability.json that the head-count and
    # merging experiments' sources (chapters/08_*.md, chapters/09_*.md) and their stored notebooks
    # pass to mha.provenance.in_band; renaming them means those pages and their outputs too.
    **{
        ("scripts/measure_portability.py", f'"{probe}"'): "a probe id"
        for probe in (
            "ch01.heads1",
            "ch01.heads2",
            "ch01.linear_k2_heads1",
            "ch05.concat_seed0",
            "ch05.average_seed0",
            "ch05.average_seed2",
        )
    },
}


def chapter_numbers(text: str) -> list[tuple[int, str, str]]:
    """``(line, match, the word around it)`` for each chapter named by number in ``text``."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for match in CHAPTER_NUMBER.finditer(line):
            start = line.rfind(" ", 0, match.start()) + 1
            end = line.find(" ", match.end())
            word = line[start : end if end >= 0 else len(line)].rstrip(":,")
            found.append((number, match.group(0), word))
    return found


def checked_files() -> list[Path]:
    files = []
    for folder in CHECKED:
        files += sorted((ROOT / folder).glob("*.py" if folder == "_ext" else "**/*.py"))
    return files


def test_the_pattern_finds_a_chapter_number_in_any_form():
    text = '"""Chapter 4\'s checkers.\n(chapters 1-7), chapter-3, Chapter three, ch. 3, CH 5 and ch05'
    assert [m for _, m, _ in chapter_numbers(text)] == [
        "Chapter 4",
        "chapters 1",
        "chapter-3",
        "Chapter three",
        "ch. 3",
        "CH 5",
        "ch05",
    ]
    names = 'make_ch01_cache.py, book/05_parameter_analysis, f"chapter {chapter("x").number}", chapter_6'
    assert chapter_numbers(names) == []
    assert chapter_numbers('    "ch01.heads1": (') == [(1, "ch01", '"ch01.heads1"')]


def test_code_names_no_chapter_by_its_number():
    """Every "Chapter N" in code, comments and docstrings is a slip: name the chapter by its label."""
    found = []
    for path in checked_files():
        rel = path.relative_to(ROOT).as_posix()
        for line, match, word in chapter_numbers(path.read_text(encoding="utf-8")):
            if (rel, word) not in ALLOWED:
                found.append(f"{rel}:{line}: {match!r}")
    assert found == [], "name these chapters by label (mha.chapters.CHAPTERS):\n" + "\n".join(found)


def test_the_allow_list_is_used():
    """An entry no file needs any more goes: the allow-list stays the smallest that passes."""
    seen = set()
    for path in checked_files():
        rel = path.relative_to(ROOT).as_posix()
        seen |= {(rel, word) for _, _, word in chapter_numbers(path.read_text(encoding="utf-8"))}
    assert set(ALLOWED) <= seen, sorted(set(ALLOWED) - seen)


def test_readme_chapter_table_is_current():
    """README.md's table of chapters is what scripts/chapter_table.py writes from the map."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert chapter_table.rewritten(text) == text, "the chapter table is stale: run python scripts/chapter_table.py"


def test_the_chapter_table_check_fails_when_stale(tmp_path, monkeypatch):
    from mha.chapters import CHAPTERS, chapter

    fresh = chapter_table.table()
    assert fresh.count("\n| ") == len(CHAPTERS) + 2  # the header, the rule and a row per chapter
    worked = chapter("worked_example")
    assert f"| [{chapter_table.title(worked)}]({worked.source}) |" in fresh and "`worked_diagnosis`" in fresh
    stale = f"intro\n\n{chapter_table.BEGIN}\n| old | table |\n{chapter_table.END}\n\nrest\n"
    readme = tmp_path / "README.md"
    readme.write_text(stale, encoding="utf-8")
    monkeypatch.setattr(chapter_table, "README", readme)
    assert chapter_table.main(["--check"]) == 1 and readme.read_text(encoding="utf-8") == stale
    assert chapter_table.main([]) == 0
    assert readme.read_text(encoding="utf-8") == f"intro\n\n{fresh}\n\nrest\n"
    assert chapter_table.main(["--check"]) == 0
    with pytest.raises(ValueError, match="lacks the markers"):
        chapter_table.rewritten("no table here")


def test_the_chapter_table_script_runs():
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "chapter_table.py"), "--check"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
