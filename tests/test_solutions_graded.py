"""Every solution notebook, graded whole as the README tells learners to (``python -m autograder grade
NOTEBOOK``, all its exercises side by side in one grading process), earns every correctness point.

Run as a command, so a crash of the grading process (two torch.profiler sessions at once in 02 once ended
it with a segmentation fault) fails the test instead of ending pytest. Quick cases: 20-70 s a notebook on
the CPU, once per notebook (tests/_solutions.py: tests/test_notebooks.py reuses the grade)."""
from __future__ import annotations

import pytest

from autograder import specs
from _solutions import each_solution, solution_graded  # noqa: F401  (the fixture)


@pytest.mark.slow
@pytest.mark.parametrize("assignment", each_solution())
def test_a_solution_notebook_graded_whole_earns_every_correctness_point(assignment, solution_graded):
    done = solution_graded(assignment)
    assert done.returncode == 0 and done.result, done.log
    graded = {ex["id"]: ex for ex in done.result["exercises"]}
    assert sorted(graded) == sorted(e.id for e in specs.for_notebook(assignment))
    lost = {ex_id: ex["feedback"] + ex["violations"] for ex_id, ex in graded.items()
            if not ex["correct"] or ex["score"] * ex["points"] < specs.get(ex_id).correctness_points - 1e-9}
    assert not lost, lost
