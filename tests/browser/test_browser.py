"""The built book works offline, in both editions: every page in headless Chromium, outside requests refused.

For each page of the table of contents: the math was typeset when the book was built (KaTeX's HTML
and MathML in the page, no raw ``$$``, ``\\(`` or ``\\[`` left; ``test_browser_math.py`` checks
the rest), every image loads, every explorer from ``mha.viz.widgets`` renders
(one per explorer output stored in the notebook, its script ran, its frame loaded, moving its
first control changes the frame), no JavaScript error, and no request left the book. Screenshots
of each page are saved under ``_build/screenshots/`` (the Chinese edition's under
``_build/screenshots/zh_CN/``) for review.

Each page is opened once for all the browser checks (``book_page``): the same visit measures how
the page reads on a phone, in dark mode and to axe (``browser_reading.py``), which
``test_browser_reading.py`` checks.

Both editions are served from ``_build/`` side by side (``html/`` English, ``html-zh/`` Chinese, as
they are published), so that each page's link to the same page in the other edition is followed.
The Chinese pages also declare ``lang="zh-CN"``, read as Chinese (most of their prose is in Chinese
characters) and show the explorers' labels in Chinese.

Needs the built book (``make book``) and Debian's Chromium (``apt-get install chromium``);
without Chromium the test is skipped with that message. ``make test`` builds the book first.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest
from conftest import skip_or_fail

ROOT = Path(__file__).resolve().parents[2]


def _editions() -> dict:
    """``_ext/mha_i18n.EDITIONS``: edition -> (output folder under _build/, the link's name)."""
    sys.path.insert(0, str(ROOT / "_ext"))
    from mha_i18n import EDITIONS as editions

    return editions


BUILD = ROOT / "_build"
HTML = BUILD / "html"
#: Each edition's output folder under _build/ (as the book's extension names them) and where its
#: screenshots go.
EDITIONS = {edition: folder for edition, (folder, _) in _editions().items()}
SCREENSHOTS = BUILD / "screenshots"
SCREENSHOT_DIRS = {"en": SCREENSHOTS, "zh_CN": SCREENSHOTS / "zh_CN"}
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
]
EXPLORER_CLASS = 'class="mha-explorer '


def toc_pages() -> list[str]:
    """Source paths (no suffix) of every page in _toc.yml, in reading order."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    pages = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                pages.append(entry["file"])
            walk(entry.get("sections"))
            walk(entry.get("chapters"))

    walk(toc.get("chapters"))
    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    return [str(Path(p).with_suffix("")) for p in pages]


def chromium_path() -> str | None:
    for candidate in (
        os.environ.get("CHROMIUM"),
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
        "/usr/bin/chromium",
        shutil.which("google-chrome"),
    ):
        if candidate and Path(candidate).exists():
            return candidate
    return None


def expected_explorers(page: str) -> int:
    """Explorer outputs stored in the page's notebook (0 for a Markdown page)."""
    notebook = ROOT / f"{page}.ipynb"
    if not notebook.exists():
        return 0
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    count = 0
    for cell in nb["cells"]:
        for output in cell.get("outputs", []):
            html = output.get("data", {}).get("text/html", "")
            html = "".join(html) if isinstance(html, list) else html
            count += html.count(EXPLORER_CLASS)
    return count


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # keep pytest output clean
        pass


