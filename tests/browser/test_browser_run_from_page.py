"""Run a chapter from its page: what the page offers works outside the repository.

Run after `make book` (``make test`` builds it; the file name puts it with the browser tests, which
need the built book). A chapter page links its notebook and the ``mha`` wheel built into the book;
this test takes both from the built book, installs the wheel into a fresh virtual environment in a
temporary folder outside the repository, and runs the downloaded chapter there under nbval.

The fresh environment gets its third-party packages (torch, matplotlib, nbval, ...) from the
course's own environment, through a ``.pth`` line, so that the test downloads nothing; ``mha``
itself comes only from the wheel (the course's editable install is a finder that a ``.pth`` line
does not load), and a check proves it is the wheel's copy that runs.
"""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import nbformat
import pytest
from conftest import skip_or_fail
from test_browser import BUILD, EDITIONS

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import notebooks  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
HTML = BUILD / EDITIONS["en"]
#: The chapter a learner most wants to run: their own code, checked.
CHAPTER = "04_build_it_yourself"


def page(name: str, edition: str = "en") -> str:
    path = BUILD / EDITIONS[edition] / "book" / f"{name}.html"
    if not path.exists():
        skip_or_fail(f"the book is not built ({path}): run `make book` and `make book-zh`")
    return path.read_text(encoding="utf-8")


def offered(page_html: str, edition: str = "en") -> tuple[Path, Path]:
    """The notebook and the wheel that a chapter page of ``edition`` links, as files of the built book."""
    html_root = BUILD / EDITIONS[edition]
    box = re.search(r'<details class="mha-run">(.*?)</details>', page_html, re.S)
    assert box, "the page offers no 'Run this chapter yourself' box"
    links = re.findall(r'href="\.\./([^"]+)"', box.group(1))
    notebooks = [html_root / link for link in links if link.endswith(".ipynb")]
    wheels = [html_root / link for link in links if link.endswith(".whl")]
    assert len(notebooks) == 1 and len(wheels) == 1, links
    assert notebooks[0].exists() and wheels[0].exists(), (notebooks, wheels)
    return notebooks[0], wheels[0]


def test_every_chapter_page_offers_its_notebook_and_the_package():
    chapters = sorted(p.stem for p in (ROOT / "book").glob("[0-9][0-9]_*.ipynb"))
    assert len(chapters) == 11
    for name in chapters:
        notebook, wheel = offered(page(name))
        assert notebook.name == f"{name}.ipynb" and wheel.name.startswith("mha-")
        # the learner's copy: the book's notebook without its checks on the stubs, solutions folded
        book_notebook = nbformat.read(ROOT / "book" / f"{name}.ipynb", as_version=4)
        assert nbformat.read(notebook, as_version=4) == notebooks.learner_notebook(book_notebook)
        assert "jupyter lab" in page(name) and "pip install" in page(name)
    assert "自己运行这一章" in page(CHAPTER, "zh_CN")
    assert "pretrained" in page("11_pretrained_heads") and "benchmarks/results" in page("10_making_it_fast")


def test_the_wheel_holds_the_package_and_its_data():
    import zipfile

    _, wheel = offered(page(CHAPTER))
    names = set(zipfile.ZipFile(wheel).namelist())
    for path in sorted((ROOT / "mha").rglob("*")):
        if path.is_file() and path.suffix in (".py", ".json", ".pt") and "__pycache__" not in path.parts:
            assert str(path.relative_to(ROOT)) in names, f"{path.relative_to(ROOT)} is missing from the wheel"


def test_the_run_box_installs_the_cpu_only_torch_in_the_wheels_range():
    box = re.search(r'<pre class="mha-run-commands"><code>(.*?)</code></pre>', page(CHAPTER), re.S).group(1)
    first = html.unescape(box).splitlines()[0]
    assert first == 'pip install "torch>=2.5" --index-url https://download.pytorch.org/whl/cpu'
    _, wheel = offered(page(CHAPTER))
    import zipfile

    metadata = next(n for n in zipfile.ZipFile(wheel).namelist() if n.endswith("METADATA"))
    requires = [line for line in zipfile.ZipFile(wheel).read(metadata).decode().splitlines() if "torch" in line]
    assert requires == ["Requires-Dist: torch>=2.5"], requires  # the same range as the box's command
    assert "5.8 GB" in page(CHAPTER) and "5.8 GB" in page(CHAPTER, "zh_CN")  # what the default install costs


@pytest.mark.skipif(sys.platform == "win32", reason="the venv layout below is POSIX")
def test_a_downloaded_chapter_runs_in_a_fresh_environment(tmp_path):
    notebook, wheel = offered(page(CHAPTER))
    env_dir, work = tmp_path / "env", tmp_path / "work"
    work.mkdir()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    python = env_dir / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()
    )  # fmt: skip
    # third-party packages from the course's environment; mha from the wheel only
    (site / "course_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)], check=True
    )
    shutil.copy2(notebook, work / notebook.name)
    where = subprocess.run(
        [str(python), "-c", "import mha, importlib.metadata as m; print(mha.__file__); print(m.requires('mha'))"],
        cwd=work, check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    assert where.startswith(str(site)), f"mha was not imported from the wheel's copy: {where}"
    result = subprocess.run(
        [str(python), "-m", "pytest", "-p", "no:cacheprovider", "-q", "--nbval", "--nbval-current-env",
         "--nbval-sanitize-with", str(ROOT / "tests" / "nbval_sanitize.cfg"), notebook.name],
        cwd=work, capture_output=True, text=True, env={"PATH": str(env_dir / "bin"), "HOME": str(tmp_path),
                                                       "MHA_DEVICE": "cpu", "TQDM_DISABLE": "1"},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert re.search(r"\d+ passed", result.stdout), result.stdout[-500:]
    # the learner who copied every solution: Run All, and every checker says correct
    shutil.copy2(notebook, work / "solved.ipynb")
    result = subprocess.run(
        [str(python), str(ROOT / "scripts" / "run_as_learner.py"), "--solve", "solved.ipynb"],
        cwd=work, capture_output=True, text=True, env={"PATH": str(env_dir / "bin"), "HOME": str(tmp_path),
                                                       "MHA_DEVICE": "cpu", "TQDM_DISABLE": "1"},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "solved.ipynb (solved): ok" in result.stdout, result.stdout
    # the Chinese edition's download: the Chinese notebook, solved, and its checkers say 正确
    chinese, _ = offered(page(CHAPTER, "zh_CN"), "zh_CN")
    shutil.copy2(chinese, work / "solved_zh.ipynb")
    result = subprocess.run(
        [str(python), str(ROOT / "scripts" / "run_as_learner.py"), "--solve", "solved_zh.ipynb"],
        cwd=work, capture_output=True, text=True, env={"PATH": str(env_dir / "bin"), "HOME": str(tmp_path),
                                                       "MHA_DEVICE": "cpu", "TQDM_DISABLE": "1"},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "solved_zh.ipynb (solved): ok" in result.stdout, result.stdout
