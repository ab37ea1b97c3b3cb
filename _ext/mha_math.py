"""Math typeset when the book is built (issue 35), in both editions: no math script on any page.

Every formula of the book (MyST ``$...$``, ``$$...$$``, amsmath environments, ``{math}`` blocks) is
rendered to HTML by KaTeX while Sphinx writes the page: ``sphinxcontrib-katex`` (PyPI) with
``katex_prerender`` runs npm's ``katex`` (package.json, installed by ``make install`` with ``npm ci``)
in one Node process for the whole build. A page then carries each formula twice: KaTeX's HTML, which
the eye reads, and its MathML (``output: htmlAndMathml``), which a screen reader reads; it loads
KaTeX's CSS and fonts from the book itself (``_static/katex/``) and no script that typesets. Before this, MathJax 3
typeset every page in the reader's browser: 1.5-1.7 s of main-thread time on the math-heavy chapters
and a 13-22 px jump of the text when it finished (scripts/measure_math.py measures both).

What this extension adds to sphinxcontrib-katex:

* the KaTeX it runs is the npm package (``node_modules/katex``), not the copy inside the PyPI
  package, so the CSS and fonts the pages load are those of the KaTeX that wrote the HTML;
* a formula KaTeX cannot typeset is a build warning that names the page and the formula (``make
  book`` treats warnings as errors), instead of red TeX on the page (sphinxcontrib-katex's default);
* ``static/mha_formulas.js`` (1 kB, no typesetting) makes a formula that scrolls in its box a Tab
  stop, and only such a formula (``static/mha_book.css``, "math", makes it scroll and show that it does);
* a page with math asks, in its head before its CSS, for the KaTeX fonts its formulas use (``fonts_used``:
  the two every formula needs, and those its classes call for, such as big delimiters' Size1-4 or
  AMS): otherwise they arrived after the first layout, and formulas laid out first in a fallback font
  grew and moved the text (chapter 11: layout shift 0.045, 0.0003 with two fonts preloaded; the others
  a formula uses, for the same reason: chapter 2's big delimiters are drawn in Size1-3);
* only KaTeX's CSS and its WOFF2 fonts are copied into the book (every browser the book supports
  reads WOFF2): about 0.3 MB, where the MathJax the book loaded took 3 MB.
"""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

from docutils import nodes
from sphinx.errors import ExtensionError
from sphinx.util import logging

logger = logging.getLogger(__name__)

#: npm's KaTeX (package.json at the root of the repository; ``make install`` runs ``npm ci``).
ROOT = Path(__file__).resolve().parent.parent
KATEX_DIST = ROOT / "node_modules" / "katex" / "dist"
#: Where the pages find KaTeX's CSS and fonts (under ``_static/``); _config.yml's ``katex_css_path``.
KATEX_STATIC = "katex"

#: KaTeX's options for every formula. ``throwOnError`` turns a formula KaTeX cannot read into an
#: error this extension reports; ``htmlAndMathml`` keeps the MathML a screen reader reads.
KATEX_OPTIONS = {"throwOnError": True, "output": "htmlAndMathml", "strict": "ignore"}

#: ``src:`` of a KaTeX @font-face: WOFF2, WOFF and TrueType, of which the book keeps the first.
FONT_SOURCES = re.compile(
    r'(url\(fonts/[^)]+\.woff2\) format\("woff2"\)),url\([^)]+\.woff\)[^;}]*?format\("truetype"\)'
)
#: KaTeX's fonts nearly every formula uses (upright text and digits; italic letters).
PRELOADED_FONTS = ("KaTeX_Main-Regular.woff2", "KaTeX_Math-Italic.woff2")
#: The other fonts, each with the classes of KaTeX's HTML that draw in it (katex.min.css): a class
#: alone, or all the classes of a tuple on one element (``sizing size3`` is a font size, not a font).
FONTS_BY_CLASS = {
    "KaTeX_AMS-Regular.woff2": ("amsrm", "mathbb", "textbb"),
    "KaTeX_Main-Bold.woff2": ("mathbf", "textbf"),
    "KaTeX_Main-Italic.woff2": ("mathit", "textit"),
    "KaTeX_Math-BoldItalic.woff2": ("boldsymbol",),
    "KaTeX_Caligraphic-Regular.woff2": ("mathcal",),
    "KaTeX_Fraktur-Regular.woff2": ("mathfrak", "textfrak"),
    "KaTeX_Script-Regular.woff2": ("mathscr", "textscr"),
    "KaTeX_SansSerif-Regular.woff2": ("mathsf", "textsf"),
    "KaTeX_Typewriter-Regular.woff2": ("mathtt", "texttt"),
    "KaTeX_Size1-Regular.woff2": (("delimsizing", "size1"), "delim-size1", ("op-symbol", "small-op")),
    "KaTeX_Size2-Regular.woff2": (("delimsizing", "size2"), ("op-symbol", "large-op")),
    "KaTeX_Size3-Regular.woff2": (("delimsizing", "size3"),),
    "KaTeX_Size4-Regular.woff2": (("delimsizing", "size4"), "delim-size4"),
}
CLASS_ATTRIBUTE = re.compile(r'class="([^"]*)"')


