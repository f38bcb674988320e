"""More workers of a submission beside its graded worker, on the spare cores: its cases shared out, or
its kernels compiled ahead.

On a GPU an exercise's cases take most of its grading time: Triton compiling the learner's kernels, once per
specialization (dtype, divisibility of sizes and strides, block sizes derived from the shape), and the
grader's own work around every operator of a graded call (the operator recorder, a memory harness's meter),
one case after another in one process, on one core. The GPU machines have many cores: ``Warmers`` starts a
few more workers of the same submission (same sandbox, same job, the submission's own cache folder, hence
its own Triton cache), each with its own time limit. Two ways to use them (``AUTOGRADER_WARM_MODE``):

- ``share`` (the default): the plan's cases are one queue, and the graded worker and the warmers each take
  the next case when they are free and run it exactly as the graded worker runs its own (``runner.run_case``:
  load A, prepare, call recorded, ship; refill B, prepare, call, ship; case k runs each autotuned kernel's
  config k), so every case is run once, by one worker of the submission, and what comes back is judged here
  as the graded worker's is. The first case is the graded worker's own, however late it starts (what its
  import was refused is charged to its next checked call, which must be a judged one). A warmer that fails,
  hangs past its time limit or does not load hands its case back, and the graded worker runs it; the graded
  worker waits for the cases taken by others before the cases are judged (never past its own time limit:
  then it runs them itself, and times out as it would have). The determinism check, the timing, the checked
  call on the timed workload and the null-kernel check stay with the graded worker.
- ``before``: the warmers call the cases first, each its share dealt from the first case on, to compile
  them; nothing they bring back is read; the graded worker's first case waits until they are done (at most
  a quarter of the time limit, given back to its deadline), they are killed before it, and it runs every
  case itself: no judged call shares the GPU with another worker of the submission.

With a timed exercise, the last warmer first calls the timed workload once unpinned, so the autotuner
compiles every config at that shape; it lives on after the cases until that call is done (the timing's
warm-up then loads every config's kernel from the cache instead of compiling it alone on the machine: 7 of
9 s of 08's int8 timing). Every warmer is gone before the graded worker's timing, and every exercise's: a
timing waits until every exercise graded beside it has left its shared part, warmers included.

What a warmer can do, the graded worker can: each is a worker of the same submission, confined the same way,
whose judged calls are recorded the same way and whose only way to the others is the submission's own cache
folder, which the graded worker's own code (the learner's) could write just the same; each learns a case's
inputs only when it runs that case. Code that computed answers in one worker for another would need that
folder as a channel, and the static audit gives no points to code that writes files, maps memory, opens
sockets or starts threads or processes (``autograder.audit``).
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
MODES = ("share", "before")  # the first is the default


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


def shares(n_cases: int, count: int) -> list[list[int]]:
    """``before``: the case numbers each warmer calls, every case once, dealt out in turn from the first (the
    graded worker needs them first)."""
    if not count:
        return []
    return [list(range(i, n_cases, count)) for i in range(count)]


class CaseQueue:
    """``share``: the plan's case numbers, handed out in order to whichever worker asks next; a case taken by
    a worker that could not run it goes back to the front. ``runs[k]``: case k's ``runner.CaseRun`` once one
    worker has run it; ``ran_by[k]``: which (``GRADED`` or a warmer's number)."""

    def __init__(self, n_cases: int):
        import collections

        self._cond = threading.Condition()
        self._todo = collections.deque(range(n_cases))
        self._taken: set[int] = set()
        self.runs: list = [None] * n_cases
        self.ran_by: list = [None] * n_cases

    def take(self, wait_until: float | None = None) -> int | None:
        """The next case to run, or None when none is left. ``wait_until`` (a ``time.monotonic()``): when every
        case left is taken by another worker, wait for them (one may come back) until then, and past it take
        back the first of theirs (the graded worker then runs it itself)."""
        with self._cond:
            while True:
                if self._todo:
                    number = self._todo.popleft()
                    self._taken.add(number)
                    return number
                if wait_until is None or not self._taken:
                    return None
                left = wait_until - time.monotonic()
                if left <= 0:
                    return min(self._taken)  # still held by its worker: whichever brings it back first counts
                self._cond.wait(timeout=left)

    def done(self, number: int, run, by) -> None:
        with self._cond:
            if self.runs[number] is None:
                self.runs[number], self.ran_by[number] = run, by
            self._taken.discard(number)
            self._cond.notify_all()

    def give_back(self, number: int) -> None:
        with self._cond:
            if number in self._taken and self.runs[number] is None:
                self._taken.discard(number)
                self._todo.appendleft(number)
            self._cond.notify_all()


GRADED = "graded"  # CaseQueue.ran_by: the graded worker


class Warmers:
    """``count`` workers of ``job``: ``start`` starts their processes (their Python start overlaps the
    graded worker's and the plan's making), ``run(plan)`` sets each to work in a thread of this process;
    ``before_cases`` is what the graded worker does before its first case (``before``: wait for them),
    ``share_cases`` its own part of the cases (``share``), ``close`` kills them all."""

    def __init__(self, job: dict, count: int, timeout_s: float, cwd: str | None, scratch: str,
                 mode: str | None = None):
        from autograder.isolation import WorkerSession

        self.mode = mode or warm_mode()
        self.plan: list = []
        self.queue = CaseQueue(0)  # share: the plan's cases, for the graded worker and the warmers
        self.sessions = [WorkerSession(job, timeout_s, cwd=cwd, scratch=f"{scratch}-warm{i}")
                         for i in range(count)]
        self.calls = [0] * count  # cases each warmer called
        self.graded_first: int | None = None  # share: the case kept for the graded worker (``run``)
        self.timed_call_done = False
        self.timed_warmer: int | None = None  # the warmer that calls the timed workload first
        self.threads: list[threading.Thread] = []

    def start(self) -> "Warmers":
        for session in self.sessions:
            session.start()
        return self

    def run(self, plan: list, timed_args: tuple | None = None) -> None:
        """Start calling: ``share``, the cases of ``plan`` as each warmer is free; ``before``, each warmer its
        share of them. With ``timed_args`` (an exercise that will be timed here), the last warmer first calls
        the timed workload once unpinned, so the autotuner compiles every config at that shape, as the
        timing's warm-up would."""
        self.plan = plan
        self.queue = CaseQueue(len(plan))
        # share: the first case is the graded worker's, however late it starts. What its import was refused is
        # charged to its next checked call: with no case of its own (code that tells it from the warmers can
        # wait at import until they took every case) that call would be the null-kernel check's, whose
        # operators nobody judges, and the refusal would cost nothing
        self.graded_first = self.queue.take() if self.mode == "share" and plan else None
        count = len(self.sessions)
        self.timed_warmer = count - 1 if timed_args is not None and count else None
        work = shares(len(plan), count) if self.mode == "before" else [None] * count
        self.threads = [threading.Thread(target=self._warm, args=(i, share, timed_args if i == count - 1 else None),
                                         daemon=True)
                        for i, share in enumerate(work)]
        for thread in self.threads:
            thread.start()

    def _warm(self, i: int, share: list[int] | None, timed_args: tuple | None) -> None:
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
                if share is None:
                    self._share(i, worker)
                    return
                for number in share:
                    worker.request({"op": "load", "slot": 0, "args": self.plan[number].a})
                    worker.request({"op": "call", "slots": [0], "record": True, "config": number})
                    worker.request({"op": "drop"})
                    self.calls[i] += 1
        except Exception:  # noqa: BLE001  (a warmer's failure costs nothing but the time it would have saved)
            return

    def _share(self, i: int, worker) -> None:
        """Warmer ``i``'s part of the cases: the next one left, until none is; a case it could not finish goes
        back to the queue (the graded worker runs it)."""
        from autograder import runner

        while (number := self.queue.take()) is not None:
            try:
                run = runner.run_case(worker, self.plan[number], number)
            except BaseException:
                self.queue.give_back(number)
                raise
            self.queue.done(number, run, i)
            self.calls[i] += 1

    def share_cases(self, session, deadline: float) -> list:
        """``share``: the graded worker's part of the cases (``session``: its channel), then the wait for those
        the warmers took, until ``deadline`` (its own time limit, a ``time.monotonic()``); every case's
        ``runner.CaseRun``, in the plan's order."""
        from autograder import runner

        number = self.graded_first  # (None only for an empty plan)
        while number is not None:
            self.queue.done(number, runner.run_case(session, self.plan[number], number), GRADED)
            number = self.queue.take(wait_until=deadline)
        return list(self.queue.runs)

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
