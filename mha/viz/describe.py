"""What a figure shows, in words (its alt text), and how tall its smallest text is on the page.

Every figure of the book is described by the code that drew it, from the figure itself:

* :func:`smallest_text_pt` is the size of its smallest drawn text, in points. On the page that
  text is ``points x dpi / 72 x displayed scale`` CSS pixels tall (:func:`text_px`), where the
  displayed scale is the width the page gives the image over its natural width: the book's text
  column (:data:`COLUMN_PX`) or less. The book asks for :data:`MIN_TEXT_PX` at least.
* :func:`figure_description` reads what each panel plots (kind, title, axis labels, legend,
  tick labels, a heatmap's rows and columns) and :func:`alt_text` writes it as one sentence per
  panel, in English or, with the book's translations of the titles and labels, in Chinese.

A notebook's figure output stores both with its PNG (:func:`figure_output`, which
:func:`mha.viz.plotting.use_style` makes the notebook's PNG formatter for figures): the book sets
the image's alt text from it (``_ext/mha_figures.py``) and ``tests/book/test_figure_text.py`` checks
the text's height. An explorer stores its frames' smallest text and dpi in its HTML.

matplotlib is imported inside the functions that read a figure: :func:`alt_text` works on a
stored description alone (the book's Sphinx extension uses it without drawing anything).
"""

from __future__ import annotations

import base64
import re

from . import layout
from .figure_i18n import draw_in_chinese, drawn_texts, plain_math, twins_folder, write_twin
from .phone import png_size

#: The width of the book's text column at desktop size (1280 x 800), in CSS pixels, as measured in
#: the built book: a figure output's image (``tests/browser/test_browser_figures.py`` checks it) ...
COLUMN_PX = 688
#: ... and an explorer's frame, inside the explorer's own box.
EXPLORER_COLUMN_PX = 672
#: The smallest text a figure may carry at that width (STYLE.md, rules for the book, 5).
MIN_TEXT_PX = 9.0
#: Tick labels listed in an alt text at most (a heatmap's tokens): the rest are counted.
MAX_TICKS = 16
#: Metadata key of a figure output (under ``image/png``) that holds what this module computed.
META = "mha"


def text_px(points: float, dpi: float, natural_width: float, column: float = COLUMN_PX) -> float:
    """CSS pixels of text ``points`` tall in an image drawn at ``dpi``, ``natural_width`` pixels
    wide, shown at most ``column`` CSS pixels wide (an image is never shown larger than it is)."""
    return points * dpi / 72.0 * min(1.0, column / natural_width)


def smallest_text_pt(fig) -> float:
    """The font size, in points, of the smallest text drawn in ``fig`` (``inf`` with no text)."""
    return min((text.get_fontsize() for text in drawn_texts(fig)), default=float("inf"))


# --------------------------------------------------------------------------------------------
# What a figure plots
# --------------------------------------------------------------------------------------------


def _clean(text: str) -> str:
    """A label as one line (a tick label may break over two), mathtext as plain text."""
    return " ".join((plain_math(text) if "$" in text else text).split())


def _texts(labels) -> list[str]:
    return [_clean(t.get_text()) for t in labels if t.get_visible() and t.get_text().strip()]


def _kind(ax) -> str:
    from matplotlib.collections import PathCollection
    from matplotlib.container import BarContainer, ErrorbarContainer

    if ax.images:
        return "heatmap"
    if not ax.axison:
        return "diagram"
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    if bars:
        return "horizontal bar chart" if bars[0].orientation == "horizontal" else "bar chart"
    data_lines = [line for line in ax.lines if line.get_transform() == ax.transData]  # not axhline, axvline
    if any(len(line.get_xdata()) >= 2 for line in data_lines) or any(
        isinstance(c, ErrorbarContainer) for c in ax.containers
    ):
        return "line chart"
    if any(isinstance(c, PathCollection) for c in ax.collections):
        return "scatter plot"
    if ax.patches:
        return "bar chart" if not ax.axison else "diagram"
    return "diagram"


def _title(ax) -> str:
    return _clean(" ".join(t for t in (ax.get_title("left"), ax.get_title(), ax.get_title("right")) if t.strip()))


