"""Scratch folders that never outlive their process for long.

Grading copies the learner's source, and nbgrader's scratch course copies the assignment's source (the
solutions): neither may stay in the temporary directory. ``folder`` removes its folder on every exit a
process can catch (an exception, Ctrl-C, SIGTERM or SIGHUP once ``exit_on_signals`` turned them into
exits); a process killed outright (SIGKILL, a lost node) leaves its folders behind, and ``sweep`` removes
them at the next start: each folder's name holds the id of the process that made it and its machine's
name, and only folders of this machine's processes that are gone are swept (a temporary directory shared
with other machines or containers keeps theirs).
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import tempfile
from pathlib import Path

PREFIX = "autograder-scratch-"
_NAME = re.compile(re.escape(PREFIX) + r"(\d+)@([^/]+?)-")


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname())


@contextlib.contextmanager
def folder(tag: str, base=None):
    """A fresh folder ``<tmp>/autograder-scratch-<pid>@<host>-<tag>-XXXX``, removed when the block ends."""
    path = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}@{_host()}-{tag}-", dir=base))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive (and not ours to sweep)
        return True
    return True


def sweep(base=None) -> list[Path]:
    """Remove the scratch folders left by processes of this machine that are gone; return them."""
    base = Path(base or tempfile.gettempdir())
    swept = []
    for path in base.glob(PREFIX + "*"):
        match = _NAME.match(path.name)
        if not match or match.group(2) != _host() or not path.is_dir():
            continue
        if int(match.group(1)) != os.getpid() and not _alive(int(match.group(1))):
            shutil.rmtree(path, ignore_errors=True)
            swept.append(path)
    return swept


def exit_on_signals(signals=(signal.SIGTERM, signal.SIGHUP)) -> None:
    """Turn the termination signals a scheduler or a closed terminal sends into ``SystemExit``, so that
    every ``with`` block (scratch folders among them) unwinds as it does on Ctrl-C."""
    def stop(signum, _frame):
        raise SystemExit(128 + signum)

    for sig in signals:
        signal.signal(sig, stop)
    # A process started with SIGINT ignored (a background job of a script, a test runner's worker) would never
    # see Ctrl-C's KeyboardInterrupt: the folders would stay. Python's own handler makes it unwind as usual.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
