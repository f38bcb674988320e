"""Where the test suite's time goes, test by test: a pytest plugin, and a summary by module.

    AUTOGRADER_SANDBOX=0 python -m pytest -p probes.suite_cost tests/test_feedback.py -n 2 --dist loadgroup
    python -m probes.suite_cost test-cost.jsonl [more.jsonl ...]

The plugin writes one JSON line per test to ``TEST_COST_LOG`` (default ``test-cost.jsonl``): its wall
seconds; the CPU seconds of the test's own process and of the processes it started and waited for; and
how many grading workers, ``python -m autograder`` commands, notebook kernels, other Python processes and
forks it started. The summary adds them up by module, the numbers to compare before and after a change to
the suite (CPU is what a busy machine does not distort; wall time is).

A grading worker runs in the sandbox's own PID namespace, whose CPU the waiting process never receives:
``AUTOGRADER_SANDBOX=0`` counts it (the worker does the same work either way). A process started by a
process the test started (a command's workers) is counted as that command's CPU, not as a start.
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from collections import defaultdict

import pytest

LOG = "TEST_COST_LOG"
STARTS = ("worker", "command", "kernel", "python")
_started = dict.fromkeys(STARTS + ("forks",), 0)


def kind(argv) -> str | None:
    """What a started process is, from its command line (None: not Python)."""
    words = [str(argv)] if isinstance(argv, (str, bytes, os.PathLike)) else [str(a) for a in argv]
    line = " ".join(words)
    if "autograder.worker" in line:
        return "worker"
    if "-m autograder " in line + " ":
        return "command"
    if "ipykernel" in line:
        return "kernel"
    first = os.path.basename(words[0]) if words else ""
    return "python" if words and (words[0] == sys.executable or first.startswith("python")) else None


def _count(what: str) -> None:
    _started[what] += 1


def _cpu() -> tuple[float, float]:
    own, waited = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, waited.ru_utime + waited.ru_stime


def pytest_configure(config):
    popen_init = subprocess.Popen.__init__

    def counted(self, args, *a, **k):
        if (what := kind(args)) is not None:
            _count(what)
        popen_init(self, args, *a, **k)

    subprocess.Popen.__init__ = counted
    os.register_at_fork(after_in_parent=lambda: _count("forks"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    before, (own0, waited0), start = dict(_started), _cpu(), time.perf_counter()
    yield
    own1, waited1 = _cpu()
    line = {"test": item.nodeid, "wall": round(time.perf_counter() - start, 3), "cpu_own": round(own1 - own0, 3),
            "cpu_started": round(waited1 - waited0, 3), **{k: _started[k] - before[k] for k in _started}}
    with open(os.environ.get(LOG, "test-cost.jsonl"), "a") as out:  # appends: xdist's processes share it
        out.write(json.dumps(line) + "\n")


def summary(lines) -> dict[str, dict]:
    """Per module: tests, wall, CPU (own + started) and the starts, summed."""
    by_module: dict[str, dict] = defaultdict(lambda: defaultdict(float))
    for line in lines:
        row = by_module[line["test"].split("::", 1)[0]]
        row["tests"] += 1
        row["wall"] += line["wall"]
        row["cpu"] += line["cpu_own"] + line["cpu_started"]
        for k in STARTS + ("forks",):
            row[k] += line[k]
    return {module: dict(row) for module, row in sorted(by_module.items())}


def main(argv=None) -> int:
    paths = (argv if argv is not None else sys.argv[1:]) or ["test-cost.jsonl"]
    lines = [json.loads(text) for path in paths for text in open(path) if text.strip()]
    rows = summary(lines)
    total = defaultdict(float)
    print(f"{'module':45s} {'tests':>5s} {'wall s':>8s} {'CPU s':>8s} " + " ".join(f"{k:>7s}" for k in STARTS + ("forks",)))
    for module, row in [*rows.items(), ("total", total)]:
        if module != "total":
            for k, v in row.items():
                total[k] += v
        print(f"{module:45s} {row['tests']:5.0f} {row['wall']:8.1f} {row['cpu']:8.1f} "
              + " ".join(f"{row[k]:7.0f}" for k in STARTS + ("forks",)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
