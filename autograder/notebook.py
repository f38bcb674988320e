"""``check(id, fn)``: instant feedback in the learner's own notebook process.

Runs the exercise's public cases on fn (fresh random inputs, the same judging as the grader: float64
reference, dtype/shape, NaN, unmodified inputs, a second call on re-filled inputs, the allowed torch
operators and the Triton launch count), prints a table (case, shape, dtype, max error, verdict) and a
hint on the first failure, times the kernel against its baseline on a GPU, and returns True/False.
Inside a grading worker (AUTOGRADER_WORKER=1) it does nothing and returns True: the worker grades.

It is feedback, not a grade: it runs in the learner's process, so only the isolated grader is trusted.
"""
from __future__ import annotations

import os

import torch


def check(exercise_id: str, fn, quick: bool = False, show: bool = True) -> bool:
    if os.environ.get("AUTOGRADER_WORKER") == "1":
        return True
    import course
    import torch.utils.deterministic

    from autograder import correctness, legality, specs, timing
    from autograder.grading import intermediate_limit, judge_call, make_plan
    from autograder.probes import materialize
    from autograder.specs.base import fresh_seed
    from autograder.worker import ship

    spec = specs.get(exercise_id)
    legality.install_launch_counter()
    plan = [p for p in make_plan(spec, quick, fresh_seed()) if p[0].public]
    rows, ops, launches, largest, first_fail = [], [], [], [], None
    saved = (torch.are_deterministic_algorithms_enabled(), torch.utils.deterministic.fill_uninitialized_memory)
    if spec.judged_on_tensors:  # as in the worker: probes the learner measures (02's profilers) run unaltered
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.utils.deterministic.fill_uninitialized_memory = True  # outputs never written read as NaN
    try:
        for case, a, b, ref_a, ref_b in plan:
            verdicts, errs, msg = [], [], ""
            args = tuple(x.to(course.DEVICE) if isinstance(x, torch.Tensor) else x for x in materialize(a))
            for inputs, ref in ((a, ref_a), (b, ref_b)):
                if inputs is b:  # same tensors, new values: a cached answer now shows
                    fresh = materialize(b)
                    with torch.no_grad():
                        for x, y in zip(args, fresh):
                            if isinstance(x, torch.Tensor):
                                x.copy_(y)
                    args = tuple(x if isinstance(x, torch.Tensor) else y for x, y in zip(args, fresh))
                rec = legality.OpRecorder(None)
                legality.reset_launches()
                entry = {"ok": True, "error": None}
                try:
                    with rec:
                        entry["output"] = ship(fn(*args))
                    course.synchronize()
                except Exception as exc:  # noqa: BLE001
                    entry.update(ok=False, error=f"{type(exc).__name__}: {exc}")
                entry["inputs_after"] = ship(list(args))
                ops.extend(rec.records())
                largest.append((*rec.largest, intermediate_limit(spec, args)))
                launches.append(legality.launches())
                ok, err, m = judge_call(spec, case, inputs, ref, entry)
                verdicts.append(ok)
                if err is not None:
                    errs.append(err)
                msg = msg or m
            shape, dtype = correctness.describe_tensor_args(a)
            ok = all(verdicts)
            rows.append((case.name, shape, dtype, max(errs) if errs else None, "ok" if ok else "FAIL"))
            if not ok and first_fail is None:
                first_fail = (case, msg)
    finally:
        torch.use_deterministic_algorithms(saved[0], warn_only=True)
        torch.utils.deterministic.fill_uninitialized_memory = saved[1]
    violations = legality.judge(spec, ops, launches, False, lambda line: f"line {line} of your code", largest)
    passed = first_fail is None and not violations
    if show:
        print(f"check({exercise_id!r}): {len(rows)} public cases on {course.describe()}")
        print(f"  {'case':<42} {'shape':>14} {'dtype':>9} {'max error':>10}  verdict")
        for name, shape, dtype, err, verdict in rows:
            e = "-" if err is None else f"{err:.3g}"
            print(f"  {name[:42]:<42} {shape[:14]:>14} {dtype:>9} {e:>10}  {verdict}")
        for v in violations:
            print(f"  violation: {v}")
        if first_fail:
            case, msg = first_fail
            print(f"  first failure: {case.name}: {msg}")
            hint = correctness.hint_for(case, msg)
            if hint:
                print(f"  hint: {hint}")
    if passed and spec.performance is not None and show:
        want, why = timing.should_time(course.ON_GPU, spec.performance)
        if want:
            perf = spec.performance
            args = perf.inputs(torch.Generator().manual_seed(fresh_seed()), course.DEVICE)
            med = timing.time_interleaved({"yours": fn, "baseline": perf.baseline}, args, reps=20)
            entry = timing.performance_entry(perf, med["yours"], med["baseline"], perf.nbytes(args),
                                             perf.flops(args) if perf.flops else None, timing.get_peaks())
            ach = entry["achieved"]
            print(f"  performance: {med['yours']:.4g} ms vs {perf.baseline_name} {med['baseline']:.4g} ms, "
                  f"speedup {entry['speedup']:.2f} (full credit from {perf.threshold:g}); "
                  f"{ach['value']:.4g} {ach['unit']}")
        else:
            print(f"  ({why})")
    if show:
        print("  PASSED" if passed else "  NOT YET: see above")
    return passed
