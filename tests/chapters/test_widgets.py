"""Tests of mha.viz.widgets: the grid, the static HTML component, its limits and the live widget."""

import base64
import io
import json
import math
import re
import subprocess
import sys
from html.parser import HTMLParser

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402

from mha.viz import frames, widgets  # noqa: E402
from mha.viz.widgets import explorer  # noqa: E402

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def render_line(slope, style="solid"):
    """A tiny figure that differs for every (slope, style)."""
    fig, ax = plt.subplots(figsize=(2.0, 1.5))
    ax.plot([0, 1], [0, slope], linestyle=style, color="#0072B2")
    ax.set_ylim(-3, 3)
    ax.set_title(f"slope {slope}")
    return fig


def alt_line(slope, style="solid"):
    return f"A {style} line of slope {slope}"


@pytest.fixture(autouse=True)
def fresh_ids(monkeypatch):
    monkeypatch.setattr(widgets, "_id_counts", {})
    # static mode, as where the book's outputs are stored (a Jupyter server's kernel would be live)
    monkeypatch.delenv("MHA_EXPLORERS", raising=False)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    yield
    assert plt.get_fignums() == [], "every figure must be closed after capture"


class Structure(HTMLParser):
    """Collects the tags, ids and the JSON frame data of one explorer's HTML."""

    def __init__(self):
        super().__init__()
        self.tags, self.ids, self.scripts, self._in_script = [], [], [], None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        if "id" in attrs:
            self.ids.append(attrs["id"])
        if tag == "script":
            self._in_script = attrs.get("type", "text/javascript")

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = None

    def handle_data(self, data):
        if self._in_script is not None:
            self.scripts.append((self._in_script, data))

    def find(self, tag, **wanted):
        return [a for t, a in self.tags if t == tag and all(a.get(k) == v for k, v in wanted.items())]


def parse(html):
    parser = Structure()
    parser.feed(html)
    return parser


def frame_data(html):
    (data,) = [json.loads(text) for kind, text in parse(html).scripts if kind == "application/json"]
    return data


def decode(data_uri):
    match = re.fullmatch(r"data:image/(png|webp);base64,([A-Za-z0-9+/=]+)", data_uri)
    assert match, data_uri[:40]
    image = Image.open(io.BytesIO(base64.b64decode(match.group(2))))
    assert image.format == match.group(1).upper()
    return image


def png_size(data_uri):
    return decode(data_uri).size


# ---- grid ------------------------------------------------------------------------------------


def test_grid_enumerates_every_combination_last_control_fastest():
    controls = {"a": [1, 2, 3], "b": ["x", "y"]}
    combos = widgets.grid(controls)
    assert widgets.frame_count(controls) == 6 == len(combos)
    expected = [{"a": a, "b": b} for a in [1, 2, 3] for b in ["x", "y"]]  # independent loop
    assert combos == expected


def test_grid_description_states_the_count_and_values():
    assert widgets.grid_description({"h": [1, 2, 4, 8]}) == "Precomputed for 4 values: h ∈ {1, 2, 4, 8}."
    two = widgets.grid_description({"h": [1, 2, 4], "mask": ["none", "causal"]})
    assert two.startswith("Precomputed for 6 combinations of values (3 × 2)")
    assert "mask ∈ {none, causal}" in two


def test_format_value():
    assert [widgets.format_value(v) for v in [4, 0.5, 1e-5, 2.0, "causal"]] == ["4", "0.5", "1e-05", "2", "causal"]


# ---- static HTML -----------------------------------------------------------------------------


def test_html_has_one_frame_per_combination_controls_outputs_and_alt_text():
    ex = explorer(
        render_line,
        {"slope": [-2, -1, 0, 1, 2], "style": ["solid", "dashed"]},
        title="Lines",
        caption="Move the slope.",
        alt=alt_line,
    )
    doc = parse(ex.html)
    data = frame_data(ex.html)
    assert list(data) == ["labels", "index", "alts", "frames"]  # as ever: the book's HTML does not churn
    assert ex.frame_count == 10 == len(data["index"]) == len(data["alts"])
    # every combination has its own, distinct frame here, in grid order
    assert len(data["frames"]) == 10 and sorted(data["index"]) == list(range(10))
    assert data["alts"] == [alt_line(**values) for values in widgets.grid(ex.controls)]
    assert data["labels"] == [["-2", "-1", "0", "1", "2"], ["solid", "dashed"]]
    for i in range(10):
        assert ex.frame_data_uri(i) == data["frames"][data["index"][i]]
    # controls: a native range input for numbers, with an <output> echoing its value; a select for
    # strings, which shows its value itself (no echo repeating it beside it)
    (slider,) = doc.find("input", type="range")
    assert (slider["min"], slider["max"], slider["step"], slider["value"]) == ("0", "4", "1", "0")
    assert slider["aria-valuetext"] == "-2"
    (select,) = doc.find("select")
    assert [a["value"] for a in doc.find("option")] == ["0", "1"]
    for control in (slider, select):
        assert doc.find("label", **{"for": control["id"]}), "every control has a label"
    (echo,) = doc.find("output")
    assert echo["id"] == slider["id"] + "-value" and echo["for"] == slider["id"]
    assert not doc.find("output", id=select["id"] + "-value")
    # one image showing frame 0 with its alt text
    (img,) = doc.find("img")
    assert img["src"] == ex.frame_data_uri(0) and img["alt"] == alt_line(-2, "solid")
    # ids are unique and no third-party script is loaded
    assert len(doc.ids) == len(set(doc.ids))
    assert not [a for t, a in doc.tags if t == "script" and "src" in a]
    assert "Move the slope. Precomputed for 10 combinations of values (5 × 2)" in ex.html
    assert ex.html_bytes <= widgets.MAX_BYTES


