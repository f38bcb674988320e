"""``check(id, fn)``: instant feedback in the learner's own notebook.

It runs the exercise's public cases through the grader's own call loop and judging (``autograder.runner``:
fresh random inputs, float64 references, dtype/shape, NaN, unmodified inputs, a second call on re-filled
inputs, the operators the exercise allows and the Triton launch count), prints a table (case, shape,
dtype, max error, verdict) and a hint on the first failure, times the kernel against its baseline on a
GPU, and returns True/False. The public cases include a small case of every family the grade uses, so a
PASSED predicts the grade's correctness verdict.

Without a GPU the calls run in a forked child of the notebook's kernel: a kernel that crashes the
Triton interpreter (an unmasked load or store) ends the child, not the learner's session, and ``check``
says what happened; a child that runs past the time limit is stopped, and ``check`` shows the line it was
on. On a GPU they run in the kernel's own process (CUDA cannot be forked); a sticky CUDA error is reported
in plain words, with the advice to restart the kernel.

It is feedback, not a grade: it runs in the learner's process, so only the isolated grader is trusted.
Inside a grading worker (AUTOGRADER_WORKER=1) it does nothing and returns True: the worker grades.
"""
from __future__ import annotations

import os
import socket
import sys
import time

from autograder.isolation import HEAD_BYTES, Session, WorkerGone, _CappedReader, explain_exit


# A forked child writes its stack this long after the notebook's deadline: inside the grace the notebook
# gives a stopped child before killing it (``ForkSession.stop``), and never for a check that ends in time.
STACK_AFTER_DEADLINE_S = 0.5
STOP_GRACE_S = 5.0


class ForkSession(Session):
    """The call loop in a forked child of this process: it has the learner's function already."""

    def __init__(self, fn, poison: bool, timeout_s: float, harness=None, course_tools=None, kernel_library=None):
        self.fn, self.poison, self.timeout_s, self.harness = fn, poison, timeout_s, harness
        self.course_tools, self.kernel_library = course_tools, kernel_library
        self.pid = None

    def __enter__(self):
        parent, child = socket.socketpair()
        read_fd, write_fd = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            parent.close()
            os.close(read_fd)
            _child_main(self.fn, self.poison, child, write_fd, self.harness, self.timeout_s, self.course_tools,
                        self.kernel_library)
        child.close()
        os.close(write_fd)
        self.pid, self.sock, self.status = pid, parent, None
        self.deadline = time.monotonic() + self.timeout_s
        self.reader = _CappedReader(os.fdopen(read_fd, "rb", buffering=0))
        self.reader.start()
        return self

    def __exit__(self, *exc):
        if self.status is None:
            self.say_bye()
        self.stop()
        self.sock.close()
        return False

    def stop(self):
        if self.status is None:
            deadline = time.monotonic() + STOP_GRACE_S
            while time.monotonic() < deadline:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
                if pid:
                    self.status = status
                    break
                time.sleep(0.02)
            else:
                os.kill(self.pid, 9)
                _, self.status = os.waitpid(self.pid, 0)
        self.reader.join(timeout=5)

    def gone_message(self) -> str:
        self.stop()  # waits for the child's own exit first
        code = os.waitstatus_to_exitcode(self.status)
        return explain_exit(code, self.output)


def _child_main(fn, poison, sock, out_fd, harness=None, timeout_s: float | None = None, course_tools=None,
                kernel_library=None):
    """Serve the call loop; the learner's prints go to a pipe the notebook shows. Just after the notebook's
    deadline (``timeout_s``), while the notebook waits to stop it, the child writes where it is to that
    pipe: a stopped check then shows the line it was stuck on."""
    code = 1
    try:
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        # The notebook's own stdout talks to Jupyter over sockets this child must not touch.
        sys.stdout = open(1, "w", buffering=1, closefd=False)
        sys.stderr = open(2, "w", buffering=1, closefd=False)
        import faulthandler

        faulthandler.enable(file=sys.stderr, all_threads=False)  # a crash shows the learner's line, above
        if timeout_s:
            faulthandler.dump_traceback_later(timeout_s + STACK_AFTER_DEADLINE_S, file=sys.stderr)
        import torch

        torch.set_num_threads(1)  # OpenMP's thread pool does not survive fork(): one thread is safe
        from autograder.worker import Worker, serve

        serve(Worker(fn, None, poison, harness=harness, course_tools=course_tools, kernel_library=kernel_library), sock)
        code = 0
    finally:
        os._exit(code)


class InProcessSession(Session):
    """The call loop in this very process (on a GPU: CUDA cannot be forked)."""

    def __init__(self, fn, poison: bool, timeout_s: float, harness=None, source_file: str | None = None,
                 course_tools=None, kernel_library=None):
        from autograder.worker import Worker

        self.worker = Worker(fn, source_file, poison, harness=harness, course_tools=course_tools,
                             kernel_library=kernel_library)
        self.timeout_s = timeout_s

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.worker.restore()
        return False

    def request(self, req: dict, reply=None):
        from autograder import protocol

        msg = self.worker.handle(req)
        return protocol.from_wire(msg) if reply is not None else msg

    def stop(self):
        pass


