"""Where an exercise's graded cases spend their time once its kernels are compiled.

    python -m probes.profile_cases layer_norm_fwd flash_attention_fwd [--top 25]

For each exercise: the solution notebook's code is loaded as a worker loads a submission, and the grader's
plan (full cases, one seed) runs through ``runner.run_cases`` three times: in a process of its own (it
compiles every kernel into Triton's cache), then in a new process under cProfile (the graded worker after
the warmers: a process that has loaded nothing, a cache that holds everything), then again in that process
(every kernel loaded: what is left is the calls and the grader's own requests). Printed for the last two:
seconds per kind of request and the slowest cases; for the new process, the functions with the most
cumulative time. In-process: the socket's part of ``ship`` is not in these numbers.
"""
from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Imported here (course first, through autograder: the device before any kernel is defined): once the
# solution is loaded, this process is a worker, and its import hook refuses autograder.
from autograder import runner, runtime_audit
from autograder.notebook import InProcessSession
from autograder.specs import get

ROOT = Path(__file__).resolve().parent.parent


def load_solution(spec):
    """The entry point of the exercise's solution notebook, loaded like a worker loads a submission."""
    from autograder import protocol, submission
    from autograder.grading import submission_job
    from autograder.worker import load_entry

    sub = submission.load(ROOT / "solutions" / spec.notebook / f"{spec.notebook}.ipynb")
    workdir = Path(tempfile.mkdtemp(prefix="profile-cases-"))
    source_file = sub.write(workdir)
    fn, ready = load_entry(submission_job(spec, sub, source_file))  # the job a grading worker gets
    if ready.status != "ok":
        raise SystemExit(f"{spec.id}: the solution did not load: {protocol.to_wire(ready)}")
    return fn, str(source_file)


def run_plan(session, plan) -> list[float]:
    """Seconds of each case (load, call, ship, refill, call, ship), timed through ``runner.run_cases``."""
    starts = []
    runner.run_cases(session, plan, on_case=lambda k: starts.append(time.perf_counter()))
    ends = starts[1:] + [time.perf_counter()]
    return [end - start for start, end in zip(starts, ends)]


def measured_pass(exercise_id: str, seed: int, top: int | None, label: str, session=None, plan=None):
    """One run of the plan, timed by request and by case (under cProfile when ``top``); the session (the
    worker in this process, its requests through the wire format as over a socket) and the plan. The plan,
    the grader's part (its references import kernels_ref), is made before the solution is loaded: the
    process is a worker from then on, where code the audit did not read may not be imported."""
    spec = get(exercise_id)
    if plan is None:
        plan = runner.make_plan(spec, quick=False, seed=seed)
    if session is None:
        start = time.perf_counter()
        fn, source_file = load_solution(spec)
        session = InProcessSession(fn, spec.judged_on_tensors, spec.timeout_s, spec.harness, source_file)
        print(f"\n== {exercise_id}, {label}: the notebook's code loaded in {time.perf_counter() - start:.2f} s")
    clock = runner.RequestClock(session)
    prof = cProfile.Profile()
    modules_before = set(sys.modules)
    with _profiler_allowed():
        if top:
            prof.enable()
    per_case = run_plan(clock, plan)
    with _profiler_allowed():
        prof.disable()
    print(f"== {exercise_id}, {label}: {len(plan)} cases in {sum(per_case):.2f} s; by request: "
          + ", ".join(f"{k} {v:.2f}" for k, v in clock.seconds.items()))
    slowest = sorted(zip(per_case, (p.case.name for p in plan)), reverse=True)[:6]
    print("   slowest cases:", "; ".join(f"{name} {s * 1e3:.0f} ms" for s, name in slowest))
    imported = sorted(set(sys.modules) - modules_before)
    if imported:
        print(f"   modules first imported by the cases: {imported_summary(imported)}")
    if top:
        for order in ("cumulative", "tottime"):
            text = io.StringIO()
            with _profiler_allowed():  # pstats turns the profiler off again
                pstats.Stats(prof, stream=text).sort_stats(order).print_stats(top)
            lines = text.getvalue().splitlines()
            start = next((i for i, line in enumerate(lines) if "ncalls" in line), 0)
            print(f"   by {order}:\n" + "\n".join(line[:150] for line in lines[start:] if line.strip()))
    return session


@contextlib.contextmanager
def _profiler_allowed():
    """The worker's audit hook (installed once the solution is loaded) refuses a profile function that code
    outside the grader installs, as it would a learner's: this probe's own profiler is turned on and off with
    the hook looking away."""
    hook = runtime_audit.HOOK
    if hook is None:
        yield
        return
    hook.busy.on = True
    try:
        yield
    finally:
        hook.busy.on = False


def imported_summary(names: list[str]) -> str:
    """'package: N modules (M without a cached .pyc), ...': what a new process imports at its first call
    (a module without bytecode in its __pycache__ is compiled from source in every new process)."""
    import importlib.util

    by_package: dict[str, list[int]] = {}
    for name in names:
        counts = by_package.setdefault(name.split(".")[0], [0, 0])
        counts[0] += 1
        path = getattr(sys.modules.get(name), "__file__", None)
        if path and path.endswith(".py"):
            try:
                cached = Path(importlib.util.cache_from_source(path)).exists()
            except (NotImplementedError, ValueError):
                cached = False
            counts[1] += not cached
    return ", ".join(f"{pkg}: {n} ({bare} without .pyc)" for pkg, (n, bare) in
                     sorted(by_package.items(), key=lambda kv: -kv[1][0]))


def profile(exercise_id: str, top: int) -> None:
    """Each pass in a process of its own: loading the solution makes a process a grading worker, whose audit
    hook refuses to start another process."""
    from autograder.specs.base import fresh_seed

    seed = str(fresh_seed())
    for flag in ("--compile", "--new-process"):
        subprocess.run([sys.executable, "-m", "probes.profile_cases", exercise_id, "--top", str(top), flag, seed],
                       check=False)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("exercises", nargs="+")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--compile", type=int, metavar="SEED",
                        help="(internal) the first pass, which compiles every kernel, with this plan seed")
    parser.add_argument("--new-process", type=int, metavar="SEED",
                        help="(internal) the measured pass in a new process, then again there, with this plan seed")
    args = parser.parse_args(argv)
    os.environ["AUTOGRADER_WORKER"] = "1"  # the notebook's own check() calls do nothing, as in a worker
    for exercise_id in args.exercises:
        if args.compile is not None:
            with measured_pass(exercise_id, args.compile, None, "compiling"):  # restores the worker's switches
                pass
        elif args.new_process is not None:
            plan = runner.make_plan(get(exercise_id), quick=False, seed=args.new_process)
            with measured_pass(exercise_id, args.new_process, args.top,
                               "a new process, kernels in the cache", plan=plan) as session:
                measured_pass(exercise_id, args.new_process, None, "again in that process", session, plan)
        else:
            profile(exercise_id, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
