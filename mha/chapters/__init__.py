"""Chapter code, by topic: the experiments, worked examples, checkers and figures behind the book.

One folder per topic (a chapter with its deep dive), each holding the topic's data modules, its figures
(``figures.py``) and its checkers' Chinese phrasebook (``zh_CN.json``):

======================  =================================================  ================================
folder                  what it holds                                      chapters
======================  =================================================  ================================
``heads``               one head's limits, the synthetic relation task     single-head limits, head-count
                        and the head-count experiments                     experiments
``multi_head_math``     the scaling of scores and the split into heads     multi-head math
``worked_example``      the 5-token 2-head example, its checkers, edits    worked example
``build_it_yourself``   the build-it-yourself steps and their diagnosis    build it yourself
``costs``               parameter and memory counts, published configs     parameter analysis, where next
``fast``                timings, memory and the making-it-fast exercises   making it fast
``merging``             concat, average and the other merges, trained      merging heads, merging experiments
``pretrained``          heads of a pretrained BERT: maps, pruning, twins   pretrained heads
``checking``            what every checker shares: verdicts, languages     every chapter with an exercise
======================  =================================================  ================================

A data module computes and returns data (tensors, dicts, strings) and never draws: only a topic's
``figures`` modules (and ``layer_diagram``) import :mod:`mha.viz`, matplotlib or ipywidgets, and
:mod:`mha.viz` holds only the drawing machinery every topic shares. Module file names are those the
prose uses (``worked.check_row``): import one from its topic, ``from mha.chapters.worked_example import
worked``; ``mha.chapters.worked_example.worked`` also works after ``import mha.chapters`` (modules load on
first use).

Which code serves which chapter: :data:`CHAPTERS` is the one map from a chapter to its page, its topic,
its modules and its figures. Code names a chapter by its **label**, the page's file name without its
number (``chapter("worked_example").modules`` are ``worked_example.worked``, ``.worked_diagnosis`` and
``.worked_edit``), never by the number the reader sees: that number is the page's file-name prefix, which
the table of contents may change, and :attr:`Chapter.number` reads it from there. :data:`SHARED` lists
the modules every checker uses. ``tests/book/test_layers.py`` keeps the map true;
``tests/book/test_chapter_map.py`` keeps chapter numbers out of the code and the README's table of
chapters current (``python scripts/chapter_table.py`` writes it).
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple


class Chapter(NamedTuple):
    """One chapter of the book: its page, its topic's folder, the modules it uses and those that draw it.

    The label and the number are read from the page's file name (``book/03_worked_example``: label
    ``worked_example``, number 3). Modules are named under :mod:`mha.chapters`: ``"worked_example.worked"``.
    """

    #: The page, as ``_toc.yml`` names it: ``book/<number>_<label>``.
    page: str
    #: The folder under ``mha/chapters/`` that holds the chapter's own code, figures and phrasebook.
    topic: str
    #: The modules the chapter's code cells import (with :data:`SHARED`), by their names under
    #: :mod:`mha.chapters`; a module of another topic is one the chapter shares (``heads.task``).
    modules: tuple[str, ...]
    #: The modules that draw the chapter's figures and explorers (the shared machinery of
    #: :mod:`mha.viz`, ``plotting``, ``widgets``, ``live``..., is not listed).
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

    @property
    def folder(self) -> str:
        """The topic's folder, relative to the repository: ``mha/chapters/<topic>/``."""
        return f"mha/chapters/{self.topic}/"


def _by_number(*chapters: Chapter) -> dict[int, Chapter]:
    return {c.number: c for c in chapters}


def _in(topic: str, *names: str) -> tuple[str, ...]:
    return tuple(f"{topic}.{name}" for name in names)


#: Every chapter in reading order, keyed by the number the book gives it (read from its page):
#: ``CHAPTERS[n]`` is a :class:`Chapter`. To name one in code, use :func:`chapter` with its label.
CHAPTERS: dict[int, Chapter] = _by_number(
    Chapter(
        "book/01_single_head_limits",
        "heads",
        _in("heads", "single_head", "softmax_demo", "head_count", "task"),
        _in("heads", "figures"),
    ),
    Chapter(
        "book/02_multi_head_math",
        "multi_head_math",
        _in("multi_head_math", "scaling", "head_split"),
        _in("multi_head_math", "figures", "layer_diagram"),
    ),
    Chapter(
        "book/03_worked_example",
        "worked_example",
        _in("worked_example", "worked", "worked_diagnosis", "worked_edit"),
        _in("worked_example", "figures"),
    ),
    Chapter(
        "book/04_build_it_yourself",
        "build_it_yourself",
        _in("build_it_yourself", "build", "build_diagnosis", "build_reference", "build_steps"),
    ),
    Chapter(
        "book/05_parameter_analysis",
        "costs",
        _in("costs", "configs", "config_exercises", "tables"),
        _in("costs", "figures"),
    ),
    Chapter(
        "book/06_merging_heads",
        "merging",
        _in("merging", "merging", "merge_exercises", "merge_folding", "merge_training", "role_heads"),
        _in("merging", "figures"),
    ),
    Chapter("book/07_where_next", "costs", _in("costs", "configs")),
    Chapter(
        "book/08_head_count_experiments",
        "heads",
        _in("heads", "head_count", "readout", "task"),
        _in("heads", "figures"),
    ),
    Chapter(
        "book/09_merging_experiments",
        "merging",
        _in("merging", "merging", "merge_exercises", "merge_folding", "merge_training", "role_heads")
        + _in("heads", "task")
        + _in("costs", "configs"),
        _in("merging", "figures"),
    ),
    Chapter(
        "book/10_making_it_fast",
        "fast",
        _in("fast", "perf", "perf_exercises", "perf_results", "perf_stats")
        + _in("costs", "configs", "models", "tables"),
        _in("fast", "figures"),
    ),
    Chapter(
        "book/11_pretrained_heads",
        "pretrained",
        _in(
            "pretrained",
            "pretrained_analysis",
            "pretrained_controls",
            "pretrained_exercises",
            "pretrained_pruning",
            "pretrained_twins",
        )
        + _in("costs", "tables"),
        _in("pretrained", "figures"),
    ),
)
#: The same chapters by label: ``LABELS["worked_example"] is chapter("worked_example")``.
LABELS: dict[str, Chapter] = {c.label: c for c in CHAPTERS.values()}
#: The topics, each a folder of :mod:`mha.chapters`: the chapters' topics and ``checking``.
TOPICS = (*dict.fromkeys(c.topic for c in CHAPTERS.values()), "checking")
#: The modules every checker uses: the verdicts (``answers``) and their languages (``verdict_i18n``).
SHARED = _in("checking", "answers", "verdict_i18n")

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


def submodules_on_first_use(package: str):
    """The module ``__getattr__`` of ``package`` that imports a submodule the first time it is read, so
    that ``mha.chapters.worked_example.worked`` works after ``import mha.chapters`` and no ``__init__``
    imports a chapter's code before it is used."""
    import importlib

    def __getattr__(name):
        if not name.startswith("_"):
            try:
                return importlib.import_module(f".{name}", package)
            except ModuleNotFoundError as exc:
                if exc.name != f"{package}.{name}":
                    raise
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__


__getattr__ = submodules_on_first_use(__name__)
