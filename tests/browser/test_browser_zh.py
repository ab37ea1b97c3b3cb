"""The Chinese edition as a Chinese reader meets it: its chrome is Chinese, and no bold shows as ``**``.

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

**No English in any text of the page** (``test_chinese_page_has_no_english_outside_code_math_and_names``):
every text node (prose, headings, captions, tables, explorer titles, labels, captions and notes, verdicts,
outputs), every alt text (figures and explorer frames, the explorers' JSON ``alts`` included) and every
``aria-label``, ``title``, ``placeholder`` and tooltip, outside code, math, names, cited English and the
glossary's English terms; see ``english_on_page`` for what each kind allows and why, and ``ALLOWED_WORDS``
(``zh_text.py``, shared with ``test_outputs_zh.py``) for the reviewed list. The stored outputs are asserted
too (translated at build time by ``_ext/mha_outputs.py``), and so are the static figures' alt texts
(``mha.viz.describe.alt_text`` with the figures' own translator; a token left as drawn is quoted).
``test_the_text_check_catches_english_of_every_kind`` shows it reports each kind of defect.
"""

from __future__ import annotations

import json
import re

import pytest
from test_browser import BUILD, EDITIONS, ROOT, browser, server, toc_pages  # noqa: F401 (fixtures)

from mha.chapters.checking.verdict_i18n import english_left
from tests.zh_CN.zh_text import (  # noqa: F401 (shared with the browser-free tests of the outputs)
    ALLOWED_WORDS,
    BESIDE,
    CITED,
    CODE_LISTING,
    CODE_TOKEN,
    LATIN_WORD,
    MODEL_NAMES,
    english_in_output,
    prose_words_in,
)

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


def read_page(browser, url: str, script: str = CHROME_AND_STARS):  # noqa: F811 (browser is the fixture's value)
    """What ``script`` (a function evaluated in the page) returns on ``url`` once it has loaded."""
    page = browser.new_page()
    try:
        page.goto(url, wait_until="load")
        return page.evaluate(script)
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


# ------------------------------------------------------------------------------------------------
# Every word of the page: no English outside code, math, names and the glossary's English terms
# ------------------------------------------------------------------------------------------------

#: Every string of the page a reader (or a screen reader) meets, as [kind, where, text]. Kinds:
#: prose, headings (h1-h6, the window title, the navigation's page titles), captions (figures, tables,
#: explorers), alt texts (images and the explorers' stored frames, JSON ``alts`` included), explorer
#: strings (title, labels, options, echoed values, note), verdicts (a checker's stored output),
#: aria/title (aria-label, title, placeholder, tooltips, aria-valuetext) and outputs (everything else
#: a cell printed). Left out as code: <code>, <pre> and .highlight outside outputs, <kbd>, <samp>, the
#: cells' source; as math: .katex, <math>, .math; and the link to the other edition (its own language).
ALL_TEXT = r"""() => {
  const found = [];
  const add = (kind, where, text, cited) => {
    // an output keeps its lines (each printed line is judged alone); any other string is one line
    const flat = kind === 'outputs' ? text.replace(/[^\S\n]+/g, ' ') : text.replace(/\s+/g, ' ');
    if (text && text.trim()) found.push([kind, where, flat.trim(), !!cited]);
  };
  // a citation's authors and the bibliography (authors, titles, venues) are names
  const names = 'a[href*="references.html#"], .citation, div.bibliography, dl.citation';
  document.querySelectorAll('a[href*="references.html#"] em').forEach(e => add('prose', 'citation', e.textContent));
  const code = 'script, style, noscript, template, code, kbd, samp, textarea, .highlight, pre, .cell_input, '
             + '.katex, math, .math, mjx-container, .mha-other-edition';
  const where = e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '')
    + (e.className && typeof e.className === 'string' ? '.' + e.className.split(' ')[0] : '');
  // each output of a code cell, whole (a verdict, a printed line, a table); explorers apart
  document.querySelectorAll('.cell_output .output, .cell_output > div').forEach(e => {
    if (e.querySelector('figure.mha-explorer') || e.closest('figure.mha-explorer') || e.querySelector('img')) return;
    // a table of numbers: each header or cell is a label (a name), judged alone
    if (e.querySelector('table')) {
      e.querySelectorAll('th, td, caption').forEach(c => add('outputs', 'table cell', c.innerText));
    }
    else add('outputs', where(e), e.innerText);
  });
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node; (node = walker.nextNode());) {
    const e = node.parentElement;
    if (!e || e.closest(code) || e.closest(names)) continue;
    if (e.closest('.cell_output') && !e.closest('figure.mha-explorer')) continue;
    if (!node.textContent.trim()) continue;
    let kind = 'prose';
    if (e.closest('figure.mha-explorer')) kind = e.closest('figcaption') ? 'captions' : 'explorer strings';
    else if (e.closest('h1, h2, h3, h4, h5, h6, nav, .bd-sidebar-primary, .prev-next-area, .caption-text')) {
      kind = 'headings';
    }
    else if (e.closest('figcaption, caption, .caption')) kind = 'captions';
    add(kind, where(e), node.textContent, e.closest('em, i, q, cite'));
  }
  add('headings', 'window title', document.title);
  document.querySelectorAll('img[alt]').forEach(e => add('alt texts', where(e), e.getAttribute('alt')));
  document.querySelectorAll('script[type="application/json"][id^="mha-explorer-"]').forEach(e => {
    const data = JSON.parse(e.textContent);
    (data.alts || []).forEach((alt, i) => add('alt texts', e.id + ' alts[' + i + ']', alt));
    (data.labels || []).flat().forEach(label => add('explorer strings', e.id + ' labels', String(label)));
  });
  const attributes = ['aria-label', 'title', 'placeholder', 'data-bs-title', 'data-tooltip', 'aria-valuetext',
                      'data-toggle-hint'];
  for (const e of document.querySelectorAll('*')) {
    const href = e.getAttribute('href') || '';
    for (const name of attributes) {
      if (name === 'title' && href.includes('references.html')) continue;  // a citation's authors and title
      if (e.hasAttribute(name)) add('aria/title', name + ' of ' + where(e), e.getAttribute(name));
    }
  }
  return found;
}"""
KINDS = ("prose", "headings", "captions", "alt texts", "explorer strings", "verdicts", "aria/title", "outputs")


