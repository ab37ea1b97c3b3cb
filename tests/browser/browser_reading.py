"""How a page reads on every screen and to every reader, measured in one open page.

``read_page`` is called by ``test_browser.visit`` on a page already loaded at 1280x900 in light
mode (so each page of each edition is opened once for every browser check); the assertions are
in ``tests/browser/test_browser_reading.py``. In order:

1. desktop, light: axe-core (WCAG 2.1 A and AA) on the whole page; formulas that are Tab stops;
   the visible sidebar button collapses the table of contents and brings it back;
2. phone (390x844), light: how wide the page is; formulas that are Tab stops at this width; the
   visible navigation button opens the table of contents (mouse click, then keyboard Enter) and
   Escape closes it;
3. dark mode (the reader's system asks for it, the theme follows), phone then desktop: axe's
   rules that read colours (contrast) on the whole page;
4. every fold opened, phone then desktop: formulas cut off (``CLIPPED_MATH``).

In both modes, the code cells' contrast is computed here (``CODE_CONTRAST``), not by axe: see
``COLOUR_RULES``.

Screenshots, in the edition's folder under ``_build/screenshots/``: ``<page>.png`` (desktop,
light: taken by ``visit``), ``<page>-phone.png``, ``<page>-phone-dark.png`` (full pages) and
``<page>-dark.png`` (desktop, dark: the top of the page).
"""

from __future__ import annotations

import time
from pathlib import Path

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}
#: The rules that read colours, run on their own: again in dark mode (where only colours change,
#: by the theme's CSS), and not on code cells, which ``CODE_CONTRAST`` checks instead. Code is
#: half a chapter's elements (one per highlighted token, 5,000 on the multi-head-math
#: chapter) and axe's contrast
#: check of them took 3.5 of its 5 seconds per page and mode; their colours come from two
#: Pygments styles (light, dark) that a few distinct colour pairs cover.
COLOUR_RULES = ["color-contrast", "link-in-text-block"]
AXE_COLOUR_OPTIONS = {"runOnly": {"type": "rule", "values": COLOUR_RULES}, "resultTypes": ["violations"]}
AXE_COLOUR_CONTEXT = {"exclude": [["div.highlight"]]}
#: axe-core's rules for WCAG 2.0 and 2.1, levels A and AA, but for those above. label-content-name-mismatch
#: (WCAG 2.5.3) is "experimental" in axe 4 and off unless named: the theme's buttons failed it on every page.
AXE_OPTIONS = {
    "runOnly": {"type": "tag", "values": ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]},
    "rules": {"label-content-name-mismatch": {"enabled": True}, **{rule: {"enabled": False} for rule in COLOUR_RULES}},
    "resultTypes": ["violations"],
}

#: Contrast (WCAG 2.1, 1.4.3) of every distinct text colour on its background in the code cells:
#: the pairs below 4.5:1, with a sample of their text.
CODE_CONTRAST = r"""() => {
  const rgb = c => (c.match(/[\d.]+/g) || [0, 0, 0]).slice(0, 4).map(Number);
  const opaque = c => { const v = rgb(c); return c !== "transparent" && (v.length < 4 || v[3] > 0); };
  const lum = c => rgb(c).slice(0, 3).map(v => v / 255)
    .map(v => v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4)
    .reduce((sum, v, i) => sum + v * [0.2126, 0.7152, 0.0722][i], 0);
  const background = e => {
    for (; e; e = e.parentElement) { const c = getComputedStyle(e).backgroundColor; if (opaque(c)) return c; }
    return "rgb(255, 255, 255)";
  };
  const pairs = new Map();
  for (const pre of document.querySelectorAll("div.highlight pre")) {
    for (const e of [pre, ...pre.querySelectorAll("span")]) {
      const own = Array.from(e.childNodes).some(n => n.nodeType === 3 && n.textContent.trim());
      if (!own) continue;
      const key = getComputedStyle(e).color + " on " + background(e);
      if (!pairs.has(key)) pairs.set(key, e.textContent.trim().slice(0, 20));
    }
  }
  return Array.from(pairs, ([pair, text]) => {
    const [fg, bg] = pair.split(" on ").map(lum);
    return {pair, text, ratio: Math.round(100 * (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05)) / 100};
  }).filter(p => p.ratio < 4.5);
}"""
#: The impacts that fail the test; minor and moderate findings are reported, not failed.
FAILING_IMPACTS = ("critical", "serious")

