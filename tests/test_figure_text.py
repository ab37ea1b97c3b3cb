"""Every figure of the book is legible at the book's column width and says what it shows.

For every figure output stored in ``book/*.ipynb`` and every explorer's frames, the smallest text
is at least ``MIN_TEXT_PX`` (9) CSS pixels tall at the book's desktop column width: its font size
in points x dpi / 72 x the scale the page shows the image at (the column width over the image's
natural width, at most 1). The code that drew the figure recorded the font size and dpi
(``mha.viz.describe``: a figure output's metadata, an explorer frame's ``data-text-pt`` and
``data-dpi``); the natural width is read from the stored image itself. The column widths are
those of the built book at 1280 x 800, which ``tests/test_browser_figures.py`` measures.

Every figure also has an alt text that says what it shows (not a file path, not empty), and the
functions that compute all this are tested on figures made here.
"""

from __future__ import annotations

import base64
import html
import json
import re
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from mha.viz import describe  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))
#: An alt text that is a file name or path, as myst-nb's fallback wrote it (``../_images/<hash>.png``).
PATH_LIKE = re.compile(r"(^\.{0,2}/|_images/|^\S+\.(png|svg|webp|jpe?g|gif)$)", re.I)
FRAME = re.compile(r'<img class="mha-explorer-frame"[^>]*>')
ATTRIBUTE = re.compile(r'([a-z-]+)="([^"]*)"')


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk, or a lossless WebP's VP8L header."""
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    if data[:4] == b"RIFF" and data[12:16] == b"VP8L":
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    raise ValueError("not a PNG or a lossless WebP")


def joined(value) -> str:
    return "".join(value) if isinstance(value, list) else value


def stored_figures() -> list[dict]:
    """Every figure output and explorer of the stored notebooks, with what the test needs."""
    figures = []
    for notebook in NOTEBOOKS:
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        for index, cell in enumerate(cells):
            for output in cell.get("outputs", []):
                data = output.get("data", {})
                where = f"{notebook.stem} cell {index}"
                if "image/png" in data:
                    meta = output.get("metadata", {}).get("image/png", {})
                    width, _ = png_size(base64.b64decode(joined(data["image/png"])))
                    figures.append(
                        {
                            "id": f"{where} figure",
                            "kind": "figure",
                            "width": width,
                            "meta": meta,
                            "text_pt": meta.get(describe.META, {}).get("text_pt"),
                            "dpi": meta.get(describe.META, {}).get("dpi"),
                            "alts": [meta.get("alt")],
                            "shown": not {"remove-cell", "remove-output"} & set(cell["metadata"].get("tags", [])),
                        }
                    )
                page = joined(data.get("text/html", ""))
                for tag in FRAME.findall(page):
                    attributes = dict(ATTRIBUTE.findall(tag))
                    script = re.search(r'<script type="application/json"[^>]*>(.*?)</script>', page, re.S)
                    alts = json.loads(script.group(1))["alts"] if script else []
                    title = re.search(r'-title"[^>]*>(.*?)</div>', page)
                    uri = attributes["src"].split(",", 1)[1]
                    figures.append(
                        {
                            "id": f"{where} explorer {html.unescape(title.group(1)) if title else ''}",
                            "kind": "explorer",
                            "width": png_size(base64.b64decode(uri))[0],
                            "declared_width": int(attributes.get("width", 0)),
                            "text_pt": float(attributes["data-text-pt"]) if "data-text-pt" in attributes else None,
                            "dpi": float(attributes["data-dpi"]) if "data-dpi" in attributes else None,
                            "alts": [html.unescape(attributes.get("alt", "")), *alts],
                        }
                    )
    return figures


FIGURES = stored_figures()


def column(figure) -> int:
    return describe.EXPLORER_COLUMN_PX if figure["kind"] == "explorer" else describe.COLUMN_PX


def test_the_book_has_figures_and_explorers():
    kinds = [f["kind"] for f in FIGURES]
    assert kinds.count("figure") >= 30 and kinds.count("explorer") >= 12, kinds


