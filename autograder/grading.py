"""Grade a submission: for each exercise, make inputs here, run the learner in a worker, judge here.

``grade_submission(path, exercise_ids=None, quick=False)`` returns the result dict that report.py
renders and writes. It raises only SubmissionError (unusable input); anything that goes wrong while
grading one exercise is that exercise's feedback.

Per exercise (``grade_exercise``): the source is audited (``autograder.audit``: what it imports, calls
and touches); a worker process loads it and answers the grading process's requests (``runner``: the
cases, each called twice on the same tensors with new values); outputs are judged here against float64
references; Triton exercises are called once more with their kernels made to do nothing (the outputs must
then change); on a GPU the learner's function and the baseline are timed from this process, by the
protocol of ``measure.timer``, each in its own worker (``time_against_baseline``).
"""
from __future__ import annotations

import contextlib
import os
import random
import statistics
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import torch

from autograder import correctness, protocol, runner, specs, timing, warm
from autograder.imports import encoding_problem
from autograder.isolation import WorkerGone, WorkerSession
from autograder.specs.base import fresh_seed
from autograder.submission import Submission, SubmissionError, left_as_handed_out, load

JUDGED_TIMED_CALLS = 3  # timed calls of the submission whose outputs are checked; which ones is secret
# Calls per timed round trip: the round trip's own cost (~0.1 ms) is subtracted, and a call's launch overlaps
# the previous call's device work as it would in a program (a Python launcher's overhead stays visible only
# where it exceeds the kernel's time).
CALLS_PER_ROUND_TRIP = 4


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
                     progress: bool = False, jobs: int | None = None) -> dict:
    sub = load(path) if not isinstance(path, Submission) else path
    chosen = select_exercises(sub, exercise_ids)
    if quick is None:
        quick = os.environ.get("AUTOGRADER_QUICK", "") not in ("", "0")
    import course

    from autograder import scratch

    with scratch.folder("grading") as tmp:  # swept at the next start if this process is killed
        source_file = sub.write(Path(tmp))

        workers = concurrent_workers(chosen, jobs)
        gate = TimingGate() if workers > 1 else _Alone()
        warmers = warm.warmer_count(workers, cores=jobs)

        def grade_one(spec):
            workdir = Path(tmp) / spec.id
            workdir.mkdir()
            try:
                return grade_exercise(spec, sub, source_file, workdir, quick,
                                      timeout if timeout is not None else default_timeout(spec), gate, warmers)
            except Exception as exc:  # noqa: BLE001  (a grader bug costs this exercise, loudly)
                return _result(spec, False, None, 0.0, [],
                               [f"internal grader error: {type(exc).__name__}: {exc}",
                                traceback.format_exc(limit=3)], [])

        results = _map_exercises(grade_one, chosen, workers, progress)
    return {"submission": str(sub.path), "device": course.describe(), "exercises": results,
            "total": round(sum(r["score"] * r["points"] for r in results), 6),
            "max_total": sum(r["points"] for r in results)}


def concurrent_workers(chosen, jobs: int | None = None) -> int:
    """How many exercise workers may run at once: one per core (``AUTOGRADER_JOBS`` or ``jobs``
    override), no more than there are exercises. Each exercise still gets its own fresh process, and on a
    GPU each timing runs alone (``TimingGate``)."""
    if jobs is None and os.environ.get("AUTOGRADER_JOBS"):
        jobs = int(os.environ["AUTOGRADER_JOBS"])
    return max(1, min(len(chosen), jobs if jobs else (os.cpu_count() or 1)))


class TimingGate:
    """Exercises graded side by side share the machine until one is timed: a timing waits until every
    other exercise has left its shared part (worker start, cases, judging: mostly compiling, on the CPU),
    runs with nothing else started meanwhile, and the next timing waits for it. Exercises not timed never
    wait for each other."""

    def __init__(self):
        import threading

        self._cond = threading.Condition()
        self._sharing = 0
        self._timing = False
        self._waiting = 0

    def share(self) -> None:
        with self._cond:
            while self._timing or self._waiting:  # a waiting timing goes first: it never starves
                self._cond.wait()
            self._sharing += 1

    def time_alone(self) -> float:
        """Leave the shared part and wait for the machine to oneself; the seconds waited."""
        start = time.perf_counter()
        with self._cond:
            self._sharing -= 1
            self._waiting += 1
            self._cond.notify_all()
            while self._timing or self._sharing:
                self._cond.wait()
            self._waiting -= 1
            self._timing = True
        return time.perf_counter() - start

    def leave(self, timed: bool) -> None:
        with self._cond:
            if timed:
                self._timing = False
            else:
                self._sharing -= 1
            self._cond.notify_all()


