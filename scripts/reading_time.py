"""How long the book takes to read, page by page and part by part, against the course's budget.

Usage: python scripts/reading_time.py [--check]

The measure (counted from what a reader sees on the rendered page without opening anything):
  * prose: the words of the Markdown cells (or of a Markdown page), at 140 words a minute;
  * a folded box (a dropdown: "going further", an exercise's answer) counts at half its time (its words,
    equations and figures): a reader opens some boxes and not others, and half is what one who opens
    every second box reads (leaving the boxes out read 150 minutes where a learner who opened some
    took longer; counting them in whole assumes every box is read);
  * code: the lines of code cells a reader sees unfolded (cells tagged remove-input, remove-cell,
    hide-input or hide-cell are folded or gone), at 10 lines a minute; the figures and explorers of a
    cell whose code is folded still count, unless its outputs are folded too;
  * half a minute for each display equation, 1.5 minutes for each figure (an image output, or an image
    in the prose) and 2 for each explorer.
The rates are those that matched a new learner's minutes on the core path (within 10 % on six of
its seven chapters, where the old rates, 200 words and 15 lines a minute, read 195 minutes as 122).
The budget: the core path (the part captioned "The course") at most 150 minutes and each of its
chapters at most 30; each deep dive at most 60. ``--check`` exits 1 when the book is over it.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
WORDS_PER_MINUTE, CODE_LINES_PER_MINUTE = 140, 10
MINUTES_PER_EQUATION, MINUTES_PER_FIGURE, MINUTES_PER_EXPLORER = 0.5, 1.5, 2.0
CORE_PART, DEEP_PART = "The course", "Deep dives"
CORE_BUDGET, CORE_CHAPTER_BUDGET, DEEP_DIVE_BUDGET = 150.0, 30.0, 60.0
FOLDED = {"remove-input", "remove-cell", "hide-input", "hide-cell"}
#: Tags under which a cell's outputs (its figures, its explorer) are folded or gone; hide-input and
#: remove-input fold only the code: the figure or explorer below it is still on the page.
OUTPUT_FOLDED = {"remove-output", "remove-cell", "hide-output", "hide-cell"}
FENCE = re.compile(r"^(```|~~~)")
IMAGE = re.compile(r"!\[[^\]]*\]\(|```\{(?:image|figure)\}")
IMAGE_MARKUP = re.compile(r"!\[[^\]]*\]\([^)]*\)")
DIRECTIVE = re.compile(r"^(`{3,}|:{3,})\{([\w-]+)\}")
DISPLAY_MATH = re.compile(r"\$\$.*?\$\$|^(`{3,}|:{3,})\{math\}.*?^\1$", re.DOTALL | re.MULTILINE)
MATH_BLOCK = re.compile(r"\$\$|^(`{3,}|:{3,})\{math\}", re.MULTILINE)
#: The share of a folded box's time the measure counts: half, what a reader who opens every second box reads.
FOLDED_SHARE = 0.5


def unfolded(markdown: str) -> str:
    """``markdown`` without its folded boxes (a ``dropdown`` directive, or any directive given
    ``:class: dropdown``): what a reader sees before opening anything."""
    return _split_folded(markdown)[0]


def folded(markdown: str) -> str:
    """The bodies of ``markdown``'s folded boxes (a box inside a folded box is part of its body)."""
    return _split_folded(markdown)[1]


def _split_folded(markdown: str) -> tuple[str, str]:
    lines, kept, inside, i = markdown.splitlines(), [], [], 0
    while i < len(lines):
        match = DIRECTIVE.match(lines[i].strip())
        if match:
            fence, name = match.groups()
            options = []
            for line in lines[i + 1 :]:
                option = line.strip()
                if not option.startswith(":") or option.startswith(":::"):  # options end; ::: is a fence
                    break
                options.append(option)
            if name == "dropdown" or any(o.startswith(":class:") and "dropdown" in o for o in options):
                i += 1 + len(options)
                while i < len(lines) and lines[i].strip() != fence:
                    inside.append(lines[i])
                    i += 1
                i += 1
                continue
        kept.append(lines[i])
        i += 1
    return "\n".join(kept), "\n".join(inside)


def display_equations(markdown: str) -> int:
    """Display equations of an (unfolded) Markdown text: ``$$ ... $$`` pairs and ``{math}`` blocks."""
    matches = MATH_BLOCK.findall(markdown)
    dollars = sum(1 for m in matches if not m)
    return dollars // 2 + sum(1 for m in matches if m)


def _prose_words(markdown: str) -> tuple[float, float, float]:
    """Words of prose (directive and label lines left out), images and display equations in one
    Markdown text, its folded boxes counted at :data:`FOLDED_SHARE`."""
    seen, inside = _split_folded(markdown)
    counts = [a + FOLDED_SHARE * b for a, b in zip(_counted(seen), _counted(inside))]
    return counts[0], counts[1], counts[2]


def _counted(markdown: str) -> tuple[int, int, int]:
    """Words, images and display equations of a text with no folded box."""
    equations = display_equations(markdown)
    markdown = DISPLAY_MATH.sub(" ", markdown)  # an equation is timed as one, not read as words
    words, images = 0, len(IMAGE.findall(markdown))
    for line in markdown.splitlines():
        stripped = line.strip()
        if (
            FENCE.match(stripped)
            or stripped.startswith((":", "(", "+++", "---"))
            and stripped.endswith((")=", ":", "+++", "---"))
        ):
            continue
        stripped = IMAGE_MARKUP.sub(" ", stripped)
        words += sum(1 for token in stripped.split() if any(ch.isalnum() for ch in token))
    return words, images, equations


