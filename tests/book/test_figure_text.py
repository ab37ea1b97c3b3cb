"""Every figure of the book is legible at the book's column width and says what it shows.

For every figure output stored in ``book/*.ipynb`` and every explorer's frames, the smallest text
is at least ``MIN_TEXT_PX`` (9) CSS pixels tall at the book's desktop column width: its font size
in points x dpi / 72 x the scale the page shows the image at (the column width over the image's
natural width, at most 1). The code that drew the figure recorded the font size and dpi
(``mha.viz.describe``: a figure output's metadata, an explorer frame's ``data-text-pt`` and
``data-dpi``); the natural width is read from the stored image itself. The column widths are
those of the built book at 1280 x 800, which ``tests/browser/test_browser_figures.py`` measures.

Every figure also has an alt text that says what it shows (not a file path, not empty), and the
functions that compute all this are tested on figures made here.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from mha.viz import describe, phone  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
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
                    png = base64.b64decode(joined(data["image/png"]))
                    width, _ = png_size(png)
                    figures.append(
                        {
                            "id": f"{where} figure",
                            "kind": "figure",
                            "digest": hashlib.sha256(png).hexdigest(),
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


SHOWN_FIGURES = [f for f in FIGURES if f["kind"] == "figure" and f["shown"]]
PHONE_FOLDERS = {language: ROOT / "locales" / language / "phone" for language in ("en", "zh_CN")}


def phone_index(language: str) -> dict:
    path = PHONE_FOLDERS[language] / "index.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


@pytest.mark.parametrize("language", list(PHONE_FOLDERS))
@pytest.mark.parametrize("figure", SHOWN_FIGURES, ids=[f["id"] for f in SHOWN_FIGURES])
def test_a_figure_is_legible_in_a_phones_column(figure, language):
    """In the column of a 360-px phone a figure's smallest text is at least 9 CSS px: as drawn, or in
    its phone rendering in this edition, which crowds no more of its texts together than the figure."""
    px = describe.text_px(figure["text_pt"], figure["dpi"], figure["width"], phone.PHONE_COLUMN_PX)
    entry = phone_index(language).get(figure["digest"])
    if px >= describe.MIN_TEXT_PX:
        assert entry is None, f"{figure['id']}: legible as drawn ({px:.1f} px), yet a phone rendering is stored"
        return
    where = f"{figure['id']} ({language})"
    assert entry is not None, f"{where}: {px:.1f} CSS px on a phone and no phone rendering: re-execute the chapter"
    width, height = png_size((PHONE_FOLDERS[language] / entry["file"]).read_bytes())
    assert [width, height] == entry["size"], f"{figure['id']}: the stored size is not the rendering's"
    on_phone = describe.text_px(figure["text_pt"], figure["dpi"], width, phone.PHONE_COLUMN_PX)
    assert on_phone >= describe.MIN_TEXT_PX, f"{where}: {on_phone:.1f} CSS px in its phone rendering"
    assert entry["overlaps"] <= entry["desktop_overlaps"], (
        f"{where}: {entry['overlaps']} overlapping texts in its phone rendering, "
        f"{entry['desktop_overlaps']} in the figure"
    )


def test_every_phone_rendering_belongs_to_a_stored_figure():
    digests = {f["digest"] for f in FIGURES if f["kind"] == "figure"}
    for language, folder in PHONE_FOLDERS.items():
        index = phone_index(language)
        assert index, f"no phone renderings for {language}"
        assert set(index) <= digests, f"{language}: renderings of no stored figure: {sorted(set(index) - digests)[:3]}"
        files = {p.name for p in folder.glob("*.png")}
        assert files == {entry["file"] for entry in index.values()}, f"{language}: files and index.json differ"


def test_phone_width_keeps_the_smallest_text_legible_in_the_phones_column():
    assert phone.phone_width_px(300, 8, describe.MIN_TEXT_PX) is None  # narrower than the column: shown as drawn
    assert phone.phone_width_px(600, 20, describe.MIN_TEXT_PX) is None  # 20 px x 328 / 600 = 10.9 px
    width = phone.phone_width_px(930, 13.9, describe.MIN_TEXT_PX)
    assert describe.text_px(10, 100, width, phone.PHONE_COLUMN_PX) >= describe.MIN_TEXT_PX
    assert describe.text_px(10, 100, width + 12, phone.PHONE_COLUMN_PX) < describe.MIN_TEXT_PX  # not much narrower


def _print_png(fig) -> bytes:
    from IPython.core.pylabtools import print_figure

    return print_figure(fig, "png", bbox_inches="tight")


def _heatmap_row(panels: int, colorbars: bool = False):
    fig, axes = plt.subplots(1, panels, figsize=(9.4, 3.5))
    for ax in axes:
        image = ax.imshow([[0.5] * 5] * 5)
        for i in range(5):
            for j in range(5):
                ax.text(j, i, "0.09", ha="center", va="center", fontsize=10)
        ax.set_title("head")
        if colorbars:
            fig.colorbar(image, ax=ax)
    fig.suptitle("The weights of three heads, each over the same five tokens, side by side")
    fig.tight_layout()
    return fig, axes


@pytest.mark.parametrize("colorbars", [False, True])
def test_a_row_of_panels_is_restacked_for_a_phone_and_restored(colorbars):
    """Three heatmaps in a row, with a number in each cell: squeezed to a phone's width their numbers
    would overlap; restacked one under another (each with its colorbar), none does, the long suptitle
    is wrapped, and the figure is as it was after."""
    from mha.viz import layout

    fig, axes = _heatmap_row(3, colorbars)
    fig.canvas.draw()  # a colorbar takes its aspect when drawn
    desktop = fig.get_size_inches().tolist()
    positions = [b for ax in fig.axes for b in ax.get_position().bounds]
    title = fig._suptitle.get_text()
    assert len(phone.cells(fig)) == 3
    png, overlaps, how = phone.phone_renderings(fig, 930, 10, describe.MIN_TEXT_PX, _print_png)["en"]
    width, height = png_size(png)
    assert how == "restacked" and overlaps == 0 and height > 2 * width, (how, overlaps, width, height)
    assert describe.text_px(10, 100, width, phone.PHONE_COLUMN_PX) >= describe.MIN_TEXT_PX
    assert fig.get_size_inches().tolist() == desktop and fig._suptitle.get_text() == title
    assert [b for ax in fig.axes for b in ax.get_position().bounds] == pytest.approx(positions)
    assert all(ax.get_visible() for ax in fig.axes)
    with phone.resized(fig, width / 930):  # the control: the same figure only squeezed
        assert len(layout.overlapping_texts(fig)) > 0


def test_a_figure_may_draw_itself_for_a_phone():
    """A grid of labelled cells, squeezed, would crowd its labels: it names its own phone drawing."""
    fig, ax = plt.subplots(figsize=(8, 3.6))
    ax.imshow([[0] * 12] * 6)
    drawn = []

    def transposed():
        phone_fig, phone_ax = plt.subplots(figsize=(3.2, 5.0))
        phone_ax.imshow([[0] * 6] * 12)
        drawn.append(phone_fig)
        return phone_fig

    assert phone.phone_figure(fig, transposed) is fig
    png, overlaps, how = phone.phone_renderings(fig, 800, 10, describe.MIN_TEXT_PX, _print_png)["en"]
    assert how == "its own" and overlaps == 0 and png_size(png)[0] <= 495
    assert drawn and not plt.fignum_exists(drawn[0].number), "the phone's figure is not closed after"


def test_a_single_panel_is_drawn_narrower_for_a_phone():
    fig, ax = plt.subplots(figsize=(7.9, 3))
    ax.plot([1, 2, 3], [1, 4, 9], label="squares")
    ax.set_xlabel("n")
    ax.set_ylabel("n squared")
    ax.legend()
    fig.tight_layout()
    assert phone.cells(fig) == []
    png, overlaps, how = phone.phone_renderings(fig, 790, 10, describe.MIN_TEXT_PX, _print_png)["en"]
    assert how == "narrower" and overlaps == 0
    assert describe.text_px(10, 100, png_size(png)[0], phone.PHONE_COLUMN_PX) >= describe.MIN_TEXT_PX


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
    in either edition; a figure a page shows always has one (not only axes and ranges)."""
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