@contextlib.contextmanager
def serve(directory: Path):
    """A local HTTP server for ``directory`` on 127.0.0.1 (a free port); yields its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(scope="module")
def server():
    """Serves _build/ (both editions); yields the base URL."""
    for edition, folder in EDITIONS.items():
        if not (BUILD / folder / "index.html").exists():
            command = "make book" if edition == "en" else "make book-zh"
            skip_or_fail(f"the {edition} edition is not built (_build/{folder}/index.html): run `{command}` first")
    with serve(BUILD) as url:
        yield url


#: Every section drawn from the start, as if each were on the screen. The book leaves a section the
#: reader has not reached undrawn (mha_book.css, content-visibility), and the page checks its boxes
#: (a formula's Tab stop, a table's cue) as each section is drawn; a test that measures the whole page
#: at once measures it as the reader meets each part. test_browser_phone checks the undrawn start.
DRAW_EVERY_SECTION = """document.addEventListener("DOMContentLoaded", () => {
  const style = document.createElement("style");
  style.textContent = ".bd-article section { content-visibility: visible !important; }";
  document.head.append(style);
});"""


class DrawnBrowser:
    """A Chromium whose pages draw every section from the start (``DRAW_EVERY_SECTION``);
    ``.undrawn`` is the browser as a reader has it."""

    def __init__(self, browser):
        self.undrawn = browser

    def __getattr__(self, name):
        return getattr(self.undrawn, name)

    def new_context(self, **options):
        context = self.undrawn.new_context(**options)
        context.add_init_script(DRAW_EVERY_SECTION)
        return context

    def new_page(self, **options):
        page = self.undrawn.new_page(**options)
        page.context.add_init_script(DRAW_EVERY_SECTION)
        return page


@pytest.fixture(scope="module")
def browser():
    executable = chromium_path()
    if executable is None:
        skip_or_fail(
            "Chromium not found, so the offline browser test is skipped. Install it with "
            "`sudo apt-get update && sudo apt-get install -y chromium` (Debian/Ubuntu), "
            "or point CHROMIUM=/path/to/chromium at one; then re-run `make test`."
        )
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed: make install")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS)
        yield DrawnBrowser(browser)
        browser.close()


def _measure_math():
    """scripts/measure_math.py: what the math costs a page (long tasks, layout shift, math scripts)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import measure_math

    return measure_math


def _typeset(page) -> None:
    """The math is in the page as built (KaTeX); wait for the fonts it uses, as a reader's browser does."""
    page.evaluate("() => document.fonts.ready.then(() => true)")


RAW_TEX = r"""() => {
  const skip = new Set(["PRE", "CODE", "SCRIPT", "STYLE", "ANNOTATION", "TEXTAREA"]);
  const main = document.querySelector("main") || document.body;
  const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT);
  const found = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    let el = node.parentElement, skipped = false;
    for (; el; el = el.parentElement) {
      if (skip.has(el.tagName) || el.classList.contains("highlight") || el.classList.contains("output")) {
        skipped = true; break;
      }
    }
    if (skipped) continue;
    const text = node.textContent;
    if (text.includes("$$") || text.includes("\\(") || text.includes("\\[")) found.push(text.trim().slice(0, 80));
  }
  return found;
}"""

