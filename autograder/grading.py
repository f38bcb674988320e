"""Grade a submission: for each exercise, make inputs here, run the learner in a worker, judge here.

``grade_submission(path, exercise_ids=None, quick=False)`` returns the result dict that report.py
renders and writes. It raises only SubmissionError (unusable input); anything that goes wrong while
grading one exercise is that exercise's feedback.
"""
from __future__ import annotations

import math
import os
import tempfile
import traceback
from pathlib import Path

import torch

from autograder import correctness, legality, specs, timing
from autograder.isolation import plain_error, run_worker
from autograder.specs.base import fresh_seed
from autograder.submission import Submission, SubmissionError, load


def default_timeout(spec) -> float:
    env = os.environ.get("AUTOGRADER_TIMEOUT")
    return float(env) if env else spec.timeout_s


def select_exercises(sub: Submission, exercise_ids) -> list:
    if exercise_ids:
        try:
            return [specs.get(i) for i in exercise_ids]
        except KeyError as exc:
            raise SubmissionError(str(exc.args[0])) from None
    stem = sub.path.stem
    chosen = specs.for_notebook(stem) if sub.kind == "notebook" else []
    if not chosen:
        chosen = [e for e in specs.EXERCISES.values() if e.entry in sub.defined]
    if not chosen:
        raise SubmissionError(f"{sub.path.name} defines none of the graded entry points "
                              f"({', '.join(e.entry for e in specs.EXERCISES.values())}); use --exercise ID")
    return chosen


def grade_submission(path, exercise_ids=None, quick: bool | None = None, timeout: float | None = None,
                     progress: bool = False) -> dict:
    sub = load(path) if not isinstance(path, Submission) else path
    chosen = select_exercises(sub, exercise_ids)
    if quick is None:
        quick = os.environ.get("AUTOGRADER_QUICK", "") not in ("", "0")
    import course

    results = []
    iterator = chosen
    if progress:
        from tqdm.auto import tqdm

        iterator = tqdm(chosen, desc="grading", unit="exercise", leave=False)
    with tempfile.TemporaryDirectory(prefix="autograder-") as tmp:
        source_file = sub.write(Path(tmp))
        for spec in iterator:
            workdir = Path(tmp) / spec.id
            workdir.mkdir()
            try:
                results.append(grade_exercise(spec, sub, source_file, workdir, quick,
                                              timeout if timeout is not None else default_timeout(spec)))
            except Exception as exc:  # noqa: BLE001  (a grader bug costs this exercise, loudly)
                results.append(_result(spec, correct=False, perf=None, perf_credit=0.0, violations=[],
                                       feedback=[f"internal grader error: {type(exc).__name__}: {exc}",
                                                 traceback.format_exc(limit=3)], cases=[]))
    return {"submission": str(sub.path), "device": course.describe(), "exercises": results,
            "total": round(sum(r["score"] * r["points"] for r in results), 6),
            "max_total": sum(r["points"] for r in results)}


def _result(spec, correct, perf, perf_credit, violations, feedback, cases) -> dict:
    earned = (spec.correctness_points if correct else 0.0) + (spec.performance_points * perf_credit if correct else 0.0)
    return {"id": spec.id, "score": earned / spec.points if spec.points else 0.0, "points": spec.points,
            "correct": bool(correct), "performance": perf, "violations": violations, "feedback": feedback,
            "cases": cases}


def _to_device(args):
    import course

    return tuple(a.to(course.DEVICE) if isinstance(a, torch.Tensor) else a for a in args)


def make_plan(spec, quick: bool, seed: int):
    """Fresh cases: inputs A and B (same shapes) per case, with references computed here."""
    gen = torch.Generator().manual_seed(seed)
    plan = []
    for case in spec.cases(quick):
        a, b = case.build(gen), case.build(gen)
        plan.append((case, a, b, reference(spec, case, a), reference(spec, case, b)))
    return plan


def reference(spec, case, args):
    if spec.reference is None:
        return case.expected
    from autograder.probes import materialize

    with torch.no_grad():
        return spec.reference(*materialize(_to_device(args)))


