"""nbgrader configuration: the repository root is the course directory.

solutions/NN_name/NN_name.ipynb (source, with solutions and hidden tests)
    --nbgrader generate_assignment-->  notebooks/NN_name/NN_name.ipynb (student version)

`make notebooks` regenerates every assignment listed below; `tests/test_notebooks.py` fails when
notebooks/ drifts from what solutions/ generates.
"""
import os

_ROOT = os.path.dirname(os.path.abspath(__file__))

# The assignments of the course, in order (DESIGN.md's curriculum); only those with a source notebook
# in solutions/ are released.
ASSIGNMENTS = [
    "00_measure",
    "01_naive_ops",
    "02_profiling",
    "03_triton_basics",
    "04_fused_softmax",
    "05_layer_norm",
    "06_matmul_fused_mlp",
    "07_flash_attention",
    "08_memory",
    "09_capstone",
]
RELEASED = [a for a in ASSIGNMENTS if os.path.exists(os.path.join(_ROOT, "solutions", a, f"{a}.ipynb"))]

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
