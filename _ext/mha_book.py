"""The book's own small Sphinx extension (loaded from _config.yml: sphinx: local_extensions).

Jupyter Book 1 with Sphinx 7.4 adds the scripts that extensions register while reading the
documents (sphinx-thebe, sphinx-togglebutton) twice to every page. The duplicated
``const THEBE_JS_URL = ...`` is a JavaScript error on every page, and that script also names a
third-party URL (thebe from a CDN) although this book has no live-code button
(``launch_buttons: thebe: false``). This extension keeps one copy of each script and leaves
the unused thebe scripts out, so a page loads only files from the book itself.

It also leaves out the widget state that myst-nb embeds for notebooks executed with
``store_widget_state``: no widget manager reads it in this book (``nb_ipywidgets_js: {}``;
explorers are self-contained HTML), so it would only add tens of kilobytes to a page. The
state stays in the ``.ipynb``, where JupyterLab uses it to show the widgets without a kernel.

A book that reads on every screen and to every reader, in both editions:

* ``static/mha_book.css`` and ``static/mha_book.js`` on every page: the visible navigation
  buttons work (the themes bind only a hidden copy: pydata-sphinx-theme issue 2451), long inline
  code wraps, explorer rows wrap and their controls are 24-px targets, captions keep their
  contrast in dark mode, a second skip link reaches the table of contents;
* the logo has a dark-mode variant (``book/images/logo-dark.svg``), set here as the theme's
  ``logo.image_dark`` (Jupyter Book's ``logo:`` gives one image only);
* the theme's buttons are named by the text they show (axe: label-content-name-mismatch) and the
  bibliography's entries are list items (axe: aria-required-children);
* FontAwesome is cut to what the pages use: its 1.5 MB script (which only swaps icons for SVG)
  is left out, the theme's CSS keeps the rules of the icons the pages use, and its solid web font
  is subset to their glyphs (a few kilobytes instead of 156 kB, with fontTools, which matplotlib
  already installs).
"""

from __future__ import annotations

import html
import re
import struct
from pathlib import Path

from mha.chapters.checking.verdict_i18n import width

#: The book's own CSS and JavaScript (served from ``_static/``).
STATIC = Path(__file__).resolve().parent / "static"
#: The logo for dark mode (the light one is ``logo:`` in _config.yml).
DARK_LOGO = "book/images/logo-dark.svg"


def _is_thebe(script) -> bool:
    filename = str(getattr(script, "filename", "") or "")
    body = str(getattr(script, "attributes", {}).get("body", ""))
    return filename.endswith("sphinx-thebe.js") or "THEBE_JS_URL" in body


WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def tidy_scripts(app, pagename, templatename, context, doctree) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    thebe_on = bool(app.config.html_theme_options.get("launch_buttons", {}).get("thebe"))
    seen, kept = set(), []
    for script in scripts:
        # Same file and attributes is the same script, whatever priority it was added with.
        key = (
            str(getattr(script, "filename", script) or ""),  # None and "" both mean inline
            tuple(sorted(getattr(script, "attributes", {}).items())),
        )
        unused_state = getattr(script, "attributes", {}).get("type") == WIDGET_STATE
        if key in seen or unused_state or (not thebe_on and _is_thebe(script)):
            continue
        seen.add(key)
        kept.append(script)
    context["script_files"] = kept


#: ``//# sourceMappingURL=x.js.map`` (JavaScript) or ``/*# sourceMappingURL=x.css.map */`` (CSS).
SOURCE_MAP_COMMENT = re.compile(r"(//[#@] sourceMappingURL=[^\s]*|/\*[#@] sourceMappingURL=[^*]*\*/)")


def drop_source_maps(app, exc) -> None:
    """Removes the themes' source maps (3.3 MB of ``*.map``: only a browser's developer tools read
    them) and the ``sourceMappingURL`` comments that name them, so the book stays in its size budget
    and no page points at a missing file."""
    if exc is not None or app.builder.format != "html":
        return
    static = Path(app.outdir) / "_static"
    for source_map in static.rglob("*.map"):
        source_map.unlink()
    for asset in [*static.rglob("*.js"), *static.rglob("*.css")]:
        text = asset.read_text(encoding="utf-8", errors="surrogateescape")
        if "sourceMappingURL=" in text:
            text = SOURCE_MAP_COMMENT.sub("", text)
            asset.write_text(text, encoding="utf-8", errors="surrogateescape")


