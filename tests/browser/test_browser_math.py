"""The math is typeset when the book is built, and no formula is cut off on any screen, in both editions.

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
  where more is hidden, or a scrollbar); see ``browser_reading.CLIPPED_MATH``. At 1280x900 none
  scrolls either: every formula and matrix fits the text column;

And, without a browser, no built page of either edition holds a ``.katex-error``.
"""

from __future__ import annotations

import functools
import http.server
import re
import sys
import threading
from pathlib import Path

import pytest
from browser_reading import CLIPPED_MATH, PHONE
from conftest import skip_or_fail
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

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "_ext"))
from mha_book import FIRST_SCREEN_END, FIRST_SCREEN_WAIT, image_size  # noqa: E402

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
        styles = facts["mathStyles"]
        assert styles and all(
            href and href.startswith(f"{facts['server']}/{EDITIONS[edition]}/_static/") for href in styles
        ), f"{page_name} ({edition}): KaTeX's CSS from {styles}, not from the book's _static/"
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
    if size == "desktop":  # at 1280 px every formula and matrix fits the column (a phone may scroll)
        assert not found["scrolling"], (
            f"{page_name} ({edition}): {len(found['scrolling'])} formulas wider than the {found['column']}-px column "
            f"at 1280 px (break them with aligned, or set matrices side by side only where they fit): "
            f"{found['scrolling'][:3]}"
        )
    if page_name == "book/notation":  # not vacuous: every formula of the page was measured
        assert found["formulas"] >= 100


def built_pages(edition: str) -> list[Path]:
    """The HTML pages of ``edition``'s built book (its ``_static`` left out); skipped (failed in CI) when unbuilt."""
    pages = [p for p in (BUILD / EDITIONS[edition]).rglob("*.html") if "_static" not in p.parts]
    if not pages:
        skip_or_fail(f"the {edition} edition is not built: run `make book book-zh`")
    return pages


@pytest.mark.parametrize("edition", list(EDITIONS))
def test_built_pages_hold_no_katex_error(edition):
    folder = BUILD / EDITIONS[edition]
    pages = built_pages(edition)
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
    assert [c["formula"][:4] for c in clipped["scrolling"]] == ["x+x+"]  # what the 1280-px check fails


def late_images_shift(browser, url: str, unsized: bool = False) -> float:  # noqa: F811
    """The layout shift of ``url`` when its images arrive only after its text was drawn (800 ms, and its
    first paint).

    ``unsized``: with the images' width and height taken out of the page, as the build wrote it before.
    """
    from test_browser import _measure_math

    measure = _measure_math()
    context = browser.new_context(viewport={"width": 1280, "height": 900}, service_workers="block")
    context.add_init_script(measure.PERF_OBSERVER)
    held = []
    context.route("**/_images/**", lambda route: held.append(route))
    if unsized:

        def strip(route):
            response = route.fetch()
            page_html = re.sub(r'<img width="\d+" height="\d+"', "<img", response.text())
            route.fulfill(response=response, body=page_html)

        context.route(url, strip)
    try:
        page = context.new_page()
        page.goto(url, wait_until="domcontentloaded")
        page.wait_for_timeout(800)
        page.wait_for_function(FIRST_PAINTED, polling=50, timeout=30_000)  # a busy machine may not have drawn it yet
        assert held, f"{url}: no image was requested"
        for route in held:
            route.continue_()
        page.wait_for_load_state("load")
        page.wait_for_timeout(300)
        return page.evaluate(measure.PERF_FACTS, measure.MATH_SCRIPT)["cls"]
    finally:
        context.close()


@pytest.mark.parametrize("edition", list(EDITIONS))
def test_a_late_figure_moves_nothing(edition, server, browser):  # noqa: F811
    """Chapter 2's first figure is on the first screen: the text below it keeps its place while it loads.

    Before the build gave every image its size (``_ext/mha_book.size_images``), the figure arrived after
    the first layout on a busy machine and the page shifted 0.053 (0.068 in Chinese, in CI); here it is made late."""
    url = f"{server}/{EDITIONS[edition]}/book/02_multi_head_math.html"
    shift, unsized = late_images_shift(browser, url), late_images_shift(browser, url, unsized=True)
    assert shift < MAX_LAYOUT_SHIFT / 10, f"{url}: the page shifts {shift} when its images arrive late"
    # not vacuous: built as before, the same page shifts 0.048 (0.068 in Chinese) on this test's terms
    assert unsized > MAX_LAYOUT_SHIFT / 2, f"{url}: without their sizes, the late images moved only {unsized}"


class _SlowPageHandler(http.server.SimpleHTTPRequestHandler):
    """Serves _build/; asked for ``PAGE?slow&rows=N``, sends the page in two parts, cut after the N-th body
    row of its first table (a busy machine or a slow network), the second once the test sets the server's
    ``release`` event; ``&unwaited`` also leaves out the head's wait for the first screen's tables, as the
    build wrote the page before."""

    def log_message(self, format, *args):
        pass

    def do_GET(self):
        path, _, query = self.path.partition("?")
        if "slow" not in query.split("&"):
            return super().do_GET()
        page = Path(self.translate_path(path)).read_text(encoding="utf-8")
        if "unwaited" in query.split("&"):
            page = page.replace(FIRST_SCREEN_WAIT, "")
        data = page.encode("utf-8")
        cut = data.index(b"<tbody")
        for _ in range(int(dict(q.partition("=")[::2] for q in query.split("&")).get("rows", 1))):
            cut = data.index(b"</tr>", cut) + len(b"</tr>")
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[:cut])
        self.wfile.flush()
        self.server.release.wait(timeout=60)
        self.wfile.write(data[cut:])