PAGE_FACTS = r"""() => {
  const maths = Array.from(document.querySelectorAll("main .math"));
  const images = Array.from(document.querySelectorAll("img"));
  const prose = Array.from(document.querySelectorAll("main p, main li, main h1, main h2, main h3, main dd, main td"))
    .filter(e => !e.closest("pre, code, .output, .cell_output, figure.mha-explorer, .math, .bibliography"))
    .map(e => {  // the prose without its formulas (KaTeX's spans and MathML hold letters and TeX)
      const copy = e.cloneNode(true);
      copy.querySelectorAll(".math, .katex, .katex-display").forEach(m => m.remove());
      return copy.textContent.replace(/\$[^$]*\$/g, "");
    }).join(" ");
  const other = document.querySelector("p.mha-other-edition a");
  return {
    lang: document.documentElement.getAttribute("lang"),
    otherEdition: other ? other.href : null,
    hanChars: (prose.match(/[\u4e00-\u9fff]/g) || []).length,
    latinWords: (prose.match(/[A-Za-z]{3,}/g) || []).length,
    explorerText: Array.from(document.querySelectorAll("figure.mha-explorer figcaption, figure.mha-explorer label"))
      .map(e => e.textContent).join(" | "),
    math: maths.length,
    // typeset: KaTeX's HTML for the eye and its MathML (with the TeX) for a screen reader
    mathTypeset: maths.filter(m => m.querySelector(".katex .katex-html[aria-hidden=true]")
      && m.querySelector(".katex .katex-mathml math annotation")).length,
    katexErrors: Array.from(document.querySelectorAll(".katex-error")).map(e => e.textContent.slice(0, 80)),
    // what a formula shows (not its TeX): a backslash there is TeX that was not read ("concat\_lowrank")
    backslashes: Array.from(document.querySelectorAll(".katex-html")).map(e => e.textContent)
      .filter(text => text.includes("\\")).map(text => text.slice(0, 60)),
    // the stylesheets that hold KaTeX's rules (the build merges a page's sheets into one: mha_speed.py)
    mathStyles: Array.from(document.styleSheets).filter(sheet => {
      try { return Array.from(sheet.cssRules).some(r => /\.katex[ ,.{>-]/.test(r.cssText)); }
      catch (e) { return false; }
    }).map(sheet => sheet.href),
    brokenImages: images.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute("src").slice(0, 80)),
    images: images.length,
    widgetViews: document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]').length,
    explorers: Array.from(document.querySelectorAll("figure.mha-explorer")).map(f => ({
      id: f.id,
      ready: f.getAttribute("data-ready") === "1",
      controls: f.querySelectorAll("[data-mha-control]").length,
      frameLoaded: (() => { const i = f.querySelector("img.mha-explorer-frame");
                           return !!i && i.complete && i.naturalWidth > 0; })(),
    })),
  };
}"""

#: Code blocks and text outputs wider than their box at 1280 px (none may scroll sideways),
#: every folded box opened first (a hidden cell's code, a dropdown's listing): the first 60 characters
#: of each one's widest line, with its box and content widths.
WIDE_BLOCKS = r"""() => {
  for (const d of document.querySelectorAll("main details")) d.open = true;
  for (const e of document.querySelectorAll("main .toggle-hidden")) e.classList.remove("toggle-hidden");
  for (const e of document.querySelectorAll("main .toggle-details__container")) e.style.display = "block";
  const wide = [];
  for (const pre of document.querySelectorAll("main pre")) {
    if (pre.closest("figure.mha-explorer") || pre.clientWidth === 0) continue;
    if (pre.scrollWidth > pre.clientWidth + 1) {
      const widest = pre.textContent.split("\n").reduce((a, b) => (b.length > a.length ? b : a), "");
      wide.push({line: widest.slice(0, 60), chars: widest.length, box: pre.clientWidth, content: pre.scrollWidth});
    }
  }
  return wide;
}"""

#: Every image the page loads lazily (below its first screen, _ext/mha_speed.py) asked for now, so that
#: the checks below see each one loaded or broken; resolves when all have loaded or failed.
LOAD_LAZY_IMAGES = r"""() => Promise.all(Array.from(document.querySelectorAll("img")).map(img => {
  img.loading = "eager";
  return img.complete ? null : new Promise(done => { img.addEventListener("load", done);
                                                      img.addEventListener("error", done); });
}))"""

#: Punctuation right after an inline formula that starts a line (a formula is an
#: unbreakable box, and a comma or a full-width 。 was left alone at the next line's start), and how
#: many such places were looked at.
PUNCTUATION_LINE_STARTS = r"""() => {
  const closing = /^[,.;:!?)\]}%\u2019\u201d\uff0c\u3002\uff1a\uff1b\uff09\u3001\uff01\uff1f\u300d\u300f\u300b\u3011]/;
  const found = {checked: 0, starts: []};
  for (const math of document.querySelectorAll("main span.math")) {
    const next = math.nextSibling;
    if (!next || next.nodeType !== 3 || !closing.test(next.data) || !math.getClientRects().length) continue;
    found.checked++;
    const range = document.createRange();
    range.setStart(next, 0);
    range.setEnd(next, 1);
    const mark = range.getBoundingClientRect(), box = math.getBoundingClientRect();
    if (mark.top >= box.bottom - 2 && mark.left < box.left) {
      const tex = (math.querySelector("annotation") || math).textContent.slice(0, 30);
      found.starts.push(tex + " | " + next.data.slice(0, 8));
    }
  }
  return found;
}"""

