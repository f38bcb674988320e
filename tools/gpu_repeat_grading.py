"""Calibration from distributions: every solution notebook graded N times by the trusted autograde, each
grading a folder of its own.

    python -m tools.gpu_repeat_grading OUT_DIR [--runs 5] [--assignments 05_layer_norm,08_memory] [--stop-after S]

Grading k of notebook A (k = 1..N) is ``tools/gpu_autograde.py OUT_DIR/run-k/A --assignments A
--solutions-only --no-execute``: the solution graded by ``python -m autograder autograde`` in a scratch
nbgrader course (graded in fresh workers, the speedups timed by the grader's own protocol), the naive
versions timed against the same baselines, and ``run-k/A/calibration.json`` (where A has timed exercises)
plus the outcome ``run-k/A/A-solution.json`` written, each carrying the GPU, driver, versions, date and
method. A notebook whose outcome exists is kept, one cut off is graded again: a call cut off by a time
limit (or stopped by ``--stop-after``, before a grading it could not finish) resumes at the next notebook.
Across calls, carry the folder back in (``REPEAT_FROM`` in ``bash tools/gpu_session.sh repeat-grading``).
``--gpus N`` (N > 1, on a machine of several GPUs) grades N notebooks at once, each grading a process of its
own pinned to one GPU by CUDA_VISIBLE_DEVICES (as batch grading pins its workers), taking the next
(run, notebook) from one queue in run order, so a cut-off call leaves whole runs first; each grading still
times on a GPU that nothing else uses.
In a results/ run folder, tests/test_results.py reads every calibration and holds the slowest grading of
each solution to the 15% rule and the naive version to the floor in every run. Last,
``OUT_DIR/repeat-summary.json`` and a table per exercise: the slowest, median and fastest solution speedup
of the runs, its threshold x 1.15, the fastest naive speedup against the floor, and whether the rules hold.
"""
from __future__ import annotations

import argparse
import json
import os
import queue
import subprocess
import pathlib
import shutil
import statistics
import sys
import threading
import time

from tools import results


def calibration_files(out: pathlib.Path) -> list[pathlib.Path]:
    """Every grading's calibration record: run-k/A/calibration.json (and run-k/calibration.json, where one
    run graded every notebook at once), by run."""
    return sorted(out.glob(f"run-*/**/{results.CALIBRATION_FILE}"),
                  key=lambda p: (int(p.relative_to(out).parts[0].split("-")[1]), str(p)))


def graded(folder: pathlib.Path, assignment: str) -> bool:
    return (folder / f"{assignment}-solution.json").exists()


def distributions(out: pathlib.Path) -> dict:
    """exercise -> {"solution": [speedups], "naive": [speedups], "threshold", "floor"} over the runs."""
    found: dict = {}
    for path in calibration_files(out):
        record = json.loads(path.read_text())
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

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--assignments", default=",".join(nbgrader_config.RELEASED))
    ap.add_argument("--stop-after", type=float, default=None, metavar="S",
                    help="start no grading after S seconds (the longest one so far must still fit)")
    ap.add_argument("--gpus", type=int, default=1, help="grade this many notebooks at once, one per GPU")
    args = ap.parse_args(argv)
    if args.runs < 1 or args.gpus < 1:
        ap.error("--runs and --gpus must be at least 1")
    out = pathlib.Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    jobs = [(k, a) for k in range(1, args.runs + 1) for a in args.assignments.split(",") if a]
    jobs = [(k, a) for k, a in jobs if not graded(out / f"run-{k}" / a, a)]
    grade = _grade_in_process if args.gpus == 1 else _grade_pinned
    _grade_queue(out, jobs, grade, args.gpus, args.stop_after)
    return _summarize(out, args.runs)


def _grade_queue(out: pathlib.Path, jobs, grade, gpus: int, stop_after) -> None:
    """One thread per GPU takes the next (run, notebook) until none is left or the next one could not
    finish before ``stop_after`` seconds (judged by the longest grading so far)."""
    todo: queue.SimpleQueue = queue.SimpleQueue()
    for job in jobs:
        todo.put(job)
    start, longest, lock = time.perf_counter(), [0.0], threading.Lock()

    def work(gpu: int) -> None:
        while True:
            try:
                k, assignment = todo.get_nowait()
            except queue.Empty:
                return
            elapsed = time.perf_counter() - start
            if stop_after is not None and elapsed + longest[0] > stop_after:
                print(f"stopped after {elapsed:.0f} s: run {k}, {assignment} is next", flush=True)
                return
            folder = out / f"run-{k}" / assignment
            shutil.rmtree(folder, ignore_errors=True)  # a grading cut off before its outcome: again, whole
            began = time.perf_counter()
            try:
                grade(folder, assignment, gpu)
                results.outcomes(folder)
            except Exception as err:  # one grading's failure is reported; the others go on
                print(f"run {k} {assignment}: failed: {type(err).__name__}: {err}", flush=True)
                continue
            with lock:
                longest[0] = max(longest[0], time.perf_counter() - began)
            print(f"run {k} {assignment}{f' (GPU {gpu})' if gpus > 1 else ''}: "
                  f"{time.perf_counter() - began:.0f} s", flush=True)

    threads = [threading.Thread(target=work, args=(g,)) for g in range(gpus)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _grade_in_process(folder: pathlib.Path, assignment: str, gpu: int) -> None:
    from tools import gpu_autograde

    gpu_autograde.main([str(folder), "--assignments", assignment, "--solutions-only", "--no-execute"])


def _grade_pinned(folder: pathlib.Path, assignment: str, gpu: int) -> None:
    """The same grading in a process of its own that sees one GPU; its log beside its outcome."""
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "tools.gpu_autograde", str(folder), "--assignments", assignment,
           "--solutions-only", "--no-execute"]
    with open(folder.parent / f"{assignment}.log", "w") as log:
        log.write(results.header({**results.this_machine(),
                                  "method": f"CUDA_VISIBLE_DEVICES={gpu} python " + " ".join(cmd[1:])}))
        log.flush()
        subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT,
                       env={**os.environ, "CUDA_VISIBLE_DEVICES": str(gpu)}, check=False)


def _summarize(out: pathlib.Path, runs: int) -> int:
    found = distributions(out)
    done = {p.relative_to(out).parts[0] for p in out.glob("run-*/**/*-solution.json")}
    results.write_json(out / "repeat-summary.json", {**results.this_machine(), "method": __doc__.split("\n\n")[1],
                                                     "runs": len(done), "exercises": found})
    print(table(found, runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
