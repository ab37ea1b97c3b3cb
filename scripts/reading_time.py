"""How long the book takes to read, page by page and part by part, against the course's budget.

Usage: python scripts/reading_time.py [--check]

The measure (counted from what a reader sees on the rendered page, before any exercise):
  * prose: the words of the Markdown cells (or of a Markdown page), at 200 words a minute;
  * code: the lines of code cells a reader sees unfolded (cells tagged remove-input, remove-cell,
    hide-input or hide-cell are folded or gone), at 15 lines a minute;
  * one minute for each figure (an image output, or an image in the prose) and each explorer.
The budget: the core path (the part captioned "The course") at most 150 minutes and each of its
chapters at most 30; each deep dive at most 45. ``--check`` exits 1 when the book is over it.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
WORDS_PER_MINUTE, CODE_LINES_PER_MINUTE, MINUTES_PER_FIGURE = 200, 15, 1.0
CORE_PART, DEEP_PART = "The course", "Deep dives"
CORE_BUDGET, CORE_CHAPTER_BUDGET, DEEP_DIVE_BUDGET = 150.0, 30.0, 45.0
FOLDED = {"remove-input", "remove-cell", "hide-input", "hide-cell"}
FENCE = re.compile(r"^(```|~~~)")
IMAGE = re.compile(r"!\[[^\]]*\]\(|```\{(?:image|figure)\}")
IMAGE_MARKUP = re.compile(r"!\[[^\]]*\]\([^)]*\)")


def _prose_words(markdown: str) -> tuple[int, int]:
    """Words of prose (directive and label lines left out) and images in one Markdown text."""
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
    return words, images


def page_counts(path: Path) -> dict:
    """``words``, ``code_lines``, ``figures`` and ``minutes`` of one page (``.ipynb`` or ``.md``)."""
    words = code = figures = 0
    if path.suffix == ".md":
        words, figures = _prose_words(path.read_text(encoding="utf-8"))
    else:
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            source = "".join(cell["source"])
            if cell["cell_type"] == "markdown":
                w, images = _prose_words(source)
                words, figures = words + w, figures + images
                continue
            if cell["cell_type"] != "code" or FOLDED & set(cell.get("metadata", {}).get("tags", [])):
                continue
            code += sum(1 for line in source.splitlines() if line.strip() and not line.startswith("# NBVAL"))
            for output in cell.get("outputs", []):
                data = output.get("data", {})
                html = "".join(data.get("text/html", ""))
                if "image/png" in data or "image/svg+xml" in data or 'class="mha-explorer' in html:
                    figures += 1
    minutes = words / WORDS_PER_MINUTE + code / CODE_LINES_PER_MINUTE + figures * MINUTES_PER_FIGURE
    return {"words": words, "code_lines": code, "figures": figures, "minutes": minutes}


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
    lines = [f"{'page':36s} {'words':>6s} {'code':>5s} {'figs':>5s} {'minutes':>8s}"]
    for caption in dict.fromkeys(r["part"] for r in rows):
        part = [r for r in rows if r["part"] == caption]
        lines.append(f"-- {caption}")
        for r in part:
            lines.append(
                f"{Path(r['page']).name:36s} {r['words']:6d} {r['code_lines']:5d} {r['figures']:5d} {r['minutes']:8.1f}"
            )
        lines.append(f"{'   total, ' + caption:36s} {'':18s} {sum(r['minutes'] for r in part):8.1f}")
    lines.append(f"{'whole book':36s} {'':18s} {sum(r['minutes'] for r in rows):8.1f}")
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
