"""CLI exit codes and messages, the JSON report, atomic writes, notebook extraction, grade() and check()."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from _autograder_helpers import SUBMISSIONS, listed

ROOT = Path(__file__).resolve().parent.parent


def run_cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "autograder", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, timeout=300)


# --------------------------------------------------------------------------- CLI

def test_list_shows_every_exercise_with_notebook_points_and_signature():
    from autograder import specs

    out = listed()
    assert out.returncode == 0
    for ex_id, nb in (("softmax", "04_fused_softmax"), ("bias_gelu", "03_triton_basics"),
                      ("time_floor", "00_measure"), ("classify_bound", "02_profiling")):
        line = next(l for l in out.stdout.splitlines() if l.startswith(ex_id + " "))
        assert nb in line and specs.get(ex_id).signature in line


@pytest.mark.parametrize("make, message", [
    (lambda d: d / "missing.ipynb", "no such file"),
    (lambda d: _write(d / "notes.txt", "hello"), "not a notebook or a Python file"),
    (lambda d: _write(d / "broken.ipynb", "{not json"), "invalid JSON"),
    (lambda d: _write(d / "bad.py", "def softmax(x):\n    return (\n"), "syntax error"),
    (lambda d: _notebook(d / "04_fused_softmax.ipynb", ["import torch", "def softmax(x)\n    pass"]),
     "syntax error in 04_fused_softmax.ipynb at cell 2, line 1"),
    # Python reads it, the audit's recursive walks did not: 250 terms of 1+1+... was an internal grader error
    (lambda d: _write(d / "long_sum.py", "x = " + "1+" * 500 + "1\n"), "at line 1: nested 503 levels deep"),
])
def test_unusable_input_exits_2_with_one_line(tmp_path, make, message):
    out = run_cli("grade", str(make(tmp_path)))
    assert out.returncode == 2
    assert message in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert "Traceback" not in out.stderr


# Each is the SubmissionError that the command above prints in one line with exit code 2 (read here, in this
# process: a command per file cost the suite a Python importing torch each).
@pytest.mark.parametrize("make, message", [
    # more nesting than Python's parser has stack for (RecursionError, MemoryError), a null byte (ValueError
    # before Python 3.12): Python cannot run it either, and the grading said so instead of a traceback
    (lambda d: _write(d / "deep.py", "x = " + "1+" * 200_000 + "1\n"), "nested too deeply for Python to read"),
    (lambda d: _write(d / "deep_unary.py", "x = " + "-" * 200_000 + "1\n"), "nested too deeply for Python to read"),
    (lambda d: _write(d / "null.py", "x = 1\0\n"), "syntax error"),
    # notebooks the readers took a traceback on (and, read by a batch to order the class, the whole class's run
    # with them): JSON nested deeper than its reader's stack, cells that are not nbformat's, %%time inside
    # %%time thousands deep, %run of a file that is not text, more line magics than IPython transforms
    (lambda d: _write(d / "deep.ipynb", '{"cells": ' + "[" * 100_000 + "]" * 100_000 + "}"), "nested too deeply"),
    (lambda d: _write(d / "word.ipynb", json.dumps({"cells": ["x = 1"]})), "cell 1: a str, not a cell"),
    (lambda d: _write(d / "meta.ipynb", json.dumps({"cells": [{"cell_type": "code", "source": "", "metadata": []}]})),
     "cell 1: its metadata is not a mapping"),
    (lambda d: _write(d / "tags.ipynb", json.dumps({"cells": [{"cell_type": "code", "metadata": {"tags": 5}}]})),
     "cell 1: its tags are not a list of words"),
    (lambda d: _write(d / "ints.ipynb", json.dumps({"cells": [{"cell_type": "code", "source": [1, 2]}]})),
     "cell 1: its source is not text"),
    (lambda d: _notebook(d / "timed.ipynb", ["%%time\n" * 3000 + "x = 1\n"]), "cell magics nested too deeply"),
    (lambda d: (d / "helper.py").write_bytes(b"x = '\xff'\n") and _notebook(d / "run.ipynb", ["%run helper.py"]),
     "%run helper.py: not a text file"),
    (lambda d: _notebook(d / "magics.ipynb", ["%time x = 1\n" * 500]), "a cell IPython cannot read"),
])
def test_unreadable_input_is_a_one_line_submission_error(tmp_path, make, message):
    from autograder.submission import SubmissionError, load

    with pytest.raises(SubmissionError) as raised:
        load(make(tmp_path))
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_unknown_exercise_exits_2():
    out = run_cli("grade", str(SUBMISSIONS / "good_triton.py"), "--exercise", "nope")
    assert out.returncode == 2 and "unknown exercise" in out.stderr


def test_grade_exits_0_and_writes_the_json_object(tmp_path):
    target = tmp_path / "out" / "result.json"
    out = run_cli("grade", str(SUBMISSIONS / "wrong_in_bf16.py"), "--exercise", "softmax", "--quick",
                  "--json", str(target))
    assert out.returncode == 0, out.stderr  # a failing submission still exits 0: grading ran
    assert "[FAIL] softmax" in out.stdout
    data = json.loads(target.read_text())
    assert set(data) == {"submission", "device", "exercises", "total", "max_total"}
    (ex,) = data["exercises"]
    assert set(ex) == {"id", "score", "points", "correct", "performance", "violations", "feedback", "seconds"}
    assert ex["seconds"]["total"] >= ex["seconds"]["worker start"] > 0
    assert ex["id"] == "softmax" and ex["correct"] is False and ex["score"] == 0 and ex["points"] == 10
    assert data["total"] == 0 and data["max_total"] == 10
    perf = ex["performance"]
    assert set(perf) == {"graded", "time_ms", "baseline", "baseline_ms", "speedup", "achieved",
                         "fraction_of_peak", "threshold", "passed"}
    assert perf["graded"] is False and perf["time_ms"] is None
    assert any("performance is graded on a GPU" in f for f in ex["feedback"])
    assert not list(target.parent.glob(".*tmp"))


# --------------------------------------------------------------------------- atomic writes (guarantee 6)

def test_json_write_is_atomic(tmp_path):
    from autograder.report import write_json_atomic

    target = tmp_path / "r.json"
    write_json_atomic(target, {"total": 1})

    class Explodes:
        def __repr__(self):
            raise RuntimeError("disk full")

    with pytest.raises(Exception):
        write_json_atomic(target, {"total": 2, "big": ["x" * 100000], "bad": float("nan")})
    assert json.loads(target.read_text()) == {"total": 1}  # the old file, whole
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary left behind


def test_a_json_file_has_the_umasks_mode_from_the_moment_it_appears(tmp_path, monkeypatch):
    """Written through a temporary file (0600), it gets the mode a plain open() gives before the rename: a
    grading killed right after writing a learner's result leaves it readable by the course's group."""
    import os

    from measure import files

    renamed = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda src, dst: renamed.append(os.stat(src).st_mode & 0o777)
                        or real_replace(src, dst))
    old = os.umask(0o002)
    try:
        files.write_json_atomic(tmp_path / "ann.json", {"total": 1})
    finally:
        os.umask(old)
    assert renamed == [0o664] and (tmp_path / "ann.json").stat().st_mode & 0o777 == 0o664


# --------------------------------------------------------------------------- performance arithmetic (guarantee 5)

def test_partial_credit_is_linear_between_floor_and_threshold():
    from autograder.timing import performance_credit

    assert performance_credit(1.0, 0.9, 0.3) == 1.0
    assert performance_credit(0.9, 0.9, 0.3) == 1.0
    assert performance_credit(0.6, 0.9, 0.3) == pytest.approx(0.5)
    assert performance_credit(0.3, 0.9, 0.3) == 0.0
    assert performance_credit(0.1, 0.9, 0.3) == 0.0
    assert performance_credit(None, 0.9, 0.3) == 0.0
    assert performance_credit(float("nan"), 0.9, 0.3) == 0.0


def test_performance_entry_fields_from_injected_numbers():
    from autograder.specs import get
    from autograder.timing import performance_entry

    spec = get("softmax").performance
    nbytes = 2 * 16384 * 4096 * 4
    e = performance_entry(spec, time_ms=0.25, baseline_ms=0.2, nbytes=nbytes, flops=None,
                          peaks={"copy_gbps": 3000.0, "matmul_tflops": 700.0})
    assert e["graded"] and e["speedup"] == pytest.approx(0.8)
    assert e["achieved"]["unit"] == "GB/s" and e["achieved"]["value"] == pytest.approx(nbytes / 0.25e-3 / 1e9)
    assert e["fraction_of_peak"] == pytest.approx(e["achieved"]["value"] / 3000.0)
    assert e["threshold"] == spec.threshold > 0.8 and e["passed"] is False
    f = performance_entry(spec, time_ms=2.0, baseline_ms=2.0, nbytes=0, flops=2 * 8192 ** 3,
                          peaks={"copy_gbps": 3000.0, "matmul_tflops": 700.0})
    assert f["achieved"]["unit"] == "TFLOP/s" and f["passed"] is True


def test_without_a_gpu_performance_is_skipped_with_a_reason():
    from autograder.specs import get
    from autograder.timing import NOT_GRADED_REASON, should_time

    spec = get("softmax").performance
    assert should_time(False, spec) == (False, NOT_GRADED_REASON)
    assert should_time(True, spec) == (True, "")
    assert "performance is graded on a GPU" in NOT_GRADED_REASON
    assert should_time(True, None)[0] is False


def test_peaks_are_cached_per_machine(tmp_path, monkeypatch):
    from autograder import timing
    from measure import ceilings

    monkeypatch.setattr(ceilings, "cache_path", lambda: tmp_path / "peaks.json")
    monkeypatch.setattr(ceilings, "machine_key", lambda: "Fake GPU|torch x|triton y|cuda z")
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    calls = []
    monkeypatch.setattr(ceilings, "measure_ceilings", lambda timer, device: calls.append(1) or (1.0, 2.0))
    assert timing.get_peaks()["copy_gbps"] == 1.0
    assert timing.get_peaks()["matmul_tflops"] == 2.0
    assert calls == [1]
    assert "Fake GPU|torch x|triton y|cuda z" in json.loads((tmp_path / "peaks.json").read_text())


# --------------------------------------------------------------------------- notebooks

def _write(path, text):
    path.write_text(text)
    return path


def _notebook(path, sources, metas=None):
    nb = nbformat.v4.new_notebook()
    for i, src in enumerate(sources):
        cell = nbformat.v4.new_code_cell(src)
        cell.metadata.update((metas or {}).get(i, {}))
        nb.cells.append(cell)
    nbformat.write(nb, str(path))
    return path


def test_notebook_submission_drops_test_and_demo_cells_and_magics(tmp_path):
    from autograder.submission import load

    path = _notebook(tmp_path / "nb.ipynb", [
        "import torch\n%matplotlib inline\n!pip list",
        "def softmax(x):\n    return x",
        "assert False  # hidden test",
        "plot_everything()",
        "y = 1",
    ], metas={2: {"nbgrader": {"grade": True, "solution": False, "points": 1}},
              3: {"tags": ["demo"]},
              1: {"nbgrader": {"grade": False, "solution": True}}})
    sub = load(path)
    assert "def softmax" in sub.source and "y = 1" in sub.source
    assert "assert False" not in sub.source and "plot_everything" not in sub.source
    assert "%matplotlib" not in sub.source.replace("# dropped for grading: %matplotlib", "")
    assert {"softmax", "torch", "y"} <= sub.defined
    line = sub.source.splitlines().index("    return x") + 1
    assert sub.where(line) == "cell 2, line 2"
    compile(sub.source, "x", "exec")


def test_cell_magics_and_a_modulo_that_starts_a_line_are_read_as_jupyter_reads_them(tmp_path):
    """A %%bash cell is another language: the whole cell is dropped, not parsed as Python; a line that
    starts with % inside brackets or after a backslash (Black formats the Triton tutorial's grouped
    ordering that way) is Python's modulo and is kept; %time runs its statement, as in IPython."""
    from autograder.submission import load

    path = _notebook(tmp_path / "nb.ipynb", [
        "%%bash\necho hi\nls -l | wc -l",
        "pid, group_size_m = 7, 3\nfirst_pid_m = (\n    pid\n    % group_size_m\n)\nsecond = pid \\\n% group_size_m",
        "%time y = 1\n!pip list",
    ])
    sub = load(path)
    compile(sub.source, "nb", "exec")
    space = {}
    exec(sub.source, space)
    assert space["first_pid_m"] == 1 and space["second"] == 1 and space["y"] == 1
    assert "echo hi" not in sub.source.replace("# dropped for grading: echo hi", "")


