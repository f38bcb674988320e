"""The grading call of hidden nbgrader test cells: ``grade("softmax", "04_fused_softmax.ipynb")``.

It grades that exercise of the notebook file in fresh worker processes (what ``python -m autograder
grade`` does), prints the report to stdout only (nbgrader zeroes a test cell that writes to stderr),
never raises, and returns a float in [0, the exercise's points]: nbgrader reads the cell's value as
partial credit, gives *full* credit for a negative or unparsable value and crashes on one above the
cell's points, so the value is clamped and NaN becomes 0.

Its value is trusted only as far as the learner's kernel is: a cell can replace this function. The
course's own ``python -m autograder autograde``/``batch`` grade outside the kernel and set
``AUTOGRADER_TRUSTED_RESULT`` for nbgrader's run, which makes this call print the report already graded
(for feedback) instead of grading again; the gradebook gets the trusted score (autograder.gradebook).
"""
from __future__ import annotations

import contextlib
import math
import os
import sys
import warnings


def clamp_points(points, max_points: float) -> float:
    try:
        points = float(points)
    except (TypeError, ValueError):
        return 0.0
    if not math.isfinite(points):
        return 0.0
    return float(min(max(points, 0.0), float(max_points)))


def grade(exercise_id: str, notebook_path: str, quick: bool | None = None, timeout: float | None = None) -> float:
    max_points = 0.0
    with contextlib.redirect_stderr(sys.stdout), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            from autograder import specs
            from autograder.grading import grade_submission
            from autograder.report import render_text

            trusted = os.environ.get("AUTOGRADER_TRUSTED_RESULT")
            if trusted:
                from autograder.gradebook import trusted_feedback

                return trusted_feedback(exercise_id, notebook_path, trusted)
            max_points = specs.get(exercise_id).points
            result = grade_submission(notebook_path, [exercise_id], quick=quick, timeout=timeout)
            ex = result["exercises"][0]
            print(render_text(result))
            return clamp_points(ex["score"] * ex["points"], max_points)
        except Exception as exc:  # noqa: BLE001  (a test cell must hand nbgrader a number, not a traceback)
            print(f"autograder: could not grade {exercise_id!r} in {notebook_path}: {exc}")
            return 0.0
