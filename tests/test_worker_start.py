"""A grading worker starts with what its calls need, no more (a worker is started for every exercise graded):
torch's switches that the CPU's poisoned memory needs, and dispatch modes whose handlers import
torch._dynamo only once something evaluates frames (torch.compile)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from autograder.torch_internals import deterministic_algorithms, dispatch_modes_without_dynamo

ROOT = Path(__file__).resolve().parent.parent


def _mode():
    class Seen(TorchDispatchMode):  # a class per test: the handler is installed on it once
        ops: list = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Seen.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    return Seen


def test_a_dispatch_mode_runs_its_handler_as_it_is_while_no_frame_evaluator_is_installed():
    mode = _mode()
    dispatch_modes_without_dynamo(mode)
    ours = getattr(mode.__torch_dispatch__.__wrapped__, "__dynamo_disable")
    with mode():
        y = torch.ones(2).add(1)
    assert torch.equal(y, torch.full((2,), 2.0)) and mode.ops == ["aten.ones.default", "aten.add.Tensor"]
    assert getattr(mode.__torch_dispatch__.__wrapped__, "__dynamo_disable") is ours  # never replaced


def test_once_a_frame_evaluator_is_installed_the_handler_runs_with_dynamo_disabled_as_pytorch_runs_it(monkeypatch):
    import torch._dynamo

    monkeypatch.setattr(torch._C._dynamo.eval_frame, "get_eval_frame_callback", lambda: "torch.compile's")
    mode = _mode()
    dispatch_modes_without_dynamo(mode)
    disabled = []
    real_disable = torch._dynamo.disable
    monkeypatch.setattr(torch._dynamo, "disable", lambda fn, *a, **k: disabled.append(fn) or real_disable(fn, *a, **k))
    with mode():
        torch.ones(2).add(1)
    assert disabled == [mode.__torch_dispatch__.__wrapped__]  # made once, then PyTorch's wrapper calls it
    assert mode.ops == ["aten.ones.default", "aten.add.Tensor"]


def test_the_handlers_frame_is_passed_over_when_the_recorder_asks_whose_work_an_operator_is():
    """Between an operator and the code that asked for it, the recorder passes over torch's frames (where
    PyTorch's own wrapper runs) and the course's: the interpreter's casts inside a launch stay its own, never
    the grader's (a frame of the worker's module would end the walk there) nor the learner's kernel line."""
    from autograder import legality, torch_internals

    here = torch_internals.dispatch_modes_without_dynamo.__code__.co_filename
    assert here.startswith(legality._PLUMBING_DIRS) and here != legality._WORKER


@pytest.mark.parametrize("inductor_loaded", [True, False])
def test_deterministic_algorithms_sets_what_torchs_own_switch_sets(monkeypatch, inductor_loaded):
    import torch._inductor.config as config

    saved = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    monkeypatch.setattr(config, "deterministic", False)
    monkeypatch.delenv("TORCHINDUCTOR_DETERMINISTIC", raising=False)
    monkeypatch.setenv("AUTOGRADER_WORKER", "1")  # a grading worker's process (check()'s uses torch's switch)
    if not inductor_loaded:
        monkeypatch.delitem(sys.modules, "torch._inductor.config")
    try:
        deterministic_algorithms(torch)
        assert torch.are_deterministic_algorithms_enabled() and torch.is_deterministic_algorithms_warn_only_enabled()
        if inductor_loaded:  # as torch.use_deterministic_algorithms sets it
            assert config.deterministic is True
        else:  # what Inductor's config reads when it is loaded
            assert os.environ["TORCHINDUCTOR_DETERMINISTIC"] == "1"
    finally:
        torch.use_deterministic_algorithms(saved[0], warn_only=saved[1])


_START = """
import json, sys
import course
from autograder import worker
job = json.loads(sys.argv[1])
fn, ready = worker.load_entry(job)
worker.make_worker(fn, job)
print(json.dumps([ready.status, sorted(m for m in ("torch._dynamo", "torch._inductor.config", "matplotlib.pyplot")
                                       if m in sys.modules)]))
"""


def test_a_grading_worker_is_ready_without_dynamo_inductor_or_what_the_audits_rules_name():
    """What a worker imports before its first case, in a worker's own Python: torch._dynamo and Inductor's
    config (1.2 s of CPU) and the modules the audit's rules name (the grading process's audit found the
    kernels) are not among them."""
    from autograder import grading, specs
    from autograder.submission import load

    sub = load(ROOT / "tests" / "submissions" / "good_triton.py")
    job = grading.submission_job(specs.get("softmax"), sub, sub.path)
    done = subprocess.run([sys.executable, "-c", _START, json.dumps(job)], capture_output=True, text=True,
                          cwd=ROOT, timeout=300, env={**os.environ, "AUTOGRADER_WORKER": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == ["ok", []]


def test_in_a_learners_own_process_the_switch_is_torchs_own_and_leaves_no_variable(monkeypatch):
    saved = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    monkeypatch.delenv("AUTOGRADER_WORKER", raising=False)
    monkeypatch.delenv("TORCHINDUCTOR_DETERMINISTIC", raising=False)
    calls, real = [], torch.use_deterministic_algorithms
    monkeypatch.setattr(torch, "use_deterministic_algorithms", lambda *a, **k: calls.append((a, k)) or real(*a, **k))
    try:
        deterministic_algorithms(torch)
        assert calls == [((True,), {"warn_only": True})] and torch.are_deterministic_algorithms_enabled()
    finally:
        real(saved[0], warn_only=saved[1])
    assert "TORCHINDUCTOR_DETERMINISTIC" not in os.environ


_RUNS = """
import json, sys
import course
from autograder import worker
job = json.loads(sys.argv[1])
fn, ready = worker.load_entry(job)
print(json.dumps([ready.status, fn.__doc__]))
"""


def test_a_worker_runs_the_text_the_grader_audited_whatever_the_file_holds_by_then(tmp_path):
    """Every exercise's worker loads the submission anew; code of an exercise graded earlier (or beside it) may
    rewrite the grading folder's copy of the file (fileinput's inplace, with no sandbox): the worker runs the
    text the grading process audited, handed over in its job, never what the file holds when it starts."""
    from autograder import grading, specs
    from autograder.submission import load

    path = tmp_path / "sub.py"
    path.write_text('def softmax(x):\n    """audited"""\n    return x\n')
    sub = load(path)
    source = sub.write(tmp_path)
    job = grading.submission_job(specs.get("softmax"), sub, source)
    source.write_text('def softmax(x):\n    """rewritten"""\n    return x\n')
    done = subprocess.run([sys.executable, "-c", _RUNS, json.dumps(job)], capture_output=True, text=True,
                          cwd=ROOT, timeout=300, env={**os.environ, "AUTOGRADER_WORKER": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == ["ok", "audited"]
