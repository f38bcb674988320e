"""probes.launch_cost and probes.protocol_timeline: what each reference kernel's launch costs the CPU, and
one timed call's steps read from a profiler timeline. Their calls are checked here under the interpreter;
the timing itself needs a GPU."""
import pytest
import torch


def test_the_launch_cost_tool_calls_every_kernel_it_names(capsys):
    """probes.launch_cost: each kernel's call is well formed (run here under the interpreter); the timing
    itself needs a GPU, and says so without one."""
    import course
    from probes import launch_cost

    calls = launch_cost._calls((8, 48), torch.float32)
    assert set(calls) == set(launch_cost.KERNELS) == {"bias_gelu", "softmax", "online_softmax", "layer_norm_fwd",
                                                      "layer_norm_bwd"}
    from measure.memory import tensors_in

    for fn, args in calls.values():
        assert all(torch.isfinite(t).all() for t in tensors_in(fn(*args)))
    if not course.ON_GPU:
        assert launch_cost.main([]) == 2 and "needs a GPU" in capsys.readouterr().out


def test_the_launch_cost_tool_profiles_one_kernels_calls():
    from probes import launch_cost

    text = launch_cost.profile("layer_norm_bwd", (8, 48), torch.float32, calls=2, top=500)
    assert "Ordered by: internal time" in text and "tottime" in text and "(layer_norm_bwd)" in text


def test_the_protocol_timeline_pairs_each_kernel_with_an_eager_twin_that_agrees():
    """probes.protocol_timeline: each reference call and its eager twin give the same results (interpreter
    here), so the timeline compares like with like."""
    from measure.memory import tensors_in
    from probes import protocol_timeline

    names = protocol_timeline.KERNELS + protocol_timeline.BLOCKS
    calls = protocol_timeline.calls((8, 48), torch.float32, names, block=(1, 16, 32, 2))
    assert {name for name, _ in calls} == set(names)
    for name in names:
        (ours, args), (eager, _) = calls[name, "triton"], calls[name, "eager"]
        for a, b in zip(tensors_in(ours(*args)), tensors_in(eager(*args))):
            torch.testing.assert_close(a.reshape(b.shape), b, atol=2e-4, rtol=2e-4)


def test_the_protocol_timeline_times_identical_copies_in_every_place():
    from probes import protocol_timeline

    medians = protocol_timeline.position_medians(lambda x: x * 2, (torch.ones(4),), copies=3, reps=3)
    assert len(medians) == 3 and all(m > 0 for m in medians)
    assert protocol_timeline.parse_args(["--positions", "3"]).positions == 3
    with pytest.raises(SystemExit):  # one copy has nothing to be compared with
        protocol_timeline.parse_args(["--positions", "1"])


def _trace_rep(t0: float, to_launch: float, idle: float, gap: float, after: float, corr: int) -> list[dict]:
    """A synthetic chrome-trace repetition: flush kernel 100 us, a call launching two kernels of 50 us."""
    from probes.protocol_timeline import CALL, REP

    call0 = t0 + 10
    first_launch_end = call0 + to_launch
    flush_end = t0 + 5 + 100
    k1 = max(flush_end + idle, first_launch_end + 1)
    k2 = k1 + 50 + gap
    sync_end = k2 + 50 + after
    return [
        {"cat": "user_annotation", "name": REP, "ts": t0, "dur": sync_end + 5 - t0},
        {"cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": t0 + 1, "dur": 3, "args": {"correlation": corr}},
        {"cat": "kernel", "name": "fill", "ts": t0 + 5, "dur": 100, "args": {"correlation": corr}},
        {"cat": "user_annotation", "name": CALL, "ts": call0, "dur": to_launch + 8},
        {"cat": "cuda_driver", "name": "cuLaunchKernelEx", "ts": first_launch_end - 4, "dur": 4,
         "args": {"correlation": corr + 1}},
        {"cat": "cuda_driver", "name": "cuLaunchKernelEx", "ts": first_launch_end + 2, "dur": 4,
         "args": {"correlation": corr + 2}},
        {"cat": "kernel", "name": "k1", "ts": k1, "dur": 50, "args": {"correlation": corr + 1}},
        {"cat": "kernel", "name": "k2", "ts": k2, "dur": 50, "args": {"correlation": corr + 2}},
        {"cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "ts": call0 + to_launch + 9,
         "dur": sync_end - (call0 + to_launch + 9)},
    ]