@pytest.mark.parametrize("figure", FIGURES, ids=[f["id"] for f in FIGURES])
def test_smallest_text_is_legible_at_the_column_width(figure):
    assert figure["text_pt"] is not None and figure["dpi"], (
        f"{figure['id']}: no record of its smallest text (a figure output is drawn through "
        "mha.viz.describe.figure_output once mha.viz.plotting.use_style() ran; re-execute the chapter)"
    )
    if figure["kind"] == "explorer":
        assert figure["declared_width"] == figure["width"], f"{figure['id']}: the <img> width is not the frame's"
    px = describe.text_px(figure["text_pt"], figure["dpi"], figure["width"], column(figure))
    assert px >= describe.MIN_TEXT_PX, (
        f"{figure['id']}: its smallest text ({figure['text_pt']:g} pt at {figure['dpi']:g} dpi, an image "
        f"{figure['width']} px wide shown at most {column(figure)} px wide) is {px:.1f} CSS px tall, "
        f"under {describe.MIN_TEXT_PX:g}: larger fonts, a narrower figure or fewer panels"
    )


@pytest.mark.parametrize("figure", FIGURES, ids=[f["id"] for f in FIGURES])
def test_alt_text_says_what_the_figure_shows(figure):
    for alt in figure["alts"]:
        assert isinstance(alt, str) and len(alt.strip()) >= 20, f"{figure['id']}: alt text {alt!r} says nothing"
        assert not PATH_LIKE.search(alt.strip()), f"{figure['id']}: alt text {alt!r} is a file path"
    if figure["kind"] == "figure":  # it names the figure's own title, when it has one
        description = figure["meta"][describe.META]["description"]
        titles = [description["title"], *(p["title"] for p in description["panels"])]
        alt = figure["alts"][0].lower()
        assert all(t.lower() in alt for t in titles if t), f"{figure['id']}: the alt text leaves out a title"


def test_figure_outputs_link_to_their_full_size_file():
    """A figure output states its width: the book then links the image to its file (a tap on a phone)."""
    for figure in FIGURES:
        if figure["kind"] == "figure":
            assert figure["meta"].get("width") == figure["width"], figure["id"]


# --------------------------------------------------------------------------------------------
# The functions behind it, on figures made here
# --------------------------------------------------------------------------------------------


def test_text_px_is_points_times_dpi_over_72_times_the_scale():
    assert describe.text_px(9, 72, 500, column=688) == 9
    assert describe.text_px(10, 100, 1376, column=688) == pytest.approx(10 * 100 / 72 / 2)
    assert describe.text_px(7, 80, 400) == pytest.approx(7 * 80 / 72)  # never shown larger than it is


def test_smallest_text_counts_only_what_is_drawn():
    fig, (ax, hidden) = plt.subplots(1, 2)
    ax.set_title("title", fontsize=12)
    ax.set_xlabel("x", fontsize=11)
    ax.tick_params(labelsize=9)
    ax.text(0.5, 0.5, "note", fontsize=8)
    ax.text(0.5, 0.2, "", fontsize=3)  # empty: not drawn
    ax.text(0.5, 0.2, "hidden", fontsize=4, visible=False)
    hidden.axis("off")  # its tick labels (10 pt by default) are not drawn
    hidden.text(0, 0, "drawn", fontsize=8.5)
    fig.canvas.draw()
    assert describe.smallest_text_pt(fig) == 8
    ax.tick_params(labelsize=6)
    assert describe.smallest_text_pt(fig) == 6
    plt.close(fig)


def test_the_description_reads_kind_titles_axes_and_series():
    fig, (left, right) = plt.subplots(1, 2)
    left.imshow([[0.1, 0.9], [0.5, 0.5]])
    left.set_xticks([0, 1], ["the", "cat"])
    left.set_yticks([0, 1], ["the", "cat"])
    left.set(title="head 1", xlabel="key", ylabel="query")
    right.plot([1, 2, 4, 8], [0.5, 0.7, 0.9, 1.0], label="MLP readout")
    right.set(title="accuracy", xlabel="number of heads h", ylabel="accuracy")
    right.legend()
    fig.suptitle("Two panels")
    fig.canvas.draw()
    description = describe.figure_description(fig)
    assert description["title"] == "Two panels"
    assert [p["kind"] for p in description["panels"]] == ["heatmap", "line chart"]
    assert description["panels"][0]["xticks"] == ["the", "cat"]
    assert description["panels"][1]["series"] == ["MLP readout"]
    alt = describe.alt_text(description)
    assert alt.startswith("Two panels. 2 panels. Heatmap")
    assert "2 by 2 grid; rows query: the, cat; columns key: the, cat" in alt
    assert "accuracy" in alt and "number of heads h" in alt and "MLP readout" in alt
    assert describe.translatable(description) == {
        "Two panels",
        "head 1",
        "key",
        "query",
        "accuracy",
        "number of heads h",
        "MLP readout",
    }
    chinese = describe.alt_text(description, language="zh_CN", tr={"key": "键", "query": "查询"}.get)
    assert "热力图" in chinese and "折线图" in chinese and "查询" in chinese and chinese.endswith("。")
    plt.close(fig)


