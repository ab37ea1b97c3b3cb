"""The figures of the notebooks get the alt text their own code wrote (loaded from _config.yml).

myst-nb gives a notebook's image output no alt text of its own: the HTML would fall back to the
image's file path (``../_images/<hash>.png``), which a screen reader reads out. The book's figures
store what they show with the image instead: ``mha.viz.describe.figure_output`` (the PNG
formatter of figures in the chapters' kernels) puts, in the output's metadata under
``image/png``, an English ``alt`` and the description it was written from. This extension reads
each notebook's outputs, matches every image node to its output by the SHA-256 of the PNG (the
name myst-nb gives the file) and sets the alt text: the stored one in English, in the Chinese
edition the same description written in Chinese (``mha.viz.describe.alt_text``), with the titles
and labels from ``locales/zh_CN/explorers.json``.

Output metadata also gives the image its ``width`` (myst-nb passes it on), so that Sphinx links
the image to its full-size file (``html_scaled_image_link``): on a phone, one tap away.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

from docutils import nodes


def stored_figures(notebook: Path) -> dict[str, dict]:
    """SHA-256 of each PNG output of ``notebook`` -> its ``image/png`` output metadata."""
    found = {}
    for cell in json.loads(notebook.read_text(encoding="utf-8")).get("cells", []):
        for output in cell.get("outputs", []):
            png = output.get("data", {}).get("image/png")
            if png is None:
                continue
            png = "".join(png) if isinstance(png, list) else png
            digest = hashlib.sha256(base64.b64decode(png)).hexdigest()
            found[digest] = output.get("metadata", {}).get("image/png", {})
    return found


def figure_alt(metadata: dict, language: str, labels: dict[str, str]) -> str | None:
    """The alt text of one stored figure in ``language`` (``None``: none stored)."""
    description = metadata.get("mha", {}).get("description")
    if language == "en" or description is None:
        return metadata.get("alt")
    from mha.viz.describe import alt_text

    return alt_text(description, language=language, tr=lambda text: labels.get(text) or text)


def set_figure_alts(app, doctree) -> None:
    """Sets the alt text of every image output of the notebook just read."""
    from mha_i18n import edition, load_explorer_labels

    path = Path(app.env.doc2path(app.env.docname))
    if path.suffix != ".ipynb" or not path.exists():
        return
    figures = stored_figures(path)
    language = edition(app)
    labels = load_explorer_labels(app)
    for image in doctree.findall(nodes.image):
        metadata = figures.get(Path(image.get("uri", "")).stem)
        alt = figure_alt(metadata, language, labels) if metadata is not None else None
        if alt:
            image["alt"] = alt


def setup(app):
    app.connect("doctree-read", set_figure_alts)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