class _Alone:
    """A gate for one exercise graded by itself: nothing to wait for."""

    def share(self) -> None:
        pass

    def time_alone(self) -> float:
        return 0.0

    def leave(self, timed: bool) -> None:
        pass


def _map_exercises(grade_one, chosen, workers: int, progress: bool) -> list:
    """Results in the order of ``chosen``; the workers (subprocesses) run ``workers`` at a time."""
    from concurrent.futures import ThreadPoolExecutor

    from tqdm.auto import tqdm

    with tqdm(total=len(chosen), desc="grading", unit="exercise", leave=False, disable=not progress) as bar:
        def tick(spec):
            result = grade_one(spec)
            bar.update()
            return result

        if workers == 1:
            return [tick(spec) for spec in chosen]
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(tick, chosen))


def _result(spec, correct, perf, perf_credit, violations, feedback, cases) -> dict:
    earned = (spec.correctness_points + spec.performance_points * perf_credit) if correct else 0.0
    if perf is None and spec.performance is not None:
        perf = timing.not_graded_entry(spec.performance)
    elif perf is None and spec.memory is not None:
        perf = timing.not_graded_entry_memory(spec.memory)
    return {"id": spec.id, "score": earned / spec.points if spec.points else 0.0, "points": spec.points,
            "correct": bool(correct), "performance": perf, "violations": violations, "feedback": feedback,
            "cases": cases}


def submission_job(spec, sub: Submission, source_file: Path) -> dict:
    """What a worker loads: the learner's source file and entry point."""
    from autograder import kernel_source

    audited = {path: text for path, text in sub.helpers.items() if text is not None}
    return {"code": "submission", "exercise": spec.id, "entry": spec.entry, "source_file": str(source_file),
            # the text the audit read: what the worker runs, whatever the file holds by the time it starts
            "source": sub.source,
            "submission_dir": str(sub.path.parent),
            # the files of the modules beside it that it imports, as audited: the only code it may run from there
            "audited": audited,
            # the kernel defs the audit found in each text: what Triton may compile or interpret there
            "kernels": kernel_source.found_by_audit({str(source_file): sub.source, **audited}),
            # Probes the learner measures (00, 02) must behave as in the notebook: no poisoned memory there.
            "poison": spec.judged_on_tensors}


def baseline_job(spec) -> dict:
    return {"code": "baseline", "exercise": spec.id, "poison": False}


def grade_exercise(spec, sub: Submission, source_file: Path, workdir: Path, quick: bool, timeout_s: float,
                   gate=None, warmers: int = 0) -> dict:
    if spec.entry not in sub.defined:
        return _result(spec, False, None, 0.0, [],
                       [f"{spec.entry}() is not defined in the submission (expected {spec.signature})"], [])
    gate = gate or _Alone()
    gate.share()
    phase = {"timed": False}
    if spec.measures_grader:  # its references measure this process: nothing else may run meanwhile
        gate.time_alone()
        phase["timed"] = True
    try:
        return _grade_exercise(spec, sub, source_file, workdir, quick, timeout_s, gate, phase, warmers)
    finally:
        # before leaving the gate: no other exercise's timing runs meanwhile
        release_cached_gpu_memory(sys.exc_info()[1])
        gate.leave(phase["timed"])


def release_cached_gpu_memory(failure: BaseException | None = None) -> None:
    """Hand the GPU memory this process's allocator keeps cached back to the device. A worker's CUDA outputs
    and inputs come back onto this process's GPU (autograder.frames), as large as the graded code made them
    (up to protocol.MAX_FRAME a reply, every case's held until the cases are judged); cached here, they would
    stay reserved, out of reach of every later worker on this GPU: the next exercise's, the next learner's in
    a batch. ``failure``: the exception the exercise is ending with (this process's own out of memory, say),
    whose traceback's frames would hold what came back until it is handled, then give it to the cache."""
    if not torch.cuda.is_initialized():
        return
    if failure is not None:
        traceback.clear_frames(failure.__traceback__)  # the report keeps the lines, not the tensors
    torch.cuda.empty_cache()