_IPYTHON_CELLS = [
    "%%time\nimport math\n\ndef timed(x):\n    return x + 1",           # the body runs: timed is defined
    "%%capture log\nimport math\ncaptured = 2\n%time z = captured * 2",  # log is a stand-in; the body runs
    "%%timeit\nnever = 1",                                                  # its own scope: nothing defined
    "x = 3\n%time y = timed(x)\nr = %timeit -o timed(x)\nbest = r.best * 1e3\nprint(f'{best:.3f}')",
    "gpu = !nvidia-smi --query-gpu=name\nprint(gpu[0] if gpu else 'no GPU')\nmath.sqrt?\n!pip list",
    "%run helper.py\nw = helper_value + 1  # why not?",
    "%%writefile written_helper.py\nWRITTEN = 5\n",
    "from written_helper import WRITTEN",
]


def _ipython_notebook(tmp_path):
    _write(tmp_path / "helper.py", "import math\n\nhelper_value = math.floor(2.5)\n")
    return _notebook(tmp_path / "nb.ipynb", _IPYTHON_CELLS)


def _run_graded_source(sub) -> dict:
    from autograder.submission import STAND_IN
    from autograder.worker import IPythonOnly

    space = {STAND_IN: IPythonOnly}
    exec(compile(sub.source, "nb", "exec"), space)
    return space


