"""Each solution notebook graded whole once per test run, for the tests that need its grade.

``python -m autograder grade NOTEBOOK`` (quick cases, every exercise side by side in one grading
process, as the README tells learners) runs once per notebook; tests/test_solutions_graded.py judges
its result and tests/test_notebooks.py executes the notebook with it as the trusted result, the way
``python -m autograder autograde`` runs a notebook after grading it outside the kernel (the hidden cells
then print that report instead of grading again), and the spec tests of 05-10 judge their exercises' grades
(tests/test_autograder_specs_*.py: a correct submission earns every point the CPU gives). The grade is made
once per run, by the first process that asks for it (tests/_autograder_helpers.shared); every test that reads a
notebook's grade is in that notebook's xdist group (``solution-NN_name``), so none waits for another's grading.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pytest

import nbgrader_config
from _autograder_helpers import shared

ROOT = Path(__file__).resolve().parent.parent
RELEASED = nbgrader_config.RELEASED


def path(assignment: str) -> Path:
    return ROOT / "solutions" / assignment / f"{assignment}.ipynb"


def each_solution():
    """Parameters for a test per solution notebook, grouped with the other test of the same notebook."""
    return [pytest.param(a, id=a, marks=pytest.mark.xdist_group(f"solution-{a}")) for a in RELEASED]


@dataclass
class Graded:
    returncode: int
    log: str
    result: dict | None  # the --json object
    trusted_file: Path | None  # {"notebooks": {assignment: result}}: AUTOGRADER_TRUSTED_RESULT's format
    report: str = ""  # what the command printed: the readable report, with each exercise's table of cases

    def exercise(self, ex_id: str) -> dict:
        return next(ex for ex in self.result["exercises"] if ex["id"] == ex_id)

    def case_rows(self, ex_id: str) -> list[str]:
        """The rows of ``ex_id``'s table of cases in the printed report (the --json object has no cases), each
        ending in its verdict."""
        lines = self.report.splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith(("[PASS] ", "[FAIL] "))
                     and line.split()[1] == f"{ex_id}:")
        rows, in_table = [], False
        for line in lines[start + 1:]:
            if not line.startswith("    ") or line.startswith(("    violation:", "    memory:", "    performance:",
                                                                 "    - ")):
                if in_table or not line.startswith("    "):
                    break
                continue
            if line.split()[0] == "case" and line.rstrip().endswith("verdict"):
                in_table = True
            elif in_table:
                rows.append(line.strip())
        return rows


@lru_cache(maxsize=None)
def graded_whole(assignment: str, folder: Path) -> Graded:
    """The notebook graded once per run: by the first process of the run to ask (tests/_autograder_helpers.shared),
    the others read its result."""
    with shared(f"solution notebook {assignment}") as place:
        if place is not None:
            folder = place[0] / place[1]
            folder.mkdir(exist_ok=True)
            out, trusted = folder / f"{assignment}.json", folder / f"{assignment}.trusted.json"
            if trusted.exists():
                return Graded(0, "graded by another process of this run", json.loads(out.read_text()), trusted,
                              (folder / f"{assignment}.report.txt").read_text())
        return _grade_whole(assignment, folder)


def _grade_whole(assignment: str, folder: Path) -> Graded:
    out = folder / f"{assignment}.json"
    env = {**os.environ, "AUTOGRADER_QUICK": "1"}
    # a command, so a crash of the grading process fails the tests instead of ending pytest
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(path(assignment)), "--json", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    log = f"rc {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    if done.returncode != 0 or not out.exists():
        return Graded(done.returncode, log, None, None)
    result = json.loads(out.read_text())
    (folder / f"{assignment}.report.txt").write_text(done.stdout)
    trusted = folder / f"{assignment}.trusted.json"
    trusted.write_text(json.dumps({"notebooks": {assignment: result}}))  # last: it says the grade is complete
    return Graded(done.returncode, log, result, trusted, done.stdout)


@pytest.fixture(scope="session")
def solution_graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("solutions-graded")
    return lambda assignment: graded_whole(assignment, folder)