#: A math engine's global, which a page that typesets in the browser defines.
MATH_GLOBALS = "() => ['MathJax', 'katex', 'renderMathInElement'].filter(name => name in window)"

MOVE_FIRST_CONTROL = r"""(id) => {
  const root = document.getElementById(id);
  const control = root.querySelector("[data-mha-control]");
  const img = root.querySelector("img.mha-explorer-frame");
  const before = root.getAttribute("data-frame") + "|" + img.alt;
  const options = control.tagName === "SELECT" ? control.options.length : parseInt(control.max, 10) + 1;
  if (options < 2) return {changed: true, single: true};
  // to its last value, or to its first when it opens on its last (a slider growing to the right)
  control.value = String(control.value === String(options - 1) ? 0 : options - 1);
  control.dispatchEvent(new Event("input", {bubbles: true}));
  const after = root.getAttribute("data-frame") + "|" + img.alt;
  return {changed: before !== after, before, after};
}"""


#: After the first control of each explorer moved: what each control echoes (its ``<output>``, a
#: live region a screen reader announces) next to what it shows (a dropdown's chosen option, a
#: slider's aria-valuetext). They must agree, in the reader's language.
ECHOES = r"""() => Array.from(document.querySelectorAll("figure.mha-explorer [data-mha-control]")).map(c => {
  const echo = document.getElementById(c.id + "-value");
  const shown = c.tagName === "SELECT" ? c.options[c.selectedIndex].text : c.getAttribute("aria-valuetext");
  return {id: c.id, tag: c.tagName, shown: shown, echo: echo ? echo.textContent : null};
})"""


def refuse_outside(context, host: str, requested: list | None = None) -> list[str]:
    """Lets ``context`` load only from ``host`` (and data: or blob: URLs); returns the list of what it refused.

    ``requested``, when given, also gets every URL asked for."""
    refused = []

    def route(request_route):
        target = request_route.request.url
        if requested is not None:
            requested.append(target)
        if urlparse(target).scheme in ("data", "blob") or urlparse(target).netloc == host:
            request_route.continue_()
        else:
            refused.append(target)
            request_route.abort("blockedbyclient")

    context.route("**/*", route)
    return refused


def visit(browser, url: str, screenshot: Path | None = None, reading: dict | None = None) -> dict:
    """Open ``url`` with every request outside its host refused; return what the page did.

    With ``reading`` (screenshot paths: ``dark``, ``phone``, ``phone-dark``), also how the page reads
    on a phone, in dark mode and to axe (``browser_reading.read_page``), in the same open page.
    """
    failed, errors, loaded = [], [], []
    context = browser.new_context(viewport={"width": 1280, "height": 900}, service_workers="block")
    measure_math = _measure_math()
    context.add_init_script(measure_math.PERF_OBSERVER)  # long tasks and layout shifts from the start
    host = urlparse(url).netloc
    refused = refuse_outside(context, host)
    page = context.new_page()
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("requestfailed", lambda req: _broken(req, host) and failed.append(f"{req.url} ({req.failure})"))
    page.on("response", lambda resp: resp.status >= 400 and failed.append(f"{resp.url} (HTTP {resp.status})"))
    page.on("requestfinished", lambda req: urlparse(req.url).netloc == host and loaded.append(urlparse(req.url).path))
    try:
        page.goto(url, wait_until="load")
        _typeset(page)
        page.evaluate(LOAD_LAZY_IMAGES)
        page.wait_for_load_state("networkidle")
        facts = page.evaluate(PAGE_FACTS)
        facts["mathPerf"] = page.evaluate(measure_math.PERF_FACTS, measure_math.MATH_SCRIPT)
        facts["mathGlobals"] = page.evaluate(MATH_GLOBALS)
        facts["rawTex"] = page.evaluate(RAW_TEX)
        facts["punctuation"] = page.evaluate(PUNCTUATION_LINE_STARTS)
        facts["moved"] = [page.evaluate(MOVE_FIRST_CONTROL, e["id"]) for e in facts["explorers"]]
        facts["echoes"] = page.evaluate(ECHOES)
        if screenshot is not None:
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.evaluate("() => window.scrollTo(0, 0)")
            page.screenshot(path=str(screenshot), full_page=True)
        # What the page itself requested; axe (below) fetches the stylesheets again to read them and
        # resolves theme.css's @import "../basic.css" against the page, not the sheet: a 404 of axe's.
        facts.update(failed=list(failed), loaded=sorted(set(loaded)))
        if reading is not None:
            from browser_reading import read_page

            facts["reading"] = read_page(page, reading)
        page.set_viewport_size({"width": 1280, "height": 900})
        facts["wideBlocks"] = page.evaluate(WIDE_BLOCKS)
    finally:
        context.close()
    facts.update(refused=refused, errors=errors)
    facts.setdefault("failed", failed)
    return facts


