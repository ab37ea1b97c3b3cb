"""The chapters' code comments and docstrings in another language (the Chinese edition and its notebooks).

A comment is translated as a block: the full-line comments of consecutive lines at one indentation are
one message (their texts joined by spaces), a comment after code is one message, a docstring is one
message (``inspect.cleandoc``'s text). ``locales/<language>/comments.json`` maps each English message
to its translation; a translation may hold line breaks (``\\n``), each line becoming a comment line at
the block's indentation (a comment after code stays on its line). Only the comments and the docstrings
change: every other token of the code stays as it was (``tests/zh_CN/test_zh_comments.py`` proves it).

What needs no translation: a comment with no English word of three letters (``# (B, H, T, Dh)``,
``# fp16``) and a tool's directive (``# noqa: E731``).

    python scripts/code_comments.py          # add the chapters' new comments to the catalogue, drop gone ones
    python scripts/code_comments.py --check  # what is untranslated or gone (exit 1 if anything)
"""

from __future__ import annotations

import ast
import inspect
import io
import json
import re
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CATALOGUE = "locales/{language}/comments.json"
#: A comment that is prose: an English word of three letters or more, and not a tool's directive.
WORD = re.compile(r"[A-Za-z]{3,}")
DIRECTIVE = re.compile(r"^#\s*(noqa|type:|pragma|fmt:|isort:)")
HIDDEN = {"remove-input", "remove-cell"}


@dataclass(frozen=True)
class Block:
    """One message of a cell's code: ``first``..``last`` are 1-based lines; ``column`` is where the
    comment's ``#`` (or the docstring's statement) starts; ``after_code`` says a comment follows code."""

    kind: str  # "comment" or "docstring"
    first: int
    last: int
    column: int
    text: str
    after_code: bool = False
    end_column: int = 0  # a docstring's: where its literal ends on its last line


def needs_translation(block: Block) -> bool:
    return bool(WORD.search(block.text)) and not (block.kind == "comment" and DIRECTIVE.match("# " + block.text))


def _comment_text(token: str) -> str:
    return token[1:].strip()


#: A shell comment: ``#`` at a line's start or after a space, to the line's end.
SHELL_COMMENT = re.compile(r"(?:^|(?<=\s))#\s?(.*)$")


def blocks(source: str, language: str = "python") -> list[Block]:
    """The comment blocks and docstrings of ``source``: Python (IPython's ``%`` lines left out), or any
    other language of a page's code block, read as a shell reads comments (one block per line)."""
    if language not in ("python", "ipython", "ipython3", "py", ""):
        found = []
        for row, line in enumerate(source.split("\n"), 1):
            match = SHELL_COMMENT.search(line)
            if match:
                after = bool(line[: match.start()].strip())
                found.append(Block("comment", row, row, match.start(), match.group(1).strip(), after_code=after))
        return found
    code = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.split("\n"))
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
        tree = ast.parse(code)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return []
    lines = code.split("\n")
    found: list[Block] = []
    run: list[tokenize.TokenInfo] = []

    def close():
        if run:
            text = " ".join(_comment_text(t.string) for t in run)
            found.append(Block("comment", run[0].start[0], run[-1].start[0], run[0].start[1], text))
            run.clear()

    for token in tokens:
        if token.type != tokenize.COMMENT:
            if token.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
                close()
            continue
        row, column = token.start
        if lines[row - 1][:column].strip():  # after code on its line
            close()
            found.append(Block("comment", row, row, column, _comment_text(token.string), after_code=True))
            continue
        if run and (row != run[-1].start[0] + 1 or column != run[0].start[1] or DIRECTIVE.match(token.string)):
            close()
        run.append(token)
    close()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                text = inspect.cleandoc(first.value.value)
                column = len(lines[first.lineno - 1].encode()[: first.col_offset].decode())  # ast counts bytes
                end_column = len(lines[first.end_lineno - 1].encode()[: first.end_col_offset].decode())
                found.append(Block("docstring", first.lineno, first.end_lineno, column, text, end_column=end_column))
    return sorted(found, key=lambda b: (b.first, b.column))


def _docstring(text: str, indent: str, original: str) -> str:
    """A docstring literal for ``text`` at ``indent``, with ``original``'s quotes and closing line."""
    quote = original.lstrip("rRuU")[:3]
    body = text.split("\n")
    rendered = body[0] + "".join("\n" + (indent + line if line else "") for line in body[1:])
    closing = "\n" + indent if re.search(r"\n[ \t]*$", original[: -len(quote)]) else ""
    return f"{quote}{rendered}{closing}{quote}"


def translate_code(source: str, table: dict[str, str], language: str = "python") -> str:
    """``source`` with each of its comment blocks and docstrings that ``table`` translates replaced by
    the translation; everything else, character for character, as it was."""
    lines = source.split("\n")
    for block in reversed(blocks(source, language)):
        done = table.get(block.text)
        if not done or not needs_translation(block):
            continue
        if block.kind == "docstring":
            start, end = block.first - 1, block.last - 1
            text = "\n".join(lines[start : end + 1])
            stop = len(text) - len(lines[end]) + block.end_column
            literal = _docstring(done, " " * block.column, text[block.column : stop])
            lines[start : end + 1] = (text[: block.column] + literal + text[stop:]).split("\n")
        elif block.after_code:
            row = block.first - 1
            lines[row] = lines[row][: block.column] + "# " + done.replace("\n", " ")
        else:
            indent = " " * block.column
            lines[block.first - 1 : block.last] = [f"{indent}# {line}".rstrip() for line in done.split("\n")]
    return "\n".join(lines)