#: Formulas (KaTeX's, written into the page when the book is built): the boxes that scroll when a
#: formula is wider than its column (``mha_book.css``, "math": a display formula's ``.katex-display``,
#: an inline formula's ``span.math``); how many, how many are Tab stops, and of those how many need not
#: be (the formula fits its box: nothing to scroll), and how many scroll but cannot be reached by
#: keyboard; and any Tab stop inside a formula (KaTeX's HTML is aria-hidden: a stop there is lost).
FORMULA_STOPS = r"""() => {
  const all = Array.from(document.querySelectorAll("div.math > .katex-display, span.math"));
  const stop = m => m.hasAttribute("tabindex") && m.tabIndex >= 0;
  // KaTeX's sub- and superscripts reach 2 px past their formula (a Safari fix): not a scroll
  const scrolls = m => ["auto", "scroll"].includes(getComputedStyle(m).overflowX) && m.scrollWidth > m.clientWidth + 3;
  const text = m => (m.querySelector("annotation") || m).textContent.slice(0, 40);
  return {
    formulas: all.length,
    stops: all.filter(stop).length,
    needless: all.filter(m => stop(m) && !scrolls(m)).map(text),
    unreachable: all.filter(m => scrolls(m) && !stop(m)).map(text),
    // a box that scrolls by its formula's 1-3 px overhang: Chromium makes every scroller a Tab stop
    // (with no tabindex), and its scroll shadow shows as a hairline
    overhangs: all.filter(m => ["auto", "scroll"].includes(getComputedStyle(m).overflowX)
      && m.scrollWidth > m.clientWidth && !scrolls(m)).map(text),
    inside: Array.from(document.querySelectorAll(".katex [tabindex], .katex a[href]"))
      .map(e => e.outerHTML.slice(0, 60)),
  };
}"""

#: Formulas cut off, every fold opened first (an exercise's answer): for each formula on
#: the page (KaTeX's ``.katex``; MathJax's ``mjx-container`` in a book built before), how far its drawn
#: parts reach, and the first box up the tree that clips or scrolls what sticks out of it. A formula
#: that sticks out of a box that hides it is clipped; one that sticks out of its own box that scrolls
#: (not the whole article's) scrolls, and must show it (a shadow or a scrollbar); one that sticks out
#: of the window is clipped too (only the page would scroll sideways). ``column``: the text column's
#: width, to compare a formula's width with.
CLIPPED_MATH = r"""() => {
  for (const d of document.querySelectorAll("main details")) d.open = true;
  for (const e of document.querySelectorAll("main .toggle-hidden")) e.classList.remove("toggle-hidden");
  for (const e of document.querySelectorAll("main .toggle-details__container")) e.style.display = "block";
  const PAGE = ".bd-article-container, .bd-main, .bd-content, .bd-container, .bd-container__inner, .bd-page-width";
  const W = document.documentElement.clientWidth;
  const found = {formulas: 0, clipped: [], scrolling: [], uncued: [], hidden: [], column: 0};
  // the text (not the page's table of contents, off the screen on a phone until it is opened)
  const article = document.querySelector("article.bd-article") || document.querySelector("main") || document.body;
  const pad = getComputedStyle(article);
  found.column = Math.round(article.clientWidth - parseFloat(pad.paddingLeft) - parseFloat(pad.paddingRight));
  for (const f of article.querySelectorAll(".katex, mjx-container")) {
    if (!f.getClientRects().length || f.parentElement.closest(".katex")) continue;  // folded away, or nested
    found.formulas++;
    // what it draws: KaTeX's bases (not the MathML for screen readers, 1 px, nor a root sign's
    // 400-em SVG that KaTeX cuts to size), or MathJax's typeset formula
    let left = Infinity, right = -Infinity;
    const parts = f.matches(".katex")
      ? f.querySelectorAll(".katex-html > .base, .katex-html > .tag") : [f.firstElementChild || f];
    for (const e of parts) {
      for (const r of e.getClientRects()) {
        if (r.width > 0) { left = Math.min(left, r.left); right = Math.max(right, r.right); }
      }
    }
    const name = (f.querySelector("annotation") || f).textContent.trim().slice(0, 60);
    const width = Math.round(right - left);
    let verdict = right > W + 1 || left < -1 ? "clipped" : null;
    for (let p = f.parentElement; p && p !== document.body; p = p.parentElement) {
      const style = getComputedStyle(p), ox = style.overflowX;
      if (!["auto", "scroll", "hidden", "clip"].includes(ox)) continue;
      const box = p.getBoundingClientRect();
      const out = right > box.right - parseFloat(style.borderRightWidth) + 1 || left < box.left - 1;
      if (!out) { if (p.matches(PAGE)) break; continue; }
      if (["hidden", "clip"].includes(ox) || p.matches(PAGE)) verdict = "clipped";
      else if (p.closest("[aria-hidden=true]")) {
        verdict = "scrolls";  // but no keyboard can reach it, and no screen reader sees it
        found.hidden.push({formula: name, width, box: `${p.tagName.toLowerCase()}.${p.className}`});
      } else {
        verdict = "scrolls";
        const cue = /gradient/.test(style.backgroundImage) || p.offsetHeight - p.clientHeight > 2;
        // a formula's own box (a table that scrolls shows it its own way: tested with the tables)
        if (!cue && p.matches(".math, .katex-display, .katex, .katex *")) found.uncued.push({formula: name, width});
      }
      break;
    }
    if (verdict === "clipped") found.clipped.push({formula: name, width, window: W});
    if (verdict === "scrolls") found.scrolling.push({formula: name, width});
  }
  return found;
}"""

