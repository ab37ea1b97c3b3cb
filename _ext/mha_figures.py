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

The Chinese edition also shows the words inside the images in Chinese: each figure and each explorer
frame has a twin, drawn from the same figure when the chapters were executed (``mha.viz.figure_i18n``),
stored as ``locales/zh_CN/<figures|frames>/<SHA-256 of the English image>.<ext>`` with an ``index.json``
(the twin's size and strings). Here each figure's image node is pointed at its twin (before Sphinx
collects the images, so only the twin is copied) and each frame's data URI in an explorer's HTML is
swapped for its twin's, with the frame's size. The English edition is left as it is.

On a phone, a figure drawn for the desktop column would show its words at 5-8 CSS px. A figure
that would has a phone rendering (``mha.viz.phone``), drawn in each edition when the chapters were
executed and stored as ``locales/<language>/phone/<SHA-256 of the English image>.png``. Each page
shows it through a ``<picture>`` whose ``<source>`` a screen no wider than ``mha.viz.phone.MEDIA``
takes (with its own width and height, so nothing moves); the link under it still opens the
desktop image. The file is copied to ``_images/phone/``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
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
    from mha.viz.figure_i18n import translate  # the words the figure itself draws in this edition

    return alt_text(description, language=language, tr=translate)


#: Where an edition's twins are, relative to the book's root (``mha.viz.figure_i18n``).
TWINS = "locales/{language}/{kind}"
FRAME_URI = re.compile(r"data:image/(webp|png);base64,([A-Za-z0-9+/=]+)")
FRAME_SIZE = re.compile(r'(<img class="mha-explorer-frame" [^>]*?width=")(\d+)(" height=")(\d+)(")')


def load_twins(app, kind: str) -> dict[str, dict]:
    """SHA-256 of an English image -> its twin's entry (``file``, ``size``) in this edition."""
    from mha_i18n import edition

    cache = getattr(app, "mha_twins", None)
    if cache is None:
        cache = app.mha_twins = {}
    if kind not in cache:
        language = edition(app)
        path = Path(app.srcdir) / TWINS.format(language=language, kind=kind) / "index.json"
        cache[kind] = json.loads(path.read_text(encoding="utf-8")) if language != "en" and path.exists() else {}
    return cache[kind]


def swap_figure(app, image, digest: str) -> None:
    """Points a figure's image node at its twin in this edition (if it has one)."""
    from mha_i18n import edition

    twin = load_twins(app, "figures").get(digest)
    if twin is not None:
        image["uri"] = "/" + TWINS.format(language=edition(app), kind="figures") + "/" + twin["file"]
        if "width" in image:
            image["width"] = str(twin["size"][0])


def swap_frames(page: str, twins: dict[str, dict], folder: Path) -> str:
    """An explorer's HTML with each frame's data URI swapped for its twin's, and the frame's size."""
    size = None

    def swap(match):
        nonlocal size
        twin = twins.get(hashlib.sha256(base64.b64decode(match.group(2))).hexdigest())
        if twin is None:
            return match.group(0)
        size = twin["size"]
        data = base64.b64encode((folder / twin["file"]).read_bytes()).decode("ascii")
        return f"data:image/{match.group(1)};base64,{data}"

    page = FRAME_URI.sub(swap, page)
    if size is not None:
        page = FRAME_SIZE.sub(lambda m: f"{m.group(1)}{size[0]}{m.group(3)}{size[1]}{m.group(5)}", page)
    return page


def set_figure_alts(app, doctree) -> None:
    """Sets the alt text of every image output of the notebook just read and, in a translated
    edition, swaps each figure and explorer frame for its twin with the words in that language."""
    from mha_i18n import edition, load_explorer_labels

    path = Path(app.env.doc2path(app.env.docname))
    if path.suffix != ".ipynb" or not path.exists():
        return
    figures = stored_figures(path)
    language = edition(app)
    labels = load_explorer_labels(app)
    for image in doctree.findall(nodes.image):
        digest = Path(image.get("uri", "")).stem
        metadata = figures.get(digest)
        alt = figure_alt(metadata, language, labels) if metadata is not None else None
        if alt:
            image["alt"] = alt
        if metadata is not None and language != "en":
            swap_figure(app, image, digest)
    frames = load_twins(app, "frames")
    if not frames:
        return
    folder = Path(app.srcdir) / TWINS.format(language=language, kind="frames")
    for raw in list(doctree.findall(nodes.raw)):
        text = raw.astext()
        if "mha-explorer-frame" in text:
            swapped = swap_frames(text, frames, folder)
            if swapped != text:
                raw.replace_self(nodes.raw(raw.rawsource, swapped, format=raw.get("format", "html")))


#: A figure output's image in a page's HTML: its file is named by the English PNG's SHA-256 (the
#: Chinese twin keeps that name).
FIGURE_IMG = re.compile(r'<img\b[^>]*\bsrc="(?P<root>[^"]*?)_images/(?P<digest>[0-9a-f]{64})\.png"[^>]*>')
PHONE = "_images/phone"


def load_phone(app) -> dict[str, dict]:
    """SHA-256 of an English figure -> its phone rendering's entry (``file``, ``size``) in this edition."""
    from mha_i18n import edition

    cached = getattr(app, "mha_phone", None)
    if cached is None:
        path = Path(app.srcdir) / TWINS.format(language=edition(app), kind="phone") / "index.json"
        cached = app.mha_phone = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    return cached


def phone_pictures(body: str, phones: dict[str, dict], folder: Path, outdir: Path) -> str:
    """``body`` with each figure that has a phone rendering in a ``<picture>`` that shows it on a
    phone (the rendering copied to ``outdir/_images/phone/``)."""
    from mha_speed import write_once

    from mha.viz.phone import MEDIA

    def one(match: re.Match) -> str:
        entry = phones.get(match.group("digest"))
        if entry is None:
            return match.group(0)
        target = outdir / PHONE / entry["file"]
        if not target.exists():
            write_once(target, (folder / entry["file"]).read_bytes())
        width, height = entry["size"]
        source = f'<source media="{MEDIA}" srcset="{match.group("root")}{PHONE}/{entry["file"]}" '
        return f'<picture>{source}width="{width}" height="{height}" />{match.group(0)}</picture>'

    return FIGURE_IMG.sub(one, body)


def write_phone_pictures(app, pagename, templatename, context, doctree) -> None:
    from mha_i18n import edition

    body = context.get("body")
    if not body or app.builder.format != "html" or "_images/" not in body:
        return
    phones = load_phone(app)
    if phones:
        folder = Path(app.srcdir) / TWINS.format(language=edition(app), kind="phone")
        context["body"] = phone_pictures(body, phones, folder, Path(app.outdir))


def setup(app):
    # before Sphinx's image collector (priority 500) copies the images the doctree names
    app.connect("doctree-read", set_figure_alts, priority=400)
    app.connect("html-page-context", write_phone_pictures, priority=900)  # before mha_speed's lazy images
    return {"parallel_read_safe": True, "parallel_write_safe": True}