def test_ipython_syntax_is_graded_as_ipython_runs_it(tmp_path, capsys, monkeypatch):
    """IPython's own transformer reads magics, shell escapes and help; each does to the namespace what it does
    in Jupyter: %%time, %%capture and %time run their Python, %run runs the file's lines (named by the file),
    %timeit, shell commands and help run nothing, and a value taken from one is a stand-in a later line can
    print and read."""
    from autograder.submission import load

    sub = load(_ipython_notebook(tmp_path))
    assert not (tmp_path / "written_helper.py").exists()  # written when the notebook runs: audited as written
    assert {os.path.basename(p): text for p, text in sub.helpers.items()} == {"written_helper.py": "WRITTEN = 5\n"}
    (tmp_path / "written_helper.py").write_text("WRITTEN = 5\n")  # as running the notebook leaves it
    monkeypatch.syspath_prepend(str(tmp_path))
    space = _run_graded_source(sub)
    assert space["y"] == 4 and space["z"] == 4 and space["w"] == 3 and "never" not in space
    assert not space["gpu"] and "not run while graded" in repr(space["r"])
    assert "not run while graded" in capsys.readouterr().out
    lines = sub.source.splitlines()
    assert sub.where(lines.index("helper_value = math.floor(2.5)") + 1) == "helper.py, line 3"
    assert sub.where(lines.index("y = timed(x)") + 1) == "cell 4, line 2"
    assert sub.where(lines.index("def timed(x):") + 1) == "cell 1, line 4"


