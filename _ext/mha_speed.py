"""Pages a phone shows at once (loaded from _config.yml: local_extensions).

Measured with ``scripts/measure_pages.py`` (a phone on Lighthouse's slow network, gzip as a static
host sends it), in both editions:

* **Nothing but the page's CSS blocks the first paint.** The head's scripts are deferred (they ran
  before the page was drawn; each waited a round trip), Sphinx's small ``documentation_options.js``
  is written into the page (an inline script after it reads it), and the search index
  (``searchindex.js``, 90 kB, 155 kB in Chinese) with its tools is loaded by the search page only:
  the theme's search field sends its query there (``search_as_you_type`` is off).
* **One stylesheet.** The head's 12 stylesheets and ``theme.css``'s ``@import`` become one file per
  set of sheets, named by its content (``_static/mha-page-<hash>.css``), each ``url()`` rewritten
  for its new place.
* **Only the rules a page can use.** The merged sheet keeps a rule only where each class and id
  its selector names occurs somewhere in the book's pages or scripts (a word of any HTML page or
  any ``_static`` script: a superset of what a script may add later); at-rules other than
  ``@media``/``@supports`` are kept whole. The themes ship Bootstrap whole: 497 kB of CSS (77 kB
  gzipped) became 162 kB (29 kB); the phone screenshots of ten pages, light, dark, the menus open,
  are the same to the pixel.
* **Explorer frames as files.** An explorer's frames were base64 data in the page (0.46-0.51 MB of a
  chapter's HTML, which compresses badly and arrived before the text below it). Each frame is now a
  file, ``_images/frames/<hash>.<ext>``, named by its bytes, so the two editions share the frames
  they have in common and a reader's cache keeps them; ``mha_book.js`` fetches an explorer's frames
  when it comes near the screen, so a control still answers at once.
* **A section is drawn when the reader nears it** (``content-visibility: auto``, mha_book.css): a
  chapter of 15-36 thousand elements, most of them KaTeX's, held a phone's main thread for up to
  0.75 s of blocking (style, layout and paint) while it arrived; now at most 0.17 s on any page.
  ``mha_formulas.js`` checks a box for a scroll when its section
  is drawn, and the theme's own scan at load, which read every code block's size and so laid out the
  whole page in one task, is given nothing to scan (``without_theme_scan``).
* **Images below the first two screens load lazily** (``loading="lazy"``): an image counts as below
  when more than ``FIRST_SCREEN_COLUMNS`` display columns of text come before it. Every image keeps
  its width and height, so nothing moves when it arrives.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from pathlib import Path

from mha_book import text_columns

#: The search page's own scripts, which other pages no longer load.
SEARCH_SCRIPTS = ("searchtools.js", "language_data.js", "searchindex.js")
#: A script element of the head that names a file.
SCRIPT = re.compile(r'<script(?P<attrs>[^>]*?)\ssrc="(?P<src>[^"]+)"(?P<rest>[^>]*)></script>')
STYLESHEET = re.compile(r'<link(?=[^>]*\brel="stylesheet")[^>]*\bhref="(?P<href>[^"]+)"[^>]*/?>\s*')
IMPORT = re.compile(r'@import\s+(?:url\()?\s*["\']?(?P<ref>[^"\')\s;]+)["\']?\s*\)?\s*;')
URL = re.compile(r'url\(\s*(?P<q>["\']?)(?P<ref>[^"\')]+)(?P=q)\s*\)')
CHARSET = re.compile(r'@charset\s+"[^"]*";')
#: A frame of an explorer, as ``mha.viz.widgets`` writes it (and ``mha_figures`` swaps it).
FRAME_URI = re.compile(r"data:image/(webp|png);base64,([A-Za-z0-9+/=]+)")
FRAMES = "_images/frames"
#: An image of the page body, without a ``loading`` attribute yet (the whole tag).
IMAGE = re.compile(r"<img\b(?![^>]*\bloading=)[^>]*>")
#: The theme's scan, on the window's load, of every code block and output for a scroll (to make it a
#: Tab stop): it reads each one's size, so the browser lays out the whole page in one task, sections
#: it had left for later included (``content-visibility``). ``mha_formulas.js`` checks each box
#: instead when the browser lays it out; the scan is left with nothing to scan.
THEME_SCAN = re.compile(
    r"""\[\s*["']pre["']\s*,\s*["']\.nboutput > \.output_area["'][^\]]*\]\.join\(\s*["'], ["']\s*\)"""
)
THEME_SCRIPT = "_static/scripts/pydata-sphinx-theme.js"
#: About the text of a phone's first two screens (a phone line holds about 45 columns, a screen 40 lines).
FIRST_SCREEN_COLUMNS = 3600


def _relative_root(pagename: str) -> str:
    return "../" * pagename.count("/")


def write_once(path: Path, data: bytes) -> None:
    """Writes ``data`` to ``path`` unless it exists, through a temporary file renamed into place, so
    that a build writing pages in parallel never leaves a half-written file."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".{os.getpid()}.part")
        temporary.write_bytes(data)
        temporary.replace(path)