def test_the_protocol_timeline_reads_each_repetitions_idle_gaps_and_kernels():
    from probes import protocol_timeline

    # A launch inside the flush (30 us after the call starts, the flush ends 95 us after it) costs nothing;
    # one 150 us in leaves the GPU idle ~55 us; a 7 us gap between the kernels and a slow wake are read too.
    events = (_trace_rep(0, 30, 0, 0, 4, 10) + _trace_rep(1000, 150, 0, 7, 20, 20)
              + [{"cat": "kernel", "name": "stray", "ts": 5, "dur": 1}])  # no launch: ignored
    rows = protocol_timeline.rep_timings(events)
    assert len(rows) == 2
    assert {k: rows[0][k] for k in protocol_timeline.COLUMNS} == {"flush": 100, "to_launch": 30, "idle": 0.0,
                                                                "gaps": 0.0, "kernels": 100, "after": 4}
    assert rows[0]["each"] == (("k1", 50), ("k2", 50))
    assert rows[1]["idle"] == pytest.approx(56) and rows[1]["gaps"] == 7 and rows[1]["after"] == 20
    assert rows[1]["to_launch"] == 150
    assert protocol_timeline.medians(rows)["to_launch"] == 90
    assert "no complete repetition" in protocol_timeline.table({("softmax", "eager"): ({}, 0)})
    # --detail: each kernel's median over the repetitions that ran the most common sequence
    rows.append({**rows[0], "each": (("autotune", 9.0),)})
    each = protocol_timeline.kernel_medians(rows)
    assert each == [("k1", 50), ("k2", 50)]
    text = protocol_timeline.detail({("softmax", "triton"): ({}, 3, each)})
    assert "softmax triton: 2 kernels, 100.0 us" in text and "k2" in text
    assert protocol_timeline.all_timed({("softmax", "triton"): ({}, 3, each)})
    assert not protocol_timeline.all_timed({("softmax", "triton"): ({}, 3, each), ("softmax", "eager"): ({}, 0, [])})


def test_the_protocol_timeline_main_prints_its_tables(monkeypatch, capsys):
    # main's own path, the GPU's parts replaced: the timeline's table with --detail, and --positions.
    import course
    from probes import protocol_timeline

    monkeypatch.setattr(course, "ON_GPU", True)
    monkeypatch.setattr(protocol_timeline, "calls",
                        lambda shape, dtype, kernels, block: {("softmax", "triton"): (None, ())})
    row = {**{c: 1.0 for c in protocol_timeline.COLUMNS}, "each": (("softmax_kernel", 1.0),)}
    monkeypatch.setattr(protocol_timeline, "timeline", lambda fn, args, reps: [row])
    assert protocol_timeline.main(["--kernels", "softmax", "--detail"]) == 0
    out = capsys.readouterr().out
    assert "16384x4096 bfloat16; medians" in out and "softmax triton: 1 kernels, 1.0 us" in out
    monkeypatch.setattr(protocol_timeline, "position_medians", lambda fn, args, n, reps: [1.0] * n)
    assert protocol_timeline.main(["--kernels", "transformer_block_decode", "--positions", "3"]) == 0
    assert "first/rest 1.000" in capsys.readouterr().out
    monkeypatch.setattr(protocol_timeline, "timeline", lambda fn, args, reps: [])
    assert protocol_timeline.main(["--kernels", "softmax"]) == 1  # no complete repetition: a failure


def test_the_int8_launch_probe_says_it_needs_a_gpu(capsys):
    import course
    from probes import int8_launch

    if not course.ON_GPU:
        assert int8_launch.main([]) == 2 and "needs a GPU" in capsys.readouterr().out
    assert int8_launch.SHAPES.split(",")[-1] == "16x8192x57344"  # the shape notebook 08 is timed at
