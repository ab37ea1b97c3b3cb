"""The code's comments in the reader's language: ``scripts/code_comments.py`` and its catalogue.

The Chinese edition and its notebooks show the chapters' code with its comments and docstrings from
``locales/zh_CN/comments.json``. Checked here without a build: every comment of the code a page shows
is translated, a translation keeps the English's numbers and the catalogues' typography and fits the
code column, and translating changes nothing but comments and docstrings, in every cell. The built
page is checked by ``tests/browser/test_browser_zh.py``.
"""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import code_comments  # noqa: E402
import notebooks  # noqa: E402

CJK = re.compile(r"[\u4e00-\u9fff]")
TABLE = code_comments.load("zh_CN")


def test_the_catalogue_is_complete_and_clean():
    assert code_comments.problems("zh_CN") == []


def _code_tokens(source: str) -> list[tuple[int, str]]:
    """The tokens of ``source`` that are code: no comment, no docstring, no layout."""
    docstrings = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                docstrings.add(value.lineno)
    layout = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
    return [
        (t.type, t.string)
        for t in tokenize.generate_tokens(io.StringIO(source).readline)
        if t.type not in layout and not (t.type == tokenize.STRING and t.start[0] in docstrings)
    ]


def _strip_docstrings(tree: ast.AST) -> str:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                value.value = ""
    return ast.dump(tree)


def python_cells():
    for path in sorted((ROOT / "book").glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code" and not cell.source.lstrip().startswith(("%", "!")):
                yield path.stem, cell.source


def test_translating_changes_only_comments_and_docstrings():
    changed = 0
    for page, source in python_cells():
        translated = code_comments.translate_code(source, TABLE)
        changed += translated != source
        assert _code_tokens(translated) == _code_tokens(source), f"{page}: the code changed"
        assert _strip_docstrings(ast.parse(translated)) == _strip_docstrings(ast.parse(source)), page
    assert changed > 100  # the check ran over the translated cells, not only untouched ones


def test_a_chinese_notebook_has_chinese_comments_where_the_page_shows_code():
    nb = notebooks.learner_notebook(nbformat.read(ROOT / "book" / "04_build_it_yourself.ipynb", as_version=4))
    chinese = notebooks.translate_notebook(nb, notebooks.chapter_messages("04_build_it_yourself", "zh_CN"), "zh_CN")
    shown = [
        c for c in chinese.cells if c.cell_type == "code" and not set(c.metadata.get("tags", [])) & code_comments.HIDDEN
    ]
    left = [
        b.text
        for c in shown
        for b in code_comments.blocks(c.source)
        if code_comments.needs_translation(b) and not CJK.search(b.text)
    ]
    assert left == []
    assert any("# 1. 分数" in c.source for c in shown), "the build-it-yourself chapter's first step reads in Chinese"


def test_blocks_docstrings_and_comments_after_code_are_rendered_in_place():
    source = (
        "def f(x):\n"
        '    """The (T, T) mask, True = may attend:\n'
        "    query t sees key s.\n"
        '    """\n'
        "    # one sentence of a comment,\n"
        "    # over two lines\n"
        "    y = x  # (5,): one score per key\n"
        "    return y  # noqa: E731\n"
    )
    table = {
        "The (T, T) mask, True = may attend:\nquery t sees key s.": (
            "(T, T) 掩码，True 表示可以关注：\n查询 t 看得到键 s。"
        ),
        "one sentence of a comment, over two lines": "一句注释，\n分两行",
        "(5,): one score per key": "(5,)：每个键一个分数",
        "noqa: E731": "不该翻译",
    }
    assert code_comments.translate_code(source, table) == (
        "def f(x):\n"
        '    """(T, T) 掩码，True 表示可以关注：\n'
        "    查询 t 看得到键 s。\n"
        '    """\n'
        "    # 一句注释，\n"
        "    # 分两行\n"
        "    y = x  # (5,)：每个键一个分数\n"
        "    return y  # noqa: E731\n"
    )


def test_a_shell_block_of_the_prose_is_translated_too():
    markdown = "Run:\n\n```bash\nmake lab   # installs the course\nmake test\n```\n"
    table = {"installs the course": "安装课程"}
    assert code_comments.translate_fences(markdown, table) == (
        "Run:\n\n```bash\nmake lab   # 安装课程\nmake test\n```\n"
    )


@pytest.mark.parametrize("english", ["# (B, H, T, Dh)", "# fp16", "# noqa: E731", "# b, n, L, g, d_k, s"])
def test_code_and_directives_need_no_translation(english):
    (block,) = code_comments.blocks(f"x = 1\n{english}\n")
    assert not code_comments.needs_translation(block)


def test_the_check_names_an_untranslated_comment_a_changed_number_and_a_wide_line(monkeypatch, tmp_path):
    catalogue = tmp_path / "comments.json"
    wanted = code_comments.messages()
    first, second, *rest = wanted
    table = dict.fromkeys(wanted, "一个翻译")
    table[first] = ""
    table[second] = "数字 12345 与原文不同"
    table[rest[0]] = "很长" * 45
    catalogue.write_text(__import__("json").dumps(table, ensure_ascii=False), encoding="utf-8")
    monkeypatch.setattr(code_comments, "catalogue_path", lambda language: catalogue)
    found = "\n".join(code_comments.problems("zh_CN"))
    assert "untranslated" in found and "numbers differ" in found and "columns (at most 80)" in found
