"""A synthetic class for batch grading, and its throughput on this machine's GPUs.

    python -m tools.synthetic_class OUT_DIR [--assignments 03_triton_basics,04_fused_softmax]
                                    [--per-worker 4] [--gpus 1,2] [--quick] [--no-execute]

Builds an nbgrader course (in a temporary folder; logs and class reports go to OUT_DIR) from the
course's own solutions: generate_assignment, then submissions that cycle through four kinds of learner:
- ``solution``: the source notebook, every exercise solved;
- ``untouched``: the released notebook as handed out (every exercise raises NotImplementedError);
- ``partial``: the solution with its last exercise wrong (outputs off by 1%);
- ``patcher``: the released notebook plus a cell that replaces ``autograder.nbgrader.grade`` with a
  function returning a hundred times the points (the gradebook must still record 0);
- ``broken`` (only when asked for by name): a file that is not valid JSON.
Then it grades with ``python -m autograder batch`` once per entry of ``--gpus``: N workers (one GPU each,
or CPU workers without a GPU) grade the first N x ``--per-worker`` students (``--force``), so every
run has the same mix of learners and the same work per GPU: perfect scaling keeps the time equal and
multiplies submissions per minute by N. Prints submissions per minute, the recorded points of each
kind of learner, how busy the machine's cores were during each run, and where the grading time went (the
grader's laps, ``autograder.grading.Stopwatch``, summed over the run's exercises).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from tools import results

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("solution", "untouched", "partial", "patcher")

PATCH_CELL = """# Replaces the grading function in this kernel: every hidden cell would claim far more than its points.
import autograder.nbgrader
from autograder import specs as _specs
autograder.nbgrader.grade = lambda exercise_id, *args, **kwargs: 100.0 * _specs.get(exercise_id).points
"""
# What a learner's broken upload looks like: a notebook cut off mid-file (not valid JSON).
BROKEN = '{"cells": [{"cell_type": "code", "source": "def vector_add(x, y):'


CONFIG = """c = get_config()
c.CourseDirectory.root = r'{root}'
c.CourseDirectory.course_id = "synthetic"
c.Execute.timeout = 900
c.Execute.allow_errors = True
c.ExecutePreprocessor.timeout = 900
"""


def _env() -> dict:
    # nbgrader runs alembic by name: the one next to this Python
    return dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
                PYTHONPATH=os.pathsep.join([str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))


def nbgrader(course: Path, *args):
    out = subprocess.run([sys.executable, "-m", "nbgrader", *args, "--log-level=WARN"], cwd=course,
                         capture_output=True, text=True, env=_env(), timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed:\n{out.stdout[-2000:]}{out.stderr[-2000:]}")


def make_course(course: Path, assignments, source_root: Path = ROOT / "solutions") -> Path:
    """An nbgrader course at ``course`` (source/ copied from ``source_root``), assignments generated."""
    course.mkdir(parents=True, exist_ok=True)
    (course / "nbgrader_config.py").write_text(CONFIG.format(root=course))
    for a in assignments:
        shutil.copytree(source_root / a, course / "source" / a, dirs_exist_ok=True)
        nbgrader(course, "generate_assignment", a, "--force")
    return course


def _entries(nb) -> list[str]:
    from autograder import specs
    from autograder.gradebook import _graded_exercise

    ids = [_graded_exercise(c.source) for c in nb.cells
           if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")
           and not c.metadata["nbgrader"].get("solution")]
    return [specs.get(i).entry for i in ids if i]


def learner_notebook(course: Path, assignment: str, kind: str) -> nbformat.NotebookNode | str:
    if kind == "broken":
        return BROKEN
    source = nbformat.read(str(course / "source" / assignment / f"{assignment}.ipynb"), as_version=4)
    release = nbformat.read(str(course / "release" / assignment / f"{assignment}.ipynb"), as_version=4)
    if kind == "solution":
        return source
    if kind == "untouched":
        return release
    if kind == "patcher":
        release.cells.insert(2, nbformat.v4.new_code_cell(PATCH_CELL))
        return release
    if kind == "partial":
        entry = _entries(source)[-1]
        for cell in source.cells:
            if cell.cell_type == "code" and f"def {entry}(" in cell.source:
                cell.source += (f"\n\n_{entry}_right = {entry}\n\ndef {entry}(*args):\n"
                                f"    return _{entry}_right(*args) * 1.01  # 1% off: wrong\n")
                return source
        raise ValueError(f"no cell defines {entry}() in {assignment}")
    raise ValueError(f"unknown kind of learner {kind!r}")


def submit(course: Path, assignment: str, student: str, nb: nbformat.NotebookNode | str,
           timestamp: str | None = "2026-01-01 00:00:00.000000 UTC"):
    """Into submitted/ as ``nbgrader collect`` leaves it (with ``timestamp=None``: copied by hand, no
    timestamp.txt)."""
    folder = course / "submitted" / student / assignment
    folder.mkdir(parents=True, exist_ok=True)
    if isinstance(nb, str):  # a file as uploaded, whatever it holds
        (folder / f"{assignment}.ipynb").write_text(nb)
    else:
        nbformat.write(nb, str(folder / f"{assignment}.ipynb"))
    if timestamp is not None:
        (folder / "timestamp.txt").write_text(timestamp)


def make_class(course: Path, assignments, n_students: int) -> dict[str, str]:
    """{student: kind}; every student submits every assignment."""
    kinds = {f"s{i:02d}_{KINDS[i % len(KINDS)]}": KINDS[i % len(KINDS)] for i in range(n_students)}
    for a in assignments:
        for student, kind in kinds.items():
            submit(course, a, student, learner_notebook(course, a, kind))
    return kinds


def recorded_points(course: Path, assignment: str) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return {s.student.id: s.score for s in gb.assignment_submissions(assignment)}


def cpu_ticks() -> tuple[int, int] | None:
    """(busy, total) jiffies of every core since boot, from /proc/stat (None where there is none)."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def cpu_busy(before, after) -> float | None:
    """The fraction of the machine's cores busy between two ``cpu_ticks`` readings."""
    if not before or not after or after[1] == before[1]:
        return None
    return round((after[0] - before[0]) / (after[1] - before[1]), 3)


