"""The built book by keyboard, in both editions.

* **Every control shows where the keyboard is**: Tab through a chapter's page, and each control the
  focus reaches in the page's header bars draws a ring (an outline or a box shadow), on a desktop and
  on a phone; among them the sidebar toggle and the download menu, which drew none.
* **The second skip link lands on the current chapter** in the table of contents, not on the
  book's title.
* **The language switch keeps the reader's section**: the same section of the same page in the
  other edition (both editions give a section the same id).

Harness tests show that the ring measure fails on a control without one. Needs the built book and
Chromium, like ``tests/browser/test_browser.py``.
"""

from __future__ import annotations

import pytest
from test_browser import EDITIONS, serve
from test_browser import browser as browser  # noqa: F401  (the fixtures, shared)
from test_browser import server as server  # noqa: F401

PAGE = "book/02_multi_head_math"
SIZES = {"desktop": {"width": 1280, "height": 900}, "phone": {"width": 390, "height": 844}}
#: The focused element, if it sits in the page's header bars, and whether it draws a ring.
FOCUSED = r"""() => {
  const e = document.activeElement;
  if (!e || !e.closest("header, .bd-header-article, .bd-header")) return null;
  const s = getComputedStyle(e);
  const ring = (s.outlineStyle !== "none" && parseFloat(s.outlineWidth) >= 1) || s.boxShadow !== "none";
  const box = e.getBoundingClientRect();
  return {name: e.getAttribute("aria-label") || e.getAttribute("title") || e.textContent.trim().slice(0, 30),
          cls: String(e.className).slice(0, 60), ring, visible: box.width > 0 && box.height > 0};
}"""


def header_focus(page, presses: int = 40) -> list[dict]:
    """Tab ``presses`` times from the top of ``page``; what each header control reached showed."""
    page.evaluate("() => { document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0); }")
    seen = []
    for _ in range(presses):
        page.keyboard.press("Tab")
        found = page.evaluate(FOCUSED)
        if found and found["visible"] and found not in seen:
            seen.append(found)
    return seen


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("edition", list(EDITIONS))
def test_every_header_control_shows_its_focus(edition, size, server, browser):  # noqa: F811
    context = browser.new_context(viewport=SIZES[size], service_workers="block")
    page = context.new_page()
    try:
        page.goto(f"{server}/{EDITIONS[edition]}/{PAGE}.html", wait_until="load")
        reached = header_focus(page)
    finally:
        context.close()
    without = [c for c in reached if not c["ring"]]
    assert not without, f"{PAGE} ({edition}, {size}): controls with no focus ring: {without}"
    classes = " ".join(c["cls"] for c in reached)
    assert "primary-toggle" in classes and "dropdown-toggle" in classes, (
        f"{PAGE} ({edition}, {size}): the Tab walk missed the sidebar toggle or the download menu: {reached}"
    )


def test_the_ring_measure_fails_on_a_control_without_one(browser, tmp_path):  # noqa: F811
    (tmp_path / "p.html").write_text(
        '<header><button id="a">ringed</button><button id="b" style="outline:none">bare</button></header>',
        encoding="utf-8",
    )
    with serve(tmp_path) as url:
        page = browser.new_page()
        try:
            page.goto(f"{url}/p.html")
            reached = header_focus(page, presses=2)
        finally:
            page.close()
    assert [c["ring"] for c in reached] == [True, False], reached


@pytest.mark.parametrize("edition", list(EDITIONS))
def test_the_skip_link_lands_on_the_current_chapter(edition, server, browser):  # noqa: F811
    page = browser.new_page(viewport=SIZES["desktop"])
    try:
        page.goto(f"{server}/{EDITIONS[edition]}/{PAGE}.html", wait_until="load")
        page.focus("#pst-skip-link a.mha-skip-contents")
        page.keyboard.press("Enter")
        landed = page.evaluate(
            "() => ({href: document.activeElement.getAttribute('href'), "
            "current: document.activeElement.classList.contains('current'), "
            "inNav: !!document.activeElement.closest('nav.bd-docs-nav')})"
        )
    finally:
        page.close()
    assert landed["inNav"] and landed["current"], f"{PAGE} ({edition}): the skip link focused {landed}"


@pytest.mark.parametrize("edition", list(EDITIONS))
def test_the_language_switch_keeps_the_section(edition, server, browser):  # noqa: F811
    other = "zh_CN" if edition == "en" else "en"
    section = "the-kv-cache"
    page = browser.new_page(viewport=SIZES["desktop"])
    try:
        page.goto(f"{server}/{EDITIONS[edition]}/book/05_parameter_analysis.html#{section}", wait_until="load")
        assert page.locator(f"#{section}").count() == 1
        with page.expect_navigation():
            page.click("p.mha-other-edition a")
        landed = page.url
        found = page.locator(f"#{section}").count()
    finally:
        page.close()
    assert landed.endswith(f"/{EDITIONS[other]}/book/05_parameter_analysis.html#{section}"), landed
    assert found == 1, f"{landed}: no section {section!r} in the other edition"
