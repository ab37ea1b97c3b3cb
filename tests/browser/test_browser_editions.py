"""The two built editions show the same outputs: every number on a Chinese page is the English page's.

Run after `make book` and `make book-zh` (``make test`` builds both; the file name puts it with the
browser tests, which need the built books). For every page, the text of every stored output and
every code cell, are identical in the two editions; only the prose, the explorers' labels and the
checkers' verdicts differ, and a verdict only in its words: with the words masked, its numbers are
the English verdict's, one for one. Every figure and explorer frame of the Chinese edition is the
Chinese twin of the English one (``locales/zh_CN/figures`` and ``frames``, drawn from the same figure
with its words in Chinese: ``tests/zh_CN/test_figure_i18n.py`` checks that they draw the same numbers).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections import Counter
from pathlib import Path

import pytest
from conftest import skip_or_fail
from test_browser import BUILD, toc_pages
from test_browser import EDITIONS as FOLDERS

EDITIONS = {edition: BUILD / folder for edition, folder in FOLDERS.items()}


FRAME_URI = re.compile(r"data:image/(?:webp|png);base64,([A-Za-z0-9+/=]+)")
TWINS = Path(__file__).resolve().parents[2] / "locales" / "zh_CN"


def computed_parts(page_html: str) -> dict[str, list[str]]:
    """What the notebooks computed on a page: code, output text (an explorer: its frame order),
    figure images, explorer frames (data URIs)."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(page_html, "html.parser")
    frames = []
    for label in soup.select("figure.mha-explorer"):
        data = [json.loads(s.get_text()) for s in label.select('script[type="application/json"]')]
        frames += [img.get("src", "") for img in label.select("img.mha-explorer-frame")]
        frames += [frame for d in data for frame in d.get("frames", [])]
        label.replace_with(soup.new_string("EXPLORER " + json.dumps([d.get("index") for d in data])))
    return {
        "code": [c.get_text() for c in soup.select("div.cell_input")],
        "outputs": [o.get_text() for o in soup.select("div.cell_output")],
        "images": [img.get("src", "") for img in soup.select("div.cell_output img")],
        "frames": frames,
    }


def frame_bytes(uri: str, page_folder: Path) -> bytes:
    """A frame's bytes: a file beside the page (the build writes each frame to one, _ext/mha_speed.py),
    or the data URI an explorer's own HTML holds."""
    data = FRAME_URI.fullmatch(uri)
    return base64.b64decode(data.group(1)) if data else (page_folder / uri).read_bytes()


def twin(kind: str, english: bytes) -> bytes:
    """The Chinese twin of an English figure or frame (KeyError: it has none)."""
    index = json.loads((TWINS / kind / "index.json").read_text(encoding="utf-8"))
    return (TWINS / kind / index[hashlib.sha256(english).hexdigest()]["file"]).read_bytes()


CJK = re.compile(r"[\u4e00-\u9fff]")


def numbers(text: str) -> Counter:
    """The numbers in ``text``, each with its count: what stays when the words are masked."""
    return Counter(re.findall(r"\d+(?:\.\d+)?", text))


@pytest.mark.parametrize("page", toc_pages())
def test_both_editions_show_the_same_computed_outputs(page):
    for edition, folder in EDITIONS.items():
        if not (folder / "index.html").exists():
            skip_or_fail(f"the {edition} edition is not built ({folder}): run `make book` and `make book-zh`")
    en, zh = (computed_parts((folder / f"{page}.html").read_text(encoding="utf-8")) for folder in EDITIONS.values())
    assert len(en["code"]) == len(zh["code"]) and len(en["outputs"]) == len(zh["outputs"])
    # the same code; its comments and docstrings in Chinese (locales/zh_CN/comments.json)
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    import code_comments

    table = code_comments.load("zh_CN")
    english = [code_comments.translate_code(code, table) for code in en["code"]]
    assert english == zh["code"], f"{page}: code cells differ between the editions"
    for i, (a, b) in enumerate(zip(en["outputs"], zh["outputs"])):
        if a != b:  # only a checker's verdict may differ, in its words
            assert CJK.search(b) and numbers(a) == numbers(b), (
                f"{page}: output {i} differs between the editions beyond its words:\n{a[:300]}\n---\n{b[:300]}"
            )
    assert en["images"] == zh["images"], f"{page}: figures differ between the editions"
    assert len(en["frames"]) == len(zh["frames"]), f"{page}: explorer frames differ between the editions"


@pytest.mark.parametrize("page", toc_pages())
def test_the_chinese_edition_shows_every_figure_and_frame_in_chinese(page):
    """Each image is the Chinese twin of the English one: its own bytes, never the English ones."""
    for edition, folder in EDITIONS.items():
        if not (folder / "index.html").exists():
            skip_or_fail(f"the {edition} edition is not built ({folder}): run `make book` and `make book-zh`")
    en, zh = (computed_parts((folder / f"{page}.html").read_text(encoding="utf-8")) for folder in EDITIONS.values())
    base = {edition: (folder / page).parent for edition, folder in EDITIONS.items()}
    for a, b in zip(en["images"], zh["images"]):
        english, chinese = (base["en"] / a).read_bytes(), (base["zh_CN"] / b).read_bytes()
        assert chinese != english and chinese == twin("figures", english), f"{page}: {b} is not the Chinese twin"
    for i, (a, b) in enumerate(zip(en["frames"], zh["frames"])):
        english, chinese = frame_bytes(a, base["en"]), frame_bytes(b, base["zh_CN"])
        assert chinese != english and chinese == twin("frames", english), f"{page}: frame {i} is not its twin"


def test_the_comparison_sees_the_outputs():
    """Not vacuous: chapter 3's page has code, outputs, figures and an explorer to compare."""
    folder = EDITIONS["en"]
    if not (folder / "index.html").exists():
        skip_or_fail("the book is not built: run `make book`")
    parts = computed_parts((folder / "book/03_worked_example.html").read_text(encoding="utf-8"))
    assert len(parts["code"]) >= 10 and len(parts["outputs"]) >= 10 and parts["images"]
    assert any("EXPLORER " in o for o in parts["outputs"]) and parts["frames"]


def test_the_chinese_edition_shows_chinese_verdicts():
    """Chapter 4's stored verdicts are in Chinese in the Chinese edition, in English in the English one."""
    pages = {}
    for edition, folder in EDITIONS.items():
        if not (folder / "index.html").exists():
            skip_or_fail(f"the {edition} edition is not built ({folder}): run `make book` and `make book-zh`")
        pages[edition] = computed_parts((folder / "book/04_build_it_yourself.html").read_text(encoding="utf-8"))
    english = [o for o in pages["en"]["outputs"] if "not written yet" in o]
    chinese = [o for o, e in zip(pages["zh_CN"]["outputs"], pages["en"]["outputs"]) if "not written yet" in e]
    assert len(english) >= 6 and all(CJK.search(o) and "not written yet" not in o for o in chinese), chinese[:2]
