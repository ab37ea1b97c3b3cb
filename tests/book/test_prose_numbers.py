"""Every decimal number a chapter's prose states is one its cells computed or check.

A number in a sentence ("puts 0.649 on itself") is a hand copy of a computed value: nbval compares
the code cells' outputs with a fresh run, but never the markdown, so nothing else ties the sentence to
the value. A wrong digit typed into the prose passed every other test. This test reads each chapter's
stored notebook (``book/<page>.ipynb`` of :data:`mha.chapters.CHAPTERS`) and asks that every decimal
number in its markdown cells appears in what the chapter's code cells show or check:

* their stored text outputs (streams, ``text/*`` data, the checkers' verdicts; not SVG or JSON, whose
  numbers are coordinates, nor an explorer's or a timing's output, which nbval does not compare and
  whose frames hold every value a slider reaches), or
* a numeric literal in their source, or a string literal that is one number (the asserts of hidden
  ``remove-cell`` checks included; not comments).

**What counts.** A number with a decimal point (``0.649``, ``-0.76``, ``12.5 %``); integers are too
many and mostly counts, sizes and chapter numbers. A found value supports the prose when it rounds to
the prose's number at the prose's digits: ``0.64912`` supports ``0.649``, ``0.65`` supports ``0.650``,
``0.6504`` does not support ``0.649``. A number without a sign matches a value of either sign ("down by
0.004"); a signed one (``-0.76``) needs that sign. A percentage also matches its fraction (``56.25 %``
and ``0.5625``).

**What is not asked to appear** (only where nothing supports it). By rule: a version number ("version
2.5", "torch 2.13"), a number in a web address, and a number that inline math computes from the literals
before it (``$1/64 \\approx 0.0156$``: the arithmetic is evaluated and must give the number). By name:
:data:`ALLOWED`, each entry with the reason its value lives outside the notebook.
"""

from __future__ import annotations

import io
import math
import re
import sys
import tokenize
from pathlib import Path
from typing import NamedTuple

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from execute_notebooks import is_ignored, text_outputs  # noqa: E402

from mha.chapters import CHAPTERS  # noqa: E402

