"""Fail when a chapter's text source and its stored notebook disagree on any cell.

Usage: python scripts/check_sync.py   (the pre-commit hook and tests/book/test_notebooks.py run it)

``chapters/NAME.md`` is the source; ``book/NAME.ipynb`` must hold the same cells (type, source,
tags) in the same order. After editing the ``.md``, run ``make notebooks`` (or, to store outputs of
one chapter, ``python scripts/execute_notebooks.py chapters/NAME.md``). After editing the ``.ipynb``
in JupyterLab without Jupytext, run ``jupytext --sync book/NAME.ipynb``, then ``make notebooks``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from notebooks import BOOK_DIR, ROOT, all_texts, out_of_sync, text_path  # noqa: E402


def main() -> int:
    bad = 0
    texts = all_texts()
    orphans = [p for p in sorted(BOOK_DIR.glob("*.ipynb")) if not text_path(p).exists()]
    for path in orphans:
        print(f"{path.relative_to(ROOT)} has no text source {text_path(path).relative_to(ROOT)}")
        bad += 1
    for text in texts:
        problems = out_of_sync(text)
        if problems:
            bad += 1
            print(f"{text.relative_to(ROOT)} and its notebook disagree:\n  " + "\n  ".join(problems))
    if not bad:
        print(f"{len(texts)} chapters: text source and notebook in sync")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
