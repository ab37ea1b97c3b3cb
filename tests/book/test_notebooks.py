"""Static checks on the chapters' stored outputs, so that nbval can never pass vacuously.

nbval (``make test``) re-runs every ``book/*.ipynb`` and compares each cell with its stored
output; a cell with no stored output is compared with nothing. These tests make sure the stored
outputs are really there and are what `make notebooks` wrote:

* every code cell was executed, in order, in one fresh kernel (execution counts 1, 2, 3, ...);
* every cell that prints, displays or shows a figure, or ends with a bare expression, has output;
* every notebook has compared cells; none stores an error or (outside ignored cells) stderr;
* the tag ``nbval-ignore-output`` marks only explorer and timing cells, and no cell shows a
  ``# NBVAL_...`` comment to the reader (a tag does the same and stays out of sight);
* no checked output holds a device name, a memory address or a kernel temp path;
* every notebook and page in ``book/`` is in ``_toc.yml``, in its part (the core path in order);
* no assert compares constants only, and no print states a verdict as a literal ("...: True"):
  a check must involve a computed value (chapters in ``LITERAL_ASSERT_CHAPTERS``);
* a block of asserts that prints nothing hides its input, and the prose keeps the notation page's
  indices and binary units (chapters in ``REVIEWED_CHAPTERS``).

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

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from execute_notebooks import is_ignored, text_outputs  # noqa: E402
from nbval_cells import cell_counts  # noqa: E402
from notebooks import WIDGET_VIEW, all_texts, out_of_sync, read_text, text_path  # noqa: E402

NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))
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
def test_no_cell_shows_an_nbval_marker(path):
    """nbval reads cell tags (nbval-ignore-output, nbval-skip); a comment marker would be on the page."""
    shown = [i for i, cell in enumerate(code_cells(load(path)), 1) if "NBVAL_" in cell.source]
    assert not shown, f"{path.name} cells {shown}: replace the # NBVAL_... comment by the nbval-... tag"


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


def toc_parts() -> list[tuple[str, list[str]]]:
    """``(caption, [page, ...])`` for each part of ``_toc.yml``, pages without suffix."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    parts = []
    for part in toc.get("parts", []):
        pages = []
        for entry in part.get("chapters", []):
            pages += [entry["file"]] + [section["file"] for section in entry.get("sections", [])]
        parts.append((part.get("caption", ""), [str(Path(f).with_suffix("")) for f in pages]))
    return parts


def toc_files() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    return [str(Path(toc["root"]).with_suffix(""))] + [page for _, pages in toc_parts() for page in pages]


def test_every_page_is_in_the_toc_in_its_part():
    files = toc_files()
    pages = sorted(
        str(p.relative_to(ROOT).with_suffix(""))
        for p in (ROOT / "book").glob("*")
        if p.suffix in (".ipynb", ".md") and p.name != "README.md"
    )
    missing = sorted(set(pages) - set(files))
    assert not missing, f"pages in book/ that _toc.yml leaves out (the build skips them): {missing}"
    assert len(files) == len(set(files)), "a page listed twice"
    parts = dict(toc_parts())
    assert list(parts) == ["The course", "Deep dives", "Reference"], list(parts)
    core = [Path(p).name for p in parts["The course"]]
    # the core path in the order the course promises: why one head, the math, the worked example,
    # build it yourself, the costs, merging the heads, where next
    assert core[:4] == ["01_single_head_limits", "02_multi_head_math", "03_worked_example", "04_build_it_yourself"]
    assert core[4:] == ["05_parameter_analysis", "06_merging_heads", "07_where_next"], core
    assert [Path(p).name for p in parts["Reference"]] == ["for_teachers", "notation", "glossary", "references"]
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    numbered = {part["caption"]: part.get("numbered", False) for part in toc["parts"]}
    assert numbered == {"The course": True, "Deep dives": True, "Reference": False}, numbered


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


# ----------------------------------------------------------------------------------------------
# Checks that cannot fail: an assert whose operands are all constants
# ----------------------------------------------------------------------------------------------

