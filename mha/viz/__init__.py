"""Presentation: the book's matplotlib style, every figure, and the interactive explorers.

``plotting`` holds the style and the attention heatmaps every chapter uses; ``widgets`` the
explorers (a live ipywidgets UI and a static HTML component); each other module draws the figures
of the chapter module of the same name in :mod:`mha.chapters`. Only this subpackage imports
matplotlib and ipywidgets.

``import mha.viz`` imports neither: a module loads on first use (``mha.viz.merging``) or with
``from mha.viz import merging``.
"""

from __future__ import annotations


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
