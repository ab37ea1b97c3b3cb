"""The built book on a phone, in dark mode and on its search page, as a reader sees it, in both editions.

Every page of the table of contents is opened in headless Chromium at 390 x 844, a first visit
(nothing stored), and checked for:

* **nothing cut off**: no element whose content is wider than its box and cut (its own overflow
  hidden, or spilling past a box that hides it) without a box around it that scrolls; math
  (``.math``, ``.katex``, ``mjx-container``) is left to the math tests;
* **tables that scroll say so**: a table wider than the column scrolls inside its box, which shows
  "Scroll sideways →" (滑动 in Chinese) above its right corner and fades its right edge;
* **code names wrap at their seams**: an inline code name breaks a line only after ``_``, ``.``,
  ``/``, ``(``, ``,`` or ``=``, at a space or between the words of a CamelCase name, never inside
  a word ("batc/h_siz/e");
* **figures legible or one tap from full size**: each figure output and explorer frame has its
  smallest text at 9 CSS px or more, or it opens at full size with one tap (a link to its image; an
  explorer frame that enlarges itself) and says so under it ("Tap to enlarge", 点按放大);
* **explorers**: no dropdown repeats its value beside it; in dark mode every slider's thumb and
  filled track stand out from the card they sit on by 3:1 or more, measured from the pixels
  Chromium draws;
* **the console**: no "Got invalid theme mode" on a first visit.

The search page, in both editions: one hit per page, the chapters before every other page,
summaries in plain text (no backslash-TeX), and the magnifier clear of the query. Harness tests
show that each measure fails on the defect it guards against.

Needs the built book (``make book``, ``make book-zh``) and Chromium, like ``tests/browser/test_browser.py``.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from test_browser import EDITIONS, LOAD_LAZY_IMAGES, PUNCTUATION_LINE_STARTS, ROOT, serve, toc_pages
from test_browser import browser as browser  # noqa: F401  (the fixtures, shared)
from test_browser import server as server  # noqa: F401
from test_browser_figures import stored_figure_metadata

from mha.viz import describe

PAGES = toc_pages()
PHONE = {"width": 390, "height": 844}
#: What the book's script and styles say, per edition (_ext/static/mha_book.js, mha_book.css).
SCROLL_CUE = {"en": "Scroll sideways →", "zh_CN": "左右滑动查看 →"}
FRAME_CUE = {"en": "Tap the figure to enlarge it, again to fit it", "zh_CN": "点按图片放大，再点按缩回"}
#: A control's thumb and filled track against the card behind it (WCAG 1.4.11, non-text contrast).
MIN_CONTROL_CONTRAST = 3.0
#: What each search looks for, per edition, and how many chapters it must find at least.
QUERIES = {"en": ("attention", 8), "zh_CN": ("注意力", 8)}
CHAPTER = re.compile(r"(^|/)\d+_[^/]*$")
RAW_TEX = re.compile(r"\\[A-Za-z()\[\]{}]")

#: Elements cut off on the page (content wider than a box that hides it, no scrolling box around),
#: scrolling boxes that hold a table (with the cue they show) and inline code broken inside a word.
PHONE_FACTS = r"""() => {
  const main = document.querySelector("main") || document.body;
  const skip = el => el.closest(".math, .katex, mjx-container, math, figure.mha-explorer, pre, .highlight");
  const style = el => getComputedStyle(el);
  const scrolls = el => ["auto", "scroll"].includes(style(el).overflowX);
  const hides = el => ["hidden", "clip"].includes(style(el).overflowX);
  const scrollingAncestor = el => {
    for (let a = el.parentElement; a && a !== document.documentElement; a = a.parentElement) if (scrolls(a)) return a;
    return null;
  };
  const describe = el => ({tag: el.tagName.toLowerCase(), cls: String(el.className).slice(0, 50),
                           box: el.clientWidth, content: el.scrollWidth, text: el.textContent.trim().slice(0, 60)});
  const cut = [];
  for (const el of main.querySelectorAll("*")) {
    if (skip(el) || el.clientWidth === 0 || scrolls(el) || el.scrollWidth <= el.clientWidth + 1) continue;
    if (scrollingAncestor(el)) continue;
    // Where its content (text and boxes) ends: cut if its own box hides what lies past its edge,
    // or if a box around it hides it there.
    const range = document.createRange();
    range.selectNodeContents(el);
    const right = range.getBoundingClientRect().right;
    let cutBy = hides(el) && right > el.getBoundingClientRect().right + 1 ? el : null;
    for (let a = el.parentElement; !cutBy && a && a !== document.documentElement; a = a.parentElement) {
      if (hides(a) && a.getBoundingClientRect().right < right - 1) cutBy = a;
    }
    if (!cutBy && right > document.documentElement.clientWidth + 1) cutBy = document.documentElement;
    if (cutBy) cut.push(describe(el));
  }
  const tables = [];
  for (const table of main.querySelectorAll("table")) {
    if (skip(table)) continue;
    const box = scrollingAncestor(table);
    if (!box || box.scrollWidth <= box.clientWidth + 1) continue;
    const frame = box.parentElement;
    const cue = frame && frame.classList.contains("mha-scroll-frame") ? frame.querySelector(".mha-scroll-cue") : null;
    const cueBox = cue ? cue.getBoundingClientRect() : null;
    tables.push({
      box: box.clientWidth, content: box.scrollWidth, marked: box.classList.contains("mha-scrolls"),
      cue: cue && !cue.hidden && cueBox.width > 0 && cueBox.left >= 0 &&
           cueBox.right <= document.documentElement.clientWidth + 1 ? cue.textContent : null,
      faded: style(box).maskImage !== "none" || style(box).webkitMaskImage !== "none",
      header: table.querySelector("th, td") ? table.querySelector("tr").textContent.trim().slice(0, 60) : "",
    });
  }
  // A line break inside inline code: between two characters whose boxes sit on different lines.
  // (Chinese text, 正确 as a checker prints it, breaks between any two characters: not inside a word)
  const cjk = c => /[\u3000-\u30ff\u4e00-\u9fff\uff00-\uffef]/.test(c);
  const seam = (a, b) => /[_.\/(,=-]/.test(a) || /\s/.test(a) || /\s/.test(b) || (/[a-z]/.test(a) && /[A-Z]/.test(b))
    || cjk(a) || cjk(b);
  const broken = [];
  let codes = 0;
  for (const code of main.querySelectorAll("code")) {
    if (code.closest("pre") || skip(code)) continue;
    codes++;
    const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
    let last = null;
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (let i = 0; i < node.length; i++) {
        const range = document.createRange();
        range.setStart(node, i);
        range.setEnd(node, i + 1);
        const rects = range.getClientRects();
        if (!rects.length) continue;
        const now = {top: rects[0].top, ch: node.data[i]};
        if (last && now.top > last.top + 2 && !seam(last.ch, now.ch)) {
          broken.push(code.textContent.slice(0, 50) + "  (between " + JSON.stringify(last.ch + now.ch) + ")");
        }
        last = now;
      }
    }
  }
  return {cut, tables, broken, codes, pageWidth: document.documentElement.scrollWidth};
}"""

#: Each figure output (a link to its image) and explorer frame: how wide it is drawn and shown, its
#: text size, and the cue under it (the ::after line of its link or frame box, if shown).
FIGURES = r"""() => Array.from(document.querySelectorAll("main img")).filter(img =>
    img.closest("a.image-reference") || img.classList.contains("mha-explorer-frame")).map(img => {
  const holder = img.classList.contains("mha-explorer-frame") ? img.parentElement : img.closest("a.image-reference");
  const after = getComputedStyle(holder, "::after");
  const visible = after.display !== "none" && after.visibility === "visible" && after.content !== "none";
  return {
    file: img.classList.contains("mha-explorer-frame") ? null : img.currentSrc.split("/").pop(),
    phone: img.currentSrc.includes("/_images/phone/"),
    explorer: img.classList.contains("mha-explorer-frame"),
    id: img.closest("figure.mha-explorer") ? img.closest("figure.mha-explorer").id : null,
    href: holder.tagName === "A" ? holder.getAttribute("href") : null,
    natural: img.naturalWidth,
    shown: img.getBoundingClientRect().width,
    dpi: parseFloat(img.dataset.dpi || "0"),
    textPt: parseFloat(img.dataset.textPt || "0"),
    cue: visible ? after.content.replace(/^"|"$/g, "") : null,
    // how far below the image the holder reaches: the cue's line (an inline link's box is its line boxes)
    cueHeight: Math.max(...Array.from(holder.getClientRects()).map(r => r.bottom)) - img.getBoundingClientRect().bottom,
  };
})"""

#: Each checker verdict's output (the build marks it .mha-verdict): its box and its content's width.
VERDICTS = r"""() => Array.from(document.querySelectorAll("main .mha-verdict pre")).map(pre => ({
  box: pre.clientWidth, content: pre.scrollWidth, text: pre.textContent.trim().slice(0, 60),
  // each shape, call's parentheses or backticked code of the verdict (_ext/mha_i18n.py, UNBREAKABLE)
  // that the page shows over two lines (such as "(2, 10,⏎4)" or "H //⏎G")
  units: (() => {
    const found = {checked: 0, split: []};
    const unit = /\((?:[^()\n\u2e80-\u9fff\u3000-\u303f\uff00-\uffef]|\([^()\n]*\))*\)|`[^`\n]+`/g;
    for (const node of Array.from(pre.querySelectorAll("*")).concat([pre]).flatMap(e => Array.from(e.childNodes))) {
      if (node.nodeType !== 3) continue;
      for (const match of node.data.matchAll(unit)) {
        // a unit that, with the word it is glued to, is longer than a shape or a short call may break
        const word = (node.data.slice(0, match.index).match(/\S*$/) || [""])[0] + match[0];
        if (!/[\s\u00a0]/.test(match[0]) || word.length > 40) continue;
        found.checked++;
        const range = document.createRange();
        range.setStart(node, match.index);
        range.setEnd(node, match.index + match[0].length);
        const tops = new Set(Array.from(range.getClientRects()).filter(r => r.width > 0).map(r => Math.round(r.top)));
        if (tops.size > 1) found.split.push(match[0]);
      }
    }
    return found;
  })(),
}))"""

#: Per explorer control row with a dropdown: what is visible beside the dropdown (an echo of its value?).
DROPDOWN_ECHOES = r"""() => Array.from(document.querySelectorAll("figure.mha-explorer select")).map(select => {
  const row = select.closest(".mha-explorer-control") || select.parentElement;
  const value = select.options[select.selectedIndex].text.trim();
  const visible = el => el.getClientRects().length > 0 && getComputedStyle(el).visibility === "visible";
  const echoes = Array.from(row.querySelectorAll("output, span, div")).filter(el =>
    el !== select && !el.contains(select) && visible(el) && el.textContent.trim() === value);
  return {id: select.id, value, echoes: echoes.map(e => e.tagName.toLowerCase())};
})"""

#: Every slider of the page, each moved to its middle value: where its thumb and filled track are
#: drawn, and the colour of the card behind it (the first ancestor with a background).
SLIDERS = r"""() => Array.from(document.querySelectorAll("figure.mha-explorer input[type=range]")).map(input => {
  const max = parseInt(input.max, 10);
  input.value = String(Math.ceil(max / 2));
  input.dispatchEvent(new Event("input", {bubbles: true}));
  input.scrollIntoView({block: "center"});
  let card = "rgba(0, 0, 0, 0)";
  for (let a = input.parentElement; a; a = a.parentElement) {
    const bg = getComputedStyle(a).backgroundColor;
    if (bg && !bg.endsWith(", 0)") && bg !== "transparent") { card = bg; break; }
  }
  const box = input.getBoundingClientRect();
  return {id: input.id, fraction: max ? parseInt(input.value, 10) / max : 0, width: box.width, height: box.height,
          card, theme: document.documentElement.dataset.theme};
})"""


def luminance(rgb) -> float:
    def channel(c):
        c = c / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(c) for c in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a, b) -> float:
    la, lb = sorted((luminance(a), luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def parse_rgb(css: str) -> tuple[int, int, int]:
    return tuple(int(float(v)) for v in re.findall(r"[\d.]+", css)[:3])


def slider_contrasts(page, slider: dict) -> dict:
    """The thumb's and the filled track's contrast with the card, from a screenshot of the slider.

    Chromium draws a range input's thumb as a 16-px disc centred at ``8 + (width - 16) * fraction``
    and its filled track as a bar through the middle, from the left end to the thumb: the thumb is
    read at its centre, the track as the median colour of the bar's middle row left of the thumb.
    """
    from PIL import Image

    shot = page.locator(f"#{slider['id']}").screenshot(scale="css")
    image = Image.open(io.BytesIO(shot)).convert("RGB")
    width, height = image.size
    middle = height // 2
    thumb_x = round(8 + (width - 16) * slider["fraction"])
    card = parse_rgb(slider["card"])
    track = sorted(
        (image.getpixel((x, middle)) for x in range(3, max(4, thumb_x - 10))),
        key=luminance,
    )
    return {
        "thumb": round(contrast(image.getpixel((min(width - 1, thumb_x), middle)), card), 2),
        "track": round(contrast(track[len(track) // 2], card), 2) if track else None,
    }


def new_tab(browser, dark: bool = False):  # noqa: F811
    """A first visit at 390 x 844 (nothing stored), with the console's messages collected."""
    context = browser.new_context(viewport=PHONE, color_scheme="dark" if dark else "light", service_workers="block")
    page = context.new_page()
    console = []
    page.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
    return context, page, console


_VISITS: dict[tuple[str, str], dict] = {}


def phone_page(browser, server, edition: str, page_name: str) -> dict:  # noqa: F811
    """What a phone shows of ``page_name`` (opened once for the tests below)."""
    key = (edition, page_name)
    if key not in _VISITS:
        context, page, console = new_tab(browser)
        try:
            page.goto(f"{server}/{EDITIONS[edition]}/{page_name}.html", wait_until="load")
            page.evaluate(LOAD_LAZY_IMAGES)
            page.wait_for_load_state("networkidle")
            facts = page.evaluate(PHONE_FACTS)
            facts["verdicts"] = page.evaluate(VERDICTS)
            facts["punctuation"] = page.evaluate(PUNCTUATION_LINE_STARTS)
            facts["figures"] = page.evaluate(FIGURES)
            facts["dropdowns"] = page.evaluate(DROPDOWN_ECHOES)
            facts["console"] = list(console)
        finally:
            context.close()
        _VISITS[key] = facts
    return _VISITS[key]


@pytest.mark.parametrize("edition", list(EDITIONS))
@pytest.mark.parametrize("page_name", PAGES)
def test_nothing_is_cut_off_on_a_phone(page_name, edition, server, browser):  # noqa: F811
    facts = phone_page(browser, server, edition, page_name)
    assert not facts["cut"], f"{page_name} ({edition}): cut off at 390 px, with no way to scroll: {facts['cut'][:3]}"
    assert facts["pageWidth"] <= PHONE["width"], f"{page_name} ({edition}): the page scrolls sideways"


@pytest.mark.parametrize("edition", list(EDITIONS))
@pytest.mark.parametrize("page_name", PAGES)
def test_a_verdict_wraps_on_a_phone(page_name, edition, server, browser):  # noqa: F811
    """A checker's verdict is read whole at 390 px: its lines wrap, nothing scrolls sideways."""
    verdicts = phone_page(browser, server, edition, page_name)["verdicts"]
    scrolling = [v for v in verdicts if v["content"] > v["box"] + 1]
    assert not scrolling, f"{page_name} ({edition}): {len(scrolling)} verdicts scroll sideways: {scrolling[:2]}"
    if page_name == "book/04_build_it_yourself":  # not vacuous: chapter 4 shows its checkers' verdicts
        assert len(verdicts) >= 6, f"{page_name} ({edition}): only {len(verdicts)} verdicts marked"
    split = [u for v in verdicts for u in v["units"]["split"]]
    assert not split, f"{page_name} ({edition}): shapes or code split over two lines in verdicts: {split[:4]}"
    if page_name == "book/04_build_it_yourself":  # not vacuous: its verdicts name shapes
        assert sum(v["units"]["checked"] for v in verdicts) >= 5, verdicts


@pytest.mark.parametrize("edition", list(EDITIONS))
@pytest.mark.parametrize("page_name", PAGES)
def test_no_line_starts_with_punctuation_on_a_phone(page_name, edition, server, browser):  # noqa: F811
    """The punctuation after an inline formula stays on the formula's line at 390 px."""
    found = phone_page(browser, server, edition, page_name)["punctuation"]
    assert not found["starts"], f"{page_name} ({edition}): lines that start with punctuation: {found['starts'][:3]}"


@pytest.mark.parametrize("edition", list(EDITIONS))
@pytest.mark.parametrize("page_name", PAGES)
def test_a_table_that_scrolls_says_so(page_name, edition, server, browser):  # noqa: F811
    for table in phone_page(browser, server, edition, page_name)["tables"]:
        where = f"{page_name} ({edition}): the table {table['header']!r} ({table['content']} px in {table['box']} px)"
        assert table["marked"], f"{where} scrolls but is not marked as scrolling"
        assert table["cue"] == SCROLL_CUE[edition], f"{where} scrolls with no visible cue (found {table['cue']!r})"
        assert table["faded"], f"{where}: its right edge is not faded"


def test_the_tables_that_were_cut_now_scroll_with_a_cue(server, browser):  # noqa: F811
    """Not vacuous: where next's table and chapter 5's are wider than a phone.

    (Notation's table, which was once cut as well, now fits at 390 px in both editions: its prose
    column is narrow, and nothing of it is cut.)"""
    for edition, page_name in (
        ("en", "book/07_where_next"),
        ("en", "book/05_parameter_analysis"),
        ("zh_CN", "book/05_parameter_analysis"),
    ):
        tables = phone_page(browser, server, edition, page_name)["tables"]
        assert tables, f"{page_name} ({edition}): no table wider than the phone's column (the check sees nothing)"


@pytest.mark.parametrize("edition", list(EDITIONS))
@pytest.mark.parametrize("page_name", PAGES)
def test_code_names_wrap_only_at_their_seams(page_name, edition, server, browser):  # noqa: F811
    facts = phone_page(browser, server, edition, page_name)
    assert not facts["broken"], f"{page_name} ({edition}): code broken inside a word at 390 px: {facts['broken'][:4]}"
    if page_name == "book/notation":  # not vacuous: the notation page names every shape in code
        assert facts["codes"] >= 20


@pytest.mark.parametrize("edition", list(EDITIONS))
@pytest.mark.parametrize("page_name", PAGES)
def test_figures_are_legible_and_explorers_one_tap_from_full_size(page_name, edition, server, browser):  # noqa: F811
    """A figure's smallest text is at least 9 CSS px on a phone (shown as drawn, or its phone rendering,
    ``mha.viz.phone``); an explorer's frame whose text is smaller says that a tap enlarges it."""
    stored = stored_figure_metadata()
    for figure in phone_page(browser, server, edition, page_name)["figures"]:
        if figure["explorer"]:
            points, dpi = figure["textPt"], figure["dpi"]
        elif figure["file"] and Path(figure["file"]).stem in stored:
            meta = stored[Path(figure["file"]).stem].get(describe.META, {})
            points, dpi = meta.get("text_pt"), meta.get("dpi")
        else:
            continue  # a drawing of the book's own, not a figure output
        where = f"{page_name} ({edition}): {figure['file'] or 'explorer ' + figure['id']}"
        assert points and dpi, f"{where} records no text size"
        px = points * dpi / 72 * figure["shown"] / figure["natural"]
        if not figure["explorer"]:
            shown = "its phone rendering" if figure["phone"] else "as drawn"
            assert px >= describe.MIN_TEXT_PX, f"{where}: smallest text {px:.1f} CSS px on a phone ({shown})"
            assert figure["href"] and figure["href"].endswith(figure["file"]), f"{where} is not a link to its image"
            continue
        if px >= describe.MIN_TEXT_PX:
            continue
        assert figure["cue"] == FRAME_CUE[edition], f"{where}: smallest text {px:.1f} px and no visible cue under it"
        assert figure["cueHeight"] >= 8, f"{where}: its cue takes no room ({figure['cueHeight']:.0f} px)"


@pytest.mark.parametrize("edition", list(EDITIONS))
def test_a_phone_shows_the_phone_renderings(edition, server, browser):  # noqa: F811
    """Not vacuous: the figures drawn too small for a phone are shown there in their phone rendering."""
    figures = phone_page(browser, server, edition, "book/03_worked_example")["figures"]
    phones = [f for f in figures if not f["explorer"] and f["phone"]]
    assert len(phones) >= 2, [f["file"] for f in figures]


def test_an_explorer_frame_enlarges_with_one_tap_and_says_so(server, browser):  # noqa: F811
    """The cue is true: a tap shows the frame at full size (scrolled sideways), a second fits it again."""
    context, page, _ = new_tab(browser)
    try:
        page.goto(f"{server}/{EDITIONS['en']}/book/03_worked_example.html", wait_until="load")
        frame = page.locator("figure.mha-explorer img.mha-explorer-frame").first
        frame.scroll_into_view_if_needed()
        natural, shown = frame.evaluate("img => [img.naturalWidth, img.getBoundingClientRect().width]")
        assert shown < natural - 1, "the frame is not shrunk on a phone: nothing to check"
        frame.click()
        assert frame.evaluate("img => img.getBoundingClientRect().width") >= natural - 1
        cue = frame.evaluate("img => getComputedStyle(img.parentElement, '::after').visibility")
        assert cue == "visible", "enlarged, the frame no longer says how to fit it"
        frame.click()
        assert frame.evaluate("img => img.getBoundingClientRect().width") <= shown + 1
    finally:
        context.close()


@pytest.mark.parametrize("edition", list(EDITIONS))
def test_a_figure_enlarges_in_place_with_one_tap_to_legible_text(edition, server, browser):  # noqa: F811
    """A tap on a figure shown smaller than drawn (its phone rendering, on a phone) shows it at its drawn
    width on the page, larger than the column (not the image file at the screen's width, as small as
    before); the cue then says how to fit it, and a second tap fits it again."""
    stored = stored_figure_metadata()
    context, page, _ = new_tab(browser)
    try:
        url = f"{server}/{EDITIONS[edition]}/book/05_parameter_analysis.html"
        page.goto(url, wait_until="load")
        figure = page.locator(".bd-article a.image-reference img").first
        figure.scroll_into_view_if_needed()
        figure.evaluate("img => img.decode()")
        natural, shown, file = figure.evaluate(
            "img => [img.naturalWidth, img.getBoundingClientRect().width, img.currentSrc.split('/').pop()]"
        )
        assert shown < natural - 1, "the figure is not shrunk on a phone: nothing to check"
        meta = stored[Path(file).stem][describe.META]
        cue = "img => getComputedStyle(img.closest('a.image-reference'), '::after').content"
        before = figure.evaluate(cue)
        figure.click()
        enlarged = figure.evaluate("img => img.getBoundingClientRect().width")
        assert page.url == url, "the tap left the page"
        assert enlarged >= natural - 1, f"enlarged to {enlarged:.0f} px of {natural}"
        assert enlarged > shown + 50 and meta["text_pt"] * meta["dpi"] / 72 * enlarged / natural >= describe.MIN_TEXT_PX
        assert figure.evaluate(cue) != before, "enlarged, the cue still says to enlarge"
        figure.click()
        assert figure.evaluate("img => img.getBoundingClientRect().width") <= shown + 1
    finally:
        context.close()


@pytest.mark.parametrize("edition", list(EDITIONS))
@pytest.mark.parametrize("page_name", PAGES)
def test_no_dropdown_repeats_its_value_beside_it(page_name, edition, server, browser):  # noqa: F811
    for dropdown in phone_page(browser, server, edition, page_name)["dropdowns"]:
        assert not dropdown["echoes"], (
            f"{page_name} ({edition}): the dropdown {dropdown['id']} shows {dropdown['value']!r} and "
            f"repeats it beside it ({dropdown['echoes']})"
        )


@pytest.mark.parametrize("edition", list(EDITIONS))
@pytest.mark.parametrize("page_name", PAGES)
def test_no_invalid_theme_mode_on_a_first_visit(page_name, edition, server, browser):  # noqa: F811
    console = phone_page(browser, server, edition, page_name)["console"]
    assert not [m for m in console if "invalid theme mode" in m.lower()], f"{page_name} ({edition}): {console[:5]}"


#: The colour theme and the logos shown when the page's body starts, before any of its scripts but the
#: head's ran (an init script watches for <body>).
THEME_AT_FIRST_PAINT = r"""
window.__mhaTheme = null;
new MutationObserver((records, observer) => {
  if (!document.body || window.__mhaTheme) return;
  window.__mhaTheme = document.documentElement.dataset.theme;
  observer.disconnect();
}).observe(document, {childList: true, subtree: true});
"""


@pytest.mark.parametrize("stored", [None, "light", "dark", "auto"])
@pytest.mark.parametrize("system", ["light", "dark"])
@pytest.mark.parametrize("edition", list(EDITIONS))
def test_the_page_starts_in_the_colour_theme_it_keeps(edition, system, stored, server, browser):  # noqa: F811
    """The head picks light or dark as the theme's script later does: the reader's stored mode, else the system's.

    Before, a first visit started as data-theme="auto", which no CSS reads: light colours on a dark system
    and both logos, until the theme's deferred script chose, and the sidebar then jumped up by a logo's height
    (layout shift 0.13-0.15)."""
    context, page, _ = new_tab(browser, dark=system == "dark")
    try:
        page.set_viewport_size({"width": 1280, "height": 900})
        if stored:
            context.add_init_script(f"localStorage.setItem('mode', '{stored}')")
        context.add_init_script(THEME_AT_FIRST_PAINT)
        page.goto(f"{server}/{EDITIONS[edition]}/book/intro.html", wait_until="load")
        page.wait_for_load_state("networkidle")
        expected = stored if stored in ("light", "dark") else system
        at_start = page.evaluate("() => window.__mhaTheme")
        final = page.evaluate("() => document.documentElement.dataset.theme")
        logos = page.evaluate(
            "() => [...document.querySelectorAll('.navbar-brand img')].filter(i => i.getBoundingClientRect().height)"
            ".map(i => i.className)"
        )
    finally:
        context.close()
    assert (at_start, final) == (expected, expected), f"{edition}: started {at_start}, ended {final}, not {expected}"
    assert len(logos) == 1 and f"only-{expected}" in logos[0], logos


def pages_with_sliders() -> list[str]:
    return [p for p in PAGES if 'type=\\"range' in _notebook_text(p)]


def _notebook_text(page_name: str) -> str:
    notebook = ROOT / f"{page_name}.ipynb"
    return notebook.read_text(encoding="utf-8") if notebook.exists() else ""


def dark_sliders(browser, url: str, css: str | None = None) -> list[dict]:  # noqa: F811
    """Each slider of the page at ``url`` in dark mode, with its measured contrasts."""
    context, page, _ = new_tab(browser, dark=True)
    try:
        page.set_viewport_size({"width": 1280, "height": 900})
        page.goto(url, wait_until="load")
        page.wait_for_function("() => document.documentElement.dataset.theme === 'dark'")
        if css:
            page.add_style_tag(content=css)
        sliders = page.evaluate(SLIDERS)
        page.wait_for_timeout(100)
        return [{**slider, **slider_contrasts(page, slider)} for slider in sliders]
    finally:
        context.close()


@pytest.mark.parametrize("edition", list(EDITIONS))
@pytest.mark.parametrize("page_name", pages_with_sliders())
def test_sliders_stand_out_from_their_card_in_dark_mode(page_name, edition, server, browser):  # noqa: F811
    sliders = dark_sliders(browser, f"{server}/{EDITIONS[edition]}/{page_name}.html")
    assert sliders, f"{page_name}: its notebook stores a slider, the page shows none"
    for slider in sliders:
        assert slider["theme"] == "dark"
        for part in ("thumb", "track"):
            assert slider[part] >= MIN_CONTROL_CONTRAST, (
                f"{page_name} ({edition}): slider {slider['id']}'s {part} at {slider[part]}:1 against its card "
                f"{slider['card']} (at least {MIN_CONTROL_CONTRAST}:1)"
            )


def test_the_contrast_measure_sees_the_old_dark_sliders(server, browser):  # noqa: F811
    """Drawn as the book once drew it (the dark page's colour scheme, no accent), a slider fails the measure."""
    page_name = pages_with_sliders()[0]
    old = (
        "figure.mha-explorer { color-scheme: dark !important }"
        " figure.mha-explorer input { accent-color: auto !important }"
    )
    sliders = dark_sliders(browser, f"{server}/{EDITIONS['en']}/{page_name}.html", css=old)
    assert sliders and all(min(s["thumb"], s["track"]) < MIN_CONTROL_CONTRAST for s in sliders), sliders


# ---- the search page ---------------------------------------------------------------------------

SEARCH_RESULTS = r"""() => Array.from(document.querySelectorAll("#search-results ul.search > li")).map(li => {
  const link = li.querySelector("a");
  const summary = li.querySelector("p.context");
  return {href: link.getAttribute("href"), title: link.textContent, summary: summary ? summary.textContent : null,
          descr: li.querySelector("span") ? li.querySelector("span").textContent : null};
})"""

SEARCH_FIELD = r"""() => {
  const form = document.querySelector(".bd-search-container form.bd-search");
  const icon = form.querySelector(".fa-magnifying-glass"), input = form.querySelector("input");
  const text = input.getBoundingClientRect().left + parseFloat(getComputedStyle(input).paddingLeft);
  return {iconRight: icon.getBoundingClientRect().right, textLeft: text};
}"""


def search(browser, server, edition: str, query: str) -> dict:  # noqa: F811
    context, page, console = new_tab(browser)
    try:
        page.set_viewport_size({"width": 1280, "height": 900})
        page.goto(f"{server}/{EDITIONS[edition]}/search.html?q={query}", wait_until="load")
        page.wait_for_function(
            "() => { const s = document.querySelector('#search-results p.search-summary');"
            " return s && s.textContent.length > 0; }",
            timeout=30_000,
        )
        # every summary fetched (a hit on a glossary term shows its description instead)
        page.wait_for_function(
            "() => Array.from(document.querySelectorAll('#search-results ul.search > li'))"
            ".every(li => li.querySelector('p.context') || li.querySelector('span'))",
            timeout=30_000,
        )
        results = page.evaluate(SEARCH_RESULTS)
        field = page.evaluate(SEARCH_FIELD)
        # a page as Sphinx writes it without build-time math: raw TeX in span.math
        raw = (
            '<main role="main"><article><p>weights <span class="math notranslate nohighlight">'
            r"\(\mathrm{softmax}\left(\frac{QK^\top}{\sqrt{d_k}}\right)\)</span> end; "
            r"\[x_i\]</p></article></main>"
        )
        tex = page.evaluate("html => Search.htmlToText(html)", raw)
        return {"results": results, "field": field, "console": list(console), "tex": tex}
    finally:
        context.close()


def page_of(href: str) -> str:
    return href.split("#")[0].removesuffix(".html")


@pytest.mark.parametrize("edition", list(EDITIONS))
def test_search_finds_each_page_once_chapters_first_in_plain_text(edition, server, browser):  # noqa: F811
    query, chapters_at_least = QUERIES[edition]
    found = search(browser, server, edition, query)
    pages = [page_of(r["href"]) for r in found["results"]]
    assert len(pages) == len(set(pages)), f"{edition} {query!r}: pages found more than once: {pages}"
    chapters = [bool(CHAPTER.search(p)) for p in pages]
    assert sum(chapters) >= chapters_at_least, f"{edition} {query!r}: only {sum(chapters)} chapters found: {pages}"
    assert chapters == sorted(chapters, reverse=True), f"{edition} {query!r}: a chapter after another page: {pages}"
    assert "book/glossary" in pages, f"{edition} {query!r}: the glossary is not found at all"
    for result in found["results"]:
        text = result["summary"] or result["descr"] or ""
        assert text.strip(), f"{edition} {query!r}: {result['href']} has no summary"
        assert not RAW_TEX.search(text), f"{edition} {query!r}: raw TeX in the summary of {result['href']}: {text!r}"
        assert "  " not in text and "\n" not in text, f"{edition}: the summary of {result['href']} is not tidy"
    assert not [m for m in found["console"] if "invalid theme mode" in m.lower()], found["console"]
    assert found["field"]["iconRight"] <= found["field"]["textLeft"], (
        f"the magnifier covers the query: {found['field']}"
    )
    # a page whose HTML holds raw TeX (no build-time math) still gets a plain summary
    assert found["tex"] == "weights softmax((QK⊤)/(√(d_k))) end; x_i", found["tex"]


# ---- the measures fail on the defects ------------------------------------------------------------

HARNESS_PAGE = """<!doctype html><html lang="en"><head><meta name="viewport" content="width=device-width">
<style>body{margin:0;font:16px sans-serif} code{overflow-wrap:anywhere} .box{width:300px}</style></head>
<body><main>
<div class="box" style="overflow:hidden">
<p style="white-space:nowrap">a line far too long for a phone to show in full</p></div>
<div class="box" style="overflow-x:auto"><table><tr><td>wide</td><td>table</td><td>with</td><td>columns</td>
<td>enough</td><td>to</td><td>scroll</td><td>sideways</td></tr></table></div>
<table class="box" style="table-layout:fixed"><tr><td><code>batch_size</code></td><td><code>num_heads</code></td>
<td><code>seq_len</code></td><td><code>head_dim</code></td><td><code>d_model</code></td><td><code>x</code></td></tr></table>
</main></body></html>"""


def test_the_phone_measures_fail_on_the_defects(browser, tmp_path):  # noqa: F811
    """A box that hides a long line, a table that scrolls with no cue and code cut mid-word are all found."""
    (tmp_path / "phone.html").write_text(HARNESS_PAGE, encoding="utf-8")
    context, page, _ = new_tab(browser)
    try:
        with serve(tmp_path) as url:
            page.goto(f"{url}/phone.html", wait_until="load")
            facts = page.evaluate(PHONE_FACTS)
    finally:
        context.close()
    assert [c["tag"] for c in facts["cut"]] == ["div", "p"], facts["cut"]
    assert len(facts["tables"]) == 1 and not facts["tables"][0]["marked"] and facts["tables"][0]["cue"] is None
    assert facts["broken"], "code broken inside a word was not found"


def test_the_verdict_measure_sees_a_split_shape(browser, tmp_path):  # noqa: F811
    """Not vacuous: a shape at the end of a narrow verdict breaks over two lines with plain spaces, and
    stays whole with the build's no-break spaces (_ext/mha_i18n.bind_units)."""
    import sys

    sys.path.insert(0, str(ROOT / "_ext"))
    from mha_i18n import bind_units

    line = "  output：错误：形状应为 (2, 10, 4)，实际是 (2, 10, 4, 5)"
    style = "width:20em;font:16px monospace;white-space:pre-wrap;overflow-wrap:anywhere"
    (tmp_path / "v.html").write_text(
        f'<main><div class="mha-verdict"><pre style="{style}">{line}</pre></div>'
        f'<div class="mha-verdict"><pre style="{style}">{bind_units(line)}</pre></div></main>',
        encoding="utf-8",
    )
    with serve(tmp_path) as url:
        page = browser.new_page()
        try:
            page.goto(f"{url}/v.html")
            plain, bound = page.evaluate(VERDICTS)
        finally:
            page.close()
    assert plain["units"]["split"] and plain["units"]["checked"] == 2, plain
    assert bound["units"]["split"] == [] and bound["units"]["checked"] == 2, bound


#: On a phone at load: the sections the browser left undrawn, and in them what the page has marked so
#: far (formulas, code and outputs given a Tab stop, tables given a cue).
UNDRAWN_AT_LOAD = r"""() => {
  const sections = [...document.querySelectorAll(".bd-article section > section")];
  // a section's own box shows (its height holds its place); its contents are what is left undrawn
  const undrawn = sections.filter(s => !s.firstElementChild.checkVisibility({contentVisibilityAuto: true}));
  const boxes = "div.math > .katex-display, span.math, pre, .cell_output > .output";
  const marked = undrawn.flatMap(s => [...s.querySelectorAll(boxes)])
    .filter(b => b.hasAttribute("tabindex")).length;
  const cued = undrawn.flatMap(s => [...s.querySelectorAll(".mha-scrolls")]).length;
  return {sections: sections.length, undrawn: undrawn.length, marked, cued,
          auto: sections.every(s => getComputedStyle(s).contentVisibility === "auto")};
}"""
#: Scrolls to the last wide table's section and says, once it is drawn, what the page marked in it.
DRAWN_ON_ARRIVAL = r"""async () => {
  const frames = () => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)));
  const table = [...document.querySelectorAll(".bd-article table")].pop();
  table.scrollIntoView();
  await frames(); await frames(); await new Promise(done => setTimeout(done, 200));
  const section = table.closest("section");
  const formulas = [...section.querySelectorAll("div.math > .katex-display, span.math")];
  const box = table.closest(".mha-scroll-frame > *") || table.parentElement;
  return {drawn: table.checkVisibility({contentVisibilityAuto: true}),
          wide: box.scrollWidth > box.clientWidth + 1, cued: box.classList.contains("mha-scrolls"),
          formulas: formulas.length,
          unmarked: formulas.filter(f => (f.scrollWidth - f.clientWidth > 3) !== (f.getAttribute("tabindex") === "0"))
            .length};
}"""


@pytest.mark.parametrize("page_name", ["book/05_parameter_analysis", "book/11_pretrained_heads"])
def test_a_section_is_drawn_and_checked_when_the_reader_reaches_it(page_name, server, browser):  # noqa: F811
    """A phone draws the sections near the screen only, so a long chapter does not hold its main thread
    while it arrives (scripts/measure_pages.py); a section's boxes are checked when it is drawn."""
    page = browser.undrawn.new_page(viewport=PHONE)
    try:
        page.goto(f"{server}/{EDITIONS['en']}/{page_name}.html", wait_until="networkidle")
        page.wait_for_timeout(300)
        start = page.evaluate(UNDRAWN_AT_LOAD)
        assert start["auto"] and start["undrawn"] >= 3, f"{page_name}: sections drawn before they are needed: {start}"
        assert start["marked"] == 0 and start["cued"] == 0, f"{page_name}: undrawn sections were measured: {start}"
        there = page.evaluate(DRAWN_ON_ARRIVAL)
        assert there["drawn"] and there["wide"], (
            f"{page_name}: the last table is not a wide one drawn on arrival: {there}"
        )
        assert there["cued"], f"{page_name}: the table reached scrolls without its cue: {there}"
        assert there["unmarked"] == 0, f"{page_name}: formulas of the section reached not checked: {there}"
    finally:
        page.context.close()
