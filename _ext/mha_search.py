"""The search page, and the colour mode a first visit starts in (loaded from _config.yml: local_extensions).

In both editions:

* The search page loads ``static/mha_search.js`` (and no other page does): one hit per page,
  chapters first, and summaries in plain text, formulas included (see that file). Sphinx's own
  ``searchtools.js`` still finds the hits, from the same index (the Chinese one cut into words by
  jieba); the search field's magnifier no longer covers the query (``static/mha_book.css``).
* The theme's colour mode: pydata-sphinx-theme's page head sets ``data-mode`` to the mode a reader
  chose before (``localStorage``) or else to the template's ``default_mode``, which no
  configuration of this book set: on a first visit ``data-mode`` was ``""``, and the theme's
  script logged "Got invalid theme mode: . Resetting to auto." before it fell back to ``auto``.
  The book now names that default: ``auto``, the reader's system setting, what the theme fell
  back to anyway.
"""

from __future__ import annotations

#: Added to the search page only (it is served from _ext/static/, like mha_book.js).
SEARCH_SCRIPT = "mha_search.js"
#: The colour mode of a reader who never chose one: the system's (light or dark).
DEFAULT_MODE = "auto"


def set_default_mode(app, config) -> None:
    config.html_context = {**config.html_context}
    config.html_context.setdefault("default_mode", DEFAULT_MODE)


def add_search_script(app, pagename, templatename, context, doctree) -> None:
    """Sphinx adds a file given here to this page only (it restores the list for the next page)."""
    if pagename == "search" and app.builder.format == "html":
        app.add_js_file(SEARCH_SCRIPT, defer="defer")


def setup(app):
    app.connect("config-inited", set_default_mode)
    app.connect("html-page-context", add_search_script)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