def test_frames_are_compact_pngs_at_the_stated_dpi():
    ex = explorer(render_line, {"slope": [0, 1]}, title="Sizes")
    assert ex.dpi == widgets.FRAME_DPI
    width, height = png_size(ex.frame_data_uri(0))
    # a 2 x 1.5 inch figure at 80 dpi, cropped to its tight bounding box
    assert 0.7 * 2.0 * ex.dpi < width < 1.3 * 2.0 * ex.dpi
    assert 0.7 * 1.5 * ex.dpi < height < 1.3 * 1.5 * ex.dpi
    assert ex.frame_format == widgets.frame_format() == "webp"  # Pillow's wheels write WebP
    image = decode(ex.frame_data_uri(0)).convert("RGB")
    assert len(image.getcolors(maxcolors=1 << 16)) <= widgets.FRAME_COLORS, "frames are palette images"


def test_png_frames_when_webp_is_not_available(monkeypatch):
    monkeypatch.setattr(frames, "FRAME_FORMAT", "png")
    ex = explorer(render_line, {"slope": [0, 1]}, title="Png")
    assert ex.frame_format == "png" and ex.frame_data_uri(1).startswith("data:image/png;base64,")
    assert decode(ex.frame_data_uri(1)).mode == "P"


def test_frames_share_one_size_even_when_the_tight_box_changes():
    def render(width):
        fig = render_line(1)
        fig.axes[0].set_title("x" * width)  # a long title widens the tight bounding box
        return fig

    ex = explorer(render, {"width": [1, 60]}, title="Sizes")
    sizes = {png_size(ex.frame_data_uri(i)) for i in range(2)}
    assert len(sizes) == 1
    (img,) = parse(ex.html).find("img")
    assert (int(img["width"]), int(img["height"])) == sizes.pop() == ex.frame_size


def test_every_figure_render_opens_is_closed():
    def render(slope):
        plt.figure()  # a stray figure that is not returned
        return render_line(slope)

    explorer(render, {"slope": [0, 1]}, title="Stray")  # the autouse fixture checks get_fignums()


def test_identical_frames_are_stored_once():
    ex = explorer(lambda slope: render_line(abs(slope)), {"slope": [-1, 0, 1]}, title="Same")
    assert ex.index == [0, 1, 0] and len(ex.frames) == 2
    assert frame_data(ex.html)["index"] == [0, 1, 0]


def test_html_is_deterministic(monkeypatch):
    first = explorer(render_line, {"slope": [0, 1, 2]}, title="Again", alt=alt_line).html
    monkeypatch.setattr(widgets, "_id_counts", {})  # as in a fresh kernel
    second = explorer(render_line, {"slope": [0, 1, 2]}, title="Again", alt=alt_line).html
    assert first == second


def test_ids_are_unique_per_explorer_and_derived_from_the_title():
    a = explorer(render_line, {"slope": [0, 1]}, title="Same title")
    b = explorer(render_line, {"slope": [0, 1]}, title="Same title")
    assert a.element_id == "mha-explorer-same-title-1" and b.element_id == "mha-explorer-same-title-2"
    assert not set(parse(a.html).ids) & set(parse(b.html).ids)


@pytest.mark.parametrize(
    "title, slug",
    [
        ("Parameters and FLOPs of one attention layer", "parameters-and-flops-of-one-attention"),
        ("KV cache: g = 1", "kv-cache-g-1"),
        ("***", "explorer"),
        ("x" * 50, "x" * 40),
    ],
)
def test_slug_of_the_title(title, slug):
    assert widgets._slug(title) == slug


def test_default_alt_text_is_title_and_values():
    ex = explorer(render_line, {"slope": [0, 1], "style": ["solid"]}, title="Lines")
    assert ex.alts == ["Lines (slope = 0, style = solid)", "Lines (slope = 1, style = solid)"]