#: What is wider than the window: the page's scroll width and the widest elements that stick out
#: (outside any box that scrolls or clips them), to name the culprit in a failure message.
WIDTH = r"""() => {
  const W = document.documentElement.clientWidth, out = [];
  for (const e of document.querySelectorAll(".bd-main *")) {
    const r = e.getBoundingClientRect();
    if (r.right <= W + 1 || r.width === 0) continue;
    let inside = false;
    for (let p = e.parentElement; p && !inside; p = p.parentElement)
      inside = ["auto", "scroll", "hidden", "clip"].includes(getComputedStyle(p).overflowX);
    if (!inside)
      out.push(`${e.tagName.toLowerCase()}.${e.className} (${Math.round(r.right)} px): ${e.textContent.slice(0, 50)}`);
  }
  return {width: document.documentElement.scrollWidth, window: W, culprits: out.slice(0, 5)};
}"""

#: The icons the page draws with FontAwesome's web font: each code point some element's ::before or
#: ::after asks the font for (icon buttons, admonition titles, the sidebar's chevrons).
ICONS = r"""() => {
  const found = new Set();
  for (const e of document.querySelectorAll("body *")) {
    for (const pseudo of ["::before", "::after"]) {
      const style = getComputedStyle(e, pseudo);
      if (!/Font Awesome/.test(style.fontFamily)) continue;
      const text = style.content.replace(/^"|"$/g, "");
      for (const ch of text) {
        const code = ch.codePointAt(0);
        if (code >= 0xe000 && code <= 0xf8ff) found.add(code);
      }
    }
  }
  return Array.from(found).sort((a, b) => a - b);
}"""

SIDEBAR = r"""() => {
  const dialog = document.getElementById("pst-primary-sidebar-modal");
  const sidebar = document.getElementById("pst-primary-sidebar");
  return {
    dialogOpen: !!dialog && dialog.open,
    dialogLinks: dialog ? dialog.querySelectorAll("nav.bd-docs-nav a").length : 0,
    collapsed: !!sidebar && sidebar.classList.contains("pst-sidebar-hidden"),
  };
}"""


def _settle(page) -> None:
    """Let the page lay out, run its resize handlers and finish its transitions (the theme fades
    colours over 0.15-0.25 s: axe must not measure a colour half-way) after a change of size or mode."""
    page.evaluate(
        "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"
        ".then(() => Promise.race([new Promise(r => setTimeout(r, 1000)),"
        " Promise.all(document.getAnimations().map(a => a.finished.catch(() => null)))]))"
    )


def run_axe(page, options=AXE_OPTIONS, context=None) -> dict[str, dict]:
    """axe-core's violations on the page as it is now: rule -> impact, node count, first targets."""
    from axe_playwright_python.sync_playwright import Axe

    violations = Axe().run(page, context=context, options=options).response["violations"]
    return {
        v["id"]: {"impact": v["impact"], "nodes": len(v["nodes"]), "targets": [n["target"] for n in v["nodes"][:3]]}
        for v in violations
    }


