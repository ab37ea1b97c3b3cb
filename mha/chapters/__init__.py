"""Chapter code: the experiments, worked examples and tables behind each chapter of the book.

Every module computes and returns data (tensors, dicts, strings); none draws. The figures of a
chapter live in the module of the same name in :mod:`mha.viz`. Chapter modules build on the core
(``mha.attention``, ``mha.modules``, ...) and never import :mod:`mha.viz`, matplotlib or
ipywidgets.

Import a module explicitly, e.g. ``from mha.chapters import merging``; ``mha.chapters.merging``
also works after ``import mha.chapters`` (modules load on first use).

Which module serves which chapter: :data:`CHAPTERS` maps the number a reader sees to the chapter's
page and its modules (``CHAPTERS[3]`` is the worked example: ``worked``, ``worked_edit``, ...);
:data:`SHARED` lists the modules several chapters use. ``tests/test_layers.py`` keeps the map true.
"""

from __future__ import annotations

from pathlib import Path

#: Chapter number (as the book numbers it) -> (its page, the modules of this package it uses). A
#: chapter's figures and explorers are in the :mod:`mha.viz` modules of the same names.
CHAPTERS: dict[int, tuple[str, tuple[str, ...]]] = {
    1: ("book/01_single_head_limits", ("single_head", "softmax_demo", "head_count", "task")),
    2: ("book/02_multi_head_math", ("scaling", "head_split")),
    3: ("book/03_worked_example", ("worked", "worked_diagnosis", "worked_edit")),
    4: ("book/04_build_it_yourself", ("build", "build_diagnosis", "build_reference", "build_steps")),
    5: ("book/05_parameter_analysis", ("configs", "config_exercises", "tables")),
    6: ("book/06_merging_heads", ("merging", "merge_exercises", "merge_folding", "merge_training", "role_heads")),
    7: ("book/07_where_next", ("configs",)),
    8: ("book/08_head_count_experiments", ("head_count", "readout", "task")),
    9: ("book/09_merging_experiments", ("merging", "merge_exercises", "merge_folding", "merge_training", "task")),
    10: ("book/10_making_it_fast", ("perf", "perf_exercises", "perf_results", "perf_stats", "configs", "models")),
    11: (
        "book/11_pretrained_heads",
        ("pretrained_analysis", "pretrained_controls", "pretrained_pruning", "pretrained_twins", "tables"),
    ),
}
#: Modules that serve several chapters: the checkers' verdicts (``answers``), the small models the
#: experiments train (``models``), the synthetic task (``task``) and the printed tables (``tables``).
SHARED = ("answers", "models", "task", "tables", "verdict_i18n")

#: The package's data files (cached training runs, the ablation study, sentence pairs).
DATA_DIR = Path(__file__).resolve().parents[1] / "data"


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
