"""The nbgrader run of the released notebooks, and the calibration of performance thresholds.

    python -m tools.gpu_autograde OUT_DIR [--assignments 03_triton_basics,04_fused_softmax] [--skip-nbgrader]

1. nbgrader, in a scratch copy of the course: `generate_assignment`, then the trusted autograde
   (`python -m autograder autograde`: graded in fresh workers outside the learner's kernel, recorded in
   nbgrader's gradebook) of two students: `solution` (the source notebook, executed by nbgrader for its
   feedback copy: the whole notebook run at this machine's size) and `untouched` (the released notebook as a
   learner receives it, `--no-execute`). The gradebook is read back per assignment, every error cell of
   the executed solution named, and the seconds each part takes recorded (per exercise: worker start,
   cases, timing; the notebook's execution).
2. Calibration (GPU only): for every exercise with a performance part, the solution's speedup from that
   grading, and the *naive* PyTorch version (what a learner would write before the course) timed against
   the exercise's baseline with the autograder's own timer. A threshold is right when the solution clears it
   by 15% or more and the naive version falls short. With --skip-nbgrader the solution is graded by
   `python -m autograder grade` instead.

Prints a table last and writes OUT_DIR/autograde.json (both parts, as they finish) and, on a GPU,
the calibration record `calibration.json` (--calibration FILE; the format of results/README.md: exercise
-> solution and naive speedups, which tests/test_results.py holds every threshold to). Every JSON file it
writes carries the machine (GPU, driver, versions, date) and the method. On a CPU the calibration says it
needs a GPU and the nbgrader part still runs (small sizes).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import shutil
import subprocess
import sys
import time

import course

from tools import results

ROOT = pathlib.Path(__file__).resolve().parent.parent
MARGIN = results.MARGIN  # the solution must clear its threshold by this factor

CALIBRATION_METHOD = (
    "solution: the solution notebook graded by the trusted autograde in a scratch nbgrader course (the speedup of its "
    "performance part); naive: the spec's naive eager version (Performance.naive in autograder/specs) timed "
    "against the same baseline by the grader's own protocol (autograder.grading.time_against_baseline: "
    "each in its own sandboxed worker, timed from the grading process, fresh values every call, interleaved, "
    "medians less an empty request's); speedup = baseline_ms / ms")
AUTOGRADE_METHOD = CALIBRATION_METHOD + "; nbgrader: generate_assignment and autograde in a scratch course"


def naive_name(fn) -> str:
    """What a naive version is, for the calibration record: its docstring's first line, else where it is."""
    doc = (fn.__doc__ or "").strip()
    return doc.splitlines()[0] if doc else f"{fn.__module__}.{fn.__name__}"


def suggested_threshold(solution_speedup: float, naive_speedup: float) -> float | None:
    """The largest multiple of 0.05 that the solution clears by MARGIN; None if the naive one clears it too."""
    t = math.floor(solution_speedup / MARGIN * 20) / 20
    return t if t > naive_speedup else None


def time_naive(spec) -> dict:
    """The naive version timed against the baseline by the grader's own protocol (each in its own worker,
    timed from this process): {"naive": ms, "baseline": ms}."""
    import tempfile

    from autograder.grading import time_against_baseline
    from autograder.isolation import WorkerSession

    with tempfile.TemporaryDirectory() as tmp:
        job = {"code": "naive", "exercise": spec.id, "poison": False}
        with WorkerSession(job, 600, scratch=str(pathlib.Path(tmp) / "naive")) as worker:
            entry, _credit, _ok, notes = time_against_baseline(worker, spec, 4321)
    if entry is None:  # its timed outputs were wrong (or it raised): say so rather than time it
        raise RuntimeError("; ".join(notes) or "no time")
    return {"naive": entry["time_ms"], "baseline": entry["baseline_ms"]}


def grade_solutions(out: pathlib.Path, assignments: list[str]) -> dict:
    """{exercise id: graded entry} of each solution notebook, by ``python -m autograder grade``."""
    graded = {}
    for nb in assignments:
        report = out / f"solution-{nb}.json"
        report.unlink(missing_ok=True)  # never read a report left by an earlier run
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "autograder", "grade", str(ROOT / "solutions" / nb / f"{nb}.ipynb"),
                        "--json", str(report)], cwd=ROOT, check=False, stdout=subprocess.DEVNULL)
        print(f"graded solution {nb} in {time.perf_counter() - t0:.0f} s", flush=True)
        if report.exists():
            results.stamp(report, {**results.this_machine(), "method": "python -m autograder grade --json"})
            graded.update({e["id"]: e for e in json.loads(report.read_text())["exercises"]})
    return graded


