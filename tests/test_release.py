"""The learner's hand-out (tools/release.py, `make release`): the course without its answers, and `check`
working from it alone."""
from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from course import manifest
from tools import release

ROOT = Path(__file__).resolve().parent.parent
# Kernels that solve no exercise: the grader's own (fresh input values, the sandbox's self-check) and the
# course's helper for the interpreter's limits (triton_compat.dot, which learners may call).
GRADER_KERNELS = {"autograder/fresh.py", "autograder/sandbox.py", "course/triton_compat.py"}


@pytest.fixture(scope="session")  # kept to the end: xdist interleaves other modules, which would tear a module fixture down
def handout(tmp_path_factory) -> Path:
    return release.build(tmp_path_factory.mktemp("release") / "handout")


def _files(handout: Path) -> list[str]:
    return sorted(str(p.relative_to(handout)) for p in handout.rglob("*") if p.is_file())


def test_the_handout_holds_the_student_notebooks_and_what_check_needs(handout):
    files = _files(handout)
    released = [nb.name for nb in manifest.NOTEBOOKS if nb.released]
    needs = [n for n in released if release.reference_imports(ROOT / "notebooks" / n / f"{n}.ipynb")]
    assert "10_serving" not in needs  # its inputs and baselines come from measure.serving
    assert [f for f in files if f.endswith(".ipynb")] == [f"notebooks/{n}/{n}.ipynb" for n in released
                                                          if n not in needs]
    assert all(n in (handout / "README.md").read_text() for n in needs)  # what is left out is said
    for needed in ("autograder/notebook.py", "autograder/specs/__init__.py", "measure/reference.py",
                   "course/manifest.py", "Makefile", "pyproject.toml", "tools/ensure_venv.sh", "README.md"):
        assert needed in files, needed


def test_nothing_in_the_handout_solves_an_exercise(handout):
    files = _files(handout)
    top = {f.split("/")[0] for f in files}
    assert not top & {"solutions", "kernels_ref", "tests", "probes", "results"}, top
    assert [f for f in files if f.startswith("tools/")] == ["tools/ensure_venv.sh"]
    assert not [f for f in files if re.match(r"(good|naive)_\w*\.py$", Path(f).name)]  # tests' submissions
    for nb in handout.glob("notebooks/*/*.ipynb"):
        text = nb.read_text()
        assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text, nb.name
    from autograder import specs

    triton_entries = {ex.entry for ex in specs.EXERCISES.values() if ex.kind == "triton"}
    for f in files:
        if not f.endswith(".py"):
            continue
        tree = ast.parse((handout / f).read_text())
        kernels = [n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
                   and any(re.search(r"\b(jit|autotune|heuristics)\b", ast.unparse(d)) for d in n.decorator_list)]
        assert f in GRADER_KERNELS or not kernels, f"{f} holds Triton kernels {kernels}"
        # a module of Triton kernels defining an exercise's entry point would be its solution (the float64
        # references of measure/ share the names and are no Triton kernel: the judge, not an answer)
        defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        assert not (kernels and defined & triton_entries), f"{f} defines {defined & triton_entries}"


def test_the_handouts_makefile_has_lab_and_nothing_that_needs_what_was_left_out(handout):
    text = (handout / "Makefile").read_text()
    targets = set(re.findall(r"^([\w-]+):(?!=)", text, re.M))
    assert targets == {"venv", "lab"}, targets
    assert "tools/ensure_venv.sh" in text and "pytest" not in text.replace("PYTEST_ARGS ?=", "")


def test_check_and_the_grader_run_from_the_handout_alone(handout):
    """In the hand-out, with the repository's own packages made unimportable (the venv's editable install
    would otherwise find them): `python -m autograder list` works and `check` passes an honest answer."""
    script = textwrap.dedent(f"""
        import sys
        sys.path[:0] = [{str(handout)!r}]
        class LeftOut:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {release.EXCLUDED!r}:
                    raise ImportError(f"{{name}} is not in the hand-out")
        sys.meta_path.insert(0, LeftOut())
        import autograder
        assert autograder.__file__.startswith({str(handout)!r}), autograder.__file__
        from autograder import check
        def naive_softmax(x):
            e = (x - x.max(dim=-1, keepdim=True).values).exp()
            return e / e.sum(dim=-1, keepdim=True)
        print("CHECK", check("naive_softmax", naive_softmax, quick=True))
        import torch
        from autograder import specs
        for ex in specs.EXERCISES.values():  # every public case is made without what was left out
            for case in ex.cases(True) if ex.cases else []:
                if case.public:
                    case.build(torch.Generator().manual_seed(0))
        print("CASES made")
        # 10's decode step without the reference kernels: PyTorch's LayerNorm and linear, same arguments
        import json
        from measure import reference
        cells = json.load(open("notebooks/10_serving/10_serving.ipynb"))["cells"]
        code = next("".join(c["source"]) for c in cells if "except ImportError" in "".join(c["source"]))
        scope = {{}}
        exec(code[:code.index("\\nDB, DD")], scope)
        x, w, r = torch.randn(5, 8), torch.randn(6, 8), torch.randn(5, 6)
        want = reference.gelu_tanh(reference.as64(x) @ reference.as64(w).T) + r.double()
        assert torch.allclose(scope["ref_linear"](x, w, gelu=True, residual=r).double(), want, atol=1e-5)
        assert torch.allclose(scope["ref_layer_norm"](x, torch.ones(8), torch.zeros(8)),
                              torch.nn.functional.layer_norm(x, (8,)))
        print("DECODE fallback")
        from autograder.cli import main
        main(["list"])
    """)
    run = subprocess.run([sys.executable, "-c", script], cwd=handout, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    assert "CHECK True" in run.stdout and "CASES made" in run.stdout and "DECODE fallback" in run.stdout
    assert "naive_softmax" in run.stdout.split("DECODE fallback", 1)[1]


def test_a_notebook_imports_the_reference_kernels_only_where_it_can_do_without(handout, tmp_path):
    """A hand-out's notebook runs without kernels_ref: every import of it sits in a try that catches ImportError
    (06's comparison with the reference kernel); an unguarded import is found."""
    for nb in handout.glob("notebooks/*/*.ipynb"):
        assert release.reference_imports(nb) == [], nb.name
    cell = {"cell_type": "code", "source": ["try:\n", "    from kernels_ref.matmul import linear\n",
                                            "except ImportError:\n", "    linear = None\n",
                                            "from kernels_ref import softmax\n"]}
    (tmp_path / "x.ipynb").write_text(json.dumps({"cells": [cell]}))
    assert release.reference_imports(tmp_path / "x.ipynb") == ["from kernels_ref import softmax"]