def test_run_finds_the_file_as_ipython_does_inside_the_notebooks_folder_only(tmp_path, monkeypatch):
    """%run adds .py to a name that has none, and runs a file in a folder below the notebook's (both the
    submission's own files, read in as its cells are); a file outside the folder, by a path or through a
    link, is never read in as the learner's (it would pass the course's own kernels off as theirs)."""
    from autograder.submission import load

    _write(tmp_path / "rowkern.py", "ROWS = 4\n")
    (tmp_path / "lib").mkdir()
    _write(tmp_path / "lib" / "cols.py", "import math\nCOLS = math.floor(10.5)\n")
    outside = tmp_path.parent / f"{tmp_path.name}_outside"
    outside.mkdir()
    _write(outside / "theirs.py", "THEIRS = 1\n")
    (tmp_path / "linked").symlink_to(outside, target_is_directory=True)
    sub = load(_notebook(tmp_path / "nb.ipynb", [
        "%run rowkern", '%run -i "lib/cols.py"', f"%run ../{outside.name}/theirs.py", "%run linked/theirs.py"]))
    space = _run_graded_source(sub)
    assert space["ROWS"] == 4 and space["COLS"] == 10 and "THEIRS" not in space
    lines = sub.source.splitlines()
    assert sub.where(lines.index("ROWS = 4") + 1) == "rowkern.py, line 1"
    assert sub.where(lines.index("COLS = math.floor(10.5)") + 1) == "lib/cols.py, line 2"


