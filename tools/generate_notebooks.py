"""Regenerate the student notebooks from solutions/ (what `make notebooks` runs).

    python -m tools.generate_notebooks [--course DIR] [ASSIGNMENT ...]   # default: every released one

nbgrader's ``generate_assignment`` (solutions, hidden tests and outputs stripped) for each assignment, all
in one process: nbgrader is imported and its gradebook opened once, not once an assignment (a process
each took 15-20 s, mostly that). Then the outputs are stripped, as the notebooks are committed.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def generate(course: Path, assignments: list[str] | None = None) -> Path:
    """Generate ``course``'s release folder (``notebooks/``) from its ``solutions/``; return the folder."""
    from nbgrader.apps import GenerateAssignmentApp

    from tools.strip_outputs import main as strip_outputs

    here = Path.cwd()
    os.chdir(course)  # nbgrader reads nbgrader_config.py from the working directory
    try:
        if assignments is None:
            import nbgrader_config  # the course's own list of released assignments

            assignments = list(nbgrader_config.RELEASED)
        for assignment in assignments:
            GenerateAssignmentApp.clear_instance()
            app = GenerateAssignmentApp.instance()
            app.initialize([assignment, "--force", "--log-level=WARN"])
            app.start()
    finally:
        GenerateAssignmentApp.clear_instance()
        os.chdir(here)
    strip_outputs([str(course / "notebooks")])
    return course / "notebooks"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("assignments", nargs="*", help="default: every released assignment")
    ap.add_argument("--course", type=Path, default=ROOT, help="the course directory (default: this repository)")
    args = ap.parse_args(argv)
    generate(args.course.resolve(), args.assignments or None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
