"""Plain sentences on the core path, which every learner reads: no sentence of the intro or of the chapters of
"The course" over 35 words, by scripts/sentence_length.py's measure of the prose outside code and math."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import sentence_length  # noqa: E402


def test_the_core_path_is_the_intro_and_chapters_1_to_7():
    names = [Path(p).stem for p in sentence_length.CORE_PAGES]
    assert names[0] == "intro" and [n[:2] for n in names[1:]] == [f"0{i}" for i in range(1, 8)]


@pytest.mark.parametrize("page", sentence_length.CORE_PAGES)
def test_no_sentence_of_the_core_path_is_over_the_limit(page):
    over = [(n, s) for n, s in sentence_length.measure(page) if n > sentence_length.LIMIT]
    assert not over, "\n".join(f"{n} words: {s}" for n, s in over)


def test_the_measure_counts_words_outside_code_and_math():
    text = (
        "---\nfront: matter\n---\n# A heading of five words\n\n"
        "The score $q \\cdot k / \\sqrt{d_k}$ is one word here, and `x.view(B, T, D)` too. "
        "Each {term}`attention head <attention head>` counts as it reads, e.g. two words.\n\n"
        "$$\na = b + c\n$$\n\n```{code-cell} ipython3\nprint('not prose at all, however long it runs')\n```\n"
        "- an item is its own sentence\n- so is this one\n\n| a | table row |\n"
        "```{admonition} Going further\n:class: dropdown\nA box counts. Its words are prose.\n```\n"
    )
    blocks = sentence_length.prose_blocks(text)
    found = [(sentence_length.words(s), s) for b in blocks for s in sentence_length.sentences(b)]
    assert [n for n, _ in found] == [5, 10, 10, 6, 4, 3, 4]
    assert all("print" not in s and "table" not in s and "a = b" not in s for _, s in found)


def test_a_long_sentence_is_found():
    sentence = " ".join(["Word"] + ["word"] * 35) + "."
    blocks = sentence_length.prose_blocks(f"Short one. {sentence} Another short one.\n")
    lengths = [sentence_length.words(s) for b in blocks for s in sentence_length.sentences(b)]
    assert lengths == [2, 36, 3]


#: Words that point the reader at checks they cannot see (11 sentences of the worked example, the
#: parameter-analysis and the where-next chapters did).
HIDDEN_WORDING = r"hidden (cell|check)|(cell|check)s? (below|above|after this box) (checks|asserts)"


@pytest.mark.parametrize("page", sentence_length.CORE_PAGES)
def test_no_sentence_points_at_hidden_cells(page):
    import re

    found = [
        s
        for b in sentence_length.prose_blocks((ROOT / page).read_text(encoding="utf-8"))
        for s in sentence_length.sentences(b)
        if re.search(HIDDEN_WORDING, s, re.IGNORECASE)
    ]
    assert not found, found
    assert re.search(HIDDEN_WORDING, "The hidden cell below checks this answer.", re.IGNORECASE)


def test_explorer_code_is_folded_everywhere():
    """The cell that builds an explorer shows the explorer, not its construction code."""
    import re

    from notebooks import all_texts, read_text

    builds = re.compile(r"\bexplorer\(|_explorer\(\)")
    cells = [(text.stem, c) for text in all_texts() for c in read_text(text).cells if c.cell_type == "code"]
    explorers = [(name, c) for name, c in cells if builds.search(c.source) and "def " not in c.source]
    assert len(explorers) >= 10  # not vacuous: the book has a dozen
    unfolded = [
        (name, c.source.splitlines()[0])
        for name, c in explorers
        if not {"hide-input", "hide-cell", "remove-input", "remove-cell"} & set(c.get("metadata", {}).get("tags", []))
    ]
    assert not unfolded, unfolded