def glossary_terms() -> list[str]:
    """The English term each glossary entry gives beside its Chinese: 注意力（attention） -> attention."""
    page = BUILD / ZH / "book" / "glossary.html"
    if not page.exists():
        return []
    terms = re.findall(r"<dt [^>]*>[^<（]*（([^）<]+)）", page.read_text(encoding="utf-8"))
    parts = {t.strip() for term in terms for t in re.split(r",\s*|\s*/\s*", term) if t.strip()}
    return sorted(parts, key=len, reverse=True)


def english_words_in(text: str, terms: list[str], strict: bool = False) -> list[str]:
    """The English words of ``text`` that are not names, code, symbols, cited, a term beside its Chinese,
    a glossary term or in ``ALLOWED_WORDS`` (``strict``: chrome, where only ``ALLOWED`` and acronyms pass)."""
    return english_words(text) if strict else prose_words_in(text, terms)


def stored_verdict_texts(page_name: str) -> set[str]:
    """Every text (each edition's) of the checker verdicts stored in the page's notebook, spaces collapsed."""
    notebook = ROOT / f"{page_name}.ipynb"
    if not notebook.exists():
        return set()
    texts = set()
    for cell in json.loads(notebook.read_text(encoding="utf-8")).get("cells", []):
        for output in cell.get("outputs", []):
            editions = output.get("metadata", {}).get("mha", {}).get("verdict")
            if editions:
                shown = "".join(output.get("data", {}).get("text/plain", ""))
                texts |= {" ".join(t.split()) for t in [shown, *editions.values()] if t}
    return texts


