"""Guarantee 3: every graded exercise runs in a fresh worker process with a time limit.

The grading process writes the job (inputs made here) to a file, starts
``python -m autograder.worker JOB RESULT`` in its own process group with AUTOGRADER_WORKER=1, reads
its output through a pipe keeping only a capped head and tail (a flood of prints cannot exhaust
memory), kills the whole group at the time limit, and loads the result with weights_only=True.
Whatever happens in there (crash, hang, sys.exit/os._exit, out of memory, a sticky CUDA error) ends
as a ``WorkerRun`` with a message in plain words; it never raises into the grader.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

HEAD_BYTES = 8192
TAIL_BYTES = 4096


@dataclass
class WorkerRun:
    result: dict | None
    returncode: int | None
    timed_out: bool
    output_head: str
    output_tail: str
    output_bytes: int
    seconds: float
    problem: str | None = None  # plain words, when the worker produced no usable result

    @property
    def output(self) -> str:
        if self.output_bytes <= HEAD_BYTES + TAIL_BYTES:
            return self.output_head + self.output_tail
        return f"{self.output_head}\n[... {self.output_bytes - HEAD_BYTES - TAIL_BYTES} bytes left out ...]\n{self.output_tail}"


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


def run_worker(job: dict, workdir: Path, timeout_s: float, cwd: str | None = None) -> WorkerRun:
    import torch

    workdir = Path(workdir)
    job_path, result_path = workdir / "job.pt", workdir / "result.pt"
    for stale in (result_path, workdir / "result.pt.tmp"):
        if stale.exists():
            stale.unlink()
    torch.save(job, job_path)
    env = dict(os.environ, AUTOGRADER_WORKER="1", PYTHONUNBUFFERED="1", PYTHONWARNINGS="ignore")
    # The worker must import this very autograder (and course) whatever its working directory is.
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "autograder.worker", str(job_path), str(result_path)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=env, cwd=cwd, start_new_session=True)
    reader = _CappedReader(proc.stdout)
    reader.start()
    timed_out = False
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)
    finally:
        if proc.poll() is None:
            _kill_group(proc)
    reader.join(timeout=10)
    seconds = time.monotonic() - start
    head = reader.head.decode("utf-8", "replace")
    tail = reader.tail.decode("utf-8", "replace")
    result = None
    if not timed_out and result_path.exists():
        try:
            result = torch.load(result_path, weights_only=True)
        except Exception as exc:  # noqa: BLE001
            result = None
            head += f"\n[grader: the result file could not be read: {exc}]"
    run = WorkerRun(result, proc.returncode, timed_out, head, tail, reader.total, seconds)
    run.problem = explain(run, timeout_s)
    return run


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


def explain(run: WorkerRun, timeout_s: float) -> str | None:
    if run.timed_out:
        return (f"did not finish within the time limit of {timeout_s:.0f} s and was stopped "
                "(an endless loop, or waiting for something that never happens?)")
    if run.result is not None:
        return None
    rc = run.returncode
    special = plain_error(run.output_tail + run.output_head)
    if special:
        return special
    if rc is not None and rc < 0:
        sig = -rc
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        if sig == signal.SIGKILL:
            return "the process was killed (SIGKILL), most likely for using too much memory"
        if sig == signal.SIGSEGV:
            return "crashed with a segmentation fault (an invalid memory access)"
        return f"crashed (signal {name})"
    return (f"ended the process before returning a result (exit code {rc}): does the code call sys.exit(), "
            "os._exit() or exit()?")
