"""Math typeset when the book is built, in both editions: no math script on any page.

Every formula of the book (MyST ``$...$``, ``$$...$$``, amsmath environments, ``{math}`` blocks) is
rendered to HTML by KaTeX while Sphinx writes the page: ``sphinxcontrib-katex`` (PyPI) with
``katex_prerender`` runs npm's ``katex`` (package.json, installed by ``make install`` with ``npm ci``)
in one Node process for the whole build. A page then carries each formula twice: KaTeX's HTML, which
the eye reads, and its MathML (``output: htmlAndMathml``), which a screen reader reads; it loads
KaTeX's CSS and fonts from the book itself (``_static/katex/``) and no script that typesets. Before this, MathJax 3
typeset every page in the reader's browser: 1.5-1.7 s of main-thread time on the math-heavy chapters
and a 13-22 px jump of the text when it finished (scripts/measure_math.py measures both).

What this extension adds to sphinxcontrib-katex:

* the KaTeX it runs is the npm package (``node_modules/katex``), not the copy inside the PyPI
  package, so the CSS and fonts the pages load are those of the KaTeX that wrote the HTML;
* a formula KaTeX cannot typeset is a build warning that names the page and the formula (``make
  book`` treats warnings as errors), instead of red TeX on the page (sphinxcontrib-katex's default);
* ``static/mha_formulas.js`` (1 kB, no typesetting) makes a formula that scrolls in its box a Tab
  stop, and only such a formula (``static/mha_book.css``, "math", makes it scroll and show that it does);
* a page with math asks, in its head before its CSS, for the KaTeX fonts its formulas use (``fonts_used``:
  the two every formula needs, and those its classes call for, such as big delimiters' Size1-4 or
  AMS): otherwise they arrived after the first layout, and formulas laid out first in a fallback font
  grew and moved the text (the pretrained-heads page: layout shift 0.045, 0.0003 with two fonts preloaded; the others
  a formula uses, for the same reason: the multi-head-math chapter's big delimiters are drawn in Size1-3);
* only KaTeX's CSS and its WOFF2 fonts are copied into the book (every browser the book supports
  reads WOFF2): about 0.3 MB, where the MathJax the book loaded took 3 MB;
* a KaTeX server that is slow or gone never fails the build (:class:`KaTeXProcess`). On a loaded 2-core
  machine 3 builds in 9 failed on the book's first formula (``'n = 5': [Errno 111] Connection
  refused``): Node creates the server's Unix socket file when it binds and accepts connections only
  once it listens, and sphinxcontrib-katex connects as soon as the file exists, once. Here the
  connection is retried until the server listens (60 s at most, not 5), a formula whose answer does
  not come (a server that died or hangs) is sent again to a new server (3 tries, 30 s each), a server
  that failed to start is killed, and the last one is stopped when the build ends, failed or not.
  A formula KaTeX cannot read is still an error: that answer comes back and is not retried.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from docutils import nodes
from sphinx.errors import ExtensionError
from sphinx.util import logging

logger = logging.getLogger(__name__)

#: npm's KaTeX (package.json at the root of the repository; ``make install`` runs ``npm ci``).
ROOT = Path(__file__).resolve().parent.parent
KATEX_DIST = ROOT / "node_modules" / "katex" / "dist"
#: Where the pages find KaTeX's CSS and fonts (under ``_static/``); _config.yml's ``katex_css_path``.
KATEX_STATIC = "katex"

#: KaTeX's options for every formula. ``throwOnError`` turns a formula KaTeX cannot read into an
#: error this extension reports; ``htmlAndMathml`` keeps the MathML a screen reader reads.
KATEX_OPTIONS = {"throwOnError": True, "output": "htmlAndMathml", "strict": "ignore"}

#: ``src:`` of a KaTeX @font-face: WOFF2, WOFF and TrueType, of which the book keeps the first.
FONT_SOURCES = re.compile(
    r'(url\(fonts/[^)]+\.woff2\) format\("woff2"\)),url\([^)]+\.woff\)[^;}]*?format\("truetype"\)'
)
#: KaTeX's fonts nearly every formula uses (upright text and digits; italic letters).
PRELOADED_FONTS = ("KaTeX_Main-Regular.woff2", "KaTeX_Math-Italic.woff2")
#: The other fonts, each with the classes of KaTeX's HTML that draw in it (katex.min.css): a class
#: alone, or all the classes of a tuple on one element (``sizing size3`` is a font size, not a font).
FONTS_BY_CLASS = {
    "KaTeX_AMS-Regular.woff2": ("amsrm", "mathbb", "textbb"),
    "KaTeX_Main-Bold.woff2": ("mathbf", "textbf"),
    "KaTeX_Main-Italic.woff2": ("mathit", "textit"),
    "KaTeX_Math-BoldItalic.woff2": ("boldsymbol",),
    "KaTeX_Caligraphic-Regular.woff2": ("mathcal",),
    "KaTeX_Fraktur-Regular.woff2": ("mathfrak", "textfrak"),
    "KaTeX_Script-Regular.woff2": ("mathscr", "textscr"),
    "KaTeX_SansSerif-Regular.woff2": ("mathsf", "textsf"),
    "KaTeX_Typewriter-Regular.woff2": ("mathtt", "texttt"),
    "KaTeX_Size1-Regular.woff2": (("delimsizing", "size1"), "delim-size1", ("op-symbol", "small-op")),
    "KaTeX_Size2-Regular.woff2": (("delimsizing", "size2"), ("op-symbol", "large-op")),
    "KaTeX_Size3-Regular.woff2": (("delimsizing", "size3"),),
    "KaTeX_Size4-Regular.woff2": (("delimsizing", "size4"), "delim-size4"),
}
CLASS_ATTRIBUTE = re.compile(r'class="([^"]*)"')


class KaTeXProcess:
    """One KaTeX server (sphinxcontrib-katex's ``katex-server.js`` under Node) and its Unix socket.

    :meth:`render` sends one formula; when the server does not answer (gone, hung, or not yet
    listening) the caller starts a new one (:func:`render_latex`). Nothing is left behind:
    :meth:`stop` kills the process and removes its folder, and may be called more than once.
    """

    #: Seconds for Node to start and listen (sphinxcontrib-katex waits 5, too little on a busy machine).
    STARTUP_TIMEOUT = 60.0
    #: Seconds for one formula's answer (sphinxcontrib-katex: 5).
    RENDER_TIMEOUT = 30.0
    LENGTH = None  # set in setup(): sphinxcontrib-katex's 32-bit length prefix (struct.Struct)

    def __init__(self, command: list[str]):
        self.rundir = Path(tempfile.mkdtemp(prefix="mha-katex-"))
        self.path = self.rundir / "katex.sock"
        self.process = subprocess.Popen([*command, "--socket", str(self.path)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, cwd=self.rundir)  # fmt: skip
        try:
            self.sock = connect(self.path, self.STARTUP_TIMEOUT, self.process)
        except BaseException:
            self.stop()
            raise

    def render(self, request: dict) -> dict:
        """KaTeX's answer to one request; ``ConnectionError`` or ``TimeoutError`` when none comes."""
        data = json.dumps(request).encode("utf-8")
        deadline = time.monotonic() + self.RENDER_TIMEOUT
        self.sock.settimeout(self.RENDER_TIMEOUT)
        self.sock.sendall(self.LENGTH.pack(len(data)) + data)
        (length,) = self.LENGTH.unpack(self._read(self.LENGTH.size, deadline))
        return json.loads(self._read(length, deadline).decode("utf-8"))

    def _read(self, size: int, deadline: float) -> bytes:
        chunks, received = [], 0
        while received < size:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"KaTeX did not answer within {self.RENDER_TIMEOUT:.0f} s")
            self.sock.settimeout(remaining)
            chunk = self.sock.recv(size - received)
            if not chunk:
                raise ConnectionError("the KaTeX server closed the connection")
            chunks.append(chunk)
            received += len(chunk)
        return b"".join(chunks)

    def stop(self) -> None:
        sock = getattr(self, "sock", None)
        if sock is not None:
            sock.close()
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()
        shutil.rmtree(self.rundir, ignore_errors=True)


