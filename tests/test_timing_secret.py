"""Which timed calls of the submission are checked is secret: not a function of the grading's seed, which the
cases' inputs (made from it, seen by the learner's code) give away to a search of its 2^31 values."""
from __future__ import annotations

import contextlib

import torch

from autograder import grading, protocol, specs


class _Recording:
    """A worker that answers every request at once and notes which (repetition, slot) had its output shipped."""

    def __init__(self):
        self.calls, self.shipped = 0, []

    def request(self, req, reply=None):
        if req.get("op") == "ship":
            self.shipped.append((self.calls, req["index"]))
            return protocol.Shipped(output=None, inputs_after=[])
        return None

    def timed(self, req):
        if not req.get("empty"):
            self.calls += 1
        return 1.0, protocol.CallDone(ok=True)


def _checked_calls(seed: int) -> list:
    spec = specs.get("softmax")
    submission, baseline = _Recording(), _Recording()
    loaded = grading.TimedInputs((torch.randn(4, 8),), {"submission": submission, "baseline": baseline},
                                 [1, 2, 3, 4], contextlib.ExitStack())
    grading.time_against_baseline(submission, spec, seed, reps=50, warmup=5, max_seconds=1e9, loaded=loaded)
    return submission.shipped


def test_the_checked_timed_calls_are_not_a_function_of_the_seed():
    runs = [_checked_calls(1234) for _ in range(4)]
    assert all(len(r) == grading.JUDGED_TIMED_CALLS for r in runs)
    assert len({tuple(r) for r in runs}) > 1, runs