def page_counts_of_markdown(markdown: str) -> dict:
    """:func:`page_counts` of a Markdown text."""
    words, figures, equations = _prose_words(markdown)
    return {"words": words, "figures": figures, "equations": equations}


def page_counts(path: Path) -> dict:
    """``words``, ``code_lines``, ``equations``, ``figures``, ``explorers`` and ``minutes`` of one page
    (``.ipynb`` or ``.md``)."""
    words = code = figures = explorers = equations = 0
    if path.suffix == ".md":
        words, figures, equations = _prose_words(path.read_text(encoding="utf-8"))
    else:
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            source = "".join(cell["source"])
            if cell["cell_type"] == "markdown":
                w, images, eqs = _prose_words(source)
                words, figures, equations = words + w, figures + images, equations + eqs
                continue
            tags = set(cell.get("metadata", {}).get("tags", []))
            if cell["cell_type"] != "code":
                continue
            if not FOLDED & tags:
                code += sum(1 for line in source.splitlines() if line.strip() and not line.startswith("# NBVAL"))
            if OUTPUT_FOLDED & tags:
                continue
            for output in cell.get("outputs", []):
                data = output.get("data", {})
                html = "".join(data.get("text/html", ""))
                if 'class="mha-explorer' in html:
                    explorers += 1
                elif "image/png" in data or "image/svg+xml" in data:
                    figures += 1
    minutes = (
        words / WORDS_PER_MINUTE
        + code / CODE_LINES_PER_MINUTE
        + equations * MINUTES_PER_EQUATION
        + figures * MINUTES_PER_FIGURE
        + explorers * MINUTES_PER_EXPLORER
    )
    return {
        "words": words,
        "code_lines": code,
        "equations": equations,
        "figures": figures,
        "explorers": explorers,
        "minutes": minutes,
    }


def toc_parts() -> list[tuple[str, list[str]]]:
    """``(caption, [page, ...])`` per part of ``_toc.yml`` (the root page first, under "Start")."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    parts = [("Start", [toc["root"]])]
    for part in toc.get("parts", [{"caption": "Chapters", "chapters": toc.get("chapters", [])}]):
        pages = []
        for entry in part.get("chapters", []):
            pages += [entry["file"]] + [s["file"] for s in entry.get("sections", [])]
        parts.append((part.get("caption", ""), pages))
    return parts


def _source(page: str) -> Path:
    for suffix in (".ipynb", ".md"):
        if (ROOT / page).with_suffix(suffix).exists():
            return (ROOT / page).with_suffix(suffix)
    raise FileNotFoundError(f"{page}: neither .ipynb nor .md")


def measure() -> list[dict]:
    """One row per page: ``part``, ``page`` and :func:`page_counts`."""
    return [
        {"part": caption, "page": page, **page_counts(_source(page))}
        for caption, pages in toc_parts()
        for page in pages
    ]


def over_budget(rows: list[dict]) -> list[str]:
    """What exceeds the budget, one sentence each (empty when nothing does)."""
    problems = []
    core = [r for r in rows if r["part"] == CORE_PART]
    if not core:
        problems.append(f"_toc.yml has no part captioned {CORE_PART!r}")
    if sum(r["minutes"] for r in core) > CORE_BUDGET:
        problems.append(f"the core path reads in {sum(r['minutes'] for r in core):.0f} min (budget {CORE_BUDGET:.0f})")
    for r in core:
        if r["minutes"] > CORE_CHAPTER_BUDGET:
            problems.append(
                f"{r['page']}: {r['minutes']:.0f} min (a core chapter's budget is {CORE_CHAPTER_BUDGET:.0f})"
            )
    for r in rows:
        if r["part"] == DEEP_PART and r["minutes"] > DEEP_DIVE_BUDGET:
            problems.append(f"{r['page']}: {r['minutes']:.0f} min (a deep dive's budget is {DEEP_DIVE_BUDGET:.0f})")
    return problems


def table(rows: list[dict]) -> str:
    lines = [f"{'page':28s} {'words':>6s} {'code':>5s} {'eqs':>4s} {'figs':>5s} {'expl':>5s} {'minutes':>8s}"]
    for caption in dict.fromkeys(r["part"] for r in rows):
        part = [r for r in rows if r["part"] == caption]
        lines.append(f"-- {caption}")
        for r in part:
            lines.append(
                f"{Path(r['page']).name:28s} {r['words']:6.0f} {r['code_lines']:5d} {r['equations']:4.0f}"
                f" {r['figures']:5.0f} {r['explorers']:5d} {r['minutes']:8.1f}"
            )
        lines.append(f"{'   total, ' + caption:28s} {'':29s} {sum(r['minutes'] for r in part):8.1f}")
    lines.append(f"{'whole book':28s} {'':29s} {sum(r['minutes'] for r in rows):8.1f}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a page or part is over its budget")
    args = parser.parse_args(argv)
    rows = measure()
    print(table(rows))
    problems = over_budget(rows)
    for p in problems:
        print("over budget:", p)
    return 1 if problems and args.check else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
