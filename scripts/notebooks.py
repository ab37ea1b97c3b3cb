"""The chapters' two forms: the text source ``chapters/NAME.md`` (MyST Markdown, read with
Jupytext) and the executed notebook ``book/NAME.ipynb`` (its stored outputs are what nbval checks
and what the book shows).

Shared by ``execute_notebooks.py`` (writes the ``.ipynb``), ``check_sync.py`` (the two agree) and
the tests. A cell's id is a hash of its type and source (plus a counter for repeated sources), so
inserting a cell changes no other cell's id, and only outputs that really changed appear in a diff.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import jupytext
import nbformat

ROOT = Path(__file__).resolve().parents[1]
TEXT_DIR = ROOT / "chapters"
BOOK_DIR = ROOT / "book"
KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}
#: The output that a live kernel shows as a widget; the book shows the output's text/html instead,
#: and the widget's model id changes on every run, so it is not stored.
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def text_path(notebook: Path) -> Path:
    """``book/NAME.ipynb`` -> ``chapters/NAME.md``."""
    return TEXT_DIR / (Path(notebook).stem + ".md")


def notebook_path(text: Path) -> Path:
    """``chapters/NAME.md`` -> ``book/NAME.ipynb``."""
    return BOOK_DIR / (Path(text).stem + ".ipynb")


def all_texts() -> list[Path]:
    return sorted(TEXT_DIR.glob("*.md"))


def read_text(path: Path) -> nbformat.NotebookNode:
    """The chapter's cells (no outputs) from its MyST Markdown source, with stable ids."""
    nb = jupytext.read(path, fmt="md:myst")
    nb.metadata = {"kernelspec": dict(KERNELSPEC), "language_info": {"name": "python"}}
    assign_ids(nb)
    return nb


def assign_ids(nb) -> None:
    seen: dict[str, int] = {}
    for cell in nb.cells:
        digest = hashlib.sha1(f"{cell.cell_type}\n{cell.source}".encode()).hexdigest()[:8]
        seen[digest] = seen.get(digest, 0) + 1
        cell["id"] = digest if seen[digest] == 1 else f"{digest}-{seen[digest]}"


def cell_signature(nb) -> list[tuple[str, str, tuple]]:
    """What the two forms must agree on: each cell's type, source and tags, in order."""
    return [(c.cell_type, c.source.strip("\n"), tuple(c.get("metadata", {}).get("tags", []))) for c in nb.cells]


def out_of_sync(text: Path) -> list[str]:
    """Differences between ``chapters/NAME.md`` and ``book/NAME.ipynb`` (empty when in sync)."""
    nb_path = notebook_path(text)
    if not nb_path.exists():
        return [f"{nb_path.relative_to(ROOT)} is missing: run `make notebooks`"]
    a = cell_signature(read_text(text))
    b = cell_signature(nbformat.read(nb_path, as_version=4))
    problems = []
    for i, (x, y) in enumerate(zip(a, b), 1):
        if x != y:
            problems.append(f"cell {i} differs:\n  {text.name}: {x[1][:120]!r}\n  {nb_path.name}: {y[1][:120]!r}")
            break
    if len(a) != len(b):
        problems.append(f"{text.name} has {len(a)} cells, {nb_path.name} has {len(b)}")
    return problems


def strip_volatile(nb) -> None:
    """Remove what changes on every run and what the book does not use: widget views and state,
    execution timing."""
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        cell.get("metadata", {}).pop("execution", None)
        for output in cell.get("outputs", []):
            data = output.get("data")
            if data and WIDGET_VIEW in data and len(data) > 1:
                del data[WIDGET_VIEW]


#: Cells of the book's own that the learner's copy leaves out: checks that the book's notebook runs
#: on the learner's stubs (a stub is refused, a solution accepted), which a learner's own answer,
#: right or wrong, must never stop.
BOOK_ONLY = "book-only"
#: Jupyter Book's folding tags -> what JupyterLab, Notebook 7 and VS Code fold (cell metadata).
FOLDED_SOURCE = {"hide-input", "hide-cell", "remove-input", "remove-cell"}
FOLDED_OUTPUTS = {"hide-output", "hide-cell", "remove-output"}


