"""The static explorers work in a real browser with no kernel and no network.

Headless Debian Chromium (``/usr/bin/chromium``) driven by Python playwright. For a page built
here from a few explorers, and for every page of the built book (``_build/html``) that holds
explorers: every request outside the page or the book is blocked; each control is moved (keyboard
ArrowRight on a slider, choosing an option in a dropdown) and the displayed frame must change and
equal the frame precomputed for the selected values (with its alt text and the shown value).
"""

import json
import os
from pathlib import Path

import pytest
from conftest import skip_or_fail
from test_browser import CHROMIUM_ARGS

CHROMIUM = os.environ.get("MHA_CHROMIUM", "/usr/bin/chromium")
BOOK_HTML = Path(__file__).resolve().parents[2] / "_build" / "html"

if not Path(CHROMIUM).exists():
    skip_or_fail(
        f"Chromium not found at {CHROMIUM} (apt-get install chromium, or set MHA_CHROMIUM)", allow_module_level=True
    )
sync_api = pytest.importorskip("playwright.sync_api", reason="Python playwright is not installed")


def book_pages_with_explorers():
    if not BOOK_HTML.is_dir():
        return []
    return sorted(
        p
        for p in BOOK_HTML.rglob("*.html")
        if "_sources" not in p.parts and 'class="mha-explorer' in p.read_text(encoding="utf-8")
    )


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


def open_offline(browser, url: str, allowed_root: Path):
    """A page at ``url`` where every request outside ``allowed_root`` is aborted (and recorded)."""
    context = browser.new_context(offline=True)
    page = context.new_page()
    blocked = []
    allowed = allowed_root.resolve().as_uri()

    def route(request_route):
        target = request_route.request.url
        if target.startswith(allowed + "/") or target.startswith("data:"):
            request_route.continue_()
        else:
            blocked.append(target)
            request_route.abort()

    page.route("**/*", route)
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(url)
    return context, page, blocked, errors


def explorer_ids(page):
    return page.eval_on_selector_all("figure.mha-explorer", "nodes => nodes.map(n => n.id)")


def shown(page, eid):
    return page.evaluate(
        """eid => {
             const root = document.getElementById(eid), img = root.querySelector('img.mha-explorer-frame');
             const values = [...root.querySelectorAll('output')].map(o => o.textContent);
             return {src: img.getAttribute('src'), alt: img.alt, width: img.naturalWidth, values: values,
                     frame: root.getAttribute('data-frame')};
           }""",
        eid,
    )


def hidden_notes(page):
    """Per explorer: is its note (shown only where its script does not run) hidden?"""
    return page.eval_on_selector_all(
        "figure.mha-explorer",
        """nodes => nodes.map(n => {
             const note = n.querySelector('.mha-explorer-note');
             return !note || (note.hidden && note.offsetParent === null);
           })""",
    )


def check_explorer(page, eid):
    """Move every control of explorer ``eid`` through all its values; check each displayed frame."""
    data = json.loads(page.text_content(f"#{eid}-data"))
    sizes = [len(labels) for labels in data["labels"]]
    # where each control opens (an explorer's `initial`, else its first value)
    position = [int(page.locator(f"#{eid}-c{i}").input_value()) for i in range(len(sizes))]
    kinds = [
        page.locator(f"#{eid}-c{i}").evaluate("node => node.tagName.toLowerCase() + ':' + (node.type || '')")
        for i in range(len(sizes))
    ]
    moves = 0

    def expect(before=None):
        index = 0
        for size, k in zip(sizes, position):
            index = index * size + k
        now = shown(page, eid)
        assert now["frame"] == str(index)
        assert now["src"] == data["frames"][data["index"][index]], f"{eid}: wrong frame for {position}"
        assert now["alt"] == data["alts"][index]
        # each slider echoes its value; a dropdown shows its own, with no echo
        assert now["values"] == [
            labels[k] for labels, k, kind in zip(data["labels"], position, kinds) if kind == "input:range"
        ]
        assert page.eval_on_selector_all(
            f"#{eid} input[type=range]", "nodes => nodes.map(n => n.getAttribute('aria-valuetext'))"
        ) == [labels[k] for labels, k, kind in zip(data["labels"], position, kinds) if kind == "input:range"]
        page.wait_for_function(
            "eid => document.getElementById(eid).querySelector('img.mha-explorer-frame').complete", arg=eid
        )
        assert (
            page.evaluate(
                "eid => document.getElementById(eid).querySelector('img.mha-explorer-frame').naturalWidth", eid
            )
            > 0
        )
        if before is not None and data["index"][index] != data["index"][before]:
            assert now["src"] != data["frames"][data["index"][before]], f"{eid}: frame did not change"
        return index

    current = expect()
    for i, size in enumerate(sizes):
        control, kind = page.locator(f"#{eid}-c{i}"), kinds[i]
        if position[i] != 0:  # opened on a later value (`initial`): back to the first one
            if kind == "input:range":
                control.focus()
                page.keyboard.press("Home")
            else:
                control.select_option(value="0")
            position[i] = 0
            current = expect(before=current)
            moves += 1
        for k in range(1, size):
            if kind == "input:range":
                control.focus()
                page.keyboard.press("ArrowRight")
            elif k == 1:  # the keyboard works on a dropdown too
                assert kind.startswith("select"), kind
                control.focus()
                page.keyboard.press("ArrowDown")
            else:
                control.select_option(value=str(k))
            position[i] = k
            current = expect(before=current)
            moves += 1
        if kind == "input:range" and size > 1:  # keyboard back to the first value
            control.focus()
            page.keyboard.press("Home")
            position[i] = 0
            current = expect(before=current)
    return moves


