"""Run chapters as a learner does: every cell of the notebook as downloaded, in order, in a fresh kernel.

Usage (with the Python of the environment to test, which needs ``mha``, ``nbclient`` and ``ipykernel``):
    python scripts/run_as_learner.py NOTEBOOK...           # Run All; fails on the first error
    python scripts/run_as_learner.py --solve NOTEBOOK...   # first replace every stub by its solution

No output is compared with a stored one: the learner's torch may differ from the one that stored
them (``make test-learner-torch`` runs the chapters a learner can download on the newest torch of the
registry). What must
hold is that no cell raises. With ``--solve``, each cell that holds a ``raise NotImplementedError(
"your code here")`` stub gets the definitions of the solution cell that follows it (folded, opening
with ``# a solution``) (the same
classes and functions, in the same order, bound to the stub's names), as a learner who copied the
solutions would write them, and every checker's verdict must then say "correct".

Prints one line per notebook and exits non-zero when one failed.
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

STUB = 'raise NotImplementedError("your code here")'


def _definitions(source: str) -> list[str]:
    """The names of the functions and classes that a cell defines at its top level, in order."""
    return [
        node.name
        for node in ast.parse(source).body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    ]


def _other_statements(source: str) -> str:
    """The cell's top-level statements that are not definitions (the checker call under a stub)."""
    lines = source.splitlines()
    kept = [
        "\n".join(lines[node.lineno - 1 : node.end_lineno])
        for node in ast.parse(source).body
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    ]
    return "\n".join(kept)


#: What a checker says to a right answer, in each language a notebook may be in.
CORRECT = {"en": "correct", "zh_CN": "正确"}


def is_solution(cell) -> bool:
    """A solution cell: folded in the book (``hide-input``), opening with ``# a solution``."""
    tags = cell.get("metadata", {}).get("tags", [])
    return cell.cell_type == "code" and "hide-input" in tags and cell.source.startswith(("# a solution", "# 参考答案"))


def solve(nb) -> list[int]:
    """Replaces each stub cell of ``nb`` by the definitions of the next solution cell, bound to the
    stub's names, then the stub cell's own checker call. Returns the indices of the solved cells."""
    solved = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or STUB not in cell.source:
            continue
        stubs = _definitions(cell.source)
        solution = next((c for c in nb.cells[i + 1 :] if is_solution(c)), None)
        if solution is None:
            raise SystemExit(f"cell {i}: no solution cell follows the stub(s) {stubs}")
        names = _definitions(solution.source)
        if len(names) != len(stubs):
            raise SystemExit(f"cell {i}: the stubs {stubs} and the solution's {names} do not pair up")
        definitions = "\n".join(
            "\n".join(solution.source.splitlines()[node.lineno - 1 - len(node.decorator_list) : node.end_lineno])
            for node in ast.parse(solution.source).body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        )
        aliases = "\n".join(f"{stub} = {name}" for stub, name in zip(stubs, names))
        cell.source = f"{definitions}\n\n\n{aliases}\n\n{_other_statements(cell.source)}"
        solved.append(i)
    return solved


def verdict_text(cell) -> str:
    return "".join(
        "".join(output.get("data", {}).get("text/plain", ""))
        for output in cell.get("outputs", [])
        if output.get("output_type") == "execute_result"
    )


def run(path: Path, solve_stubs: bool = False, timeout: int = 600) -> list[str]:
    """Runs every cell of the notebook at ``path`` (in its folder). Returns the problems found."""
    nb = nbformat.read(path, as_version=4)
    solved = solve(nb) if solve_stubs else []
    if solve_stubs and not solved:
        return [f"{path.name}: --solve, but the notebook has no stub"]
    client = NotebookClient(
        nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    try:
        client.execute()
    except CellExecutionError as error:
        return [f"{path.name}: a cell raised:\n{str(error)[-3000:]}"]
    problems = []
    # a Chinese notebook's checkers answer in Chinese (its first cell sets the language)
    word = CORRECT.get(nb.metadata.get("language", "en"), "correct")
    for i in solved:
        text = verdict_text(nb.cells[i])
        second = text.splitlines()[1].strip() if len(text.splitlines()) > 1 else ""
        if not second.startswith(word):
            problems.append(f"{path.name}: cell {i}'s checker did not say {word} to the solution:\n{text}")
    return problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--solve", action="store_true", help="replace every stub by its solution first")
    args = parser.parse_args(argv)
    os.environ.setdefault("TQDM_DISABLE", "1")
    failed = 0
    for path in args.notebooks:
        start = time.perf_counter()
        problems = run(path.resolve(), args.solve)
        status = "ok" if not problems else "FAILED"
        print(f"{path.name}{' (solved)' if args.solve else ''}: {status} in {time.perf_counter() - start:.0f} s")
        for problem in problems:
            print(problem)
        failed += bool(problems)
    import torch

    versions = f"torch {torch.__version__}, Python {sys.version.split()[0]}"
    print(f"{len(args.notebooks) - failed} passed, {failed} failed ({versions})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