def learner_notebook(nb) -> nbformat.NotebookNode:
    """The learner's copy of a chapter (the download of its page, ``make lab``'s copies): the book's
    notebook without its ``book-only`` cells, and with every cell that the book folds or hides folded
    in Jupyter too (``metadata.jupyter.source_hidden`` / ``outputs_hidden``), so that a solution sits
    folded under its stub. Outputs are kept. Returns a new notebook; ``nb`` is left as it was."""
    import copy

    copy_nb = copy.deepcopy(nb)
    cells = []
    for cell in copy_nb.cells:
        tags = set(cell.get("metadata", {}).get("tags", []))
        if BOOK_ONLY in tags:
            continue
        if cell.cell_type == "code":
            jupyter = {}
            if tags & FOLDED_SOURCE:
                jupyter["source_hidden"] = True
            if tags & FOLDED_OUTPUTS:
                jupyter["outputs_hidden"] = True
            if jupyter:
                cell.metadata.setdefault("jupyter", {}).update(jupyter)
        cells.append(cell)
    copy_nb.cells = cells
    return copy_nb


def write_learner_notebook(source: Path, target: Path, messages: dict | None = None, language: str = "en") -> None:
    """``learner_notebook`` of the notebook at ``source``, written to ``target``; for a ``language``
    other than English, in that language (``translate_notebook`` with the catalogue's ``messages``)."""
    nb = learner_notebook(nbformat.read(source, as_version=4))
    if language != "en":
        nb = translate_notebook(nb, messages or {}, language)
    nbformat.write(nb, target)


#: The first cell of a Chinese notebook: its checkers answer in Chinese, with no setting.
LANGUAGE_CELL = {
    "zh_CN": '# 本 notebook 是中文版：检查器用中文回答（改用英文：set_language("en")）。\n'
    "from mha.chapters.checking.verdict_i18n import set_language\n"
    'set_language("zh_CN")'
}
FENCE = ("```", "~~~")
ITEM = re.compile(r"^(\s*)([-*+]|\d+[.)])(\s+)(.*)$")
HEADING = re.compile(r"^(#{1,6}\s+)(.*)$")
LABEL = re.compile(r"^\([\w-]+\)=$")
OPTION = re.compile(r"^:[\w-]+:")


def _translated(text: str, messages: dict[str, str]) -> str | None:
    return messages.get(" ".join(line.strip() for line in text.splitlines()).strip()) or None


def translate_markdown(source: str, messages: dict[str, str]) -> str:
    """A Markdown cell in another language: each heading, paragraph, list item and table cell whose
    text is a message of the chapter's catalogue (``messages``: English -> translation, as Sphinx's
    gettext extracted them) is replaced by its translation; code, math, directives' options and what
    the catalogue does not hold are kept."""
    lines, out, block = source.split("\n"), [], []
    fence = None

    def flush():
        if not block:
            return
        item = ITEM.match(block[0])
        if item:  # a list item: its marker kept, its text (continuation lines included) translated
            text = "\n".join([item.group(4), *block[1:]])
            done = _translated(text, messages)
            out.append(f"{item.group(1)}{item.group(2)}{item.group(3)}{done}" if done else "\n".join(block))
        else:
            done = _translated("\n".join(block), messages)
            out.append(done if done else "\n".join(block))
        block.clear()

    for line in lines:
        stripped = line.strip()
        if fence is not None:  # inside a fence: a directive's content is Markdown, code is kept
            if stripped.startswith(fence[0]) and stripped.strip("`~") == "":
                flush()
                out.append(line)
                fence = None
            elif fence[1] and not stripped.startswith(":"):
                if not stripped:
                    flush()
                    out.append(line)
                else:
                    if ITEM.match(line):
                        flush()
                    block.append(line)
            else:
                flush()
                out.append(line)
            continue
        if stripped.startswith(FENCE):
            flush()
            marker = stripped[: len(stripped) - len(stripped.lstrip(stripped[0]))]  # ``` or more
            directive = stripped[len(marker) :].startswith("{") and not stripped.startswith(f"{marker}{{code")
            title = stripped[len(marker) :].split("}", 1)[1].strip() if directive and "}" in stripped else ""
            if title and _translated(title, messages):
                line = line.replace(title, _translated(title, messages))
            out.append(line)
            fence = (marker, directive)
            continue
        if stripped.startswith(":::") or OPTION.match(stripped):  # a colon fence, a directive's option
            flush()
            title = stripped.split("}", 1)[1].strip() if stripped.startswith(":::{") and "}" in stripped else ""
            if title and _translated(title, messages):
                line = line.replace(title, _translated(title, messages))
            out.append(line)
            continue
        heading = HEADING.match(line)
        special = stripped.startswith(("$$", "|", ":::")) or LABEL.match(stripped) or ITEM.match(line)
        if heading or not stripped or special:
            flush()
            if heading:
                done = _translated(heading.group(2), messages)
                out.append(heading.group(1) + done if done else line)
                continue
            if stripped.startswith("|"):
                cells = line.split("|")
                out.append("|".join(_translated(c, messages) and f" {_translated(c, messages)} " or c for c in cells))
                continue
            if ITEM.match(line):
                block.append(line)
                continue
            out.append(line)
            continue
        block.append(line)
    flush()
    return "\n".join(out)


