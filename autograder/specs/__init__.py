"""Every graded exercise, by id. One module per notebook; each module lists its EXERCISES."""
from __future__ import annotations

import importlib

from autograder.specs.base import Exercise  # noqa: F401

MODULES = ["nb00_measure", "nb01_naive_ops", "nb02_profiling", "nb03_triton_basics", "nb04_fused_softmax",
           "nb05_layer_norm", "nb06_matmul_fused_mlp", "nb07_flash_attention", "nb08_memory"]


def _load() -> dict:
    table = {}
    for name in MODULES:
        for ex in importlib.import_module(f"autograder.specs.{name}").EXERCISES:
            if ex.id in table:
                raise RuntimeError(f"exercise id {ex.id!r} defined twice")
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
