"""A matplotlib canvas that renders each glyph once: the live explorers' text cache.

matplotlib 3.11 lays out every line of text (HarfBuzz shaping, ``FT2Font._layout``) and renders
it glyph by glyph through FreeType at sub-pixel positions, each time it is drawn: about 0.3-0.45
ms per label on the 2-core CPU. A live explorer redraws the same kind of labels at every move (a
heatmap's 50 cell numbers, a panel of rows of numbers), and that was most of an update (chapter
3: 40 of 60 ms).

:class:`GlyphCanvas` is an Agg canvas whose renderer keeps what it computed:

* each line's layout (which glyph of which font goes where), keyed by the string, the font, its
  size, the dpi and the shaping options;
* each glyph's bitmap, keyed by the font, size, dpi, glyph, rotation and the glyph's position
  within a pixel, in FreeType's 1/64 steps (the integer part of a position only moves the bitmap).

A digit at a given sub-pixel offset is rendered once, then copied: the calls, arguments and
bitmaps are matplotlib's own, so the canvas holds exactly the pixels a plain Agg canvas draws
(``tests/chapters/test_glyphs.py`` compares them bit for bit). It relies on private parts of the pinned
matplotlib (``FT2Font._layout``, ``_render_glyph``, ``_set_transform``); where they are missing
it draws as a plain canvas does.

The static book does not use it: its frames are drawn by matplotlib's plain canvas.
"""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg, get_hinting_flag
from matplotlib.font_manager import fontManager, get_font
from matplotlib.ft2font import FT2Font, RenderMode

#: Whether this matplotlib has the private parts the cache reuses (3.11 has).
SUPPORTED = all(hasattr(FT2Font, name) for name in ("_layout", "_render_glyph", "_set_transform"))
#: Entries kept in each cache (least recently used dropped first): some MB at most.
MAX_LAYOUTS = 4096
MAX_GLYPHS = 16384

_layouts: OrderedDict = OrderedDict()
_glyphs: OrderedDict = OrderedDict()
_matrices: dict = {}
stats = {"layout_hits": 0, "layout_misses": 0, "glyph_hits": 0, "glyph_misses": 0}


def clear() -> None:
    """Forget every cached layout and glyph (and reset the counts)."""
    _layouts.clear()
    _glyphs.clear()
    stats.update(dict.fromkeys(stats, 0))


def _remember(cache: OrderedDict, key, value, limit: int):
    cache[key] = value
    if len(cache) > limit:
        cache.popitem(last=False)
    return value


def _matrix(angle: float, slant: float, extend: float) -> tuple:
    """FreeType's 16.16 transform for a rotation by ``angle`` degrees (and a slant, a stretch)."""
    key = (angle, slant, extend)
    matrix = _matrices.get(key)
    if matrix is None:
        cos, sin = math.cos(math.radians(angle)), math.sin(math.radians(angle))
        array = (0x10000 * np.array([[cos, -sin], [sin, cos]]) @ [[extend, extend * slant], [0, 1]]).round().astype(int)
        matrix = _matrices[key] = (array, tuple(array.flat))
    return matrix


class GlyphRenderer(RendererAgg):
    """RendererAgg that caches text layouts and glyph bitmaps (see the module's documentation)."""

    def draw_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
        if ismath or not SUPPORTED:  # mathtext still reaches the glyph cache below
            return super().draw_text(gc, x, y, s, prop, angle, ismath=ismath, mtext=mtext)
        font = get_font(fontManager._find_fonts_by_props(prop))
        size = prop.get_size_in_points()
        flags = get_hinting_flag()
        features = mtext.get_fontfeatures() if mtext is not None else None
        language = mtext.get_language() if mtext is not None else None
        key = (font, size, self.dpi, s, flags, tuple(features or ()), language)
        items = _layouts.get(key)
        if items is None:
            stats["layout_misses"] += 1
            font.clear()
            font.set_size(size, self.dpi)
            laid = font._layout(s, flags=flags, features=features, language=language)
            items = _remember(_layouts, key, tuple((i.ft_object, i.glyph_index, i.x, i.y) for i in laid), MAX_LAYOUTS)
        else:
            stats["layout_hits"] += 1
            _layouts.move_to_end(key)
        self._draw_text_glyphs_and_boxes(
            gc, x, y, angle, ((ft, size, index, 0, 1, dx, dy) for ft, index, dx, dy in items), []
        )

    def _draw_text_glyphs_and_boxes(self, gc, x, y, angle, glyphs, boxes):
        if not SUPPORTED:
            return super()._draw_text_glyphs_and_boxes(gc, x, y, angle, glyphs, boxes)
        # As RendererAgg's: y is downwards, each glyph's dy upwards, FreeType's y upwards.
        cos, sin = math.cos(math.radians(angle)), math.sin(math.radians(angle))
        flags = get_hinting_flag()
        antialiased = gc.get_antialiased()
        height = self.height
        for font, size, index, slant, extend, dx, dy in glyphs:
            matrix, matrix_key = _matrix(angle, slant, extend)
            ox = round(0x40 * (x + dx * cos - dy * sin))
            oy = round(0x40 * (height - y + dx * sin + dy * cos))
            key = (font, size, self.dpi, index, matrix_key, ox & 63, oy & 63, flags, antialiased)
            glyph = _glyphs.get(key)
            if glyph is None:
                stats["glyph_misses"] += 1
                font.set_size(size, self.dpi)
                font._set_transform(matrix, [ox, oy])
                bitmap = font._render_glyph(index, flags, RenderMode.NORMAL if antialiased else RenderMode.MONO)
                buffer = np.array(bitmap.buffer)
                if not antialiased:
                    buffer *= 0xFF
                # The bitmap's corner, less the whole pixels of the offset (which only move it).
                glyph = _remember(_glyphs, key, (buffer, bitmap.left - (ox >> 6), bitmap.top - (oy >> 6)), MAX_GLYPHS)
            else:
                stats["glyph_hits"] += 1
            buffer, left, top = glyph
            top += oy >> 6
            self._renderer.draw_text_image(buffer, left + (ox >> 6), int(height) - top + buffer.shape[0], 0, gc)
        if boxes:
            super()._draw_text_glyphs_and_boxes(gc, x, y, angle, (), boxes)


class GlyphCanvas(FigureCanvasAgg):
    """FigureCanvasAgg drawing with a :class:`GlyphRenderer` (``GlyphCanvas(fig)`` adopts ``fig``)."""

    def get_renderer(self):
        w, h = self.get_width_height(physical=True)
        key = w, h, self.figure.dpi
        if self._lastKey != key or not isinstance(getattr(self, "renderer", None), GlyphRenderer):
            self.renderer = GlyphRenderer(w, h, self.figure.dpi)
            self._lastKey = key
        return self.renderer


__all__ = ["GlyphCanvas", "GlyphRenderer", "MAX_GLYPHS", "MAX_LAYOUTS", "SUPPORTED", "clear", "stats"]
