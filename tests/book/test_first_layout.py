"""What a page draws first keeps its place while the rest arrives: its images and its first tables.

An image without a height is 0 px high until its file arrives: on a busy machine the multi-head-math
chapter's first figure arrived after the first layout and pushed the text below it off the screen (layout shift
0.053 in English, 0.068 in Chinese, CI). ``_ext/mha_book.size_images`` now writes each image's own
width and height into the page when the book is built; the browser keeps the ratio while the CSS
sets the width (``test_browser_math``: every built image has its size; ``test_a_late_figure_moves_nothing``
loads the images late).

A table on the first screen is drawn whole: its columns are as wide as its widest cells, rows not parsed
yet included, and on a busy machine the notation page was drawn with half a table, whose columns moved
when the rest arrived (0.02-0.08). ``_ext/mha_book.wait_for_first_tables`` marks the end of the tables
on the first screen, and the page's head asks the browser to wait for it before drawing
(``test_browser_math.test_a_table_on_the_first_screen_is_drawn_whole`` sends the page in two parts).
"""

from __future__ import annotations

import struct
import sys
import zlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "_ext"))
from mha_book import (  # noqa: E402
    FIRST_SCREEN_COLUMNS,
    FIRST_SCREEN_END,
    image_size,
    size_images,
    text_columns,
    wait_for_first_tables,
)


def png(width: int, height: int) -> bytes:
    """A valid blank PNG of ``width`` x ``height`` pixels (grey, 8 bits)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\0" + b"\x80" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


@pytest.mark.parametrize(
    ("content", "size"),
    [
        (png(650, 593), (650, 593)),
        (b'<?xml version="1.0"?>\n<svg width="340pt" height="545.2pt" viewBox="0 0 340 545.2">', (453, 727)),
        (b'<svg xmlns="http://www.w3.org/2000/svg" width="240" height="80">', (240, 80)),
        (b'<svg viewBox="0 0 120.5 60" xmlns="http://www.w3.org/2000/svg">', (120, 60)),  # no size: the viewBox
        (b'<svg width="100%" height="100%">', None),  # nothing to read a size from
        (b"GIF89a", None),
    ],
)
def test_the_size_an_image_is_drawn_at(tmp_path, content, size):
    path = tmp_path / "image"
    path.write_bytes(content)
    assert image_size(path) == size


def test_each_image_without_a_height_gets_its_own_size(tmp_path):
    (tmp_path / "a.png").write_bytes(png(30, 20))
    body = (
        '<img alt="A" src="../_images/a.png" style="width: 15px;" />'
        '<img alt="gone" src="../_images/missing.png" />'
        '<img src="../_images/a.png" width="3" height="2" />'
    )
    files = {"a.png": tmp_path / "a.png", "missing.png": tmp_path / "missing.png"}
    assert size_images(body, files) == (
        '<img width="30" height="20" alt="A" src="../_images/a.png" style="width: 15px;" />'
        '<img alt="gone" src="../_images/missing.png" />'  # no file: left as it was
        '<img src="../_images/a.png" width="3" height="2" />'  # sized already
    )
    assert size_images(size_images(body, files), files) == size_images(body, files)


def test_text_columns_count_what_a_reader_sees():
    formula = '<span class="katex"><span class="katex-mathml"><math><mi>x</mi></math></span><span>x</span></span>'
    assert text_columns(f"<p>one &amp; two</p>\n<p>{formula}</p>") == len("one & two x")
    assert text_columns("<p>多头注意力</p>") == 10  # a CJK character takes two columns


def test_the_page_waits_for_the_tables_on_its_first_screen_only():
    table = "<table><tr><td>a</td></tr></table>"
    early, far = "<p>intro</p>", "<p>" + "word " * (FIRST_SCREEN_COLUMNS // 4) + "</p>"
    assert wait_for_first_tables(early + table + table + far + table) == (
        early + table + table + FIRST_SCREEN_END + far + table  # after the last table on the first screen
    )
    assert wait_for_first_tables(far + table) is None  # a page whose tables are further down is drawn at once
    assert wait_for_first_tables(early) is None