def _axis_ticks(axis) -> list[str]:
    """The tick labels a reader sees on ``axis`` (in view, visible, not empty)."""
    low, high = sorted(axis.get_view_interval())
    shown = []
    for tick in axis.get_major_ticks():
        if low - 1e-9 <= tick.get_loc() <= high + 1e-9:
            for label in (tick.label1, tick.label2):
                if label.get_visible() and label.get_text().strip():
                    shown.append(_clean(label.get_text()))
                    break
    return shown


def panel_description(ax) -> dict:
    """``{"kind", "title", "x", "y", "series", "xticks", "yticks", "texts"}`` of one axes (panel)."""
    legend = ax.get_legend()
    visible = ax.axison
    return {
        "kind": _kind(ax),
        "title": _title(ax),
        "x": _clean(ax.get_xlabel()) if visible else "",
        "y": _clean(ax.get_ylabel()) if visible else "",
        "series": _texts(legend.get_texts()) if legend is not None and legend.get_visible() else [],
        "xticks": _axis_ticks(ax.xaxis) if visible else [],
        "yticks": _axis_ticks(ax.yaxis) if visible else [],
        "texts": _texts(ax.texts)[:MAX_TICKS] if not visible else [],  # a diagram's words
    }


#: The attribute of a figure that holds what it shows, in a sentence (:func:`finding`).
FINDING = "_mha_finding"


def finding(fig, text: str):
    """Says what ``fig`` shows, in one sentence: its alt text opens with it, before the axes, ranges
    and series (a screen reader hears the point first). Returns ``fig``.

    >>> fig = finding(plt.gcf(), "Without scaling the largest weight nears 1 as d_k grows")
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"finding must be a sentence (a non-empty str), found {text!r}")
    setattr(fig, FINDING, text.strip())
    return fig


#: What the next figure a cell shows says it shows (:func:`next_finding`), if it says nothing itself.
_NEXT_FINDING: list[str] = []


def next_finding(text: str) -> None:
    """Says what the next figure shown shows (see :func:`finding`), from a cell before the one that
    draws it: the chapter's visible code stays the drawing alone."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"finding must be a sentence (a non-empty str), found {text!r}")
    _NEXT_FINDING[:] = [text.strip()]


def figure_description(fig) -> dict:
    """What ``fig`` plots: ``{"title", "legend", "panels": [panel_description, ...]}`` (no colour bars),
    and ``"finding"`` when :func:`finding` said what it shows.

    The figure must have been drawn (tick labels are set when it is drawn)."""
    title = _clean(fig._suptitle.get_text()) if getattr(fig, "_suptitle", None) is not None else ""
    legends = [text for legend in fig.legends for text in _texts(legend.get_texts())]
    panels = [panel_description(ax) for ax in fig.axes if ax.get_visible() and not hasattr(ax, "_colorbar")]
    described = {"title": title, "legend": legends, "panels": panels}
    if getattr(fig, FINDING, None):
        described["finding"] = getattr(fig, FINDING)
    return described


# --------------------------------------------------------------------------------------------
# ... in words
# --------------------------------------------------------------------------------------------

WORDS = {
    "en": {
        "heatmap": "heatmap",
        "bar chart": "bar chart",
        "horizontal bar chart": "horizontal bar chart",
        "line chart": "line chart",
        "scatter plot": "scatter plot",
        "diagram": "diagram",
        "panels": "{count} panels",
        "same": "{count} {kind}s ({titles})",
        "same untitled": "{count} {kind}s",
        "one": "{kind}",
        "titled": "{kind} {title}",
        "against": "{y} against {x}",
        "x": "x: {x}",
        "y": "y: {y}",
        "range": "{label} ({first} to {last})",
        "ticks": "{label}: {ticks}",
        "grid": "{rows} by {cols} grid; rows {y}; columns {x}",
        "series": "series: {series}",
        "series line chart": "lines: {series}",
        "series bar chart": "bars: {series}",
        "series horizontal bar chart": "bars: {series}",
        "series scatter plot": "markers: {series}",
        "legend": "legend: {series}",
        "labels": "labelled {labels}",
        "more": "and {count} more",
        "list": ", ",
        "parts": "; ",
        "colon": ": ",
        "end": ".",
        "sep": ". ",
        "quote": "\N{LEFT DOUBLE QUOTATION MARK}{}\N{RIGHT DOUBLE QUOTATION MARK}",
    },
    "zh_CN": {
        "heatmap": "热力图",
        "bar chart": "柱状图",
        "horizontal bar chart": "横向柱状图",
        "line chart": "折线图",
        "scatter plot": "散点图",
        "diagram": "示意图",
        "panels": "{count} 个子图",
        "same": "{count} 幅{kind}（{titles}）",
        "same untitled": "{count} 幅{kind}",
        "one": "{kind}",
        "titled": "{kind}{title}",
        "against": "纵轴 {y}，横轴 {x}",
        "x": "横轴 {x}",
        "y": "纵轴 {y}",
        "range": "{label}（{first} 至 {last}）",
        "ticks": "{label}：{ticks}",
        "grid": "{rows} × {cols} 网格；行 {y}；列 {x}",
        "series": "图例：{series}",
        "legend": "图例：{series}",
        "labels": "标注：{labels}",
        "more": "另有 {count} 项",
        "list": "、",
        "parts": "；",
        "colon": "：",
        "end": "。",
        "sep": "。",
        "quote": "\N{LEFT DOUBLE QUOTATION MARK}{}\N{RIGHT DOUBLE QUOTATION MARK}",  # as d2l-zh
    },
}

