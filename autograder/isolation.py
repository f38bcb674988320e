"""Isolation (docs/GUARANTEES.md, 3): every graded exercise runs in a fresh worker process with a deadline.

``WorkerSession`` starts ``python -m autograder.worker FD`` in its own process group with
AUTOGRADER_WORKER=1 and a socket to talk over (``autograder.protocol``), reads its output through a pipe
keeping only a capped head and tail (a flood of prints cannot exhaust memory), kills the whole group at the
deadline or at the end. Whatever happens in there (crash, hang, sys.exit/os._exit, out of memory, a sticky
CUDA error) ends as ``WorkerGone`` with a message in plain words.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

HEAD_BYTES = 8192
TAIL_BYTES = 4096


class _CappedReader(threading.Thread):
    def __init__(self, stream):
        super().__init__(daemon=True)
        self.stream = stream
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def run(self):
        while True:
            chunk = self.stream.read1(65536) if hasattr(self.stream, "read1") else self.stream.read(65536)
            if not chunk:
                break
            self.total += len(chunk)
            room = HEAD_BYTES - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            if chunk:
                self.tail = (self.tail + chunk)[-TAIL_BYTES:]


def _kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the worker and anything it started
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def plain_error(text: str) -> str:
    """Recognise errors that deserve plain words (a sticky CUDA error, out of memory)."""
    low = text.lower()
    if "illegal memory access" in low or "misaligned address" in low or "device-side assert" in low:
        return ("the kernel accessed GPU memory it does not own (a CUDA error that poisons the whole "
                "process): check the masks on every tl.load and tl.store")
    if "out of memory" in low or "can't allocate memory" in low or "outofmemoryerror" in low:
        return "ran out of memory (allocating more than the device has)"
    return ""


def explain_exit(returncode: int | None, output: str) -> str:
    """Plain words for a worker that went away without answering."""
    special = plain_error(output)
    if special:
        return special
    rc = returncode
    if rc is not None and 128 < rc < 128 + 65:
        rc = 128 - rc  # a sandbox (bwrap) reports its child's death by signal N as exit code 128 + N
    if rc is not None and rc < 0:
        sig = -rc
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        if sig == signal.SIGKILL:
            return "the process was killed (SIGKILL), most likely for using too much memory"
        if sig == signal.SIGSEGV:
            return "crashed with a segmentation fault (an invalid memory access)"
        if sig == signal.SIGABRT:
            return ("crashed (aborted): under the Triton interpreter an unmasked load or store past the end of a "
                    "tensor does this; is every tl.load and tl.store masked?")
        return f"crashed (signal {name})"
    return (f"ended the process before returning a result (exit code {rc}): does the code call sys.exit(), "
            "os._exit() or exit()?")


def timeout_message(timeout_s: float) -> str:
    return (f"did not finish within the time limit of {timeout_s:.0f} s and was stopped "
            "(an endless loop, or waiting for something that never happens?)")


class WorkerGone(Exception):
    """The worker crashed, hung or exited; ``str(exc)`` says so in plain words, ``timed_out`` whether it
    was stopped at its time limit (a class report tells a timeout from a crash by it)."""

    def __init__(self, message: str, timed_out: bool = False):
        super().__init__(message)
        self.timed_out = timed_out


class Session:
    """A channel to one worker with a deadline: ``request`` and ``timed`` for the grading side.

    Subclasses start the worker (``WorkerSession``: a fresh process; ``ForkSession``: a forked child of
    a notebook's kernel) and say how it went away (``gone_message``)."""

    timeout_s: float
    deadline: float
    sock = None
    reader = None
    sandbox_note = None

    def request(self, req: dict, reply=None):
        """Send ``req``; return the reply (rebuilt as the ``reply`` dataclass), or raise WorkerGone."""
        from autograder import protocol

        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            self.stop()
            raise WorkerGone(timeout_message(self.timeout_s), timed_out=True)
        try:
            self.sock.settimeout(remaining)
            if req is not None:  # None: only the answer to what was sent before (a job sent by ``start``)
                protocol.send(self.sock, req)
            msg = protocol.recv(self.sock)
        except (TimeoutError, OSError, protocol.ChannelClosed) as exc:
            timed_out = isinstance(exc, TimeoutError) or time.monotonic() >= self.deadline
            message = timeout_message(self.timeout_s) if timed_out else self.gone_message()
            self.stop()
            raise WorkerGone(message, timed_out=timed_out) from None
        if isinstance(msg, dict) and msg.get("type") == "error":
            # The worker's own plumbing failed after the learner's code ran (a sticky CUDA error makes every
            # later CUDA call fail, copying the output back included): say what it was, in plain words.
            error = str(msg.get("error"))
            self.stop()
            raise WorkerGone(plain_error(error) or f"the worker failed while serving {(req or {}).get('op', 'its job')!r}: {error}")
        if reply is None:
            return msg
        got = protocol.from_wire(msg)
        if not isinstance(got, reply):
            raise WorkerGone(f"the worker answered {type(got).__name__} where {reply.__name__} was due")
        return got

    def timed(self, req: dict):
        """(milliseconds by this process's clock, reply) of one request: the clock is outside the worker."""
        from autograder import protocol

        t0 = time.perf_counter()
        done = self.request(req, reply=protocol.CallDone)
        return (time.perf_counter() - t0) * 1e3, done

    def say_bye(self):
        from autograder import protocol

        try:
            self.sock.settimeout(2.0)
            protocol.send(self.sock, {"op": "bye"})
        except Exception:  # noqa: BLE001  (already gone)
            pass

    # ---------------------------------------------------------------- output
    @property
    def output_bytes(self) -> int:
        return self.reader.total if self.reader else 0

    @property
    def output(self) -> str:
        if self.reader is None:
            return ""
        head = self.reader.head.decode("utf-8", "replace")
        tail = self.reader.tail.decode("utf-8", "replace")
        if self.reader.total <= HEAD_BYTES + TAIL_BYTES:
            return head + tail
        return f"{head}\n[... {self.reader.total - HEAD_BYTES - TAIL_BYTES} bytes left out ...]\n{tail}"


def graded_gpu_only(env: dict) -> dict:
    """CUDA_VISIBLE_DEVICES for a worker: the one GPU this process grades on (its current device), or nothing
    to change without a GPU. A worker that saw every GPU of the host could work on another one: the worker
    waits for its own device alone before it answers (torch.cuda.synchronize), so that work would run outside
    the timed window, into the shipping of outputs, and on a GPU where another learner is being timed."""
    import torch

    import course

    if not course.ON_GPU:
        return {}
    index = torch.cuda.current_device() if torch.cuda.is_initialized() else 0  # not initialized: "cuda" is 0
    if index != 0:  # frames name a GPU by its index: the worker's one GPU is its cuda:0, and must be ours too
        raise RuntimeError(f"the grading process works on cuda:{index}; grade on a process's first GPU and choose "
                           "the GPU with CUDA_VISIBLE_DEVICES (as `autograder batch` does for each of its workers)")
    visible = env.get("CUDA_VISIBLE_DEVICES")
    names = [d.strip() for d in visible.split(",")] if visible is not None else [str(i) for i in range(index + 1)]
    return {"CUDA_VISIBLE_DEVICES": names[index]}


class WorkerSession(Session):
    """One worker process and its channel: started, asked, and always stopped (``with`` block).

    The worker runs in its own process group (killed whole at the end or at the deadline), with its
    output read through a pipe keeping only a capped head and tail, inside a sandbox where the platform
    has one. Every request has the session's deadline: a hang costs this exercise only.
    """

    def __init__(self, job: dict, timeout_s: float, cwd: str | None = None, scratch: str | None = None):
        self.job, self.timeout_s, self.cwd, self.scratch = job, timeout_s, cwd, scratch
        self.proc = None

    def start(self) -> "WorkerSession":
        """Start the worker and hand it its job without waiting for it: its start (a fresh Python importing
        torch) then overlaps other work, e.g. a baseline's worker starting while the submission is graded.
        ``with`` (``__enter__``) waits for its answer; a started session must be entered or ``close``d."""
        import socket

        from autograder import protocol

        parent, child = socket.socketpair()
        env = dict(os.environ, AUTOGRADER_WORKER="1", PYTHONUNBUFFERED="1", PYTHONWARNINGS="ignore")
        # The worker must import this very autograder (and course) whatever its working directory is.
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        env.update(graded_gpu_only(env))
        argv = [sys.executable, "-m", "autograder.worker", str(child.fileno())]
        if self.scratch:
            argv, self.sandbox_note = _sandboxed(argv, self.scratch, self.job, env)
        self.deadline = time.monotonic() + self.timeout_s
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, env=env, cwd=self.cwd, start_new_session=True,
                                     pass_fds=(child.fileno(),))
        child.close()
        self.sock = parent
        self.reader = _CappedReader(self.proc.stdout)
        self.reader.start()
        try:
            self.sock.settimeout(self.timeout_s)
            protocol.send(self.sock, self.job)  # buffered by the socket until the worker reads it
        except OSError:
            pass  # the worker is already gone: __enter__'s wait for its answer says why
        return self

    def __enter__(self):
        from autograder import protocol

        if self.proc is None:
            self.start()
        try:
            self.ready = self.request(None, reply=protocol.Ready)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def close(self) -> None:
        """Stop a worker that was started and not (or no longer) in use; nothing to do otherwise."""
        if self.sock is not None:
            self.stop()
            self.sock.close()
            self.sock = None

    def __exit__(self, *exc):
        if self.sock is None:
            return False
        try:
            if self.proc.poll() is None:
                self.say_bye()
                self.proc.wait(timeout=5)
        except Exception:  # noqa: BLE001
            pass
        finally:
            self.stop()
            self.sock.close()
            self.sock = None
        return False

    def stop(self):
        _kill_group(self.proc)
        self.reader.join(timeout=10)

    def gone_message(self) -> str:
        """Why the channel closed: the worker's exit, waited for (briefly) before anything is killed."""
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "stopped answering the grader (its channel closed while it kept running)"
        self.reader.join(timeout=5)
        return explain_exit(self.proc.returncode, self.output)


def _sandboxed(argv, scratch, job, env):
    """The worker's command line inside a sandbox where the platform has one (autograder.sandbox): it reads
    what it needs, writes only its scratch folder and the submission's own cache, reaches no network.
    Returns (argv, a note for the report when no sandbox could be used)."""
    from autograder.sandbox import sandbox_argv

    readable = [p for p in (job.get("source_file"), job.get("submission_dir")) if p]
    wrapped, note = sandbox_argv(argv, scratch, readable=readable, cache_dir=Path(scratch).parent / ".cache", env=env)
    return wrapped, (None if wrapped != argv else note)