def local_session(fn, spec):
    import course

    from autograder.determinism import atomics

    from autograder import legality

    legality.Metadata.positions = tuple(spec.metadata)  # the arguments a launcher may read, as when graded
    poison = spec.judged_on_tensors
    library = {**spec.rules.kernel_library, **atomics(spec)}  # refused as launch arguments, as when graded
    if course.ON_GPU or not hasattr(os, "fork"):
        return InProcessSession(fn, poison, spec.timeout_s, spec.harness, course_tools=spec.course_tools,
                                kernel_library=library)
    return ForkSession(fn, poison, spec.timeout_s, spec.harness, spec.course_tools, library)


def check(exercise_id: str, fn, quick: bool = False, show: bool = True, step: str | None = None) -> bool:
    """``step``: one step of the exercise alone (``Exercise.steps``: a kernel the entry point is built
    from), judged the same way on its own cases."""
    if os.environ.get("AUTOGRADER_WORKER") == "1":
        return True
    import course

    from autograder import runner, specs
    from autograder.specs.base import fresh_seed

    spec = specs.get(exercise_id)
    call = f"check({exercise_id!r})"
    if step is not None:
        spec = spec.step(step)
        call = f"check({exercise_id!r}, step={step!r})"
    plan = runner.make_plan(spec, quick, fresh_seed(), public_only=True)
    where = lambda line: f"line {line} of your code"  # noqa: E731
    session = local_session(fn, spec)
    try:
        with session:
            runs = runner.run_cases(session, plan)
    except WorkerGone as gone:
        if show:
            _print_output(session)
            print(f"{call} stopped: {gone}")
            print("  NOT YET: see above")
        return False
    except Exception as exc:  # noqa: BLE001  (on a GPU the calls run here: a CUDA error lands here)
        if show:
            from autograder.isolation import plain_error

            print(f"{call} stopped: {plain_error(str(exc)) or f'{type(exc).__name__}: {exc}'}")
            if course.ON_GPU and plain_error(str(exc)):
                print("  This CUDA error poisons the whole process: restart the kernel, fix the kernel, run again.")
            print("  NOT YET: see above")
        return False
    verdicts = runner.judge_cases(spec, plan, runs, where)
    from autograder.legality import reaches_kernels_ref

    violations = runner.rule_violations(spec, verdicts, reaches_kernels_ref(fn), where)
    passed = verdicts.all_ok and not violations
    memory_lines = []
    if passed and spec.memory is not None:  # deterministic counts: judged here on every device, as graded
        from autograder.report import memory_line

        entry, credit, memory_lines = runner.judge_memory(spec, verdicts)
        memory_lines.insert(0, "memory: " + memory_line(entry["memory"], entry["baseline"]))
        passed = credit >= 1.0
    if show:
        _print_output(session)
        _print_table(call, verdicts, violations, course.describe())
        for line in memory_lines:
            print(f"  {line}")
        if passed and spec.performance is not None:
            _print_performance(spec, fn)
        print("  PASSED" if passed else "  NOT YET: see above")
    return passed


def _print_output(session):
    out = _without_grader_frames(session.output.strip())
    if out:
        print(f"your function printed:\n{out[-HEAD_BYTES:]}")


def _without_grader_frames(out: str) -> str:
    """A crash dump, or the stack a child writes at its deadline (faulthandler), keeps its first line
    and the learner's frames: the grader's and the libraries' frames and the list of extension modules say
    nothing to the learner."""
    from autograder.legality import _is_library

    if "Fatal Python error" not in out and "most recent call first" not in out:
        return out
    kept = []
    for line in out.splitlines():
        stripped = line.strip()
        if stripped.startswith("Extension modules:") or (stripped.startswith("File \"") and
                                                         _is_library(stripped.split('"')[1])):
            continue
        kept.append(line)
    return "\n".join(kept).strip()


def _print_table(call, verdicts, violations, device):
    from autograder.correctness import case_table

    print(f"{call}: {len(verdicts.rows)} public cases on {device}")
    print("\n".join(case_table(verdicts.rows)))
    for v in violations:
        print(f"  violation: {v}")
    if verdicts.first_fail:
        fail = verdicts.first_fail
        print(f"  first failure: {fail.case.name}: {fail.message}")
        if fail.hint:
            print(f"  hint: {fail.hint}")


def _print_performance(spec, fn):
    import course
    import torch

    from autograder import timing
    from autograder.specs.base import fresh_seed
    from measure.timer import time_interleaved

    want, why = timing.should_time(course.ON_GPU, spec.performance)
    if not want:
        print(f"  ({why})")
        return
    perf = spec.performance
    args = perf.inputs(torch.Generator().manual_seed(fresh_seed()), course.DEVICE)
    med = time_interleaved({"yours": fn, "baseline": perf.baseline_for(args)}, args, reps=20)
    entry = timing.performance_entry(perf, med["yours"], med["baseline"], perf.nbytes(args),
                                     perf.flops(args) if perf.flops else None, timing.get_peaks())
    ach = entry["achieved"]
    print(f"  performance: {med['yours']:.4g} ms vs {perf.baseline_name} {med['baseline']:.4g} ms, "
          f"speedup {entry['speedup']:.2f} (full credit from {perf.threshold:g}); {ach['value']:.4g} {ach['unit']}")
