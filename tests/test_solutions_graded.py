"""Every solution notebook, graded whole as the README tells learners to (``python -m autograder grade
NOTEBOOK``, all its exercises side by side in one grading process), earns every correctness point.

Run as a command, so a crash of the grading process (two torch.profiler sessions at once in 02 once ended
it with a segmentation fault) fails the test instead of ending pytest. Quick cases: 20-70 s a notebook on
the CPU."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autograder import specs

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = sorted(ROOT.glob("solutions/*/*.ipynb"))


@pytest.mark.slow
@pytest.mark.parametrize("notebook", SOLUTIONS, ids=lambda p: p.stem)
def test_a_solution_notebook_graded_whole_earns_every_correctness_point(notebook, tmp_path):
    out = tmp_path / "grade.json"
    env = {**os.environ, "AUTOGRADER_QUICK": "1"}
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(notebook), "--json", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"rc {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    result = json.loads(out.read_text())
    graded = {ex["id"]: ex for ex in result["exercises"]}
    assert sorted(graded) == sorted(e.id for e in specs.for_notebook(notebook.stem))
    lost = {ex_id: ex["feedback"] + ex["violations"] for ex_id, ex in graded.items()
            if not ex["correct"] or ex["score"] * ex["points"] < specs.get(ex_id).correctness_points - 1e-9}
    assert not lost, lost
