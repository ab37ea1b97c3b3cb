"""What the import-linter contracts cannot say about the package, read from its source with ``ast``.

* no module imports a private name (``_x``) from another module of ``mha``, or reads one through
  a module it imported (``modules._helper``);
* no module is longer than 500 lines;
* ``mha.chapters.CHAPTERS`` maps each chapter to its page, modules and figures, truly.

The layers themselves (the core below ``mha.viz`` below ``mha.chapters``, only ``mha.viz`` and the
topics' figures drawing, no import cycles) are import-linter's contracts in ``pyproject.toml``, checked by ``make lint``
(``lint-imports``). The private-name check is a plain function of ``{module name: source}``, so a
test feeds it a small made-up package and shows that it fails when it should.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "mha"
MAX_LINES = 500


def package_sources(root: Path = ROOT) -> dict[str, str]:
    """``{"mha.chapters.heads.task": source, ...}`` for every module of the package (``mha`` for __init__)."""
    sources = {}
    for path in sorted(root.rglob("*.py")):
        parts = (root.name, *path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        sources[".".join(parts)] = path.read_text()
    return sources


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def is_package(module: str, sources: dict) -> bool:
    return any(other.startswith(module + ".") for other in sources)


def imports_of(module: str, source: str, sources: dict) -> list[tuple[str, str | None, int, str]]:
    """Every import in ``source`` (at any depth): ``(imported module, imported name or None, line,
    the name it is bound to)``.

    ``from . import x`` yields the submodule ``pkg.x`` when there is one, else ``(pkg, "x", ...)``.
    """
    package = module if is_package(module, sources) else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(a.name, None, node.lineno, a.asname or a.name.split(".")[0]) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            for a in node.names:
                sub, bound = f"{target}.{a.name}", a.asname or a.name
                found.append(
                    (sub, None, node.lineno, bound) if sub in sources else (target, a.name, node.lineno, bound)
                )
    return found


def private_imports(sources: dict) -> list[str]:
    """``"importer:line imports _name from module"`` for every private name taken from another module,
    and ``"importer:line reads alias._name"`` for a private name read through an imported module."""
    problems = []
    for module, source in sources.items():
        imports = imports_of(module, source, sources)
        for target, name, line, _ in imports:
            if target in sources and target != module:
                if name is not None and is_private(name):
                    problems.append(f"{module}:{line} imports {name} from {target}")
                elif name is None and is_private(target.rpartition(".")[2]):
                    problems.append(f"{module}:{line} imports the private module {target}")
        aliases = {bound for target, name, _, bound in imports if name is None and target in sources}
        for node in ast.walk(ast.parse(source)):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and is_private(node.attr)
            ):
                problems.append(f"{module}:{node.lineno} reads {node.value.id}.{node.attr}")
    return problems


# ---- the package -----------------------------------------------------------------------------

SOURCES = package_sources()


def test_no_module_imports_a_private_name_from_another():
    assert {"mha", "mha.modules", "mha.bert", "mha.chapters.heads.task", "mha.viz.widgets"} <= set(SOURCES)
    assert private_imports(SOURCES) == []


@pytest.mark.parametrize("module", sorted(SOURCES))
def test_modules_are_at_most_500_lines(module):
    lines = len(SOURCES[module].splitlines())
    assert lines <= MAX_LINES, f"{module} has {lines} lines"


# ---- the check fails when it should -----------------------------------------------------------

FAKE = {
    "mha": "from .core import f\n",
    "mha.core": "def f():\n    from .chapters.exp import g\n",
    "mha.helpers": "def _hidden():\n    pass\n",
    "mha.chapters": "",
    "mha.chapters.exp": (
        "from ..helpers import _hidden\nfrom .. import helpers as h\nx = h._hidden\n"
        "def g():\n    from . import _other\n"
    ),
    "mha.chapters._other": "from .exp import g\n",
}


def test_the_private_name_check_catches_a_made_up_package():
    assert private_imports(FAKE) == [
        "mha.chapters.exp:1 imports _hidden from mha.helpers",
        "mha.chapters.exp:5 imports the private module mha.chapters._other",
        "mha.chapters.exp:3 reads h._hidden",
    ]


#: A module of a topic in a chapter's code cells: ``from mha.chapters.<topic> import a, b as c`` (also in
#: parentheses), ``from mha.chapters.<topic>.<module> import ...`` or ``mha.chapters.<topic>.<module>``.
TOPIC_IMPORT = re.compile(
    r"from mha\.chapters\.(\w+) import (\([^)]*\)|[\w ,]+)"
    r"|from mha\.chapters\.(\w+)\.(\w+) import"
    r"|mha\.chapters\.(\w+)\.(\w+)"
)


def chapter_imports(source: str) -> set[str]:
    """The modules of :mod:`mha.chapters` that ``source`` imports, as ``"topic.module"``."""
    found = set()
    for topic, names, topic2, module2, topic3, module3 in TOPIC_IMPORT.findall(source):
        if topic:
            parts = names.strip("()").replace("\n", " ").split(",")
            found |= {
                f"{topic}.{n.split(' as ')[0].strip()}" for n in parts if n.strip() and not n.strip().startswith("#")
            }
        else:
            found.add(f"{topic2}.{module2}" if topic2 else f"{topic3}.{module3}")
    return found


def test_a_chapters_code_is_found_from_its_number():
    """``mha.chapters.CHAPTERS`` maps each chapter to its page, topic, modules and figures, truly: a
    newcomer finds a chapter's code from the number the page shows, and code finds it by its label."""
    from mha.chapters import CHAPTERS, LABELS, SHARED, TOPICS, chapter

    found = {f"{p.parent.name}.{p.stem}" for p in (ROOT / "chapters").glob("*/*.py") if p.stem != "__init__"}
    drawing = {m for m in found if m.endswith((".figures", ".layer_diagram"))}
    listed = {m for c in CHAPTERS.values() for m in c.modules} | set(SHARED)
    assert listed == found - drawing, f"unlisted: {sorted(found - drawing - listed)}; missing: {sorted(listed - found)}"
    figures = {m for c in CHAPTERS.values() for m in c.figures}
    assert figures == drawing, (sorted(figures - drawing), sorted(drawing - figures))
    assert sorted(TOPICS) == sorted(p.name for p in (ROOT / "chapters").iterdir() if (p / "__init__.py").exists())
    pages = sorted(p.stem for p in (ROOT.parent / "chapters").glob("[0-9][0-9]_*.md"))
    assert [Path(c.page).name for c in CHAPTERS.values()] == pages
    assert sorted(CHAPTERS) == list(range(1, len(pages) + 1))
    assert len(LABELS) == len(CHAPTERS)
    for number, found_chapter in CHAPTERS.items():
        c = found_chapter
        assert chapter(c.label) is chapter(number) is c and c.number == number
        source = ROOT.parent / c.source
        assert Path(c.page).name == f"{number:02d}_{c.label}" and source.exists(), (number, c.page)
        assert (ROOT.parent / c.folder).is_dir() and all(m.startswith(c.topic + ".") for m in c.figures), c
        used = chapter_imports(source.read_text(encoding="utf-8"))
        own = set(c.modules) | set(SHARED)
        assert used - drawing <= own, f"{c.label} also uses {sorted(used - drawing - own)}"
        assert used & drawing <= set(c.figures), f"{c.label} also draws with {sorted(used & drawing - set(c.figures))}"
        # every module listed draws something the page shows (layer_diagram: its SVG, scripts/make_figures.py)
        assert set(c.figures) - used <= {"multi_head_math.layer_diagram"}, (c.label, sorted(set(c.figures) - used))
    assert chapter("worked_example").modules == tuple(
        f"worked_example.{m}" for m in ("worked", "worked_diagnosis", "worked_edit")
    )
    assert chapter("parameter_analysis").folder == "mha/chapters/costs/"
    with pytest.raises(KeyError, match="no chapter 'chapter_4'; known: single_head_limits, "):
        chapter("chapter_4")


def test_chapter_import_finder():
    text = (
        "from mha.chapters.worked_example import worked, worked_edit as we\n"
        "from mha.chapters.merging import (\n    merge_folding,\n    merging,\n)\n"
        "from mha.chapters.heads.task import make_task\nx = mha.chapters.costs.tables.f()\n"
        "from mha.chapters import chapter\n"
    )
    assert chapter_imports(text) == {
        "worked_example.worked",
        "worked_example.worked_edit",
        "merging.merge_folding",
        "merging.merging",
        "heads.task",
        "costs.tables",
    }