#: Whether the page has drawn anything yet (its first contentful paint).
FIRST_PAINTED = "() => performance.getEntriesByType('paint').some(e => e.name === 'first-contentful-paint')"
#: The widths of the first table's columns (its first row's cells), in CSS px; null before it is parsed.
FIRST_TABLE_COLUMNS = """() => { const row = document.querySelector('table tr');
  return row && [...row.children].map(cell => Math.round(cell.getBoundingClientRect().width)); }"""


def slow_page_load(browser, httpd, url: str) -> dict:  # noqa: F811
    """Loads ``url`` (served by ``_SlowPageHandler`` from ``httpd``) at 1280x900, the second part sent 800 ms
    after the first. Returns its layout shift until loaded (``shift``), whether it was drawn before the second
    part was sent (``drawn``), and its first table's column widths then and once loaded (``columns``)."""
    from test_browser import _measure_math

    measure = _measure_math()
    httpd.release = threading.Event()
    context = browser.new_context(viewport={"width": 1280, "height": 900}, service_workers="block")
    context.add_init_script(measure.PERF_OBSERVER)
    try:
        page = context.new_page()
        page.goto(url, wait_until="commit")
        page.wait_for_function("() => document.querySelector('tbody tr')", polling=50, timeout=30_000)
        page.wait_for_timeout(800)
        drawn, first = page.evaluate(FIRST_PAINTED), page.evaluate(FIRST_TABLE_COLUMNS)
        httpd.release.set()
        page.wait_for_load_state("load")
        page.wait_for_timeout(300)
        shift = page.evaluate(measure.PERF_FACTS, measure.MATH_SCRIPT)["cls"]
        return {"shift": shift, "drawn": drawn, "columns": (first, page.evaluate(FIRST_TABLE_COLUMNS))}
    finally:
        httpd.release.set()
        context.close()


@pytest.mark.parametrize("edition", list(EDITIONS))
def test_a_table_on_the_first_screen_is_drawn_whole(edition, browser):  # noqa: F811
    """The notation page begins with a table: the page is first drawn once that table is parsed whole.

    A table's columns are as wide as its widest cells, rows not parsed yet included: on a busy machine
    the page was drawn with half a table, whose columns moved when the rest arrived (layout shift up to
    0.08 at 1280 px, 0.15 on a slowed phone; ``_ext/mha_book.wait_for_first_tables``)."""
    handler = functools.partial(_SlowPageHandler, directory=str(BUILD))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/{EDITIONS[edition]}/book/notation.html?slow&rows=6"
    try:
        waited, unwaited = slow_page_load(browser, httpd, url), slow_page_load(browser, httpd, url + "&unwaited")
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert not waited["drawn"], f"{url}: the page was drawn before its first table was whole"
    assert waited["shift"] < MAX_LAYOUT_SHIFT / 10, (
        f"{url}: the page shifts {waited['shift']} as its first table arrives"
    )
    # Not vacuous: without the wait, the page is drawn from the first part, whose table has other columns
    # than the whole one (here 82, 403, 113, 89 px against 82, 370, 137, 99): that page shifted 0.066
    # (0.085 in Chinese) when the rest arrived. The shift itself is not asserted: in CI and here it was
    # sometimes reported as 0.0001-0.0002, the frame drawn from the first part not always being the one
    # the rest moved.
    before, after = unwaited["columns"]
    assert unwaited["drawn"], f"{url}: without the wait, the page was not drawn from its first part"
    assert max(abs(a - b) for a, b in zip(before, after)) >= 10, f"{url}: the first part has the columns {after}"


@pytest.mark.parametrize("edition", list(EDITIONS))
def test_every_image_of_the_built_book_has_its_files_size(edition):
    folder = BUILD / EDITIONS[edition]
    pages = built_pages(edition)
    checked, wrong = 0, []
    for page in pages:
        for tag in re.findall(r"<img\b[^>]*>", page.read_text(encoding="utf-8")):
            src = re.search(r'\ssrc="([^"]*)"', tag).group(1)
            if src.startswith("data:") or "mha-explorer-frame" in tag:  # sized by the explorer (mha.viz.widgets)
                assert re.search(r'\swidth="\d+"', tag) and re.search(r'\sheight="\d+"', tag), tag[:120]
                continue
            width, height = (re.search(rf'\s{name}="(\d+)"', tag) for name in ("width", "height"))
            size = image_size((page.parent / src).resolve())
            if width is None or height is None or size is None:
                wrong.append(f"{page.relative_to(folder)}: {tag[:80]}... has no size ({size})")
            elif abs(int(width.group(1)) * size[1] - int(height.group(1)) * size[0]) > size[0] + size[1]:
                wrong.append(f"{page.relative_to(folder)}: {src} is {size}, written {width.group(1)}x{height.group(1)}")
            checked += 1
    assert not wrong, f"{len(wrong)} of {checked} images without their own size: {wrong[:5]}"
    assert checked >= 60  # not vacuous: the chapters' figures and the logos


@pytest.mark.parametrize("edition", list(EDITIONS))
def test_only_pages_with_a_table_on_their_first_screen_wait(edition):
    folder = BUILD / EDITIONS[edition]
    pages = {str(p.relative_to(folder)): p.read_text(encoding="utf-8") for p in built_pages(edition)}
    waiting = sorted(name for name, page in pages.items() if FIRST_SCREEN_WAIT in page)
    assert waiting == ["book/07_where_next.html", "book/notation.html"]  # their first tables are on the first screen
    for name in waiting:
        head, _, body = pages[name].partition("</head>")
        assert FIRST_SCREEN_WAIT in head and body.count(FIRST_SCREEN_END) == 1