def _unfocus(page) -> None:
    """No focus ring, tooltip or hover effect left by a click in the next screenshot."""
    size = page.viewport_size
    page.mouse.move(size["width"] - 2, size["height"] - 2)  # off the buttons, inside the window
    page.evaluate("() => { window.scrollTo(0, 0); if (document.activeElement) document.activeElement.blur(); }")
    _settle(page)  # the tooltip fades out


def _screenshot(page, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    _unfocus(page)
    page.screenshot(path=str(path), full_page=True)


def _open_navigation(page, how: str) -> dict:
    """Open the table of contents with the visible button (``click`` or ``enter``), then Escape."""
    toggles = page.locator(".primary-toggle:visible")
    if toggles.count() != 1:
        return {"visibleButtons": toggles.count()}
    if how == "click":
        toggles.first.click()
    else:
        toggles.first.focus()
        page.keyboard.press("Enter")
    opened = page.evaluate(SIDEBAR)
    page.keyboard.press("Escape")
    closed = not page.evaluate(SIDEBAR)["dialogOpen"]
    _unfocus(page)
    return {"visibleButtons": 1, "opened": opened["dialogOpen"], "links": opened["dialogLinks"], "closed": closed}


def _collapse_sidebar(page) -> dict:
    """On a desktop the visible sidebar button hides the table of contents, and shows it again."""
    toggles = page.locator(".primary-toggle:visible")
    if toggles.count() != 1:
        return {"visibleButtons": toggles.count()}
    toggles.first.click()
    hidden = page.evaluate(SIDEBAR)
    toggles.first.click()
    shown = page.evaluate(SIDEBAR)
    _unfocus(page)
    return {
        "visibleButtons": 1,
        "collapsed": hidden["collapsed"] and not hidden["dialogOpen"],
        "restored": not shown["collapsed"],
    }


def read_page(page, shots: dict[str, Path]) -> dict:
    """Everything above, for ``page`` (open at 1280x900, light); ``shots``: dark, phone, phone-dark."""
    started = time.perf_counter()
    report = {"axe": {}, "formulas": {}}
    report["formulas"]["desktop"] = page.evaluate(FORMULA_STOPS)
    report["icons"] = page.evaluate(ICONS)
    report["axe"]["light"] = {**run_axe(page), **run_axe(page, AXE_COLOUR_OPTIONS, AXE_COLOUR_CONTEXT)}
    report["codeContrast"] = {"light": page.evaluate(CODE_CONTRAST)}
    report["desktopToggle"] = _collapse_sidebar(page)

    page.set_viewport_size(PHONE)
    _settle(page)
    report["phoneWidth"] = page.evaluate(WIDTH)
    report["formulas"]["phone"] = page.evaluate(FORMULA_STOPS)
    _screenshot(page, shots["phone"])
    report["navigation"] = {"click": _open_navigation(page, "click"), "enter": _open_navigation(page, "enter")}

    page.emulate_media(color_scheme="dark")
    page.wait_for_function("() => document.documentElement.dataset.theme === 'dark'", timeout=5_000)
    _settle(page)
    _screenshot(page, shots["phone-dark"])
    page.set_viewport_size(DESKTOP)
    _settle(page)
    report["axe"]["dark"] = run_axe(page, AXE_COLOUR_OPTIONS, AXE_COLOUR_CONTEXT)
    report["codeContrast"]["dark"] = page.evaluate(CODE_CONTRAST)
    # The top of the page only: a full desktop page in dark mode takes seconds to draw (the
    # theme dims every image with a CSS filter); the phone screenshot above shows all of it.
    _unfocus(page)
    page.screenshot(path=str(shots["dark"]))
    # Formulas cut off, every fold opened: on a phone, then on a desktop
    page.emulate_media(color_scheme="light")
    page.set_viewport_size(PHONE)
    _settle(page)
    report["clippedMath"] = {"phone": page.evaluate(CLIPPED_MATH)}
    page.set_viewport_size(DESKTOP)
    _settle(page)
    report["clippedMath"]["desktop"] = page.evaluate(CLIPPED_MATH)
    report["seconds"] = round(time.perf_counter() - started, 2)
    return report