def frames_as_files(body: str, outdir: Path, root: str) -> str:
    """``body`` with each explorer frame's data URI replaced by a file of ``FRAMES`` (written once)."""

    def one(match: re.Match) -> str:
        data = base64.b64decode(match.group(2))
        name = f"{hashlib.sha256(data).hexdigest()[:20]}.{match.group(1)}"
        write_once(outdir / FRAMES / name, data)
        return f"{root}{FRAMES}/{name}"

    return FRAME_URI.sub(one, body) if "data:image/" in body else body


def lazy_images(body: str) -> str:
    """Marks every figure image after the first screens' text ``loading="lazy"`` (an explorer's frame
    is left to ``mha_book.js``, which fetches an explorer's frames as it nears the screen)."""
    out, last = [], 0
    for match in IMAGE.finditer(body):
        if "mha-explorer-frame" in match.group(0) or text_columns(body[: match.start()]) <= FIRST_SCREEN_COLUMNS:
            continue
        end = match.end() - (2 if match.group(0).endswith("/>") else 1)
        out.append(body[last:end].rstrip() + ' loading="lazy"')
        last = end
    return "".join(out) + body[last:]


def write_body(app, pagename, templatename, context, doctree) -> None:
    body = context.get("body")
    if body and app.builder.format == "html":
        body = frames_as_files(body, Path(app.outdir), _relative_root(pagename))
        context["body"] = lazy_images(body)


def _file_of(href: str, page: Path) -> Path:
    return (page.parent / href.split("?", 1)[0].split("#", 1)[0]).resolve()


def css_for(sheet: Path, into: Path, seen: set[Path] | None = None) -> str:
    """``sheet``'s CSS with its ``@import``s written in and every ``url()`` relative to ``into``."""
    seen = set() if seen is None else seen
    if sheet in seen:
        return ""
    seen.add(sheet)
    text = CHARSET.sub("", sheet.read_text(encoding="utf-8"))

    def imported(match: re.Match) -> str:
        return css_for((sheet.parent / match.group("ref")).resolve(), into, seen)

    def rebased(match: re.Match) -> str:
        ref = match.group("ref").strip()
        if re.match(r"^(data:|[a-z]+://|/|#)", ref):
            return match.group(0)
        path, _, rest = ref.partition("?")
        moved = os.path.relpath((sheet.parent / path).resolve(), into).replace(os.sep, "/")
        return f'url("{moved}{"?" + rest if rest else ""}")'

    text = URL.sub(rebased, text)  # first: the imported sheets rebase their own
    return IMPORT.sub(imported, text)


#: A class or id a selector names (outside ``:not(...)`` and ``[...]``, whose names need not occur).
NAMED = re.compile(r"[.#](-?[_a-zA-Z][\w-]*)")
WORDS = re.compile(r"[\w-]+")
#: Selectors left whole: what a simple reading of their names could get wrong.
KEEP_WHOLE = re.compile(r":(is|where|has)\(|\\")


def _blocks(css: str):
    """The top-level statements of ``css`` (its comments taken out): ``(prelude, body)`` for a block,
    ``(statement, None)`` for one that ends with a semicolon."""
    i, start, n = 0, 0, len(css)
    while i < n:
        c = css[i]
        if c in "\"'":
            end = i + 1
            while end < n and css[end] != c:
                end += 2 if css[end] == "\\" else 1
            i = end + 1
            continue
        if c == ";":
            yield css[start : i + 1].strip(), None
            start = i = i + 1
            continue
        if c == "{":
            depth, j = 1, i + 1
            while j < n and depth:
                if css[j] in "\"'":
                    q, j = css[j], j + 1
                    while j < n and css[j] != q:
                        j += 2 if css[j] == "\\" else 1
                depth += {"{": 1, "}": -1}.get(css[j], 0)
                j += 1
            yield css[start:i].strip(), css[i + 1 : j - 1]
            start = i = j
            continue
        i += 1


def _selector_used(selector: str, used: set[str]) -> bool:
    if KEEP_WHOLE.search(selector):
        return True
    plain = re.sub(r":not\([^)]*\)|\[[^\]]*\]", "", selector)
    return all(name in used for name in NAMED.findall(plain))


