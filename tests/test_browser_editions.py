"""The two built editions show the same outputs: every number on a Chinese page is the English page's.

Run after `make book` and `make book-zh` (``make test`` builds both; the file name puts it with the
browser tests, which need the built books). For every page, the text of every stored output and
every code cell, and every explorer's frames, are identical in the two editions; only the prose,
the explorers' labels and the checkers' verdicts differ, and a verdict only in its words: with the
words masked, its numbers are the English verdict's, one for one.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest
from conftest import skip_or_fail
from test_browser import BUILD, toc_pages
from test_browser import EDITIONS as FOLDERS

EDITIONS = {edition: BUILD / folder for edition, folder in FOLDERS.items()}


def computed_parts(page_html: str) -> dict[str, list[str]]:
    """What the notebooks computed on a page: code, output text, explorer frames, figure images."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(page_html, "html.parser")
    for label in soup.select("figure.mha-explorer"):
        frames = [img.get("src", "") for img in label.select("img.mha-explorer-frame")]
        data = [s.get_text() for s in label.select('script[type="application/json"]')]
        label.replace_with(soup.new_string("EXPLORER " + "|".join(frames) + "|".join(d[-2000:] for d in data)))
    return {
        "code": [c.get_text() for c in soup.select("div.cell_input")],
        "outputs": [o.get_text() for o in soup.select("div.cell_output")],
        "images": [img.get("src", "") for img in soup.select("div.cell_output img")],
    }


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
    assert en["code"] == zh["code"], f"{page}: code cells differ between the editions"
    for i, (a, b) in enumerate(zip(en["outputs"], zh["outputs"])):
        if a != b:  # only a checker's verdict may differ, in its words
            assert CJK.search(b) and numbers(a) == numbers(b), (
                f"{page}: output {i} differs between the editions beyond its words:\n{a[:300]}\n---\n{b[:300]}"
            )
    assert en["images"] == zh["images"], f"{page}: figures differ between the editions"


def test_the_comparison_sees_the_outputs():
    """Not vacuous: chapter 3's page has code, outputs, figures and an explorer to compare."""
    folder = EDITIONS["en"]
    if not (folder / "index.html").exists():
        skip_or_fail("the book is not built: run `make book`")
    parts = computed_parts((folder / "book/03_worked_example.html").read_text(encoding="utf-8"))
    assert len(parts["code"]) >= 10 and len(parts["outputs"]) >= 10 and parts["images"]
    assert any("EXPLORER data:image/" in o for o in parts["outputs"])


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
