"""scripts/lab_copies.py: the learner's copies in lab/ that `make lab` opens."""

import sys
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import lab_copies  # noqa: E402
import notebooks  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def write_notebook(path: Path, *sources: str) -> None:
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources]), path)


@pytest.fixture
def book(tmp_path):
    folder = tmp_path / "book"
    folder.mkdir()
    for name in ("01_a", "02_b"):
        write_notebook(folder / f"{name}.ipynb", f"print({name!r})")
    return folder


def test_copies_what_lab_lacks_and_never_overwrites_a_copy(book, tmp_path):
    lab = tmp_path / "lab"
    lines = lab_copies.make_copies(book, lab)
    assert lines == ["copied 2 notebook(s) from book/ to lab/: 01_a.ipynb, 02_b.ipynb"]
    assert (lab / "01_a.ipynb").read_bytes() == (book / "01_a.ipynb").read_bytes()  # nothing to fold here
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
    write_notebook(book / "01_a.ipynb", "print('01_a, version 2')")  # the chapter changed
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
    gitignore = (Path(__file__).resolve().parents[2] / ".gitignore").read_text().splitlines()
    assert "lab/" in gitignore


def test_the_learners_copy_leaves_out_the_books_checks_and_folds_what_the_book_folds():
    nb = nbformat.read(ROOT / "book" / "04_build_it_yourself.ipynb", as_version=4)
    copy = notebooks.learner_notebook(nb)
    book_only = [c for c in nb.cells if notebooks.BOOK_ONLY in c.metadata.get("tags", [])]
    assert len(book_only) == 2 and all("first_error" in c.source for c in book_only)
    assert len(copy.cells) == len(nb.cells) - 2
    assert not any("first_error" in c.source for c in copy.cells)  # nothing asserts on the stubs
    solutions = [c for c in copy.cells if c.cell_type == "code" and c.source.startswith("# a solution")]
    assert len(solutions) == 6
    assert all(c.metadata["jupyter"]["source_hidden"] for c in solutions)
    assert all("outputs_hidden" not in c.metadata["jupyter"] for c in solutions)  # the verdict stays in view
    book_solutions = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith("# a solution")]
    assert [c.outputs for c in solutions] == [c.outputs for c in book_solutions]  # outputs kept
    assert not any("jupyter" in c.metadata for c in nb.cells)  # the book's notebook is left as it was


def test_a_lab_copy_is_the_learners_copy(tmp_path):
    book = tmp_path / "book"
    book.mkdir()
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["hide-input"]}),
            nbformat.v4.new_code_cell("assert x == 1", metadata={"tags": ["remove-cell", "book-only"]}),
            nbformat.v4.new_code_cell("print(x)", metadata={"tags": ["hide-output"]}),
        ]
    )
    nbformat.write(nb, book / "01_a.ipynb")
    lab_copies.make_copies(book, tmp_path / "lab")
    copy = nbformat.read(tmp_path / "lab" / "01_a.ipynb", as_version=4)
    assert [c.source for c in copy.cells] == ["x = 1", "print(x)"]
    assert copy.cells[0].metadata["jupyter"] == {"source_hidden": True}
    assert copy.cells[1].metadata["jupyter"] == {"outputs_hidden": True}