#: A decimal number in prose: not part of a word or of a dotted version (``1.4.0``), optional sign.
PROSE_NUMBER = re.compile(r"(?<![\w.])(?P<sign>[-−]?)(?P<digits>\d+\.\d+)(?![\w.]*\d)(?P<percent>\s?%)?")
#: Any number in a stored output (integers and exponents too: ``1`` supports ``1.0``).
OUTPUT_NUMBER = re.compile(r"[-−]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
#: A string literal that is one number and nothing else: ``"7.389"``, ``'-0.76'``.
NUMBER_STRING = re.compile(r"""^[uU]?(["'])(?P<number>-?\d+(?:\.\d+)?)\1$""")
#: Inline or display math, where a number may be the result of arithmetic the span shows.
MATH = re.compile(r"\$\$[^$]+\$\$|\$[^$]+\$")
#: Stored outputs that are pictures or data, not text a reader reads: their numbers are coordinates.
PICTURES = ("[image/svg+xml]", "[application/json]")
#: A web address: a number in it is part of a name, not a value.
URL = re.compile(r"https?://[^\s)>\]]+")
#: What makes the number after it a version: a library's name ("torch 2.13", "PyTorch version 2.1"), or
#: "version" opening a clause ("; version 2.5 made it"), not "the naive version 6.75 MiB more".
VERSION_BEFORE = re.compile(
    r"(?:\b(?:torch|PyTorch|Python|CUDA|ROCm|NumPy)(?:\s+version)?|(?:^|[;:,(]|\.\s)\s*[Vv]ersions?)\s+$", re.IGNORECASE
)
#: Arithmetic on literals ending in a relation, the left-hand side of ``1/64 \approx``.
ARITHMETIC = re.compile(r"(?:^|=|\\approx)\s*(?P<expr>[\d.\s+\-*/()]+?)\s*(?:=|\\approx)\s*$")

#: Prose numbers whose value lives outside the notebook, by chapter label, with the reason.
ALLOWED: dict[tuple[str, str], str] = {
    ("making_it_fast", "3.35"): "NVIDIA's data-sheet bandwidth in TB/s, the constant perf.H100_SXM (3.35e12 B/s)",
    ("pretrained_heads", "0.002"): "the browser page's tolerance: TOLERANCE in tests/browser/test_browser_live.py",
    ("pretrained_heads", "0.004"): "the difference of 0.623 and 0.619, both stated beside it and asserted",
}


class Stated(NamedTuple):
    """A decimal number as the prose writes it, with the sentence around it for the message."""

    text: str  # as written, sign included: "-0.76", "0.649"
    signed: bool
    percent: bool
    context: str
    rule: str = ""  # "version" or "arithmetic" when a rule sets it aside

    @property
    def decimals(self) -> int:
        return len(self.text.partition(".")[2])

    @property
    def value(self) -> float:
        return float(self.text)


def _clean(source: str) -> str:
    return URL.sub(" ", source).replace("−", "-")


def _by_arithmetic(source: str, start: int) -> bool:
    """True when the number at ``start`` ends inline math's ``<literals> = <number>`` and the arithmetic gives it."""
    for span in MATH.finditer(source):
        if span.start() < start < span.end():
            before = source[span.start() : start].strip("$")
            found = ARITHMETIC.search(before.replace("\\cdot", "*").replace("\\times", "*").replace("{,}", ""))
            if not found or not re.search(r"\d", found["expr"]):
                return False
            if "**" in found["expr"]:
                return False
            try:
                value = eval(found["expr"], {"__builtins__": {}})  # digits and + - * / ( ) only
            except (SyntaxError, ZeroDivisionError, TypeError):
                return False
            digits = PROSE_NUMBER.match(source, start)["digits"]
            places = len(digits.partition(".")[2])
            return math.isclose(round(value, places), float(digits), abs_tol=10 ** -(places + 3))
    return False


def prose_numbers(nb) -> list[Stated]:
    """The decimal numbers of the notebook's markdown cells, each with the rule that may set it aside."""
    stated = []
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        source = _clean(cell.source)
        for m in PROSE_NUMBER.finditer(source):
            rule = (
                "version"
                if VERSION_BEFORE.search(source, max(0, m.start() - 30), m.start())
                else "arithmetic"
                if _by_arithmetic(source, m.start())
                else ""
            )
            line_start = source.rfind("\n", 0, m.start()) + 1
            context = source[max(line_start, m.start() - 60) : m.end() + 40].split("\n")[0]
            stated.append(Stated(m["sign"] + m["digits"], bool(m["sign"]), bool(m["percent"]), context, rule))
    return stated


def _literals(source: str) -> list[str]:
    """The numeric literals of a code cell's Python, and its strings that are one number (``"11.389"``).

    Not its comments, nor numbers inside longer strings; IPython magics are skipped.
    """
    python = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(python).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return OUTPUT_NUMBER.findall(python)
    found = []
    for token in tokens:
        if token.type == tokenize.NUMBER:
            found.append(token.string)
        elif token.type == tokenize.STRING and (quoted := NUMBER_STRING.match(token.string)):
            found.append(quoted["number"])
    return found


def shown_or_checked(nb) -> tuple[set[float], set[float]]:
    """Values the code cells show (signed) and the literals they check with (a literal's sign is an operator)."""
    shown, checked = set(), set()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        # an explorer's or a timing's output is not compared by nbval, and its frames hold every value a
        # slider can reach: only its source counts
        for line in [] if is_ignored(cell) else text_outputs(cell):
            if line.startswith(PICTURES):
                continue
            shown.update(float(n.replace("−", "-")) for n in OUTPUT_NUMBER.findall(line.partition("] ")[2]))
        checked.update(float(n.replace("_", "")) for n in _literals(cell.source) if not n.endswith(("j", "J")))
    return shown, checked


def supports(number: Stated, shown: set[float], checked: set[float]) -> bool:
    """True when some shown or checked value, rounded to the prose's digits, is the prose's number."""
    targets = [(number.value, number.decimals)]
    if number.percent:
        targets.append((number.value / 100, number.decimals + 2))
    values = shown | checked | {-v for v in checked}
    for target, places in targets:
        for value in values:
            found = round(value, places) if number.signed else abs(round(value, places))
            if math.isclose(found, target, abs_tol=10 ** -(places + 3)):
                return True
    return False


def unsupported(nb, allowed: set[str] = frozenset()) -> list[Stated]:
    """The prose numbers of ``nb`` that no output or check of it supports (``allowed`` texts left out)."""
    shown, checked = shown_or_checked(nb)
    return [n for n in prose_numbers(nb) if not n.rule and n.text not in allowed and not supports(n, shown, checked)]


def load(chapter) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / f"{chapter.page}.ipynb", as_version=4)