def _grade_exercise(spec, sub, source_file, workdir, quick, timeout_s, gate, phase, warmers: int = 0) -> dict:
    import course

    clock = Stopwatch()
    job = submission_job(spec, sub, source_file)
    session = WorkerSession(job, timeout_s, cwd=str(sub.path.parent), scratch=str(workdir)).start()
    # the exercise as handed out: its first call raises, with nothing to compile ahead or to time (a class
    # is full of them: four such learners cost a host's cores the Python starts of a dozen workers)
    undone = left_as_handed_out(sub.source, spec.entry)
    # Triton exercises: workers that compile the cases' kernels side by side first (autograder.warm)
    ahead = (warm.Warmers(job, warmers, timeout_s, str(sub.path.parent), str(workdir)).start()
             if warmers and spec.kind == "triton" and not undone else None)
    # A timed exercise's baseline worker starts beside the submission's (its start overlaps the cases; it
    # only waits, idle, until the timing): nothing of either runs inside the other's timed window.
    baseline = (WorkerSession(baseline_job(spec), timeout_s, scratch=str(workdir) + "-baseline").start()
                if timing.should_time(course.ON_GPU, spec.performance)[0] and not undone else None)
    seed = fresh_seed()
    try:  # made here, on the course's device: where memory may run out, the workers started are stopped
        plan = runner.make_plan(spec, quick, seed)
        clock.lap("cases and references")
        # the timing's inputs, made once for the warmers and the timing (else when the timing loads them)
        timed_args = timed_inputs(spec, seed + 2) if baseline is not None and ahead is not None else None
        if ahead is not None:
            ahead.run(plan, timed_args)
        static = static_violations(spec, sub)
    except BaseException:
        for started in (session, ahead, baseline):
            if started is not None:
                started.close()
        raise
    audit_violations = static.violations
    clock.lap("timed inputs and audit")
    try:
        with session as worker:
            clock.lap("worker start")
            result = _grade_in(worker, spec, sub, plan, seed, static, baseline, clock,
                               # the baseline the timing holds: the early one, else the one it opened itself
                               lambda loaded: _time_alone(gate, phase, worker, loaded.sessions["baseline"], clock),
                               ahead, timed_args)
        result["feedback"] = _output_notes(session) + result["feedback"]  # the whole output, read to the end
    except WorkerGone as gone:
        feedback = [str(gone)] + _output_notes(session) + _last_output(session)
        result = _result(spec, False, None, 0.0, audit_violations, feedback, [])
        result["ended"] = "timed out" if gone.timed_out else "crashed"
    finally:
        if ahead is not None:
            ahead.close()
        if baseline is not None:
            baseline.close()
    result["seconds"] = clock.laps()
    result["seed"] = seed  # runner.make_plan(spec, quick, seed) remakes the cases (tools.gpu_seed_scan)
    return result


class Stopwatch:
    """Where one exercise's grading time goes: named laps in seconds (the report's ``seconds``)."""

    def __init__(self):
        self.start = self.last = time.perf_counter()
        self.parts: dict[str, float] = {}
        self.details: dict[str, dict] = {}  # a part's own breakdown, e.g. the cases' seconds per request

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.parts[name] = round(self.parts.get(name, 0.0) + now - self.last, 3)
        self.last = now

    def laps(self) -> dict:
        return {**self.parts, "total": round(time.perf_counter() - self.start, 3), **self.details}


def _time_alone(gate, phase, worker, baseline, clock) -> None:
    """Wait for the machine to oneself before timing; the wait does not count against the time limit.

    The learner's worker is first made to finish all its GPU work (``prepare`` waits for every stream): it
    then only waits for requests, so nothing it launched earlier (say, a long kernel started at import)
    can run inside another exercise's timed window while this one waits its turn."""
    worker.request({"op": "prepare", "poison": False})
    waited = gate.time_alone()
    phase["timed"] = True
    _give_back(waited, worker, baseline)
    clock.lap("waiting for the GPU")


def _give_back(waited: float, *sessions) -> None:
    """Add the seconds a grading waited (for the machine, for a warmer) to the time limits of the workers that
    idled meanwhile (a session may be None, or a stand-in without a limit)."""
    for session in sessions:
        if session is not None and getattr(session, "deadline", None) is not None:
            session.deadline += waited


