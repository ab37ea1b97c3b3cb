"""Inline code names break only at their seams on a phone: the build marks the seams.

``_ext/mha_book.add_code_seams`` writes them into every page body; a script did it once, after the
page's first layout, and the lines it re-wrapped moved (the browser tests check the result on every
page: ``test_browser_phone.test_code_names_wrap_only_at_their_seams``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "_ext"))
from mha_book import SEAM, add_code_seams  # noqa: E402

CODE = '<code class="docutils literal notranslate">{}</code>'


@pytest.mark.parametrize(
    ("text", "pieces"),
    [
        ("batch_size", ["batch_", "size"]),
        ("torch.nn.functional", ["torch.", "nn.", "functional"]),
        ("nn.MultiheadAttention", ["nn.", "Multihead", "Attention"]),
        ("f(x,need_weights=False)", ["f(", "x,", "need_", "weights=", "False)"]),
        ("mha/modules.py", ["mha/", "modules.", "py"]),
        ("0.5", ["0.5"]),  # a number is not a seam
        ("__init__", ["__", "init__"]),  # never between the underscores, nor after the last
        ("x.view(1, T, H)", ["x.", "view(", "1, T, H)"]),  # no break before a space
    ],
)
def test_a_name_breaks_only_at_its_seams(text, pieces):
    seamed = add_code_seams(CODE.format(f'<span class="pre">{text}</span>'))
    assert seamed == CODE.format('<span class="pre">' + SEAM.join(pieces) + "</span>")


def test_markup_and_escapes_are_kept():
    body = (
        '<p>a_b <code class="docutils literal notranslate"><span class="pre">mask&lt;q_len</span> '
        '<span class="pre">&quot;x_y&quot;</span></code> c_d</p>'
    )
    assert add_code_seams(body) == (
        f'<p>a_b <code class="docutils literal notranslate"><span class="pre">mask&lt;q_{SEAM}len</span> '
        f'<span class="pre">"x_{SEAM}y"</span></code> c_d</p>'
    )
    assert add_code_seams(add_code_seams(body)) == add_code_seams(body)  # a second pass adds nothing
