"""The course's reading budget (issue 26): the core path at most 150 minutes, each core chapter at most
30, each deep dive at most 45, by scripts/reading_time.py's measure of the rendered notebooks."""

import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import reading_time  # noqa: E402


def test_the_book_is_within_its_reading_budget():
    rows = reading_time.measure()
    assert not reading_time.over_budget(rows), reading_time.table(rows)
    parts = {row["part"] for row in rows}
    assert {reading_time.CORE_PART, reading_time.DEEP_PART} <= parts


def test_page_counts_follow_the_measure(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("(label)=\n# A title\n\n" + "word " * 400 + "\n\n![a figure](x.png)"),
        nbformat.v4.new_code_cell("x = 1\ny = 2\n\n# NBVAL_IGNORE_OUTPUT\nprint(x)"),
        nbformat.v4.new_code_cell("assert x == 1", metadata={"tags": ["remove-input"]}),
        nbformat.v4.new_code_cell("z = 3", metadata={"tags": ["hide-input"]}),
    ]
    nb.cells[1].outputs = [nbformat.v4.new_output("display_data", data={"image/png": "AA=="})]
    path = tmp_path / "page.ipynb"
    nbformat.write(nb, path)
    counts = reading_time.page_counts(path)
    assert (counts["words"], counts["code_lines"], counts["figures"]) == (402, 3, 2)
    assert abs(counts["minutes"] - (402 / 200 + 3 / 15 + 2)) < 1e-9


def test_over_budget_names_each_excess():
    row = {"words": 0, "code_lines": 0, "figures": 0}
    rows = [{"part": "The course", "page": f"book/c{i}", "minutes": 31.0, **row} for i in range(5)]
    rows.append({"part": "Deep dives", "page": "book/d", "minutes": 46.0, **row})
    problems = reading_time.over_budget(rows)
    assert len(problems) == 7 and "the core path reads in 155 min" in problems[0] and "book/d" in problems[-1]
    assert reading_time.over_budget([{**rows[0], "minutes": 20.0}]) == []
