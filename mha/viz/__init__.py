"""The drawing machinery every topic's figures share: the book's matplotlib style and the explorers.

``plotting`` holds the style and the attention heatmaps every chapter uses; ``widgets`` the explorers
(a live ipywidgets UI and a static HTML component), with ``controls``, ``frames``, ``live``, ``artists``
and ``glyphs``; ``describe`` a figure's alt text; ``figure_i18n`` and ``phone`` a figure's Chinese twin
and its phone rendering. The figures themselves live with their topic: ``mha/chapters/<topic>/figures.py``.
Only this subpackage and those figures import matplotlib and ipywidgets.

``import mha.viz`` imports neither: a module loads on first use (``mha.viz.widgets``) or with
``from mha.viz import widgets``.
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
