"""Old page addresses still reach their pages (issue 33): when the chapters were renamed to the numbers a
reader sees (``book/04_parameter_analysis`` became ``book/05_parameter_analysis``, ...), each old
address got a small page that sends the reader on, keeping the ``#section`` of a bookmarked link.

The map is ``mha_redirects`` in ``_config.yml`` (``sphinx.config``): old docname -> new docname. A redirect
page is written after the build only where no real page has that name, in either edition.
"""

from __future__ import annotations

import html
import os
from pathlib import Path

MESSAGE = {
    "en": ("This page has moved", "This page is now {link}."),
    "zh": ("本页已移动", "本页现在是{link}。"),
}

PAGE = """<!DOCTYPE html>
<html lang="{lang}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<link rel="canonical" href="{href}">
<meta http-equiv="refresh" content="0; url={href}">
<script>location.replace({href_js} + location.hash);</script>
</head>
<body>
<main><h1>{title}</h1><p>{text}</p></main>
</body>
</html>
"""


def redirect_page(old: str, new: str, title: str, language: str) -> str:
    """The HTML of the page at ``old`` (a docname) that sends the reader to ``new``."""
    href = os.path.relpath(new, os.path.dirname(old) or ".") + ".html"
    heading, sentence = MESSAGE[language]
    link = f'<a href="{html.escape(href)}">{html.escape(title)}</a>'
    return PAGE.format(
        lang="zh-CN" if language == "zh" else "en",
        title=heading,
        href=html.escape(href),
        href_js='"' + href.replace("\\", "\\\\").replace('"', '\\"') + '"',
        text=sentence.format(link=link),
    )


def write_redirects(app, exc) -> None:
    if exc is not None or app.builder.format != "html":
        return
    language = "zh" if (app.config.language or "en").startswith("zh") else "en"
    outdir = Path(app.outdir)
    for old, new in app.config.mha_redirects.items():
        if old in app.env.found_docs:
            raise ValueError(f"mha_redirects: {old!r} is still a page of the book; a redirect would replace it")
        if new not in app.env.found_docs:
            raise ValueError(f"mha_redirects: {old!r} points at {new!r}, which is not a page of the book")
        title = app.env.titles[new].astext()
        target = outdir / (old + ".html")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(redirect_page(old, new, title, language), encoding="utf-8")


def setup(app):
    app.add_config_value("mha_redirects", {}, "html")
    app.connect("build-finished", write_redirects)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