def intermediate_limit(spec, args) -> int | None:
    """The most elements one operator may produce for these arguments (None: the exercise sets no limit)."""
    limit = spec.rules.max_intermediate
    return limit(args) if limit is not None else None


def judge_call(spec, case, args, ref, entry) -> tuple[bool, float | None, str]:
    if not entry["ok"]:
        special = plain_error(entry["error"] or "")
        return False, None, f"{special}: " * bool(special) + f"raised {entry['error']}"
    out = entry["output"]
    if not spec.judged_on_tensors:
        ok, err, msg = spec.judge(out, ref)
    else:
        ok, err, msg = correctness.compare_outputs(out, ref, correctness.expected_dtypes(args, ref, spec), spec, case)
    if ok and spec.check_inputs:
        for i, (before, after) in enumerate(zip(args, entry["inputs_after"])):
            if not correctness.same_values(before, after):
                return False, err, f"modified its input argument {i} (inputs must come back unchanged)"
    return ok, err, msg


def grade_exercise(spec, sub: Submission, source_file: Path, workdir: Path, quick: bool, timeout_s: float) -> dict:
    import course

    seed = fresh_seed()
    plan = make_plan(spec, quick, seed)
    want_time, why_not = timing.should_time(course.ON_GPU, spec.performance)
    after = plan[-1][0].build(torch.Generator().manual_seed(seed + 1)) if want_time else None
    job = {"exercise": spec.id, "entry": spec.entry, "source_file": str(source_file),
           "submission_dir": str(sub.path.parent), "seed": seed, "time": want_time,
           # poison fresh memory for tensor exercises; probes measured by the learner must run unaltered
           "poison": spec.judged_on_tensors,
           "cases": [{"a": a, "b": b} for _, a, b, _, _ in plan], "after": after,
           "check_seed": (seed + 2) if want_time else None}
    if spec.entry not in sub.defined:
        return _result(spec, False, _perf_placeholder(spec), 0.0, [],
                       [f"{spec.entry}() is not defined in the submission (expected {spec.signature})"], [])
    run = run_worker(job, workdir, timeout_s, cwd=str(sub.path.parent))
    feedback = []
    if run.output_bytes > 1 << 20:
        feedback.append(f"printed {run.output_bytes / 1e6:.1f} MB of output; the grader kept only the first "
                        "and last few KB (printing in a graded function slows it down)")
    if run.problem:
        return _result(spec, False, _perf_placeholder(spec), 0.0, [], [run.problem] + _tail(run), [])
    res = run.result
    if res["status"] != "ok":
        msg = res["error"] or res["status"]
        special = plain_error(msg)
        violations = [legality.judge(spec, [], [], True, sub.where)[0]] if res.get("kernels_ref") else []
        text = (f"running the submission's code failed: {_where(msg, sub)}" if res["status"] == "import_error"
                else f"{_where(msg, sub)} (expected {spec.signature})")
        return _result(spec, False, _perf_placeholder(spec), 0.0, violations,
                       [special or text] + feedback, [])

    cases, all_ok, first_fail = [], True, None
    ops, launches, largest = [], [], []
    for (case, a, b, ref_a, ref_b), (call_a, call_b) in zip(plan, res["calls"]):
        shape, dtype = correctness.describe_tensor_args(a)
        ok_a, err_a, msg_a = judge_call(spec, case, a, ref_a, call_a)
        ok_b, err_b, msg_b = judge_call(spec, case, b, ref_b, call_b)
        if ok_a and not ok_b and not msg_b.startswith(("raised", "modified")):
            msg_b = ("wrong on the second call, after the inputs were re-filled in place with new values: "
                     "a result from an earlier call (cached by pointer or shape?) is returned. " + msg_b)
        ok = ok_a and ok_b
        errs = [e for e in (err_a, err_b) if e is not None]
        cases.append({"case": case.name, "shape": shape, "dtype": dtype,
                      "max_error": max(errs) if errs else None, "verdict": "ok" if ok else "FAIL"})
        for call, args in ((call_a, a), (call_b, b)):
            ops.extend(call["ops"])
            largest.append((*call.get("largest", (0, None, None)), intermediate_limit(spec, args)))
            if call["ok"]:  # a call that raised (out of memory, say) launched nothing worth judging
                launches.append(call["launches"])
        if not ok:
            all_ok = False
            if first_fail is None:
                first_fail = (case, _where(msg_a or msg_b, sub))
    violations = legality.judge(spec, ops, launches, res["kernels_ref"], sub.where, largest)
    if first_fail:
        case, msg = first_fail
        feedback.append(f"first failure: {case.name}: {msg}")
        hint = correctness.hint_for(case, msg)
        if hint:
            feedback.append(f"hint: {hint}")
    correct = all_ok and not violations
    if violations:
        feedback.append("correctness points withheld: the submission breaks the exercise's rules (violations above)")

    perf, credit = _perf_placeholder(spec), 0.0
    if spec.performance is not None and not want_time:
        feedback.append(f"{why_not} (0 of {spec.performance_points:g} performance points)")
    elif want_time and correct:
        perf, credit, timed_ok = _judge_performance(spec, res, seed + 2, feedback, sub)
        if not timed_ok:
            correct = False
        if res.get("after") is not None:
            ok, _, msg = judge_call(spec, plan[-1][0], after, reference(spec, plan[-1][0], after), res["after"])
            if not ok:
                correct, credit = False, 0.0
                feedback.append(f"wrong after timing, on re-filled inputs: {msg}")
    elif want_time:
        feedback.append("performance not timed: the output must be correct first")
    return _result(spec, correct, perf, credit, violations, feedback, cases)


