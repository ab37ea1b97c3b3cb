"""The book reads well on every screen and to every reader, in both editions.

For every page of the table of contents, from one visit (``test_browser.book_page``, which opens
each page once for all the browser checks; see ``browser_reading.py`` for what is measured):

* on a phone (390x844) no page is wider than the window, and the visible navigation button opens
  the table of contents (click and keyboard); on a desktop it collapses the sidebar;
* axe-core (WCAG 2.1 A/AA) finds no critical or serious violation, in light and in dark mode
  (the code cells' colour contrast is computed by the test instead: see ``browser_reading.py``);
* no formula is a Tab stop, except one too wide for its box (it scrolls, so the keyboard must
  reach it), and nothing inside a formula is (KaTeX's HTML is hidden from screen readers);
* every explorer echoes the value a control shows, in the page's language;
* a page loads no FontAwesome script, only a few kilobytes of its icons.

And the Chinese edition's search finds 注意力 ("attention") on every chapter that uses the word.
Screenshots of every page (desktop and phone, light and dark) are in ``_build/screenshots/``;
``_build/screenshots/reading.json`` keeps the numbers (axe findings of every impact, page weight,
seconds per page).
"""

from __future__ import annotations

import json
import re
import time

import pytest
from browser_reading import FAILING_IMPACTS, PHONE
from test_browser import BUILD, EDITIONS, ROOT, SCREENSHOTS, book_page, browser, server, toc_pages  # noqa: F401

PAGES = toc_pages()
#: FontAwesome a page may load: its icons' web font cut to the glyphs the book uses (3 kB); the
#: whole font was 156 kB and the script that came with it 1.45 MB.
ICON_BUDGET = 10_000
SUMMARY: dict[str, dict] = {}


@pytest.fixture(scope="module", autouse=True)
def summary():
    """Writes what the tests measured to _build/screenshots/reading.json (CI keeps that folder)."""
    started = time.perf_counter()
    yield SUMMARY
    SUMMARY["_seconds"] = round(time.perf_counter() - started, 1)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    (SCREENSHOTS / "reading.json").write_text(json.dumps(SUMMARY, indent=1, ensure_ascii=False), encoding="utf-8")


def page_facts(browser, server, edition, page_name) -> dict:  # noqa: F811 (pytest fixtures)
    facts = book_page(browser, server, edition, page_name)
    reading, axe = facts["reading"], facts["reading"]["axe"]
    files = [BUILD / path.lstrip("/") for path in facts["loaded"]]
    SUMMARY[f"{edition}/{page_name}"] = {
        "axe": {mode: {rule: [v["impact"], v["nodes"]] for rule, v in found.items()} for mode, found in axe.items()},
        "bytes": sum(f.stat().st_size for f in files if f.is_file()),
        "phoneWidth": reading["phoneWidth"]["width"],
        "formulaStops": {size: f["stops"] for size, f in reading["formulas"].items()},
        "seconds": facts["seconds"],
    }
    return facts


@pytest.mark.parametrize("edition", list(EDITIONS))
@pytest.mark.parametrize("page_name", PAGES)
def test_page_reads_on_a_phone(page_name, edition, server, browser):  # noqa: F811
    reading = page_facts(browser, server, edition, page_name)["reading"]
    width = reading["phoneWidth"]
    assert width["width"] <= PHONE["width"], (
        f"{page_name} ({edition}) is {width['width']} px wide on a {PHONE['width']}-px phone: {width['culprits']}"
    )
    for how, nav in reading["navigation"].items():
        assert nav.get("visibleButtons") == 1, f"{page_name} ({edition}): {nav} navigation buttons visible on a phone"
        assert nav["opened"] and nav["links"] > 5, f"{page_name} ({edition}): the phone navigation did not open ({how})"
        assert nav["closed"], f"{page_name} ({edition}): Escape did not close the phone navigation"
    toggle = reading["desktopToggle"]
    assert toggle.get("collapsed") and toggle.get("restored"), (
        f"{page_name} ({edition}): the desktop sidebar button does not collapse and restore the sidebar: {toggle}"
    )