def connect(path: Path, timeout: float, process: subprocess.Popen | None = None) -> socket.socket:
    """A connection to the Unix socket at ``path``, retried until its server listens.

    A server's socket file exists from the moment it binds; until it listens, ``connect`` is refused
    (``ECONNREFUSED``). Raises ``TimeoutError`` after ``timeout`` seconds, or ``ConnectionError`` at
    once when ``process`` has exited."""
    deadline = time.monotonic() + timeout
    while True:
        if process is not None and process.poll() is not None:
            raise ConnectionError(f"the KaTeX server exited with code {process.returncode} before it listened")
        if path.exists():
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(str(path))
                return sock
            except (ConnectionRefusedError, FileNotFoundError):
                sock.close()
        if time.monotonic() > deadline:
            raise TimeoutError(f"the KaTeX server did not listen on {path} within {timeout:.0f} s")
        time.sleep(0.005)


#: The server of this build (started at the first formula), and how many were started.
_server: KaTeXProcess | None = None
SERVERS_STARTED = []
#: Tries per formula before the build fails on it.
TRIES = 3


def render_latex(latex: str, options: dict | None = None) -> str:
    """What sphinxcontrib-katex's ``render_latex`` does, on a server that is restarted when it fails."""
    import sphinxcontrib.katex as katex

    global _server
    request = {"latex": latex, "katex_options": {**katex.KATEX_DEFAULT_OPTIONS, **(options or {})}}
    failures = []
    for _ in range(TRIES):
        try:
            if _server is None:
                _server = KaTeXProcess(katex.KaTeXServer.build_command())
                SERVERS_STARTED.append(_server.process.pid)
            response = _server.render(request)
        except (OSError, TimeoutError, ValueError) as error:  # no answer: a new server, and again
            failures.append(f"{type(error).__name__}: {error}")
            stop_server()
            continue
        if "html" in response:
            return response["html"]
        raise katex.KaTeXError(response.get("error", "unknown response from the KaTeX server"))
    raise katex.KaTeXError(f"no KaTeX server answered in {TRIES} tries ({'; '.join(failures)})")