#: The chapters (text sources, by stem) whose code cells the constant-assert rule checks. The
#: other chapters still hold such filler (their owners are removing it); widen this list as they do.
LITERAL_ASSERT_CHAPTERS = [
    "01_single_head_limits",
    "02_multi_head_math",
    "03_worked_example",
    "05_parameter_analysis",
    "06_merging_heads",
    "10_making_it_fast",
    "11_pretrained_heads",
    "08_head_count_experiments",
    "09_merging_experiments",
    "04_build_it_yourself",
    "07_where_next",
    "for_teachers",
]
#: Calls that give a constant when every argument is one: builtins and everything in ``math``.
CONSTANT_FUNCTIONS = {"abs", "round", "len", "int", "float", "str", "min", "max", "sum", "pow", "divmod", "format"}
#: A printed verdict that no code computed, e.g. ``print("the two agree: True")``.
LITERAL_VERDICT = re.compile(r":\s*(True|False)\s*$")


def is_constant(node: ast.AST, names=frozenset()) -> bool:
    """True for an expression whose value needs nothing computed: literals, ``names`` (variables
    only ever assigned a constant), arithmetic on them, ``round``/``abs``/``len``/``math.*`` of
    them, containers and f-strings of them."""

    def const(n):
        return is_constant(n, names)

    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Name):
        return node.id in names
    if isinstance(node, ast.UnaryOp):
        return const(node.operand)
    if isinstance(node, ast.BinOp):
        return const(node.left) and const(node.right)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return all(const(element) for element in node.elts)
    if isinstance(node, ast.JoinedStr):
        return all(const(value) for value in node.values)
    if isinstance(node, ast.FormattedValue):
        return const(node.value) and (node.format_spec is None or const(node.format_spec))
    if isinstance(node, ast.Subscript):
        return const(node.value) and const(node.slice)
    if isinstance(node, ast.Call):
        func = node.func
        known = (isinstance(func, ast.Name) and func.id in CONSTANT_FUNCTIONS) or (
            isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "math"
        )
        if isinstance(func, ast.Attribute) and const(func.value):  # "0.649".strip(), "{}".format(1)
            known = True
        return known and all(const(a) for a in node.args) and all(const(k.value) for k in node.keywords)
    if isinstance(node, ast.Attribute):  # math.pi, math.e
        return isinstance(node.value, ast.Name) and node.value.id == "math"
    return False


def constant_names(tree: ast.AST) -> frozenset:
    """Variables whose every binding is ``name = <constant expression>`` (e.g. ``e2 = math.exp(2)``)."""
    assigned: dict[str, list] = {}
    simple_targets = set()
    other = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            assigned.setdefault(node.targets[0].id, []).append(node.value)
            simple_targets.add(id(node.targets[0]))
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and id(node) not in simple_targets:
            other.add(node.id)  # a loop variable, an unpacked tuple, a `with ... as`, an augmented assign
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            other.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.arg)):
            other.add(node.name if hasattr(node, "name") else node.arg)
    names: frozenset = frozenset()
    while True:  # grow to a fixed point: b = 2 * a is constant once a is
        grown = frozenset(
            name
            for name, values in assigned.items()
            if name not in other and all(is_constant(v, names) for v in values)
        )
        if grown == names:
            return names
        names = grown