_NUMBER = re.compile(r"[-+\N{MINUS SIGN}]?[\d.,]+(e[-+]?\d+)?[%×xk]?|\d+(\^-?\d+|[⁻⁰¹²³⁴⁵⁶⁷⁸⁹]+)")


def _is_number(text: str) -> bool:
    return bool(_NUMBER.fullmatch(text))


def _ticks(words, label: str, ticks: list[str]) -> str:
    """``label (first to last)`` for numbers, ``label (a, b, c)`` for words, ``label`` alone."""
    if not ticks:
        return label
    if all(_is_number(t) for t in ticks):
        return words["range"].format(label=label, first=ticks[0], last=ticks[-1]) if label else ""
    shown = ticks[:MAX_TICKS]
    listed = words["list"].join(shown)
    if len(ticks) > len(shown):
        listed += words["list"] + words["more"].format(count=len(ticks) - len(shown))
    return words["ticks"].format(label=label, ticks=listed).strip() if label else listed


def _panel_words(panel: dict, words, tr) -> str:
    """The panel's axes and series in words (no kind, no title)."""
    x, y = tr(panel["x"]), tr(panel["y"])
    ticks = {k: [tr(t) for t in panel[k]] for k in ("xticks", "yticks")}
    panel = {**panel, **ticks, "texts": [tr(t) for t in panel.get("texts", [])]}
    if panel["kind"] == "heatmap":
        rows, cols = len(panel["yticks"]), len(panel["xticks"])
        if rows and cols:
            return words["grid"].format(
                rows=rows, cols=cols, y=_ticks(words, y, panel["yticks"]), x=_ticks(words, x, panel["xticks"])
            )
    x, y = _ticks(words, x, panel["xticks"]), _ticks(words, y, panel["yticks"])
    parts = []
    if x and y:
        parts.append(words["against"].format(x=x, y=y))
    elif x or y:
        parts.append(words["x"].format(x=x) if x else words["y"].format(y=y))
    if panel["series"]:
        series = words.get("series " + panel["kind"], words["series"])
        parts.append(series.format(series=words["list"].join(tr(s) for s in panel["series"])))
    if panel.get("texts"):
        parts.append(words["labels"].format(labels=words["list"].join(panel["texts"])))
    return words["parts"].join(parts)