def english_on_page(found: list[list[str]], verdicts: set[str], terms: list[str]) -> dict[str, list[str]]:
    """Kind -> the strings of the page that show English (as ``where: text (the words)``).

    What a cell printed is code: a tensor, a table of numbers, code's names and labels (``head 1``,
    ``torch.float32``, a table's columns), and a single Latin word there is a name; a printed source
    (``def``, a loop, a ``# (B, T, D)`` comment) is code whole, and so is an exception shown on purpose
    (``ValueError: ...``: the library's messages are English by design). A printed sentence is prose, so an
    output or a verdict (its text is one a checker stored; it names the learner's variables, ``scores``,
    ``weights``) fails on a run of two or more English words outside code, the rule that
    ``verdict_i18n.english_left`` sets for verdicts (``zh_text.english_in_output``: a line of chapter 3's
    token labels, ``TABLE_LABELS``, is a table's header). Anything else fails on one English word."""
    report: dict[str, list[str]] = {kind: [] for kind in KINDS}
    for kind, where, text, cited in found:
        if kind == "outputs" and " ".join(text.split()) in verdicts:
            kind = "verdicts"
        if cited and kind != "aria/title":
            continue
        if kind == "outputs":  # the rule tests/zh_CN/test_outputs_zh.py applies to the stored outputs, translated
            words = english_in_output(text, terms)
        elif kind == "verdicts":
            lines = [line for line in text.splitlines() if english_left(CODE_TOKEN.sub(" ", line))]
            words = [w for line in lines for w in english_words_in(line, terms)]
        else:
            words = english_words_in(text, terms, strict=kind == "aria/title")
        if words:
            report[kind].append(f"{where}: {' '.join(text.split())[:160]!r} ({' '.join(words[:8])})")
    return report


def english_report(browser, server, page_name: str) -> dict[str, list[str]]:  # noqa: F811
    if not (BUILD / ZH / f"{page_name}.html").exists():
        pytest.fail(f"_build/{ZH}/{page_name}.html is missing: run `make book-zh`")
    found = read_page(browser, f"{server}/{ZH}/{page_name}.html", ALL_TEXT)
    report = english_on_page(found, stored_verdict_texts(page_name), glossary_terms())
    figures = [s for s in report["alt texts"] if s.startswith("img: ") or s.startswith("img#")]
    report["alt texts"] = [s for s in report["alt texts"] if s not in figures]
    report["figure alt texts"] = figures
    return report


@pytest.mark.parametrize("page_name", toc_pages())
def test_chinese_page_has_no_english_outside_code_math_and_names(page_name, server, browser):  # noqa: F811
    """Every string a reader meets on the page (see ``ALL_TEXT``), the figures' alt texts included."""
    report = english_report(browser, server, page_name)
    left = {kind: found for kind, found in report.items() if found}
    assert not left, f"{page_name}: English in the Chinese edition:\n" + "\n".join(
        f"[{kind}] {line}" for kind, found in left.items() for line in found[:20]
    )


SYNTHETIC_PAGE = """<html><head><title>1. Why one head is not enough — 多头注意力</title></head><body>
<nav class="bd-sidebar-primary"><p class="caption"><span class="caption-text">The course</span></p></nav>
<article class="bd-article">
<h2>Going further</h2>
<p>多头注意力把 the heads side by side，见 <code>merge_heads(heads)</code> 与
<span class="katex">softmax over keys</span>。</p>
<p>注意力（attention）与 previous（前一词），以 “cat chases mouse” 为例；<em>the cat saw the dog</em>；
PyTorch 与 GPT-2 small。</p>
<p>参见 <a href="references.html#id3" title="Ashish Vaswani. Attention is all you need.">Vaswani
<em>et al.</em>, 2017</a>。</p>
<figure><img src="x.png" alt="Line chart of the weights"><figcaption>Each head in its own colour</figcaption></figure>
<figure class="mha-explorer"><div id="mha-explorer-x-title">Change the temperature</div>
<label for="mha-explorer-x-c0">温度 τ</label><input type="range" id="mha-explorer-x-c0" aria-valuetext="small">
<img class="mha-explorer-frame" alt="两个头的注意力权重">
<figcaption>权重 ∈ {average, concat}</figcaption>
<script type="application/json" id="mha-explorer-x-data">{"alts": ["Bar chart at temperature 1", "条形图"],
 "labels": [["平均", "concat"]]}</script></figure>
<div class="cell_output docutils container"><div class="output text_plain highlight-myst-ansi notranslate">
<div class="highlight"><pre>scaled_dot_product_attention 错误：the weights sum over the wrong axis</pre>
</div></div></div>
<div class="cell_output docutils container"><div class="output text_plain highlight-myst-ansi notranslate">
<div class="highlight"><pre>held-out accuracy 0.78 (mean of 3 seeds)
tensor([0.5, 0.5])  head 1</pre></div></div></div>
<div class="cell_output docutils container"><div class="output text_plain highlight-myst-ansi notranslate">
<div class="highlight"><pre>def forward(self, x):
    return the_layer(x)  # every line of a printed source is code</pre></div></div></div>
<div class="cell_input"><pre>print("the weights of each head")</pre></div>
<button aria-label="Toggle navigation" title="显示"></button><input placeholder="搜索本书……">
</article></body></html>"""


