"""Shared helpers for the autograder tests: grade a test submission once per pytest run (quick cases).

Several test modules grade the same submissions (test_feedback checks a PASSED ``check`` against the grade of
the submissions test_autograder_guarantees judges, test_runtime_audit and test_autograder_escapes grade
honest ones test_feedback grades too). ``graded`` keeps each grading in a folder that every process of the
run shares (``GRADES``, made by tests/conftest.py), so that pytest-xdist's processes grade a submission once,
whichever asks first: a request is answered by an earlier grading of the same submission, with the same time
limit, that graded every exercise asked for side by side (as the request would have). ``across_a_socket``
sends a message through the worker's protocol as the grading process would receive it.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import pickle
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

SUBMISSIONS = Path(__file__).parent / "submissions"
GRADES = "COURSE_TEST_GRADES"  # the environment variable naming the run's folder of gradings
# good_triton.py's exercises: every test that grades it asks for all of them, so the run grades it once
# (a request is answered only by an earlier grading of every exercise it asks for)
GOOD_TRITON_EXERCISES = ("softmax", "online_softmax", "bias_gelu", "vector_add")


@contextlib.contextmanager
def shared(key: str):
    """``(folder, name)``: where the run keeps what is made for ``key`` (files named ``name`` + a suffix), with
    every other process of the run kept out until the block ends; None where the run shares nothing (a test
    module imported outside pytest)."""
    folder = os.environ.get(GRADES)
    if not folder:
        yield None
        return
    name = hashlib.sha256(key.encode()).hexdigest()[:16]
    with open(Path(folder) / f"{name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process making it: wait for what it makes
        yield Path(folder), name


@lru_cache(maxsize=None)
def graded(name: str, exercises: tuple, timeout: float = 120.0) -> dict:
    with shared(f"{name}\0{timeout!r}") as place:
        if place is None:
            return _grade(name, exercises, timeout)
        folder, key = place
        earlier = sorted(folder.glob(f"{key}-*.pickle"))
        for path in earlier:
            done = pickle.loads(path.read_bytes())
            if set(exercises) <= set(done):
                return {ex_id: done[ex_id] for ex_id in exercises}
        result = _grade(name, exercises, timeout)
        try:
            kept = pickle.dumps(result)
        except Exception:  # noqa: BLE001  (a value pickle cannot carry: this grading is this process's alone)
            return result
        part = folder / f"{key}-{len(earlier)}.part"
        part.write_bytes(kept)
        part.rename(part.with_suffix(".pickle"))
        return result


def _grade(name: str, exercises: tuple, timeout: float) -> dict:
    from autograder.grading import grade_submission

    result = grade_submission(SUBMISSIONS / name, list(exercises), quick=True, timeout=timeout)
    return {ex["id"]: ex for ex in result["exercises"]}


@lru_cache(maxsize=None)
def listed() -> subprocess.CompletedProcess:
    """``python -m autograder list`` (its exit code and output), run once per pytest run: the tests of each
    notebook's exercises read the same listing."""
    with shared("python -m autograder list") as place:
        kept = place and place[0] / f"{place[1]}.pickle"
        if kept and kept.exists():
            return pickle.loads(kept.read_bytes())
        done = subprocess.run([sys.executable, "-m", "autograder", "list"], capture_output=True, text=True,
                              cwd=SUBMISSIONS.parent.parent, timeout=300)
        if kept:
            kept.with_suffix(".part").write_bytes(pickle.dumps(done))
            kept.with_suffix(".part").rename(kept)
        return done


def text(ex: dict) -> str:
    return "\n".join(ex["feedback"] + ex["violations"])


def across_a_socket(obj):
    """``obj`` as the grading process receives it: through the protocol, on a socket pair. A writer thread, so
    that a frame larger than the socket's buffer cannot block (a thread, not a forked process: a forked child
    cannot use the parent's CUDA)."""
    import socket
    import threading

    from autograder import protocol

    a, b = socket.socketpair()
    with a, b:
        sender = threading.Thread(target=protocol.send, args=(a, obj))
        sender.start()
        try:
            return protocol.recv(b)
        finally:
            sender.join()