#: Each page of each edition is opened once (``book_page``); every browser test reads its facts.
_VISITS: dict[tuple[str, str], dict] = {}


def _broken(request, host: str) -> bool:
    """A request of the book's that failed, but for a phone rendering the browser began and then
    dropped (``net::ERR_ABORTED``): a figure's ``<source media>`` stops matching when the page is
    measured at another size, and the browser cancels the file it no longer shows (a fresh CI run saw
    it once, on one page). Every image the page shows must still load (``PAGE_FACTS``), and a phone
    rendering that is missing (404) still fails."""
    if urlparse(request.url).netloc != host:
        return False
    return not ("/_images/phone/" in request.url and request.failure == "net::ERR_ABORTED")


def book_page(browser, server: str, edition: str, page_name: str) -> dict:
    """What ``visit`` found on ``page_name`` of ``edition`` (opened on first use, with every screenshot)."""
    key = (edition, page_name)
    if key not in _VISITS:
        folder, shots = EDITIONS[edition], SCREENSHOT_DIRS[edition]
        name = Path(page_name).name
        reading = {mode: shots / f"{name}-{mode}.png" for mode in ("dark", "phone", "phone-dark")}
        started = time.perf_counter()
        facts = visit(browser, f"{server}/{folder}/{page_name}.html", shots / f"{name}.png", reading)
        facts["seconds"] = round(time.perf_counter() - started, 2)
        facts["server"] = server
        _VISITS[key] = facts
    return _VISITS[key]