def test_the_text_check_catches_english_of_every_kind(browser):  # noqa: F811
    """Each kind of defect, once, on one synthetic page: each must be reported, and nothing allowed."""
    page = browser.new_page()
    try:
        page.set_content(SYNTHETIC_PAGE)
        found = page.evaluate(ALL_TEXT)
    finally:
        page.close()
    verdicts = {"scaled_dot_product_attention 错误：the weights sum over the wrong axis"}
    report = english_on_page(found, verdicts, ["attention"])
    flat = {kind: "\n".join(lines) for kind, lines in report.items()}
    expected = {
        "headings": ["The course", "Going further", "Why one head is not enough"],
        "prose": ["the heads side by side", "'et al.'"],
        "alt texts": ["Line chart of the weights", "Bar chart at temperature 1"],
        "captions": ["Each head in its own colour", "{average, concat}"],
        "explorer strings": ["Change the temperature", "'concat'"],
        "aria/title": ["Toggle navigation", "aria-valuetext"],
        "verdicts": ["the weights sum over the wrong axis"],
        "outputs": ["held-out accuracy"],
    }
    for kind, needles in expected.items():
        for needle in needles:
            assert needle in flat[kind], f"{kind}: {needle!r} not reported:\n{flat[kind]}"
    everything = "\n".join(flat.values())
    for allowed in (
        "softmax over keys",
        "merge_heads",
        "previous",
        "cat chases mouse",
        "the cat saw",
        "GPT-2 small",
        "Vaswani",
        "Attention is all",
        "两个头的注意力权重",
        "条形图",
        "def forward",
        "print(",
    ):
        assert allowed not in everything, f"{allowed!r} reported, but it is code, math, a name or cited"
    assert "注意力（attention）" not in everything and "(held out accuracy of)" in flat["outputs"]


#: A code block of a built page: the highlighter's language (``ipython3`` for a code cell) and its text.
#: A cell's outputs are classed ``output ... highlight-myst-ansi``, so they do not match.
CODE_BLOCK = re.compile(r'<div class="highlight-([\w-]+) notranslate"><div class="highlight"><pre>(.*?)</pre>', re.S)


def english_comments(page_html: str) -> list[str]:
    """The comments and docstrings of a built page's code that need a translation and have none."""
    import html as html_module
    import sys

    sys.path.insert(0, str(ROOT / "scripts"))
    import code_comments

    translations = {" ".join(t.split("\n")) for t in code_comments.load("zh_CN").values()}
    left = []
    for language, body in CODE_BLOCK.findall(page_html):
        code = html_module.unescape(re.sub(r"<[^>]+>", "", body))
        language = "python" if language in ("ipython3", "python", "default") else language
        for block in code_comments.blocks(code, language):
            chinese = re.search(r"[\u4e00-\u9fff]", block.text) or block.text in translations
            if code_comments.needs_translation(block) and not chinese:  # (a translation may be code itself)
                left.append(block.text[:80])
    return left


@pytest.mark.parametrize("page_name", toc_pages())
def test_chinese_page_shows_its_code_with_chinese_comments(page_name, server):  # noqa: F811
    """Every comment and docstring of the code a page shows (cells, folded or not, and the prose's code
    blocks) is in Chinese (``locales/zh_CN/comments.json``, applied by ``_ext/mha_i18n.py``)."""
    page = BUILD / EDITIONS["zh_CN"] / f"{page_name}.html"
    assert english_comments(page.read_text(encoding="utf-8")) == []


def test_the_comment_check_finds_an_english_comment():
    page = (
        '<div class="highlight-ipython3 notranslate"><div class="highlight"><pre>'
        '<span class="c1"># 分数：q 乘以 k</span>\nx = 1  <span class="c1"># the weights sum to 1</span>\n'
        "</pre></div></div>"
        '<div class="output text_plain highlight-myst-ansi notranslate"><div class="highlight"><pre>'
        "# printed, not code</pre></div></div>"
        '<div class="highlight-bash notranslate"><div class="highlight"><pre>make lab   # opens the chapters'
        "</pre></div></div>"
    )
    assert english_comments(page) == ["the weights sum to 1", "opens the chapters"]
