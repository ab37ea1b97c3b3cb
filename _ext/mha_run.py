"""Run a chapter from its page, without the repository: the notebook and the ``mha`` package, downloaded
from the book.

Every chapter page gets a folded box, "Run this chapter yourself", under its title: a link to the
chapter's notebook (with its stored outputs, as Sphinx publishes it under ``_sources/``), a link to
the ``mha`` wheel (built into the book, its data files included, so the book is the only thing to
download), and the two commands that run the chapter in any Jupyter. The making-it-fast chapter reads the
benchmark results of the repository (``benchmarks/results``); its box says so and gives the clone.

The wheel is built once per book build, from a copy of ``pyproject.toml`` and ``mha/`` in a
temporary folder (so that setuptools leaves no ``build/`` in the repository), with the course's
own environment (``--no-build-isolation``: no download).
``tests/browser/test_browser_run_from_page.py`` installs it into a fresh virtual environment outside the
repository and runs a downloaded chapter there under nbval.
"""

from __future__ import annotations

import html
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from mha.chapters import chapter

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from notebooks import chapter_messages, write_learner_notebook  # noqa: E402  (scripts/notebooks.py)

#: Where the wheel is published, relative to the book's root folder.
DOWNLOADS = "_downloads/mha"
#: The extras a chapter needs beyond the package (the pretrained-heads chapter reads a pretrained model).
EXTRAS = {chapter("pretrained_heads").page: "chapters,pretrained"}
#: Chapters that read files of the repository, not of the package.
NEEDS_REPOSITORY = {chapter("making_it_fast").page: "benchmarks/results"}

#: PyTorch's CPU-only wheels (PyTorch's own package index; the range is the wheel's, pyproject.toml).
CPU_TORCH = 'pip install "torch>=2.5" --index-url https://download.pytorch.org/whl/cpu'

TEXT = {
    "en": {
        "summary": "Run this chapter yourself",
        "download": "Download {notebook} (the chapter, with its outputs) and {wheel} (the <code>mha</code> package "
        "it imports), into one folder. Then, in that folder, with Python 3.10 or newer:",
        "torch": "The first line installs PyTorch's CPU-only build (a 190 MB download): the course needs no GPU, "
        "and on Linux a plain <code>pip install</code> takes the CUDA build instead (about 5.8 GB with its CUDA "
        "libraries, 8 minutes on a fast line). Leave the line out where torch 2.5 or newer is installed, and on "
        "macOS, where the default build is CPU-only.",
        "where": "Any Jupyter works (JupyterLab, Notebook, VS Code). The checkers answer in English; "
        "<code>MHA_LANG=zh_CN</code> before <code>jupyter lab</code> makes them answer in Chinese.",
        "repository": "This chapter also reads the benchmark results in the course's repository "
        "(<code>{path}</code>): run it from a clone, <code>make lab</code>.",
    },
    "zh_CN": {
        "summary": "自己运行这一章",
        "download": "把 {notebook}（本章及其输出）和 {wheel}（它导入的 <code>mha</code> 包）下载到同一个文件夹，"
        "然后在该文件夹中（Python 3.10 或更新版本）运行：",
        "torch": "第一行安装 PyTorch 的纯 CPU 版本（下载约 190 MB）：本课程不需要 GPU，而在 Linux 上直接 "
        "<code>pip install</code> 会装上 CUDA 版本（连同 CUDA 库约 5.8 GB，网速快时也要 8 分钟）。"
        "已经装有 torch 2.5 或更新版本时可以省去这一行；macOS 上默认的版本本来就是纯 CPU 的，也不需要它。",
        "where": "任何 Jupyter 都可以（JupyterLab、Notebook、VS Code）。"
        "这份 notebook 是中文版：正文是中文，检查器也直接用中文回答。",
        "repository": "本章还要读取课程仓库中的基准测试结果（<code>{path}</code>）：请在克隆的仓库中用 "
        "<code>make lab-zh</code> 运行。",
    },
}