def calibrate(graded: dict, assignments: list[str]) -> list[dict]:
    """One row per timed exercise of ``assignments``: the solution's speedup (``graded``: exercise id ->
    the grader's entry) and the naive version's, timed here."""
    from autograder import specs

    rows = []
    perf_exercises = [e for e in specs.EXERCISES.values() if e.performance is not None and e.notebook in assignments]
    if not course.ON_GPU:
        return [{"id": e.id, "note": "calibration needs a GPU"} for e in perf_exercises]
    for e in perf_exercises:
        perf = e.performance
        if perf.naive is None:
            rows.append({"id": e.id, "note": "the spec names no naive version to calibrate against"})
            continue
        try:
            medians = time_naive(e)
        except Exception as exc:  # noqa: BLE001  (one exercise's failure is its row, the others go on)
            rows.append({"id": e.id, "note": f"naive version not timed: {type(exc).__name__}: {exc}"[:300]})
            continue
        naive_speedup = medians["baseline"] / medians["naive"]
        sol = (graded.get(e.id) or {}).get("performance") or {}
        sol_speedup = sol.get("speedup")
        row = {"id": e.id, "baseline": perf.baseline_name, "threshold": perf.threshold, "floor": perf.floor,
               "naive": naive_name(perf.naive), "naive_ms": medians["naive"], "naive_baseline_ms": medians["baseline"],
               "naive_speedup": naive_speedup,
               "solution_ms": sol.get("time_ms"), "solution_baseline_ms": sol.get("baseline_ms"),
               "solution_speedup": sol_speedup,
               "solution_passed": sol.get("passed"), "solution_correct": (graded.get(e.id) or {}).get("correct")}
        if sol_speedup:
            row["margin"] = sol_speedup / perf.threshold
            row["suggested_threshold"] = suggested_threshold(sol_speedup, naive_speedup)
            row["ok"] = row["margin"] >= MARGIN and naive_speedup < perf.threshold
        rows.append(row)
        print(f"calibrated {e.id}: solution {sol_speedup}, naive {naive_speedup:.3f}", flush=True)
    return rows