def _grade_in(worker, spec, sub, plan, seed, static, baseline=None, clock=None,
              before_timing=lambda loaded: None, ahead=None, timed_args=None) -> dict:
    import course

    clock = clock or Stopwatch()
    if isinstance(static, list):
        static = StaticFindings(static, [])
    audit_violations = static.violations
    feedback = []
    if worker.sandbox_note:
        feedback.append(worker.sandbox_note)
    ready = worker.ready
    violations = list(audit_violations)
    if ready.kernels_ref and not any("kernels_ref" in v for v in violations):
        violations.append("imports kernels_ref (the course's reference kernels): the exercise must be your own code")
    if ready.status != "ok":
        msg = runner.where_msg(ready.error or ready.status, sub.where)
        text = (f"running the submission's code failed: {msg}" if ready.status == "import_error"
                else f"{msg} (expected {spec.signature})")
        from autograder.isolation import plain_error

        return _result(spec, False, None, 0.0, violations, [plain_error(msg) or text] + feedback, [])

    if ahead is not None:  # workers compiling the cases' kernels (autograder.warm)
        ahead.before_cases(worker, clock, worker.timeout_s)
    requests = runner.RequestClock(worker)
    if ahead is not None and ahead.mode == "share":  # the cases shared out with the warmers (autograder.warm)
        runs = ahead.share_cases(requests, worker.deadline)
    else:
        runs = runner.run_cases(requests, plan)
    if ahead is not None:  # none is left running during the timing or the null-kernel check; the one
        ahead.close(but_the_timed_call=True)  # compiling the timed workload's configs finishes first (below)
        if ahead.mode == "share":
            graded = ahead.queue.ran_by.count(warm.GRADED)
            clock.details["cases, where run"] = {"graded worker": graded, "warmers": len(plan) - graded}
    clock.lap("cases")
    clock.details["cases, by request"] = requests.seconds
    verdicts = runner.judge_cases(spec, plan, runs, sub.where)
    clock.lap("judging")
    violations += runner.rule_violations(spec, verdicts, False, sub.where)
    feedback += _failure_feedback(spec, verdicts)
    correct = verdicts.all_ok and not violations

    if correct:
        from autograder import determinism

        repeated = determinism.repeat_check(worker, spec, plan)
        if repeated:
            violations.append(repeated)
            correct = False
    perf, credit = None, 0.0
    if spec.memory is not None and correct:  # memory in place of time: counted, so judged on every device
        perf, credit, lines = runner.judge_memory(spec, verdicts)
        feedback += lines
    elif spec.memory is not None:
        feedback.append("memory not judged: the outputs must be correct first")
    want_time, why_not = timing.should_time(course.ON_GPU, spec.performance)
    if spec.performance is not None and not want_time:
        feedback.append(f"{why_not} (0 of {spec.performance_points:g} performance points)")
    elif want_time and correct:
        loaded = load_timed_inputs(worker, spec, seed + 2, (lambda: baseline) if baseline is not None else None,
                                   base_args=timed_args)
        clock.lap("timing inputs loaded")
        if ahead is not None:  # the warmer autotuning the timed workload, still in the shared part
            _give_back(ahead.finish_timed_call(worker.timeout_s / 4), *loaded.sessions.values())
            clock.lap("timed workload compiled ahead")
        before_timing(loaded)  # (its wait is added to the time limits of both workers the timing holds)
        perf, credit, timed_ok, notes = time_against_baseline(worker, spec, seed + 2, loaded=loaded)
        clock.lap("timing")
        feedback += notes
        violations += timed_shape_violations(worker, spec, loaded, sub.where, perf)
        clock.lap("checked call on the timed workload")
        correct = correct and timed_ok and not violations
    elif want_time:
        feedback.append("performance not timed: the output must be correct first")

    if correct:  # last: after it no call of the learner's code may be trusted to compute anything
        requests = runner.RequestClock(worker)
        null = runner.null_kernel_check(requests, spec, plan)
        clock.lap("null-kernel check")
        clock.details["null-kernel check, by request"] = requests.seconds
        if null:
            violations.append(null)
            correct = False
    feedback += run_time_notes(static, violations, sub.where) + runner.legality.recovered_notes(verdicts.ops, sub.where)
    if violations:
        feedback.append("correctness points withheld: the submission breaks the exercise's rules (violations above)")
    return _result(spec, correct, perf, credit, violations, feedback, verdicts.rows)


