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
  the notebooks and ``check`` use them) and the timer, tolerances and meters the notebooks teach with;
- ``autograder/specs``: each exercise's cases, public and graded. ``check`` runs the public ones, and they
  are made by the same case builders as the graded ones, so a PASSED predicts the grade. What the graded
  cases hold (odd shapes, every dtype, hard rows, strides) is no secret: the notebooks say it and ``check``
  runs a small case of every kind. Their values are fresh random numbers at every grading.

Without ``kernels_ref``, a notebook's comparison with the reference kernel (06) is left out, and a check
or grade that would time against a reference kernel on a GPU says so instead of failing.
tests/test_release.py builds a hand-out and checks all of this.
"""
from __future__ import annotations

import argparse
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


def build(out: Path) -> Path:
    """Write the hand-out into ``out`` (replaced if it exists) and return it."""
    notebooks = sorted((ROOT / "notebooks").glob("*/*.ipynb"))
    if not notebooks:
        raise SystemExit("no student notebooks in notebooks/: run make notebooks first")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    shutil.copytree(ROOT / "notebooks", out / "notebooks", ignore=IGNORED)
    for package in PACKAGES:
        shutil.copytree(ROOT / package, out / package, ignore=IGNORED)
    for name in FILES:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, out / name)
    (out / "Makefile").write_text(handout_makefile((ROOT / "Makefile").read_text()))
    (out / "README.md").write_text(README)
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
