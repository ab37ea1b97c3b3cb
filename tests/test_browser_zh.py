"""The Chinese edition as a Chinese reader meets it (issue 36): its chrome is Chinese, and no bold shows as ``**``.

On every page of the table of contents in the built Chinese edition (``make book-zh``), in headless Chromium
after the page's scripts ran:

* **No literal ``**``** in the rendered text outside code and math. CommonMark opens ``**`` only where it is
  not followed by punctuation unless preceded by a space or punctuation, so ``的**{term}`x`**是`` shows both
  markers (``scripts/i18n.py check`` catches it in the catalogues; this catches what reaches the page).
* **No English in the chrome**: the sidebar's part captions, the code-cell toggles (their text and ARIA
  names, the fold buttons' hints), every ``aria-label``, ``title``, ``placeholder`` and tooltip of the page,
  the header, the footer, the previous/next links and the window title. Allowed: the reviewed names in
  ``ALLOWED`` (products, file types, the key Ctrl, the link to the English edition), acronyms, and the
  bibliography's tooltips (authors and paper titles). Figures, alt texts and the explorers' frames are not
  checked here.

``test_the_checks_catch_english_chrome_and_literal_stars`` feeds both checks a page with each defect.
"""

from __future__ import annotations

import re

import pytest
from test_browser import BUILD, EDITIONS, browser, server, toc_pages  # noqa: F401 (fixtures)

ZH = EDITIONS["zh_CN"]

#: Latin words the Chinese chrome may show (reviewed): names, file types, keys, the other edition's link.
ALLOWED = {
    "PyTorch",
    "Transformer",
    "FLOPs",
    "GiB",
    "Llama",
    "mha",
    "English",
    "Glossary",  # the glossary's title, 术语表 / Glossary: the page gives each term's English
    "Ctrl",
    "md",
    "pdf",
    "ipynb",
    "softmax",
}

#: What the chrome says (outside the article's prose), each as [where, text], and every rendered text
#: run of the article that shows a literal ``**``.
CHROME_AND_STARS = r"""() => {
  const found = [];
  const add = (where, text) => { if (text && text.trim()) found.push([where, text.trim()]); };
  document.querySelectorAll('.bd-sidebar-primary .caption-text').forEach(e => add('part caption', e.textContent));
  document.querySelectorAll('details.hide > summary').forEach(e => {
    add('code-cell toggle', e.textContent); add('code-cell toggle aria-label', e.getAttribute('aria-label'));
  });
  document.querySelectorAll('button.toggle-button').forEach(e => {
    add('fold button aria-label', e.getAttribute('aria-label')); add('fold button hint', e.dataset.toggleHint);
  });
  const attributes = ['aria-label', 'title', 'placeholder', 'data-bs-title', 'data-tooltip'];
  for (const e of document.querySelectorAll('*')) {
    if (e.closest('figure.mha-explorer') || e.matches('img')) continue;  // explorers and alt texts: not yet
    const href = e.getAttribute('href') || '';
    for (const name of attributes) {
      if (name === 'title' && href.includes('references.html')) continue;  // a citation's authors and title
      if (e.hasAttribute(name)) add(name + ' of <' + e.tagName.toLowerCase() + '>', e.getAttribute(name));
    }
  }
  for (const selector of ['.bd-header', '.bd-footer', '.bd-footer-article', '.bd-footer-content', 'footer',
                          '.prev-next-area', '.header-article-items']) {
    document.querySelectorAll(selector).forEach(e => add(selector, e.textContent));
  }
  add('window title', document.title);
  const stars = [];
  const skip = 'pre, code, kbd, script, style, textarea, .highlight, .math, .katex, mjx-container, math';
  const walker = document.createTreeWalker(document.querySelector('article') || document.body, NodeFilter.SHOW_TEXT);
  for (let node; (node = walker.nextNode());) {
    if (node.textContent.includes('**') && !node.parentElement.closest(skip)) stars.push(node.textContent.trim());
  }
  return {chrome: found, stars: stars};
}"""

