"""``python -m autograder list`` and ``python -m autograder grade PATH [--exercise ID ...] [--json FILE]``;
``autograde`` and ``batch`` grade a class into nbgrader's gradebook (autograder.batch).

Exit codes: 0 whenever grading ran (whatever the score); 2 with a one-line message for unusable input
(missing file, not a notebook, invalid JSON, syntax error, unknown exercise).
"""
from __future__ import annotations

import argparse
import sys


def _parser():
    p = argparse.ArgumentParser(prog="python -m autograder", description="Grade course notebooks.")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list exercises (id, notebook, points, signature)")
    g = sub.add_parser("grade", help="grade a notebook (.ipynb) or a Python file (.py)")
    g.add_argument("path")
    g.add_argument("--exercise", action="append", metavar="ID", help="grade only this exercise (repeatable)")
    g.add_argument("--json", metavar="FILE", help="also write the results as JSON (atomically)")
    g.add_argument("--quick", action="store_true", help="fewer, smaller cases (for tests)")
    g.add_argument("--timeout", type=float, help="seconds per exercise (default: the exercise's own)")
    from autograder.batch import add_commands

    add_commands(sub)
    return p


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    from autograder import specs

    if args.command == "list":
        print(f"{'id':<24}{'notebook':<22}{'points':>7}  {'(correct. + perf.)':<20}signature")
        for e in specs.EXERCISES.values():
            split = f"({e.correctness_points:g} + {e.performance_points:g})"
            print(f"{e.id:<24}{e.notebook:<22}{e.points:>7g}  {split:<20}{e.signature}")
        return 0
    if args.command in ("autograde", "batch"):
        from autograder import batch

        return batch.main(args)
    from autograder.grading import grade_submission
    from autograder.report import render_text, to_json, write_json_atomic
    from autograder.submission import SubmissionError

    try:
        result = grade_submission(args.path, args.exercise, quick=args.quick or None, timeout=args.timeout,
                                  progress=True)
    except SubmissionError as exc:
        print(f"autograder: {exc}", file=sys.stderr)
        return 2
    print(render_text(result))
    if args.json:
        write_json_atomic(args.json, to_json(result))
    return 0