# Audit rules judged by what runs: an operator the exercise forbids, written where the graded calls never
# execute it (a branch for other arguments, a debug path), costs nothing and is reported as a note; one that
# runs is seen by the operator recorder (deny by default) and costs the points. A write to the environment
# is judged by the worker's audit hook where it runs: refused (and charged) when it changes a variable.
RUN_TIME_RULES = {"forbidden-call": "no graded call ran it",
                  "environment": "where it ran it changed nothing the grade depends on"}


@dataclass
class StaticFindings:
    violations: list        # cost the points whatever runs
    run_time: list          # (line, message): forbidden where they run; a note where nothing ran them


def timed_shape_violations(worker, spec, loaded, where, perf: dict | None = None) -> list[str]:
    """One recorded call on the timed workload, after the timing: deny by default holds at the timed shape
    too, where a branch taken only for large inputs would otherwise run unseen by the recorder. On a GPU the
    call's kernels are timed on the device too (``timed_work_violation``)."""
    from autograder import legality

    # fresh values of its own, so that its output is judged too: a call that did less than the work (and so
    # set the bar of the timed calls low) is wrong
    seed = random.getrandbits(31)
    worker.request({"op": "jitter", "slot": loaded.slots[0], "seed": seed})
    done = worker.request({"op": "call", "slots": [loaded.slots[0]], "record": True, "device_time": True},
                          reply=protocol.CallDone)
    shipped = worker.request({"op": "ship", "index": 0, "inputs": False}, reply=protocol.Shipped) if done.ok else None
    worker.request({"op": "drop"})
    if not done.ok:
        return [f"the call on the timed workload failed: {runner.where_msg(done.error, where)}"]
    ok, msg = judge_timed_outputs(spec, loaded.base_args, [(seed, done, shipped)])
    if not ok:
        return [f"the recorded call on the timed workload was wrong: {msg}"]
    limit = runner.intermediate_limit(spec, loaded.base_args)
    found = legality.judge(spec, done.ops, [done.launches], False, where, [(*done.largest, limit)])
    if done.measured and done.measured.get("violation"):  # a rule the exercise's harness measures (held bytes)
        found.append(runner.harness_violation(done.measured, where))
    if perf is not None and done.device_ms is not None:
        perf["checked_device_ms"] = done.device_ms  # beside time_ms in the report: how much room the rule left
    if done.device_ms == 0.0 and done.launches:  # kernels ran, none was seen: the grader's profiler was ended
        return found + ["the grader could not time the checked call's kernels on the device (its profiler saw "
                        "none of the kernels the call launched: a profiler of the code's own ends the grader's)"]
    timed = timed_work_violation((perf or {}).get("time_ms"), done.device_ms)
    return found + ([timed] if timed else [])


# A timed call may not take less than this share of the device time of the kernels a checked call on the same
# inputs ran: a timed call is never recorded (the recorder's cost would be timed), and code that told the
# two apart could do the exercise's work with torch in timed calls only. An honest call's time is at least its
# kernels' (launch overheads come on top; the checked call's inputs are as cold or warmer): the margin is for
# noise.
TIMED_SHARE_OF_CHECKED_WORK = 0.75


def timed_work_violation(timed_ms: float | None, checked_device_ms: float | None) -> str | None:
    """The violation when the timed calls took less than TIMED_SHARE_OF_CHECKED_WORK of the device time of
    the checked call's kernels on the same inputs, else None (None where either was not measured)."""
    if not timed_ms or not checked_device_ms or timed_ms >= TIMED_SHARE_OF_CHECKED_WORK * checked_device_ms:
        return None
    return (f"the timed calls took {timed_ms:.3g} ms each, less than the {checked_device_ms:.3g} ms the GPU spent "
            "in the kernels of a checked call on the same inputs: a call must do the same work whether it is "
            "checked or timed (code that tells them apart, by the cost of an operator, a frame or a warning, "
            "gets no points)")