def test_text_is_escaped_and_json_cannot_close_the_script():
    ex = explorer(
        render_line,
        {"slope": [0]},
        title="<b>&",
        caption="a < b",
        alt=lambda slope: "</script><script>alert(1)</script>",
    )
    assert "<b>&" not in ex.html and "&lt;b&gt;&amp;" in ex.html and "a &lt; b" in ex.html
    assert ex.html.count("</script>") == 2  # the JSON block and the code block, nothing injected
    assert frame_data(ex.html)["alts"] == ["</script><script>alert(1)</script>"]


def test_resolution_drops_automatically_to_fit_the_size_limit():
    def render_big(slope):
        fig = render_line(slope)
        fig.set_size_inches(6.0, 4.0)
        return fig

    big = widgets.Explorer(render_big, {"slope": [0, 1]}, title="Fits")
    limit = big.html_bytes * 4 // 5
    small = widgets.Explorer(render_big, {"slope": [0, 1]}, title="Fits", max_bytes=limit)
    assert small.dpi < big.dpi and small.html_bytes <= limit
    assert png_size(small.frame_data_uri(0))[0] < png_size(big.frame_data_uri(0))[0]


# ---- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "controls, error, match",
    [
        ({}, ValueError, "controls is empty"),
        ([1, 2], TypeError, "controls must be a dict"),
        ({"slope": []}, ValueError, "control 'slope' has no values"),
        ({"slope": 3}, TypeError, "control 'slope' must be a list of values, found int"),
        ({"slope": "abc"}, TypeError, "control 'slope' must be a list of values, found str"),
        ({"slope": [1, "a"]}, TypeError, "only numbers .* or only strings .* found int, str"),
        ({"slope": [True, False]}, TypeError, "found bool"),
        ({"slope": [1, 1.0]}, ValueError, r"control 'slope' repeats the value\(s\) \['1'\]"),
        ({"slope": [1, math.nan]}, ValueError, "non-finite values"),
        ({"not a name": [1]}, ValueError, "must be a Python identifier"),
    ],
)
def test_bad_controls_are_rejected_with_a_clear_message(controls, error, match):
    with pytest.raises(error, match=match):
        explorer(render_line, controls, title="Bad")


def test_too_many_frames():
    with pytest.raises(ValueError, match=r"'Huge': 9 \(slope\) x 8 \(style\) = 72 frames, more than the limit of 64"):
        explorer(render_line, {"slope": list(range(9)), "style": [f"s{i}" for i in range(8)]}, title="Huge")


def test_render_must_return_a_figure():
    with pytest.raises(TypeError, match=r"'Nope': render\(slope=1\) must return a matplotlib Figure, found Axes"):
        explorer(lambda slope: plt.subplots()[1], {"slope": [1]}, title="Nope")
    # (the autouse fixture checks that the figure behind the Axes was closed)
    with pytest.raises(TypeError, match="found NoneType"):
        explorer(lambda slope: None, {"slope": [1]}, title="Nope")


def test_size_limit_is_enforced_with_the_explorer_name_and_size():
    with pytest.raises(
        ValueError, match=r"explorer 'Heavy': \d+ bytes of HTML even at 40 dpi, more than the limit of 1000"
    ):
        widgets.Explorer(render_line, {"slope": [0, 1]}, title="Heavy", max_bytes=1000)


def test_bad_title_render_alt_caption():
    with pytest.raises(ValueError, match="title must be a non-empty string"):
        explorer(render_line, {"slope": [1]}, title=" ")
    with pytest.raises(TypeError, match="render must be callable"):
        explorer("render", {"slope": [1]}, title="T")
    with pytest.raises(TypeError, match="alt must be callable"):
        explorer(render_line, {"slope": [1]}, title="T", alt="text")
    with pytest.raises(TypeError, match=r"alt\(slope=1\) must return a non-empty string, found ''"):
        explorer(render_line, {"slope": [1]}, title="T", alt=lambda slope: "")
    with pytest.raises(TypeError, match="caption must be a string"):
        explorer(render_line, {"slope": [1]}, title="T", caption=3)


# ---- live widget and the MIME bundle ---------------------------------------------------------


def test_bundle_has_widget_view_html_and_plain_text():
    ex = explorer(render_line, {"slope": [0, 1]}, title="Bundle")
    bundle = ex._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html", WIDGET_VIEW}
    assert bundle["text/html"] == ex.html
    assert bundle[WIDGET_VIEW]["model_id"] == ex.widget.model_id
    assert bundle[WIDGET_VIEW]["version_major"] == 2
    assert bundle["text/plain"] == "Explorer: Bundle (Precomputed for 2 values: slope ∈ {0, 1}.)"
    assert "Figure" not in bundle["text/plain"]


