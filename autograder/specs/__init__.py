"""Every graded exercise, by id: one spec module per notebook, named by the course manifest.

``course.manifest`` says which notebook grades which exercise ids; each spec module lists its
``EXERCISES``, and loading checks that the two agree (same ids, same order, right notebook).
"""
from __future__ import annotations

import importlib

from course import manifest
from autograder.specs.base import Exercise  # noqa: F401


def _load() -> dict:
    table = {}
    for nb in manifest.NOTEBOOKS:
        if nb.spec_module is None:
            continue
        found = importlib.import_module(nb.spec_module).EXERCISES
        ids = tuple(ex.id for ex in found)
        if ids != nb.exercises:
            raise RuntimeError(f"{nb.spec_module} defines {ids}; the course manifest lists {nb.exercises}")
        for ex in found:
            if ex.notebook != nb.name:
                raise RuntimeError(f"exercise {ex.id!r} says notebook {ex.notebook!r}, the manifest {nb.name!r}")
            table[ex.id] = ex
    return table


EXERCISES: dict = _load()


def get(exercise_id: str) -> Exercise:
    try:
        return EXERCISES[exercise_id]
    except KeyError:
        raise KeyError(f"unknown exercise {exercise_id!r}; known: {', '.join(EXERCISES)}") from None


def for_notebook(notebook: str) -> list:
    return [e for e in EXERCISES.values() if e.notebook == notebook]
