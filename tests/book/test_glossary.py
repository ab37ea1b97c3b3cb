"""Every chapter links each glossary term where it first uses it ({term} roles), and the links resolve."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("link_glossary", ROOT / "scripts" / "link_glossary.py")
G = importlib.util.module_from_spec(spec)
spec.loader.exec_module(G)
TERMS = G.glossary_terms()
CHAPTERS = sorted((ROOT / "chapters").glob("*.md"))


def test_the_glossary_has_its_terms():
    assert len(TERMS) >= 40 and "multi-head attention" in TERMS and "positional embedding" in TERMS


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_first_use_of_every_term_is_linked(path):
    missing = G.unlinked_first_uses(path.read_text(encoding="utf-8"), TERMS)
    assert not missing, f"{path.name}: link the first use of {missing} (python scripts/link_glossary.py)"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_every_term_link_names_a_glossary_entry(path):
    lower = {t.lower() for t in TERMS}
    for match in G.ROLE.finditer(path.read_text(encoding="utf-8")):
        role = match.group(0)
        if role.startswith("{term}"):
            inner = role[len("{term}`") : -1]
            target = inner.split("<")[-1].rstrip(">").strip() if "<" in inner else inner
            assert target.lower() in lower, f"{path.name}: {role} names no glossary entry"


def test_every_chapter_links_some_terms():
    counts = {p.name: p.read_text(encoding="utf-8").count("{term}`") for p in CHAPTERS}
    assert all(n >= 5 for n in counts.values()), counts


def test_detector_on_small_examples():
    terms = ["attention", "multi-head attention", "mask", "token"]
    text = "# Attention\n\nMulti-head attention uses a `mask` and $mask$ and tokens.\n\nAttention again, and a mask.\n"
    assert G.unlinked_first_uses(text, terms) == ["attention", "multi-head attention", "mask", "token"]
    linked, done = G.link_chapter(text, terms)
    assert "{term}`Multi-head attention`" in linked and "{term}`tokens <token>`" in linked
    assert "# Attention" in linked and "`mask`" in linked and "$mask$" in linked  # headings, code, math untouched
    assert "{term}`Attention` again, and a {term}`mask`." in linked
    assert G.unlinked_first_uses(linked, terms) == [] and sorted(done) == sorted(terms)
    code = "```{code-cell} ipython3\nattention = 1\n```\n\nNo term here.\n"
    assert G.unlinked_first_uses(code, terms) == []


def test_every_term_is_defined_before_it_is_used():
    """In reading order (every chapter, as ``_toc.yml`` orders them), a glossary term's first use is its definition, the
    term in bold with its glossary link (`**{term}`query <query, key, value>`** is ...`)."""
    texts = [(p.stem, p.read_text(encoding="utf-8")) for p in G.reading_order()]
    assert [name[:2] for name, _ in texts] == [f"{n:02d}" for n in range(1, 12)]
    problems = G.used_before_defined(texts, TERMS)
    assert not problems, "define each term where the course first uses it:\n  " + "\n  ".join(problems)


def test_defined_before_use_detector():
    terms = ["attention", "mask", "causal mask"]
    first = "A **{term}`mask`** hides keys. Attention is everywhere.\n"
    second = "Now **{term}`attention`** is defined, after its use, and a {term}`causal mask` too.\n"
    problems = G.used_before_defined([("01_a", first), ("02_b", second)], terms)
    assert problems == [
        "01_a, line 1: first use of 'attention' in the course, not defined there",
        "02_b, line 1: first use of 'causal mask' in the course, not defined there",
    ]
    fixed = "**{term}`Attention`** weighs values; a **{term}`causal mask <causal mask>`** hides the future.\n"
    assert G.used_before_defined([("01_a", fixed + first), ("02_b", second)], terms) == []
