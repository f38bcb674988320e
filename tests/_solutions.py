"""Each solution notebook graded whole once per test run, for the tests that need its grade.

``python -m autograder grade NOTEBOOK`` (quick cases, every exercise side by side in one grading
process, as the README tells learners) runs once per notebook; tests/test_solutions_graded.py judges
its result and tests/test_notebooks.py executes the notebook with it as the trusted result, the way
``python -m autograder autograde`` runs a notebook after grading it outside the kernel (the hidden cells
then print that report instead of grading again), and tests/test_autograder_specs_10.py judges 10's. The
grade is made once per run, by the first process that asks for it (tests/_autograder_helpers.shared); both
tests of a notebook share one xdist group, so they do not wait for each other.
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
                return Graded(0, "graded by another process of this run", json.loads(out.read_text()), trusted)
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
    trusted = folder / f"{assignment}.trusted.json"
    trusted.write_text(json.dumps({"notebooks": {assignment: result}}))
    return Graded(done.returncode, log, result, trusted)


@pytest.fixture(scope="session")
def solution_graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("solutions-graded")
    return lambda assignment: graded_whole(assignment, folder)