def add_static_files(app, config) -> None:
    """Serves ``static/`` (the book's CSS and JavaScript) and sets the dark-mode logo."""
    config.html_static_path.append(str(STATIC))
    if config.html_logo:
        logo = config.html_theme_options.setdefault("logo", {})
        logo.setdefault("image_light", config.html_logo)
        logo.setdefault("image_dark", DARK_LOGO)


#: Fixes to the page body, each ``(old, new)``: the accessible names and roles axe asks for.
BODY_FIXES = (
    # myst-nb names each "Show code cell source" toggle "Toggle hidden content", a name that is not
    # the text it shows (label-content-name-mismatch): without aria-label its name is that text.
    ('<summary aria-label="Toggle hidden content">', "<summary>"),
    # docutils puts the bibliography's entries, role="doc-biblioentry" (deprecated), in a
    # role="list", which may only hold list items (aria-required-children, critical).
    ('role="doc-biblioentry"', 'role="listitem"'),
)


#: Inline code in the page body (docutils writes ``<code class="docutils literal notranslate">``).
INLINE_CODE = re.compile(r'(<code class="docutils literal[^"]*">)(.*?)(</code>)', re.S)
WORD = re.compile(r"[A-Za-z0-9]")
CJK_TEXT = re.compile(r"[\u3000-\u30ff\u4e00-\u9fff\uff00-\uffef]")
#: Where a code name may break (mha_book.css gives it a zero-width space as its content).
SEAM = '<span class="mha-seam"></span>'


def seam_at(text: str, i: int) -> bool:
    """May a line break between ``text[i - 1]`` and ``text[i]`` of a code name? Only at a seam."""
    before, a, b = text[i - 2] if i > 1 else "", text[i - 1], text[i]

    def word(c):
        return bool(c) and WORD.fullmatch(c) is not None

    if a == "_":
        return word(b) and (word(before) or before == "_")  # batch_|size
    if a == ".":
        return bool(re.fullmatch(r"[A-Za-z_)\]]", before)) and bool(re.fullmatch(r"[A-Za-z_]", b))  # torch.|nn, not 0.5
    if a == "/":
        return word(before) and word(b)
    if a in "(,=":
        return i > 1 and b not in " \t\n)(,="  # f(|x, need=|False
    return a.islower() and a.isascii() and b.isupper() and b.isascii()  # Multihead|Attention


def add_code_seams(body: str) -> str:
    """Marks each seam of the text in the body's inline code (see ``seam_at``) with ``SEAM``.

    A code name then breaks only there (mha_book.css lets it break nowhere else), never
    "batc/h_siz/e" on a phone. The mark is an empty span whose CSS content, a zero-width space, is
    the break opportunity: unlike ``<wbr>`` it can be switched off where a name has room, in a
    table on a wide screen (where ``num_/layers`` wrapped in a narrow column), and like it, it is
    not copied with the code. Done when the book is built: the script that did it after the page's
    first layout moved the lines it re-wrapped (layout shift up to 0.12 on a slowed phone)."""

    def seams(text: str) -> str:
        plain = html.unescape(text)
        cuts = [i for i in range(1, len(plain)) if seam_at(plain, i)]
        if not cuts:
            return text
        pieces = [plain[i:j] for i, j in zip([0, *cuts], [*cuts, len(plain)], strict=True)]
        return SEAM.join(html.escape(piece, quote=False) for piece in pieces)

    def one(code: re.Match) -> str:
        if CJK_TEXT.search(code.group(2)):  # a checker's word in Chinese (正确): kept on one line
            return code.group(1).replace('class="', 'class="mha-nowrap ', 1) + code.group(2) + code.group(3)
        inner = re.sub(r"(?<=>)([^<]+)|^([^<]+)", lambda m: seams(m.group(0)), code.group(2))
        return code.group(1) + inner + code.group(3)

    return INLINE_CODE.sub(one, body)


#: An image of the page body without a height (Sphinx: ``<img alt=... src="../_images/NAME" style="width: Wpx;" />``).
UNSIZED_IMAGE = re.compile(r'<img\b(?![^>]*\sheight=)(?=[^>]*\ssrc="[^"]*_images/([^"/]+)")')
#: CSS pixels per SVG length unit (matplotlib writes its figures' sizes in pt).
SVG_UNITS = {"": 1.0, "px": 1.0, "pt": 4 / 3, "in": 96.0, "cm": 96 / 2.54, "mm": 9.6 / 2.54}


