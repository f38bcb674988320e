"""An exercise whose grading fails before its graded worker is entered (the timed workload's inputs, made on
the course's device, do not fit in its memory, say) stops every worker it started: the graded worker, the
warmers and the baseline's worker are not left running until the grading process lets go of them."""
from __future__ import annotations

import pytest

from autograder import grading, isolation, timing, warm

from _autograder_helpers import SUBMISSIONS


@pytest.mark.timeout(300)
def test_a_failure_making_the_timed_inputs_stops_every_worker_started(monkeypatch):
    import torch

    from autograder import specs

    monkeypatch.setenv(warm.ENV, "2")
    monkeypatch.setenv("AUTOGRADER_JOBS", "1")
    monkeypatch.setattr(timing, "should_time", lambda on_gpu, perf: (perf is not None, ""))
    spec = specs.get("softmax")

    def no_room(g, device):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.50 GiB")

    monkeypatch.setattr(spec.performance, "inputs", no_room)
    started, real_start = [], isolation.WorkerSession.start

    def start(self):
        started.append(self)  # held here: no garbage collection closes them meanwhile
        return real_start(self)

    monkeypatch.setattr(isolation.WorkerSession, "start", start)
    result = grading.grade_submission(SUBMISSIONS / "good_triton.py", ["softmax"], quick=True, timeout=60.0)
    ex = result["exercises"][0]
    assert not ex["correct"] and "internal grader error" in ex["feedback"][0]
    assert len(started) == 4  # the graded worker, two warmers, the baseline's worker
    assert all(s.proc.poll() is not None for s in started), [s.job.get("code") for s in started
                                                              if s.proc.poll() is None]