def test_panels_that_differ_only_in_title_are_told_once():
    fig, axes = plt.subplots(1, 3)
    for i, ax in enumerate(axes):
        ax.imshow([[0, 1], [1, 0]])
        ax.set_xticks([0, 1], ["a", "b"])
        ax.set_yticks([0, 1], ["a", "b"])
        ax.set_title(f"head {i + 1}")
    fig.canvas.draw()
    alt = describe.alt_text(describe.figure_description(fig))
    assert alt.count("heatmap") == 1 and "3 heatmaps (head 1, head 2, head 3)" in alt
    plt.close(fig)


def test_figure_output_stores_alt_text_smallest_text_and_width():
    fig, ax = plt.subplots(figsize=(4, 3), dpi=100)
    ax.bar([0, 1], [0.3, 0.7])
    ax.set(title="weights", xlabel="token", ylabel="weight")
    ax.tick_params(labelsize=8)
    data, meta = describe.figure_output(fig)
    width, _ = png_size(base64.b64decode(data))
    assert meta["width"] == width and 300 < width <= 400
    assert meta["alt"].startswith("Bar chart \N{LEFT DOUBLE QUOTATION MARK}weights")
    assert meta[describe.META]["text_pt"] == 8 and meta[describe.META]["dpi"] == 100
    plt.close(fig)


def test_a_figure_says_what_it_shows_first():
    """A figure's finding (describe.finding, or next_finding from the cell before) opens its alt text,
    in either edition; a figure a page shows always has one (issue 46: not only axes and ranges)."""
    fig, ax = plt.subplots(figsize=(4, 3), dpi=100)
    ax.plot([1, 2, 4], [0.2, 0.5, 0.9])
    ax.set(title="accuracy", xlabel="heads", ylabel="accuracy")
    describe.next_finding("More heads do better")
    _, meta = describe.figure_output(fig)
    assert meta["alt"].startswith("More heads do better. Line chart")
    description = meta[describe.META]["description"]
    assert description["finding"] == "More heads do better"
    words = {"More heads do better": "头越多越好"}
    chinese = describe.alt_text(description, language="zh_CN", tr=words.get)
    assert chinese.startswith("头越多越好")
    _, again = describe.figure_output(fig)  # the finding was the next figure's only
    assert again["alt"].startswith("More heads do better")  # (it is the figure's own now)
    plt.close(fig)
    fig2, ax2 = plt.subplots()
    ax2.plot([0, 1])
    assert "finding" not in describe.figure_output(fig2)[1][describe.META]["description"]
    plt.close(fig2)
    assert len(SHOWN) >= 25, "the stored notebooks lost their figures"
    for bad in ("", "  ", None):
        with pytest.raises(ValueError, match="finding must be a sentence"):
            describe.next_finding(bad)


#: The figure outputs a page shows (an explorer's frames are described by mha.viz.widgets' alts).
SHOWN = [f for f in FIGURES if f["kind"] == "figure" and f["shown"]]


@pytest.mark.parametrize("figure", SHOWN, ids=[f["id"] for f in SHOWN])
def test_a_shown_figure_opens_its_alt_text_with_its_finding(figure):
    finding = figure["meta"][describe.META]["description"].get("finding")
    assert finding and figure["alts"][0].startswith(finding), f"{figure['id']}: no finding opens the alt text"


@pytest.mark.parametrize("alt", ["../_images/dc37e5.png", "_images/x.png", "figure.png", "/abs/path/x.webp"])
def test_a_path_is_not_an_alt_text(alt):
    assert PATH_LIKE.search(alt)


def test_the_explorer_frame_records_its_smallest_text_and_dpi():
    from mha.viz.widgets import Explorer

    def render(size: float = 9.0):
        fig, ax = plt.subplots(figsize=(3, 2))
        ax.set_title("t", fontsize=12)
        ax.text(0.5, 0.5, "small", fontsize=size)
        return fig

    made = Explorer(render, {"size": [9.0, 7.5]}, title="Sizes", mode="static")
    attributes = dict(ATTRIBUTE.findall(FRAME.search(made.html).group(0)))
    assert float(attributes["data-text-pt"]) == 7.5 and float(attributes["data-dpi"]) == made.dpi
