"""Compiling a submission's kernels side by side with its graded worker, on the spare cores.

On a GPU most of an exercise's grading time is Triton compiling the learner's kernels, once per
specialization (dtype, divisibility of sizes and strides, block sizes derived from the shape), one after
another in the graded worker, on one core. The GPU machines have many cores: ``Warmers`` starts a few more
workers of the same submission (same sandbox, same job, the submission's own cache folder, hence its own
Triton cache) that call the plan's cases, each on its share, with the same autotune config pins as the
graded run (``worker.AutotunePin``: case k runs config k). They compile what the graded run will need and
write it to that cache; the graded worker then loads each kernel from it instead of compiling it.

Two ways to run them (``AUTOGRADER_WARM_MODE``):
- ``beside`` (the default: measured faster in docs/performance.md, 05 graded in 35 s instead of 48 s and
  07 in 52 s instead of 60 s on the same H100): the graded worker starts its cases at once, from the
  first, while the warmers take theirs from the last case backwards and stop where the graded worker has
  reached; they are killed when its cases end, but for the one autotuning the timed workload, which
  finishes before the timing waits for the machine (the timing's warm-up then loads every config's
  kernel from the cache instead of compiling it alone on the machine: 7 of 9 s of 08's int8 timing). A
  notebook whose compilation is small then waits for nothing; judged calls share the GPU with the warmers
  as they already do with the other exercises graded side by side;
- ``before``: all of them first, each on its share dealt
  from the first case on; the graded worker's first case waits until they are done (at most a quarter of
  the time limit, given back to its deadline) and they are killed before it, so no judged call shares the
  GPU with them.

Nothing they do is judged or trusted: they answer nothing the grade reads, they are killed before the
graded worker's timing (and every exercise's: a timing waits until every exercise graded beside it has
left its shared part, warmers included), and a warmer that fails, hangs or is slow only leaves more for the
graded worker to compile (the wait for the timed workload's is bounded and given back to the time limit).
The learner's code in them is confined as in any worker; its only way to touch the graded run is the
submission's own cache, which the graded worker's own code (the learner's) could write just the same.
Beside the cases a warmer is alive while judged calls run, as the workers of the notebook's other exercises
already are: a helper in one of them, computing answers outside the graded worker's operator recorder,
would need the submission's folder as a channel, and the static audit gives no points to code that writes
files, maps memory, opens sockets or starts threads or processes (``autograder.audit``).
"""
from __future__ import annotations

import os
import threading
import time

MAX_WARMERS = 6  # ptxas and Triton's passes are one process each: past a few, the warmers' own start dominates
# Warmers on one host at once, over every submission graded there: not the cores but the processes' start
# (sandbox, torch, a CUDA context) is what they share. Four submissions of 03 graded side by side on a
# 64-core H200 host: 6 warmers per exercise (48 in all) made every grading 25-40% slower with the cores 16%
# busy; 2 each (16) graded as fast as none (results/NOTES.md, 2026-11-28, night).
HOST_WARMERS = 16
HOST_ENV = "AUTOGRADER_HOST_WARMERS"  # overrides HOST_WARMERS (to measure another share on a host)
ENV = "AUTOGRADER_WARMERS"
MODE_ENV = "AUTOGRADER_WARM_MODE"
MODES = ("beside", "before")  # the first is the default


def warm_mode() -> str:
    mode = os.environ.get(MODE_ENV) or MODES[0]
    if mode not in MODES:
        raise ValueError(f"{MODE_ENV}={mode!r}: expected one of {', '.join(MODES)}")
    return mode


