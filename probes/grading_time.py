"""Where one notebook's grading time goes, and what the trusted nbgrader run adds.

    python -m probes.grading_time [NOTEBOOK ...] [--jobs N] [--quick] [--execute] [--json FILE]

For each notebook (default: the solutions of 03 and 04) it measures, in seconds:
- ``start``: a fresh Python that imports what a grading worker imports (torch, triton, course, autograder);
- ``exec``: the submission's graded cells executed in such a process (the rest of its work);
- per exercise: its grading's wall time (worker, cases, judging), the case count, the references
  made in the grading process;
- ``grade``: ``grade_submission`` end to end with ``--jobs`` workers at a time (1 = one after another);
- with ``--execute``: the notebook executed by nbclient as nbgrader autograde does, once with the hidden
  cells grading (the old way, everything graded inside the run) and once with them printing an
  already-computed result (``AUTOGRADER_TRUSTED_RESULT``, the trusted path);
- with ``--end-to-end``: one submission of each notebook (the solution) in a scratch nbgrader course,
  graded by plain ``nbgrader autograde`` (scores from the kernel), by ``python -m autograder autograde``
  (trusted) and by the same with ``--no-execute``.
Prints a table; on the CPU the cases run in the Triton interpreter and nothing is timed on a GPU.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = [ROOT / "solutions" / nb / f"{nb}.ipynb" for nb in ("03_triton_basics", "04_fused_softmax")]
WORKER_IMPORTS = "import course, torch, triton; from autograder import worker, runner; from autograder.specs import get"


def _python(code: str, cwd) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=cwd, check=True, stdout=subprocess.DEVNULL,
                   env=dict(os.environ, AUTOGRADER_WORKER="1"))
    return time.perf_counter() - start


def worker_parts(notebook: Path) -> dict:
    from autograder.submission import load

    sub = load(notebook)
    with tempfile.TemporaryDirectory() as tmp:
        source = sub.write(Path(tmp))
        start = min(_python(WORKER_IMPORTS, notebook.parent) for _ in range(2))
        code = (f"{WORKER_IMPORTS}\nimport types\nm = types.ModuleType('submission')\n"
                f"exec(compile(open({str(source)!r}).read(), {str(source)!r}, 'exec'), m.__dict__)")
        with_exec = _python(code, notebook.parent)
    return {"start": start, "exec": max(with_exec - start, 0.0)}


def timed_grading(notebook: Path, jobs: int | None, quick: bool) -> dict:
    """grade_submission with each exercise (its worker, cases and judging) and its references timed."""
    from autograder import grading, runner

    spent = {}
    grade_exercise, make_plan = grading.grade_exercise, runner.make_plan

    def timed_grade_exercise(spec, *args, **kwargs):
        t0 = time.perf_counter()
        result = grade_exercise(spec, *args, **kwargs)
        spent.setdefault(spec.id, {})["worker"] = time.perf_counter() - t0
        return result

    def timed_make_plan(spec, q, seed):
        t0 = time.perf_counter()
        plan = make_plan(spec, q, seed)
        spent.setdefault(spec.id, {}).update(references=time.perf_counter() - t0, cases=len(plan))
        return plan

    grading.grade_exercise, runner.make_plan = timed_grade_exercise, timed_make_plan
    try:
        t0 = time.perf_counter()
        result = grading.grade_submission(notebook, quick=quick, jobs=jobs)
        total = time.perf_counter() - t0
    finally:
        grading.grade_exercise, runner.make_plan = grade_exercise, make_plan
    return {"grade": total, "exercises": spent, "result": result}


def execute_notebook(notebook: Path, trusted_result: dict | None, quick: bool) -> float:
    """Seconds for nbclient to run the notebook top to bottom (hidden cells included), as nbgrader does."""
    import nbformat
    from nbclient import NotebookClient

    from autograder.gradebook import TRUSTED_RESULT_ENV, plain_json

    nb = nbformat.read(str(notebook), as_version=4)
    env_before = dict(os.environ)
    with tempfile.TemporaryDirectory() as tmp:
        if trusted_result is not None:
            path = Path(tmp) / "trusted.json"
            path.write_text(json.dumps({"notebooks": {notebook.stem: plain_json(trusted_result)}}))
            os.environ[TRUSTED_RESULT_ENV] = str(path)
        if quick:
            os.environ["AUTOGRADER_QUICK"] = "1"
        try:
            t0 = time.perf_counter()
            NotebookClient(nb, timeout=900, allow_errors=True,
                           resources={"metadata": {"path": str(notebook.parent)}}).execute()
            return time.perf_counter() - t0
        finally:
            os.environ.clear()
            os.environ.update(env_before)


def end_to_end(notebook: Path, quick: bool) -> dict:
    """Seconds per submission: plain nbgrader autograde vs the trusted command (with and without a kernel)."""
    import nbformat

    from tools.synthetic_class import _env, make_course, submit

    assignment = notebook.parent.name
    env = dict(_env(), **({"AUTOGRADER_QUICK": "1"} if quick else {}))
    with tempfile.TemporaryDirectory() as tmp:
        course = make_course(Path(tmp) / "course", [assignment], source_root=notebook.parent.parent)
        submit(course, assignment, "solution", nbformat.read(str(notebook), as_version=4))
        runs = {"nbgrader autograde": [sys.executable, "-m", "nbgrader", "autograde", assignment, "--force"],
                "autograder autograde": [sys.executable, "-m", "autograder", "autograde", assignment, "--force"],
                "autograder autograde --no-execute": [sys.executable, "-m", "autograder", "autograde", assignment,
                                                      "--force", "--no-execute"]}
        seconds = {}
        for name, cmd in runs.items():
            t0 = time.perf_counter()
            subprocess.run(cmd, cwd=course, env=env, check=True, capture_output=True)  # quick: by env
            seconds[name] = time.perf_counter() - t0
    return seconds


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m probes.grading_time", description=__doc__.split("\n\n")[0])
    p.add_argument("notebooks", nargs="*", type=Path, default=DEFAULT)
    p.add_argument("--jobs", type=int, action="append", help="workers at a time (repeatable; default 1 and auto)")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--execute", action="store_true", help="also time the notebook's execution by nbclient")
    p.add_argument("--end-to-end", action="store_true", help="also time whole submissions through nbgrader")
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    import course

    jobs_list = args.jobs or [1, None]
    rows = []
    for nb in args.notebooks:
        nb = nb.resolve()
        row = {"notebook": nb.stem, **worker_parts(nb)}
        for jobs in jobs_list:
            g = timed_grading(nb, jobs, args.quick)
            row["grade_jobs_" + str(jobs or "auto")] = g["grade"]
            row["exercises"] = g["exercises"]
            result = g["result"]
        if args.execute:
            row["execute_grading_inside"] = execute_notebook(nb, None, args.quick)
            row["execute_trusted"] = execute_notebook(nb, result, args.quick)
        if args.end_to_end:
            row["end_to_end"] = end_to_end(nb, args.quick)
        rows.append(row)
        print(json.dumps(row, default=lambda x: round(x, 2)), flush=True)
    print(f"\n{course.describe()}, {os.cpu_count()} cores, quick={args.quick}")
    print(f"{'notebook':<18}{'start':>7}{'exec':>7}  {'per exercise: s (cases, refs s)':<52}"
          + "".join(f"{'grade j=' + str(j or 'auto'):>13}" for j in jobs_list)
          + (f"{'nb (old)':>10}{'nb (trusted)':>14}" if args.execute else ""))
    for r in rows:
        ex = ", ".join(f"{k} {v['worker']:.1f} ({v['cases']}, {v.get('references', 0):.1f})" for k, v in r["exercises"].items())
        print(f"{r['notebook']:<18}{r['start']:7.1f}{r['exec']:7.1f}  {ex:<52}"
              + "".join(f"{r['grade_jobs_' + str(j or 'auto')]:13.1f}" for j in jobs_list)
              + (f"{r['execute_grading_inside']:10.1f}{r['execute_trusted']:14.1f}" if args.execute else ""))
    for r in rows:
        for name, secs in r.get("end_to_end", {}).items():
            print(f"{r['notebook']:<18} one submission, {name:<36} {secs:7.1f} s")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
