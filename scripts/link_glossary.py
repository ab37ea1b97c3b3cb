"""Link each glossary term where a chapter first uses it: ``{term}`text <term>```.

Usage:
    python scripts/link_glossary.py            # rewrite chapters/*.md in place (then `make notebooks`)
    python scripts/link_glossary.py --check    # list the first uses that are not linked; exit 1 if any

The terms are those of ``book/glossary.md``. In each chapter's prose (Markdown cells; not headings,
code, math, inline code, links or existing roles), the first occurrence of a term, in any case and
in the plural, becomes a ``{term}`` link, unless the chapter already links that term before it.
Longer terms win ("multi-head attention" before "attention"). ``tests/book/test_glossary.py`` runs the
check, so a new chapter or paragraph cannot forget its links.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GLOSSARY = ROOT / "book" / "glossary.md"
#: Surface forms for terms whose plural is not "+s", or whose entry name is not what prose says.
EXTRA_FORMS = {
    "query, key, value": ["queries, keys and values", "query, key and value"],
    "FLOPs": ["FLOPs"],
    "KV cache": ["KV cache", "KV caches", "key-value cache"],
    "softmax": ["softmax"],
    "attention weights": ["attention weights"],
    "averaging heads": ["averaging the heads", "averaging heads"],
    "redundancy": ["redundancy", "redundant"],
    "GELU": ["GELU"],
    "saturation": ["saturation", "saturates", "saturated"],
    "pretrained model": ["pretrained model", "pretrained models", "pre-trained model"],
    "feed-forward network": ["feed-forward network", "feed-forward networks", "feed-forward layer"],
    "parameter count": ["parameter count", "parameter counts"],
    "head pruning": ["head pruning", "pruning heads", "pruned heads"],
    "autoregressive decoding": ["autoregressive decoding"],
    "convex combination": ["convex combination", "convex combinations"],
    "positional embedding": [
        "positional embedding",
        "positional embeddings",
        "position embedding",
        "position embeddings",
    ],
    "pre-norm": ["pre-norm"],
    "post-norm": ["post-norm"],
}
ROLE = re.compile(r"\{[a-z:]+\}`[^`]*`")
#: Spans of a line that are never linked: existing roles, inline code, inline math, links.
PROTECTED = re.compile(r"\{[a-z:]+\}`[^`]*`|``[^`]*``|`[^`]*`|\$[^$]*\$|\[[^\]]*\]\([^)]*\)|<[^>]+>")


def glossary_terms(path: Path = GLOSSARY) -> list[str]:
    """The entry names of the ``{glossary}`` directive in ``book/glossary.md``."""
    text = path.read_text(encoding="utf-8")
    body = text[text.index("```{glossary}") : text.rindex("```")].splitlines()[1:]
    return [line.strip() for line in body if line.strip() and not line.startswith((" ", "\t"))]


def forms(term: str) -> list[str]:
    if term in EXTRA_FORMS:
        return EXTRA_FORMS[term]
    plural = term[:-1] + "ies" if term.endswith("y") and term[-2:] != "ey" else term + "s"
    return [term, plural]


def _admonition_aware(text: str):
    """prose_lines, plus the body lines of admonitions (which are prose)."""
    lines = text.splitlines()
    inside, depth_fence = False, None
    out = []
    for i, line in enumerate(lines):
        stripped = line.strip()
        m = re.match(r"^(`{3,}|:{3,})\{(admonition|note|tip|warning|important|dropdown)\}", stripped)
        if m and not inside:
            inside, depth_fence = True, m.group(1)
            continue
        if inside:
            if stripped == depth_fence:
                inside = False
                continue
            if stripped.startswith(":"):
                continue
            out.append((i, line))
    return out


def linkable(text: str) -> list[tuple[int, str]]:
    """The prose lines of a chapter, in order, with admonition bodies included."""
    plain = {i: line for i, line in _plain_prose(text)}
    plain.update(dict(_admonition_aware(text)))
    return sorted(plain.items())


def _plain_prose(text: str):
    fence = None
    math = False
    for i, line in enumerate(text.splitlines()):
        stripped = line.strip()
        match = re.match(r"^(`{3,}|:{3,}|~{3,})", stripped)
        if fence is not None:
            if match and stripped == match.group(1) and stripped[0] == fence[0] and len(stripped) >= len(fence):
                fence = None
            continue
        if match:
            fence = match.group(1)
            continue
        if stripped.startswith("$$"):
            if not (stripped.count("$$") == 2 and len(stripped) > 4):
                math = not math
            continue
        if math:
            continue
        if i < 20 and text.startswith("---") and _in_front_matter(text, i):
            continue
        if stripped.startswith(("#", ":", "+++", "(", "|", "<", "```")) or stripped == "---":
            continue
        yield i, line


def _in_front_matter(text: str, index: int) -> bool:
    lines = text.splitlines()
    try:
        end = lines.index("---", 1)
    except ValueError:
        return False
    return index <= end


def _free_spans(line: str) -> list[tuple[int, int]]:
    spans, start = [], 0
    for m in PROTECTED.finditer(line):
        spans.append((start, m.start()))
        start = m.end()
    spans.append((start, len(line)))
    return spans


def _pattern(words) -> re.Pattern:
    alternatives = "|".join(re.escape(f) for f in sorted(words, key=len, reverse=True))
    return re.compile(r"(?<![\w-])(" + alternatives + r")(?![\w-])", re.IGNORECASE)


def find_first(lines: list[tuple[int, str]], term: str, terms=()):
    """``(line index, start, end, linked)`` of the first use of ``term`` (None if unused).

    A use inside a longer term ("attention" in "multi-head attention") does not count: that is a
    use of the longer term.
    """
    pattern = _pattern(forms(term))
    own = [f.lower() for f in forms(term)]
    longer = [f for t in terms if t != term for f in forms(t) if any(o in f.lower() and o != f.lower() for o in own)]
    covering = _pattern(longer) if longer else None
    for i, line in lines:
        events = []
        for m in ROLE.finditer(line):
            if m.group(0).startswith("{term}"):
                inner = m.group(0)[len("{term}`") : -1]
                target = inner.split("<")[-1].rstrip(">").strip() if "<" in inner else inner
                if target.lower() == term.lower():
                    events.append((m.start(), m.end(), True))
        covered = [(m.start(1), m.end(1)) for m in covering.finditer(line)] if covering else []
        for a, b in _free_spans(line):
            for m in pattern.finditer(line, a, b):
                if not any(c0 <= m.start(1) and m.end(1) <= c1 for c0, c1 in covered):
                    events.append((m.start(1), m.end(1), False))
        if events:
            start, end, linked = min(events)
            return i, start, end, linked
    return None


def link_chapter(text: str, terms: list[str]) -> tuple[str, list[str]]:
    """The chapter with each term's first use linked, and the terms it linked."""
    lines = text.splitlines()
    done = []
    for term in sorted(terms, key=len, reverse=True):
        hit = find_first(linkable("\n".join(lines)), term, terms)
        if hit is None or hit[3]:
            continue
        i, start, end, _ = hit
        word = lines[i][start:end]
        role = f"{{term}}`{word}`" if word.lower() == term.lower() else f"{{term}}`{word} <{term}>`"
        lines[i] = lines[i][:start] + role + lines[i][end:]
        done.append(term)
    return "\n".join(lines) + ("\n" if text.endswith("\n") else ""), done


