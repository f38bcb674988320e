"""probes.suite_cost: each test's wall and CPU time, and the processes it started, summed by module."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from probes import suite_cost

ROOT = Path(__file__).resolve().parent.parent.parent


def test_a_started_process_is_named_by_its_command_line():
    assert suite_cost.kind([sys.executable, "-m", "autograder.worker", "5"]) == "worker"
    assert suite_cost.kind(["bwrap", "--unshare-all", "--", sys.executable, "-m", "autograder.worker", "5"]) == "worker"
    assert suite_cost.kind([sys.executable, "-m", "autograder", "grade", "x.ipynb"]) == "command"
    assert suite_cost.kind([sys.executable, "-m", "ipykernel_launcher", "-f", "k.json"]) == "kernel"
    assert suite_cost.kind(["python3", "-c", "pass"]) == "python"
    assert suite_cost.kind(["git", "status"]) is None


def test_each_test_gets_a_line_with_what_it_started_and_the_modules_add_up(tmp_path):
    (tmp_path / "test_spends.py").write_text(
        "import subprocess, sys\n"
        "def test_starts_python():\n"
        "    subprocess.run([sys.executable, '-c', 'sum(range(3 * 10 ** 6))'], check=True)\n"
        "def test_starts_nothing():\n"
        "    pass\n")
    log = tmp_path / "cost.jsonl"
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "probes.suite_cost", str(tmp_path / "test_spends.py"),
                           "-q", "-p", "no:cacheprovider"], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, suite_cost.LOG: str(log)}, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = {line["test"].rsplit("::", 1)[1]: line for line in map(json.loads, log.read_text().splitlines())}
    assert lines["test_starts_python"]["python"] == 1 and lines["test_starts_python"]["cpu_started"] > 0
    assert lines["test_starts_nothing"]["python"] == 0 and lines["test_starts_nothing"]["cpu_started"] == 0
    assert all(line["worker"] == line["command"] == line["kernel"] == 0 for line in lines.values())
    (row,) = suite_cost.summary(lines.values()).values()
    assert row["tests"] == 2 and row["python"] == 1
    assert row["cpu"] == pytest.approx(sum(line["cpu_own"] + line["cpu_started"] for line in lines.values()))
    assert suite_cost.main([str(log)]) == 0
