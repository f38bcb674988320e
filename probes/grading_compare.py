"""Grading runs side by side: where each notebook's and each exercise's seconds went, run against run.

    python -m probes.grading_compare results/h100-2026-11-26/grading-before results/h100-2026-11-26/grading-after

Each argument is a folder written by ``tools.gpu_autograde`` (its ``autograde.json``; ``bash
tools/gpu_session.sh grading-time`` makes one per setting). Prints, for the solution of every notebook
graded in any of them: the grading process's seconds and the score; then per exercise the parts that
depend on the setting (compiling ahead, cases, the timing) and the speedup the timing measured, so that
a faster setting that moves a verdict shows at once.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

PARTS = ("compiling ahead", "cases", "timing")


def load(folder: Path) -> dict:
    """notebook -> {"seconds": grading seconds, "exercises": {id: seconds dict}} for the solution."""
    rows = json.loads((folder / "autograde.json").read_text())["nbgrader"]
    return {r["assignment"]: {"seconds": (r.get("seconds") or {}).get("grading"),
                              "exercises": r.get("exercise_seconds") or {}}
            for r in rows if r.get("student") == "solution"}


def speedups(folder: Path) -> dict:
    """exercise id -> the solution's measured speedup, from the kept outcome files (``NN_name-solution.json``,
    or the scratch course's ``autograder_results``) where there are any."""
    found = {}
    for path in list(folder.glob("*-solution.json")) + list(folder.glob("course/autograder_results/*/solution.json")):
        for notebook in json.loads(path.read_text()).get("notebooks", {}).values():
            for ex in notebook.get("exercises", []):
                perf = ex.get("performance") or {}
                if perf.get("speedup") is not None:
                    found[ex["id"]] = perf["speedup"]
    return found


def _cell(value, fmt: str = ".1f") -> str:
    return "-" if value is None else format(value, fmt)


def compare(folders: list[Path]) -> str:
    runs = [load(f) for f in folders]
    speeds = [speedups(f) for f in folders]
    names = [f"{f.resolve().parent.name}/{f.name}" for f in folders]
    notebooks = sorted({nb for run in runs for nb in run})
    lines = ["grading seconds (the solution, the grading process's own time)",
             f"{'notebook':24s}" + "".join(f"{n:>32s}" for n in names)]
    for nb in notebooks:
        lines.append(f"{nb:24s}" + "".join(f"{_cell(run.get(nb, {}).get('seconds')):>32s}" for run in runs))
    lines += ["", "per exercise: " + " + ".join(PARTS) + " seconds, and the measured speedup"]
    exercises = sorted({(nb, ex) for run in runs for nb, r in run.items() for ex in r["exercises"]})
    for nb, ex in exercises:
        cells = []
        for run, speed in zip(runs, speeds):
            sec = run.get(nb, {}).get("exercises", {}).get(ex)
            if sec is None:
                cells.append("-")
                continue
            parts = " + ".join(_cell(sec.get(p, 0.0)) for p in PARTS)
            cells.append(f"{parts} ({_cell(speed.get(ex), '.2f')}x)")
        lines.append(f"  {ex:22s}" + "".join(f"{c:>32s}" for c in cells))
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, help="folders holding a tools.gpu_autograde autograde.json")
    args = parser.parse_args(argv)
    missing = [str(f) for f in args.folders if not (f / "autograde.json").exists()]
    if missing:
        print(f"no autograde.json in {', '.join(missing)}", file=sys.stderr)
        return 2
    print(compare(args.folders))
    return 0


if __name__ == "__main__":
    sys.exit(main())
