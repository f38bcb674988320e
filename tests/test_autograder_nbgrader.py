"""nbgrader end to end (slow): generate the assignment, submit the solution and the untouched student
notebook, autograde, read the gradebook; then crash an autograde run midway and re-run it.

The course here is a small one built in a temp dir (one fused-softmax exercise), so the test does not
depend on the course's own notebooks; the hidden test cell is exactly what CONTRACTS.md prescribes.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

SOLUTION_KERNEL = (Path(__file__).parent / "submissions" / "good_triton.py").read_text()
KERNEL_BODY = SOLUTION_KERNEL[SOLUTION_KERNEL.index("@triton.jit\ndef load_row"):SOLUTION_KERNEL.index("MAX_FUSED_ROW = ")]  # the row helpers and the kernel

pytestmark = pytest.mark.slow


def _source_notebook() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    setup = nbformat.v4.new_code_cell("import course\nimport torch\nimport triton\nimport triton.language as tl")
    solution = nbformat.v4.new_code_cell(
        "### BEGIN SOLUTION\n" + KERNEL_BODY + "### END SOLUTION\n\n"
        "def softmax(x):\n"
        "    ### BEGIN SOLUTION\n"
        "    if x.dim() != 2 or x.shape[1] > 65536:  # the exercise's rule\n"
        "        raise ValueError('softmax needs a 2-D input with rows of at most 65536')\n"
        "    m, n = x.shape\n"
        "    y = torch.empty((m, n), dtype=x.dtype, device=x.device)\n"
        "    _softmax_kernel[(m,)](x, y, x.stride(0), y.stride(0), n, BLOCK=triton.next_power_of_2(n))\n"
        "    return y\n"
        "    ### END SOLUTION\n")
    solution.metadata["nbgrader"] = {"grade": False, "solution": True, "locked": False,
                                     "grade_id": "softmax-solution", "schema_version": 3}
    test = nbformat.v4.new_code_cell(
        "### BEGIN HIDDEN TESTS\nfrom autograder.nbgrader import grade\n"
        "grade(\"softmax\", \"fused.ipynb\")\n### END HIDDEN TESTS")
    test.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "points": 10,
                                 "grade_id": "softmax-hidden-tests", "schema_version": 3}
    nb.cells = [setup, solution, test]
    return nb


def _nbgrader(course: Path, *args, check=True):
    out = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, capture_output=True, text=True,
                         env=_env(), timeout=600)
    if check:
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out


def _scores(course: Path) -> dict:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return {s.student.id: s.score for s in gb.assignment_submissions("fused")}


def _config(root: Path) -> None:
    (root / "nbgrader_config.py").write_text(
        "c = get_config()\nc.CourseDirectory.root = r'%s'\nc.ExecutePreprocessor.timeout = 300\n" % root)


def _env() -> dict:
    # nbgrader runs the `alembic` executable from PATH: the one next to this Python.
    return dict(os.environ, AUTOGRADER_QUICK="1",
                PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))


@pytest.fixture(scope="session")  # kept to the end: xdist interleaves other modules, which would tear a module fixture down
def _generated(tmp_path_factory):
    """The course with its assignment generated (source, release, gradebook), once per test process."""
    root = tmp_path_factory.mktemp("nbgrader-course")
    _config(root)
    (root / "source" / "fused").mkdir(parents=True)
    nbformat.write(_source_notebook(), str(root / "source" / "fused" / "fused.ipynb"))
    _nbgrader(root, "generate_assignment", "fused", "--force")
    return root


@pytest.fixture
def course(_generated, tmp_path):
    """A course of its own for each test: a copy of the generated one, its configuration pointing at it."""
    root = tmp_path / "course"
    shutil.copytree(_generated, root)
    _config(root)
    return root


def _submit(course: Path, student: str, notebook: Path):
    target = course / "submitted" / student / "fused"
    target.mkdir(parents=True)
    shutil.copy(notebook, target / "fused.ipynb")
    (target / "timestamp.txt").write_text("2026-01-01 00:00:00.000000 UTC")


def test_solution_gets_every_correctness_point_and_untouched_notebook_zero(course):
    release = course / "release" / "fused" / "fused.ipynb"
    assert "raise NotImplementedError" in release.read_text()
    _submit(course, "solved", course / "source" / "fused" / "fused.ipynb")
    _submit(course, "untouched", release)
    _nbgrader(course, "autograde", "fused", "--create")
    scores = _scores(course)
    from autograder.specs import get

    assert scores["solved"] == pytest.approx(get("softmax").correctness_points)  # no GPU: perf points 0
    assert scores["untouched"] == 0


def test_a_crashed_autograde_leaves_a_usable_gradebook_and_a_rerun_completes_it(course):
    for student in ("a_first", "b_second", "c_third"):
        _submit(course, student, course / "source" / "fused" / "fused.ipynb")
    proc = subprocess.Popen([sys.executable, "-m", "nbgrader", "autograde", "fused", "--create"], cwd=course,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(), start_new_session=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not (course / "autograded" / "b_second").exists():
        time.sleep(0.5)
    time.sleep(3)  # mid-way through the second student's notebook
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = _scores(course)  # the gradebook opens and reads after the crash
    assert partial.get("a_first") in (None, 7.0)
    assert partial.get("c_third") is None  # killed before the third student was graded
    _nbgrader(course, "autograde", "fused", "--create", "--force")
    assert _scores(course) == {"a_first": 7.0, "b_second": 7.0, "c_third": 7.0}