def build_wheel(app) -> None:
    """Builds the ``mha`` wheel into a temporary folder; remembered as ``app.mha_wheel``."""
    app.mha_wheel = None
    if app.builder.format != "html":
        return
    work = Path(tempfile.mkdtemp(prefix="mha-wheel-"))
    source = work / "src"
    source.mkdir()
    shutil.copy2(ROOT / "pyproject.toml", source / "pyproject.toml")
    shutil.copytree(ROOT / "mha", source / "mha", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(work), str(source)],
        check=True,
    )
    app.mha_wheel = next(work.glob("mha-*.whl"))


def publish_wheel(app, exception) -> None:
    """Copies the wheel into the built book (``_downloads/mha/``), and puts the learner's copy of each
    chapter (``scripts/notebooks.learner_notebook``: no check of the book's own on the learner's stubs,
    solutions folded in Jupyter too) where the page's links and the theme's download button point."""
    wheel = getattr(app, "mha_wheel", None)
    if exception is not None or wheel is None:
        return
    language = "zh_CN" if (app.config.language or "en").startswith("zh") else "en"
    for docname in sorted(app.env.found_docs):
        source = Path(app.env.doc2path(docname))
        if source.suffix == ".ipynb" and Path(docname).name[:2].isdigit():
            target = Path(app.outdir) / "_sources" / f"{docname}.ipynb"
            target.parent.mkdir(parents=True, exist_ok=True)
            # the Chinese edition hands out the Chinese notebook: its prose and its checkers' words
            messages = chapter_messages(Path(docname).name, language) if language != "en" else None
            write_learner_notebook(source, target, messages, language)
    target = Path(app.outdir) / DOWNLOADS
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy2(wheel, target / wheel.name)
    shutil.rmtree(wheel.parent, ignore_errors=True)


def run_box(app, pagename, templatename, context, doctree) -> None:
    """Puts the folded "Run this chapter yourself" box under a chapter page's title."""
    wheel = getattr(app, "mha_wheel", None)
    source = Path(app.env.doc2path(pagename)) if pagename in app.env.all_docs else None
    if wheel is None or "body" not in context or source is None or source.suffix != ".ipynb":
        return
    if not Path(pagename).name[:2].isdigit():  # chapters only, not the reference pages
        return
    language = "zh_CN" if (app.config.language or "en").startswith("zh") else "en"
    text = TEXT[language]
    up = "../" * pagename.count("/")
    notebook = f"{Path(pagename).name}.ipynb"
    notebook_link = f'<a href="{up}_sources/{pagename}.ipynb" download="{notebook}"><code>{notebook}</code></a>'
    wheel_link = f'<a href="{up}{DOWNLOADS}/{wheel.name}" download><code>{wheel.name}</code></a>'
    extras = EXTRAS.get(pagename, "chapters")
    commands = f'{CPU_TORCH}\npip install "./{wheel.name}[{extras}]" jupyterlab\njupyter lab {notebook}'
    parts = [
        f"<p>{text['download'].format(notebook=notebook_link, wheel=wheel_link)}</p>",
        f'<pre class="mha-run-commands"><code>{html.escape(commands)}</code></pre>',
        f"<p>{text['torch']}</p>",
        f"<p>{text['where']}</p>",
    ]
    if pagename in NEEDS_REPOSITORY:
        parts.append(f"<p>{text['repository'].format(path=NEEDS_REPOSITORY[pagename])}</p>")
    box = f'<details class="mha-run"><summary>{text["summary"]}</summary>\n' + "\n".join(parts) + "\n</details>\n"
    body = context["body"]  # under the chapter's title, or at the top of a page without one
    at = body.find("</h1>")
    context["body"] = box + body if at < 0 else body[: at + 5] + "\n" + box + body[at + 5 :]


def setup(app):
    app.connect("builder-inited", build_wheel)
    app.connect("html-page-context", run_box)
    app.connect("build-finished", publish_wheel)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
