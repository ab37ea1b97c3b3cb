"""Chapter code: the experiments, worked examples and tables behind each chapter of the book.

Every module computes and returns data (tensors, dicts, strings); none draws. The figures of a
chapter live in the module of the same name in :mod:`mha.viz`. Chapter modules build on the core
(``mha.attention``, ``mha.modules``, ...) and never import :mod:`mha.viz`, matplotlib or
ipywidgets.

Import a module explicitly, e.g. ``from mha.chapters import merging``; ``mha.chapters.merging``
also works after ``import mha.chapters`` (modules load on first use).

Which module serves which chapter: :data:`CHAPTERS` is the one map from a chapter to its page, its
modules and the :mod:`mha.viz` modules that draw it. Code names a chapter by its **label**, the
page's file name without its number (``chapter("worked_example").modules`` is ``worked``,
``worked_diagnosis``, ``worked_edit``), never by the number the reader sees: that number is the
page's file-name prefix, which the table of contents may change, and :attr:`Chapter.number` reads
it from there. :data:`SHARED` lists the modules several chapters use. ``tests/book/test_layers.py``
keeps the map true; ``tests/book/test_chapter_map.py`` keeps chapter numbers out of the code and the
README's table of chapters current (``python scripts/chapter_table.py`` writes it).
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple


class Chapter(NamedTuple):
    """One chapter of the book: its page, the modules of this package it uses and those that draw it.

    ``CHAPTERS[n].page`` and ``.modules`` (also ``[0]`` and ``[1]``) are what the map held before;
    the label and the number are read from the page's file name (``book/03_worked_example``: label
    ``worked_example``, number 3).
    """

    #: The page, as ``_toc.yml`` names it: ``book/<number>_<label>``.
    page: str
    #: The modules of :mod:`mha.chapters` the chapter's code cells import (with :data:`SHARED`).
    modules: tuple[str, ...]
    #: The :mod:`mha.viz` modules that draw the chapter's figures and explorers (not the shared
    #: machinery: ``plotting``, ``widgets``, ``live``, ...).
    figures: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """The chapter's stable name, the page's file name without its number: ``"worked_example"``."""
        return Path(self.page).name.partition("_")[2]

    @property
    def number(self) -> int:
        """The number the reader sees today (the page's file-name prefix); code names the label instead."""
        return int(Path(self.page).name.partition("_")[0])

    @property
    def source(self) -> str:
        """The chapter's MyST source, relative to the repository: ``chapters/<number>_<label>.md``."""
        return f"chapters/{Path(self.page).name}.md"


def _by_number(*chapters: Chapter) -> dict[int, Chapter]:
    return {c.number: c for c in chapters}


#: Every chapter in reading order, keyed by the number the book gives it (read from its page):
#: ``CHAPTERS[n]`` is a :class:`Chapter`. To name one in code, use :func:`chapter` with its label.
CHAPTERS: dict[int, Chapter] = _by_number(
    Chapter(
        "book/01_single_head_limits",
        ("single_head", "softmax_demo", "head_count", "task"),
        ("single_head", "softmax_demo", "head_count"),
    ),
    Chapter("book/02_multi_head_math", ("scaling", "head_split"), ("scaling", "layer_diagram")),
    Chapter("book/03_worked_example", ("worked", "worked_diagnosis", "worked_edit"), ("worked", "worked_edit")),
    Chapter("book/04_build_it_yourself", ("build", "build_diagnosis", "build_reference", "build_steps")),
    Chapter("book/05_parameter_analysis", ("configs", "config_exercises", "tables"), ("configs",)),
    Chapter(
        "book/06_merging_heads",
        ("merging", "merge_exercises", "merge_folding", "merge_training", "role_heads"),
        ("merging",),
    ),
    Chapter("book/07_where_next", ("configs",)),
    Chapter("book/08_head_count_experiments", ("head_count", "readout", "task"), ("head_count",)),
    Chapter(
        "book/09_merging_experiments",
        ("merging", "merge_exercises", "merge_folding", "merge_training", "task"),
        ("merging",),
    ),
    Chapter(
        "book/10_making_it_fast",
        ("perf", "perf_exercises", "perf_results", "perf_stats", "configs", "models"),
        ("perf",),
    ),
    Chapter(
        "book/11_pretrained_heads",
        ("pretrained_analysis", "pretrained_controls", "pretrained_pruning", "pretrained_twins", "tables"),
        ("pretrained_analysis",),
    ),
)
#: The same chapters by label: ``LABELS["worked_example"] is chapter("worked_example")``.
LABELS: dict[str, Chapter] = {c.label: c for c in CHAPTERS.values()}
#: Modules that serve several chapters: the checkers' verdicts (``answers``), the small models the
#: experiments train (``models``), the synthetic task (``task``) and the printed tables (``tables``).
SHARED = ("answers", "models", "task", "tables", "verdict_i18n")

#: The package's data files (cached training runs, the ablation study, sentence pairs).
DATA_DIR = Path(__file__).resolve().parents[1] / "data"


def chapter(key: str | int) -> Chapter:
    """The chapter of this label (``"parameter_analysis"``), or of this number as the book shows it.

    Raises ``KeyError`` naming the known labels for any other key.
    """
    found = CHAPTERS.get(key) if isinstance(key, int) else LABELS.get(key)
    if found is None:
        raise KeyError(f"no chapter {key!r}; known: {', '.join(LABELS)}")
    return found


def __getattr__(name):
    """Load a submodule on first use."""
    import importlib

    if not name.startswith("_"):
        try:
            return importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