def _tools_env() -> dict:
    """This environment with the tools installed beside this Python (nbgrader, alembic) first on PATH."""
    return {**os.environ, "PATH": f"{pathlib.Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def _nbgrader(course_dir: pathlib.Path, *args) -> tuple[int, float, str]:
    env = _tools_env()
    nbgrader = shutil.which("nbgrader", path=env["PATH"]) or "nbgrader"
    t0 = time.perf_counter()
    res = subprocess.run([nbgrader, *args, "--log-level=WARN"], cwd=course_dir, env=env, capture_output=True, text=True)
    return res.returncode, time.perf_counter() - t0, (res.stdout + res.stderr)[-3000:]


def _error_cells(path: pathlib.Path) -> list[str]:
    import nbformat

    if not path.exists():
        return [f"{path.name}: not written"]
    nb = nbformat.read(path, as_version=4)
    found = []
    for i, cell in enumerate(nb.cells):
        for o in cell.get("outputs", []):
            if o.get("output_type") == "error":
                found.append(f"cell {i + 1}: {o.get('ename')}: {str(o.get('evalue'))[:120]}")
    return found


def _trusted_autograde(work: pathlib.Path, assignment: str, student: str, execute: bool) -> tuple[int, float, str]:
    args = ["-m", "autograder", "autograde", assignment, "--course", str(work), "--student", student, "--force"]
    env = _tools_env()
    t0 = time.perf_counter()
    # from the repository root: the scratch course holds a folder `course` (the manifest) that would shadow
    # the real package
    res = subprocess.run([sys.executable, *args] + ([] if execute else ["--no-execute"]), cwd=ROOT, env=env,
                         capture_output=True, text=True)
    return res.returncode, time.perf_counter() - t0, (res.stdout + res.stderr)[-3000:]


def _outcome(work: pathlib.Path, assignment: str, student: str) -> dict:
    path = work / "autograder_results" / assignment / f"{student}.json"
    return json.loads(path.read_text()) if path.exists() else {}


def run_nbgrader(out: pathlib.Path, assignments: list[str], save=lambda rows: None,
                 execute: bool = True, students=("solution", "untouched")) -> tuple[list[dict], dict]:
    """(one row per assignment and student, {exercise id: the solution's graded entry})."""
    from nbgrader.api import Gradebook

    work = out / "course"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    shutil.copy(ROOT / "nbgrader_config.py", work)
    (work / "course").mkdir()
    shutil.copy(ROOT / "course" / "manifest.py", work / "course")  # nbgrader_config.py reads it
    shutil.copytree(ROOT / "solutions", work / "solutions")
    rows, graded = [], {}
    for a in assignments:
        rc, secs, log = _nbgrader(work, "generate_assignment", a, "--force")
        if rc:
            rows.append({"assignment": a, "error": f"generate_assignment failed: {log}"})
            continue
        sources = {"solution": work / "solutions" / a / f"{a}.ipynb", "untouched": work / "notebooks" / a / f"{a}.ipynb"}
        sources = {student: sources[student] for student in students}
        for student, src in sources.items():
            dest = work / "submitted" / student / a
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, dest / f"{a}.ipynb")
            # The solution's notebook is executed (nbgrader's feedback copy: the notebook at this machine's
            # size, top to bottom); the untouched one is only graded.
            rc, secs, log = _trusted_autograde(work, a, student, execute=execute and student == "solution")
            outcome = _outcome(work, a, student)
            exercises = (outcome.get("notebooks", {}).get(a) or {}).get("exercises", [])
            if student == "solution":
                graded.update({e["id"]: e for e in exercises})
            rows.append({"assignment": a, "student": student, "autograde_rc": rc, "autograde_s": round(secs, 1),
                         "seconds": outcome.get("seconds", {}),
                         "exercise_seconds": {e["id"]: e.get("seconds", {}) for e in exercises},
                         "errors": _error_cells(work / "autograded" / student / a / f"{a}.ipynb") if student == "solution" else [],
                         "log": log if rc else ""})
            print(f"autograde {a} {student}: exit {rc} in {secs:.0f} s", flush=True)
            save(rows)
    with Gradebook(f"sqlite:///{work / 'gradebook.db'}") as gb:
        for row in rows:
            if "student" not in row:
                continue
            try:
                sub = gb.find_submission(row["assignment"], row["student"])
                row["score"], row["max_score"] = sub.score, sub.max_score
                row["cells"] = {g.name: g.score for g in gb.find_submission_notebook(
                    row["assignment"], row["assignment"], row["student"]).grades}
            except Exception as exc:  # noqa: BLE001  (a missing submission is reported, not fatal)
                row["score"], row["max_score"], row["error"] = None, None, str(exc)
    return rows, graded