def _judge_performance(spec, res, check_seed, feedback, sub):
    """(performance entry, credit, whether the checked timed call was right)."""
    measured = res.get("perf") or {}
    if "error" in measured:
        feedback.append(f"timing failed: {_where(measured['error'], sub)}")
        return _perf_placeholder(spec), 0.0, True
    ok, msg = _judge_timed_output(spec, measured, check_seed)
    if not ok:
        feedback.append("wrong in a timed call (the timed inputs re-filled in place with new values): "
                        f"{msg}. A result cached by pointer or shape, work left for a later call, or "
                        "memory returned unwritten: the time does not count and correctness is withdrawn")
        return _perf_placeholder(spec), 0.0, False
    peaks = timing.get_peaks()
    perf = timing.performance_entry(spec.performance, measured["time_ms"], measured["baseline_ms"],
                                    measured["nbytes"], measured["flops"], peaks)
    credit = timing.performance_credit(perf["speedup"], spec.performance.threshold, spec.performance.floor)
    if credit < 1.0:
        feedback.append(f"performance: speedup {perf['speedup']:.2f} vs {spec.performance.baseline_name}; "
                        f"full credit from {spec.performance.threshold:g}, none below {spec.performance.floor:g}")
    return perf, credit, True


def _judge_timed_output(spec, measured, check_seed) -> tuple[bool, str]:
    """The checked timed call's output against the reference on the same inputs, re-made here."""
    import course

    if not spec.judged_on_tensors or spec.reference is None:
        return True, ""  # not a tensor exercise: nothing a cache could fake
    if "checked_output" not in measured:
        return False, "the timed call's output did not come back"
    args = spec.performance.inputs(torch.Generator().manual_seed(check_seed), course.DEVICE)
    with torch.no_grad():
        ref = spec.reference(*args)
    ok, _, msg = correctness.compare_outputs(measured["checked_output"], ref,
                                             correctness.expected_dtypes(args, ref, spec), spec)
    return ok, msg


def _perf_placeholder(spec):
    return timing.not_graded_entry(spec.performance) if spec.performance is not None else None


def _where(msg: str, sub: Submission) -> str:
    """Turn the worker's '[line N]' into 'cell 7, line 3' for notebooks."""
    import re

    return re.sub(r"\[line (\d+)\]", lambda m: f"(at {sub.where(int(m.group(1)))})", msg or "")


def _tail(run) -> list:
    out = run.output.strip()
    return [f"last output: {out[-600:]}"] if out else []
