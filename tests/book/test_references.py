"""The bibliography lists exactly the works the pages cite, and every citation resolves."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CITE = re.compile(r"\{cite(?::[a-z]+)?\}`([^`]+)`")
ENTRY = re.compile(r"^@\w+\{([^,\s]+),", re.MULTILINE)


def cited_keys() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted(ROOT.glob("chapters/*.md")) + sorted(ROOT.glob("book/*.md")):
        if path.name == "README.md":
            continue
        for match in CITE.finditer(path.read_text(encoding="utf-8")):
            for key in match.group(1).split(","):
                found.setdefault(key.strip(), []).append(path.name)
    return found


def test_every_entry_is_cited_and_every_citation_exists():
    entries = ENTRY.findall((ROOT / "book" / "references.bib").read_text(encoding="utf-8"))
    assert len(entries) == len(set(entries)), "duplicate keys in references.bib"
    cited = cited_keys()
    assert not sorted(set(entries) - set(cited)), f"listed but cited nowhere: {sorted(set(entries) - set(cited))}"
    missing = {k: v for k, v in cited.items() if k not in entries}
    assert not missing, f"cited but not in references.bib: {missing}"


def test_bibliography_lists_cited_works_only():
    text = (ROOT / "book" / "references.md").read_text(encoding="utf-8")
    assert "```{bibliography}" in text and ":all:" not in text


def test_the_citation_pattern():
    assert CITE.findall("see {cite}`a2019,b2020` and {cite:p}`c`") == ["a2019,b2020", "c"]