def stop_server(app=None, exception=None) -> None:
    """Stops this build's KaTeX server (at the end of the build, and before a restart)."""
    global _server
    if _server is not None:
        _server.stop()
        _server = None


def fonts_used(body: str) -> list[str]:
    """The KaTeX fonts the formulas of a page body draw in: ``PRELOADED_FONTS``, then ``FONTS_BY_CLASS``'s."""
    elements = {frozenset(value.split()) for value in CLASS_ATTRIBUTE.findall(body)}
    classes = set().union(*elements) if elements else set()

    def drawn(rule) -> bool:
        return rule in classes if isinstance(rule, str) else any(set(rule) <= element for element in elements)

    return [*PRELOADED_FONTS, *(font for font, rules in FONTS_BY_CLASS.items() if any(map(drawn, rules)))]


def configure(app, config) -> None:
    """Points sphinxcontrib-katex at npm's KaTeX (its server ``require``s this file)."""
    if config.html_math_renderer != "katex":
        return
    katex_js = KATEX_DIST / "katex.min.js"
    if not katex_js.is_file():
        raise ExtensionError(f"KaTeX is not installed ({katex_js} is missing): run `make install` (it runs `npm ci`)")
    config.katex_js_path = str(katex_js)
    import sphinxcontrib.katex as katex

    katex.KATEX_DEFAULT_OPTIONS = dict(KATEX_OPTIONS)


def _checked(visit, closing: str):
    """Wraps a sphinxcontrib-katex visitor: a formula KaTeX rejects becomes a warning with its place."""

    def visit_checked(self, node):
        try:
            visit(self, node)
        except nodes.SkipNode:
            raise
        except Exception as error:  # sphinxcontrib.katex.KaTeXError, with KaTeX's message
            latex = node.astext()
            logger.warning("KaTeX cannot typeset %r: %s", latex, error, location=node, type="mha", subtype="katex")
            self.body.append(f'<span class="katex-error" title="{html.escape(str(error))}">{html.escape(latex)}</span>')
            self.body.append(closing)
            raise nodes.SkipNode from None

    return visit_checked


def copy_katex_assets(app, exc) -> None:
    """Copies KaTeX's CSS (WOFF2 fonts only) and its WOFF2 fonts into ``_static/katex``."""
    if exc is not None or app.builder.format != "html" or app.config.html_math_renderer != "katex":
        return
    # MathJax, which the builds that typeset math in the browser copied here (Sphinx keeps what an
    # earlier build wrote)
    shutil.rmtree(Path(app.outdir) / "_static" / "mathjax", ignore_errors=True)
    target = Path(app.outdir) / "_static" / KATEX_STATIC
    shutil.rmtree(target, ignore_errors=True)
    (target / "fonts").mkdir(parents=True)
    css = (KATEX_DIST / "katex.min.css").read_text(encoding="utf-8")
    css, fonts = FONT_SOURCES.subn(r"\1", css)
    if fonts == 0 or ".woff)" in css or ".ttf)" in css:
        raise ExtensionError("KaTeX's CSS no longer lists its fonts as this extension expects (FONT_SOURCES)")
    (target / "katex.min.css").write_text(css, encoding="utf-8")
    for font in re.findall(r"url\(fonts/([^)]+\.woff2)\)", css):
        shutil.copy2(KATEX_DIST / "fonts" / font, target / "fonts" / font)


def preload_fonts(app, pagename, templatename, context, doctree) -> None:
    """Puts the fonts the page's formulas use in the head of a page that has math (``metatags`` precede the CSS)."""
    if app.config.html_math_renderer != "katex" or not app.env.get_domain("math").has_equations(pagename):
        return
    links = "".join(
        f'<link rel="preload" href="{context["pathto"](f"_static/{KATEX_STATIC}/fonts/{font}", 1)}" as="font" '
        'type="font/woff2" crossorigin>'
        for font in fonts_used(context.get("body", ""))
    )
    context["metatags"] = context.get("metatags", "") + "\n    " + links


def setup(app):
    import atexit

    app.setup_extension("sphinxcontrib.katex")
    import sphinxcontrib.katex as katex

    # formulas go to this module's server (the visitors call the module-level render_latex)
    KaTeXProcess.LENGTH = katex.KaTeXServer.LENGTH_STRUCT
    katex.render_latex = render_latex
    app.connect("build-finished", stop_server, priority=900)
    atexit.register(stop_server)

    app.registry.html_inline_math_renderers["katex"] = (_checked(katex.html_visit_math, "</span>"), None)
    app.registry.html_block_math_renderers["katex"] = (_checked(katex.html_visit_displaymath, "</div>"), None)
    app.connect("config-inited", configure)
    # A formula that scrolls is a Tab stop (it typesets nothing; see the file)
    app.add_js_file("mha_formulas.js", defer="defer")
    app.connect("html-page-context", preload_fonts)
    app.connect("build-finished", copy_katex_assets)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
