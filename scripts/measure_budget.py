"""Time the course against its budget on this machine (the budget is set for a 2-core CPU).

Usage: python scripts/measure_budget.py [--skip-book] [NOTEBOOK ...]

Measures, with MHA_DEVICE=cpu:
  * nbval on each chapter, run alone (budget: <= 60 s per chapter),
  * the whole nbval suite = the sum (budget: < 5 min),
  * the book build, `jupyter-book build --all -W -n --keep-going .` (budget: < 60 s after install).
Each nbval run starts its own kernel, as `make test` does, so kernel start-up is included.
Exit status 1 when a wall-clock budget is exceeded. Timings taken on a loaded machine are
inflated; the CPU seconds printed beside them (process and kernel, all threads) are much less
sensitive to other load and show what a chapter costs on an idle machine.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
CHAPTER_BUDGET_S = 60.0
SUITE_BUDGET_S = 300.0
BOOK_BUDGET_S = 60.0


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(command: list[str]) -> tuple[float, float, int, str]:
    """Wall-clock and CPU seconds (the command and its children, e.g. the kernel) of one command."""
    env = dict(os.environ, MHA_DEVICE="cpu", TQDM_DISABLE="1")
    cpu0, start = _children_cpu(), time.perf_counter()
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - start, _children_cpu() - cpu0
    return wall, cpu, result.returncode, result.stdout[-2000:] + result.stderr[-2000:]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--skip-book", action="store_true", help="do not time the book build")
    args = parser.parse_args(argv)
    notebooks = args.notebooks or sorted((ROOT / "book").glob("*.ipynb"))
    print(f"CPU cores visible: {os.cpu_count()}; load average: {os.getloadavg()[0]:.1f}", flush=True)
    over = []
    total = total_cpu = 0.0
    for path in notebooks:
        seconds, cpu, code, log = timed(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "--nbval",
                "--nbval-current-env",
                "--nbval-sanitize-with",
                "tests/nbval_sanitize.cfg",
                str(path),
            ]
        )
        total += seconds
        total_cpu += cpu
        flag = "" if seconds <= CHAPTER_BUDGET_S else f"  OVER the {CHAPTER_BUDGET_S:.0f} s budget"
        status = "passed" if code == 0 else "FAILED"
        print(f"nbval {path.name:<32} {seconds:6.1f} s wall {cpu:6.1f} s CPU  {status}{flag}", flush=True)
        if seconds > CHAPTER_BUDGET_S:
            over.append(path.name)
        if code != 0:
            print(log)
    flag = "" if total < SUITE_BUDGET_S else f"  OVER the {SUITE_BUDGET_S:.0f} s budget"
    print(f"{'nbval whole suite (sum)':<38} {total:6.1f} s wall {total_cpu:6.1f} s CPU{flag}")
    if total >= SUITE_BUDGET_S:
        over.append("nbval suite")
    if not args.skip_book:
        seconds, cpu, code, log = timed(
            [str(VENV_BIN / "jupyter-book"), "build", "--all", "-W", "-n", "--keep-going", "."]
        )
        flag = "" if seconds < BOOK_BUDGET_S else f"  OVER the {BOOK_BUDGET_S:.0f} s budget"
        print(f"{'book build':<38} {seconds:6.1f} s wall {cpu:6.1f} s CPU  {'passed' if code == 0 else 'FAILED'}{flag}")
        if seconds >= BOOK_BUDGET_S:
            over.append("book build")
        if code != 0:
            print(log)
    print("within budget" if not over else f"over budget: {', '.join(over)}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