def where_time_went(results_dir: Path, students) -> dict[str, float]:
    """Seconds of every grading lap (``autograder.grading.Stopwatch``) summed over the students' exercises,
    largest first: what slows a grading down when more GPUs grade side by side."""
    laps: dict[str, float] = {}
    for s in students:
        try:
            outcome = json.loads((results_dir / f"{s}.json").read_text())
        except (OSError, ValueError):
            continue
        for nb in outcome.get("notebooks", {}).values():
            for ex in nb.get("exercises", []):
                for name, sec in (ex.get("seconds") or {}).items():
                    if isinstance(sec, (int, float)) and name != "total":
                        laps[name] = laps.get(name, 0.0) + sec
    return {k: round(v, 1) for k, v in sorted(laps.items(), key=lambda kv: -kv[1])}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.synthetic_class", description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path)
    p.add_argument("--assignments", default="03_triton_basics,04_fused_softmax")
    p.add_argument("--per-worker", type=int, default=4, help="submissions per worker in each run (default 4: "
                   "one learner of each kind)")
    p.add_argument("--gpus", default="1,2", help="worker counts to measure, comma-separated")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--no-execute", action="store_true")
    p.add_argument("--course", type=Path, help="build the course here (default: a temporary folder)")
    args = p.parse_args(argv)
    assignments = args.assignments.split(",")
    args.out.mkdir(parents=True, exist_ok=True)
    course = (args.course or Path(tempfile.mkdtemp(prefix="synthetic-class-"))).resolve() / "course"
    if course.exists():
        shutil.rmtree(course)
    t0 = time.perf_counter()
    counts = [int(x) for x in args.gpus.split(",")]
    make_course(course, assignments)
    kinds = make_class(course, assignments, max(counts) * args.per_worker)
    print(f"course with {len(kinds)} students x {len(assignments)} assignments built in "
          f"{time.perf_counter() - t0:.0f} s: {course}", flush=True)
    flags = f"{' --quick' * args.quick}{' --no-execute' * args.no_execute}"
    rows = []
    for n in counts:
        students = sorted(kinds)[:n * args.per_worker]
        for a in assignments:
            cmd = [sys.executable, "-m", "autograder", "batch", a, "--course", str(course), "--workers", str(n),
                   "--force", "--report", str(args.out / f"report-{a}-{n}")]
            cmd += [f"--student={s}" for s in students]
            cmd += ["--quick"] * args.quick + ["--no-execute"] * args.no_execute
            t0, ticks = time.perf_counter(), cpu_ticks()
            run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=_env())
            seconds, busy = time.perf_counter() - t0, cpu_busy(ticks, cpu_ticks())
            method = f"python -m autograder batch {a}{flags} on {n} GPU(s), Dask LocalCluster (tools/synthetic_class.py)"
            (args.out / f"batch-{a}-{n}.log").write_text(
                results.header({**results.this_machine(), "method": method}) + run.stdout + run.stderr)
            # the class report's page lays out its CSVs' tables beside its plots: a run keeps the CSVs and plots
            # (every run's pages were one page many times over in results/; one is kept there as a sample)
            (args.out / f"report-{a}-{n}" / "leaderboard.html").unlink(missing_ok=True)
            points = recorded_points(course, a)
            by_kind = {k: sorted({points.get(s) for s in students if kinds[s] == k}, key=str) for k in KINDS}
            where = next((line for line in run.stdout.splitlines() if "submissions graded" in line), "")
            rows.append({"workers": n, "assignment": a, "submissions": len(students), "exit": run.returncode,
                         "seconds": round(seconds, 1), "per_minute": round(60 * len(students) / seconds, 2),
                         "points": by_kind, "cpu_busy": busy, "run": where,
                         "laps": where_time_went(course / "autograder_results" / a, students)})
            print(json.dumps(rows[-1]), flush=True)
    print(f"\n{'workers':>7} {'assignment':<18}{'subs':>5}{'seconds':>9}{'subs/min':>10}{'CPU busy':>9}  points by "
          "kind (solution / untouched / partial / patcher)")
    for r in rows:
        pts = " / ".join(",".join(f"{x:g}" if x is not None else "-" for x in r["points"][k]) for k in KINDS)
        busy = f"{r['cpu_busy']:.0%}" if r["cpu_busy"] is not None else "-"
        print(f"{r['workers']:>7} {r['assignment']:<18}{r['submissions']:>5}{r['seconds']:>9.0f}{r['per_minute']:>10.2f}{busy:>9}  "
              f"{pts}{'' if r['exit'] == 0 else '  (exit ' + str(r['exit']) + ')'}")
    print("\nwhere the grading time went (seconds summed over every exercise graded, largest first):")
    for r in rows:
        laps = ", ".join(f"{k} {v:.0f}" for k, v in list(r["laps"].items())[:6])
        print(f"{r['workers']:>7} {r['assignment']:<18}{laps}")
    method = (f"tools/synthetic_class.py: a synthetic class of {', '.join(assignments)} (solution, untouched, "
              "partially wrong, a learner who patches autograder.nbgrader.grade in a cell) graded by `python -m "
              f"autograder batch{flags}` on an embedded Dask "
              f"LocalCluster with one worker per GPU (CUDA_VISIBLE_DEVICES), {args.per_worker} submissions per GPU; "
              "wall-clock seconds of the whole batch")
    results.write_json(args.out / "throughput.json", {**results.this_machine(), "method": method, "runs": rows})
    return 0 if all(r["exit"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
