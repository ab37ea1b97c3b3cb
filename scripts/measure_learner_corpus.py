"""Run the learner corpus (tests/chapters/learner_corpus.py) through the build-it-yourself checkers; measure them.

Usage: python scripts/measure_learner_corpus.py [--step STEP] [--verdicts PATH]

Prints one row per entry: its step, whether it is correct, whether the checker accepted it, and for a
wrong one whether the verdict names the cause (one of the entry's keywords is in the verdict text);
then the totals: correct accepted, wrong rejected, rejections naming the cause. Writes every entry's
verdict text to PATH (default /tmp/corpus_verdicts.txt). Exit status 1 when a correct entry is
refused, a wrong one accepted, or fewer than 90 % of the rejections name the cause.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.chapters.learner_corpus import CORPUS, STEPS, names_cause, run_checker  # noqa: E402

CAUSE_TARGET = 0.90


def measure(entries):
    """``[(entry, verdict)]`` for each entry (warnings left as a learner's notebook shows them)."""
    return [(entry, run_checker(entry)) for entry in entries]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--step", choices=STEPS, help="measure one step only")
    parser.add_argument("--verdicts", default="/tmp/corpus_verdicts.txt", help="where to write the verdict texts")
    args = parser.parse_args(argv)
    entries = [e for e in CORPUS if args.step in (None, e.step)]
    results = measure(entries)

    print(f"{'entry':42} {'step':12} {'label':8} {'checker':9} cause")
    lines = []
    for entry, verdict in results:
        label = "correct" if entry.correct else "wrong"
        got = "accepted" if verdict.ok else "rejected"
        cause = ""
        if not entry.correct and not verdict.ok:
            cause = "named" if names_cause(entry, verdict.text) else "NOT NAMED"
        flag = "" if (verdict.ok == entry.correct and cause != "NOT NAMED") else "  <--"
        print(f"{entry.name:42} {entry.step:12} {label:8} {got:9} {cause}{flag}")
        lines += [f"=== {entry.name} [{entry.step}, {label}, {got}{', ' + cause if cause else ''}]"]
        if entry.slip:
            lines += [f"slip: {entry.slip}", f"causes: {entry.causes}"]
        lines += [verdict.text, ""]
    Path(args.verdicts).write_text("\n".join(lines), encoding="utf-8")

    correct = [v for e, v in results if e.correct]
    wrong = [(e, v) for e, v in results if not e.correct]
    rejected = [(e, v) for e, v in wrong if not v.ok]
    named = [e for e, v in rejected if names_cause(e, v.text)]
    n_ok = sum(v.ok for v in correct)
    share = len(named) / len(rejected) if rejected else 1.0
    print()
    print(f"correct accepted: {n_ok}/{len(correct)}")
    print(f"wrong rejected: {len(rejected)}/{len(wrong)}")
    print(f"rejections naming the cause: {len(named)}/{len(rejected)} ({100 * share:.0f} %)")
    print(f"verdicts written to {args.verdicts}")
    good = n_ok == len(correct) and len(rejected) == len(wrong) and share >= CAUSE_TARGET
    return 0 if good else 1


if __name__ == "__main__":
    raise SystemExit(main())