def test_without_ipython_the_same_escapes_are_read(tmp_path, monkeypatch):
    """A GPU runner's image has no IPython: the escape grammar is read by the grader itself, to the same
    Python for the forms a notebook uses."""
    import sys

    from autograder.submission import load

    with_ipython = load(_ipython_notebook(tmp_path)).source
    monkeypatch.setitem(sys.modules, "IPython.core.inputtransformer2", None)  # import fails
    without = load(tmp_path / "nb.ipynb").source
    assert without == with_ipython


def test_without_ipython_a_long_cell_reads_in_linear_time():
    """Where IPython is not installed (the GPU runner, whose grade counts), every line of a cell was asked
    whether it continues a statement by parsing the cell's lines before it: a 4000-line cell of plain Python
    took 85 s to load, every time the batch or a grading read it. Only a line shaped like an escape is asked."""
    import time

    from autograder.submission import _escapes_without_ipython

    lines = ["x = (1 +", "     2)"] * 2000 + ["%time y = x", "y = (1 +", "% 2)"]
    start = time.perf_counter()
    out = _escapes_without_ipython(lines)
    assert time.perf_counter() - start < 5.0
    assert out[-3] == "get_ipython().run_line_magic('time', 'y = x')" and out[-1] == "% 2)"  # modulo, continued


def test_an_honest_notebook_written_with_ipython_syntax_keeps_every_correctness_point(tmp_path):
    """The kernel in a %%time cell, settings from a %run file and from a module a %%writefile cell writes
    (not on the disk: the notebook never ran here), a benchmark cell with %time, %timeit -o, a shell
    capture and help: graded as IPython runs them, the notebook loads and keeps its points."""
    from autograder.grading import grade_submission

    kernel = (SUBMISSIONS / "good_triton.py").read_text()
    _write(tmp_path / "rows.py", "ROWS = 4\n")
    path = _notebook(tmp_path / "nb.ipynb", [
        "%%time\n" + kernel, "%run rows.py", "%%writefile shapes_wf.py\nCOLS = 10\n", "from shapes_wf import COLS",
        "x = torch.randn(ROWS, COLS)\n%time y = softmax(x)\nprint(y.sum(-1))\nr = %timeit -o softmax(x)\n"
        "print(r.best)\ngpu = !nvidia-smi\ntl.load?"])
    ex = grade_submission(path, ["softmax"], quick=True, timeout=120.0)["exercises"][0]
    assert ex["correct"] and not ex["violations"], ex["feedback"] + ex["violations"]


def test_a_notebook_that_calls_display_loads_as_in_jupyter(tmp_path):
    """display() is a builtin of Jupyter's kernel: a notebook that calls it at the top of a cell must be
    graded, not lost to a NameError."""
    from autograder.grading import grade_submission

    path = _notebook(tmp_path / "nb.ipynb", ["import torch\ndisplay(torch.ones(2))",
                                             "def softmax(x):\n    raise NotImplementedError"])
    ex = grade_submission(path, ["softmax"], quick=True, timeout=120.0)["exercises"][0]
    found = " ".join(ex["feedback"] + ex["violations"])
    assert "NameError" not in found and "NotImplementedError" in found, found


def test_grade_returns_clamped_points_and_writes_nothing_to_stderr(capfd):
    from autograder.nbgrader import clamp_points, grade

    assert clamp_points(12.0, 10) == 10.0
    assert clamp_points(-1.0, 10) == 0.0
    assert clamp_points(float("nan"), 10) == 0.0
    assert clamp_points(None, 10) == 0.0
    value = grade("softmax", str(SUBMISSIONS / "floods_output.py"), quick=True)
    assert type(value) is float and value == 7.0
    missing = grade("softmax", "/nonexistent/04_fused_softmax.ipynb")
    assert missing == 0.0
    out, err = capfd.readouterr()
    assert err == ""
    assert "[PASS] softmax" in out and "no such file" in out
    assert "MB of output" in out  # the flood is reported, and capped:
    assert len(out) < 100_000  # the worker's 30 MB flood does not reach the cell's output


def test_check_is_a_no_op_inside_a_worker(monkeypatch, capsys):
    from autograder import check

    monkeypatch.setenv("AUTOGRADER_WORKER", "1")
    assert check("softmax", lambda x: None) is True
    assert capsys.readouterr().out == ""


