"""Calibration from distributions: every solution notebook graded N times by the trusted autograde, each
grading a run folder of its own.

    python -m tools.gpu_repeat_grading OUT_DIR [--runs 5] [--assignments 05_layer_norm,08_memory]

Run k (1..N) is ``tools/gpu_autograde.py OUT_DIR/run-k --solutions-only --no-execute``: the solutions graded
by ``python -m autograder autograde`` in a scratch nbgrader course (graded in fresh workers, the speedups
timed by the grader's own protocol), the naive versions timed against the same baselines, and
``run-k/calibration.json`` plus one outcome file per notebook (``run-k/<notebook>-solution.json``) written,
each carrying the GPU, driver, versions, date and method. A run whose calibration.json exists is kept: a
call cut off by a time limit resumes where it stopped. In a results/ run folder (``bash tools/gpu_session.sh
repeat-grading`` puts it in ``repeat/``; alone, ``python -m tools.results index OUT_DIR`` makes OUT_DIR one),
tests/test_results.py reads every run's calibration and holds the slowest grading of each solution to the
15% rule and the naive version to the floor in every run. Last, ``OUT_DIR/repeat-summary.json`` and a table
per exercise:
the slowest, median and fastest solution speedup of the runs, its threshold x 1.15, the fastest naive
speedup against the floor, and whether the rules hold.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time

from tools import results


def run_folders(out: pathlib.Path) -> list[pathlib.Path]:
    return sorted((p for p in out.glob("run-*") if (p / results.CALIBRATION_FILE).exists()),
                  key=lambda p: int(p.name.split("-")[1]))


def distributions(out: pathlib.Path) -> dict:
    """exercise -> {"solution": [speedups], "naive": [speedups], "threshold", "floor"} over the runs."""
    found: dict = {}
    for folder in run_folders(out):
        record = json.loads((folder / results.CALIBRATION_FILE).read_text())
        for ex, row in record["exercises"].items():
            d = found.setdefault(ex, {"solution": [], "naive": [], "threshold": row.get("graded_threshold"),
                                      "floor": row.get("graded_floor")})
            for key in ("solution", "naive"):
                if row.get(f"{key}_speedup") is not None:
                    d[key].append(row[f"{key}_speedup"])
    return found


def table(found: dict, runs: int) -> str:
    lines = [f"{'exercise':24} {'runs':>4} {'slowest':>8} {'median':>8} {'fastest':>8} {'needs':>7} "
             f"{'naive max':>9} {'floor':>6}  verdict"]
    for ex, d in sorted(found.items()):
        sol, naive = d["solution"], d["naive"]
        needs = d["threshold"] * results.MARGIN if d["threshold"] is not None else None
        ok = (len(sol) >= runs and needs is not None and min(sol) >= needs
              and (not naive or d["floor"] is None or max(naive) <= d["floor"]))
        fmt = lambda v: f"{v:.3f}" if v is not None else "-"  # noqa: E731
        lines.append(f"{ex:24} {len(sol):>4} {fmt(min(sol) if sol else None):>8} "
                     f"{fmt(statistics.median(sol) if sol else None):>8} {fmt(max(sol) if sol else None):>8} "
                     f"{fmt(needs):>7} {fmt(max(naive) if naive else None):>9} {fmt(d['floor']):>6}  "
                     f"{'ok' if ok else 'FAILS'}")
    return "\n".join(lines)


def main(argv=None) -> int:
    import nbgrader_config

    from tools import gpu_autograde

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--assignments", default=",".join(nbgrader_config.RELEASED))
    args = ap.parse_args(argv)
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    out = pathlib.Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    for k in range(1, args.runs + 1):
        folder = out / f"run-{k}"
        if (folder / results.CALIBRATION_FILE).exists():
            print(f"run {k}: kept ({folder})")
            continue
        start = time.perf_counter()
        gpu_autograde.main([str(folder), "--assignments", args.assignments, "--solutions-only", "--no-execute"])
        results.outcomes(folder)
        print(f"run {k}: {time.perf_counter() - start:.0f} s")
    found = distributions(out)
    results.write_json(out / "repeat-summary.json", {**results.this_machine(), "method": __doc__.split("\n\n")[1],
                                                     "runs": len(run_folders(out)), "exercises": found})
    print(table(found, args.runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
