"""The live notebooks in a real JupyterLab 4 and Notebook 7: ``make test-lab``.

Starts ``jupyter lab`` headless on 127.0.0.1 (a free port, a random token) over copies of the
chapters in a temporary folder, as ``make lab`` does over ``lab/``, and drives it with Debian's
Chromium through playwright. For the single-head-limits, worked-example, parameter-analysis and pretrained-heads
chapters (``CHAPTERS``), and a small notebook whose
explorer takes a sentence: before running, each stored explorer that carries the note shows it;
*Run › Run All Cells* runs every cell without an error; each explorer turns into a live widget;
every slider is moved with the keyboard, every dropdown set to another option, every text box
given a sentence, and each change must bring a new figure. The time from the key press (or the
change) to the new figure having loaded in the page is recorded per change in
``_build/test-lab/latencies.json`` and ``.md``, with a screenshot of each notebook. The server is
shut down (and its process group ended) whatever happens.

Opt-in: it runs only with ``MHA_TEST_LAB=1`` (``make test-lab`` sets it, after installing
``requirements-lab.txt``); ``make unit`` skips it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

if os.environ.get("MHA_TEST_LAB") != "1":
    pytest.skip("the live-notebook browser test runs with `make test-lab` (MHA_TEST_LAB=1)", allow_module_level=True)

from conftest import skip_or_fail  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import lab_copies  # noqa: E402

CHROMIUM = os.environ.get("MHA_CHROMIUM", "/usr/bin/chromium")
if not Path(CHROMIUM).exists():
    skip_or_fail(f"Chromium not found at {CHROMIUM} (apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="Python playwright is not installed")
try:
    import jupyterlab  # noqa: F401
    import notebook  # noqa: F401
except ImportError:
    skip_or_fail("JupyterLab or Notebook 7 is not installed: run `make lab-install`", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
BOOK = ROOT / "book"
REPORT = ROOT / "_build" / "test-lab"
CHAPTERS = ["01_single_head_limits", "03_worked_example", "05_parameter_analysis", "11_pretrained_heads"]
OWN_SENTENCE = "own_sentence"
#: What the test types into a text box: a sentence (the pretrained-heads chapter's model runs on it), or for a
#: box of another name what it accepts (the worked example's five words of its vocabulary).
SENTENCE = "The animal did not cross the street because it was too tired"
TEXTS = {"tokens": "the dog the cat saw", "five words": "the dog the cat saw"}
#: Run All may take this long (the pretrained-heads chapter loads a pretrained model and runs its analyses).
RUN_ALL_S = 240
CHANGE_S = 20
#: A slider is moved this many times with the keyboard (one latency each).
SLIDER_MOVES = 4
#: JupyterLab settings: every cell stays in the page (no virtual scrolling), no news prompt.
SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false"},
}
#: The notebook whose explorer takes a sentence (a Text control) and a temperature.
OWN_SENTENCE_CELLS = [
    """import matplotlib.pyplot as plt

from mha.chapters.heads import softmax_demo
from mha.viz.widgets import FloatRange, Text, explorer


def render(sentence="the cat sat on the mat", temperature=1.0):
    words = sentence.split() or ["(empty)"]
    weights = softmax_demo.softmax_with_temperature([float(len(w)) for w in words], temperature)
    fig, ax = plt.subplots(figsize=(5.5, 2.5))
    ax.bar(range(len(words)), weights.tolist())
    ax.set_xticks(range(len(words)), words, rotation=30)
    ax.set_title(f"softmax(word length / {temperature:g})")
    fig.tight_layout()
    return fig""",
    """# NBVAL_IGNORE_OUTPUT