def table(calibration: list[dict], nbgrader_rows: list[dict]) -> str:
    lines = [f"device: {course.describe()}", "", "calibration (speedup = baseline_ms / ms; threshold must be cleared by "
             f"x{MARGIN} by the solution, and missed by the naive version)"]
    lines.append(f"{'exercise':16s} {'baseline':34s} {'solution':>9s} {'naive':>7s} {'threshold':>9s} {'margin':>7s} {'suggest':>8s} ok")
    for r in calibration:
        if "note" in r:
            lines.append(f"{r['id']:16s} {r['note']}")
            continue
        fmt = lambda v, s=".2f": "-" if v is None else format(v, s)  # noqa: E731
        lines.append(f"{r['id']:16s} {r['baseline'][:34]:34s} {fmt(r.get('solution_speedup')):>9s} "
                     f"{fmt(r['naive_speedup']):>7s} {r['threshold']:>9.2f} {fmt(r.get('margin')):>7s} "
                     f"{fmt(r.get('suggested_threshold')):>8s} {r.get('ok', '-')}")
    lines += ["", "nbgrader autograde (gradebook)"]
    lines.append(f"{'assignment':20s} {'student':10s} {'score':>12s} {'seconds':>8s}  errors")
    for r in nbgrader_rows:
        if "student" not in r:
            lines.append(f"{r['assignment']:20s} {r.get('error', '')[:100]}")
            continue
        score = "-" if r.get("score") is None else f"{r['score']:.2f}/{r['max_score']:.0f}"
        lines.append(f"{r['assignment']:20s} {r['student']:10s} {score:>12s} {r['autograde_s']:>8.1f}  "
                     f"{'; '.join(r['errors'])[:150] or ('exit ' + str(r['autograde_rc']) if r['autograde_rc'] else '')}")
    timed = [r for r in nbgrader_rows if r.get("student") == "solution" and r.get("exercise_seconds")]
    if timed:
        # the grader's laps (autograder.grading.Stopwatch) in the order they happen, each with a short heading
        parts = {"cases and references": "refs", "timed inputs and audit": "timed/audit", "worker start": "start",
                 "compiling ahead": "warm before", "cases": "cases", "judging": "judging",
                 "timed workload compiled ahead": "warm timed", "waiting for the GPU": "gpu wait",
                 "timing": "timing", "checked call on the timed workload": "timed check",
                 "null-kernel check": "null check", "total": "total"}
        lines += ["", "grading time of the solutions, seconds (the notebook's whole grading and nbgrader's run last)"]
        lines.append(f"{'exercise':22s} " + " ".join(f"{h:>11s}" for h in parts.values()))
        for r in timed:
            for ex, sec in r["exercise_seconds"].items():
                lines.append(f"{ex:22s} " + " ".join(f"{sec.get(p, 0.0):11.1f}" for p in parts))
                for part in ("cases", "null-kernel check"):
                    by_request = sec.get(f"{part}, by request") or {}
                    where = sec.get(f"{part}, where run") or {}  # the cases shared out with the warmers
                    if by_request:
                        lines.append(f"{'':22s} {part} by request: "
                                     + ", ".join(f"{op} {s:.1f}" for op, s in by_request.items())
                                     + "".join(f"; {n} run by the {who}" for who, n in where.items()))
            whole = r.get("seconds", {})
            lines.append(f"{r['assignment']:22s} grading {whole.get('grading', 0):.1f} s, nbgrader (executing "
                         f"the notebook) {whole.get('nbgrader', 0):.1f} s")
    return "\n".join(lines)


def main(argv=None) -> int:
    import nbgrader_config

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--assignments", default=",".join(nbgrader_config.RELEASED))
    ap.add_argument("--skip-nbgrader", action="store_true")
    ap.add_argument("--skip-calibration", action="store_true")
    ap.add_argument("--naive-only", action="store_true",
                    help="with --skip-nbgrader: time the naive versions only (the solutions' speedups come from "
                         "another run's grading)")
    ap.add_argument("--no-execute", dest="execute", action="store_false",
                    help="grade the solution without nbgrader executing it (calibration only: much faster)")
    ap.add_argument("--solutions-only", action="store_true",
                    help="grade the solutions alone (not the untouched release): for timing the grader")
    ap.add_argument("--calibration", metavar="FILE", help="where the calibration record goes "
                    "(default OUT/calibration.json; a run folder of results/ keeps it at its top)")
    args = ap.parse_args(argv)
    out = pathlib.Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    assignments = [a for a in args.assignments.split(",") if a]
    meta = results.this_machine()
    result = {**meta, "method": AUTOGRADE_METHOD, "device": course.describe(), "calibration": [], "nbgrader": []}

    def save(**parts):  # after every step, atomically: a run cut off by a time limit keeps what it finished
        result.update(parts)
        results.write_json(out / "autograde.json", result)

    nbgrader_rows, graded = ([], {}) if args.skip_nbgrader else run_nbgrader(
        out, assignments, lambda rows: save(nbgrader=rows), execute=args.execute,
        students=("solution",) if args.solutions_only else ("solution", "untouched"))
    save(nbgrader=nbgrader_rows)
    if args.skip_nbgrader and course.ON_GPU and not args.skip_calibration and not args.naive_only:
        graded = grade_solutions(out, assignments)
    calibration = [] if args.skip_calibration else calibrate(graded, assignments)
    save(calibration=calibration)
    if course.ON_GPU and calibration:
        from autograder.timing import PROTOCOL

        record = results.calibration_record(calibration, {**meta, "method": CALIBRATION_METHOD}, protocol=PROTOCOL)
        results.write_json(pathlib.Path(args.calibration or out / results.CALIBRATION_FILE), record)
    print(table(calibration, nbgrader_rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
