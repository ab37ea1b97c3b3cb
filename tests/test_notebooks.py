"""Static checks on the chapters' stored outputs, so that nbval can never pass vacuously.

nbval (``make test``) re-runs every ``book/*.ipynb`` and compares each cell with its stored
output; a cell with no stored output is compared with nothing. These tests make sure the stored
outputs are really there and are what `make notebooks` wrote:

* every code cell was executed, in order, in one fresh kernel (execution counts 1, 2, 3, ...);
* every cell that prints, displays or shows a figure, or ends with a bare expression, has output;
* every notebook has compared cells; none stores an error or (outside ignored cells) stderr;
* ``# NBVAL_IGNORE_OUTPUT`` marks only explorer and timing cells;
* no checked output holds a device name, a memory address or a kernel temp path;
* every notebook and page in ``book/`` is in ``_toc.yml``, chapters in number order.

The number of compared cells is printed by ``scripts/nbval_cells.py`` (``make test`` runs it).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from execute_notebooks import is_ignored, text_outputs  # noqa: E402
from nbval_cells import cell_counts  # noqa: E402
from notebooks import WIDGET_VIEW, all_texts, out_of_sync, read_text, text_path  # noqa: E402

NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))
CHAPTER = re.compile(r"^(\d\d)_[a-z0-9_]+$")
#: Calls whose only purpose is output: a cell that makes one must have stored output.
OUTPUT_CALLS = {"print", "display", "show"}
#: Text that must never reach a checked output (it differs between machines or runs).
FORBIDDEN = {
    "a device name": re.compile(r"device='|device\(type="),
    "a memory address": re.compile(r"\b0x[0-9a-fA-F]{6,}\b"),
    "a kernel temp path": re.compile(r"/tmp/ipykernel_"),
}
#: What an ignored cell may be: an explorer or a timing.
IGNORE_OK = re.compile(r"explorer\(|tim(e|ing)|bench|perf_counter|elapsed", re.IGNORECASE)


def load(path: Path):
    return nbformat.read(path, as_version=4)


def code_cells(nb):
    return [cell for cell in nb.cells if cell.cell_type == "code" and cell.source.strip()]


def python_source(cell) -> str:
    """The cell's source without IPython magics and shell escapes, which ast cannot parse."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in cell.source.splitlines())


def must_have_output(cell) -> bool:
    """True when running the cell certainly prints or displays something."""
    try:
        tree = ast.parse(python_source(cell))
    except SyntaxError:  # e.g. top-level await: nbval still runs it; this rule cannot judge it
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name in OUTPUT_CALLS:
                return True
    if tree.body and isinstance(tree.body[-1], ast.Expr) and not cell.source.rstrip().endswith(";"):
        value = tree.body[-1].value
        # A bare name, attribute, subscript, arithmetic or comparison always has a repr to show
        # (a call may return None, so it is not counted here).
        return not isinstance(value, (ast.Call, ast.Await, ast.Yield, ast.YieldFrom, ast.Constant))
    return False


def test_there_are_notebooks():
    assert NOTEBOOKS, "no book/*.ipynb found"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_notebook_has_a_text_source(path):
    assert text_path(path).exists(), f"{path.name}: no text source {text_path(path).relative_to(ROOT)}"


