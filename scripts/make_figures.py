"""Write the book's figures that are drawn by code but shown as files: the whole-layer diagram.

The multi-head-math chapter shows it.

Usage: python scripts/make_figures.py [--check]

Writes ``book/images/mha_layer.svg`` (English) and ``book/images/mha_layer.zh_CN.svg`` (Chinese labels)
from :func:`mha.chapters.multi_head_math.layer_diagram.layer_svg`. The Chinese edition shows the second file in
place of the
first (Sphinx's ``figure_language_filename``, ``{root}.{language}{ext}``). ``--check`` writes nothing
and exits 1 when a committed file differs from what the code draws now (``tests/book/test_layer_diagram.py``
checks the same).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mha.chapters.multi_head_math import layer_diagram  # noqa: E402


def figure_files() -> dict[Path, str]:
    """Path -> the SVG text it must hold, for every language."""
    return {
        ROOT / "book" / "images" / f"mha_layer{suffix}.svg": layer_diagram.layer_svg(lang)
        for lang, suffix in layer_diagram.LANGUAGES.items()
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file is out of date")
    args = parser.parse_args(argv)
    stale = []
    for path, svg in figure_files().items():
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == svg:
            continue
        stale.append(path)
        if not args.check:
            path.write_text(svg, encoding="utf-8")
            print("wrote", path.relative_to(ROOT))
    if args.check and stale:
        print("out of date (run python scripts/make_figures.py):", *(str(p.relative_to(ROOT)) for p in stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