explorer(
    render,
    {
        "sentence": Text("the cat sat on the mat", grid=["the cat sat on the mat", "a dog ran"]),
        "temperature": FloatRange(0.25, 4.0, grid=[1.0]),
    },
    title="Your own sentence",
)""",
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def api(lab, method: str, path: str):
    request = urllib.request.Request(f"{lab['url']}{path}?token={lab['token']}", method=method)
    with urllib.request.urlopen(request, timeout=10) as response:
        body = response.read()
    return json.loads(body) if body else None


def write_own_sentence(folder: Path) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in OWN_SENTENCE_CELLS]
    nb.metadata["kernelspec"] = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
    nbformat.write(nb, folder / f"{OWN_SENTENCE}.ipynb")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server over copies of the notebooks; shut down (process group ended) at the end."""
    base = tmp_path_factory.mktemp("lab")
    folder = base / "lab"
    lab_copies.make_copies(BOOK, folder)  # what `make lab` does to lab/
    write_own_sentence(folder)
    settings = base / "settings"
    for relative, values in SETTINGS.items():
        (settings / relative).parent.mkdir(parents=True, exist_ok=True)
        (settings / relative).write_text(json.dumps(values))
    port, token = free_port(), secrets.token_hex(16)
    env = {**os.environ, "MHA_DEVICE": "cpu", "TQDM_DISABLE": "1", "JUPYTER_RUNTIME_DIR": str(base / "runtime")}
    env.pop("MHA_EXPLORERS", None)  # the kernels must find out by themselves that they are live
    command = [
        sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
        "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={folder}",
        f"--LabApp.user_settings_dir={settings}", f"--LabApp.workspaces_dir={base / 'workspaces'}",
        "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]  # fmt: skip
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")
    log = open(base / "server.log", "w")  # noqa: SIM115 (closed below)
    server = subprocess.Popen(
        command, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )  # its own process group: ended as a whole below
    info = {"url": f"http://127.0.0.1:{port}", "token": token, "folder": folder, "log": base / "server.log"}
    try:
        deadline = time.monotonic() + 90
        while True:
            if server.poll() is not None:
                pytest.fail(f"jupyter lab exited with {server.returncode}:\n{info['log'].read_text()[-3000:]}")
            try:
                api(info, "GET", "/api/status")
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"jupyter lab did not answer in 90 s:\n{info['log'].read_text()[-3000:]}")
                time.sleep(0.5)
        yield info
    finally:
        try:
            api(info, "POST", "/api/shutdown")  # stops its kernels too
            server.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            pass
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()
        log.close()


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu", "--no-first-run"], headless=True
        )
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def report():
    REPORT.mkdir(parents=True, exist_ok=True)
    records = {"environment": {"cpu_count": os.cpu_count()}, "notebooks": {}}
    yield records
    REPORT.mkdir(parents=True, exist_ok=True)
    (REPORT / "latencies.json").write_text(json.dumps(records, indent=1) + "\n")
    lines = [
        "# Live explorers in JupyterLab: from a key press to the new figure in the page",
        "",
        f"{records['environment']['cpu_count']} CPUs; 1-minute load average "
        f"{records['environment'].get('load_before')} before, {os.getloadavg()[0]:.2f} after.",
        "",
        "| notebook | run all (s) | explorer | control | changes | median (ms) | worst (ms) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, entry in records["notebooks"].items():
        for ex in entry["explorers"]:
            for control, times in ex["latencies_ms"].items():
                lines.append(
                    f"| {name} | {entry['run_all_s']:.1f} | {ex['title']} | {control} | {len(times)} | "
                    f"{statistics.median(times):.0f} | {max(times):.0f} |"
                )
    (REPORT / "latencies.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


ARM = r"""(root) => {
  // Resolves with the ms from the first key press / change inside ``root`` to the new figure loaded.
  const box = root.querySelector(".mha-explorer-image");
  const before = (box.querySelector("img") || {}).src;
  // t0: the first key press, pointer press or change inside root; if none reaches it (a drag may
  // begin outside the handle's listeners), the moment the test armed the page, just before acting.
  const armed = performance.now();
  let t0 = null;
  const start = () => { if (t0 === null) t0 = performance.now(); };
  for (const kind of ["keydown", "pointerdown", "change", "input"]) {
    root.addEventListener(kind, start, {capture: true, once: true});
  }
  window.__mhaChange = new Promise((resolve) => {
    const timer = setTimeout(() => { observer.disconnect(); resolve({ms: null}); }, CHANGE_MS);
    const observer = new MutationObserver(() => {
      const img = box.querySelector("img");
      if (!img || img.src === before) return;
      observer.disconnect();
      clearTimeout(timer);
      const done = () => resolve({ms: performance.now() - (t0 === null ? armed : t0), alt: img.alt});
      img.complete ? done() : img.addEventListener("load", done, {once: true});
    });
    observer.observe(box, {childList: true, subtree: true, attributes: true});
  });
}""".replace("CHANGE_MS", str(CHANGE_S * 1000))


def timed_change(page, root, act) -> dict:
    """Arm the page, ``act()`` (a key press, a choice), wait for the new figure; its latency."""
    root.evaluate(ARM)
    act()
    result = page.evaluate("() => window.__mhaChange")
    status = root.locator(".mha-explorer-status").inner_text()
    assert result["ms"] is not None, f"no new figure within {CHANGE_S} s of the change (status: {status!r})"
    assert status.strip() == "", f"the explorer reported an error: {status}"
    return result


def press(page, handle, key: str) -> None:
    handle.focus()
    page.keyboard.press(key)


def type_sentence(box, text: str = SENTENCE) -> None:
    box.fill(text)
    box.press("Enter")


def drag(page, handle, dx: float) -> None:
    """Drag a slider's handle ``dx`` pixels with the mouse."""
    box = handle.bounding_box()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x + dx, y, steps=3)
    page.mouse.up()


def move_controls(page, root, keyboard: bool = True) -> dict[str, list[float]]:
    """Every control of the live explorer ``root``: move it and time each change. Sliders move with
    the keyboard (ArrowRight), or with the mouse (``keyboard=False``: Notebook 7 takes arrow keys
    to move between cells)."""
    latencies = {}
    controls = root.locator(".mha-explorer-control")
    for i in range(controls.count()):
        control = controls.nth(i)
        name = control.locator(".widget-label").first.inner_text().strip()
        times = []
        if control.locator(".noUi-handle").count():
            handle = control.locator(".noUi-handle").first
            for _ in range(SLIDER_MOVES):
                at_end = handle.get_attribute("aria-valuenow") == handle.get_attribute("aria-valuemax")
                if keyboard:
                    act = functools.partial(press, page, handle, "ArrowLeft" if at_end else "ArrowRight")
                else:
                    act = functools.partial(drag, page, handle, -25 if at_end else 25)
                times.append(timed_change(page, root, act)["ms"])
        elif control.locator("select").count():
            select = control.locator("select").first
            options = select.locator("option").count()
            for k in range(1, min(options, 3)):
                times.append(timed_change(page, root, functools.partial(select.select_option, index=k))["ms"])
        elif control.locator("input[type=text]").count():
            box = control.locator("input[type=text]").first
            text = TEXTS.get(name, SENTENCE)
            result = timed_change(page, root, functools.partial(type_sentence, box, text))
            assert text in result["alt"], f"the figure's alt text does not name the text typed: {result['alt']!r}"
            times.append(result["ms"])
        assert times, f"control {name!r} of an explorer was not moved"
        latencies[name] = times
    return latencies


def stored_explorer_cells(name: str) -> int:
    nb = json.loads((BOOK / f"{name}.ipynb").read_text()) if name != OWN_SENTENCE else None
    if nb is None:
        return 1
    return sum(1 for cell in nb["cells"] if cell["cell_type"] == "code" and "explorer(" in "".join(cell["source"]))


STARTED = """() => Array.from(document.querySelectorAll('.jp-InputPrompt')).some(e => e.textContent.includes('*'))
                || document.querySelectorAll('.mha-explorer-live').length > 0"""
FINISHED = "() => !Array.from(document.querySelectorAll('.jp-InputPrompt')).some(e => e.textContent.includes('*'))"


def run_all(page) -> float:
    """*Run › Run All Cells*, and wait until no cell is running; the seconds it took. A click that
    started nothing (the page not yet connected to its kernel) is repeated once."""
    start = time.monotonic()
    for attempt in range(2):
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
        try:
            page.wait_for_function(STARTED, timeout=15_000)
            break
        except sync_api.TimeoutError:
            if attempt:
                raise
    page.wait_for_function(FINISHED, timeout=RUN_ALL_S * 1000)
    return time.monotonic() - start


def wait_for_kernel(lab, name: str, timeout: float = 120) -> None:
    """Until the server says the notebook's kernel has started and is idle."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = [s["kernel"]["execution_state"] for s in api(lab, "GET", "/api/sessions") if s["path"].endswith(name)]
        if states == ["idle"]:
            return
        time.sleep(0.5)
    pytest.fail(f"the kernel of {name} did not start in {timeout} s")


def open_notebook(browser, lab, path: str):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(f"{error}: {(error.stack or '')[:600]}"))
    reset = "&reset" if path.startswith("lab/") else ""  # JupyterLab: no tab of an earlier page
    page.goto(f"{lab['url']}/{path}?token={lab['token']}{reset}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
    wait_for_kernel(lab, path.rsplit("/", 1)[-1])
    page.wait_for_timeout(1000)  # the page connects to it
    return context, page, errors


def close_sessions(lab) -> None:
    """Shut down every kernel the page started (the pretrained-heads chapter's holds a model: free the memory)."""
    for session in api(lab, "GET", "/api/sessions"):
        api(lab, "DELETE", f"/api/sessions/{session['id']}")


@pytest.mark.parametrize("name", [*CHAPTERS, OWN_SENTENCE])
def test_live_notebook_in_jupyterlab(browser, lab, report, name):
    report["environment"].setdefault("load_before", round(os.getloadavg()[0], 2))
    context, page, errors = open_notebook(browser, lab, f"lab/tree/{name}.ipynb")
    try:
        # Before running: the stored explorers, and the note of those that carry one.
        notes = page.evaluate(
            """() => Array.from(document.querySelectorAll('.mha-explorer .mha-explorer-note'))
                 .map(n => n.offsetParent !== null && n.textContent.includes('comes alive when this cell runs'))"""
        )
        assert all(notes), f"{name}: a stored explorer's note is hidden or wrong before the cells run"
        if name == "01_single_head_limits":
            assert notes, f"{name}'s stored explorers carry no note (regenerate its notebook)"
        run_all_s = run_all(page)
        expected = stored_explorer_cells(name)
        page.wait_for_function(
            f"() => document.querySelectorAll('.mha-explorer-live').length >= {expected}", timeout=60_000
        )
        tracebacks = page.locator(".jp-OutputArea-output", has_text="Traceback").count()
        assert tracebacks == 0, f"{name}: {tracebacks} cell(s) failed"
        explorers = []
        roots = page.locator(".mha-explorer-live")
        assert roots.count() == expected, f"{name}: {roots.count()} live explorers, {expected} explorer cells"
        for i in range(roots.count()):
            root = roots.nth(i)
            root.scroll_into_view_if_needed()
            root.locator(".mha-explorer-image img").wait_for(timeout=CHANGE_S * 1000)
            title = root.locator(".widget-html-content b").first.inner_text()
            explorers.append({"title": title, "latencies_ms": move_controls(page, root)})
            page.screenshot(path=str(REPORT / f"{name}-{i + 1}.png"))
        assert errors == [], f"{name}: JavaScript errors {errors}"
        if name == "01_single_head_limits":  # saving writes the copy, nothing in book/, no paired text file
            book_before = hashlib.sha256((BOOK / f"{name}.ipynb").read_bytes()).hexdigest()
            copy = lab["folder"] / f"{name}.ipynb"
            saved_before = copy.stat().st_mtime_ns
            page.locator(".jp-Notebook").first.click(position={"x": 5, "y": 5})
            page.keyboard.press("Control+s")
            deadline = time.monotonic() + 20
            while copy.stat().st_mtime_ns == saved_before and time.monotonic() < deadline:
                time.sleep(0.2)
            assert copy.stat().st_mtime_ns != saved_before, "Ctrl+S did not save the copy"
            assert "application/vnd.jupyter.widget-view+json" in copy.read_text()  # the run was saved
            assert hashlib.sha256((BOOK / f"{name}.ipynb").read_bytes()).hexdigest() == book_before
            assert sorted(p.name for p in lab["folder"].iterdir() if p.suffix in (".md", ".py")) == []
        report["notebooks"][name] = {"run_all_s": round(run_all_s, 1), "explorers": explorers}
    except Exception:
        page.screenshot(path=str(REPORT / f"{name}-failed.png"), full_page=True)
        raise
    finally:
        context.close()
        close_sessions(lab)


def test_live_explorer_in_notebook_7(browser, lab, report):
    """Classic Notebook 7 (the same server) shows and updates the live explorer too."""
    context, page, errors = open_notebook(browser, lab, "notebooks/01_single_head_limits.ipynb")
    try:
        # Notebook 7.6.5 itself throws one settings-registry error as it starts (a plugin with no
        # schema), with or without explorers: only errors after that count.
        at_load = len(errors)
        run_all_s = run_all(page)
        root = page.locator(".mha-explorer-live").first
        root.wait_for(timeout=60_000)
        root.scroll_into_view_if_needed()
        root.locator(".mha-explorer-image img").wait_for(timeout=CHANGE_S * 1000)
        latencies = move_controls(page, root, keyboard=False)
        page.screenshot(path=str(REPORT / "notebook7-01_single_head_limits.png"))
        assert errors[at_load:] == [], f"Notebook 7: JavaScript errors {errors[at_load:]}"
        report["notebooks"]["01_single_head_limits (Notebook 7)"] = {
            "errors_at_start": [error.split(":")[0] for error in errors[:at_load]],
            "run_all_s": round(run_all_s, 1),
            "explorers": [{"title": "Softmax temperature", "latencies_ms": latencies}],
        }
    except Exception:
        page.screenshot(path=str(REPORT / "notebook7-failed.png"), full_page=True)
        raise
    finally:
        context.close()
        close_sessions(lab)
