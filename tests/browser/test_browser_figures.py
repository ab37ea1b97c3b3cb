"""The built book's figures, as a reader sees them: legible at desktop size, one tap from full size
on a phone, and described by their alt text, in both editions.

``tests/book/test_figure_text.py`` computes every figure's smallest text from what the notebooks store
(its font size, dpi and natural width) and the book's column width, ``COLUMN_PX`` and
``EXPLORER_COLUMN_PX`` in :mod:`mha.viz.describe`. This test opens every page in headless Chromium
at 1280 x 800 and checks that premise: each figure is shown at least as wide as that computation
assumed, so its smallest text is at least 9 CSS px tall on the page itself. At 390 x 844 (a phone)
each figure output is a link to its full-size file and a tap on a downscaled explorer frame shows
it at full size. In the HTML of both editions no ``<img>`` has an empty alt text or a file path
for one, and the Chinese edition's figures are described in Chinese.

Needs the built book (``make book``, ``make book-zh``) and Chromium, like ``tests/browser/test_browser.py``.
"""

from __future__ import annotations

import base64
import hashlib
import html.parser
import json
import re
from pathlib import Path

import pytest
from test_browser import BUILD, EDITIONS, LOAD_LAZY_IMAGES, ROOT, toc_pages
from test_browser import browser as browser  # noqa: F401  (the fixtures, shared)
from test_browser import server as server  # noqa: F401

from mha.viz import describe
from tests.book.test_figure_text import PATH_LIKE

PAGES = toc_pages()
CJK = re.compile(r"[\u4e00-\u9fff]")


def stored_figure_metadata() -> dict[str, dict]:
    """SHA-256 of every figure output's PNG (its file name in ``_images/``) -> its metadata."""
    found = {}
    for notebook in sorted((ROOT / "book").glob("*.ipynb")):
        for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
            for output in cell.get("outputs", []):
                png = output.get("data", {}).get("image/png")
                if png is not None:
                    png = "".join(png) if isinstance(png, list) else png
                    digest = hashlib.sha256(base64.b64decode(png)).hexdigest()
                    found[digest] = output.get("metadata", {}).get("image/png", {})
    return found


class _Images(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.images: list[dict] = []

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.images.append(dict(attrs))


def page_images(edition: str, page: str) -> list[dict]:
    path = BUILD / EDITIONS[edition] / f"{page}.html"
    if not path.exists():
        pytest.skip(f"{path} is not built: run `make book` and `make book-zh`")
    parser = _Images()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser.images


@pytest.mark.parametrize("edition", list(EDITIONS))
@pytest.mark.parametrize("page", PAGES)
def test_every_image_says_what_it_shows(edition, page):
    figures = stored_figure_metadata()
    for image in page_images(edition, page):
        alt = (image.get("alt") or "").strip()
        src = image.get("src", "")
        where = f"{edition} {page}: <img src={src[:60]!r}>"
        assert alt, f"{where} has no alt text"
        assert not PATH_LIKE.search(alt), f"{where} has a file path for alt text: {alt!r}"
        if Path(src).stem in figures:
            assert len(alt) >= 20, f"{where}: alt text {alt!r} says too little"
            if edition == "zh_CN":
                assert CJK.search(alt), f"{where}: the Chinese edition describes the figure in English: {alt!r}"


MEASURE = r"""() => Array.from(document.querySelectorAll("main img")).map(img => {
  const link = img.closest("a");
  return {
    file: img.currentSrc.startsWith("data:") ? null : img.currentSrc.split("/").pop(),
    explorer: !!img.closest("figure.mha-explorer"),
    natural: img.naturalWidth,
    shown: img.getBoundingClientRect().width,
    dpi: parseFloat(img.dataset.dpi || "0"),
    textPt: parseFloat(img.dataset.textPt || "0"),
    link: link ? link.getAttribute("href") : null,
  };
})"""


def open_page(browser, server, page: str, width: int, height: int):
    tab = browser.new_page(viewport={"width": width, "height": height})
    tab.goto(f"{server}/{EDITIONS['en']}/{page}.html")
    tab.wait_for_load_state("load")
    tab.evaluate(LOAD_LAZY_IMAGES)
    return tab


@pytest.mark.parametrize("page", [p for p in PAGES if (ROOT / f"{p}.ipynb").exists()])
def test_figures_are_legible_at_desktop_size(browser, server, page):  # noqa: F811
    figures = stored_figure_metadata()
    tab = open_page(browser, server, page, 1280, 800)
    try:
        for image in tab.evaluate(MEASURE):
            if image["explorer"]:
                points, dpi, column = image["textPt"], image["dpi"], describe.EXPLORER_COLUMN_PX
            elif image["file"] and Path(image["file"]).stem in figures:
                meta = figures[Path(image["file"]).stem].get(describe.META, {})
                points, dpi, column = meta.get("text_pt"), meta.get("dpi"), describe.COLUMN_PX
            else:
                continue  # a drawing of the book's own (book/images/*.svg), not a figure output
            assert points and dpi, f"{page}: {image['file'] or 'an explorer frame'} records no text size"
            assumed = min(1.0, column / image["natural"])
            scale = image["shown"] / image["natural"]
            assert scale >= assumed - 0.01, (
                f"{page}: a figure {image['natural']} px wide is shown {image['shown']:.0f} px wide, narrower "
                f"than the column of {column} px that tests/book/test_figure_text.py assumes"
            )
            px = points * dpi / 72 * scale
            assert px >= describe.MIN_TEXT_PX, f"{page}: {image['file'] or 'an explorer frame'}: {px:.1f} CSS px"
    finally:
        tab.close()


@pytest.mark.parametrize("page", [p for p in PAGES if (ROOT / f"{p}.ipynb").exists()])
def test_on_a_phone_every_figure_is_one_tap_from_full_size(browser, server, page):  # noqa: F811
    figures = stored_figure_metadata()
    tab = open_page(browser, server, page, 390, 844)
    try:
        for image in tab.evaluate(MEASURE):
            if image["file"] and Path(image["file"]).stem in figures:
                assert image["link"] and image["link"].endswith(image["file"]), (
                    f"{page}: figure {image['file']} is not a link to its full-size file"
                )
        frames = tab.locator("figure.mha-explorer img.mha-explorer-frame")
        for i in range(frames.count()):
            frame = frames.nth(i)
            frame.scroll_into_view_if_needed()
            natural, shown = frame.evaluate("img => [img.naturalWidth, img.getBoundingClientRect().width]")
            if shown < natural - 1:  # downscaled: a tap shows it at full size, scrolled sideways
                frame.click()
                assert frame.evaluate("img => img.getBoundingClientRect().width") >= natural - 1, page
                frame.click()
                assert frame.evaluate("img => img.getBoundingClientRect().width") <= shown + 1, page
    finally:
        tab.close()
