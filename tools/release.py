"""The learner's hand-out: the course without its answers, for a graded class.

    python -m tools.release [OUT]        # default dist/handout (make release)

It holds what a learner runs: the student notebooks (``notebooks/``, made by ``make notebooks`` from
``solutions/``: no solution, no hidden test), ``check`` and ``python -m autograder grade`` (the packages
``autograder``, ``course`` and ``measure``), ``make lab`` (a Makefile with its ``venv`` and ``lab`` targets,
``tools/ensure_venv.sh``, ``pyproject.toml``), the exercise contracts and the learner's troubleshooting page.

What it leaves out, because it solves an exercise: ``solutions/``, the reference kernels (``kernels_ref/``,
the Triton kernels every exercise is measured against), the tests (their good submissions), the tools, the
probes and the GPU results. What it keeps on purpose:

- ``measure/``: the float64 references every output is judged against (they solve no Triton exercise;
  the notebooks and ``check`` use them), the timer, tolerances and meters the notebooks teach with, and
  the serving exercises' inputs and PyTorch baselines (``measure/serving.py``: 10 and its cases need them);
- ``autograder/specs``: each exercise's cases, public and graded. ``check`` runs the public ones, and they
  are made by the same case builders as the graded ones, so a PASSED predicts the grade. What the graded
  cases hold (odd shapes, every dtype, hard rows, strides) is no secret: the notebooks say it and ``check``
  runs a small case of every kind. Their values are fresh random numbers at every grading.

Without ``kernels_ref``, a notebook's comparison with the reference kernel (06) is left out where the
notebook guards its import (10's decode step then takes PyTorch's LayerNorm and linear); a notebook that needs the reference kernels to run (an unguarded import of
``kernels_ref``) is left out of the hand-out, named in its README and printed by the build, until what it
takes from there moves beside the references of ``measure``.
tests/test_release.py builds a hand-out and checks all of this.
"""
from __future__ import annotations

import argparse
import ast
import json
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("autograder", "course", "measure")
FILES = ("pyproject.toml", "tools/ensure_venv.sh", "docs/CONTRACTS.md", "docs/troubleshooting.md")
# Never in a hand-out: what solves an exercise, or what only the course's makers need.
EXCLUDED = ("solutions", "kernels_ref", "tests", "tools", "probes", "results", "nbgrader_config.py")
MAKE_TARGETS = ("venv", "lab")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints")


def handout_makefile(text: str) -> str:
    """The course's Makefile with only its variables and the rules of MAKE_TARGETS (blocks of lines
    separated by blank lines, a rule's comments above it; the extras of the targets left out go too)."""
    keep = [".PHONY: " + " ".join(MAKE_TARGETS)]
    for block in re.split(r"\n\s*\n", text.strip()):
        block = "\n".join(line for line in block.splitlines() if not re.match(r"^[\w -]+: EXTRA = ", line))
        rule = re.search(r"^([\w.-]+)(?: [\w.-]+)*:(?!=)", block, re.M)
        if block and (rule is None or rule.group(1) in MAKE_TARGETS):
            keep.append(block)
    return "\n\n".join(keep) + "\n"


README = """# GPU kernels for transformers: your hand-out

    make lab     # creates .venv (torch, Triton, JupyterLab) and serves JupyterLab on notebooks/

Open `00_measure/00_measure.ipynb` and work through the notebooks in order. Under each exercise, the
`check(...)` cell gives instant feedback on public cases; a PASSED means the grader's correctness points.
Grade yourself as your instructor will:

    .venv/bin/python -m autograder grade notebooks/04_fused_softmax/04_fused_softmax.ipynb

Without a GPU the kernels run in Triton's interpreter and the performance part is graded on a GPU only.
Signatures: `docs/CONTRACTS.md`. Something does not work: `docs/troubleshooting.md`.
"""


def reference_imports(notebook: Path) -> list[str]:
    """The imports of ``kernels_ref`` in a notebook's code that no ``try ... except ImportError`` guards."""
    found = []
    for cell in json.loads(notebook.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        lines = "".join(cell["source"]).splitlines()
        tree = ast.parse("\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in lines))
        guarded = {id(n) for t in ast.walk(tree) if isinstance(t, ast.Try)
                   and any(ast.unparse(h.type or ast.Name("BaseException")) in ("ImportError", "ModuleNotFoundError")
                           for h in t.handlers) for s in t.body for n in ast.walk(s)}
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n.split(".")[0] == "kernels_ref" for n in names) and id(node) not in guarded:
                found.append(ast.unparse(node))
    return found


def build(out: Path) -> Path:
    """Write the hand-out into ``out`` (replaced if it exists) and return it."""
    notebooks = sorted((ROOT / "notebooks").glob("*/*.ipynb"))
    if not notebooks:
        raise SystemExit("no student notebooks in notebooks/: run make notebooks first")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    left_out = {nb.parent.name: reference_imports(nb) for nb in notebooks if reference_imports(nb)}
    for nb in notebooks:
        if nb.parent.name not in left_out:
            shutil.copytree(nb.parent, out / "notebooks" / nb.parent.name, ignore=IGNORED)
    for package in PACKAGES:
        shutil.copytree(ROOT / package, out / package, ignore=IGNORED)
    for name in FILES:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, out / name)
    (out / "Makefile").write_text(handout_makefile((ROOT / "Makefile").read_text()))
    readme = README
    if left_out:
        readme += "\nNot in this hand-out (they need the course's reference kernels to run): " + "; ".join(
            f"{name} ({', '.join(imports)})" for name, imports in left_out.items()) + ".\n"
        for name, imports in left_out.items():
            print(f"left out {name}: it needs the reference kernels ({'; '.join(imports)})")
    (out / "README.md").write_text(readme)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.release", description=__doc__.splitlines()[0])
    p.add_argument("out", nargs="?", type=Path, default=ROOT / "dist" / "handout")
    args = p.parse_args(argv)
    out = build(args.out)
    print(f"hand-out written to {out} ({sum(1 for _ in out.rglob('*') if _.is_file())} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
