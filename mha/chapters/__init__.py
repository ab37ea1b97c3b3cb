"""Chapter code: the experiments, worked examples and tables behind each chapter of the book.

Every module computes and returns data (tensors, dicts, strings); none draws. The figures of a
chapter live in the module of the same name in :mod:`mha.viz`. Chapter modules build on the core
(``mha.attention``, ``mha.modules``, ...) and never import :mod:`mha.viz`, matplotlib or
ipywidgets.

Import a module explicitly, e.g. ``from mha.chapters import merging``; ``mha.chapters.merging``
also works after ``import mha.chapters`` (modules load on first use).
"""

from __future__ import annotations

from pathlib import Path

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