def image_size(path: Path) -> tuple[int, int] | None:
    """The size in CSS pixels ``path`` (a PNG, or an SVG with a size or a viewBox) is drawn at; ``None``: unknown."""
    head = path.read_bytes()[:4096]
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return struct.unpack(">II", head[16:24])
    svg = re.search(rb"<svg\b[^>]*>", head)
    if svg is None:
        return None
    tag = svg.group(0).decode("utf-8", "replace")
    size = [re.search(rf'\s{name}="([0-9.]+)(px|pt|in|cm|mm|)"', tag) for name in ("width", "height")]
    if all(size):
        return tuple(round(float(m.group(1)) * SVG_UNITS[m.group(2)]) for m in size)
    box = re.search(r'\sviewBox="[-0-9.]+[ ,]+[-0-9.]+[ ,]+([0-9.]+)[ ,]+([0-9.]+)"', tag)
    return (round(float(box.group(1))), round(float(box.group(2)))) if box else None


def size_images(body: str, files: dict[str, Path]) -> str:
    """Gives each image of ``body`` its own width and height (``files``: its name in ``_images/`` -> its file).

    An image that had none was 0 px high until its file arrived: on a busy machine the multi-head-math
    chapter's first figure arrived after the first layout and pushed the text below it off the screen (layout shift
    0.053-0.068). With them the browser keeps the image's place, at its aspect ratio, from the start;
    the page's CSS still sets the width (``style``, ``max-width``) and ``mha_book.css`` the height to auto.
    """

    def one(image: re.Match) -> str:
        path = files.get(image.group(1))
        size = image_size(path) if path is not None and path.is_file() else None
        return f'<img width="{size[0]}" height="{size[1]}"' if size else image.group(0)

    return UNSIZED_IMAGE.sub(one, body)


#: How much text comes before a table on a reader's first screen, at most, in display columns (a CJK
#: character counts 2): a phone's first screen holds about 1,200 (27 lines of 45). In this book the tables
#: on the first screen (1280x900 or 390x844) start after at most 860 columns, and the next ones after 1,354.
FIRST_SCREEN_COLUMNS = 1200
#: Marks the end of the tables on the first screen; the head asks the browser to wait for it.
FIRST_SCREEN_END = '<span id="mha-first-screen-end"></span>'
FIRST_SCREEN_WAIT = '<link rel="expect" href="#mha-first-screen-end" blocking="render">'


