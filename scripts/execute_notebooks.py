"""Execute chapter notebooks on the CPU and store their outputs (and widget state) in place.

Usage: python scripts/execute_notebooks.py [NOTEBOOK ...]   (default: every book/*.ipynb)

nbval later re-runs each notebook and compares with what this stored, so the book shows
exactly what was checked. Running it twice in a row changes no text output.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]


def execute(path: Path, timeout: int = 600) -> float:
    nb = nbformat.read(path, as_version=4)
    env_device = os.environ.get("MHA_DEVICE")
    os.environ["MHA_DEVICE"] = "cpu"  # stored outputs are always generated on the CPU
    os.environ.setdefault("TQDM_DISABLE", "1")
    try:
        start = time.perf_counter()
        client = NotebookClient(nb, timeout=timeout, kernel_name="python3", store_widget_state=True,
                                resources={"metadata": {"path": str(path.parent)}})
        client.execute()
        elapsed = time.perf_counter() - start
    finally:
        if env_device is None:
            os.environ.pop("MHA_DEVICE", None)
        else:
            os.environ["MHA_DEVICE"] = env_device
    for cell in nb.cells:  # execution counts and timing metadata only add noise to diffs
        cell.get("metadata", {}).pop("execution", None)
    nbformat.write(nb, path)
    return elapsed


def main(argv: list[str]) -> int:
    paths = [Path(p) for p in argv] or sorted((ROOT / "book").glob("*.ipynb"))
    for path in paths:
        print(f"{path.relative_to(ROOT) if path.is_absolute() else path}: {execute(path.resolve()):.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