WORD = re.compile(r"[A-Za-z][A-Za-z'’]*")


def english_words(text: str) -> list[str]:
    """The Latin words of ``text`` that are neither in ``ALLOWED`` nor acronyms (GPU, PDF, KV)."""
    return [w for w in WORD.findall(text) if w not in ALLOWED and not (w.isupper() and len(w) <= 5)]


def english_in_chrome(chrome: list[list[str]]) -> list[str]:
    return sorted({f"{where}: {text[:80]!r}" for where, text in chrome if english_words(text)})


def read_page(browser, url: str) -> dict:  # noqa: F811 (browser is the fixture's value)
    page = browser.new_page()
    try:
        page.goto(url, wait_until="load")
        return page.evaluate(CHROME_AND_STARS)
    finally:
        page.close()


@pytest.mark.parametrize("page_name", toc_pages())
def test_chinese_page_has_chinese_chrome_and_no_literal_stars(page_name, server, browser):  # noqa: F811
    if not (BUILD / ZH / f"{page_name}.html").exists():
        pytest.fail(f"_build/{ZH}/{page_name}.html is missing: run `make book-zh`")
    found = read_page(browser, f"{server}/{ZH}/{page_name}.html")
    assert not found["stars"], f"{page_name}: bold shown as literal ** in {found['stars'][:5]}"
    captions = [text for where, text in found["chrome"] if where == "part caption"]
    assert captions and all(re.search(r"[\u4e00-\u9fff]", c) for c in captions), captions
    toggles = [text for where, text in found["chrome"] if where == "code-cell toggle"]
    if page_name == "book/04_build_it_yourself":  # every step's solution is folded under a toggle
        assert len(toggles) >= 6 and all(t.split() == ["显示代码", "隐藏代码"] for t in toggles), toggles
    english = english_in_chrome(found["chrome"])
    assert not english, f"{page_name}: English in the chrome of the Chinese edition:\n" + "\n".join(english)


def test_the_checks_catch_english_chrome_and_literal_stars(browser):  # noqa: F811
    """Each defect the test above looks for, on one page: both checks must report it."""
    page = browser.new_page()
    try:
        page.set_content(
            """<html><head><title>1. 为什么一个头不够 — Multi-head attention</title></head><body>
            <div class="bd-header"><input placeholder="Search this book..." aria-label="搜索本书"></div>
            <div class="bd-sidebar-primary"><p class="caption"><span class="caption-text">The course</span></p></div>
            <article class="bd-article">
            <p>词序要靠**<a href="glossary.html">位置编码</a>**进来，见 <code>a**2</code>。</p>
            <details class="hide"><summary aria-label="Toggle hidden content"><p>Show code cell source</p></summary>
            </details>
            <button class="toggle-button" aria-label="显示或隐藏内容" data-toggle-hint="Click to show"></button>
            <a href="references.html#x" title="Ashish Vaswani. Attention is all you need.">[1]</a>
            <a href="notation.html" title="Link to this heading">#</a></article>
            <footer class="bd-footer">作者： The mha course team · PyTorch · GPU</footer></body></html>"""
        )
        found = page.evaluate(CHROME_AND_STARS)
    finally:
        page.close()
    assert found["stars"] == ["词序要靠**", "**进来，见"], found["stars"]
    english = "\n".join(english_in_chrome(found["chrome"]))
    for defect in (
        "part caption: 'The course'",
        "code-cell toggle: 'Show code cell source'",
        "code-cell toggle aria-label: 'Toggle hidden content'",
        "fold button hint: 'Click to show'",
        "placeholder of <input>: 'Search this book...'",
        "title of <a>: 'Link to this heading'",
        ".bd-footer: '作者： The mha course team · PyTorch · GPU'",
        "window title: '1. 为什么一个头不够 — Multi-head attention'",
    ):
        assert defect in english, f"{defect!r} not reported:\n{english}"
    assert "Vaswani" not in english and "搜索本书" not in english
    assert english_words("作者： mha 课程团队 · PyTorch 的 GPU 与 .ipynb") == []
