"""The checkers' phrasebooks, extracted from the code as gettext extracts the prose.

A checker says each message once, ``say("{name} must hold {length} numbers, found shape {shape}", ...)``
(:func:`mha.chapters.checking.verdict_i18n.say`). Each topic's phrasebook, ``mha/chapters/<topic>/zh_CN.json``,
holds one entry per template its modules say, keyed by the template (indentation aside). This module
reads every ``say(...)`` call with ``ast``; ``python scripts/i18n.py strings`` lists what is new
(said, not yet translated) or gone (translated, no longer said) per topic, and ``strings --write`` adds
the new ones untranslated (``""``) and removes the gone ones. ``tests/zh_CN/test_verdict_i18n.py``
fails while either list is not empty.
"""

from __future__ import annotations

import ast
import json
import string
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mha.chapters.checking.verdict_i18n import only_fields  # noqa: E402

TOPICS = ROOT / "mha" / "chapters"
LANGUAGE = "zh_CN"


def say_calls(source: str) -> list[tuple[int, str | None]]:
    """``(line, template)`` of each ``say(...)`` call in ``source``; the template is None when the first
    argument is not one string literal (the extraction cannot read it, and the tests say so)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if name == "say" and node.args:
                first = node.args[0]
                literal = isinstance(first, ast.Constant) and isinstance(first.value, str)
                found.append((node.lineno, first.value if literal else None))
    return found


def said(root: Path = TOPICS) -> tuple[dict[str, dict[str, list[str]]], list[str]]:
    """``({topic: {template: ["file:line", ...]}}, problems)`` for every module of every topic; a problem
    is a ``say`` whose template is not a literal, or whose fields are not plain names."""
    topics: dict[str, dict[str, list[str]]] = {}
    problems = []
    for path in sorted(root.glob("*/*.py")):
        where = path.relative_to(ROOT).as_posix()
        for line, template in say_calls(path.read_text(encoding="utf-8")):
            if template is None:
                problems.append(f"{where}:{line}: say() needs one string literal as its template")
                continue
            names = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
            if any(not name.isidentifier() for name in names):
                problems.append(f"{where}:{line}: a field must be a plain name: {template!r}")
            key = template.strip()
            if key and not only_fields(key):  # a template of fields only needs no entry
                topics.setdefault(path.parent.name, {}).setdefault(key, []).append(f"{where}:{line}")
    return topics, problems


def book_path(topic: str, language: str = LANGUAGE) -> Path:
    return TOPICS / topic / f"{language}.json"


def read_book(topic: str, language: str = LANGUAGE) -> dict[str, str]:
    path = book_path(topic, language)
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def differences(language: str = LANGUAGE) -> dict[str, tuple[list[str], list[str]]]:
    """``{topic: (new, gone)}``: templates said but not translated, and entries no code says any more."""
    topics, _ = said()
    out = {}
    for topic in sorted({*topics, *(p.parent.name for p in TOPICS.glob(f"*/{language}.json"))}):
        book, templates = read_book(topic, language), topics.get(topic, {})
        new = [t for t in templates if not book.get(t)]
        gone = [t for t in book if t not in templates]
        if new or gone:
            out[topic] = (new, gone)
    return out


def write(language: str = LANGUAGE) -> dict[str, tuple[list[str], list[str]]]:
    """Adds each new template untranslated and removes each gone entry; returns :func:`differences`."""
    found = differences(language)
    for topic, (new, gone) in found.items():
        book = {k: v for k, v in read_book(topic, language).items() if k not in gone}
        book.update({t: "" for t in new if t not in book})
        path = book_path(topic, language)
        if book:
            path.write_text(json.dumps(book, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
        elif path.exists():
            path.unlink()
    return found


def report(found: dict[str, tuple[list[str], list[str]]]) -> str:
    lines = []
    for topic, (new, gone) in found.items():
        lines += [f"{topic}: new (translate it in {book_path(topic).relative_to(ROOT)}): {t!r}" for t in new]
        lines += [f"{topic}: gone (no code says it): {t!r}" for t in gone]
    return "\n".join(lines) or "every template the checkers say is translated, and every entry is said"