def translate_notebook(nb, messages: dict[str, str], language: str, comments: dict[str, str] | None = None):
    """``nb`` for a reader of ``language``: its Markdown in that language (``translate_markdown``), its
    code's comments and docstrings in it (``comments``, by default ``locales/<language>/comments.json``;
    ``code_comments.translate_code``), its checkers' stored verdicts in it (each verdict's output
    stores every language's text) and a first cell that makes its checkers answer in it. The code
    outside comments, and every other output, are unchanged: nbval compares a run of the notebook
    with what it stores (``make nbval-zh``)."""
    import code_comments

    comments = code_comments.load(language) if comments is None else comments
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = code_comments.translate_fences(translate_markdown(cell.source, messages), comments)
        elif cell.cell_type == "code":
            cell.source = code_comments.translate_code(cell.source, comments)
            for output in cell.get("outputs", []):  # a checker's verdict as it answers in this language
                verdict = output.get("metadata", {}).get("mha", {}).get("verdict", {})
                if language in verdict and "text/plain" in output.get("data", {}):
                    output["data"]["text/plain"] = verdict[language]
    first = nbformat.v4.new_code_cell(LANGUAGE_CELL[language])
    first.metadata["tags"] = ["mha-language"]
    nb.cells.insert(0, first)
    nb.metadata["language"] = language
    return nb


def catalogue_messages(po: Path) -> dict[str, str]:
    """English -> translation of every translated message of a gettext catalogue."""
    from babel.messages.pofile import read_po

    with po.open("rb") as handle:
        catalog = read_po(handle)
    return {m.id: m.string for m in catalog if m.id and m.string and not m.fuzzy and isinstance(m.id, str)}


def chapter_messages(name: str, language: str) -> dict[str, str]:
    """The translations of chapter ``name`` (``03_worked_example``) in ``language``: its catalogue."""
    po = ROOT / "locales" / language / "LC_MESSAGES" / "book" / f"{name}.po"
    return catalogue_messages(po) if po.is_file() else {}


def main(argv: list[str]) -> int:
    """``python scripts/notebooks.py learner LANGUAGE FOLDER NAME ...``: the learner's notebooks of
    chapters ``NAME`` (``03_worked_example``) in ``LANGUAGE``, written to ``FOLDER`` (``make nbval-zh``)."""
    if len(argv) < 4 or argv[0] != "learner":
        print(main.__doc__)
        return 2
    language, folder, names = argv[1], Path(argv[2]), argv[3:]
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        messages = chapter_messages(name, language) if language != "en" else None
        write_learner_notebook(BOOK_DIR / f"{name}.ipynb", folder / f"{name}.ipynb", messages, language)
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