@pytest.mark.parametrize("chapter", CHAPTERS.values(), ids=lambda c: c.label)
def test_every_decimal_in_the_prose_is_shown_or_checked(chapter):
    allowed = {text for (label, text) in ALLOWED if label == chapter.label}
    missing = unsupported(load(chapter), allowed)
    assert not missing, f"{chapter.page}: numbers in the prose that no output or check holds:\n" + "\n".join(
        f"  {n.text}: ...{n.context}..." for n in missing
    )


def test_every_allowed_number_is_still_in_its_prose():
    stale = [
        (label, text)
        for (label, text) in ALLOWED
        if text not in {n.text for n in prose_numbers(load(next(c for c in CHAPTERS.values() if c.label == label)))}
    ]
    assert not stale, f"ALLOWED names numbers the prose no longer states: {stale}"


def test_the_worked_example_states_many_numbers():
    """Not vacuous: the chapter the review edited states dozens of numbers, 0.649 among them."""
    stated = prose_numbers(load(next(c for c in CHAPTERS.values() if c.label == "worked_example")))
    assert len(stated) >= 40 and "0.649" in {n.text for n in stated}


def _notebook(prose: str, output: str = "saw: 0.64912\n", check: str = "assert round(w, 3) == 0.649") -> object:
    v4 = nbformat.v4
    shown = v4.new_code_cell("print(f'saw: {w:.5f}')", outputs=[v4.new_output("stream", name="stdout", text=output)])
    return v4.new_notebook(cells=[v4.new_markdown_cell(prose), shown, v4.new_code_cell(check)])


def test_a_wrong_digit_in_the_prose_is_found():
    """The review's experiment: chapter 3's "0.649" typed as "0.650" in the prose."""
    assert unsupported(_notebook("The query *saw* puts 0.649 on itself.")) == []
    wrong = unsupported(_notebook("The query *saw* puts 0.650 on itself."))
    assert [n.text for n in wrong] == ["0.650"] and "puts 0.650 on itself" in wrong[0].context
    # the same value written with more or fewer digits is the same number
    assert unsupported(_notebook("It puts 0.65 on itself.", output="0.6500\n", check="pass")) == []
    assert [n.text for n in unsupported(_notebook("It puts 0.650 on itself.", output="0.6504\n", check="pass"))] == []
    assert [n.text for n in unsupported(_notebook("It puts 0.649 on itself.", output="0.6504\n", check="pass"))] == [
        "0.649"
    ]


def test_a_check_literal_supports_the_prose_and_a_comment_does_not():
    assert unsupported(_notebook("It puts 0.649 on itself.", output="done\n")) == []
    as_text = _notebook("It puts 0.649 on itself.", output="done\n", check="assert f'{w:.3f}' == '0.649'")
    assert unsupported(as_text) == []
    commented = _notebook("It puts 0.649 on itself.", output="done\n", check="x = 1  # 0.649")
    assert [n.text for n in unsupported(commented)] == ["0.649"]
    worded = _notebook("It puts 0.649 on itself.", output="done\n", check="note = 'puts 0.649 on itself'")
    assert [n.text for n in unsupported(worded)] == ["0.649"]


def test_signs_percentages_and_the_rules():
    assert unsupported(_notebook("It falls by 0.76.", output="change: -0.76\n", check="pass")) == []
    assert [n.text for n in unsupported(_notebook("It is -0.76.", output="change: 0.76\n", check="pass"))] == ["-0.76"]
    assert unsupported(_notebook("It keeps 56.25 % of them.", output="ratio 0.5625\n", check="pass")) == []
    assert [n.text for n in unsupported(_notebook("It keeps 57.3 % of them.", output="ratio 0.5625\n"))] == ["57.3"]
    ruled = "Version 2.5 changed it; see https://example.org/v1.2/x; $1/64 \\approx 0.0156$ and $2/3 = 0.67$."
    assert unsupported(_notebook(ruled, output="nothing\n", check="pass")) == []
    assert [n.rule for n in prose_numbers(_notebook(ruled))] == ["version", "arithmetic", "arithmetic"]
    naive = _notebook("the naive version 6.75 MiB more", output="nothing\n", check="pass")
    assert [n.text for n in unsupported(naive)] == ["6.75"]
    wrong_sum = _notebook("so $1/64 \\approx 0.0165$ here", output="nothing\n", check="pass")
    assert [n.text for n in unsupported(wrong_sum)] == ["0.0165"]