def is_definition(line: str, start: int) -> bool:
    """True when the use at ``start`` is written as a definition: inside a bold span (``**...**``)."""
    return line[:start].count("**") % 2 == 1 and "**" in line[start:]


def reading_order() -> list[Path]:
    """The chapters' sources (``chapters/NAME.md``), course then deep dives, in ``_toc.yml``'s order."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    pages = [entry["file"] for part in toc["parts"] if part.get("numbered") for entry in part["chapters"]]
    return [ROOT / "chapters" / (Path(page).name + ".md") for page in pages]


def used_before_defined(texts: list[tuple[str, str]], terms: list[str]) -> list[str]:
    """Glossary terms whose first use in reading order is not their definition, one sentence each.

    ``texts`` are ``(page name, Markdown)`` in reading order. A term's first use in the course (the
    first page that uses it, its first use there) must be a bold definition (:func:`is_definition`);
    later uses need none. The intro is not in ``texts``: it names what the course will teach.
    """
    problems, seen = [], set()
    for name, text in texts:
        lines = linkable(text)
        source = text.splitlines()
        for term in terms:
            if term in seen:
                continue
            hit = find_first(lines, term, terms)
            if hit is None:
                continue
            seen.add(term)
            i, start, _end, _linked = hit
            if not is_definition(source[i], start):
                problems.append(f"{name}, line {i + 1}: first use of {term!r} in the course, not defined there")
    return problems


def unlinked_first_uses(text: str, terms: list[str]) -> list[str]:
    """Terms whose first use in the chapter's prose is not a link."""
    lines = linkable(text)
    missing = []
    for term in terms:
        hit = find_first(lines, term, terms)
        if hit is not None and not hit[3]:
            missing.append(term)
    return missing


def main(argv: list[str]) -> int:
    terms = glossary_terms()
    bad = 0
    for path in sorted((ROOT / "chapters").glob("*.md")):
        text = path.read_text(encoding="utf-8")
        if "--check" in argv:
            missing = unlinked_first_uses(text, terms)
            if missing:
                bad += 1
                print(f"{path.name}: first use not linked: {', '.join(missing)}")
        else:
            new, done = link_chapter(text, terms)
            if new != text:
                path.write_text(new, encoding="utf-8")
            print(f"{path.name}: linked {len(done)} terms")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