@pytest.mark.parametrize("mode", ["light", "dark"])
@pytest.mark.parametrize("edition", list(EDITIONS))
@pytest.mark.parametrize("page_name", PAGES)
def test_axe_finds_no_serious_violation(page_name, edition, mode, server, browser):  # noqa: F811
    found = page_facts(browser, server, edition, page_name)["reading"]["axe"][mode]
    failing = {rule: v for rule, v in found.items() if v["impact"] in FAILING_IMPACTS}
    assert not failing, f"{page_name} ({edition}, {mode} mode): axe finds {json.dumps(failing, ensure_ascii=False)}"
    low = page_facts(browser, server, edition, page_name)["reading"]["codeContrast"][mode]
    assert not low, f"{page_name} ({edition}, {mode} mode): code colours below 4.5:1 contrast: {low[:3]}"


@pytest.mark.parametrize("edition", list(EDITIONS))
@pytest.mark.parametrize("page_name", PAGES)
def test_formulas_are_not_tab_stops(page_name, edition, server, browser):  # noqa: F811
    formulas = page_facts(browser, server, edition, page_name)["reading"]["formulas"]
    for size, found in formulas.items():
        assert not found["needless"], (
            f"{page_name} ({edition}, {size}): {len(found['needless'])} of {found['formulas']} formulas are Tab stops: "
            f"{found['needless'][:3]}"
        )
        assert not found["unreachable"], f"{page_name} ({edition}, {size}): formulas that scroll out of keyboard reach"
        assert not found["overhangs"], (
            f"{page_name} ({edition}, {size}): {len(found['overhangs'])} formulas scroll by their overhang "
            f"(a Tab stop and a hairline each): {found['overhangs'][:3]}"
        )
        assert not found["inside"], f"{page_name} ({edition}, {size}): Tab stops inside formulas: {found['inside'][:3]}"
    if page_name == "book/notation":  # not vacuous: a page of formulas, none of them a Tab stop on a desktop
        assert formulas["desktop"]["formulas"] >= 10 and formulas["desktop"]["stops"] <= 1


def test_the_stop_measure_sees_a_formula_that_scrolls_by_its_overhang(browser, tmp_path):  # noqa: F811
    """Not vacuous: an inline formula whose content reaches 2 px past its box (KaTeX's italic
    overhang) is a scroller, and Chromium a Tab stop; the book's padding (mha_book.css) absorbs it."""
    from browser_reading import FORMULA_STOPS
    from test_browser import serve

    css = (ROOT / "_ext" / "static" / "mha_book.css").read_text(encoding="utf-8")
    box = (
        '<span class="math" style="display:inline-block;overflow-x:auto">'
        '<i style="display:inline-block;width:40px;margin-right:-2px;padding-right:4px">f</i></span>'
    )
    (tmp_path / "bare.html").write_text(f"<p>a {box} b</p>", encoding="utf-8")
    (tmp_path / "book.html").write_text(f"<style>{css}</style><p>a {box} b</p>", encoding="utf-8")
    with serve(tmp_path) as url:
        page = browser.new_page()
        try:
            found = {}
            for name in ("bare", "book"):
                page.goto(f"{url}/{name}.html")
                found[name] = page.evaluate(FORMULA_STOPS)
            page.goto(f"{url}/bare.html")
            page.keyboard.press("Tab")
            focused = page.evaluate("() => document.activeElement.className")
        finally:
            page.close()
    assert len(found["bare"]["overhangs"]) == 1 and focused == "math", (found, focused)
    assert found["book"]["overhangs"] == [], found


@pytest.mark.parametrize("edition", list(EDITIONS))
@pytest.mark.parametrize("page_name", PAGES)
def test_explorers_echo_in_the_pages_language(page_name, edition, server, browser):  # noqa: F811
    echoes = page_facts(browser, server, edition, page_name)["echoes"]
    # a slider echoes its value; a dropdown shows its own and has no echo (no repeat)
    wrong = [e for e in echoes if e["echo"] != (None if e["tag"] == "SELECT" else e["shown"])]
    assert not wrong, f"{page_name} ({edition}): explorer controls echo another value than they show: {wrong[:3]}"
    if edition == "zh_CN":
        english = [e for e in echoes if re.fullmatch(r"[A-Za-z ]{3,}", e["echo"] or "")]
        assert not english, f"{page_name}: explorer values echoed in English in the Chinese edition: {english[:3]}"