def test_explorers_in_a_page_built_here(browser, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mha.viz.widgets import FloatRange, Text, explorer

    def render(slope=1, style="solid", width=1):
        fig, ax = plt.subplots(figsize=(2.0, 1.5))
        ax.plot([0, 1], [0, slope], linestyle=style, linewidth=width)
        ax.set_ylim(-3, 3)
        ax.set_title(f"slope {slope}")
        return fig

    explorers = [
        explorer(render, {"slope": [-2, -1, 0, 1, 2]}, title="One slider"),
        explorer(
            render, {"style": ["solid", "dashed", "dotted"]}, title="One dropdown", alt=lambda style: f"a {style} line"
        ),
        explorer(
            render,
            {"slope": [0, 1, 2], "style": ["solid", "dashed"], "width": [1, 3]},
            title="Two sliders and a dropdown",
            caption="All three at once.",
        ),
        explorer(  # live specs and an initial case: the book shows their grids, opening on that case
            render,
            {"slope": FloatRange(-3, 3, grid=[-1, 0, 1]), "style": Text("dotted", grid=["solid", "dotted"])},
            title="Specs opening on a case",
            initial={"slope": 0.9},
        ),
    ]
    page_file = tmp_path / "explorers.html"
    page_file.write_text(
        "<!doctype html><html><head><meta charset='utf-8'><title>explorers</title></head><body>"
        + "\n".join(ex.html for ex in explorers)
        + "</body></html>",
        encoding="utf-8",
    )
    context, page, blocked, errors = open_offline(browser, page_file.as_uri(), tmp_path)
    try:
        assert explorer_ids(page) == [ex.element_id for ex in explorers]
        moves = [check_explorer(page, ex.element_id) for ex in explorers]
        assert moves == [4, 2, 2 + 1 + 1, (1 + 2) + (1 + 1)]
        assert hidden_notes(page) == [True] * len(explorers), "the script hides the note in the book"
        # what the browser shows is the frame Python rendered for that combination
        for ex in explorers:
            now = shown(page, ex.element_id)
            assert now["src"] == ex.frame_data_uri(int(now["frame"]))
        assert blocked == [] and errors == []
    finally:
        context.close()


@pytest.mark.skipif(
    not book_pages_with_explorers(),
    reason=f"no built book page with explorers under {BOOK_HTML} (run `make book` first)",
)
@pytest.mark.parametrize("page_path", book_pages_with_explorers(), ids=lambda p: str(p.relative_to(BOOK_HTML)))
def test_every_explorer_in_the_built_book(browser, page_path):
    context, page, blocked, errors = open_offline(browser, page_path.as_uri(), BOOK_HTML)
    try:
        ids = explorer_ids(page)
        assert ids, f"{page_path}: the explorers' HTML did not survive the build"
        assert len(ids) == len(set(ids)), f"{page_path}: repeated explorer ids {ids}"
        from mha.viz.widgets import MAX_BYTES

        assert all(hidden_notes(page)), f"{page_path}: an explorer's note is visible in the book"
        for eid in ids:
            size = page.evaluate("eid => new Blob([document.getElementById(eid).outerHTML]).size", eid)
            assert size <= MAX_BYTES, f"{page_path}: explorer {eid} takes {size} bytes, over {MAX_BYTES}"
            assert check_explorer(page, eid) > 0
        assert errors == [], f"{page_path}: JavaScript errors {errors} (blocked requests: {blocked})"
    finally:
        context.close()
