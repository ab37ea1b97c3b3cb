"""Two editions of the book from one source: English (``make book``) and Chinese (``make book-zh``).

The Chinese edition is Sphinx's standard internationalisation: the same notebooks, with every
translatable message of the prose replaced by its translation from
``locales/zh_CN/LC_MESSAGES/<page>.po`` (``language: zh_CN`` in the configuration that
``scripts/i18n.py`` writes for that build). This extension adds three things:

* **What is not translated.** Code cells, their stored outputs and display math are left out of
  the message catalogues, so the Chinese edition shows the very same outputs (the numbers can
  never disagree) and a translator is never asked to copy a matrix.
* **Explorer labels.** The explorers are self-contained HTML in the stored outputs. Their
  captions, control labels and notes are swapped for the translations in
  ``locales/zh_CN/explorers.json`` (English text -> Chinese text); the frames stay the same.
* **Explorer values.** What a control echoes (the ``<output>`` beside it, a live region a screen
  reader announces, and a slider's ``aria-valuetext``) and the labels its script echoes from are
  translated with the same table: a dropdown that shows 名词 also says 名词, not noun.
* **Printed outputs.** What the code printed is translated from ``locales/zh_CN/outputs.json``, numbers
  copied and table columns re-aligned (``mha_outputs``).
* **Code comments.** The comments and docstrings of the code a page shows, from
  ``locales/zh_CN/comments.json`` (``scripts/code_comments.py``); the code itself is unchanged.
* **Checker verdicts.** A verdict's stored output carries its Chinese text in the output's metadata
  (the same checks, run once; the phrasebooks ``mha/chapters/<topic>/zh_CN.json``): the Chinese edition shows that text.
* **The chrome in the reader's language.** The sidebar's part captions come from the page's
  catalogue (Jupyter Book inserts the toctrees after Sphinx's own translation step, so this
  extension translates their captions itself); the theme's labels, tooltips and ARIA names, the
  code-cell toggles and the author in the footer are set in Chinese (``ZH_CHROME``), where the
  theme and its extensions have no Chinese of their own (or Taiwan's, 列印成 PDF).
* **A link to the other edition** at the top of every page: the same page in the other language.
  The English edition is built into ``_build/html``, the Chinese one into ``_build/html-zh``;
  the link is relative, so it works wherever the two folders are published side by side.

The Chinese search index is Sphinx's own: with ``jieba`` installed (``pyproject.toml``, the book's
extra) Sphinx segments the Chinese text into words, so that a search for 注意力 finds its pages.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from docutils import nodes
from mha_alts import alt_phrases, translate_alt, translate_value_lists
from mha_outputs import outputs_two_columns, translate_outputs
from sphinx import addnodes
from sphinx.locale import init as init_locale
from sphinx.transforms import SphinxTransform
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util.i18n import docname_to_domain

#: The output folder of each edition, under ``_build/``, and the name of the link to it.
EDITIONS = {"en": ("html", "English"), "zh_CN": ("html-zh", "中文")}
#: The explorer labels' translations, per language, relative to the book's root.
EXPLORER_LABELS = "locales/{language}/explorers.json"


def edition(app) -> str:
    """``"en"`` or ``"zh_CN"``: which edition this build makes."""
    return "zh_CN" if (app.config.language or "en").startswith("zh") else "en"


class KeepOutputsUntranslated(SphinxPostTransform):
    """Marks code, stored outputs and display math as not translatable.

    It runs on the doctree the gettext builder extracts messages from (after myst-nb has chosen
    each output's MIME type), so none of them reaches a catalogue.
    """

    default_priority = 900

    def run(self, **kwargs) -> None:
        for node in self.document.findall(nodes.math_block):
            node["translatable"] = False
        for container in self.document.findall(nodes.container):
            if str(container.get("nb_element", "")).startswith("cell_code"):
                for element in container.findall(nodes.TextElement):
                    element["translatable"] = False


class TranslateToctreeCaptions(SphinxTransform):
    """Translates the captions of the toctrees (the sidebar's parts: 课程, 深入专题, 参考).

    Sphinx translates a toctree's caption in its ``Locale`` transform (priority 20), but Jupyter
    Book's toctrees are inserted later, from ``_toc.yml`` (``sphinx_external_toc``, priority 100):
    the gettext build extracts their captions, and the translated build never used them.
    """

    default_priority = 105

    def apply(self, **kwargs) -> None:
        if edition(self.app) == "en":
            return
        toctrees = [node for node in self.document.findall(addnodes.toctree) if node.get("caption")]
        if not toctrees:
            return
        domain = docname_to_domain(self.env.docname, self.config.gettext_compact)
        dirs = [str(Path(self.env.srcdir, directory)) for directory in self.config.locale_dirs]
        catalog, found = init_locale(dirs, self.config.language, domain)
        for node in toctrees if found else ():
            translated = catalog.gettext(node["caption"])
            if translated and translated != node["caption"]:
                node["rawcaption"] = node["caption"]
                node["caption"] = translated


#: What the theme and its extensions write in English (or in Taiwan's Chinese) on every page of the
#: Chinese edition: attribute values (tooltips, ARIA names, placeholders) and the code-cell toggles.
ZH_CHROME = {
    "Search this book...": "搜索本书……",
    "Main": "主导航",
    "Page": "本页导航",
    "Toggle primary sidebar": "显示或隐藏目录",
    "Toggle secondary sidebar": "显示或隐藏本页目录",
    "Color mode": "颜色模式",
    "System Settings": "跟随系统",
    "Light": "浅色",
    "Dark": "深色",
    "Link to this heading": "链接到此标题",
    "Link to this term": "链接到此术语",
    "Link to this image": "链接到此图片",
    "Link to this table": "链接到此表格",
    "Link to this code": "链接到此代码",
    "Link to this equation": "链接到此公式",
    "Link to this definition": "链接到此定义",
    "Toggle hidden content": "显示或隐藏内容",
    "列印成 PDF": "打印为 PDF",
    "Show code cell source": "显示代码",
    "Hide code cell source": "隐藏代码",
    "Show code cell outputs": "显示输出",
    "Hide code cell outputs": "隐藏输出",
    "Show code cell content": "显示单元格",
    "Hide code cell content": "隐藏单元格",
}
#: Settings of the theme and its extensions in the Chinese edition.
ZH_SETTINGS = {"togglebutton_hint": "点击显示", "togglebutton_hint_hide": "点击隐藏"}
ZH_AUTHOR = "mha 课程团队"
CHROME_ATTRIBUTE = re.compile(r'\b(aria-label|title|placeholder|data-bs-title|data-tooltip)="([^"]*)"')
CHROME_TOGGLE = re.compile(r'(<p class="(?:collapsed|expanded) admonition-title">)([^<]*)(</p>)')
HOME_ALT = re.compile(r'(<img [^>]*alt="[^"]*) - Home"')
#: A citation's "et al." (sphinxcontrib-bibtex's author-year style), as d2l-zh writes it: Vaswani 等, 2017.
ET_AL = re.compile(r'(<a [^>]*href="[^"]*references\.html#[^"]*"[^>]*>[^<]*?) ?<em>et al\.</em>')


def translate_chrome(page_html: str, table: dict[str, str]) -> str:
    """``page_html`` with the theme's English attribute values and code-cell toggles from ``table``."""

    def swap(match):
        text = html.unescape(match.group(2))
        if text not in table:
            return match.group(0)
        return f'{match.group(1)}="{html.escape(table[text], quote=True)}"'

    page_html = CHROME_ATTRIBUTE.sub(swap, page_html)
    page_html = CHROME_TOGGLE.sub(
        lambda m: m.group(1) + html.escape(table.get(m.group(2), m.group(2))) + m.group(3), page_html
    )
    page_html = ET_AL.sub(r"\1 等", page_html)
    return HOME_ALT.sub(r'\1 - 首页"', page_html)


def chrome_settings(app, config) -> None:
    """The Chinese edition's search placeholder, toggle hints and author (the footer's 作者)."""
    if edition(app) == "en":
        return
    config.html_theme_options = {
        **(config.html_theme_options or {}),
        "search_bar_text": ZH_CHROME["Search this book..."],
    }
    for name, value in ZH_SETTINGS.items():
        if name in config:
            setattr(config, name, value)
    config.author = ZH_AUTHOR
    app.add_js_file(None, body=ZH_TOGGLE_SCRIPT)


#: sphinx-togglebutton writes its button's ARIA name in its script, when the page has loaded.
ZH_TOGGLE_SCRIPT = (
    # (the selector's single quotes keep translate_chrome from rewriting it)
    "window.addEventListener('load', () => document.querySelectorAll(\"[aria-label='Toggle hidden content']\")"
    f".forEach(button => button.setAttribute('aria-label', '{ZH_CHROME['Toggle hidden content']}')));"
)


def chrome_in_chinese(app, exception) -> None:
    """Rewrites the theme's English in every page of the Chinese edition."""
    if exception is not None or edition(app) == "en" or app.builder.format != "html":
        return
    out = Path(app.outdir)
    for page in out.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        translated = translate_chrome(text, ZH_CHROME)
        if translated != text:
            page.write_text(translated, encoding="utf-8")


def load_explorer_labels(app) -> dict[str, str]:
    """English -> translated text of the explorers' labels for this build (empty in English)."""
    if not hasattr(app, "mha_explorer_labels"):
        app.mha_explorer_labels = read_explorer_labels(app)
    return app.mha_explorer_labels


def read_explorer_labels(app) -> dict[str, str]:
    language = edition(app)
    if language == "en":
        return {}
    path = Path(app.srcdir) / EXPLORER_LABELS.format(language=language)
    if not path.exists():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


#: The parts of an explorer's HTML (mha.viz.widgets) that a reader reads: title, control labels,
#: options of a select, the note on a stored explorer, the caption.
EXPLORER_PARTS = {
    "title": re.compile(r'(<div id="mha-explorer-[^"]*-title"[^>]*>)(.*?)(</div>)', re.S),
    "label": re.compile(r'(<label for="mha-explorer-[^"]*"[^>]*>)(.*?)(</label>)', re.S),
    "option": re.compile(r"(<option [^>]*>)(.*?)(</option>)", re.S),
    "note": re.compile(r'(<p class="mha-explorer-note"[^>]*>)(.*?)(</p>)', re.S),
    "caption": re.compile(r"(<figcaption[^>]*>)(.*?)(</figcaption>)", re.S),
}
#: The grid sentence every caption ends with (mha.viz.controls.grid_description), and its translation.
GRID = re.compile(r"Precomputed for (\d+) (?:(combinations) of values \(([^)]*)\)|values?): (.*)\.$", re.S)
GRID_ZH = {
    None: "预先计算了 {count} 个取值：{parts}。",
    "combinations": "预先计算了 {count} 种取值组合（{sizes}）：{parts}。",
}
NUMBER = re.compile(r"^[-+]?[\d.,]+(e[-+]?\d+)?$")


def split_caption(caption: str) -> tuple[str, str]:
    """``(the explorer's own caption, the grid sentence)`` of a figcaption's text."""
    at = caption.find("Precomputed for ")
    return (caption, "") if at < 0 else (caption[:at].rstrip(), caption[at:])


def explorer_strings(page_html: str) -> list[str]:
    """Every English string of the explorers in ``page_html`` that the Chinese edition translates."""
    found = []
    for part, pattern in EXPLORER_PARTS.items():
        for match in pattern.finditer(page_html):
            text = html.unescape(match.group(2)).strip()
            if part == "caption":
                text, grid = split_caption(text)
                parsed = GRID.match(grid)
                if parsed:
                    found += [p.split(" \N{ELEMENT OF} ")[0] for p in parsed.group(4).split("; ")]
            if text and not NUMBER.match(text):
                found.append(text)
    return sorted(set(found))


def translate_explorer_html(page_html: str, labels: dict[str, str], phrases=()) -> str:
    """``page_html`` with every explorer string that ``labels`` translates replaced (frames untouched), and
    the frames' alt texts translated with the phrasebook ``phrases`` (``mha_alts``)."""

    def tr(text: str) -> str:
        return labels.get(text.strip(), text) or text

    def grid_sentence(grid: str) -> str:
        parsed = GRID.match(grid)
        if not parsed:
            return grid
        count, kind, sizes, parts = parsed.groups()
        names = []
        for p in parts.split("; "):
            name, _, values = p.partition(" \N{ELEMENT OF} ")
            names.append(f"{tr(name)} \N{ELEMENT OF} {values}")
        parts = translate_value_lists("；".join(names), labels)  # {名词, 动词}: as the dropdowns show them
        return GRID_ZH[kind].format(count=count, sizes=sizes, parts=parts)

    def replace(part):
        def swap(match):
            text = html.unescape(match.group(2))
            if part == "caption":
                own, grid = split_caption(text)
                own = tr(own) if own else ""
                # two Chinese sentences join with no space after the 。 (one after a Latin word ending)
                joiner = "" if re.search(r"[\u3000-\u303f\uff00-\uffef\u4e00-\u9fff]$", own) else " "
                text = joiner.join(t for t in (own, grid_sentence(grid)) if t)
            else:
                text = tr(text)
            return match.group(1) + html.escape(text, quote=False) + match.group(3)

        return swap

    for part, pattern in EXPLORER_PARTS.items():
        page_html = pattern.sub(replace(part), page_html)
    return translate_explorer_values(page_html, tr, lambda alt: translate_alt(alt, phrases, labels) if phrases else alt)


#: What an explorer echoes for its current value: the ``<output>`` beside a control (a live
#: region: a screen reader announces it), a slider's ``aria-valuetext``, and the labels in its
#: data, from which its script writes both when a control moves.
EXPLORER_VALUES = {
    "output": re.compile(r'(<output id="mha-explorer-[^"]*-value"[^>]*>)(.*?)(</output>)', re.S),
    "valuetext": re.compile(r'(<input type="range" id="mha-explorer-[^"]*"[^>]*? aria-valuetext=")([^"]*)(")'),
}
EXPLORER_ALT = re.compile(r'(<img class="mha-explorer-frame"[^>]*? alt=")([^"]*)(")')
EXPLORER_DATA = re.compile(r'(<script type="application/json" id="mha-explorer-[^"]*-data">)(.*?)(</script>)', re.S)


def translate_explorer_values(page_html: str, tr, alt=lambda text: text) -> str:
    """The explorers' echoed values translated with ``tr`` (a dropdown's 名词, not noun), and their frames'
    alt texts with ``alt``; frames untouched."""

    def swap(match):
        text = tr(html.unescape(match.group(2)))
        return match.group(1) + html.escape(text, quote=match.re is EXPLORER_VALUES["valuetext"]) + match.group(3)

    def swap_labels(match):
        data = json.loads(match.group(2))
        labels = [[tr(label) for label in values] for values in data.get("labels", [])]
        alts = [alt(text) for text in data.get("alts", [])]
        if labels == data.get("labels", []) and alts == data.get("alts", []):
            return match.group(0)
        data["labels"] = labels
        if alts:
            data["alts"] = alts
        # as mha.viz.widgets writes it: ASCII JSON that cannot close its <script>
        text = json.dumps(data, separators=(",", ":"), ensure_ascii=True)
        text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
        return match.group(1) + text + match.group(3)

    for pattern in EXPLORER_VALUES.values():
        page_html = pattern.sub(swap, page_html)
    page_html = EXPLORER_ALT.sub(
        lambda m: m.group(1) + html.escape(alt(html.unescape(m.group(2))), quote=True) + m.group(3), page_html
    )
    return EXPLORER_DATA.sub(swap_labels, page_html)


def translate_explorers(app, doctree, docname) -> None:
    """Swaps the English labels in the explorers' HTML for this edition's (frames unchanged)."""
    labels = load_explorer_labels(app)
    if not labels:
        return
    phrases = alt_phrases(app.srcdir, edition(app))
    for raw in list(doctree.findall(nodes.raw)):
        text = raw.astext()
        if "mha-explorer" in text:
            translated = translate_explorer_html(text, labels, phrases)
            raw.replace_self(nodes.raw(raw.rawsource, translated, format=raw.get("format", "html")))


def stored_verdicts(path: Path, language: str) -> dict[str, str]:
    """English text -> ``language``'s text of every checker verdict stored in the notebook ``path``.

    A verdict's stored output carries every edition's text in its metadata
    (``mha.chapters.checking.answers.Verdict._repr_mimebundle_``): the same checks, run once."""
    table = {}
    for cell in json.loads(path.read_text(encoding="utf-8")).get("cells", []):
        for output in cell.get("outputs", []):
            editions = output.get("metadata", {}).get("mha", {}).get("verdict", {})
            shown = output.get("data", {}).get("text/plain")
            if language in editions and shown is not None:
                table["".join(shown).strip()] = editions[language]
    return table


#: The class of a checker verdict's output on the page (mha_book.css wraps it on a phone).
VERDICT_CLASS = "mha-verdict"
#: The edition whose stored verdicts name the English ones (every verdict stores each edition's text).
VERDICT_EDITION = "zh_CN"


def translate_verdicts(app, doctree, docname) -> None:
    """Marks each stored checker verdict (``VERDICT_CLASS``) and shows it in this edition's language
    (the Chinese one: 中文判定)."""
    language = edition(app)
    path = Path(app.env.doc2path(docname))
    if path.suffix != ".ipynb":
        return
    table = stored_verdicts(path, VERDICT_EDITION if language == "en" else language)
    for block in list(doctree.findall(nodes.literal_block)) if table else ():
        text = table.get(block.astext().strip())
        if text is None:
            continue
        block["classes"].append(VERDICT_CLASS)
        shown = bind_units(text if language != "en" else block.astext())
        block.children = [nodes.Text(shown)]
        block.rawsource = shown


#: What a verdict's line never breaks inside, once a phone re-wraps it (mha_book.css): a shape or a
#: call's parentheses holding no Chinese, ``(2, 10, 4)``, ``repeat_interleave(H // G, dim=1)``, and
#: code in backticks.
UNBREAKABLE = re.compile(r"\((?:[^()\n\u2e80-\u9fff\u3000-\u303f\uff00-\uffef]|\([^()\n]*\))*\)|`[^`\n]+`")


def bind_units(text: str) -> str:
    """``text`` with the spaces inside each ``UNBREAKABLE`` run of at most ``UNIT_MAX`` characters (a
    longer one is a line of code, which may break) made no-break spaces."""
    from mha.chapters.checking.verdict_i18n import UNIT_MAX

    def bind(match):
        unit = match.group(0)
        return unit.replace(" ", "\N{NO-BREAK SPACE}") if len(unit) <= UNIT_MAX else unit

    return UNBREAKABLE.sub(bind, text)


def _code_comments():
    """``scripts/code_comments.py``, shared with the Chinese notebooks (``scripts/notebooks.py``)."""
    import sys

    scripts = str(Path(__file__).resolve().parents[1] / "scripts")
    if scripts not in sys.path:
        sys.path.insert(0, scripts)
    import code_comments

    return code_comments


def translate_comments(app, doctree, docname) -> None:
    """Shows the comments and docstrings of a page's code in this edition's language
    (``locales/<language>/comments.json``): a code cell's source, and a code block of the prose; the
    code itself, and every output, as it was."""
    language = edition(app)
    if language == "en":
        return
    comments = _code_comments()
    table = comments.load(language)
    for block in list(doctree.findall(nodes.literal_block)) if table else ():
        cell = block.parent if isinstance(block.parent, nodes.container) else None
        role = str(cell.get("nb_element", "")) if cell is not None else ""
        if role.startswith("cell_code_output") or VERDICT_CLASS in block["classes"]:
            continue
        if not role.startswith("cell_code_source") and block.rawsource != block.astext():
            continue  # a parsed literal (inline markup inside): not code
        code = block.astext()
        text = comments.translate_code(code, table, "python" if role else block.get("language", "text"))
        if text != code:
            block.children = [nodes.Text(text)]
            block.rawsource = text


#: A citation of two authors, as the bibliography's label style writes it ("Milakov and Gimelshein, 2018").
TWO_AUTHORS = re.compile(r"^([^,]+?) and ([^,]+?), (\d{4}[a-z]?)$")


def translate_citations(app, doctree, docname) -> None:
    """A citation of two authors joins them with 和 in the Chinese edition (et al. is already 等)."""
    if edition(app) == "en":
        return
    for ref in list(doctree.findall(nodes.reference)):
        text = ref.astext()
        match = TWO_AUTHORS.match(text)
        if match and len(ref.children) == 1 and isinstance(ref.children[0], nodes.Text):
            ref.children = [nodes.Text(f"{match.group(1)} 和 {match.group(2)}, {match.group(3)}")]


def other_edition_link(app, pagename, templatename, context, doctree) -> None:
    """Puts a link to the same page in the other edition at the top of the page body."""
    if app.builder.format != "html" or "body" not in context:
        return
    here = edition(app)
    there = "zh_CN" if here == "en" else "en"
    folder, name = EDITIONS[there]
    up = "../" * (pagename.count("/") + 1)
    lang = there.replace("_", "-")
    link = (
        f'<p class="mha-other-edition" style="text-align:right;margin:0 0 0.5em 0;font-size:0.9em">'
        f'<a href="{up}{folder}/{pagename}.html" hreflang="{lang}" lang="{lang}">{name}</a></p>\n'
    )
    context["body"] = link + context["body"]


def setup(app):
    app.add_post_transform(KeepOutputsUntranslated)
    app.add_transform(TranslateToctreeCaptions)
    app.connect("config-inited", chrome_settings, priority=100)  # before sphinx-togglebutton reads its hints
    app.connect("build-finished", chrome_in_chinese)
    app.connect("doctree-resolved", translate_explorers)
    app.connect("doctree-resolved", translate_verdicts)
    app.connect("doctree-resolved", translate_comments)
    app.connect("doctree-resolved", translate_citations)
    # what the code printed (mha_outputs), after the verdicts have their stored translation
    app.connect("doctree-resolved", translate_outputs, priority=600)
    app.connect("build-finished", outputs_two_columns)
    app.connect("html-page-context", other_edition_link)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
