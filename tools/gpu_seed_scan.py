"""A seed scan: every exercise whose answer is measured or counted, graded again and again from fresh inputs.

    python -m tools.gpu_seed_scan OUT_DIR [--gradings 10] [--exercises peak_memory_bytes,...] [--stop-after S]
                                  [--resume EARLIER/seed-scan.json]

A grade must not depend on the seed its inputs were drawn from. The exercises whose answers are measured on
the machine or counted (00's and 02's, whose ground truth is measured too, and 08's memory exercises, whose
meters read the allocator) are where a seed could matter beyond a tolerance: an allocator that rounds one
case's block up, a kernel count that depends on a shape. Each of them is graded ``--gradings`` times from its
solution notebook by the grader itself (``autograder.grading.grade_submission``: fresh workers, a fresh seed
for every grading, recorded with it: ``autograder.runner.make_plan(spec, quick, seed)`` remakes the cases
built from the seed's generator; 00's and 02's cases draw their numbers afresh and carry them in their names),
one exercise at a time so that nothing runs beside a measurement. Every grading of a solution must get every correctness point.

Writes OUT_DIR/seed-scan.json (the machine's keys, then per exercise each grading's seed, score, correctness
and its failed cases with their messages) as it goes, and prints a table last: exercise, gradings, cases
judged, failures, the first failure. Exits 1 when any grading lost a point. ``--resume`` carries an earlier
call's gradings on the same GPU into this record and grades only what is missing (a call's time limit cuts a
scan of every exercise; ``SEED_FROM`` in ``bash tools/gpu_session.sh seed-scan``). About 4 minutes on an H100 at 10
gradings (each grading starts its workers: ~3 s); a CPU runs the interpreter's sizes.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

from tools import results

ROOT = pathlib.Path(__file__).resolve().parent.parent
# The memory meters' exercises and the measured or counted answers (VALUE exercises); first the one whose
# ground truth once differed between gradings on an H200 (02's live temporaries), so a cut-off scan has it.
SCANNED = ("peak_memory_bytes", "checkpointed_mlp", "linear_cross_entropy", "time_floor", "softmax_bytes",
           "benchmark", "count_kernel_launches", "classify_bound")
METHOD = ("each exercise graded N times from its solution notebook by autograder.grading.grade_submission "
          "(fresh workers and a fresh seed every grading, one exercise at a time)")


def solution_notebook(spec) -> pathlib.Path:
    return ROOT / "solutions" / spec.notebook / f"{spec.notebook}.ipynb"


def failed_cases(ex: dict) -> list[dict]:
    """The rows of the cases that failed, with what was measured against what was expected."""
    keep = ("case", "shape", "dtype", "max_error", "tolerance", "got", "expected", "unit")
    return [{k: c[k] for k in keep if k in c} for c in ex.get("cases", []) if c.get("verdict") != "ok"]


def _said(failure: dict) -> str:
    if "got" in failure:
        return f"got {failure['got']}, expected {failure['expected']}"
    return f"max error {failure.get('max_error')} ({failure.get('tolerance')})"


def grading_row(ex: dict) -> dict:
    """What one grading of one exercise showed: its seed, score, and any case that failed."""
    return {"seed": ex.get("seed"), "score": ex["score"], "correct": ex["correct"],
            "cases": len(ex.get("cases", [])), "failed": failed_cases(ex),
            "violations": ex["violations"], "seconds": ex["seconds"].get("total")}


def resumed(earlier: pathlib.Path | None) -> dict:
    """The gradings an earlier call recorded on this GPU (exercise -> rows), or none."""
    if earlier is None:
        return {}
    record = json.loads(earlier.read_text())
    here = results.this_machine()["gpu"]
    if record.get("gpu") != here:
        raise SystemExit(f"--resume: {earlier} was scanned on {record.get('gpu')}, this machine is {here}")
    return record["exercises"]


def scan(exercise_ids, gradings: int, out: pathlib.Path, stop_after: float | None,
         earlier: pathlib.Path | None = None) -> dict:
    from autograder import specs
    from autograder.grading import grade_submission

    carried = resumed(earlier)
    record = {**results.this_machine(), "method": METHOD, "gradings": gradings,
              "exercises": {ex_id: list(carried.get(ex_id, [])) for ex_id in exercise_ids}}
    if carried:
        record["resumed_from"] = str(earlier)
    started = time.monotonic()
    for ex_id in exercise_ids:
        spec = specs.get(ex_id)
        rows = record["exercises"][ex_id]
        for k in range(len(rows), gradings):
            if stop_after is not None and time.monotonic() - started > stop_after:
                print(f"stopped after {time.monotonic() - started:.0f} s: {ex_id} grading {k + 1} is next")
                record["stopped"] = True
                return record
            (ex,) = grade_submission(solution_notebook(spec), [ex_id], jobs=1)["exercises"]
            rows.append(grading_row(ex))
            results.write_json(out / "seed-scan.json", record)
            print(f"{ex_id} grading {k + 1}: seed {ex.get('seed')}, {ex['score'] * ex['points']:.2f}/{ex['points']}"
                  f"{'' if ex['correct'] else ' NOT CORRECT: ' + '; '.join(r['case'] for r in failed_cases(ex))}",
                  flush=True)
    return record


def table(record: dict) -> str:
    lines = [f"{'exercise':24} {'gradings':>8} {'cases':>6} {'failed':>6}  first failure"]
    for ex_id, rows in record["exercises"].items():
        failures = [f"seed {r['seed']}: {f['case']}: {_said(f)}" for r in rows for f in r["failed"]]
        failures += [f"seed {r['seed']}: {v}" for r in rows for v in r["violations"]]
        lost = sum(1 for r in rows if _lost(r))
        first = failures[0][:120] if failures else ""
        lines.append(f"{ex_id:24} {len(rows):>8} {sum(r['cases'] for r in rows):>6} {lost:>6}  {first}")
    return "\n".join(lines)


def _lost(row: dict) -> bool:
    """A grading below full marks. Performance is not judged here (no VALUE exercise has a timed part; the
    memory exercises' meters are part of their score)."""
    return not row["correct"] or row["score"] < 1.0 - 1e-9


def lost_points(record: dict) -> bool:
    return any(_lost(r) for rows in record["exercises"].values() for r in rows)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=pathlib.Path)
    p.add_argument("--gradings", type=int, default=10)
    p.add_argument("--exercises", default=",".join(SCANNED), help="comma-separated exercise ids")
    p.add_argument("--stop-after", type=float, default=None, help="seconds; no grading starts after them")
    p.add_argument("--resume", type=pathlib.Path, default=None, metavar="SEED_SCAN_JSON",
                   help="an earlier call's seed-scan.json (same GPU): keep its gradings, grade what is missing")
    opts = p.parse_args(argv)
    opts.out.mkdir(parents=True, exist_ok=True)
    record = scan([e for e in opts.exercises.split(",") if e], opts.gradings, opts.out, opts.stop_after, opts.resume)
    results.write_json(opts.out / "seed-scan.json", record)
    print(table(record))
    return 1 if lost_points(record) else 0


if __name__ == "__main__":
    sys.exit(main())
