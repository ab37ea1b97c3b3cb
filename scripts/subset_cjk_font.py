"""Make the CJK font the Chinese figures are drawn in: a subset of Noto Sans CJK SC (SIL OFL 1.1).

Usage:
    python scripts/subset_cjk_font.py [--source NotoSansCJK-Regular.ttc]

The subset holds the characters of every translation the figures draw (``locales/zh_CN/figure_words.json``
and the explorers' labels ``locales/zh_CN/explorers.json``, the phrasebooks of ``mha.viz.figure_i18n``),
printable ASCII and common CJK punctuation, so the repository ships a few hundred kB instead of 16 MB.
Its family is renamed (``mha.viz.figure_i18n.FONT_FAMILY``): a modified version of the font does not
carry its name. Run it after adding translations with new characters; ``tests/zh_CN/test_figure_i18n.py``
fails while a translation has a character the subset lacks. The source is Debian's ``fonts-noto-cjk``
(``apt-get install fonts-noto-cjk``): the SC face of ``NotoSansCJK-Regular.ttc``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from mha.viz.figure_i18n import FONT_FAMILY, FONT_FILE, PHRASEBOOKS  # noqa: E402

SOURCE = Path("/usr/share/fonts/opentype/noto/NotoSansCJK-{weight}.ttc")
WEIGHTS = ("Regular", "Bold")  # bold for the figures' bold titles
SC_INDEX = 2  # JP, KR, SC, TC, HK: the order of the faces in the collection
EXTRA = "，。、；：？！（）“”‘’《》「」【】·…—～％×−→←↑↓≤≥±√√∞°"
LICENCE = FONT_FILE.parent / "OFL.txt"
COPYRIGHT = "Copyright 2014-2021 Adobe (http://www.adobe.com/), with Reserved Font Name 'Source'."


def characters() -> str:
    """Every character the figures' translations use, with ASCII and CJK punctuation."""
    chars = {chr(c) for c in range(0x20, 0x7F)} | set(EXTRA)
    for path in PHRASEBOOKS:
        for chinese in json.loads(path.read_text(encoding="utf-8")).values():
            chars |= set(chinese)
    return "".join(sorted(c for c in chars if c.isprintable()))


def subset(source: Path, target: Path, text: str, weight: str = "Regular") -> None:
    from fontTools import subset as ft_subset
    from fontTools.ttLib import TTCollection

    font = TTCollection(str(source)).fonts[SC_INDEX]
    options = ft_subset.Options()
    options.name_IDs = ["*"]
    options.hinting = False
    options.layout_features = ["kern", "palt", "vert", "locl"]
    subsetter = ft_subset.Subsetter(options)
    subsetter.populate(text=text)
    subsetter.subset(font)
    names = font["name"]
    for record in list(names.names):
        if record.nameID in (1, 4, 16):
            names.setName(
                FONT_FAMILY if record.nameID != 4 else FONT_FAMILY + " Regular",
                record.nameID,
                record.platformID,
                record.platEncID,
                record.langID,
            )
        elif record.nameID in (3, 6, 17, 18, 20):
            names.setName(
                FONT_FAMILY.replace(" ", "") + "-Regular" if record.nameID != 17 else "Regular",
                record.nameID,
                record.platformID,
                record.platEncID,
                record.langID,
            )
    if "CFF " in font:
        font["CFF "].cff.fontNames = [FONT_FAMILY.replace(" ", "") + "-Regular"]
    target.parent.mkdir(parents=True, exist_ok=True)
    font.save(str(target))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default=str(SOURCE), help="the .ttc, {weight} for Regular or Bold")
    args = parser.parse_args(argv)
    text = characters()
    for weight in WEIGHTS:
        source = Path(args.source.format(weight=weight))
        if not source.exists():
            print(f"{source} not found: apt-get install fonts-noto-cjk, or give --source", file=sys.stderr)
            return 1
        target = FONT_FILE.with_name(FONT_FILE.name.replace("Regular", weight))
        subset(source, target, text, weight)
        print(f"{target.relative_to(ROOT)}: {len(text)} characters, {target.stat().st_size / 1024:.0f} kB")
    if not LICENCE.exists():
        print(f"write the SIL OFL 1.1 text with {COPYRIGHT!r} to {LICENCE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
