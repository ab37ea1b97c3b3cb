"""The page's tokenizer (``_ext/static/mha_wordpiece.js``) cuts a sentence as the Python one does.

The pretrained-heads chapter's in-browser model must see the ids PyTorch's model sees. Node.js runs the page's module on
every line of the course's chapters (English), every translated paragraph of that chapter (Chinese) and
Unicode's corner cases (accents, combining marks, full-width punctuation, symbols, emoji, control and
format characters, characters outside the vocabulary, a word of more than 100 characters), and its ids
must equal ``mha.bert.load_tokenizer``'s (the model's ``tokenizer.json``) for every one.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import skip_or_fail

ROOT = Path(__file__).resolve().parents[2]
MODULE = ROOT / "_ext" / "static" / "mha_wordpiece.js"
CORNER_CASES = [
    "Café naïve résumé déjà vu, Ångström façade",
    "İstanbul ΣΊΣΥΦΟΣ straße ﬁnance",  # dotted capital I, Greek final sigma, sharp s, a ligature
    "a\u0301\u0302 combining marks, e\u0308\u0323",
    "full-width：（括号），“引号”、顿号……！？",
    "math ≤ ≥ ± × ÷ √ ∑ ∞ → ⇒ ∀x ∈ ℝ, €5 £3 ¥2 $1 § ¶ © ® ™ °",
    "emoji 🙂🚀 and 👩‍💻 joined, flags 🇨🇳",
    "tab\there\nnew line\r\ncarriage, zero\u200bwidth, soft\u00adhyphen, nbsp\u00a0space, bom\ufeff",
    "null\u0000byte, bell\u0007, replacement \ufffd char",
    "Κόσμε Привет мир مرحبا नमस्ते こんにちは 안녕하세요 สวัสดี",
    "多头注意力让模型同时关注不同位置的信息。𠀀𪜀 CJK extension B",
    "x" * 120 + " and " + "antidisestablishmentarianism" * 3,
    "don't won't it's O'Neill rock'n'roll e.g. U.S.A. 3.14 1,000,000 50% #hash @at ~tilde `tick`",
    "",
    "   ",
]


def sentences() -> list[str]:
    lines = [
        line.strip() for path in sorted((ROOT / "chapters").glob("*.md")) for line in path.read_text().splitlines()
    ]
    po = (ROOT / "locales" / "zh_CN" / "LC_MESSAGES" / "book" / "11_pretrained_heads.po").read_text(encoding="utf-8")
    chinese = [line[len('msgstr "') : -1] for line in po.splitlines() if line.startswith('msgstr "') and len(line) > 10]
    return sorted({line for line in lines if line}) + chinese + CORNER_CASES


def test_the_page_tokenizer_gives_the_python_ids(tmp_path):
    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        skip_or_fail("Node.js is not installed (the book build needs it: see README.md)")
    from mha.bert import load_tokenizer

    tokenizer = load_tokenizer()
    tokenizer.no_truncation()
    tokenizer.no_padding()
    vocab = tokenizer.get_vocab()
    texts = sentences()
    expected = [encoding.ids for encoding in tokenizer.encode_batch(texts)]

    (tmp_path / "wordpiece.mjs").write_text(MODULE.read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "input.json").write_text(json.dumps({"vocab": vocab, "texts": texts}), encoding="utf-8")
    runner = tmp_path / "run.mjs"
    runner.write_text(
        'import { readFileSync } from "node:fs";\n'
        'import { tokenize } from "./wordpiece.mjs";\n'
        'const { vocab, texts } = JSON.parse(readFileSync(process.argv[2], "utf8"));\n'
        "const map = new Map(Object.entries(vocab));\n"
        "console.log(JSON.stringify(texts.map(t => tokenize(t, map).ids)));\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [node, str(runner), str(tmp_path / "input.json")], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    wrong = [(text, g, e) for text, g, e in zip(texts, got, expected, strict=True) if g != e]
    assert not wrong, f"{len(wrong)} of {len(texts)} sentences tokenized differently: {wrong[:3]}"
    assert len(texts) > 1000  # not vacuous: the whole course's text


@pytest.mark.parametrize("text", ["", "   "])
def test_an_empty_sentence_is_only_cls_and_sep(text):
    from mha.bert import load_tokenizer

    assert load_tokenizer().encode(text).tokens == ["[CLS]", "[SEP]"]  # what mha_live.js refuses as empty
