"""Build a chapter notebook's source (markdown and code cells) from a ``scripts/make_*.py`` script.

Each chapter's text lives in its script; the script calls ``md``/``code`` in reading order and
then ``write()``. Outputs are stored afterwards by ``scripts/execute_notebooks.py``.
"""
from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parents[1]
KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}


class NotebookSource:
    """The cells of one notebook, with stable cell ids (``<prefix>-000``, ...) to keep diffs small."""

    def __init__(self, path: Path, id_prefix: str):
        self.path = Path(path)
        self.id_prefix = id_prefix
        self.cells = []

    def md(self, text: str) -> None:
        self.cells.append(new_markdown_cell(text.strip("\n")))

    def code(self, text: str, tags=()) -> None:
        cell = new_code_cell(text.strip("\n"))
        if tags:
            cell.metadata["tags"] = list(tags)
        self.cells.append(cell)

    def build(self) -> nbformat.NotebookNode:
        nb = new_notebook(cells=self.cells, metadata={"kernelspec": dict(KERNELSPEC),
                                                      "language_info": {"name": "python"}})
        for i, cell in enumerate(nb.cells):
            cell["id"] = f"{self.id_prefix}-{i:03d}"
        return nb

    def write(self) -> None:
        nbformat.write(self.build(), self.path)
        print(f"wrote {self.path.relative_to(ROOT)} ({len(self.cells)} cells)")