def test_check_prints_a_table_and_hint(monkeypatch, capsys):
    import torch

    from autograder import check

    monkeypatch.delenv("AUTOGRADER_WORKER", raising=False)

    def naive_softmax(x):
        e = torch.exp(x)  # no max subtraction: overflows on the hard rows
        return e / e.sum(-1, keepdim=True)

    assert check("naive_softmax", naive_softmax, quick=True) is False
    out = capsys.readouterr().out
    assert "max error" in out and "verdict" in out and "FAIL" in out and "hint:" in out

    def stable(x):
        z = x - x.amax(-1, keepdim=True)
        return torch.exp(z) / torch.exp(z).sum(-1, keepdim=True)

    assert check("naive_softmax", stable, quick=True) is True
    assert check("naive_softmax", lambda x: torch.softmax(x, -1), quick=True) is False
    assert "aten._softmax" in capsys.readouterr().out


def test_roofline_plots_on_the_cpu(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from measure.roofline import roofline

    peaks = {"copy_gbps": 20.0, "matmul_tflops": 0.2}  # this CPU's roofs, as measure.ceilings gives them
    fig = roofline({"my softmax": (0.0, 2 * 4096 * 4096 * 4, 0.05e-3), "my matmul": (2 * 4096 ** 3, 3 * 4096 ** 2 * 2, 0.3e-3)},
                   peaks=peaks)
    fig.savefig(tmp_path / "r.png")
    labels = fig.axes[0].get_title()
    assert "given" in labels.lower()


def test_roofline_without_peaks_uses_this_machines_measured_roofs(monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    from measure import ceilings
    from measure.roofline import roofline

    monkeypatch.setattr(ceilings, "peaks", lambda: {"copy_gbps": 20.0, "matmul_tflops": 0.2})
    fig = roofline({"k": (1.0, 1e6, 1e-4)})
    assert f"measured roofs of {ceilings.machine_name()}" in fig.axes[0].get_title()


def test_an_unwritten_exercise_gets_the_not_written_hint(capsys):
    from autograder import check
    from autograder.correctness import NOT_WRITTEN_HINT

    def softmax(x):
        raise NotImplementedError()

    assert check("softmax", softmax) is False
    out = capsys.readouterr().out
    assert "NotImplementedError" in out and f"hint: {NOT_WRITTEN_HINT}" in out
    assert "does the grid cover" not in out  # the shape hint would send the learner the wrong way


def test_entry_points_a_star_import_brings_from_a_module_beside_are_defined(tmp_path):
    """``from kernels import *`` binds the public names of the learner's module beside the notebook (its
    ``__all__`` where it has one, its own star imports of modules beside it too): check finds them in the
    learner's process, and the grader reads them from the source, so both grade the same functions. A
    library's star import binds nothing of the learner's."""
    from autograder.submission import load

    (tmp_path / "kernels.py").write_text("from more import *\nimport torch\n\ndef softmax(x):\n    return x\n\n"
                                         "def _private(x):\n    return x\n")
    (tmp_path / "more.py").write_text("from kernels import *\n\ndef bias_gelu(x, b):\n    return x\n")
    (tmp_path / "listed.py").write_text("__all__ = ['vector_add']\n\ndef vector_add(x, y):\n    return x\n\n"
                                        "def layer_norm_fwd(x, w, b):\n    return x\n")
    sub = tmp_path / "sub.py"
    sub.write_text("from kernels import *\nfrom listed import *\nfrom torch.nn.functional import *\n")
    defined = load(sub).defined
    assert {"softmax", "bias_gelu", "torch", "vector_add"} <= defined  # (the two modules import each other)
    assert not {"_private", "layer_norm_fwd", "gelu", "silu"} & defined


def test_the_escapes_a_cell_may_hold_are_ipythons():
    """A cell with more escapes than IPython transforms is refused before IPython spends seconds on it, and
    the same where IPython is not installed: the limit is IPython's own."""
    inputtransformer2 = pytest.importorskip("IPython.core.inputtransformer2")
    from autograder import submission

    assert submission.IPYTHON_ESCAPES == inputtransformer2.TRANSFORM_LOOP_LIMIT - 1
