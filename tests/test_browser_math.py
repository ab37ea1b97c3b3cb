"""The math is typeset when the book is built, and no formula is cut off on any screen (issue 35), in both editions.

For every page of the table of contents, from the one visit each page gets (``test_browser.book_page``):

* no script that typesets math is loaded (no MathJax, no KaTeX JavaScript, no such global), so the
  main-thread blocking from math is 0 by construction; KaTeX's CSS comes from the book itself
  (``_static/katex/``); the page shifts less than 0.05 while it loads (its whole layout, sidebars
  and header included: the theme's head now picks the colour theme, KaTeX's commonest fonts are
  preloaded and code seams are written by the build, ``_ext/mha_book.py``). Long tasks and layout
  shifts are observed from before the page's first script (``scripts/measure_math.py``, which also
  measures a slowed phone and keeps the numbers in ``_build/math-timings.json``);
* every formula carries KaTeX's HTML and its MathML (what a screen reader reads), none is a KaTeX
  error, and none shows a backslash (TeX that was not read, like chapter 9's ``concat\\_lowrank``);
* with every fold opened (exercise answers), at 390x844 and at 1280x900, no formula is clipped: a
  formula wider than its box sits in a box of its own that scrolls and shows it (a shadow on the side
  where more is hidden, or a scrollbar); see ``browser_reading.CLIPPED_MATH``.

And, without a browser, no built page of either edition holds a ``.katex-error``.
"""

from __future__ import annotations

import re

import pytest
from browser_reading import CLIPPED_MATH, PHONE
from test_browser import (  # noqa: F401 (pytest fixtures)
    BUILD,
    EDITIONS,
    book_page,
    browser,
    serve,
    server,
    toc_pages,
    visit,
)

PAGES = toc_pages()
#: Cumulative layout shift a page may have while it loads (Google's "good" is 0.1; MathJax gave 0.12-0.26).
MAX_LAYOUT_SHIFT = 0.05
#: Main-thread blocking from math a page may have (MathJax: 0.9-3.7 s on the math-heavy chapters).
MAX_MATH_BLOCKING_MS = 100


@pytest.mark.parametrize("edition", list(EDITIONS))
@pytest.mark.parametrize("page_name", PAGES)
def test_math_was_typeset_when_the_book_was_built(page_name, edition, server, browser):  # noqa: F811
    facts = book_page(browser, server, edition, page_name)
    perf = facts["mathPerf"]
    assert not perf["mathScripts"] and not facts["mathGlobals"], (
        f"{page_name} ({edition}) typesets math in the browser: {perf['mathScripts']} {facts['mathGlobals']}"
    )
    assert perf["blocking"] < MAX_MATH_BLOCKING_MS  # 0 without a math script: here for a page that had one
    assert perf["observerError"] is None, f"{page_name}: the long-task observer failed: {perf['observerError']}"
    assert perf["cls"] < MAX_LAYOUT_SHIFT, (
        f"{page_name} ({edition}): the page shifts {perf['cls']} while loading (its text {perf['textCls']})"
    )
    assert not facts["katexErrors"], f"{page_name} ({edition}): KaTeX could not typeset {facts['katexErrors'][:3]}"
    assert not facts["backslashes"], f"{page_name} ({edition}): formulas show a backslash: {facts['backslashes'][:3]}"
    if facts["math"]:
        assert facts["mathTypeset"] == facts["math"], (
            f"{page_name} ({edition}): {facts['math'] - facts['mathTypeset']} of {facts['math']} formulas lack "
            "KaTeX's HTML or their MathML"
        )
        assert [href.split("?")[0].split("/_static/")[1] for href in facts["mathStyles"]] == [
            "katex/katex.min.css",
            "katex-math.css",
        ], f"{page_name} ({edition}): KaTeX's CSS from {facts['mathStyles']}"
        assert any("/_static/katex/fonts/" in path for path in facts["loaded"]), f"{page_name}: no KaTeX font loaded"
    if page_name == "book/notation":  # not vacuous: a page of formulas
        assert facts["math"] >= 100 and perf["formulas"] >= 100


