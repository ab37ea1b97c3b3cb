"""Two editions of the book from one source: English (``make book``) and Chinese (``make book-zh``).

The Chinese edition is Sphinx's standard internationalisation: the same notebooks, with every
translatable message of the prose replaced by its translation from
``locales/zh_CN/LC_MESSAGES/<page>.po`` (``language: zh_CN`` in the configuration that
``scripts/i18n.py`` writes for that build). This extension adds three things:

* **What is not translated.** Code cells, their stored outputs and display math are left out of
  the message catalogues, so the Chinese edition shows the very same outputs (the numbers can
  never disagree) and a translator is never asked to copy a matrix.
* **Explorer labels.** The explorers are self-contained HTML in the stored outputs. Their
  captions, control labels and notes are swapped for the translations in
  ``locales/zh_CN/explorers.json`` (English text -> Chinese text); the frames stay the same.
* **A link to the other edition** at the top of every page: the same page in the other language.
  The English edition is built into ``_build/html``, the Chinese one into ``_build/html-zh``;
  the link is relative, so it works wherever the two folders are published side by side.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from docutils import nodes
from sphinx.transforms.post_transforms import SphinxPostTransform

#: The output folder of each edition, under ``_build/``, and the name of the link to it.
EDITIONS = {"en": ("html", "English"), "zh_CN": ("html-zh", "中文")}
#: The explorer labels' translations, per language, relative to the book's root.
EXPLORER_LABELS = "locales/{language}/explorers.json"


def edition(app) -> str:
    """``"en"`` or ``"zh_CN"``: which edition this build makes."""
    return "zh_CN" if (app.config.language or "en").startswith("zh") else "en"


class KeepOutputsUntranslated(SphinxPostTransform):
    """Marks code, stored outputs and display math as not translatable.

    It runs on the doctree the gettext builder extracts messages from (after myst-nb has chosen
    each output's MIME type), so none of them reaches a catalogue.
    """

    default_priority = 900

    def run(self, **kwargs) -> None:
        for node in self.document.findall(nodes.math_block):
            node["translatable"] = False
        for container in self.document.findall(nodes.container):
            if str(container.get("nb_element", "")).startswith("cell_code"):
                for element in container.findall(nodes.TextElement):
                    element["translatable"] = False


def load_explorer_labels(app) -> dict[str, str]:
    """English -> translated text of the explorers' labels for this build (empty in English)."""
    if not hasattr(app, "mha_explorer_labels"):
        app.mha_explorer_labels = read_explorer_labels(app)
    return app.mha_explorer_labels


def read_explorer_labels(app) -> dict[str, str]:
    language = edition(app)
    if language == "en":
        return {}
    path = Path(app.srcdir) / EXPLORER_LABELS.format(language=language)
    if not path.exists():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


def translate_explorers(app, doctree, docname) -> None:
    """Swaps the English labels in the explorers' HTML for this edition's (frames unchanged)."""
    labels = load_explorer_labels(app)
    if not labels:
        return
    # Longest first, so that a label containing another is replaced whole.
    pairs = sorted(labels.items(), key=lambda kv: -len(kv[0]))
    for raw in doctree.findall(nodes.raw):
        if "mha-explorer" not in raw.astext():
            continue
        text = raw.astext()
        for english, translated in pairs:
            for form in {english, html.escape(english, quote=True)}:
                text = text.replace(form, translated if form == english else html.escape(translated, quote=True))
        raw.children = [nodes.Text(text)]


def other_edition_link(app, pagename, templatename, context, doctree) -> None:
    """Puts a link to the same page in the other edition at the top of the page body."""
    if app.builder.format != "html" or "body" not in context:
        return
    here = edition(app)
    there = "zh_CN" if here == "en" else "en"
    folder, name = EDITIONS[there]
    up = "../" * (pagename.count("/") + 1)
    lang = there.replace("_", "-")
    link = (
        f'<p class="mha-other-edition" style="text-align:right;margin:0 0 0.5em 0;font-size:0.9em">'
        f'<a href="{up}{folder}/{pagename}.html" hreflang="{lang}" lang="{lang}">{name}</a></p>\n'
    )
    context["body"] = link + context["body"]


def setup(app):
    app.add_post_transform(KeepOutputsUntranslated)
    app.connect("doctree-resolved", translate_explorers)
    app.connect("html-page-context", other_edition_link)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
