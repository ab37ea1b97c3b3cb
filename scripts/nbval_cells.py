"""Count what nbval compares: code cells whose stored outputs it checks, per notebook.

Usage: python scripts/nbval_cells.py [NOTEBOOK ...]   (default: every book/*.ipynb)

A code cell is *compared* when it has stored outputs and no ``nbval-ignore-output`` /
``nbval-skip`` tag (or ``# NBVAL_...`` marker). ``make test`` prints the total after the nbval run.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
from execute_notebooks import ROOT, is_ignored  # noqa: E402


def cell_counts(nb) -> dict:
    code = [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]
    ignored = [c for c in code if is_ignored(c)]
    compared = [c for c in code if not is_ignored(c) and c.get("outputs")]
    return {"code": len(code), "compared": len(compared), "ignored": len(ignored)}


def main(argv: list[str]) -> int:
    paths = [Path(p) for p in argv] or sorted((ROOT / "book").glob("*.ipynb"))
    total = {"code": 0, "compared": 0, "ignored": 0}
    for path in paths:
        counts = cell_counts(nbformat.read(path, as_version=4))
        for key in total:
            total[key] += counts[key]
        print(f"  {path.name}: {counts['compared']} compared, {counts['ignored']} ignored, {counts['code']} code cells")
    print(
        f"nbval compares the stored outputs of {total['compared']} cells in {len(paths)} notebooks "
        f"({total['code']} code cells run, {total['ignored']} tagged nbval-ignore-output/skip)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