#: A fenced code block of a page's Markdown: its fence, its language (or directive) line, its code.
FENCED = re.compile(r"^([ \t]*)(```+|~~~+)([^\n]*)\n(.*?)^\1\2[ \t]*$", re.S | re.M)


def fence_language(info: str) -> str | None:
    """The language of a fence's info string (```` ```bash ```` -> bash, ```` ```{code-cell} python ````
    -> python); ``None`` for a directive that is not code (its content is Markdown)."""
    info = info.strip()
    if info.startswith("{"):
        name, _, rest = info[1:].partition("}")
        return (rest.strip() or "python") if name in ("code", "code-block", "code-cell", "sourcecode") else None
    return info.split()[0] if info else "text"


def fences(markdown: str):
    """(language, code, start, end) of every fenced code block in ``markdown`` (offsets of the code)."""
    for match in FENCED.finditer(markdown):
        language = fence_language(match.group(3))
        if language is not None and not match.group(4).lstrip().startswith(":"):
            yield language, match.group(4), match.start(4), match.end(4)


def translate_fences(markdown: str, table: dict[str, str]) -> str:
    """``markdown`` with the comments of its fenced code blocks translated (``translate_code``)."""
    for language, code, start, end in reversed(list(fences(markdown))):
        markdown = markdown[:start] + translate_code(code, table, language) + markdown[end:]
    return markdown


def catalogue_path(language: str) -> Path:
    return ROOT / CATALOGUE.format(language=language)


def load(language: str) -> dict[str, str]:
    """English -> translation of the comments, for ``language`` (empty for English or no catalogue)."""
    path = catalogue_path(language)
    if language == "en" or not path.is_file():
        return {}
    return {english: done for english, done in json.loads(path.read_text(encoding="utf-8")).items() if done}


def chapter_code(visible_only: bool = True):
    """(page, language, code) for every code cell of the book's notebooks and every fenced code block of
    its pages' Markdown: the code a page shows (folded or not), or, with ``visible_only=False``, every
    code cell a learner's notebook holds too."""
    import nbformat

    for path in sorted((ROOT / "book").glob("*.md")):
        if path.stem == "README":  # the maintainers' notes, not a page
            continue
        for language, code, _, _ in fences(path.read_text(encoding="utf-8")):
            yield path.stem, language, code
    for path in sorted((ROOT / "book").glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            tags = set(cell.get("metadata", {}).get("tags", []))
            if cell.cell_type == "markdown":
                for language, code, _, _ in fences(cell.source):
                    yield path.stem, language, code
            elif cell.cell_type == "code" and not (visible_only and tags & HIDDEN):
                yield path.stem, "python", cell.source


def messages(visible_only: bool = True) -> dict[str, list[str]]:
    """English message -> the pages whose code holds it, for every block that needs a translation."""
    found: dict[str, list[str]] = {}
    for page, language, code in chapter_code(visible_only):
        for block in blocks(code, language):
            if needs_translation(block):
                pages = found.setdefault(block.text, [])
                if page not in pages:
                    pages.append(page)
    return found


#: The widest line a translated comment may make, counting a Han character or full-width mark as two
#: columns (the chapters' code keeps to 74; a page's code column shows about 80 without scrolling).
WIDTH = 80


def display_width(line: str) -> int:
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)


def problems(language: str = "zh_CN") -> list[str]:
    """Untranslated visible messages, translations of messages no chapter holds any more, translations
    that change a number, break the catalogues' typography rules or make a line wider than ``WIDTH``."""
    import i18n

    path = catalogue_path(language)
    table = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    wanted = messages()
    anywhere = messages(visible_only=False)
    out = [f"untranslated ({', '.join(p)}): {m[:80]!r}" for m, p in wanted.items() if not table.get(m)]
    out += [f"gone (no chapter has it): {m[:80]!r}" for m in table if m not in anywhere]
    for english, done in table.items():
        if not done:
            continue
        if i18n._numbers(english) != i18n._numbers(done):
            out.append(f"numbers differ in {done[:60]!r}: {sorted(i18n._numbers(english))}")
        out += [f"{done[:60]!r}: {p}" for p in i18n.typography_problems(done) + i18n.rendering_problems(done)]
    done_table = {m: t for m, t in table.items() if t}
    for page, language, code in chapter_code(visible_only=False):
        before = set(code.split("\n"))
        for line in translate_code(code, done_table, language).split("\n"):
            if line not in before and display_width(line) > WIDTH:
                out.append(f"{page}: a line of {display_width(line)} columns (at most {WIDTH}): {line.strip()[:60]!r}")
    return out


def update(language: str = "zh_CN") -> tuple[int, int]:
    """Adds every message of the learner's code (visible or not) missing from the catalogue, empty, and
    drops the ones no chapter holds; returns (added, dropped)."""
    path = catalogue_path(language)
    table = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    anywhere = messages(visible_only=False)
    added = [m for m in anywhere if m not in table]
    dropped = [m for m in table if m not in anywhere]
    kept = {m: table.get(m, "") for m in anywhere}
    path.write_text(json.dumps(kept, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return len(added), len(dropped)


def main(argv: list[str]) -> int:
    if "--check" in argv:
        found = problems()
        print("\n".join(found) or "every visible comment is translated")
        return 1 if found else 0
    added, dropped = update()
    print(f"{catalogue_path('zh_CN').relative_to(ROOT)}: {added} added, {dropped} dropped")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
