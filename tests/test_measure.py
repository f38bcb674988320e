"""measure's helpers for the notebooks: the timer they call, and the CPU memory timeline."""
from __future__ import annotations

import time

import course  # noqa: F401  (the device switch, before torch work)
import torch


def test_bench_interleaved_times_each_candidate_in_turns():
    from measure.timer import EMPTY, bench, bench_interleaved

    calls = []

    def slow():
        calls.append("slow")
        time.sleep(0.004)

    def fast():
        calls.append("fast")

    ms = bench_interleaved({"slow": slow, "fast": fast}, reps=4, warmup=1)
    assert list(ms) == ["slow", "fast"] and EMPTY not in ms
    assert ms["slow"] > 3.0 and ms["fast"] < ms["slow"]
    assert calls[2:] == ["slow", "fast"] * 4  # after one warm-up each, the candidates take turns
    assert bench(lambda x: x + 1, torch.ones(4)) > 0


def test_memory_timeline_counts_frees_inside_operators():
    """Backward frees what the forward saved inside the autograd engine's operators: the timeline (from the
    profiler's exported trace) pairs each free with its allocation, so its peak is what was alive at once."""
    from torch.profiler import ProfilerActivity, profile

    from measure import memory_timeline

    x = torch.randn(64, 128)
    w1, w2 = torch.randn(256, 128, requires_grad=True), torch.randn(128, 256, requires_grad=True)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        h = torch.tanh(x @ w1.t())
        ((h @ w2.t()) ** 2).sum().backward()
        del h
    blocks = memory_timeline.from_profile(prof)
    sizes = [b.size for b in blocks]
    assert 64 * 256 * 4 in sizes and 256 * 128 * 4 in sizes  # h, and w1's gradient
    assert all(b.end is None or b.end > b.start for b in blocks)
    kept = [b for b in blocks if b.end is None]  # the two gradients outlive the recording
    assert sorted(b.size for b in kept) == sorted([w1.numel() * 4, w2.numel() * 4])
    # At the peak: both gradients' worth, at least, and never more than everything allocated.
    assert 2 * 256 * 128 * 4 <= memory_timeline.peak(blocks) < sum(sizes)
    assert {b.label for b in blocks} & {"mm", "matmul", "tanh", "MmBackward0", "TanhBackward0"}


def test_attention_backward_takes_delta_from_the_output_it_is_given():
    import torch

    from measure import reference

    g = torch.Generator().manual_seed(0)
    q, k, v, do = (torch.randn(1, 2, 7, 4, generator=g, dtype=torch.float64) for _ in range(4))
    o, _ = reference.attention(q, k, v, True)
    exact = reference.attention(q, k, v, True, do=do)
    same = reference.attention(q, k, v, True, do=do, o=o)
    assert all(torch.allclose(a, b) for a, b in zip(exact, same))
    rounded = reference.attention(q, k, v, True, do=do, o=o + 1e-3)  # an o off by its rounding, say
    assert not torch.allclose(rounded[0], exact[0]) and torch.equal(rounded[2], exact[2])  # dv needs no delta


def test_traffic_counts_each_operators_bytes_and_no_views():
    from measure.traffic import Traffic, nbytes

    x = torch.ones(100)
    with Traffic() as tr:
        y = (x.view(10, 10) + 1).exp()
    assert [op for op, _, _ in tr.ops] == ["add", "exp"]  # the view moved nothing
    assert tr.ops[0][1:] == (400, 400) and tr.total == 1600 and nbytes([x, y]) == 800


def test_timeline_peak_bytes_sees_a_calls_temporary_on_the_cpu():
    from measure.memory_timeline import peak_bytes

    def temporary(x):
        big = torch.empty(1 << 20, dtype=torch.uint8)  # 1 MiB, freed before returning
        return x + big[:1].float()

    assert peak_bytes(temporary, torch.ones(4)) >= 1 << 20


def test_setup_notebook_seeds_and_says_where_it_runs(monkeypatch, capsys):
    import course

    threads = torch.get_num_threads()
    monkeypatch.setenv("COURSE_THREADS", "1")
    try:
        course.setup_notebook()
        first = torch.rand(3)
        assert course.describe() in capsys.readouterr().out
        course.setup_notebook()
        assert torch.equal(torch.rand(3), first)  # seed 0 each time
        if not course.ON_GPU:
            assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(threads)


def test_a_meter_skips_the_operators_its_skip_names():
    """The grader's meter leaves out the CPU interpreter's own copies (``skip``: told by the frame that ran
    the operator); everything else is counted as before."""
    from measure.memory import MemoryMeter

    with MemoryMeter(skip=lambda frame: True) as skipped, MemoryMeter() as counted:
        t = torch.empty(1000)
    assert counted.peak == t.untyped_storage().nbytes() and skipped.peak == 0


def test_past_its_limit_a_memory_meter_names_the_code_that_made_most_of_the_bytes_held():
    """Not the last allocation (the one that went past the limit), but the line whose storages are most of what
    was held at the peak: there the bytes are to be saved."""
    import sys

    from measure.memory import MemoryMeter

    here = sys._getframe().f_code.co_filename
    x = torch.ones(16)
    pieces_line = sys._getframe().f_lineno + 2
    with MemoryMeter(inputs=(x,), limit=3000) as meter:
        pieces = [torch.zeros(100) for _ in range(7)]  # 2,800 bytes, under the limit; this line holds most
        last = torch.zeros(60)                          # 240 more: past it
    lines = [line for name, line in meter.held_most_at if name == here]
    assert meter.peak > 3000 and lines[:1] == [pieces_line], meter.held_most_at
    del pieces, last
    with MemoryMeter(inputs=(x,)) as unlimited:
        torch.zeros(1000)
    assert unlimited.held_most_at is None  # no limit: nothing to name (and no stack taken per storage)


def test_a_harness_violation_names_the_learners_line_or_a_module_beside_it(tmp_path):
    from autograder import runner
    from autograder.legality import OpRecorder

    (tmp_path / "helper.py").write_text("x = 1\n")
    source = str(tmp_path / "submission.py")
    rec = OpRecorder(source, str(tmp_path))
    broken = {"violation": "held too much{crossed}: dequantize in the kernel", "peak_bytes": 9, "limit_bytes": 4}
    stacks = {"mine": [("/lib/torch.py", 3), (str(tmp_path / "helper.py"), 7), (source, 12)],
              "helper": [("/lib/torch.py", 3), (str(tmp_path / "helper.py"), 7)],
              "neither": [("/lib/torch.py", 3)]}
    where = {k: runner.harness_violation(rec.place({**broken, "stack": s}), lambda n: f"cell 2, line {n}")
             for k, s in stacks.items()}
    assert where == {"mine": "held too much (at cell 2, line 12): dequantize in the kernel",
                     "helper": "held too much (at helper.py, line 7): dequantize in the kernel",
                     "neither": "held too much: dequantize in the kernel"}
