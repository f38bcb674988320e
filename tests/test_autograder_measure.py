"""The non-tensor exercises of 00_measure and 02_profiling, judged with functions of known cost."""
from __future__ import annotations

from _autograder_helpers import SUBMISSIONS, graded, text

PROBED = ("benchmark", "count_kernel_launches", "peak_memory_bytes")  # judged through workers
PURE = ("time_floor", "softmax_bytes", "classify_bound")                 # plain functions: judged in-process
# Graded as tests/test_feedback.py grades them (every exercise of 00-02 they define): one grading serves both.
DEFINED = ("time_floor", "softmax_bytes", "benchmark", "count_kernel_launches", "peak_memory_bytes", "classify_bound")


def test_correct_measurements_pass():
    res = graded("measure_good.py", DEFINED)
    for ex_id in PROBED:
        assert res[ex_id]["correct"], (ex_id, text(res[ex_id]))
        assert res[ex_id]["score"] == 1.0


def test_wrong_measurements_fail():
    res = graded("measure_wrong.py", DEFINED)
    for ex_id in PROBED:
        assert not res[ex_id]["correct"], ex_id
        assert res[ex_id]["score"] == 0.0
    assert "median" in text(res["benchmark"])  # the hint names the fix


def _judge_all(module, ex_id):
    import importlib.util

    from autograder.protocol import CallDone, Shipped
    from autograder.runner import judge_call, make_plan
    from autograder.specs import get

    spec_ = importlib.util.spec_from_file_location(module, str(SUBMISSIONS / f"{module}.py"))
    mod = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(mod)
    fn, spec = getattr(mod, ex_id), get(ex_id)
    verdicts = []
    for case, a, b, ref_a, ref_b in make_plan(spec, False, 0):
        for args, ref in ((a, ref_a), (b, ref_b)):
            try:  # as the worker reports a call: its output, or the exception it raised
                done, out = CallDone(ok=True), fn(*args)
            except Exception as exc:  # noqa: BLE001
                done, out = CallDone(ok=False, error=f"{type(exc).__name__}: {exc}"), None
            verdicts.append(judge_call(spec, case, args, ref, done, Shipped(out, list(args))).ok)
    return verdicts


def test_pure_exercises_are_judged_exactly_on_random_arguments():
    for ex_id in PURE:
        assert all(_judge_all("measure_good", ex_id)), ex_id
        assert not all(_judge_all("measure_wrong", ex_id)), ex_id  # fails on some random arguments


def test_probes_have_the_cost_they_claim():
    import time

    import torch

    from autograder.probes import alloc_probe, count_launches, materialize, ops_probe, peak_memory, sleep_probe

    assert count_launches(materialize(ops_probe(["exp", "neg", "sin", "abs"])), torch.randn(50, 50)) == 4
    x = torch.randn(250_000)
    peak = peak_memory(materialize(alloc_probe(3)), x)
    assert 3 * x.nbytes <= peak <= 5 * x.nbytes + 65536  # 3 temporaries + 2 partial sums
    fn = materialize(sleep_probe(base_ms=2.0, first_ms=60.0, outlier_ms=40.0, outlier_every=3))
    t0 = time.perf_counter(); fn(); first = time.perf_counter() - t0
    t0 = time.perf_counter(); fn(); second = time.perf_counter() - t0
    assert first > 0.055 and second < 0.03


def test_no_constant_answer_passes_the_counting_exercises():
    """The random cases of count_kernel_launches and peak_memory_bytes ask for distinct counts, so a
    function returning one fixed number fails some case of every grading and of every check."""
    import re

    from autograder import specs

    for _ in range(50):
        for quick in (True, False):
            ops = [int(re.match(r"(\d+) elementwise", c.name).group(1)) for c in specs.get("count_kernel_launches").cases(quick)]
            live = [int(re.match(r"(\d+) live", c.name).group(1)) for c in specs.get("peak_memory_bytes").cases(quick)]
            assert len(set(ops)) == len(ops) >= 2 and len(set(live)) == len(live) >= 2


def test_comparing_flops_with_bytes_fails_classify_bound_on_every_draw():
    """The usual mistake (flops > bytes, no ridge point) fails some case of every list check or the grade
    draws: otherwise check and the grade could disagree on the same code, one run in a hundred."""
    from autograder.specs import get

    spec = get("classify_bound")
    for quick in (True, False) * 500:
        cases = [c.build(None) for c in spec.cases(quick)]
        assert any(("compute" if f > b else "memory") != spec.reference(f, b, pf, pb) for f, b, pf, pb in cases)
        assert all(abs(f / b / (pf / pb) - 1) > 0.5 for f, b, pf, pb in cases)  # never near the ridge
        # every memory-bound case does more than a flop per byte: the mistake fails each of them
        assert all(f > b for f, b, pf, pb in cases if spec.reference(f, b, pf, pb) == "memory")
