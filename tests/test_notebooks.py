"""solutions/ is the one source: it executes top to bottom, and notebooks/ is exactly what it generates."""
import os
import pathlib
import shutil
import subprocess
import sys

import nbformat
import pytest

import nbgrader_config
from tools.execute_notebook import NotebookFailed, execute, warnings_printed
from tools.strip_outputs import has_outputs

from _solutions import each_solution, solution_graded  # noqa: F401  (the fixture)

ROOT = pathlib.Path(__file__).resolve().parent.parent
RELEASED = nbgrader_config.RELEASED
# Notebooks whose execution on the CPU prints no Python warning (read, and each cause fixed or filtered with
# its reason); test_solution_executes_top_to_bottom keeps them so.
WARNING_FREE = ("06_matmul_fused_mlp", "07_flash_attention", "08_memory")
BIN = pathlib.Path(sys.executable).parent


def _solution(a):
    return ROOT / "solutions" / a / f"{a}.ipynb"


def _student(a):
    return ROOT / "notebooks" / a / f"{a}.ipynb"


def _nbgrader_env():
    # nbgrader runs helper programs (alembic) by name: the venv's bin must be on PATH.
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def test_at_least_one_assignment_is_released():
    assert RELEASED, "solutions/ holds no assignment notebook"
    assert RELEASED == [a for a in nbgrader_config.ASSIGNMENTS if a in RELEASED], "assignments out of order"


@pytest.mark.parametrize("assignment", RELEASED)
def test_solution_committed_without_outputs(assignment):
    nb = nbformat.read(_solution(assignment), as_version=4)
    assert not has_outputs(nb), f"{_solution(assignment)} has outputs: run `python -m tools.strip_outputs solutions`"


@pytest.fixture(scope="session")  # kept to the end: xdist interleaves other modules, which would tear a module fixture down
def generated(tmp_path_factory):
    """Run `make notebooks` (tools/generate_notebooks.py) on a copy of the course and return its notebooks/."""
    course = tmp_path_factory.mktemp("course")
    shutil.copy(ROOT / "nbgrader_config.py", course)
    (course / "course").mkdir()
    shutil.copy(ROOT / "course" / "manifest.py", course / "course")  # nbgrader_config.py reads it
    shutil.copytree(ROOT / "solutions", course / "solutions")
    # a process apart, as `make notebooks` runs it (nbgrader's applications are process-wide singletons)
    res = subprocess.run([sys.executable, "-m", "tools.generate_notebooks", "--course", str(course)], cwd=ROOT,
                         capture_output=True, text=True, env=_nbgrader_env())
    assert res.returncode == 0, f"generating the student notebooks failed:\n{res.stdout}\n{res.stderr}"
    assert sorted(p.name for p in (course / "notebooks").iterdir()) == sorted(RELEASED)
    return course / "notebooks"


def _comparable(nb):
    return [(c.cell_type, c.source, dict(c.metadata)) for c in nb.cells], dict(nb.metadata)


@pytest.mark.parametrize("assignment", RELEASED)
def test_student_notebook_matches_what_solutions_generate(generated, assignment):
    assert _student(assignment).exists(), f"{_student(assignment)} missing: run `make notebooks`"
    want = nbformat.read(generated / assignment / f"{assignment}.ipynb", as_version=4)
    have = nbformat.read(_student(assignment), as_version=4)
    assert not has_outputs(have), f"{_student(assignment)} has outputs"
    assert _comparable(have) == _comparable(want), (
        f"{_student(assignment)} differs from what solutions/ generates: run `make notebooks` and commit")


def test_no_student_notebook_without_a_source():
    orphans = [p for p in (ROOT / "notebooks").glob("*/*.ipynb") if p.parent.name not in RELEASED]
    assert not orphans, f"notebooks without a source in solutions/: {orphans}"


@pytest.mark.parametrize("assignment", RELEASED)
def test_student_version_has_no_solutions_or_hidden_tests(assignment):
    nb = nbformat.read(_student(assignment), as_version=4)
    text = "\n".join(c.source for c in nb.cells)
    assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text
    answers = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "code"]
    assert answers, "a student notebook with no exercise"
    for cell in answers:
        assert "raise NotImplementedError" in cell.source, f"exercise cell without NotImplementedError:\n{cell.source}"


def _hidden_grades(nb) -> dict[str, str]:
    """What each hidden grading cell of an executed notebook printed and returned, by exercise."""
    import re

    found = {}
    for cell in nb.cells:
        for ex_id in re.findall(r'grade\(\s*"([a-z_0-9]+)"', cell.source):
            if "BEGIN HIDDEN TESTS" in cell.source:
                found[ex_id] = "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "")
                                       for o in cell.get("outputs", []))
    return found