def static_violations(spec, sub: Submission) -> StaticFindings:
    """What the submission's source shows (autograder.audit), each with the learner's line."""
    from autograder import audit, determinism

    found = audit.audit(sub.source, allow=spec.rules.features, forbidden_calls=audit.forbidden_calls_for(spec),
                        entry=spec.entry, kernels_beside=kernels_beside(sub), kernel_library=spec.rules.kernel_library,
                        outside_torch=spec.judged_on_tensors)
    now = [f for f in found if f.rule not in RUN_TIME_RULES]
    later = [(f.line, f"{f.describe(sub.where)} ({RUN_TIME_RULES[f.rule]}") for f in found if f.rule in RUN_TIME_RULES]
    own = encoding_violations(sub.source, sub.where) if sub.kind == "python" else []  # a notebook's cells have none
    return StaticFindings(own + audit.violations(now, sub.where) + helper_violations(spec, sub)
                          + determinism.source_findings(spec, sub.source, sub.where, helper_modules(sub)), later)


def run_time_notes(static: StaticFindings, violations: list[str], where) -> list[str]:
    """Notes for the forbidden calls the source shows and no graded call ran (the recorder names a line that
    ran one: 'at line N:')."""
    ran = "\n".join(violations)
    return [f"note: {text}: no points withheld)" for line, text in static.run_time if f"at {where(line)}:" not in ran]


def helper_violations(spec, sub: Submission) -> list[str]:
    """The audit of every module beside the submission that it imports (``Submission.helpers``, the texts
    the worker runs): they are the submission too. Which of their operators run is judged at run time, like
    the submission's own (the determinism an exercise asks for: ``determinism.source_findings``)."""
    from autograder import audit

    out, beside = [], kernels_beside(sub)
    for path, source in sub.helpers.items():
        name = os.path.relpath(path, sub.path.parent)
        try:
            if source is None:
                raise UnicodeError("not UTF-8 text")
            found = audit.audit(source, allow=spec.rules.features, kernels_beside=beside,
                                kernel_library=spec.rules.kernel_library, outside_torch=spec.judged_on_tensors)
        except (UnicodeError, SyntaxError, ValueError) as exc:
            out.append(f"{name}: the grader could not read it ({type(exc).__name__}); a module the "
                       "submission imports must be readable Python, in UTF-8")
            continue
        out += encoding_violations(source, lambda line, name=name: f"{name}, line {line}")
        out += audit.violations([f for f in found if f.rule != "environment"],  # judged where it runs
                                lambda line, name=name: f"{name}, line {line}")
    return out


def encoding_violations(source: str, where) -> list[str]:
    """A coding declaration that would make Python read other text than the grader audited."""
    problem = encoding_problem(source)
    return [] if problem is None else [f"{where(problem[0])}: {problem[1]}"]


def helper_modules(sub: Submission) -> dict:
    """{dotted module name: (its file's name beside the submission, its audited text)} of the readable
    modules beside the submission that it imports."""
    folder, out = os.path.realpath(sub.path.parent), {}
    for path, source in sub.helpers.items():
        if source is None:
            continue
        rel = Path(os.path.relpath(path, folder))
        module = ".".join(rel.with_suffix("").parts)
        out[module[:-len(".__init__")] if module.endswith(".__init__") else module] = (str(rel), source)
    return out


def kernels_beside(sub: Submission) -> frozenset:
    """Dotted names of the Triton functions of the modules beside the submission that it imports (a kernel
    may call them: ``from helpers import load_row``), also where a package hands one on (its ``__init__``:
    ``from .rows import load_row``); an unreadable module is reported by its audit."""
    from autograder import audit

    modules, names = helper_modules(sub), set()
    for module, (_, source) in modules.items():
        try:
            names.update(f"{module}.{name}" for name in audit.kernel_names(source))
        except (SyntaxError, ValueError):
            pass
    for _ in range(3):  # a name handed on through a package or two
        for module, (file, source) in modules.items():
            package = module if file.endswith("__init__.py") else module.rpartition(".")[0]
            for base, name, bound in _imported_names(source, package):
                if f"{base}.{name}" in names:
                    names.add(f"{module}.{bound}")
    return frozenset(names)


def _imported_names(source: str, package: str) -> list:
    """(module, name, name bound here) of a module's top-level ``from ... import`` statements."""
    from autograder.audit import from_imports, parse

    try:
        return from_imports(parse(source).body, package)
    except (SyntaxError, ValueError):
        return []