@pytest.mark.parametrize("edition", list(EDITIONS))
@pytest.mark.parametrize("page_name", toc_pages())
def test_page_works_offline(page_name, edition, server, browser):
    folder = EDITIONS[edition]
    html_path = BUILD / folder / f"{page_name}.html"
    assert html_path.exists(), f"{html_path} missing: is {page_name} in _toc.yml but not built?"
    facts = book_page(browser, server, edition, page_name)
    refused, failed, errors, raw_tex, moved = (facts[k] for k in ("refused", "failed", "errors", "rawTex", "moved"))

    assert not refused, f"{page_name}: requests left the book: {refused}"
    assert not failed, f"{page_name}: requests failed: {failed}"
    assert not errors, f"{page_name}: JavaScript errors: {errors}"
    assert facts["mathTypeset"] == facts["math"], (
        f"{page_name}: {facts['math'] - facts['mathTypeset']} of {facts['math']} math elements not typeset"
    )
    assert not raw_tex, f"{page_name}: raw TeX left on the page: {raw_tex[:5]}"
    if page_name == "book/notation":  # the math check is not vacuous: this page is mostly math
        assert facts["math"] >= 10, f"{page_name}: only {facts['math']} math elements found"
    assert not facts["brokenImages"], f"{page_name}: images that did not load: {facts['brokenImages']}"
    assert not facts["wideBlocks"], (
        f"{page_name}: {len(facts['wideBlocks'])} code blocks or outputs scroll sideways at 1280 px "
        f"(a line is at most 74 characters): {facts['wideBlocks'][:3]}"
    )
    assert facts["widgetViews"] == 0, f"{page_name}: widget views instead of the explorers' HTML"
    assert len(facts["explorers"]) == expected_explorers(page_name), (
        f"{page_name}: {len(facts['explorers'])} explorers on the page, "
        f"{expected_explorers(page_name)} stored in the notebook"
    )
    for explorer, move in zip(facts["explorers"], moved):
        assert explorer["ready"], f"{page_name}: explorer {explorer['id']} script did not run"
        assert explorer["controls"] >= 1, f"{page_name}: explorer {explorer['id']} has no control"
        assert explorer["frameLoaded"], f"{page_name}: explorer {explorer['id']} frame did not load"
        assert move["changed"], f"{page_name}: moving explorer {explorer['id']}'s first control changed nothing"

    other = "zh_CN" if edition == "en" else "en"
    expected = f"{facts['server']}/{EDITIONS[other]}/{page_name}.html"
    assert facts["otherEdition"] == expected, (
        f"{page_name} ({edition}): link to the other edition is {facts['otherEdition']}"
    )
    assert (BUILD / EDITIONS[other] / f"{page_name}.html").is_file(), f"{page_name} ({edition}): {expected} is missing"
    if edition == "en":
        assert facts["lang"] == "en"
        assert facts["hanChars"] < facts["latinWords"], f"{page_name}: the English page reads as Chinese"
    else:
        assert facts["lang"] == "zh-CN", f"{page_name}: <html lang={facts['lang']!r}>, expected zh-CN"
        # Chinese prose: Han characters outnumber the English words left (names, code words, table
        # headers the code prints) several times over; measured: 8.9 to 28 on a translated page,
        # at most 0.27 on an English one (the glossary, which gives every term's Chinese form).
        assert facts["hanChars"] > 5 * facts["latinWords"] or page_name == "book/references", (
            f"{page_name}: {facts['hanChars']} Han characters, {facts['latinWords']} English words: untranslated?"
        )
        if facts["explorers"]:
            assert "预先计算" in facts["explorerText"], (
                f"{page_name}: explorer labels not translated: {facts['explorerText'][:200]}"
            )


@pytest.mark.parametrize("edition", list(EDITIONS))
@pytest.mark.parametrize("page_name", toc_pages())
def test_no_line_starts_with_the_punctuation_after_a_formula(page_name, edition, server, browser):
    """At 1280 px (the phone's 390 px: tests/browser/test_browser_phone.py), in both editions."""
    found = book_page(browser, server, edition, page_name)["punctuation"]
    assert not found["starts"], f"{page_name} ({edition}): lines that start with punctuation: {found['starts'][:3]}"
    if page_name == "book/05_parameter_analysis":  # not vacuous: formulas followed by punctuation
        assert found["checked"] >= 10, found


def test_the_punctuation_measure_sees_a_stranded_comma(browser, tmp_path):
    """Not vacuous: a formula that ends 1 px before its line's end leaves the comma after it at the
    next line's start, unless the two are bound (the second paragraph, as the build binds them)."""
    formula = '<span class="math" style="display:inline-flex">x</span>'
    (tmp_path / "p.html").write_text(
        f'<main><p style="width:200px;font:16px sans-serif">aa {formula}, bbbb</p>'
        f'<p style="width:200px;font:16px sans-serif">aa <span style="white-space:nowrap">{formula},</span> b</p>'
        "</main><script>for (const m of document.querySelectorAll('.math')) {"
        "  const p = m.closest('p').getBoundingClientRect();"
        "  m.style.width = (p.right - m.getBoundingClientRect().left - 1) + 'px'; }</script>",
        encoding="utf-8",
    )
    with serve(tmp_path) as url:
        page = browser.new_page()
        try:
            page.goto(f"{url}/p.html")
            found = page.evaluate(PUNCTUATION_LINE_STARTS)
        finally:
            page.close()
    assert found["checked"] == 2 and len(found["starts"]) == 1, found