def alt_text(description: dict, *, language: str = "en", tr=None) -> str:
    """The alt text of a described figure: its title, then each panel (kind, title, axes, series).

    Consecutive panels that differ only in their titles (one heatmap per head) are told once.
    ``tr`` translates a title or label (the Chinese edition's ``explorers.json``; ``None``: keep it);
    tick labels go through ``tr`` too ("head 1"); numbers and tokens have no entry and stay as drawn."""
    words = WORDS[language]
    given = tr

    def tr(text: str) -> str:
        """``text`` translated; in another language than English, a word left as drawn (a token the
        model reads: the, cat) is quoted, as the prose quotes the sentences it comes from."""
        found = (given(text) if given and text else None) or text
        if language != "en" and found == text and re.search(r"[A-Za-z]{2,}", text) and text[:1] not in '"“':
            return words["quote"].format(text)
        return found

    def quote(text: str) -> str:  # a title that opens with its own quotes keeps them
        return text if text[:1] in "\"'“「" else words["quote"].format(text)

    groups = []  # [panel, [titles]]
    for panel in description["panels"]:
        same = {k: v for k, v in panel.items() if k != "title"}
        if groups and groups[-1][0] == same:
            groups[-1][1].append(panel["title"])
        else:
            groups.append([same, [panel["title"]]])
    sentences = []
    if description.get("finding"):  # what the figure shows, first
        sentences.append(given(description["finding"]) if given else description["finding"])
    if description.get("title"):
        sentences.append(tr(description["title"]))
    if len(description["panels"]) > 1:
        sentences.append(words["panels"].format(count=len(description["panels"])))
    for panel, titles in groups:
        kind = words[panel["kind"]]
        if len(titles) > 1:
            named = words["list"].join(tr(t) for t in titles if t)
            head = words["same" if named else "same untitled"].format(count=len(titles), kind=kind, titles=named)
        elif titles[0]:
            head = words["titled"].format(kind=kind, title=quote(tr(titles[0])))
        else:
            head = words["one"].format(kind=kind)
        detail = _panel_words(panel, words, tr)
        sentences.append(head + (words["colon"] + detail if detail else ""))
    if description.get("legend"):
        sentences.append(words["legend"].format(series=words["list"].join(tr(s) for s in description["legend"])))
    sentences = [s.rstrip(".。") for s in sentences if s]
    if language == "en":  # a sentence starts with a capital, unless it starts with a symbol (h, dₖ)
        sentences = [s[0].upper() + s[1:] if re.match(r"[a-z]{2,}\b", s) else s for s in sentences]
    return words["sep"].join(sentences) + words["end"]


def translatable(description: dict) -> set[str]:
    """The titles and labels of a description that the Chinese edition translates."""
    found = {description.get("title", ""), description.get("finding", ""), *description.get("legend", [])}
    for panel in description["panels"]:
        found |= {panel["title"], panel["x"], panel["y"], *panel["series"], *panel.get("texts", [])}
    return {s for s in found if s and not _is_number(s)}


# --------------------------------------------------------------------------------------------
# A notebook's figure output
# --------------------------------------------------------------------------------------------


def figure_output(fig):
    """``(base64 PNG, metadata)`` of ``fig`` for a notebook output: the PNG the inline backend
    makes (tight bounding box, at the figure's dpi) and, under ``image/png``, its ``width`` (the
    book then links the image to its full-size file), ``alt`` text and, under :data:`META`, its
    smallest text in points, the dpi and the description the Chinese alt text is made from."""
    from IPython.core.pylabtools import print_figure

    data = print_figure(fig, "png", bbox_inches="tight", base64=True)
    if not data:  # a figure with nothing drawn: what the inline backend does
        return None
    width = png_size(base64.b64decode(data[:32]))[0]
    if _NEXT_FINDING and not getattr(fig, FINDING, None):
        finding(fig, _NEXT_FINDING.pop())
    description = figure_description(fig)
    metadata = {
        "width": width,
        "alt": alt_text(description),
        META: {"text_pt": smallest_text_pt(fig), "dpi": fig.dpi, "description": description},
    }
    if twins_folder() is not None:  # executing the book: the Chinese edition's twin (mha.viz.figure_i18n)
        twin, pairs = draw_in_chinese(fig, lambda f: print_figure(f, "png", bbox_inches="tight"))
        write_twin("figures", base64.b64decode(data), twin, "png", pairs, png_size(twin))
        _write_phone_renderings(fig, base64.b64decode(data), width, metadata[META]["text_pt"])
    return data, metadata


def _write_phone_renderings(fig, english: bytes, width: int, text_pt: float) -> None:
    """Draws ``fig`` for a phone (:mod:`mha.viz.phone`), in both editions, and stores both."""
    from IPython.core.pylabtools import print_figure

    from .figure_i18n import write_rendering
    from .phone import phone_renderings

    def draw(f):
        return print_figure(f, "png", bbox_inches="tight")

    desktop = {"en": len(layout.overlapping_texts(fig))}
    desktop["zh_CN"] = draw_in_chinese(fig, lambda f: len(layout.overlapping_texts(f)))[0]
    found = phone_renderings(fig, width, text_pt, MIN_TEXT_PX, draw, lambda f, render: draw_in_chinese(f, render)[0])
    if found is None:
        return
    for language in ("en", "zh_CN"):
        image, overlaps, how = found[language]
        sidecar = {"size": list(png_size(image)), "how": how, "overlaps": overlaps}
        sidecar["desktop_overlaps"] = desktop[language]
        write_rendering(twins_folder().parent / language / "phone", english, image, sidecar)
