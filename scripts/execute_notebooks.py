"""Execute the chapters on the CPU and store their outputs: ``chapters/NAME.md`` -> ``book/NAME.ipynb``.

Usage:
    python scripts/execute_notebooks.py [PATH ...]           # default: every chapter
    python scripts/execute_notebooks.py --check [PATH ...]   # run, compare, write nothing

A PATH may name either form (``chapters/03_worked_example.md`` or ``book/03_worked_example.ipynb``);
the cells always come from the text source. nbval later re-runs each notebook and compares with what
this stored, so the book shows exactly what was checked. ``--check`` proves the command is idempotent:
it executes each chapter again exactly as the default mode would, and fails if any text output
(streams, ``text/*``, SVG, JSON, errors) of a cell would change, or if the stored notebook's cells are
not those of the text source. Cells marked ``# NBVAL_IGNORE_OUTPUT`` (explorers, timings) are left
out of the output comparison, as nbval leaves them out.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
from notebooks import ROOT, all_texts, notebook_path, out_of_sync, read_text, strip_volatile, text_path  # noqa: E402

sys.path.insert(0, str(ROOT))
from mha.viz.figure_i18n import MISSING_ENV, PHONE, TWINS_ENV, gather_twins  # noqa: E402

#: Environment of the kernel: stored outputs are always generated on the CPU, without progress bars,
#: with static explorers (every frame precomputed for the book) even when run from a live kernel.
KERNEL_ENV = {"MHA_DEVICE": "cpu", "CUDA_VISIBLE_DEVICES": "", "TQDM_DISABLE": "1", "MHA_EXPLORERS": "static"}
#: ... and, when outputs are stored, the folder the Chinese edition's twins of the figures and explorer
#: frames are drawn into (mha.viz.figure_i18n), with a file listing the strings no phrasebook translates.
TWINS = ROOT / "locales" / "zh_CN"
MISSING_LOG = ROOT / "_build" / "figure_words_missing.txt"
TEXT_MIME = ("text/plain", "text/html", "text/markdown", "text/latex", "image/svg+xml", "application/json")
IGNORE_MARKERS = ("NBVAL_IGNORE_OUTPUT", "NBVAL_SKIP")
IGNORE_TAGS = ("nbval-ignore-output", "nbval-skip")


def execute_notebook(nb, path: Path, timeout: int = 600, twins: bool = False):
    """Run every cell of ``nb`` (in place) in a fresh kernel started in ``path``'s folder;
    ``twins``: the kernel also draws the Chinese twin of each figure and explorer frame."""
    env = dict(KERNEL_ENV)
    if twins:
        env.update({TWINS_ENV: str(TWINS), MISSING_ENV: str(MISSING_LOG)})
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)  # the kernel inherits this process's environment
    try:
        client = NotebookClient(
            nb,
            timeout=timeout,
            kernel_name="python3",
            store_widget_state=False,
            coalesce_streams=True,
            resources={"metadata": {"path": str(path.parent)}},
        )
        client.execute()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    strip_volatile(nb)
    return nb


def is_ignored(cell) -> bool:
    lines = cell.source.lstrip().splitlines()
    first = lines[0] if lines else ""
    tags = cell.get("metadata", {}).get("tags", [])
    return any(marker in first for marker in IGNORE_MARKERS) or any(tag in tags for tag in IGNORE_TAGS)


def text_outputs(cell) -> list[str]:
    """What nbval and a reader compare in a cell: its text outputs, as lines."""
    lines = []
    streams = {}  # a print can arrive as several stream messages: join them before splitting lines
    for output in cell.get("outputs", []):
        if output["output_type"] == "stream":
            streams[output["name"]] = streams.get(output["name"], "") + output["text"]
    for name, text in streams.items():
        lines += [f"[{name}] {line}" for line in text.splitlines()]
    for output in cell.get("outputs", []):
        kind = output["output_type"]
        if kind == "stream":
            continue
        elif kind in ("execute_result", "display_data"):
            for mime in TEXT_MIME:
                if mime in output.get("data", {}):
                    value = output["data"][mime]
                    value = value if isinstance(value, str) else repr(value)
                    lines += [f"[{mime}] {line}" for line in value.splitlines()]
        elif kind == "error":
            lines.append(f"[error] {output['ename']}: {output['evalue']}")
        # a checker's verdict in every edition (the Chinese edition shows the one stored here)
        for language, text in sorted(output.get("metadata", {}).get("mha", {}).get("verdict", {}).items()):
            lines += [f"[verdict {language}] {line}" for line in text.splitlines()]
    return lines


def compare(stored, fresh) -> list[str]:
    """Differences between the text outputs of two runs of the same notebook (ignored cells skipped)."""
    problems = []
    index = 0
    for old, new in zip(stored.cells, fresh.cells):
        if old.cell_type != "code":
            continue
        index += 1
        if is_ignored(old):
            continue
        a, b = text_outputs(old), text_outputs(new)
        if a != b:
            diff = "\n".join(difflib.unified_diff(a, b, "stored", "fresh run", lineterm="", n=1))
            problems.append(f"code cell {index}:\n{diff}")
    return problems


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument(
        "--check", action="store_true", help="execute and compare text outputs with the stored ones; write nothing"
    )
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    args = parser.parse_args(argv)
    texts = [text_path(p.resolve()) for p in args.paths] or all_texts()
    if not args.check:
        MISSING_LOG.parent.mkdir(parents=True, exist_ok=True)  # a fresh clone has no _build/ yet
        MISSING_LOG.unlink(missing_ok=True)
    failures = 0
    for text in texts:
        target = notebook_path(text)
        name = target.relative_to(ROOT)
        fresh = read_text(text)
        start = time.perf_counter()
        execute_notebook(fresh, target, timeout=args.timeout, twins=not args.check)
        elapsed = time.perf_counter() - start
        if args.check:
            problems = out_of_sync(text)
            if not problems:
                problems = compare(nbformat.read(target, as_version=4), fresh)
            failures += bool(problems)
            status = "would change:\n" + "\n".join(problems) if problems else "unchanged"
            print(f"{name}: {elapsed:.1f} s, {status}", flush=True)
        else:
            nbformat.write(fresh, target)
            print(f"{name}: {elapsed:.1f} s", flush=True)
    if args.check:
        print(f"{len(texts) - failures} of {len(texts)} notebooks reproduce their stored text outputs")
    else:
        stored = [nbformat.read(path, as_version=4) for path in sorted((ROOT / "book").glob("*.ipynb"))]
        for kind, (kept, lacking) in gather_twins(TWINS, stored).items():
            print(f"Chinese twins of the {kind}: {kept}, {lacking} stored images without one")
        for folder in (TWINS, ROOT / "locales" / "en"):  # the figures a phone shows drawn narrower
            kept, _ = gather_twins(folder, stored, kinds=(PHONE,))[PHONE]
            print(f"phone renderings in {folder.relative_to(ROOT)}: {kept}")
        if MISSING_LOG.exists():
            print(f"strings no phrasebook translates: {MISSING_LOG.relative_to(ROOT)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