def warmer_count(exercises_side_by_side: int, cores: int | None = None) -> int:
    """How many warmers each exercise gets: ``AUTOGRADER_WARMERS`` if set; none without a GPU (the Triton
    interpreter compiles nothing); otherwise the cores left once every exercise graded side by side has its
    graded and baseline workers, shared out, at most ``MAX_WARMERS``; one of several submissions graded on
    the host at once, its share of ``HOST_WARMERS`` too. ``cores``: this submission's share of the machine
    (batch grading passes its own: the cores over the submissions graded at once), else all."""
    warm_mode()  # a mistyped mode is an error before anything is graded, not one per exercise
    if os.environ.get(ENV):
        return max(0, int(os.environ[ENV]))
    import course

    if not course.ON_GPU:
        return 0
    machine = os.cpu_count() or 1
    per_exercise = (cores or machine) // max(1, exercises_side_by_side)
    count = min(MAX_WARMERS, per_exercise - 2)
    if cores and cores < machine:  # one of several submissions graded on this host at once
        host = int(os.environ.get(HOST_ENV) or HOST_WARMERS)
        count = min(count, int(host * cores / machine) // max(1, exercises_side_by_side))
    return max(0, count)


def shares(n_cases: int, count: int, mode: str = "before") -> list[list[int]]:
    """The case numbers each warmer calls: every case once, dealt out in turn; ``before``: the first cases
    first (the graded worker needs them first), ``beside``: the last first (the graded worker compiles the
    first ones itself)."""
    if not count:
        return []
    if mode == "beside":
        return [list(range(n_cases - 1 - i, -1, -count)) for i in range(count)]
    return [list(range(i, n_cases, count)) for i in range(count)]


class Warmers:
    """``count`` workers of ``job``: ``start`` starts their processes (their Python start overlaps the
    graded worker's and the plan's making), ``run(plan)`` has each call its share of the cases in a thread
    of this process; ``before_cases`` is what the graded worker does before its first case (``before``:
    wait for them), ``reached`` tells them which case it has reached, ``close`` kills them all."""

    def __init__(self, job: dict, count: int, timeout_s: float, cwd: str | None, scratch: str,
                 mode: str | None = None):
        from autograder.isolation import WorkerSession

        self.mode = mode or warm_mode()
        self.reached_case = -1  # beside: the graded worker's case; a warmer stops at it
        self.plan: list = []
        self.sessions = [WorkerSession(job, timeout_s, cwd=cwd, scratch=f"{scratch}-warm{i}")
                         for i in range(count)]
        self.calls = [0] * count  # cases each warmer called
        self.timed_call_done = False
        self.timed_warmer: int | None = None  # the warmer that calls the timed workload first
        self.threads: list[threading.Thread] = []

    def start(self) -> "Warmers":
        for session in self.sessions:
            session.start()
        return self

    def run(self, plan: list, timed_args: tuple | None = None) -> None:
        """Start calling: each warmer its share of ``plan``; with ``timed_args`` (an exercise that will be
        timed here), the last warmer first calls the timed workload once unpinned, so the autotuner
        compiles every config at that shape, as the timing's warm-up would."""
        self.plan = plan
        count = len(self.sessions)
        self.timed_warmer = count - 1 if timed_args is not None and count else None
        self.threads = [threading.Thread(target=self._warm, args=(i, share, timed_args if i == count - 1 else None),
                                         daemon=True)
                        for i, share in enumerate(shares(len(plan), count, self.mode))]
        for thread in self.threads:
            thread.start()

    def _warm(self, i: int, share: list[int], timed_args: tuple | None) -> None:
        session = self.sessions[i]
        try:
            with session as worker:
                if worker.ready.status != "ok":
                    return  # the code does not load: the graded worker will say why
                if timed_args is not None:
                    worker.request({"op": "load", "slot": 0, "args": timed_args})
                    worker.request({"op": "call", "slots": [0], "record": False})  # as a timed call: autotunes
                    worker.request({"op": "drop"})
                    self.timed_call_done = True
                for number in share:
                    if number <= self.reached_case:
                        return  # the graded worker is there: the rest of this share is behind it
                    worker.request({"op": "load", "slot": 0, "args": self.plan[number].a})
                    worker.request({"op": "call", "slots": [0], "record": True, "config": number})
                    worker.request({"op": "drop"})
                    self.calls[i] += 1
        except Exception:  # noqa: BLE001  (a warmer's failure costs nothing but the time it would have saved)
            return

    def reached(self, number: int) -> None:
        self.reached_case = number

    def before_cases(self, worker, clock, timeout_s: float) -> None:
        """``before``: wait for the warmers (at most a quarter of the time limit), kill them, and give the
        graded worker back the time they took; ``beside``: nothing (they run on beside its cases)."""
        if self.mode != "before":
            return
        start = time.monotonic()
        self.wait(timeout_s / 4)
        worker.deadline += time.monotonic() - start
        clock.lap("compiling ahead")

    def wait(self, limit_s: float) -> int:
        """Wait for every warmer (at most ``limit_s``), then kill what is left; the cases they called."""
        deadline = time.monotonic() + limit_s
        for thread in self.threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        self.close()
        return sum(self.calls)

    def close(self, but_the_timed_call: bool = False) -> None:
        """Kill the warmers; ``but_the_timed_call``: the one still calling the timed workload lives on (its
        autotuning compiles every config at that shape, which the timing's warm-up would otherwise compile,
        alone on the machine): ``finish_timed_call`` waits for it."""
        keep = self.timed_warmer if but_the_timed_call and not self.timed_call_done else None
        ending = [i for i in range(len(self.sessions)) if i != keep]
        for i in ending:
            if self.sessions[i].proc is not None:
                self.sessions[i].stop()  # kills the process group; a thread blocked on its socket then ends
        for i in ending:
            if i < len(self.threads):
                self.threads[i].join(timeout=10)
        for i in ending:
            try:
                self.sessions[i].close()  # a session its thread has not closed (never run, or still unwinding)
            except Exception:  # noqa: BLE001  (its thread closed it meanwhile)
                pass

    def finish_timed_call(self, limit_s: float) -> float:
        """Wait (at most ``limit_s``) for the warmer calling the timed workload, then kill every warmer: the
        seconds waited. Called after the graded worker's cases and before its timing waits for the machine:
        the compilation overlaps the other exercises' cases instead of running in the timing's warm-up."""
        start = time.monotonic()
        if self.timed_warmer is not None and self.timed_warmer < len(self.threads):
            self.threads[self.timed_warmer].join(timeout=max(0.0, limit_s))
        self.close()
        return time.monotonic() - start