def constant_checks(source: str, context: str = "") -> list[str]:
    """The checks in ``source`` that cannot fail or state a verdict no code computed.

    An ``assert`` whose test is constant, or that holds a comparison whose operands are all
    constant (``assert x > 0 and 768 * 12 == 9216`` is flagged for its second half). A chained
    comparison with one computed operand (``value == 4 * 768**2 == 2_359_296``) is fine: the
    formula and the literal both face a computed value. Also ``print`` of a string literal that
    ends in ``: True`` or ``: False``. ``context`` is the rest of the chapter's code, where the
    variables ``source`` uses may be assigned.
    """
    tree = ast.parse(source)
    names = constant_names(ast.parse(context + "\n" + source))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert):
            if is_constant(node.test, names):
                found.append(f"line {node.lineno}: assert {ast.unparse(node.test)}")
                continue
            for sub in ast.walk(node.test):
                if isinstance(sub, ast.Compare) and all(is_constant(o, names) for o in [sub.left, *sub.comparators]):
                    found.append(f"line {node.lineno}: {ast.unparse(sub)}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
            for arg in node.args:
                if isinstance(arg, (ast.Constant, ast.JoinedStr)) and is_constant(arg, names):
                    text = arg.value if isinstance(arg, ast.Constant) else ast.unparse(arg)
                    if isinstance(text, str) and LITERAL_VERDICT.search(text.rstrip("'\"")):
                        found.append(f"line {node.lineno}: print of a literal verdict {text!r}")
    return found


def test_literal_assert_chapters_exist():
    stems = {text.stem for text in all_texts()}
    assert set(LITERAL_ASSERT_CHAPTERS) <= stems, sorted(set(LITERAL_ASSERT_CHAPTERS) - stems)


@pytest.mark.parametrize("stem", LITERAL_ASSERT_CHAPTERS)
def test_no_check_compares_constants_only(stem):
    text = ROOT / "chapters" / f"{stem}.md"
    cells = [python_source(cell) for cell in code_cells(read_text(text))]
    problems = []
    for i, source in enumerate(cells, 1):
        problems += [f"code cell {i}, {problem}" for problem in constant_checks(source, "\n".join(cells))]
    assert not problems, (
        f"{text.name}: checks that cannot fail (compare a computed value with the number the prose "
        "states instead):\n  " + "\n  ".join(problems)
    )


def test_constant_check_detector():
    """The detector on small examples: it flags filler and only filler."""
    flagged = [
        "assert round(math.log2(5), 2) == 2.32",
        'assert f"{math.exp(2):.3f}" == "7.389"',
        'assert f"{0.649 + 14 * 0.088:.3f}" == "1.881"',
        "assert round(130 / 256, 3) == 0.508",
        "assert 768 - 64 == (12 - 1) * 64 == 704",
        "assert 3 * 1024 * 1024 * 4 == 12582912",
        "assert 512 * 513 // 2 == 131328",
        "assert abs(-2) == 2 and len([1, 2]) == 2",
        "assert x > 0 and 768 * 12 + 12 == 9228",  # the constant half of an `and`
        "assert True",
        "assert -math.pi < 0",
        'print("the two agree: True")',
        'print(f"each head > {0.9}: True")',
        'e2 = math.exp(2)\nassert f"{e2:.3f}" == "7.389"',  # a variable holding a constant
        "a = 130\nb = a / 256\nassert round(b, 3) == 0.508",
    ]
    for source in flagged:
        assert constant_checks(source), source
    fine = [
        "assert round(weights[0, 0].item(), 2) == 0.79",
        "assert per_layer == 2 * 1 * 4096 * 32 * 128 == 33_554_432",  # chained: one computed operand
        "assert count(module) == mha.attention_params(768, 12) == 2_362_368",
        'assert f"{boundary:.3f}" == "0.558"',
        "assert all(row['saturated'] == 0 for row in scaled)",
        "assert round(math.log2(len(tokens)), 2) == 2.32",
        'print("agree:", diff < 1e-12)',
        'print("no mask: True means may attend")',
        "x = 1 == 1",  # not an assert: not this rule's business
        "e2 = math.exp(2)\ne2 = torch.tensor(e2)\nassert round(e2.item(), 3) == 7.389",  # rebound: computed
        "for d_k in [4, 64]:\n    assert d_k % 4 == 0",  # a loop variable is not a constant
        "import math\nassert math.isclose(weights.sum().item(), 1.0)",
    ]
    for source in fine:
        assert not constant_checks(source), source


# ----------------------------------------------------------------------------------------------
# Readable pages: assert blocks folded away, the notation page's symbols, one kind of unit
# ----------------------------------------------------------------------------------------------

#: The chapters the two rules below check (the ones an errata review has read line by line).
REVIEWED_CHAPTERS = ["02_multi_head_math", "03_worked_example", "05_parameter_analysis", "10_making_it_fast"]
#: A cell with this many asserts that prints nothing is an assert block: it reads as clutter, so it
#: must be tagged ``hide-input`` (or ``hide-cell``, ``remove-input``, ``remove-cell``): the book folds or removes it.
MAX_VISIBLE_ASSERTS = 4
#: Tags that fold a cell's input away (hide-) or take it off the page (remove-); nbval runs them all.
FOLDED_TAGS = {"hide-input", "hide-cell", "remove-input", "remove-cell"}
#: Prose that breaks the notation page (``i`` names a head, never a token; ``m`` is the number of
#: keys, not an index) or mixes decimal and binary units (sizes are GiB, MiB, KiB).
NOTATION_SLIPS = {
    "a token or row called i (i names a head)": re.compile(r"\b(row|rows|query|token|column|key) \$i\$"),
    "m as a summation index (m is the number of keys)": re.compile(r"\\sum_\{?m\b"),
    "a decimal GB (sizes in this book are binary: GiB)": re.compile(r"\b\d+ ?GB\b"),
}


def notation_slips(markdown: str) -> list[str]:
    found = []
    for what, pattern in NOTATION_SLIPS.items():
        found += [
            f"{what}: ...{markdown[max(0, m.start() - 30) : m.end() + 10]!r}..." for m in pattern.finditer(markdown)
        ]
    return found


def is_visible_assert_block(cell) -> bool:
    tags = set(cell.get("metadata", {}).get("tags", []))
    try:
        tree = ast.parse(python_source(cell))
    except SyntaxError:
        return False
    asserts = sum(isinstance(node, ast.Assert) for node in ast.walk(tree))
    return asserts >= MAX_VISIBLE_ASSERTS and not must_have_output(cell) and not tags & FOLDED_TAGS


@pytest.mark.parametrize("stem", REVIEWED_CHAPTERS)
def test_assert_blocks_are_folded_and_prose_keeps_the_notation(stem):
    nb = read_text(ROOT / "chapters" / f"{stem}.md")
    blocks = [i for i, cell in enumerate(code_cells(nb), 1) if is_visible_assert_block(cell)]
    assert not blocks, f"{stem}: code cells {blocks} are visible assert blocks: tag them `:tags: [hide-input]`"
    slips = [slip for cell in nb.cells if cell.cell_type == "markdown" for slip in notation_slips(cell.source)]
    assert not slips, f"{stem}: prose against the notation page:\n  " + "\n  ".join(slips)


#: The page that shows a reader what a check looks like, and how many assert lines it may show.
SHOWN_CHECK = ("for_teachers", 2)
REMOVED = {"remove-input", "remove-cell"}


def visible_asserts(cell) -> int:
    """Assert statements a reader sees: those of a code cell whose source the page renders."""
    if cell.cell_type != "code" or REMOVED & set(cell.get("metadata", {}).get("tags", [])):
        return 0
    try:
        tree = ast.parse(python_source(cell))
    except SyntaxError:
        return 0
    return sum(isinstance(node, ast.Assert) for node in ast.walk(tree))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_assert_line_is_visible_on_any_page(path):
    """The page shows the lesson; the checks run in cells tagged remove-input or remove-cell (a folded
    hide-input cell still shows its asserts to whoever opens it). One page shows one check, on purpose."""
    nb = nbformat.read(path, as_version=4)
    shown = sum(visible_asserts(cell) for cell in nb.cells)
    allowed = SHOWN_CHECK[1] if path.stem == SHOWN_CHECK[0] else 0
    assert shown <= allowed, f"{path.name}: {shown} assert statements render on the page (tag their cells remove-input)"
    if path.stem == SHOWN_CHECK[0]:
        assert shown >= 1, f"{path.name} should show the reader one check"


def test_readability_rules_on_examples():
    cell = nbformat.v4.new_code_cell
    block = "\n".join(f"assert x[{i}] == {i}" for i in range(4))
    assert is_visible_assert_block(cell(block))
    hidden = cell(block)
    hidden.metadata["tags"] = ["hide-input"]
    assert not is_visible_assert_block(hidden)
    assert not is_visible_assert_block(cell(block + "\nprint(x)"))  # it shows something: not a bare block
    assert not is_visible_assert_block(cell("assert a == 1\nassert b == 2"))
    assert notation_slips("row $i$ is a query token") and notation_slips(r"$\sum_{m=1}^{5} e^{s_{jm}}$")
    assert notation_slips("A 24 GB card") and notation_slips("needs 16GB")
    assert visible_asserts(cell(block)) == 4 and visible_asserts(hidden) == 4  # folded is not removed
    removed = cell(block)
    removed.metadata["tags"] = ["remove-input"]
    assert visible_asserts(removed) == 0
    assert not notation_slips("row $t$ of head $i$'s $A_i$; $\\sum_{l=1}^{5}$; 24 GiB; $m$ keys")