def purge_css(css: str, used: set[str]) -> str:
    """``css`` with the rules no page can match left out (see the module's docstring)."""
    out = []
    for prelude, body in _blocks(re.sub(r"/\*.*?\*/", "", css, flags=re.S)):
        prelude = prelude.strip()
        if body is None:
            if prelude:
                out.append(prelude)
        elif prelude.startswith(("@media", "@supports", "@layer", "@container")):
            inner = purge_css(body, used)
            if inner.strip():
                out.append(f"{prelude}{{{inner}}}")
        elif prelude.startswith("@") or any(_selector_used(s, used) for s in prelude.split(",")):
            out.append(f"{prelude}{{{body}}}")
    return "\n".join(out)


def used_words(outdir: Path) -> set[str]:
    """Every word of the book's pages and scripts: the classes and ids a page may carry."""
    words: set[str] = set()
    for path in [*outdir.rglob("*.html"), *(outdir / "_static").rglob("*.js")]:
        words |= set(WORDS.findall(path.read_text(encoding="utf-8", errors="replace")))
    return words


def merge_stylesheets(page: Path, outdir: Path, head: str, merged: dict) -> str:
    """``head`` with its stylesheets replaced by one (written to ``_static/`` once per set)."""
    links = list(STYLESHEET.finditer(head))
    if len(links) < 2 or any("media=" in m.group(0) and 'media="all"' not in m.group(0) for m in links):
        return head
    sheets = tuple(_file_of(m.group("href"), page) for m in links)
    if not all(s.is_file() and outdir in s.parents for s in sheets):
        return head
    if sheets not in merged:
        static = outdir / "_static"
        text = "\n".join(css_for(sheet, static, set()) for sheet in sheets)
        if "used" not in merged:
            merged["used"] = used_words(outdir)
        text = purge_css(text, merged["used"])
        name = f"mha-page-{hashlib.sha256(text.encode()).hexdigest()[:12]}.css"
        (static / name).write_text(text, encoding="utf-8")
        merged[sheets] = static / name
    href = os.path.relpath(merged[sheets], page.parent).replace(os.sep, "/")
    first, last = links[0], links[-1]
    return (
        head[: first.start()]
        + f'<link rel="stylesheet" type="text/css" href="{href}" />\n    '
        + "".join(head[a.end() : b.start()] for a, b in zip(links, links[1:]))
        + head[last.end() :]
    )


def fast_head(head: str, page: Path, outdir: Path, is_search: bool, merged: dict) -> str:
    def script(match: re.Match) -> str:
        src, attrs = match.group("src"), match.group("attrs") + match.group("rest")
        name = src.split("?", 1)[0].rsplit("/", 1)[-1]
        if name in SEARCH_SCRIPTS and not is_search:
            return ""
        if name == "documentation_options.js":
            path = _file_of(src, page)
            if path.is_file():
                return f"<script>{path.read_text(encoding='utf-8').strip()}</script>"
        if re.search(r"\b(defer|async)\b|type=\"module\"", attrs):
            return match.group(0)
        return f'<script defer{match.group("attrs")} src="{src}"{match.group("rest")}></script>'

    # The search page keeps its scripts as the theme orders them: mha_search.js patches Sphinx's
    # searchtools.js, which the search template loads after it.
    return merge_stylesheets(page, outdir, head if is_search else SCRIPT.sub(script, head), merged)


def without_theme_scan(script: str) -> str:
    """The theme's script with its load-time scroll scan given an empty selector (``THEME_SCAN``)."""
    patched, count = THEME_SCAN.subn('":not(*)"', script)
    if count != 1 and ":not(*)" not in script:
        raise RuntimeError(
            f"mha_speed: the theme's scroll scan was found {count} times in {THEME_SCRIPT} (expected 1): "
            "pydata-sphinx-theme changed; see THEME_SCAN"
        )
    return patched


def fast_pages(app, exc) -> None:
    """Rewrites every page's head: deferred scripts, no search index, one stylesheet."""
    if exc is not None or app.builder.format != "html":
        return
    outdir = Path(app.outdir).resolve()
    theme = outdir / THEME_SCRIPT
    if theme.is_file():
        theme.write_text(without_theme_scan(theme.read_text(encoding="utf-8")), encoding="utf-8")
    merged: dict = {}
    for page in outdir.rglob("*.html"):
        if "_static" in page.relative_to(outdir).parts:
            continue
        text = page.read_text(encoding="utf-8")
        end = text.find("</head>")
        if end < 0:
            continue
        is_search = page.relative_to(outdir).as_posix() == "search.html"
        head = fast_head(text[:end], page.resolve(), outdir, is_search, merged)
        if head != text[:end]:
            page.write_text(head + text[end:], encoding="utf-8")
    written = {path for key, path in merged.items() if key != "used"}
    for stale in (outdir / "_static").glob("mha-page-*.css"):  # an earlier build's (Sphinx keeps them)
        if stale not in written:
            stale.unlink()


def setup(app):
    app.connect("html-page-context", write_body, priority=950)
    app.connect("build-finished", fast_pages, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
