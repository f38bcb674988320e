"""The non-tensor exercises of 00_measure and 02_profiling, judged with functions of known cost."""
from __future__ import annotations

from _autograder_helpers import graded, text

MEASURE = ("time_floor", "softmax_bytes", "benchmark", "count_kernel_launches", "peak_memory_bytes",
           "classify_bound")


def test_correct_measurements_pass():
    res = graded("measure_good.py", MEASURE)
    for ex_id in MEASURE:
        assert res[ex_id]["correct"], (ex_id, text(res[ex_id]))
        assert res[ex_id]["score"] == 1.0


def test_wrong_measurements_fail():
    res = graded("measure_wrong.py", MEASURE)
    for ex_id in MEASURE:
        assert not res[ex_id]["correct"], ex_id
        assert res[ex_id]["score"] == 0.0
    assert "median" in text(res["benchmark"])  # the hint names the fix


def test_probes_have_the_cost_they_claim():
    import time

    import torch

    from autograder.probes import alloc_probe, count_launches, materialize, ops_probe, peak_memory, sleep_probe

    assert count_launches(materialize(ops_probe(["exp", "neg", "sin"])), torch.randn(50, 50)) == 3
    x = torch.randn(250_000)
    peak = peak_memory(materialize(alloc_probe(3)), x)
    assert 3 * x.nbytes <= peak <= 4 * x.nbytes + 65536
    fn = materialize(sleep_probe(base_ms=2.0, first_ms=60.0, outlier_ms=40.0, outlier_every=3))
    t0 = time.perf_counter(); fn(); first = time.perf_counter() - t0
    t0 = time.perf_counter(); fn(); second = time.perf_counter() - t0
    assert first > 0.055 and second < 0.03