def fonts_used(body: str) -> list[str]:
    """The KaTeX fonts the formulas of a page body draw in: ``PRELOADED_FONTS``, then ``FONTS_BY_CLASS``'s."""
    elements = {frozenset(value.split()) for value in CLASS_ATTRIBUTE.findall(body)}
    classes = set().union(*elements) if elements else set()

    def drawn(rule) -> bool:
        return rule in classes if isinstance(rule, str) else any(set(rule) <= element for element in elements)

    return [*PRELOADED_FONTS, *(font for font, rules in FONTS_BY_CLASS.items() if any(map(drawn, rules)))]


def configure(app, config) -> None:
    """Points sphinxcontrib-katex at npm's KaTeX (its server ``require``s this file)."""
    if config.html_math_renderer != "katex":
        return
    katex_js = KATEX_DIST / "katex.min.js"
    if not katex_js.is_file():
        raise ExtensionError(f"KaTeX is not installed ({katex_js} is missing): run `make install` (it runs `npm ci`)")
    config.katex_js_path = str(katex_js)
    import sphinxcontrib.katex as katex

    katex.KATEX_DEFAULT_OPTIONS = dict(KATEX_OPTIONS)


def _checked(visit, closing: str):
    """Wraps a sphinxcontrib-katex visitor: a formula KaTeX rejects becomes a warning with its place."""

    def visit_checked(self, node):
        try:
            visit(self, node)
        except nodes.SkipNode:
            raise
        except Exception as error:  # sphinxcontrib.katex.KaTeXError, with KaTeX's message
            latex = node.astext()
            logger.warning("KaTeX cannot typeset %r: %s", latex, error, location=node, type="mha", subtype="katex")
            self.body.append(f'<span class="katex-error" title="{html.escape(str(error))}">{html.escape(latex)}</span>')
            self.body.append(closing)
            raise nodes.SkipNode from None

    return visit_checked


def copy_katex_assets(app, exc) -> None:
    """Copies KaTeX's CSS (WOFF2 fonts only) and its WOFF2 fonts into ``_static/katex``."""
    if exc is not None or app.builder.format != "html" or app.config.html_math_renderer != "katex":
        return
    # MathJax, which a build before issue 35 copied here (Sphinx keeps what an earlier build wrote)
    shutil.rmtree(Path(app.outdir) / "_static" / "mathjax", ignore_errors=True)
    target = Path(app.outdir) / "_static" / KATEX_STATIC
    shutil.rmtree(target, ignore_errors=True)
    (target / "fonts").mkdir(parents=True)
    css = (KATEX_DIST / "katex.min.css").read_text(encoding="utf-8")
    css, fonts = FONT_SOURCES.subn(r"\1", css)
    if fonts == 0 or ".woff)" in css or ".ttf)" in css:
        raise ExtensionError("KaTeX's CSS no longer lists its fonts as this extension expects (FONT_SOURCES)")
    (target / "katex.min.css").write_text(css, encoding="utf-8")
    for font in re.findall(r"url\(fonts/([^)]+\.woff2)\)", css):
        shutil.copy2(KATEX_DIST / "fonts" / font, target / "fonts" / font)


def preload_fonts(app, pagename, templatename, context, doctree) -> None:
    """Puts the fonts the page's formulas use in the head of a page that has math (``metatags`` precede the CSS)."""
    if app.config.html_math_renderer != "katex" or not app.env.get_domain("math").has_equations(pagename):
        return
    links = "".join(
        f'<link rel="preload" href="{context["pathto"](f"_static/{KATEX_STATIC}/fonts/{font}", 1)}" as="font" '
        'type="font/woff2" crossorigin>'
        for font in fonts_used(context.get("body", ""))
    )
    context["metatags"] = context.get("metatags", "") + "\n    " + links


def setup(app):
    app.setup_extension("sphinxcontrib.katex")
    import sphinxcontrib.katex as katex

    app.registry.html_inline_math_renderers["katex"] = (_checked(katex.html_visit_math, "</span>"), None)
    app.registry.html_block_math_renderers["katex"] = (_checked(katex.html_visit_displaymath, "</div>"), None)
    app.connect("config-inited", configure)
    # A formula that scrolls is a Tab stop (it typesets nothing; see the file)
    app.add_js_file("mha_formulas.js", defer="defer")
    app.connect("html-page-context", preload_fonts)
    app.connect("build-finished", copy_katex_assets)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
