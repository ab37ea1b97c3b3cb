"""The learner's copies of the chapters: ``book/*.ipynb`` -> ``lab/*.ipynb`` (git-ignored), for ``make lab``.

Usage:
    python scripts/lab_copies.py                  # copy every notebook that lab/ lacks; keep the others
    python scripts/lab_copies.py --refresh NAME   # a fresh copy of NAME (e.g. 03_worked_example); the old
                                                  # one is kept as lab/NAME.old.ipynb (then .old-2, ...)
    python scripts/lab_copies.py --language zh_CN # the Chinese copies, in lab/zh_CN/ (make lab-zh)

A copy is the learner's notebook (``notebooks.learner_notebook``): the book's checks on the stubs
left out, and solutions folded in JupyterLab as in the book.

JupyterLab saves a notebook every few minutes, outputs and all. The book and nbval read
``book/*.ipynb``, so a learner works on copies in ``lab/`` instead: saving there changes nothing
the book is built from. A copy is never overwritten. ``lab/.copied.json`` records which version of
each notebook a copy was made from, so that a later run can say which copies are older than the
chapter they came from. ``lab/jupytext.toml`` turns off the repository's pairing of ``book/`` with
``chapters/`` for the copies (no ``.md`` twin appears next to them).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

from notebooks import chapter_messages, write_learner_notebook

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
LAB = ROOT / "lab"
RECORD = ".copied.json"
JUPYTEXT = """# The learner's copies (made by `make lab`): plain notebooks, paired with no text file.
# The repository's jupytext.toml pairs book/*.ipynb with chapters/*.md; this one overrides it here.
formats = "ipynb"
"""


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def backup_name(lab: Path, name: str) -> Path:
    """``NAME.old.ipynb``, or ``NAME.old-2.ipynb``, ... : the first name not taken."""
    candidate, n = lab / f"{name}.old.ipynb", 1
    while candidate.exists():
        n += 1
        candidate = lab / f"{name}.old-{n}.ipynb"
    return candidate


def make_copies(book: Path = BOOK, lab: Path = LAB, refresh: tuple[str, ...] = (), language: str = "en") -> list[str]:
    """Copy each ``book/*.ipynb`` that ``lab/`` lacks (and each one named in ``refresh``, after
    moving the learner's copy aside), in ``language`` (``zh_CN``: the Chinese prose and checkers,
    ``notebooks.translate_notebook``). Returns the lines to print."""
    sources = {path.stem: path for path in sorted(book.glob("*.ipynb"))}
    unknown = sorted(set(refresh) - set(sources))
    if unknown:
        raise SystemExit(f"--refresh: no notebook {unknown} in {book}; the notebooks are {sorted(sources)}")
    lab.mkdir(exist_ok=True)
    (lab / "jupytext.toml").write_text(JUPYTEXT, encoding="utf-8")
    record_path = lab / RECORD
    record = json.loads(record_path.read_text(encoding="utf-8")) if record_path.exists() else {}
    lines, made, stale = [], [], []
    for name, source in sources.items():
        copy = lab / source.name
        if name in refresh and copy.exists():
            kept = backup_name(lab, name)
            copy.rename(kept)
            lines.append(f"kept your old {copy.name} as {kept.name}")
        if not copy.exists():
            messages = chapter_messages(name, language) if language != "en" else None
            write_learner_notebook(source, copy, messages, language)
            record[name] = digest(source)
            made.append(copy.name)
        elif record.get(name) not in (None, digest(source)):
            stale.append(name)
    record_path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    if made:
        lines.append(f"copied {len(made)} notebook(s) from book/ to {lab.name}/: {', '.join(made)}")
    kept = len(sources) - len(made)
    if kept:
        lines.append(f"kept {kept} cop{'y' if kept == 1 else 'ies'} already in {lab.name}/ (yours: never overwritten)")
    for name in stale:
        lines.append(
            f"book/{name}.ipynb changed since lab/{name}.ipynb was copied; for the new version run "
            f"`.venv/bin/python scripts/lab_copies.py --refresh {name}` (keeps yours as {name}.old.ipynb)"
        )
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refresh", nargs="+", default=[], metavar="NAME", help="notebooks to copy afresh")
    parser.add_argument("--lab", type=Path, default=None, help="the folder of copies (default: lab/, lab/zh_CN/)")
    parser.add_argument("--language", default="en", choices=["en", "zh_CN"], help="the copies' language")
    args = parser.parse_args(argv)
    names = tuple(Path(name).stem for name in args.refresh)
    lab = args.lab or (LAB if args.language == "en" else LAB / args.language)
    for line in make_copies(BOOK, lab, names, args.language):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
