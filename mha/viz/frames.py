"""An explorer's frames: a matplotlib figure as small, deterministic image bytes (Pillow)."""

from __future__ import annotations

import io

#: Colours per frame after quantisation (heatmaps and line plots look the same at 128).
FRAME_COLORS = 128
#: Image format of the frames: lossless WebP (about 25% smaller than PNG for the same
#: palette image, shown by every current browser) when Pillow can write it, else PNG.
FRAME_FORMAT = "webp"


def figure_image(fig, dpi: float | None = None):
    """The figure as an RGB Pillow image on white, cropped to its tight bounding box."""
    from PIL import Image

    buffer = io.BytesIO()
    fig.savefig(
        buffer,
        format="png",
        dpi=dpi if dpi is not None else fig.dpi,
        metadata={"Software": None},
        facecolor="white",
        bbox_inches="tight",
        pad_inches=0.05,
    )
    image = Image.open(io.BytesIO(buffer.getvalue()))
    image.load()
    if image.mode != "RGB":
        image = image.convert("RGBA")
        image = Image.alpha_composite(Image.new("RGBA", image.size, (255, 255, 255, 255)), image)
    return image.convert("RGB")


def frame_format() -> str:
    """``"webp"`` (lossless) if this Pillow can write WebP, else ``"png"``."""
    from PIL import features

    return "webp" if FRAME_FORMAT == "webp" and features.check("webp") else "png"


def encode_image(image, colors: int | None = FRAME_COLORS, fmt: str = "png") -> bytes:
    """Image bytes with no metadata (deterministic), optionally quantised to a palette."""
    from PIL import Image

    if colors:
        image = image.quantize(colors=colors, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    out = io.BytesIO()
    if fmt == "webp":
        image.save(out, format="WEBP", lossless=True, quality=100, method=4)  # method 6: 2% smaller, 50x slower
    else:
        image.save(out, format="PNG", optimize=True)
    return out.getvalue()


def figure_png(fig, *, dpi: float | None = None, colors: int | None = FRAME_COLORS) -> bytes:
    """PNG bytes of a figure: tight bounding box on white, no metadata, ``colors`` palette
    entries (``None``: full colour). The figure is left open."""
    return encode_image(figure_image(fig, dpi), colors, "png")


def render_frames(render, combos, title, dpi, fmt):
    """Render every combination at ``dpi``; returns image bytes per combination, all one size, and
    the size in points of the smallest text in any frame.

    Frames whose tight bounding box differs (e.g. wider tick labels) are padded with white to
    the largest width and height, so the page does not jump as the reader moves a control. When
    the book is executed (``MHA_FIGURE_TWINS``), each frame's Chinese twin is drawn from the same
    figure and stored (:mod:`mha.viz.figure_i18n`), padded the same way among the twins.
    """
    from .describe import smallest_text_pt
    from .figure_i18n import draw_in_chinese, twins_folder, write_twin

    twins = twins_folder() is not None

    def keep(fig):
        image, points = figure_image(fig, dpi), smallest_text_pt(fig)
        twin = draw_in_chinese(fig, lambda f: figure_image(f, dpi)) if twins else None
        return image, points, twin

    drawn = [capture(render, values, title, keep) for values in combos]
    frames = _pad_encode([image for image, _, _ in drawn], fmt)
    if twins:
        chinese = _pad_encode([twin[0] for _, _, twin in drawn], fmt)
        size = max(twin[0].width for _, _, twin in drawn), max(twin[0].height for _, _, twin in drawn)
        for english, twin, (_, _, (_, pairs)) in zip(frames, chinese, drawn):
            write_twin("frames", english, twin, fmt, pairs, size)
    width, height = max(i.width for i, _, _ in drawn), max(i.height for i, _, _ in drawn)
    return frames, (width, height), min(points for _, points, _ in drawn)


def _pad_encode(images, fmt) -> list[bytes]:
    from PIL import Image

    width = max(image.width for image in images)
    height = max(image.height for image in images)
    frames = []
    for image in images:
        if image.size != (width, height):
            canvas = Image.new("RGB", (width, height), (255, 255, 255))
            canvas.paste(image, ((width - image.width) // 2, 0))
            image = canvas
        frames.append(encode_image(image, FRAME_COLORS, fmt))
    return frames


# --------------------------------------------------------------------------------------------
# Calling a render function safely
# --------------------------------------------------------------------------------------------


def call_args(values) -> str:
    """``slope=1, style='solid'``: the values as keyword arguments, for error messages."""
    return ", ".join(f"{name}={value!r}" for name, value in values.items())


def check_figure(fig, title: str, values):
    """``fig`` if it is a matplotlib Figure, else a TypeError naming the explorer and the call."""
    from matplotlib.figure import Figure

    if not isinstance(fig, Figure):
        raise TypeError(
            f"explorer {title!r}: render({call_args(values)}) must return a matplotlib "
            f"Figure, found {type(fig).__name__}"
        )
    return fig


def capture(render, values, title: str, keep):
    """``keep(render(**values))``, then close every pyplot figure the call opened, even on error.

    ``keep`` turns the figure into what the caller needs: image bytes, or the figure itself to
    redraw later (pyplot then no longer shows it at the end of the next cell; give it an Agg
    canvas of its own, ``FigureCanvasAgg(fig)``, to draw it)."""
    import matplotlib.pyplot as plt

    before = set(plt.get_fignums())
    try:
        return keep(check_figure(render(**values), title, values))
    finally:
        for number in sorted(set(plt.get_fignums()) - before):
            plt.close(number)


def canvas_png(fig, *, draw: bool = True, compress_level: int = 1) -> bytes:
    """The figure as its Agg canvas holds it, as PNG bytes: the live explorers' fast encoding.

    ``draw=False`` encodes the canvas as it is (after a blit). No tight crop (a figure updated in
    place keeps one size, so the page does not jump) and a low PNG compression level: a 550 x 320
    canvas encodes in about 3 ms. The figure must have an opaque face (alpha is dropped)."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image

    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
        draw = True
    if draw:
        fig.canvas.draw()
    rgb = np.ascontiguousarray(np.asarray(fig.canvas.buffer_rgba())[..., :3])
    out = io.BytesIO()
    Image.fromarray(rgb).save(out, format="PNG", compress_level=compress_level)
    return out.getvalue()
