"""The course's reading budget: the core path at most 150 minutes, each core chapter at
most 30, each deep dive at most 60, by scripts/reading_time.py's measure of the rendered notebooks (its
rates calibrated on a new learner's minutes)."""

import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import reading_time  # noqa: E402


def test_the_book_is_within_its_reading_budget():
    rows = reading_time.measure()
    assert not reading_time.over_budget(rows), reading_time.table(rows)
    parts = {row["part"] for row in rows}
    assert {reading_time.CORE_PART, reading_time.DEEP_PART} <= parts


def test_page_counts_follow_the_measure(tmp_path):
    nb = nbformat.v4.new_notebook()
    folded = "```{admonition} Going further\n:class: dropdown\n" + "hidden " * 50 + "\n$$a = b$$\n```\n"
    nb.cells = [
        nbformat.v4.new_markdown_cell("(label)=\n# A title\n\n" + "word " * 400 + "\n\n![a figure](x.png)"),
        nbformat.v4.new_markdown_cell("$$\nx = y\n$$\n\n" + folded + "\n```{math}\nz\n```\n\nafter the box"),
        nbformat.v4.new_code_cell("x = 1\ny = 2\n\n# NBVAL_IGNORE_OUTPUT\nprint(x)"),
        nbformat.v4.new_code_cell("assert x == 1", metadata={"tags": ["remove-input"]}),
        nbformat.v4.new_code_cell("z = 3", metadata={"tags": ["hide-input"]}),
        nbformat.v4.new_code_cell("explorer()", metadata={"tags": ["hide-input"]}),
        nbformat.v4.new_code_cell("plot()", metadata={"tags": ["hide-cell"]}),
    ]
    nb.cells[2].outputs = [nbformat.v4.new_output("display_data", data={"image/png": "AA=="})]
    nb.cells[5].outputs = [
        nbformat.v4.new_output("display_data", data={"text/html": '<div class="mha-explorer" id="e">'})
    ]  # its code is folded, the explorer is not; the next cell's figure is folded with its code
    nb.cells[6].outputs = [nbformat.v4.new_output("display_data", data={"image/png": "AA=="})]
    path = tmp_path / "page.ipynb"
    nbformat.write(nb, path)
    counts = reading_time.page_counts(path)
    # 402 words + "after the box" (3), and the folded box at half: 25 of its 50 words, half its equation
    assert (counts["words"], counts["code_lines"], counts["equations"]) == (430, 3, 2.5)
    assert (counts["figures"], counts["explorers"]) == (2, 1)
    assert abs(counts["minutes"] - (430 / 140 + 3 / 10 + 2.5 * 0.5 + 2 * 1.5 + 1 * 2.0)) < 1e-9


def test_folded_boxes_are_set_apart():
    text = "seen\n:::{dropdown} Answer\nhidden words\n:::\nseen too\n````{note}\nshown\n````"
    assert reading_time.unfolded(text).split() == ["seen", "seen", "too", "````{note}", "shown", "````"]
    assert reading_time.folded(text).split() == ["hidden", "words"]
    boxed = "```{admonition} Going further\n:class: dropdown\nsix words of a folded box\n```\n"
    assert reading_time.page_counts_of_markdown(boxed)["words"] == 6 * reading_time.FOLDED_SHARE


def test_the_intro_states_the_measured_time():
    """The first page's promise is the measure's core total (to the nearest 5 minutes), and the
    for-teachers page states the measure's rule with the script's rates."""
    import re

    rows = reading_time.measure()
    core = sum(r["minutes"] for r in rows if r["part"] == reading_time.CORE_PART)
    intro = (ROOT / "book" / "intro.md").read_text(encoding="utf-8")
    stated = re.findall(r"about (\d+) minutes of reading", intro)
    assert stated == [str(5 * round(core / 5))], f"the intro states {stated} minutes; the measure reads {core:.1f}"
    teachers = (ROOT / "chapters" / "for_teachers.md").read_text(encoding="utf-8")
    rule = " ".join(teachers.split("(course-time)=", 1)[1].split("(source-corrections)=", 1)[0].split())
    assert f"prose at {reading_time.WORDS_PER_MINUTE} words a minute" in rule
    assert f"visible code at {reading_time.CODE_LINES_PER_MINUTE} lines a minute" in rule
    assert "half a minute for each display equation" in rule and reading_time.MINUTES_PER_EQUATION == 0.5
    assert f"{reading_time.MINUTES_PER_FIGURE} minutes for each figure" in rule
    assert f"{reading_time.MINUTES_PER_EXPLORER:.0f} for each explorer" in rule
    assert "at half its content" in rule and reading_time.FOLDED_SHARE == 0.5
    assert f"The budget is {reading_time.CORE_BUDGET:.0f} minutes for the core" in rule
    assert f"{reading_time.CORE_CHAPTER_BUDGET:.0f} for each of its chapters" in rule
    assert f"{reading_time.DEEP_DIVE_BUDGET:.0f} for each deep dive" in rule


def test_over_budget_names_each_excess():
    row = {"words": 0, "code_lines": 0, "figures": 0}
    rows = [{"part": "The course", "page": f"book/c{i}", "minutes": 31.0, **row} for i in range(5)]
    rows.append({"part": "Deep dives", "page": "book/d", "minutes": 61.0, **row})
    problems = reading_time.over_budget(rows)
    assert len(problems) == 7 and "the core path reads in 155 min" in problems[0] and "book/d" in problems[-1]
    assert reading_time.over_budget([{**rows[0], "minutes": 20.0}]) == []
