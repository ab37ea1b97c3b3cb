"""The words inside a figure in the Chinese edition: every drawn string translated, numbers copied.

The book's figures and explorer frames are images, drawn once when the chapters are executed
(``scripts/execute_notebooks.py``). The Chinese edition shows a twin of each image, drawn from the
same figure with its words in Chinese:

* :func:`translate` turns one drawn string into Chinese from the phrasebooks (:func:`phrasebook`):
  ``locales/zh_CN/figure_words.json`` (this module's, tried first) and the explorers' titles and
  labels in ``locales/zh_CN/explorers.json``. A string is looked up whole, then as a template whose
  numbers and ``$math$`` are placeholders (``"head 3"`` matches ``"head {0}"``: ``"头 {0}"``), then
  line by line. Numbers and math are copied from the English string, so the editions cannot differ
  on one; a string with no translation is kept (and reported: :data:`MISSING`).
* :func:`in_chinese` is a context manager that, for the time of one drawing, sets every text
  artist of a figure (titles, labels, legends, annotations, tick labels: a tick formatter's output
  too) to its translation in the book's CJK font (:data:`FONT_FILE`, a subset of Noto Sans CJK SC
  that ``scripts/subset_cjk_font.py`` makes), then restores the figure exactly.
* :func:`write_twin` stores a twin when ``MHA_FIGURE_TWINS`` names a folder (the executing script
  sets it; nbval does not, so a checked run draws nothing twice): ``<folder>/<kind>/<sha256 of the
  English image>.<ext>`` and a sidecar ``.json`` with the English and Chinese strings drawn, which
  ``scripts/execute_notebooks.py`` gathers into ``<kind>/index.json``.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOCALE = ROOT / "locales" / "zh_CN"
#: The phrasebooks, first match wins: the figures' own words, then the explorers' labels.
PHRASEBOOKS = (LOCALE / "figure_words.json", LOCALE / "explorers.json")
FONT_FILE = Path(__file__).resolve().parent.parent / "data" / "fonts" / "MHANotoSansSC-Regular.otf"
#: ... and its bold weight (the figures' titles), beside it.
FONT_FILES = (FONT_FILE, FONT_FILE.with_name("MHANotoSansSC-Bold.otf"))
#: The subset's family name (renamed: it is not the whole Noto Sans CJK SC).
FONT_FAMILY = "MHA Noto Sans SC"
#: Environment variable naming the folder the twins are written to (``locales/zh_CN``).
TWINS_ENV = "MHA_FIGURE_TWINS"
#: Environment variable naming a file each untranslated string is appended to.
MISSING_ENV = "MHA_FIGURE_MISSING"
#: Placeholders of a template: ``$math$`` and numbers (copied, never translated).
PLACEHOLDER = re.compile(r"\$[^$]*\$|[-+\u2212]?\d+(?:,\d{3})*(?:\.\d+)?(?:e[-+]?\d+)?")
#: Strings drawn in a figure since this module was loaded that no phrasebook translates.
MISSING: set[str] = set()


#: Letters with a Unicode subscript or superscript form, for mathtext written as plain text.
SUBSCRIPTS = dict(zip("0123456789aehijklmnoprstuvx", "₀₁₂₃₄₅₆₇₈₉ₐₑₕᵢⱼₖₗₘₙₒₚᵣₛₜᵤᵥₓ"))
SUPERSCRIPTS = dict(zip("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻"))
#: mathtext commands as plain text.
TEX_WORDS = {r"\top": "T", r"\sqrt": "√", r"\cdot": "·", r"\times": "×", r"\tau": "τ", r"\,": " ", r"\ ": " "}


def _script(table: dict, mark: str):
    def replace(match):
        chars = match.group(1) if match.group(1) is not None else match.group(2)
        return "".join(table[c] for c in chars) if all(c in table for c in chars) else mark + chars

    return replace


def plain_math(text: str) -> str:
    """mathtext (``$d_{\\mathrm{model}}$``, ``$QK^\\top$``) as plain text: ``d_model``, ``QKᵀ``."""
    for tex, plain in TEX_WORDS.items():
        text = text.replace(tex, plain)
    text = re.sub(r"\\math(?:rm|default|bf|it)\{([^}]*)\}", r"\1", text)
    text = re.sub(r"_\{([^}]*)\}|_(\w)", _script(SUBSCRIPTS, "_"), text)
    text = re.sub(r"\^\{([^}]*)\}|\^(\w)", _script(SUPERSCRIPTS, "^"), text)
    return text.replace("$", "").replace("{", "").replace("}", "")


def template(text: str) -> tuple[str, list[str]]:
    """``("head {0} of {1}", ["3", "4"])`` for ``"head 3 of 4"``: the string with its numbers and
    math as numbered placeholders, and what they hold."""
    held, parts, at = [], [], 0
    for match in PLACEHOLDER.finditer(text):  # a literal brace is doubled, a held one kept as drawn
        parts.append(text[at : match.start()].replace("{", "{{").replace("}", "}}") + "{" + str(len(held)) + "}")
        held.append(match.group(0))
        at = match.end()
    parts.append(text[at:].replace("{", "{{").replace("}", "}}"))
    return "".join(parts), held


@functools.cache
def phrasebook() -> tuple[dict[str, str], dict[str, str]]:
    """``(exact, templates)``: English -> Chinese, from every phrasebook (earlier ones win)."""
    exact, templates = {}, {}
    for path in reversed(PHRASEBOOKS):
        if path.exists():
            for english, chinese in json.loads(path.read_text(encoding="utf-8")).items():
                exact[english] = chinese
                if "{0}" in english:
                    templates[english] = chinese
    return exact, templates


def _lookup(text: str) -> str | None:
    exact, templates = phrasebook()
    if text in exact and "{0}" not in text:
        return exact[text]
    shape, held = template(text)
    if held and shape in templates:
        return templates[shape].format(*held)
    if "$" in text:  # the explorers' labels write math as plain text (d_model, dₖ), as alt texts do
        return _lookup(" ".join(plain_math(text).split()))
    return None


def is_word_free(text: str) -> bool:
    """True for a string with nothing to translate: numbers, math, symbols, punctuation."""
    return not re.search(r"[A-Za-z]{2,}", PLACEHOLDER.sub("", text))


def _report(text: str) -> None:
    """Adds ``text`` to :data:`MISSING` and, once, to the file ``MHA_FIGURE_MISSING`` names."""
    if text not in MISSING:
        MISSING.add(text)
        if os.environ.get(MISSING_ENV):
            with open(os.environ[MISSING_ENV], "a", encoding="utf-8") as log:
                log.write(json.dumps(text, ensure_ascii=False) + "\n")


def translate(text: str) -> str:
    """``text`` in Chinese (see the module's docstring); as it is if nothing translates it."""
    body = text.strip()
    if not body or is_word_free(body):
        return text
    found = _lookup(body)
    if found is None and "\n" in body:
        lines = [translate(line) for line in body.split("\n")]
        found = "\n".join(lines) if lines != body.split("\n") else None
    if found is None:
        _report(body)
        return text
    return text[: len(text) - len(text.lstrip())] + found + text[len(text.rstrip()) :]


@functools.cache
def register_font() -> bool:
    """Makes the CJK subset known to matplotlib (once); False if its file is missing."""
    if not FONT_FILE.exists():
        return False
    from matplotlib import font_manager

    for path in FONT_FILES:
        if path.exists():
            font_manager.fontManager.addfont(str(path))
    return True


def drawn_texts(fig):
    """The figure's texts that are drawn: visible, not empty, not on a hidden axis."""
    from matplotlib.axes import Axes
    from matplotlib.axis import Axis
    from matplotlib.text import Text

    def walk(artist):
        if not artist.get_visible():
            return
        if isinstance(artist, Text):
            if artist.get_text().strip():
                yield artist
            return
        children = artist.get_children()
        if isinstance(artist, Axes) and not artist.axison:
            children = [c for c in children if not isinstance(c, Axis)]
        for child in children:
            yield from walk(child)

    return list(walk(fig))


def visible_texts(fig):
    """:func:`drawn_texts` less the labels of ticks outside their axis's view (kept, not drawn)."""
    drawn, ticks = set(), set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for tick in axis._update_ticks():  # the ticks matplotlib draws
                drawn.update((id(tick.label1), id(tick.label2)))
            for tick in (*axis.get_major_ticks(), *axis.get_minor_ticks()):
                ticks.update((id(tick.label1), id(tick.label2)))
    return [t for t in drawn_texts(fig) if id(t) not in ticks or id(t) in drawn]


def _axes_formatters(fig):
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            yield axis.major.formatter
            yield axis.minor.formatter


@contextlib.contextmanager
def in_chinese(fig):
    """For the time of the block, ``fig``'s words are Chinese in the CJK font; restored after."""
    import logging

    from matplotlib.text import Text

    font = FONT_FAMILY if register_font() else None
    saved, formatters = [], []
    log = logging.getLogger("matplotlib.font_manager")
    level = log.level
    log.setLevel(logging.ERROR)  # a weight the subset lacks: the nearest, without a line in the cell's output
    try:
        for formatter in dict.fromkeys(_axes_formatters(fig)):
            original = formatter.format_ticks
            formatter.format_ticks = lambda values, _f=original: [translate(s) for s in _f(values)]
            formatters.append(formatter)
        for text in fig.findobj(Text):
            saved.append((text, text.get_text(), text.get_fontproperties().copy()))
            _to_chinese(text, font)
        yield fig
    finally:
        log.setLevel(level)
        for formatter in formatters:
            del formatter.format_ticks
        for text, string, props in saved:
            text.set_text(string)
            text.set_fontproperties(props)


def _to_chinese(text, font) -> None:
    string = text.get_text()
    translated = translate(string)
    if translated != string:
        text.set_text(translated)
    if font is not None:
        families = [f for f in text.get_fontfamily() if f != font]
        # mathtext draws text outside $...$ in the first family's font alone: the CJK font first there
        text.set_fontfamily([font, *families] if "$" in translated else [*families, font])


def draw_in_chinese(fig, draw):
    """``draw(fig)`` with the figure's words in Chinese, and the ``[English, Chinese]`` strings drawn.

    The figure must have been drawn in English just before (its tick labels are set by drawing)."""
    import warnings

    english = {id(t): t.get_text() for t in visible_texts(fig)}
    with in_chinese(fig), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # a glyph the font lacks: reported, never printed in the cell
        result = draw(fig)
        pairs = [[english.get(id(t), ""), t.get_text()] for t in visible_texts(fig)]
    for warning in caught:
        _report(f"{warning.category.__name__}: {warning.message}")
    return result, pairs


def twins_folder() -> Path | None:
    """The folder twins are written to (``MHA_FIGURE_TWINS``), or None: none are drawn."""
    folder = os.environ.get(TWINS_ENV)
    return Path(folder) if folder else None


def write_twin(kind: str, english: bytes, twin: bytes, ext: str, pairs: list, size) -> Path:
    """Stores the Chinese twin of the image ``english`` under ``<MHA_FIGURE_TWINS>/<kind>/``."""
    folder = twins_folder() / kind
    folder.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(english).hexdigest()
    path = folder / f"{digest}.{ext}"
    path.write_bytes(twin)
    sidecar = {"texts": pairs, "size": list(size), "file": path.name}
    (folder / f"{digest}.json").write_text(json.dumps(sidecar, ensure_ascii=False), encoding="utf-8")
    return path


def write_rendering(folder: Path, english: bytes, image: bytes, sidecar: dict) -> Path:
    """Stores another rendering of the image ``english`` (a phone's, :mod:`mha.viz.phone`) in
    ``folder``, named by the English image's SHA-256, with its sidecar (folded by :func:`gather_twins`)."""
    folder.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(english).hexdigest()
    path = folder / f"{digest}.png"
    path.write_bytes(image)
    (folder / f"{digest}.json").write_text(json.dumps({**sidecar, "file": path.name}), encoding="utf-8")
    return path


# --------------------------------------------------------------------------------------------
# The twins a stored notebook needs
# --------------------------------------------------------------------------------------------

#: An explorer frame in a stored output's HTML (:mod:`mha.viz.widgets`): a data URI.
FRAME_URI = re.compile(r"data:image/(webp|png);base64,([A-Za-z0-9+/=]+)")
KINDS = ("figures", "frames")
#: A kind of rendering that is named by an image of another kind: a phone's rendering of a figure.
RENDERS = {"phone": "figures"}
PHONE = "phone"


def notebook_images(notebook: dict) -> dict[str, list[bytes]]:
    """``{"figures": [PNG bytes of each figure output], "frames": [bytes of each explorer frame]}``."""
    import base64

    found = {kind: [] for kind in KINDS}
    for cell in notebook.get("cells", []):
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            png = data.get("image/png")
            if png is not None:
                found["figures"].append(base64.b64decode("".join(png) if isinstance(png, list) else png))
            page = data.get("text/html")
            page = "".join(page) if isinstance(page, list) else page or ""
            if "mha-explorer-frame" in page:
                frames = dict.fromkeys(base64.b64decode(m.group(2)) for m in FRAME_URI.finditer(page))
                found["frames"] += list(frames)
    return found


def twin_index(folder: Path, kind: str) -> dict[str, dict]:
    """``<folder>/<kind>/index.json``: SHA-256 of an English image -> its twin's file, size, strings."""
    path = folder / kind / "index.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def gather_twins(folder: Path, notebooks: list[dict], kinds=KINDS) -> dict[str, tuple[int, int]]:
    """Folds the sidecars the kernels wrote into each kind's ``index.json`` and deletes every twin
    that no stored image in ``notebooks`` names. Returns ``{kind: (twins kept, images without one)}``.
    A phone rendering (kind ``phone``) is named by its figure: only a figure too small on a phone has one."""
    counts = {}
    for kind in kinds:
        images = (image for nb in notebooks for image in notebook_images(nb)[RENDERS.get(kind, kind)])
        wanted = {hashlib.sha256(image).hexdigest() for image in images}
        index = twin_index(folder, kind)
        place = folder / kind
        for sidecar in sorted(place.glob("*.json")) if place.exists() else []:
            if sidecar.name != "index.json":
                index[sidecar.stem] = json.loads(sidecar.read_text(encoding="utf-8"))
                sidecar.unlink()
        for digest in [d for d in index if d not in wanted]:
            del index[digest]
        for image in place.glob("*") if place.exists() else []:
            if image.name != "index.json" and image.stem not in index:
                image.unlink()
        if index or place.exists():
            place.mkdir(parents=True, exist_ok=True)
            text = json.dumps(dict(sorted(index.items())), ensure_ascii=False, indent=0, sort_keys=True)
            (place / "index.json").write_text(text + "\n", encoding="utf-8")
        counts[kind] = (len(index), len(wanted - set(index)))
    return counts