@pytest.mark.parametrize("text", all_texts(), ids=lambda p: p.name)
def test_text_source_and_notebook_agree(text):
    problems = out_of_sync(text)
    assert not problems, (
        f"{text.name} and its notebook disagree (edit the .md, then `make notebooks`; "
        f"or `jupytext --sync` after editing the .ipynb):\n" + "\n".join(problems)
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_holds_nothing_volatile(path):
    nb = load(path)
    assert "widgets" not in nb.metadata, f"{path.name}: widget state is stored (the book does not use it)"
    expected = [cell["id"] for cell in read_text(text_path(path)).cells]
    assert [cell.get("id") for cell in nb.cells] == expected, f"{path.name}: cell ids are not the stable ones"
    for i, cell in enumerate(code_cells(nb), 1):
        assert "execution" not in cell.get("metadata", {}), f"{path.name} cell {i}: timing metadata stored"
        for output in cell.get("outputs", []):
            assert WIDGET_VIEW not in output.get("data", {}), f"{path.name} cell {i}: a widget view is stored"


def test_cell_ids_survive_an_insertion():
    nb = read_text(all_texts()[0])
    before = [c["id"] for c in nb.cells]
    nb.cells.insert(1, nbformat.v4.new_markdown_cell("A new paragraph."))
    import notebooks

    notebooks.assign_ids(nb)
    after = [c["id"] for c in nb.cells]
    assert after[:1] + after[2:] == before and after[1] not in before


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_executed_in_order_in_one_kernel(path):
    counts = [cell.get("execution_count") for cell in code_cells(load(path))]
    assert counts == list(range(1, len(counts) + 1)), (
        f"{path.name}: execution counts {counts}; store outputs with "
        f"`python scripts/execute_notebooks.py book/{path.name}` (never by hand)"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_cells_that_print_have_stored_outputs(path):
    missing = [
        i for i, cell in enumerate(code_cells(load(path)), 1) if must_have_output(cell) and not cell.get("outputs")
    ]
    assert not missing, f"{path.name}: code cells {missing} print or display but have no stored output"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_nbval_compares_something(path):
    counts = cell_counts(load(path))
    assert counts["compared"] >= 1, f"{path.name}: nbval would compare no cell ({counts})"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_stored_errors_or_stderr(path):
    for i, cell in enumerate(code_cells(load(path)), 1):
        for output in cell.get("outputs", []):
            assert output["output_type"] != "error", (
                f"{path.name} cell {i}: stored error {output.get('ename')}: {output.get('evalue')}"
            )
            if output["output_type"] == "stream" and not is_ignored(cell):
                assert output["name"] != "stderr", (
                    f"{path.name} cell {i}: stderr in a checked cell (a warning?): {output['text'][:200]!r}"
                )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_ignore_marker_only_on_explorer_and_timing_cells(path):
    for i, cell in enumerate(code_cells(load(path)), 1):
        if is_ignored(cell):
            assert IGNORE_OK.search(cell.source), (
                f"{path.name} cell {i}: NBVAL_IGNORE_OUTPUT/SKIP on a cell that is neither an "
                f"explorer nor a timing:\n{cell.source[:300]}"
            )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_checked_outputs_are_machine_independent(path):
    for i, cell in enumerate(code_cells(load(path)), 1):
        if is_ignored(cell):
            continue
        text = "\n".join(text_outputs(cell))
        for what, pattern in FORBIDDEN.items():
            match = pattern.search(text)
            assert not match, f"{path.name} cell {i}: checked output contains {what}: {match.group(0)!r}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_one_title_then_sections(path):
    headings = [
        line
        for cell in load(path).cells
        if cell.cell_type == "markdown"
        for line in cell.source.splitlines()
        if re.match(r"^#{1,6} ", line)
    ]
    assert headings and headings[0].startswith("# "), f"{path.name}: must start with one '# Title'"
    assert sum(h.startswith("# ") for h in headings) == 1, f"{path.name}: more than one '# ' title"


def toc_files() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    files = [toc["root"]]
    for entry in toc.get("chapters", []):
        files.append(entry["file"])
        files += [section["file"] for section in entry.get("sections", [])]
    return [str(Path(f).with_suffix("")) for f in files]


def test_every_page_is_in_the_toc_in_order():
    files = toc_files()
    pages = sorted(
        str(p.relative_to(ROOT).with_suffix(""))
        for p in (ROOT / "book").glob("*")
        if p.suffix in (".ipynb", ".md") and p.name != "README.md"
    )
    missing = sorted(set(pages) - set(files))
    assert not missing, f"pages in book/ that _toc.yml leaves out (the build skips them): {missing}"
    assert files[:3] == ["book/intro", "book/notation", "book/how_to_use"], files[:3]
    assert files[-2:] == ["book/glossary", "book/references"], files[-2:]
    chapters = [Path(f).name for f in files[3:-2]]
    assert all(CHAPTER.match(name) for name in chapters), chapters
    assert chapters == sorted(chapters), f"chapters out of number order: {chapters}"


def test_must_have_output_rule():
    """The rule above, on small examples (it must not pass everything)."""
    cell = lambda source: nbformat.v4.new_code_cell(source)  # noqa: E731
    assert must_have_output(cell("print(1)"))
    assert must_have_output(cell("import matplotlib.pyplot as plt\nplt.show()"))
    assert must_have_output(cell("x = 2\nx"))
    assert must_have_output(cell("%matplotlib inline\nx = 2\nx * 3"))
    assert not must_have_output(cell("x = 2"))
    assert not must_have_output(cell("x = 2\nx;"))
    assert not must_have_output(cell("assert 1 + 1 == 2"))
    assert not must_have_output(cell("import torch\ntorch.manual_seed(0)"))
