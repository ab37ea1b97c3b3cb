"""Explorers in a live kernel: the controls' live forms and grids, the mode, the opening
values, the note of the stored HTML, and the fast path that updates one figure in place.

The browser test of the live notebooks in JupyterLab is ``tests/lab/test_lab_browser.py`` (``make test-lab``).
"""

import io
import json
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402

from mha.chapters.heads import softmax_demo  # noqa: E402
from mha.viz import drawlock, live, widgets  # noqa: E402
from mha.viz.controls import Choice, FloatRange, IntRange, Text, check_specs, live_description  # noqa: E402
from mha.viz.frames import canvas_png  # noqa: E402
from mha.chapters.heads.figures import TemperaturePlot, plot_temperature  # noqa: E402
from mha.viz.widgets import explorer  # noqa: E402


@pytest.fixture(autouse=True)
def static_by_default(monkeypatch):
    monkeypatch.setattr(widgets, "_id_counts", {})
    monkeypatch.delenv("MHA_EXPLORERS", raising=False)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    yield
    assert plt.get_fignums() == [], "no figure may stay in pyplot (it would show under the next cell)"


def render_line(slope=1.0, style="solid", words="a"):
    fig, ax = plt.subplots(figsize=(2.0, 1.5))
    ax.plot([0, 1], [0, slope], linestyle=style)
    ax.set_ylim(-3, 3)
    ax.set_title(f"{words} {slope}")
    return fig


def pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


def fresh_canvas(render, **values) -> np.ndarray:
    """What a new figure for ``values`` looks like on its canvas (no crop), for comparison."""
    fig = render.draw(**values)
    plt.close(fig)
    return pixels(canvas_png(fig))


# ---- the mode --------------------------------------------------------------------------------


def test_mode_is_live_only_in_a_kernel_a_jupyter_server_started(monkeypatch):
    assert live.explorer_mode() == "static"  # pytest, nbval, nbclient: no server
    monkeypatch.setenv("JPY_SESSION_NAME", "/lab/01_single_head_limits.ipynb")  # jupyter_server sets it per kernel
    assert live.explorer_mode() == "live"
    monkeypatch.setenv("MHA_EXPLORERS", "static")  # the variable wins
    assert live.explorer_mode() == "static"
    monkeypatch.delenv("JPY_SESSION_NAME")
    monkeypatch.setenv("MHA_EXPLORERS", "LIVE ")
    assert live.explorer_mode() == "live"
    monkeypatch.setenv("MHA_EXPLORERS", "fast")
    with pytest.raises(ValueError, match="MHA_EXPLORERS must be 'live' or 'static', found 'fast'"):
        live.explorer_mode()


# ---- control specs ---------------------------------------------------------------------------


def test_specs_give_a_live_form_and_the_books_grid():
    specs, starts = check_specs(
        {
            "h": [1, 2, 4],
            "mask": Choice(["none", "causal"], value="causal"),
            "tau": FloatRange(0.25, 8, grid=[0.5, 1, 2], log=True),
            "n": IntRange(8, 512, 8, grid=[16, 64]),
            "sentence": Text("the cat sat", grid=["the cat sat", "a dog ran"]),
        }
    )
    assert {name: spec.grid for name, spec in specs.items()} == {
        "h": [1, 2, 4],
        "mask": ["none", "causal"],
        "tau": [0.5, 1, 2],
        "n": [16, 64],
        "sentence": ["the cat sat", "a dog ran"],
    }
    assert starts == {"h": 1, "mask": "causal", "tau": 0.5, "n": 16, "sentence": "the cat sat"}
    assert widgets.grid_description({"tau": FloatRange(0, 1, grid=[0.5, 1])}) == widgets.grid_description(
        {"tau": [0.5, 1]}
    )
    words = live_description({"h": [1, 2], "tau": FloatRange(0.25, 8, grid=[1, 2]), "s": Text("hi")})
    assert words.startswith("Computed live in this kernel at every change (tau: any value from 0.25 to 8; s: type")
    assert "the static book precomputes 4 combinations of values (2 × 2 × 1)" in words


def test_live_values_are_rounded_to_the_step_and_kept_in_range():
    linear = FloatRange(0.0, 1.0, 0.05, grid=[0.5])
    assert linear.clean(0.3000000004) == 0.3 and linear.clean(0.97) == 0.95 and linear.clean(1.2) == 1.0
    assert FloatRange(0.25, 8, grid=[1], log=True).clean(1.0115794543) == 1.01
    ints = IntRange(128, 131072, 128, grid=[1024], log=True)
    assert ints.clean(16400.3) == 16384 and isinstance(ints.clean(300.0), int)


