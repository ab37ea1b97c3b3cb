"""What counts as English in the Chinese edition's text: shared by the browser tests of the built pages
(``test_browser_zh.py``) and the browser-free test of the translated outputs (``test_outputs_zh.py``)."""

from __future__ import annotations

import re

from mha.chapters.checking.verdict_i18n import english_left

#: A printed source (a def, a loop, a shape comment) or an exception the page shows on purpose: code.
CODE_LISTING = re.compile(
    r"^\s*(?:def|class|import|from|return|@\w+)\b|^\s*(?:for|with|if) .*:$|# \(|^\w+(?:Error|Exception): ", re.M
)

#: Latin words the Chinese edition shows (reviewed), each with its reason. Besides these, a word is not English
#: prose when it is a name (it starts with a capital: Python, Jupyter, Adam, Vaswani, BERT, True; an English
#: sentence left untranslated still fails on its lower-case words), code (it has a digit, ``_``, ``.``, ``/``
#: or brackets: d_model, fp16, 1/√d_k), a one-letter symbol (h, T), an acronym (GPU, KV), cited (in
#: quotation marks or italics: the example sentences the model reads, a table's column), or the English of
#: a term given beside its Chinese (注意力（attention）, previous（前一词）), as d2l-zh and the glossary do.
ALLOWED_WORDS = {
    **{word: "the example sentences' nouns, named as the model reads them" for word in ("cat", "dog", "mouse")},
    **{word: "a package's name, lower case as it is imported" for word in ("mha", "torch", "numpy", "nbval")},
    **{word: "a package or library's name, lower case as it is imported" for word in ("oneDNN",)},
    **{word: "PyTorch's device name (device='cpu', 'meta')" for word in ("cpu", "meta")},
    **{word: "a PyTorch method named in a sentence (code)" for word in ("view", "transpose", "reshape", "contiguous")},
    "ms": "milliseconds",
    "macOS": "the operating system's name, written so (the run box: its default torch is CPU-only)",
    "lr": "the learning rate's argument (lr=0.003), a column label of the merging experiments' tables (学习率 is "
    "too wide)",
    **{word: "a file type" for word in ("md", "ipynb", "pdf")},
    "notebook": "the Jupyter notebook, kept in Latin letters (scripts/i18n.py RENDERINGS: 笔记本 is a laptop)",
    "softmax": "kept in Latin letters by d2l-zh (softmax 函数)",
    "logits": "the scores before softmax, kept in Latin letters (logit) as in Chinese ML writing",
    "logit": "the same, singular",
}
#: Model names whose lower-case part is a name too.
MODEL_NAMES = re.compile(
    r"GPT-2 (?:small|medium|large|XL)|[\w.]*[A-Z][\w.]*(?:-[\w.]+)+|[\w.]+(?:-[\w.]+)*-[A-Z][\w.-]*"
)
#: Code in prose: identifiers, calls, shapes, numbers with units (d_model, fp16, 1/√d_k, 8-bit).
CODE_TOKEN = re.compile(r"[\w.]*[_\d./()\[\]=@*<>+√][\w.()\[\]=@/*<>+√-]*")
CITED = re.compile(r"“[^”]*”|‘[^’]*’|'[^']*'")
BESIDE = re.compile(r"(?:(?<=[\u4e00-\u9fff])|^)（[^（）\u4e00-\u9fff]*）|[A-Za-z][\w '-]*(?=（[^）]*[\u4e00-\u9fff])")
LATIN_WORD = re.compile(r"[A-Za-z][A-Za-z'’]*")


def prose_words_in(text: str, terms: list[str] = ()) -> list[str]:
    """The English words of ``text`` that are not names, code, symbols, cited, a term beside its Chinese,
    a glossary term (``terms``) or in ``ALLOWED_WORDS``."""
    for term in terms:
        text = re.sub(rf"(?<![A-Za-z]){re.escape(term)}(?![A-Za-z])", " ", text, flags=re.I)
    for pattern in (CITED, BESIDE, MODEL_NAMES, CODE_TOKEN):
        text = pattern.sub(" ", text)
    return [w for w in LATIN_WORD.findall(text) if w not in ALLOWED_WORDS and len(w) > 1 and not w[0].isupper()]


#: Labels a printed table may show in English (reviewed): the worked example's matrices label their rows and
#: columns with the example sentence's tokens (the model reads them in English) and its one-hot features. A
#: line passes only when every Latin word of it is one of these (a table's header), never a sentence.
TABLE_LABELS = {"the", "cat", "saw", "dog", "det", "noun", "verb"}


def english_in_output(text: str, terms: list[str] = ()) -> list[str]:
    """The English words a printed output shows, by the rule for outputs: a printed source or exception is code
    whole; a line fails on a run of two or more English words outside code (``verdict_i18n.english_left``),
    and then on each of its English words outside names, code and ``ALLOWED_WORDS``."""
    if CODE_LISTING.search(text):
        return []
    lines = [
        line
        for line in text.splitlines()
        if english_left(CODE_TOKEN.sub(" ", line))
        and not set(LATIN_WORD.findall(CODE_TOKEN.sub(" ", line))) <= TABLE_LABELS
    ]
    return [w for line in lines for w in prose_words_in(line, terms)]