def _failure_feedback(spec, verdicts) -> list[str]:
    if verdicts.first_fail is None:
        return []
    fail = verdicts.first_fail
    lines = [f"first failure: {fail.case.name}: {fail.message}"]
    if fail.hint:
        lines.append(f"hint: {fail.hint}")
    return lines


def _last_output(session) -> list[str]:
    out = session.output.strip() if session.reader is not None else ""
    return [f"last output: {out[-600:]}"] if out else []


def _output_notes(session) -> list[str]:
    notes = []
    if session.reader is not None and session.output_bytes > 1 << 20:
        notes.append(f"printed {session.output_bytes / 1e6:.1f} MB of output; the grader kept only the first "
                     "and last few KB (printing in a graded function slows it down)")
    return notes


# ------------------------------------------------------------------------------------------- performance

def timing_seconds() -> float:
    """Seconds of timed repetitions per exercise (at least 10 repetitions whatever it says):
    ``AUTOGRADER_TIMING_SECONDS``, default 6."""
    return float(os.environ.get("AUTOGRADER_TIMING_SECONDS") or 6.0)


def timed_inputs(spec, seed: int) -> tuple:
    """The timed workload's inputs, made here from ``seed`` on the course's device: where the workers will
    use them and the timed outputs are judged. Made on the CPU they took a grading seconds of one core
    before its first timing (a GPU's int8 weight of 470 million values, 07's forward for the backward's
    inputs, 10's paged cache of 500 million)."""
    import course

    return spec.performance.inputs(torch.Generator().manual_seed(seed), torch.device(course.DEVICE))


@dataclass
class TimedInputs:
    """A timing's inputs, loaded into ``slots`` of both workers (the submission's and the baseline's, which
    ``stack`` holds open until the timing ends)."""

    base_args: tuple
    sessions: dict
    slots: list
    stack: contextlib.ExitStack


def load_timed_inputs(worker, spec, seed: int, open_baseline=None, batch: int = CALLS_PER_ROUND_TRIP,
                      base_args: tuple | None = None) -> TimedInputs:
    """Load the timed workload into ``batch`` slots of the submission's worker and of the baseline's (a
    trusted worker of its own, in the same kind of sandbox: the identical path). Done before the timing
    waits for the GPU: the copies are nobody's timed work, and the wait then ends in the timing itself."""
    base_args = base_args if base_args is not None else timed_inputs(spec, seed)
    slots = list(range(1, batch + 1))
    scratch = (worker.scratch + "-baseline") if getattr(worker, "scratch", None) else None
    open_baseline = open_baseline or (lambda: WorkerSession(baseline_job(spec), worker.timeout_s, scratch=scratch))
    stack = contextlib.ExitStack()
    try:
        sessions = {"submission": worker, "baseline": stack.enter_context(open_baseline())}
        for s in sessions.values():
            s.request({"op": "load", "slot": slots[0], "args": base_args})
            for slot in slots[1:]:
                s.request({"op": "clone", "slot": slots[0], "to": slot})
    except BaseException:
        stack.close()
        raise
    return TimedInputs(base_args, sessions, slots, stack)