@pytest.mark.slow
@pytest.mark.parametrize("assignment", each_solution())
def test_solution_executes_top_to_bottom(assignment, solution_graded):
    """Every cell runs without an error. The hidden cells print the notebook's grade made outside the
    kernel (tests/_solutions.py), as in `python -m autograder autograde`, instead of grading it again."""
    graded = solution_graded(assignment)
    if graded.trusted_file is None:
        pytest.fail(f"grading {assignment} whole failed, so its hidden cells have no grade to print:\n{graded.log}",
                    pytrace=False)
    env = {**os.environ, "AUTOGRADER_TRUSTED_RESULT": str(graded.trusted_file)}
    try:
        done = execute(_solution(assignment), timeout=900, env=env)
    except NotebookFailed as err:
        pytest.fail(str(err), pytrace=False)
    printed = _hidden_grades(done.notebook)
    assert sorted(printed) == sorted(ex["id"] for ex in graded.result["exercises"])
    for ex in graded.result["exercises"]:
        out = printed[ex["id"]]
        assert "Graded outside this notebook's kernel" in out, (ex["id"], out[-1000:])
        assert out.rstrip().endswith(repr(float(ex["score"] * ex["points"]))), (ex["id"], out[-300:])
    print(f"{assignment}: {done.seconds:.1f} s")
    if assignment in WARNING_FREE:
        assert not warnings_printed(done.notebook), "\n".join(warnings_printed(done.notebook))


def test_a_warning_printed_into_a_notebook_is_found():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_code_cell("plot()")]
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", name="stderr", text=(
        "/tmp/ipykernel_1/2.py:3: UserWarning: linestyle is redundantly defined\n  ax.plot(x, y)\n")),
        nbformat.v4.new_output("stream", name="stdout", text="DeprecationWarning: printed on purpose\n")]
    assert warnings_printed(nb) == ["cell 2: /tmp/ipykernel_1/2.py:3: UserWarning: linestyle is redundantly defined"]


def test_harness_names_notebook_and_failing_cell(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_markdown_cell("text"),
                nbformat.v4.new_code_cell("y = x +\n")]
    path = tmp_path / "broken.ipynb"
    nbformat.write(nb, path)
    with pytest.raises(NotebookFailed) as err:
        execute(path, timeout=60)
    message = str(err.value)
    assert "broken.ipynb" in message and "cell 3" in message and "SyntaxError" in message and "y = x +" in message


def test_a_kernel_that_dies_is_named_with_its_cell_and_the_earlier_outputs_are_kept(tmp_path, capsys):
    """A kernel killed mid-notebook (out of memory, a crash in native code) names the cell it died in, and
    ``--save-to``/``--print-output`` keep what the cells before it measured."""
    from tools import execute_notebook

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("print('measured 1.23x')"),
                nbformat.v4.new_code_cell("import os\nos.kill(os.getpid(), 9)"),
                nbformat.v4.new_code_cell("print('never')")]
    path = tmp_path / "dies.ipynb"
    nbformat.write(nb, path)
    with pytest.raises(NotebookFailed) as err:
        execute(path, timeout=60)
    assert "cell 2" in str(err.value) and "the kernel died" in str(err.value)
    saved = tmp_path / "saved"
    assert execute_notebook.main([str(path), "--save-to", str(saved), "--print-output", "--timeout", "60"]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "measured 1.23x" in out and "never" not in out
    assert "measured 1.23x" in execute_notebook.printed(nbformat.read(saved / "dies.ipynb", as_version=4))


@pytest.mark.parametrize("assignment", RELEASED)
def test_hidden_grading_cells_match_the_autograder_specs(assignment):
    """Every exercise of the notebook has one hidden test cell calling grade(id, this notebook), whose
    nbgrader points equal the spec's (a larger value from grade() would crash nbgrader's autograde)."""
    import re

    from autograder import specs

    nb = nbformat.read(_solution(assignment), as_version=4)
    graded = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        for ex_id, path in re.findall(r'grade\(\s*"([a-z_0-9]+)"\s*,\s*"([^"]+)"', cell.source):
            assert meta.get("grade") and not meta.get("solution"), f"grade({ex_id!r}) outside a test cell"
            assert "BEGIN HIDDEN TESTS" in cell.source, f"grade({ex_id!r}) is not hidden"
            assert path == f"{assignment}.ipynb", f"grade({ex_id!r}) grades {path}, not this notebook"
            spec = specs.get(ex_id)
            assert spec.notebook == assignment, f"{ex_id} belongs to {spec.notebook}"
            assert meta["points"] == spec.correctness_points + spec.performance_points, (
                f"{ex_id}: cell has {meta['points']} points, the spec {spec.correctness_points + spec.performance_points}")
            graded.append(ex_id)
    assert sorted(graded) == sorted(e.id for e in specs.for_notebook(assignment)), "each exercise graded exactly once"