def text_columns(fragment: str) -> int:
    """The display columns of the text a reader sees in an HTML ``fragment`` (a formula's MathML left out)."""
    fragment = re.sub(r'<span class="katex-mathml">.*?</span>', "", fragment, flags=re.S)
    return width(" ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split()))


def wait_for_first_tables(body: str) -> str | None:
    """``body`` with ``FIRST_SCREEN_END`` after the last table that begins on the first screen; ``None``: none does.

    A table's columns are as wide as its widest cells, rows that are not parsed yet included: on a
    busy machine the browser drew the notation page while its first tables were half parsed, and
    their columns moved when the rest arrived (layout shift 0.02-0.08). With ``FIRST_SCREEN_WAIT``
    in the head, Chromium draws the page first once those tables are complete (other browsers
    ignore it); pages without a table near their top are drawn as soon as before.
    """
    ends = [
        table.end()
        for table in re.finditer(r"<table\b.*?</table>", body, flags=re.S)
        if text_columns(body[: table.start()]) < FIRST_SCREEN_COLUMNS
    ]
    return body[: ends[-1]] + FIRST_SCREEN_END + body[ends[-1] :] if ends else None


#: Punctuation that may not start a line, bound to the inline formula before it (English and
#: full-width Chinese), and opening brackets bound to the formula after them.
CLOSING = ",.;:!?)]}%\u2019\u201d\uff0c\u3002\uff1a\uff1b\uff09\u3001\uff01\uff1f\u300d\u300f\u300b\u3011"
OPENING = "([{\u2018\u201c\uff08\u300c\u300e\u300a\u3010"
INLINE_MATH = re.compile(r'<span class="math[" ]')
SPAN_TAG = re.compile(r"<span\b|</span>")
#: What binds a formula to its punctuation: mha_book.css keeps it on one line.
BIND = '<span class="mha-bind">'


def _span_end(body: str, start: int) -> int:
    depth = 0
    for tag in SPAN_TAG.finditer(body, start):
        depth += 1 if tag.group(0) == "<span" else -1
        if depth == 0:
            return tag.end()
    return -1


def bind_punctuation(body: str) -> str:
    """Keeps the punctuation after an inline formula (and an opening bracket before it) on the
    formula's line: a formula is an unbreakable box, and the browser would otherwise start a line
    with the comma or the full-width 。 that follows it ("(8 × 4" then ")")."""
    out, last = [], 0
    for match in INLINE_MATH.finditer(body):
        start = match.start()
        if start < last:
            continue  # inside a formula already bound
        end = _span_end(body, start)
        if end < 0:
            break
        # the first punctuation mark only: the line-breaking rules keep the marks after it together
        after = end + 1 if end < len(body) and body[end] in CLOSING else end
        before = start - 1 if start > last and body[start - 1] in OPENING else start
        if after == end and before == start:
            continue
        out.append(body[last:before] + BIND + body[before:after] + "</span>")
        last = after
    return "".join(out) + body[last:]


def fix_body(app, pagename, templatename, context, doctree) -> None:
    body = context.get("body")
    if body:
        for old, new in BODY_FIXES:
            body = body.replace(old, new)
        images = getattr(app.builder, "images", {})  # source path (from srcdir) -> its name in _images/
        files = {name: Path(app.srcdir) / source for source, name in images.items()}
        body = bind_punctuation(size_images(add_code_seams(body), files))
        waiting = wait_for_first_tables(body)
        if waiting is not None:
            body = waiting
            context["metatags"] = context.get("metatags", "") + "\n    " + FIRST_SCREEN_WAIT
        context["body"] = body


#: Text of the second skip link, per language (the theme translates its own, "Skip to main content").
SKIP_TO_CONTENTS = {"en": "Skip to the table of contents", "zh": "跳转至目录"}
#: The colour theme a page starts in, chosen in its head as the theme's script will choose it
#: (pydata-sphinx-theme's ``setTheme``): the mode a reader chose, or for "auto" the system's.
THEME_NOW = (
    "document.documentElement.dataset.theme = /^(light|dark)$/.test(document.documentElement.dataset.mode)\n"
    "      ? document.documentElement.dataset.mode\n"
    '      : (window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light");'
)
#: Fixes to what the theme's templates write on every page, as ``(pattern, replacement)``; each
#: leaves a page it has already fixed unchanged.
TEMPLATE_FIXES = (
    # FontAwesome's script (1.5 MB) only swaps each <i class="fa-..."> for an SVG: the theme's CSS
    # and web font already draw the same icons.
    (
        re.compile(
            r'\s*<!-- So that users can add custom icons -->\s*<script defer src="[^"]*fontawesome\.js[^"]*"></script>'
        ),
        "",
    ),
    # The search field's button shows "Search Ctrl+K" but is named "Search": named by its text.
    (re.compile(r'(<button class="btn search-button-field[^"]*"[^>]*?) aria-label="[^"]*"'), r"\1"),
    # The page head set ``data-theme`` to "auto" on a first visit (and for a reader who chose
    # "auto"), which no CSS rule reads: the page drew in light colours with both logos until the
    # theme's deferred script chose light or dark 0.5-1.5 s later, and the sidebar then moved up
    # by the dark logo's height (layout shift 0.13-0.15) and a dark system flashed light. The head
    # now chooses as that script will: the reader's choice, else the system's setting.
    (
        re.compile(r'document\.documentElement\.dataset\.theme = localStorage\.getItem\("theme"\) \|\| "auto";'),
        THEME_NOW,
    ),
    # The logo had no size until its SVG arrived: on a busy machine the sidebar below it moved down by its
    # height after the first layout (layout shift 0.01). Its width and height (the SVG's own, 240 x 80)
    # give it its aspect ratio from the start; the theme's CSS still scales it to the sidebar.
    (
        re.compile(r'(<img src="[^"]*logo(?:-dark)?\.svg" class="logo__image[^"]*")(?! width=)'),
        r'\1 width="240" height="80"',
    ),
)
SKIP_LINK = re.compile(
    r'(<div id="pst-skip-link" class="skip-link d-print-none"><a href="#main-content">[^<]*</a>)(</div>)'
)


def fix_templates(app, exc) -> None:
    """Applies ``TEMPLATE_FIXES`` and adds the second skip link to every page written."""
    if exc is not None or app.builder.format != "html":
        return
    language = "zh" if (app.config.language or "en").startswith("zh") else "en"
    skip = rf'\1<a class="mha-skip-contents" href="#pst-primary-sidebar">{SKIP_TO_CONTENTS[language]}</a>\2'
    outdir = Path(app.outdir)
    for page in outdir.rglob("*.html"):
        if "_static" in page.relative_to(outdir).parts:
            continue
        text = page.read_text(encoding="utf-8")
        fixed = SKIP_LINK.sub(skip, text)
        for pattern, replacement in TEMPLATE_FIXES:
            fixed = pattern.sub(replacement, fixed)
        if fixed != text:
            page.write_text(fixed, encoding="utf-8")


#: One icon of FontAwesome's catalogue in the theme's CSS: ``.fa-bars:before,.fa-navicon:before{content:"\f0c9"}``.
ICON_RULE = re.compile(r'((?:\.fa-[a-z0-9-]+:before,?)+)\{content:"\\([0-9a-f]+)"\}')
ICON_CLASS = re.compile(r"\bfa-[a-z0-9-]+")
SOLID_FONT = "vendor/fontawesome/webfonts/fa-solid-900"
SOLID_FONT_SRC = (
    f'url(../{SOLID_FONT}.woff2) format("woff2"),url(../{SOLID_FONT}.ttf) format("truetype")',
    f'url(../{SOLID_FONT}-subset.woff) format("woff")',
)


def icon_codepoints(text: str) -> set[int]:
    """FontAwesome's private-use code points written in ``text`` (as characters or CSS escapes)."""
    found = {ord(c) for c in text if 0xE000 <= ord(c) <= 0xF8FF}
    return found | {int(h, 16) for h in re.findall(r"\\([ef][0-9a-f]{3})\b", text)}


def cut_fontawesome(app, exc) -> None:
    """Keeps only the FontAwesome the book uses: no script, the used icons' CSS rules, a subset font."""
    if exc is not None or app.builder.format != "html":
        return
    static = Path(app.outdir) / "_static"
    for name in ("scripts/fontawesome.js", "scripts/fontawesome.js.LICENSE.txt"):
        (static / name).unlink(missing_ok=True)
    css_path = static / "styles" / "pydata-sphinx-theme.css"
    css = css_path.read_text(encoding="utf-8")
    if SOLID_FONT_SRC[0] not in css:  # already cut in an earlier build
        return
    used = set()
    for path in [*Path(app.outdir).rglob("*.html"), *static.rglob("*.js")]:
        used |= set(ICON_CLASS.findall(path.read_text(encoding="utf-8", errors="replace")))

    def keep_used(rule):
        classes = re.findall(r"\.(fa-[a-z0-9-]+):before", rule.group(1))
        return rule.group(0) if used.intersection(classes) else ""

    kept = ICON_RULE.sub(keep_used, css)
    glyphs = {int(code, 16) for code in re.findall(r'content:"\\([0-9a-f]+)"', kept)}
    glyphs |= icon_codepoints(ICON_RULE.sub("", css))  # the themes' own icons (admonitions, ...)
    glyphs |= icon_codepoints((static / "styles" / "sphinx-book-theme.css").read_text(encoding="utf-8"))

    from fontTools import subset

    font = subset.load_font(str(static / f"{SOLID_FONT}.ttf"), subset.Options())
    options = subset.Options()
    options.flavor = "woff"
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=sorted(glyphs))
    subsetter.subset(font)
    subset.save_font(font, str(static / f"{SOLID_FONT}-subset.woff"), options)
    for suffix in (".woff2", ".ttf"):
        (static / f"{SOLID_FONT}{suffix}").unlink()
    css_path.write_text(kept.replace(*SOLID_FONT_SRC), encoding="utf-8")


def setup(app):
    app.connect("config-inited", add_static_files)
    app.add_css_file("mha_book.css")
    app.add_js_file("mha_book.js", defer="defer")
    app.connect("html-page-context", tidy_scripts, priority=900)
    app.connect("html-page-context", fix_body)
    app.connect("build-finished", drop_source_maps)
    app.connect("build-finished", fix_templates)
    app.connect("build-finished", cut_fontawesome)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
