"""Shared helpers for the autograder tests: grade a test submission once per pytest run (quick cases)."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

SUBMISSIONS = Path(__file__).parent / "submissions"


@lru_cache(maxsize=None)
def graded(name: str, exercises: tuple, timeout: float = 120.0) -> dict:
    from autograder.grading import grade_submission

    result = grade_submission(SUBMISSIONS / name, list(exercises), quick=True, timeout=timeout)
    return {ex["id"]: ex for ex in result["exercises"]}


def text(ex: dict) -> str:
    return "\n".join(ex["feedback"] + ex["violations"])