@pytest.mark.parametrize(
    "make, error, match",
    [
        (lambda: FloatRange(1, 1, grid=[1]), ValueError, r"lo \(1\) must be less than hi \(1\)"),
        (lambda: FloatRange(0, 1, grid=[2]), ValueError, r"grid value 2 is outside \[0, 1\]"),
        (lambda: FloatRange(0, 1, grid=["a"]), TypeError, "grid value must be a number, found str"),
        (lambda: FloatRange(0, 8, grid=[1], log=True), ValueError, "a log range needs lo > 0"),
        (lambda: FloatRange(0, 1, -0.1, grid=[1]), ValueError, "step must be a positive number"),
        (lambda: FloatRange(0, 1, grid=[]), ValueError, "the grid has no values"),
        (lambda: FloatRange(0, 1, grid=[0.5], value=3), ValueError, r"value 3 is outside \[0, 1\]"),
        (lambda: IntRange(0, 10, grid=[2.5]), TypeError, "grid value 2.5 must be an integer"),
        (lambda: IntRange(0, 10.0, grid=[2]), TypeError, "hi must be an integer"),
        (lambda: Text(3), TypeError, "default must be a string, found int"),
        (lambda: Text("a", grid=["a", 1]), TypeError, "the grid of a Text control holds strings"),
        (lambda: Choice([1, 2], value=3), ValueError, r"'3' is not one of \['1', '2'\]"),
        (lambda: Choice(["a", "a"]), ValueError, r"repeats the value\(s\) \['a'\]"),
    ],
)
def test_bad_specs_are_rejected_with_a_clear_message(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_initial_values_are_checked_against_the_live_control():
    with pytest.raises(ValueError, match=r"initial names no control \['tau'\]; the controls are \['slope'\]"):
        explorer(render_line, {"slope": [0, 1]}, title="T", initial={"tau": 1})
    with pytest.raises(ValueError, match=r"initial value of 'slope': '5' is not one of \['0', '1'\]"):
        explorer(render_line, {"slope": [0, 1]}, title="T", initial={"slope": 5})
    with pytest.raises(ValueError, match=r"initial value of 'slope': value 5 is outside \[0, 2\]"):
        explorer(render_line, {"slope": FloatRange(0, 2, grid=[0, 1])}, title="T", initial={"slope": 5})
    with pytest.raises(TypeError, match="initial must be a dict"):
        explorer(render_line, {"slope": [0, 1]}, title="T", initial=[1])


# ---- the stored HTML -------------------------------------------------------------------------


def strip_note(html: str) -> str:
    return re.sub(r'<p class="mha-explorer-note"[^>]*>[^<]*</p>\n', "", html)


def test_specs_give_the_same_book_html_as_plain_lists_of_their_grid():
    plain = explorer(render_line, {"slope": [-1, 0, 1], "style": ["solid", "dotted"]}, title="Same").html
    widgets._id_counts.clear()
    specs = explorer(
        render_line,
        {"slope": FloatRange(-2, 2, 0.1, grid=[-1, 0, 1]), "style": Choice(["solid", "dotted"])},
        title="Same",
    ).html
    assert specs == plain


def test_the_stored_html_says_the_explorer_comes_alive_when_its_cell_runs():
    ex = explorer(render_line, {"slope": [0, 1]}, title="Note")
    note = re.search(r'<p class="mha-explorer-note"[^>]*>([^<]*)</p>', ex.html)
    assert note and "comes alive when this cell runs" in note.group(1)
    assert note.group(1) == widgets.STATIC_NOTE and "comes alive" not in strip_note(ex.html)
    # its own script hides it: the book, where the script runs, looks as before
    assert 'var note = root.querySelector(".mha-explorer-note");\n  if (note) note.hidden = true;' in ex.html


def test_the_book_opens_on_the_initial_value_or_the_nearest_grid_value():
    ex = explorer(
        render_line,
        {"slope": FloatRange(-2, 2, grid=[-1, 0, 1]), "style": ["solid", "dotted", "dashed"]},
        title="Start",
        initial={"slope": 0.2, "style": "dashed"},
    )
    assert ex.starts == {"slope": 0.2, "style": "dashed"}
    assert ex.start == ex.combos.index({"slope": 0, "style": "dashed"}) == 5
    assert f'data-frame="{ex.start}"' in ex.html
    assert 'value="1" aria-valuetext="0"' in ex.html  # the slider at grid value 0
    assert '<option value="2" selected>dashed</option>' in ex.html
    assert f'src="{ex.frame_data_uri(5)}"' in ex.html
    assert ex.inputs["slope"].value == 0 and ex.inputs["style"].value == "dashed"  # the static widget too


# ---- live mode -------------------------------------------------------------------------------


def test_live_mode_precomputes_nothing_and_has_no_frame_limit():
    calls = []

    def render(slope, words):
        calls.append((slope, words))
        return render_line(slope, words=words)

    controls = {
        "slope": FloatRange(-3, 3, 0.01, grid=[round(-2 + k * 0.04, 2) for k in range(100)]),  # 100 grid values
        "words": Text("the cat sat", grid=["the cat sat", "a dog ran"]),
    }
    ex = widgets.Explorer(render, controls, title="Live", mode="live", initial={"slope": 0.5})
    assert calls == [] and not ex.precomputed and ex.live == "render"
    assert "mha-explorer-placeholder" in ex.html and 'class="mha-explorer ' not in ex.html
    assert repr(ex) == "<Explorer 'Live': live, nothing precomputed (200 grid combinations)>"
    bundle = ex._repr_mimebundle_()
    assert bundle["text/plain"] == "Explorer: Live (live)" and "application/vnd.jupyter.widget-view+json" in bundle
    assert calls == [(0.5, "the cat sat")]  # the widget's first figure: the initial case
    import ipywidgets

    assert isinstance(ex.inputs["slope"], ipywidgets.FloatSlider) and ex.inputs["slope"].continuous_update
    assert isinstance(ex.inputs["words"], ipywidgets.Text) and not ex.inputs["words"].continuous_update
    ex.inputs["slope"].value = 1.2345  # between grid points: computed all the same
    ex.inputs["words"].value = "my own sentence"
    assert calls[1:] == [(1.23, "the cat sat"), (1.23, "my own sentence")]
    assert ex.view.alt_text == "Live (slope = 1.23, words = my own sentence)"
    assert "Computed live in this kernel" in ex.widget.children[-1].value


def test_a_jupyter_servers_kernel_makes_explorers_live(monkeypatch):
    monkeypatch.setenv("JPY_SESSION_NAME", "/lab/x.ipynb")
    ex = explorer(TemperaturePlot(), {"temperature": FloatRange(0.25, 8, grid=[1, 2], log=True)}, title="T")
    assert ex.mode == "live" and not ex.precomputed
    assert isinstance(ex.inputs["temperature"], __import__("ipywidgets").FloatLogSlider)
    ex = explorer(render_line, {"slope": [0, 1]}, title="T", live="frames")  # frames on request
    assert ex.precomputed and len(ex.frames) == 2


def test_integer_and_log_sliders():
    import ipywidgets

    ex = widgets.Explorer(
        lambda n, ctx: render_line(n / 10),
        {"n": IntRange(1, 20, grid=[1, 10]), "ctx": IntRange(128, 131072, 128, grid=[1024], log=True)},
        title="Ints",
        mode="live",
    )
    assert isinstance(ex.inputs["n"], ipywidgets.IntSlider)
    assert isinstance(ex.inputs["ctx"], ipywidgets.FloatLogSlider) and ex.inputs["ctx"].readout_format == ".0f"
    ex.inputs["ctx"].value = 16400.7
    assert ex.live_values() == {"n": 1, "ctx": 16384}


def test_a_new_figure_that_fits_its_canvas_is_drawn_once_on_it():
    def render(slope):
        fig = render_line(slope)
        fig.tight_layout()  # everything inside the figure
        return fig

    ex = widgets.Explorer(render, {"slope": FloatRange(0, 2, 0.5, grid=[0])}, title="Fits", mode="live")
    ex.inputs["slope"].value = 1.5
    assert ex.painter.fits_canvas is True
    fig = render(1.5)
    plt.close(fig)
    assert ex.view.data == canvas_png(fig)  # the whole canvas: one size for every value


def test_a_change_during_a_draw_is_coalesced_into_one_more_draw():
    calls = []

    def render(slope):
        calls.append(slope)
        if slope == 1:  # the reader moves on while this figure is drawn
            ex.inputs["slope"].value = 2
            ex.inputs["slope"].value = 3
        return render_line(slope)

    ex = widgets.Explorer(render, {"slope": FloatRange(0, 3, 1, grid=[0])}, title="Busy", mode="live")
    ex.widget  # noqa: B018 (the property builds the widget)
    ex.inputs["slope"].value = 1
    assert calls == [0, 1, 3]  # 2 was never drawn: only the latest values
    assert ex.view.shown == {"slope": 3}


def test_changes_from_several_threads_are_drawn_one_at_a_time():
    # ipykernel 7 may deliver two widget messages on two threads: their draws must not overlap
    # (matplotlib's mathtext parser fails at random when two threads use it: seen in JupyterLab).
    import sys
    import threading
    import time

    active, most = [0], [0]

    def render(slope):
        active[0] += 1
        most[0] = max(most[0], active[0])
        time.sleep(0.002)
        active[0] -= 1
        return render_line(slope)

    ex = widgets.Explorer(render, {"slope": FloatRange(0, 3, 0.25, grid=[0])}, title="Threads", mode="live")
    ex.widget  # noqa: B018 (the property builds the widget)
    values = [0.25 * k for k in range(1, 13)]

    def mover(offset):
        for v in values[offset::3]:
            ex.inputs["slope"].value = v

    threads = [threading.Thread(target=mover, args=(k,)) for k in range(3)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch as often as they can: a race shows at once
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    print("MOST", most, live.__file__, hasattr(live.LiveView, "_busy"))
    assert most[0] == 1, f"{most[0]} draws ran at once"
    assert ex.view.shown == {"slope": ex.inputs["slope"].value}  # the last value set is the one shown
    assert ex.view.status.value == ""


def test_a_change_on_another_thread_waits_for_a_warm_step():
    # The warm steps run on the kernel's event loop; a widget message may come on another thread
    # while one of them draws: the change is drawn after it, not at the same time.
    import asyncio
    import threading
    import time

    active, most = [0], [0]
    warming = threading.Event()

    class Slow(live.LiveFigure):
        def draw(self, num_heads=1, slope=0.0):
            active[0] += 1
            most[0] = max(most[0], active[0])
            if num_heads > 1:
                warming.set()
            time.sleep(0.05)
            active[0] -= 1
            return render_line(slope + num_heads)

        def layout(self, num_heads=1, slope=0.0):
            return num_heads

        def update(self, fig, num_heads=1, slope=0.0):
            return False  # a new figure each time: every change draws

    async def scenario():
        ex = widgets.Explorer(
            Slow(), {"num_heads": [1, 2, 3], "slope": FloatRange(0, 1, 0.5, grid=[0])}, title="Warm", mode="live"
        )
        view = ex.view  # schedules the warm steps (layouts 2 and 3) on this loop

        def mover():
            assert warming.wait(5), "no warm step began"
            ex.inputs["slope"].value = 0.5  # while a layout is drawn ahead

        thread = threading.Thread(target=mover)
        thread.start()
        while thread.is_alive() or ex.painter.pending or view.shown != {"num_heads": 1, "slope": 0.5}:
            await asyncio.wait_for(asyncio.sleep(0.02), 5)
            assert time.perf_counter() - begun < 10, "the change was never drawn"
        thread.join()
        ex.painter.figures.clear()

    begun = time.perf_counter()
    asyncio.run(scenario())
    plt.close("all")
    assert most[0] == 1, f"{most[0]} draws ran at once"


def test_matplotlibs_hooks_after_a_message_wait_for_an_explorers_draw(monkeypatch):
    # After each widget message ipykernel fires post_execute on the message's thread, where pyplot
    # redraws every stale figure and matplotlib-inline shows and closes every open one: with an
    # explorer's figure half-drawn on another thread, matplotlib failed (a mathtext ParseException
    # in JupyterLab). Both hooks are put under the explorers' lock, in their places.
    import threading
    from types import SimpleNamespace

    import IPython
    from IPython.core.events import EventManager, available_events
    from matplotlib_inline import backend_inline

    def other():
        pass

    shell = SimpleNamespace()
    shell.events = EventManager(shell, available_events)
    for hook in (other, backend_inline.flush_figures, plt._draw_all_if_interactive):
        shell.events.register("post_execute", hook)
    monkeypatch.setattr(IPython, "get_ipython", lambda: shell)
    assert drawlock.guard_matplotlib_hooks() == 2
    hooks = shell.events.callbacks["post_execute"]
    assert hooks[0] is other and [h.__wrapped__ for h in hooks[1:]] == [
        backend_inline.flush_figures,
        plt._draw_all_if_interactive,
    ]
    assert drawlock.guard_matplotlib_hooks() == 2 and len(shell.events.callbacks["post_execute"]) == 3  # once

    drawn = threading.Event()
    shell.events.callbacks["post_execute"] = [drawlock._locked(drawn.set)]
    with drawlock.DRAW_LOCK:  # an explorer drawing
        message = threading.Thread(target=shell.events.trigger, args=("post_execute",))
        message.start()
        assert not drawn.wait(0.3), "a matplotlib hook ran while an explorer was drawing"
    message.join(5)
    assert drawn.is_set()


# ---- the fast path: one figure updated in place -------------------------------------------------


class CountingPlot(TemperaturePlot):
    def __init__(self, blit=True):
        super().__init__()
        self.draws, self.updates, self.blit = 0, 0, blit

    def draw(self, temperature=1.0):
        self.draws += 1
        return super().draw(temperature)

    def update(self, fig, temperature=1.0):
        self.updates += 1
        if temperature > 7.5:
            return False  # asks for a new figure
        return super().update(fig, temperature)

    def artists(self, fig):
        return super().artists(fig) if self.blit else None


@pytest.mark.parametrize("blit", [True, False])
def test_a_live_figure_is_updated_in_place_and_looks_like_a_new_one(blit):
    plot = CountingPlot(blit)
    ex = widgets.Explorer(
        plot,
        {"temperature": FloatRange(0.25, 8, 0.01, grid=[1])},
        title="Fast",
        mode="live",
        initial={"temperature": 2},
    )
    ex.widget  # noqa: B018 (the property builds the widget)
    assert (plot.draws, plot.updates) == (1, 0)
    for tau in (0.3, 1.37, 4.0, 2.0):
        ex.inputs["temperature"].value = tau
        assert np.array_equal(pixels(ex.view.data), fresh_canvas(plot, temperature=tau)), tau
    assert (plot.draws, plot.updates) == (1 + 4, 4)  # fresh_canvas drew 4; the explorer drew once
    ex.inputs["temperature"].value = 7.9  # update returns False: a new figure
    assert (plot.draws, plot.updates) == (6, 5)
    assert np.array_equal(pixels(ex.view.data), fresh_canvas(plot, temperature=7.9))


def test_the_temperature_plot_draws_what_plot_temperature_draws():
    plot = TemperaturePlot()
    for tau in softmax_demo.TEMPERATURES:
        a, b = plot.draw(temperature=tau), plot_temperature(tau)
        plt.close("all")
        assert np.array_equal(pixels(canvas_png(a)), pixels(canvas_png(b)))
    assert live.updates_in_place(plot) and live.budget_ms(plot) == (50.0, 150.0)
    assert not live.updates_in_place(plot_temperature) and live.draw_function(plot) == plot.draw


def test_the_books_frames_are_the_same_with_the_live_figure():
    controls = {"temperature": softmax_demo.TEMPERATURES}
    before = explorer(plot_temperature, controls, title="Softmax temperature").html
    widgets._id_counts.clear()
    controls = {"temperature": FloatRange(0.25, 8, grid=softmax_demo.TEMPERATURES, log=True)}
    after = explorer(TemperaturePlot(), controls, title="Softmax temperature").html
    assert after == before


def test_a_live_figure_without_draw_is_not_a_render():
    class Broken(live.LiveFigure):
        pass

    with pytest.raises(NotImplementedError, match="Broken must define draw"):
        explorer(Broken(), {"x": [1]}, title="T")


# ---- the stored notebooks ----------------------------------------------------------------------


BOOK = Path(__file__).resolve().parents[2] / "book"


@pytest.mark.parametrize("path", sorted(BOOK.glob("*.ipynb")), ids=lambda p: p.stem)
def test_stored_explorers_are_static_with_their_frames(path):
    """Outputs stored for the book come from a static kernel: a live explorer's placeholder (no
    frames) in book/ would leave the book with nothing to show (execute_notebooks.py forces
    MHA_EXPLORERS=static for that reason)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell["cell_type"] != "code" or "explorer(" not in "".join(cell["source"]):
            continue
        html = "".join("".join(output.get("data", {}).get("text/html", "")) for output in cell.get("outputs", []))
        assert 'class="mha-explorer ' in html and "mha-explorer-placeholder" not in html, (
            f"{path.name}: an explorer cell stored without its precomputed frames"
        )