def test_live_widget_recomputes_the_figure_when_a_control_changes():
    import ipywidgets

    calls = []

    def render(slope, style):
        calls.append((slope, style))
        return render_line(slope, style)

    ex = explorer(render, {"slope": [0, 1, 2], "style": ["solid", "dotted"]}, title="Live", alt=alt_line, live="render")
    calls.clear()
    ui = ex.widget
    assert isinstance(ui, ipywidgets.VBox)
    assert isinstance(ex.inputs["slope"], ipywidgets.SelectionSlider)  # static mode: the book's grid
    assert isinstance(ex.inputs["style"], ipywidgets.Dropdown)
    assert ex.inputs["slope"].options == (("0", 0), ("1", 1), ("2", 2))
    assert calls == [(0, "solid")]
    first = ex.view.data
    assert ex.view.alt_text == "A solid line of slope 0"
    ex.inputs["slope"].value = 2
    ex.inputs["style"].value = "dotted"
    assert calls == [(0, "solid"), (2, "solid"), (2, "dotted")]
    assert ex.live_values() == {"slope": 2, "style": "dotted"}
    assert ex.view.alt_text == "A dotted line of slope 2" and ex.view.data != first
    ex.inputs["style"].value = "solid"  # values seen before come from the cache, not from render
    ex.inputs["style"].value = "dotted"
    assert calls == [(0, "solid"), (2, "solid"), (2, "dotted")] and len(ex.painter.cache) == 3
    fig = render_line(2, "dotted")
    # exactly render(**values), no stored frame; tightly cropped, as this figure's tick labels lie
    # outside its canvas (no tight_layout)
    assert ex.painter.fits_canvas is False
    assert ex.view.data == widgets.figure_png(fig, colors=None) and ex.view.format == "png"
    plt.close(fig)
    # the widget shows it as an <img> with its alt text
    uri = "data:image/png;base64," + base64.b64encode(ex.view.data).decode("ascii")
    (img,) = parse(ex.view.image.value).find("img")
    assert img["src"] == uri and img["alt"] == "A dotted line of slope 2"
    assert len(ex.view.timings) == 5 and all(t > 0 for t in ex.view.timings)


def test_live_widget_shows_precomputed_frames_by_default():
    calls = []

    def render(slope, style):
        calls.append((slope, style))
        return render_line(slope, style)

    ex = explorer(render, {"slope": [0, 1, 2], "style": ["solid", "dotted"]}, title="Frames", alt=alt_line)
    assert ex.mode == "static" and ex.live == "frames"
    assert len(calls) == 6  # every combination rendered once, up front
    ex.widget  # noqa: B018 (the property builds the widget)
    ex.inputs["slope"].value = 2
    ex.inputs["style"].value = "dotted"
    assert len(calls) == 6  # a slider move renders nothing: it looks the frame up
    i = ex.combos.index({"slope": 2, "style": "dotted"})
    assert ex.view.data == ex.frames[ex.index[i]] and ex.view.format == ex.frame_format
    assert ex.view.alt_text == "A dotted line of slope 2"
    # the widget states the grid, as the book's caption does
    assert ex.grid_description() in ex.widget.children[-1].value
    with pytest.raises(ValueError, match="live must be 'frames' or 'render' .*, found 'fast'"):
        explorer(render, {"slope": [0]}, title="Bad", live="fast")


def test_live_widget_shows_a_render_error_in_its_status_line():
    def render(slope):
        if slope == 2 and not precomputing:
            raise RuntimeError("slope 2 is broken")
        if slope == 3 and not precomputing:
            raise ValueError("slope 3 is not allowed")
        return render_line(slope)

    precomputing = True
    ex = explorer(render, {"slope": [1, 2, 3]}, title="Broken", live="render")
    precomputing = False
    ex.widget  # noqa: B018 (the property builds the widget)
    good = ex.view.data
    ex.inputs["slope"].value = 2
    assert "RuntimeError: slope 2 is broken" in ex.view.status.value and "Traceback" in ex.view.status.value
    assert ex.view.data == good  # the last good figure stays
    ex.inputs["slope"].value = 3  # an input error is one line, no traceback
    assert "ValueError: slope 3 is not allowed" in ex.view.status.value and "Traceback" not in ex.view.status.value
    ex.inputs["slope"].value = 1
    assert ex.view.status.value == "" and ex.view.data == good


def test_importing_widgets_pulls_in_neither_ipywidgets_nor_matplotlib():
    code = (
        "import sys, mha, mha.viz.widgets; print(sorted(m for m in ('ipywidgets', 'matplotlib') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_docstring_example_of_grid():
    assert re.search(r"grid\(\{\"h\": \[1, 2\]", widgets.grid.__doc__)
    assert widgets.grid({"h": [1, 2], "mask": ["none", "causal"]})[1] == {"h": 1, "mask": "causal"}