def test_book_has_a_page_with_math_and_an_explorer():
    """The checks above are not vacuous: the book has math and at least one explorer."""
    pages = toc_pages()
    assert "book/notation" in pages and "book/01_single_head_limits" in pages
    assert expected_explorers("book/01_single_head_limits") >= 1


def test_the_harness_catches_outside_requests_and_raw_tex(browser, tmp_path):
    """A page that loads a script and an image from elsewhere, and shows untypeset math, fails."""
    (tmp_path / "bad.html").write_text(
        "<html><body><main><p>Raw math: $$x^2$$</p>"
        '<img src="https://example.org/logo.png">'
        '<script src="https://cdn.example.org/embed-amd.js"></script>'
        '<details><summary>folded</summary><pre style="width: 300px; overflow: auto">'
        + "x = 1  # " * 20
        + '</pre></details><pre style="width: 300px">fits</pre></main></body></html>',
        encoding="utf-8",
    )
    with serve(tmp_path) as url:
        facts = visit(browser, f"{url}/bad.html")
    assert sorted(facts["refused"]) == ["https://cdn.example.org/embed-amd.js", "https://example.org/logo.png"]
    assert facts["rawTex"] == ["Raw math: $$x^2$$"]
    assert len(facts["brokenImages"]) == 1
    assert [block["chars"] for block in facts["wideBlocks"]] == [180]  # found inside a closed fold


#: The built book must stay small enough to download and host anywhere (it was once 39 MB,
#: 24 MB of it the whole MathJax distribution; now the math is typeset when the book is built, and
#: the pages load only KaTeX's CSS and its WOFF2 fonts).
BOOK_BUDGET_MB = 20
#: KaTeX's CSS and its 20 WOFF2 fonts: 0.3 MB (MathJax's script, fonts and extensions took 3 MB).
MATH_ASSETS_BUDGET = 2**20
#: The pretrained-heads chapter's model for the reader's browser and its runtime (``_static/live/``), loaded
#: only when the reader asks for it, and so counted apart from the book: 46.3 + 13.6 MB.
LIVE_BUDGET_MB = 65


@pytest.mark.parametrize("edition", list(EDITIONS))
def test_book_fits_its_size_budget(edition):
    html_dir = BUILD / EDITIONS[edition]
    if not (html_dir / "index.html").exists():
        skip_or_fail(f"the {edition} edition is not built ({html_dir / 'index.html'} is missing): run `make test`")
    live = html_dir / "_static" / "live"
    size = sum(p.stat().st_size for p in html_dir.rglob("*") if p.is_file() and live not in p.parents)
    live_size = sum(p.stat().st_size for p in live.rglob("*") if p.is_file())
    assert (live / "model.onnx").is_file(), f"{live} holds no model: chapter 11's own-sentence explorer cannot run"
    assert live_size < LIVE_BUDGET_MB * 2**20, f"the model and its runtime take {live_size / 2**20:.1f} MB"
    katex = html_dir / "_static" / "katex"
    math = sum(p.stat().st_size for p in katex.rglob("*") if p.is_file())
    assert size < BOOK_BUDGET_MB * 2**20, f"the built book is {size / 2**20:.1f} MB (budget {BOOK_BUDGET_MB} MB)"
    assert (katex / "katex.min.css").is_file() and list(katex.glob("fonts/*.woff2")), (
        f"no KaTeX CSS or fonts in {katex}"
    )
    assert not (html_dir / "_static" / "mathjax").exists(), "MathJax is still in the book"
    assert not list(katex.rglob("*.js")), "KaTeX's JavaScript is in the book: the pages need only its CSS and fonts"
    assert math < MATH_ASSETS_BUDGET, f"KaTeX's assets take {math / 2**20:.1f} MB: copy only the CSS and WOFF2 fonts"
