"""scripts/lab_copies.py: the learner's copies in lab/ that `make lab` opens (issue 19)."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import lab_copies  # noqa: E402


@pytest.fixture
def book(tmp_path):
    folder = tmp_path / "book"
    folder.mkdir()
    for name in ("01_a", "02_b"):
        (folder / f"{name}.ipynb").write_text(json.dumps({"cells": [], "name": name}))
    return folder


def test_copies_what_lab_lacks_and_never_overwrites_a_copy(book, tmp_path):
    lab = tmp_path / "lab"
    lines = lab_copies.make_copies(book, lab)
    assert lines == ["copied 2 notebook(s) from book/ to lab/: 01_a.ipynb, 02_b.ipynb"]
    assert (lab / "01_a.ipynb").read_bytes() == (book / "01_a.ipynb").read_bytes()
    (lab / "01_a.ipynb").write_text("my edits")  # the learner's work
    (lab / "02_b.ipynb").unlink()  # a copy the learner deleted comes back
    lines = lab_copies.make_copies(book, lab)
    assert lines == [
        "copied 1 notebook(s) from book/ to lab/: 02_b.ipynb",
        "kept 1 copy already in lab/ (yours: never overwritten)",
    ]
    assert (lab / "01_a.ipynb").read_text() == "my edits"
    assert 'formats = "ipynb"' in (lab / "jupytext.toml").read_text()  # no pairing with chapters/ there


def test_says_which_copies_are_older_than_their_chapter_and_refreshes_one(book, tmp_path):
    lab = tmp_path / "lab"
    lab_copies.make_copies(book, lab)
    (lab / "01_a.ipynb").write_text("my edits")
    (book / "01_a.ipynb").write_text(json.dumps({"cells": [], "name": "01_a", "version": 2}))  # the chapter changed
    lines = lab_copies.make_copies(book, lab)
    assert any(line.startswith("book/01_a.ipynb changed since lab/01_a.ipynb was copied") for line in lines)
    assert "--refresh 01_a" in lines[-1] and not any("02_b" in line for line in lines[1:])
    lines = lab_copies.make_copies(book, lab, refresh=("01_a",))
    assert lines[0] == "kept your old 01_a.ipynb as 01_a.old.ipynb"
    assert (lab / "01_a.old.ipynb").read_text() == "my edits"
    assert (lab / "01_a.ipynb").read_bytes() == (book / "01_a.ipynb").read_bytes()
    lab_copies.make_copies(book, lab, refresh=("01_a",))  # a second refresh keeps both old copies
    assert (lab / "01_a.old-2.ipynb").exists()
    assert not any("changed since" in line for line in lab_copies.make_copies(book, lab))


def test_refresh_of_an_unknown_notebook_says_which_exist(book, tmp_path):
    with pytest.raises(
        SystemExit, match=r"--refresh: no notebook \['03_c'\] in .*; the notebooks are \['01_a', '02_b'\]"
    ):
        lab_copies.make_copies(book, tmp_path / "lab", refresh=("03_c",))


def test_lab_is_ignored_by_git():
    gitignore = (Path(__file__).resolve().parents[1] / ".gitignore").read_text().splitlines()
    assert "lab/" in gitignore