@pytest.mark.parametrize("size", ["phone", "desktop"])
@pytest.mark.parametrize("edition", list(EDITIONS))
@pytest.mark.parametrize("page_name", PAGES)
def test_no_formula_is_clipped(page_name, edition, size, server, browser):  # noqa: F811
    found = book_page(browser, server, edition, page_name)["reading"]["clippedMath"][size]
    assert not found["clipped"], (
        f"{page_name} ({edition}, {size}): {len(found['clipped'])} of {found['formulas']} formulas cut off, "
        f"wider than their box with nothing to scroll: {found['clipped'][:3]}"
    )
    assert not found["hidden"], (
        f"{page_name} ({edition}, {size}): formulas that scroll in a box hidden from keyboards and screen readers: "
        f"{found['hidden'][:3]}"
    )
    assert not found["uncued"], (
        f"{page_name} ({edition}, {size}): formulas that scroll without showing it: {found['uncued'][:3]}"
    )
    if page_name == "book/notation":  # not vacuous: every formula of the page was measured
        assert found["formulas"] >= 100


@pytest.mark.parametrize("edition", list(EDITIONS))
def test_built_pages_hold_no_katex_error(edition):
    folder = BUILD / EDITIONS[edition]
    pages = [p for p in folder.rglob("*.html") if "_static" not in p.parts]
    if not pages:
        pytest.skip(f"the {edition} edition is not built")
    errors = {
        str(p.relative_to(folder)): re.findall(r'class="katex-error"[^>]*>([^<]{0,60})', p.read_text(encoding="utf-8"))
        for p in pages
    }
    errors = {page: found for page, found in errors.items() if found}
    assert not errors, f"KaTeX errors in the {edition} edition: {errors}"
    assert sum(p.read_text(encoding="utf-8").count('class="katex"') for p in pages) > 1000  # not vacuous


def test_the_math_checks_catch_clipping_scripts_and_errors(browser, tmp_path):  # noqa: F811
    """Not vacuous: a formula cut off by its box, one that scrolls without a cue, a MathJax-like
    script that blocks the main thread and moves the text, and a KaTeX error each fail."""
    wide = (
        '<span class="katex"><span class="katex-html"><span class="base" style="display:inline-block;'
        'white-space:nowrap">' + "x+" * 200 + "</span></span></span>"
    )
    (tmp_path / "bad.html").write_text(
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>bad</title>'
        '<meta name="viewport" content="width=device-width"></head><body><main>'
        f'<p>cut: <span class="math" style="display:inline-flex;max-width:100%;overflow:hidden">{wide}</span></p>'
        f'<div class="math" style="overflow-x:auto;scrollbar-width:none">{wide}</div>'
        '<p><span class="math"><span class="katex-error">\\frac{</span></span></p>'
        '<p id="late" style="height:500px">text that moves</p>'
        '<script src="mathjax/tex-chtml.js"></script></main></body></html>',
        encoding="utf-8",
    )
    # stands in for MathJax: 300 ms of main thread, then the text pushed 200 px down
    (tmp_path / "mathjax").mkdir()
    (tmp_path / "mathjax" / "tex-chtml.js").write_text(
        "const t0 = performance.now(); while (performance.now() - t0 < 300) {}\n"
        "window.MathJax = {};\n"
        "setTimeout(() => { const d = document.createElement('div'); d.style.height = '200px';"
        " document.getElementById('late').before(d); }, 100);\n",
        encoding="utf-8",
    )
    with serve(tmp_path) as url:
        facts = visit(browser, f"{url}/bad.html")
        context = browser.new_context(viewport=PHONE)
        try:
            page = context.new_page()
            page.goto(f"{url}/bad.html")
            clipped = page.evaluate(CLIPPED_MATH)
        finally:
            context.close()
    assert facts["mathPerf"]["mathScripts"] and facts["mathGlobals"] == ["MathJax"]
    assert facts["mathPerf"]["pageBlocking"] >= 200 and facts["mathPerf"]["blocking"] >= 200
    assert facts["mathPerf"]["cls"] >= MAX_LAYOUT_SHIFT and facts["mathPerf"]["textCls"] >= MAX_LAYOUT_SHIFT
    assert facts["katexErrors"] == ["\\frac{"]
    assert [c["formula"][:4] for c in clipped["clipped"]] == ["x+x+"]
    assert [c["formula"][:4] for c in clipped["uncued"]] == ["x+x+"]
