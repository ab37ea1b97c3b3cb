"""The book's own small Sphinx extension (loaded from _config.yml: sphinx: local_extensions).

Jupyter Book 1 with Sphinx 7.4 adds the scripts that extensions register while reading the
documents (sphinx-thebe, sphinx-togglebutton) twice to every page. The duplicated
``const THEBE_JS_URL = ...`` is a JavaScript error on every page, and that script also names a
third-party URL (thebe from a CDN) although this book has no live-code button
(``launch_buttons: thebe: false``). This extension keeps one copy of each script and leaves
the unused thebe scripts out, so a page loads only files from the book itself.

It also leaves out the widget state that myst-nb embeds for notebooks executed with
``store_widget_state``: no widget manager reads it in this book (``nb_ipywidgets_js: {}``;
explorers are self-contained HTML), so it would only add tens of kilobytes to a page. The
state stays in the ``.ipynb``, where JupyterLab uses it to show the widgets without a kernel.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path

#: What the book's MathJax (``mathjax_path: mathjax/tex-chtml.js``) loads: the combined TeX-to-CHTML
#: component, its web fonts, the TeX extensions it may autoload (\boldsymbol, \cancel, ...) and the
#: menu's lazily loaded parts. The package ships all of MathJax 3 (24 MB: SVG output, speech rule
#: engine, every combined component); the book copies only these (about 3 MB) and still typesets
#: every page offline (tests/test_browser.py refuses every outside request and fails on a 404).
MATHJAX_FILES = ("tex-chtml.js", "output/chtml", "input/tex/extensions", "ui", "a11y")


def _is_thebe(script) -> bool:
    filename = str(getattr(script, "filename", "") or "")
    body = str(getattr(script, "attributes", {}).get("body", ""))
    return filename.endswith("sphinx-thebe.js") or "THEBE_JS_URL" in body


WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def tidy_scripts(app, pagename, templatename, context, doctree) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    thebe_on = bool(app.config.html_theme_options.get("launch_buttons", {}).get("thebe"))
    seen, kept = set(), []
    for script in scripts:
        # Same file and attributes is the same script, whatever priority it was added with.
        key = (
            str(getattr(script, "filename", script) or ""),  # None and "" both mean inline
            tuple(sorted(getattr(script, "attributes", {}).items())),
        )
        unused_state = getattr(script, "attributes", {}).get("type") == WIDGET_STATE
        if key in seen or unused_state or (not thebe_on and _is_thebe(script)):
            continue
        seen.add(key)
        kept.append(script)
    context["script_files"] = kept


def mathjax_source() -> Path:
    """The MathJax 3 distribution inside the PyPI package ``sphinx-mathjax-offline``."""
    spec = importlib.util.find_spec("sphinx-mathjax-offline")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("sphinx-mathjax-offline is not installed: run `make install`")
    return Path(list(spec.submodule_search_locations)[0]) / "static" / "mathjax"


def copy_mathjax(app, exc) -> None:
    """After a successful HTML build, copy the part of MathJax the book loads into _static/mathjax."""
    if exc is not None or app.builder.format != "html":
        return
    source, target = mathjax_source(), Path(app.outdir) / "_static" / "mathjax"
    shutil.rmtree(target, ignore_errors=True)
    for name in MATHJAX_FILES:
        if (source / name).is_dir():
            shutil.copytree(source / name, target / name)
        else:
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / name, target / name)


#: ``//# sourceMappingURL=x.js.map`` (JavaScript) or ``/*# sourceMappingURL=x.css.map */`` (CSS).
SOURCE_MAP_COMMENT = re.compile(r"(//[#@] sourceMappingURL=[^\s]*|/\*[#@] sourceMappingURL=[^*]*\*/)")


def drop_source_maps(app, exc) -> None:
    """Removes the themes' source maps (3.3 MB of ``*.map``: only a browser's developer tools read
    them) and the ``sourceMappingURL`` comments that name them, so the book stays in its size budget
    and no page points at a missing file."""
    if exc is not None or app.builder.format != "html":
        return
    static = Path(app.outdir) / "_static"
    for source_map in static.rglob("*.map"):
        source_map.unlink()
    for asset in [*static.rglob("*.js"), *static.rglob("*.css")]:
        if "mathjax" in asset.parts:
            continue
        text = asset.read_text(encoding="utf-8", errors="surrogateescape")
        if "sourceMappingURL=" in text:
            text = SOURCE_MAP_COMMENT.sub("", text)
            asset.write_text(text, encoding="utf-8", errors="surrogateescape")


def setup(app):
    app.connect("html-page-context", tidy_scripts, priority=900)
    app.connect("build-finished", copy_mathjax)
    app.connect("build-finished", drop_source_maps)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
