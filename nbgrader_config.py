"""nbgrader configuration: the repository root is the course directory.

solutions/NN_name/NN_name.ipynb (source, with solutions and hidden tests)
    --nbgrader generate_assignment-->  notebooks/NN_name/NN_name.ipynb (student version)

`make notebooks` regenerates every assignment listed below; `tests/test_notebooks.py` fails when
notebooks/ drifts from what solutions/ generates.
"""
import importlib.util
import os
import sys

_ROOT = os.path.dirname(os.path.abspath(__file__))


def _load_manifest():
    """course/manifest.py by path: importing the ``course`` package would import torch into nbgrader."""
    spec = importlib.util.spec_from_file_location("_course_manifest", os.path.join(_ROOT, "course", "manifest.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


manifest = _load_manifest()

# The assignments of the course in order, and those that exist yet (a source notebook in solutions/).
ASSIGNMENTS = manifest.assignments()
RELEASED = manifest.released()

try:
    c = get_config()  # noqa: F821  (provided by nbgrader when it loads this file)
except NameError:  # imported as a plain module (by the Makefile or the tests)
    c = None

if c is not None:
    c.CourseDirectory.root = _ROOT
    c.CourseDirectory.course_id = "gpu-kernels-for-transformers"
    c.CourseDirectory.source_directory = "solutions"
    c.CourseDirectory.release_directory = "notebooks"
    c.CourseDirectory.db_url = "sqlite:///" + os.path.join(_ROOT, "gradebook.db")
    # Generating an assignment must not execute it (that is the test harness's job); grading does:
    # a whole notebook on a GPU runner, including hidden tests that start grading workers.
    c.Execute.timeout = 900  # seconds per cell: a hidden grading cell runs several isolated workers
    c.Execute.allow_errors = True
    c.ExecutePreprocessor.timeout = 900
    # Files that travel with a released assignment besides the notebook (none yet; data is generated).
    c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "*.trace.json"]