@pytest.mark.parametrize("edition", list(EDITIONS))
@pytest.mark.parametrize("page_name", PAGES)
def test_page_loads_only_the_icons_it_uses(page_name, edition, server, browser):  # noqa: F811
    loaded = page_facts(browser, server, edition, page_name)["loaded"]
    icons = [path for path in loaded if "fontawesome" in path]
    assert not [path for path in icons if path.endswith(".js")], f"{page_name}: loads FontAwesome's script {icons}"
    size = sum((BUILD / path.lstrip("/")).stat().st_size for path in icons)
    assert size <= ICON_BUDGET, f"{page_name} ({edition}): {size} bytes of FontAwesome ({icons}), budget {ICON_BUDGET}"


def test_every_icon_a_page_draws_is_in_its_font(server, browser):  # noqa: F811
    """The icon font is cut to the glyphs the build found in use: each glyph a page asks for is in it."""
    from fontTools.ttLib import TTFont

    fonts = sorted((BUILD / EDITIONS["en"] / "_static").rglob("fa-solid-900*"))
    assert [f.name for f in fonts] == ["fa-solid-900-subset.woff"], f"FontAwesome's solid font not cut: {fonts}"
    glyphs = set(TTFont(fonts[0]).getBestCmap())
    asked = set()
    for edition in EDITIONS:
        for page_name in PAGES:
            icons = set(page_facts(browser, server, edition, page_name)["reading"]["icons"])
            assert icons <= glyphs, f"{page_name} ({edition}): icons {sorted(map(hex, icons - glyphs))} not in the font"
            asked |= icons
    assert len(asked) >= 6, f"only {sorted(map(hex, asked))}: the icon check sees no icons"


def test_the_chinese_search_finds_attention(server, browser):  # noqa: F811
    """Search the Chinese edition for 注意力: every chapter whose text uses the word is found."""
    folder = EDITIONS["zh_CN"]
    word = "注意力"
    expected = set()
    for page_name in PAGES:
        text = (BUILD / folder / f"{page_name}.html").read_text(encoding="utf-8")
        article = re.sub(r"<[^>]+>", "", text[text.find("<article") : text.find("</article>")])
        if word in article:
            expected.add(page_name)
    assert len(expected) >= 8, f"only {sorted(expected)} use {word}: is the Chinese edition translated?"
    context = browser.new_context(service_workers="block")
    try:
        page = context.new_page()
        page.goto(f"{server}/{folder}/search.html?q={word}", wait_until="load")
        page.wait_for_function(
            "() => /\\d/.test((document.querySelector('#search-results .search-summary') || {}).textContent || '')",
            timeout=30_000,
        )
        links = page.eval_on_selector_all("#search-results ul.search li a", "links => links.map(a => a.href)")
    finally:
        context.close()
    found = {re.sub(r"^.*?/" + re.escape(folder) + r"/(.*)\.html.*$", r"\1", href) for href in links}
    assert expected <= found, f"the search for {word} misses {sorted(expected - found)} (found {sorted(found)})"


def test_the_checks_catch_a_page_that_reads_badly(browser, tmp_path):  # noqa: F811
    """Not vacuous: a page too wide for a phone, with pale code, a formula in the Tab order and a
    button whose name is not its text fails each check."""
    from browser_reading import CODE_CONTRAST, FORMULA_STOPS, WIDTH, run_axe

    (tmp_path / "bad.html").write_text(
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>bad</title>'
        '<meta name="viewport" content="width=device-width"></head><body><main class="bd-main">'
        '<div style="width:600px">wide</div>'
        '<div class="highlight"><pre><span style="color:#bbbbbb">pale = 1</span></pre></div>'
        '<span class="math" tabindex="0"><span class="katex">x</span></span>'
        '<button aria-label="Colour mode">Search</button></main></body></html>',
        encoding="utf-8",
    )
    from test_browser import serve

    context = browser.new_context(viewport=PHONE)
    try:
        page = context.new_page()
        with serve(tmp_path) as url:
            page.goto(f"{url}/bad.html")
            assert page.evaluate(WIDTH)["width"] > PHONE["width"]
            assert [p["text"] for p in page.evaluate(CODE_CONTRAST)] == ["pale = 1"]
            assert page.evaluate(FORMULA_STOPS)["needless"] == ["x"]
            assert run_axe(page)["label-content-name-mismatch"]["impact"] == "serious"
    finally:
        context.close()