def time_against_baseline(worker, spec, seed: int, reps: int = 50, warmup: int = 5, max_seconds: float | None = None,
                          open_baseline=None, batch: int = CALLS_PER_ROUND_TRIP, loaded: TimedInputs | None = None):
    """(performance entry, credit, whether every checked timed output was right, feedback lines).

    The submission (in ``worker``) and the baseline (a trusted worker of its own) get the same inputs,
    made here once, loaded into ``batch`` argument slots; before every timed request each slot gets fresh
    values derived from them (``autograder.fresh``), so no call can be answered from a cache. Each request
    is prepared (L2 flushed, free memory poisoned, the device idle) in the worker's own context, then timed
    from this process: sent, ``batch`` calls back to back (launches overlap earlier calls' device work, as
    in a program), every stream waited for, answered. Repetitions are interleaved, medians taken, an empty
    request timed the same way in each worker subtracted, and the rest divided by ``batch``. A few of the
    submission's timed calls, chosen here in secret, have their outputs checked against float64 references.
    ``loaded``: the inputs already loaded (``load_timed_inputs`` with the same seed), else loaded here.
    """
    perf = spec.performance
    clock = Stopwatch()
    loaded = loaded or load_timed_inputs(worker, spec, seed, open_baseline, batch)
    base_args, sessions, slots = loaded.base_args, loaded.sessions, loaded.slots
    # the calls' fresh values and which of them are checked, from the system's randomness: the seed made the
    # cases and these inputs, which the learner's code sees (its 2^31 values can be searched)
    rng = random.SystemRandom()
    shipped = []
    with loaded.stack:
        times = {(name, empty): [] for name in sessions for empty in (False, True)}

        def one_rep(rep_checked: bool, record: bool):
            seeds = [rng.getrandbits(31) for _ in slots]
            checked = rng.randrange(batch)
            for (name, empty), series in times.items():
                s = sessions[name]
                # fresh values for the calls (an empty request calls nothing: its slots need none)
                fresh = [] if empty else [[slot, call_seed] for slot, call_seed in zip(slots, seeds)]
                s.request({"op": "prepare", "poison": False, "jitter": fresh})
                ms, done = s.timed({"op": "call", "slots": slots, "record": False, "empty": empty})
                if name == "submission" and not empty and rep_checked:
                    shipped.append((seeds[checked], done,
                                    s.request({"op": "ship", "index": checked, "inputs": False},
                                             reply=protocol.Shipped)))
                else:
                    s.request({"op": "drop"})
                if record:
                    series.append(ms / batch)

        clock.lap("inputs loaded")
        paces = []
        for _ in range(warmup):
            start = time.perf_counter()
            one_rep(False, False)
            paces.append(time.perf_counter() - start)
        # The number of repetitions is fixed before the first timed one (as many as fit in max_seconds at the
        # warm-up's pace, at least 10), and the checked ones are drawn from all of them: a submission that
        # behaves for a while and then cheats is as likely to be checked late as early. The pace is the
        # warm-up's median repetition: the first ones may compile or autotune.
        per_rep = statistics.median(paces) if paces else 0.0
        budget = timing_seconds() if max_seconds is None else max_seconds
        reps = max(min(reps, int(budget / max(per_rep, 1e-6))), 10)
        checked_reps = set(rng.sample(range(reps), min(JUDGED_TIMED_CALLS, reps)))
        clock.lap("warm-up")
        for rep in range(reps):
            one_rep(rep in checked_reps, True)
        clock.lap(f"{reps} repetitions")
    medians = {name: max(statistics.median(times[(name, False)]) - statistics.median(times[(name, True)]),
                         1e-3) for name in sessions}
    ok, msg = judge_timed_outputs(spec, base_args, shipped) if shipped else (False, "no timed call was checked")
    clock.lap("timed outputs checked")
    if not ok:
        return (None, 0.0, False,
                ["wrong in a timed call (fresh values, like every call): "
                 f"{msg}. A result cached by pointer, shape or content, work left for a later call, or memory "
                 "returned unwritten: the time does not count and correctness is withdrawn"])
    flops = perf.flops(base_args) if perf.flops else None
    entry = timing.performance_entry(perf, medians["submission"], medians["baseline"], perf.nbytes(base_args),
                                     flops, timing.get_peaks())
    credit = timing.performance_credit(entry["speedup"], perf.threshold, perf.floor)
    entry["seconds"] = clock.laps()  # where the timing's own seconds went
    notes = []
    if credit < 1.0:
        notes.append(f"performance: speedup {entry['speedup']:.2f} vs {perf.baseline_name}; "
                     f"full credit from {perf.threshold:g}, none below {perf.floor:g}")
    return entry, credit, True, notes


def judge_timed_outputs(spec, base_args, shipped) -> tuple[bool, str]:
    """The checked timed calls' outputs against float64 references on the same fresh values, made here."""
    import course

    from autograder.argtree import to_device

    if not spec.judged_on_tensors or spec.reference is None:
        return True, ""
    bases = to_device(base_args, course.DEVICE)  # fresh values made on the device: bit-identical, much faster
    for call_seed, done, out in shipped:
        if not done.ok:
            return False, f"raised {done.error}"
        args = spec.performance.fresh_args(bases, call_seed)
        with torch.no_grad():
            ref = spec.reference(*args)
        ok, _, msg = correctness.compare_outputs(out.output, ref, correctness.expected_dtypes(args, ref, spec), spec)
        if not ok:
            return False, msg
    return True, ""
