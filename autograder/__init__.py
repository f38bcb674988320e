"""The course's autograder: exercise specs, isolation, legality, correctness, timing, reports.

`from autograder import check` gives notebooks instant feedback; `python -m autograder grade PATH`
and `autograder.nbgrader.grade(...)` grade in isolated worker processes.
"""
import course  # noqa: F401  (first: sets TRITON_INTERPRET=1 without a GPU, before any kernel is defined)

if course.INTERPRET:  # interpreted kernels compute bf16 and take float arguments like a GPU (course/interpreter.py)
    from course.interpreter import patch_interpreter

    patch_interpreter()


def check(exercise_id, fn, **kwargs):
    """Run the public cases of ``exercise_id`` on ``fn`` here and print a table; see autograder.notebook."""
    from autograder.notebook import check as _check

    return _check(exercise_id, fn, **kwargs)


__all__ = ["check"]
