"""The benchmark suite's CPU-checkable parts: argument parsing, candidate checking, goal evaluation,
table, JSON and plot writing, with a stub timer and stub ceilings (no GPU)."""
import json
import math
import pathlib
import sys
import types

import course
import pytest
import torch

from kernels_ref import bench, benchmarking
from kernels_ref.benchmarking import BenchCase, Ceilings, Goal

CEILINGS = Ceilings(copy_gbps=3000.0, matmul_tflops=700.0)


def make_cases():
    """Two sweep cases of a fake memory-bound op on CPU tensors, plus one with a wrong candidate."""
    cases = []
    for n in (256, 1024):
        nbytes = 2 * 8 * n * 4
        cases.append(BenchCase(
            op="fake_softmax", label=f"8x{n} float32", sweep="N", sweep_value=n,
            make_inputs=lambda n=n: (torch.randn(8, n),),
            candidates={"triton": lambda x: torch.softmax(x, -1), "eager": lambda x: torch.softmax(x, -1),
                        "wrong": lambda x: torch.softmax(x, -1) + 1e-2},
            reference=lambda x: torch.softmax(x.double(), -1), nbytes=nbytes,
            goals=[Goal.peak("triton", 0.9), Goal.faster("triton", "eager"), Goal.faster("wrong", "eager")],
        ))
    return cases


def timer_by_name(ms: dict):
    """Stub timer keyed by candidate: it recognises the candidate from the row being timed."""
    calls = []

    def timer(fn):
        fn()
        calls.append(fn)
        return ms[len(calls) - 1]
    return timer, calls


def test_parse_args():
    a = bench.parse_args(["--quick", "--json", "out/r.json", "--ops", "softmax, layer_norm_fwd"])
    assert a.quick and a.json == "out/r.json" and a.ops == ["softmax", "layer_norm_fwd"]
    a = bench.parse_args([])
    assert not a.quick and a.json is None and a.ops is None
    with pytest.raises(SystemExit):
        bench.parse_args(["--bogus"])


@pytest.mark.skipif(course.ON_GPU, reason="checks the message a machine without a GPU gets")
def test_main_without_gpu_exits_2(capsys):
    assert bench.main([]) == 2
    err = capsys.readouterr().err.strip()
    assert "GPU" in err and len(err.splitlines()) == 1


def test_goal_validation():
    with pytest.raises(ValueError):
        Goal("triton", "ratio", ">=", 1.0)  # needs a baseline
    with pytest.raises(ValueError):
        Goal("triton", "speed", ">=", 1.0)
    with pytest.raises(ValueError):
        Goal("triton", "fraction_of_peak", ">", 0.9)
    with pytest.raises(ValueError, match="unknown candidate"):
        BenchCase("op", "l", lambda: (), {"triton": abs}, goals=[Goal.faster("triton", "eager")])


def test_check_outputs_rejects_nan_shape_and_error():
    ref = torch.ones(4, dtype=torch.float64)
    assert benchmarking.check_outputs(torch.ones(4), ref)[0]
    assert not benchmarking.check_outputs(torch.tensor([1.0, 1, 1, float("nan")]), ref)[0]
    assert not benchmarking.check_outputs(torch.ones(5), ref)[0]
    assert not benchmarking.check_outputs(torch.ones(4) * 1.01, ref)[0]           # fp32: 1e-4
    assert benchmarking.check_outputs(torch.ones(4, dtype=torch.bfloat16) * 1.0078125, ref)[0]  # bf16 ulp
    assert not benchmarking.check_outputs((torch.ones(4),), (ref, ref))[0]
    inf_ref = torch.tensor([-math.inf, 0.0], dtype=torch.float64)
    assert benchmarking.check_outputs(torch.tensor([-math.inf, 0.0]), inf_ref)[0]
    assert not benchmarking.check_outputs(torch.tensor([0.0, 0.0]), inf_ref)[0]


def test_run_suite_rates_speedups_and_goals():
    cases = make_cases()
    # Per case, candidates are timed in order triton, eager (wrong is never timed: it fails its check).
    ms = [0.010, 0.020, 0.050, 0.040]
    timer, calls = timer_by_name(ms)
    ceilings, rows, verdicts = benchmarking.run_suite(cases, ceilings=CEILINGS, timer=timer, progress=False)
    assert len(calls) == 4
    by = {(r.label, r.candidate): r for r in rows}
    t0 = by[("8x256 float32", "triton")]
    assert t0.correct and t0.ms == 0.010
    assert t0.gbps == pytest.approx(2 * 8 * 256 * 4 / 1e-5 / 1e9)
    assert t0.fraction_of_peak == pytest.approx(t0.gbps / 3000.0)
    assert t0.speedup["eager"] == pytest.approx(2.0)
    wrong = by[("8x256 float32", "wrong")]
    assert not wrong.correct and wrong.ms is None and "tolerance" in wrong.note
    v = {(x.label, x.goal): x for x in verdicts}
    assert v[("8x256 float32", "triton: eager/triton >= 1")].passed
    assert not v[("8x1024 float32", "triton: eager/triton >= 1")].passed        # 0.05 vs 0.04 ms
    assert not v[("8x256 float32", "triton: fraction of peak >= 0.9")].passed    # a tiny CPU case
    assert all(not x.passed for x in verdicts if x.goal.startswith("wrong"))     # failed check: MISS
    table = benchmarking.format_table(rows, verdicts)
    assert "== fake_softmax ==" in table and "PASS" in table and "MISS" in table and "WRONG" in table


def test_fraction_of_peak_goal_passes_when_fast_enough():
    case = make_cases()[0]
    nbytes_per_ms = case.nbytes / 1e-3 / 1e9  # GB/s at 1 ms
    fast = nbytes_per_ms / (0.95 * CEILINGS.copy_gbps)  # ms that gives 95% of the ceiling
    timer, _ = timer_by_name([fast, 1.0])
    _, rows, verdicts = benchmarking.run_suite([case], ceilings=CEILINGS, timer=timer, progress=False)
    peak = [x for x in verdicts if "fraction of peak" in x.goal][0]
    assert peak.passed and peak.value == pytest.approx(0.95)


def test_peak_memory_metric_ratio_goal():
    case = BenchCase(
        op="fake_ce", label="small", make_inputs=lambda: (torch.ones(3),),
        candidates={"triton": lambda x: x * 2, "eager": lambda x: x + x},
        reference=lambda x: x.double() * 2, metric="peak_memory", goals=[Goal.faster("triton", "eager", 4.0)])
    peaks = iter([100, 500])
    _, rows, verdicts = benchmarking.run_suite([case], ceilings=CEILINGS, timer=lambda fn: 1.0,
                                               peak_memory=lambda fn: next(peaks), progress=False)
    assert rows[0].peak_bytes == 100 and verdicts[0].passed and verdicts[0].value == pytest.approx(5.0)


def test_a_gpu_time_case_is_timed_by_the_gpu_clock():
    # clock="gpu" cases are timed by gpu_timer (the launch hidden), the others by the protocol's timer.
    def case(clock):
        return BenchCase("fake", clock, lambda: (torch.ones(2),), {"triton": lambda x: x, "eager": lambda x: x + 0},
                         reference=lambda x: x.double(), clock=clock)
    _, rows, _ = benchmarking.run_suite([case("protocol"), case("gpu")], ceilings=CEILINGS, timer=lambda fn: 1.0,
                                        gpu_timer=lambda fn: 2.0, progress=False)
    assert [r.ms for r in rows] == [1.0, 1.0, 2.0, 2.0]
    with pytest.raises(ValueError, match="clock"):
        case("wall")


def test_a_baseline_with_outputs_off_is_timed_and_said_so_ours_is_not():
    # eager's dweight in bfloat16 can be outside the tolerance at long sums: the goal against it still needs
    # its time. A kernel of ours that is off, or a baseline that returns NaN, is not timed.
    def off(x):
        return x + 1e-2

    case = BenchCase("fake", "c", lambda: (torch.ones(4),),
                     {"triton": lambda x: x * 1, "eager": off, "vendor_nan": lambda x: x * float("nan"), "triton_v2": off},
                     reference=lambda x: x.double(), goals=[Goal.faster("triton", "eager")])
    _, rows, verdicts = benchmarking.run_suite([case], ceilings=CEILINGS, timer=lambda fn: 1.0, progress=False)
    by = {r.candidate: r for r in rows}
    assert by["eager"].ms == 1.0 and not by["eager"].correct and "timed though" in by["eager"].note
    assert by["vendor_nan"].ms is None and by["triton_v2"].ms is None
    assert verdicts[0].value == pytest.approx(1.0)  # the goal has its baseline


def test_a_crashing_candidate_is_reported_not_fatal():
    def boom(x):
        raise RuntimeError("illegal memory access\nmore")
    case = BenchCase("fake", "c", lambda: (torch.ones(2),), {"triton": boom, "eager": lambda x: x},
                     reference=lambda x: x.double(), goals=[Goal.faster("triton", "eager")])
    _, rows, verdicts = benchmarking.run_suite([case], ceilings=CEILINGS, timer=lambda fn: 1.0, progress=False)
    assert not rows[0].correct and rows[0].note == "RuntimeError: illegal memory access"
    assert not verdicts[0].passed and rows[1].correct


def test_main_gpu_clock_relabels_and_times_every_case_by_the_gpu(monkeypatch, capsys):
    fake = types.ModuleType("fake_bench_ops")
    fake.bench_cases = lambda quick: make_cases()
    monkeypatch.setitem(sys.modules, "fake_bench_ops", fake)
    rc = bench.main(["--clock", "gpu", "--no-progress"], timer=lambda fn: 0.5, gpu_timer=lambda fn: 0.25,
                    ceilings=CEILINGS, modules=("fake_bench_ops",))
    assert rc == 0
    printed = capsys.readouterr().out
    assert "GPU time" in printed and "0.2500" in printed and "0.5000" not in printed


def test_gpu_clock_keeps_one_case_per_label():
    # linear_bias_gelu has its own GPU-time case: the relabelled protocol case would duplicate its label.
    from kernels_ref.matmul import linear_bias_gelu_cases

    labels = [c.label for c in bench.on_gpu_clock(linear_bias_gelu_cases(33, 20, 17))]
    assert len(labels) == len(set(labels)) == 2 and all(label.endswith("GPU time") for label in labels)


def test_main_writes_json_and_plots(tmp_path, monkeypatch, capsys):
    fake = types.ModuleType("fake_bench_ops")
    fake.bench_cases = lambda quick: make_cases()[:1] if quick else make_cases()
    monkeypatch.setitem(sys.modules, "fake_bench_ops", fake)
    out = tmp_path / "results" / "bench.json"
    rc = bench.main(["--json", str(out), "--no-progress"], timer=lambda fn: 0.5, ceilings=CEILINGS,
                    modules=("fake_bench_ops", "kernels_ref.not_written_yet"))
    assert rc == 0
    printed = capsys.readouterr().out
    assert "skipped kernels_ref.not_written_yet" in printed and "fake_softmax" in printed
    data = json.loads(out.read_text())
    for key in ("gpu", "torch", "triton", "date", "method", "ceilings", "rows", "goals"):
        assert key in data
    assert data["ceilings"]["copy_gbps"] == 3000.0
    assert len(data["rows"]) == 6 and data["goals_total"] == 6
    assert {r["candidate"] for r in data["rows"]} == {"triton", "eager", "wrong"}
    png = out.parent / "bench-fake_softmax.png"  # beside the JSON, named after it
    assert png.exists() and png.read_bytes()[:4] == b"\x89PNG"
    assert not list(out.parent.glob("*.tmp*"))  # the atomic write left nothing behind
    # --ops filters, and an unknown op is a clear error
    assert bench.main(["--ops", "fake_softmax", "--quick", "--no-progress"], timer=lambda fn: 0.5,
                      ceilings=CEILINGS, modules=("fake_bench_ops",)) == 0
    with pytest.raises(SystemExit, match="unknown op"):
        bench.main(["--ops", "nope"], timer=lambda fn: 0.5, ceilings=CEILINGS, modules=("fake_bench_ops",))


def test_every_op_module_builds_valid_bench_cases():
    """The real suite's cases are well formed (built, not run: their inputs live on the GPU)."""
    # the memory-bound modules; matmul, flash_attention, checkpoint, quant, gpt and the serving modules test
    # their own cases (their baselines are other candidates than "eager", or no float64 reference at their
    # size: tests/test_kernels_serving.py, tests/test_kernels_gpt.py)
    own = ("matmul", "flash_attention", "checkpoint", "quant", "sampling", "rope_cache", "paged_attention",
           "decode_step", "gpt")
    mine = [m for m in bench.MODULES if m.split(".")[-1] not in own]
    for quick in (True, False):
        cases, notes = bench.collect_cases(quick, modules=mine)
        ops = {c.op for c in cases}
        assert {"bias_gelu", "softmax", "online_softmax", "layer_norm_fwd", "layer_norm_bwd", "rms_norm_fwd",
                "rms_norm_bwd", "linear_cross_entropy"} <= ops
        for c in cases:
            assert c.reference is not None and "triton" in c.candidates and "eager" in c.candidates
            assert c.goals and (c.nbytes or c.flops or c.metric == "peak_memory")
    full, _ = bench.collect_cases(False, modules=mine)
    assert any(c.op == "softmax" and c.label == "16384x4096 bfloat16" for c in full)
    assert len({c.sweep_value for c in full if c.op == "softmax" and c.sweep}) >= 6


def test_small_real_cases_check_out_on_this_device():
    """Run the suite's checking path on real kernels at small size (stub timer): triton passes its check."""
    from kernels_ref.softmax import softmax, softmax_torch
    from kernels_ref.layer_norm import layer_norm_bwd, layer_norm_bwd_torch, layer_norm_fwd, layer_norm_fwd_torch

    def make():
        x, w, b, dy = torch.randn(5, 70), torch.randn(70), torch.randn(70), torch.randn(5, 70)
        _, mean, rstd = layer_norm_fwd(x, w, b, 1e-5)
        return x, w, b, dy, mean, rstd

    cases = [
        BenchCase("softmax", "5x70", lambda: (torch.randn(5, 70, device=course.DEVICE),),
                  {"triton": softmax, "eager": lambda x: torch.softmax(x, -1)},
                  reference=lambda x: softmax_torch(x.double()), nbytes=2 * 5 * 70 * 4),
        BenchCase("layer_norm_bwd", "5x70", make,
                  {"triton": lambda x, w, b, dy, m, r: layer_norm_bwd(dy, x, w, m, r),
                   "eager": lambda x, w, b, dy, m, r: torch.ops.aten.native_layer_norm_backward(
                       dy, x, [70], m[:, None], r[:, None], w, b, [True, True, True])},
                  reference=lambda x, w, b, dy, m, r: layer_norm_bwd_torch(
                      dy.double(), x.double(), w.double(), *layer_norm_fwd_torch(x.double(), w.double(), b.double())[1:])),
    ]
    _, rows, _ = benchmarking.run_suite(cases, ceilings=CEILINGS, timer=lambda fn: 1.0, progress=False)
    assert all(r.correct for r in rows), [(r.op, r.candidate, r.note) for r in rows]


def test_a_case_whose_set_up_fails_is_reported_and_the_suite_goes_on():
    from kernels_ref.benchmarking import BenchCase, Ceilings, run_suite

    def broken():
        raise TypeError("bad inputs")

    good = BenchCase(op="ok", label="1", make_inputs=lambda: (torch.ones(3),), candidates={"triton": lambda x: x * 1},
                     reference=lambda x: x.double())
    bad = BenchCase(op="bad", label="1", make_inputs=broken, candidates={"triton": lambda x: x, "eager": lambda x: x})
    _, rows, _ = run_suite([bad, good], ceilings=Ceilings(copy_gbps=1000.0, matmul_tflops=100.0),
                           timer=lambda fn: 1.0, progress=False)
    assert [(r.op, r.candidate, r.correct) for r in rows] == [("bad", "triton", False), ("bad", "eager", False),
                                                              ("ok", "triton", True)]
    assert "case set-up failed: TypeError: bad inputs" in rows[0].note


# ---------------------------------------------------------------------------------------------- --repeat

def ratio_case():
    """One case whose triton/eager ratio each run sets, with a >= goal and a <= goal on it."""
    return BenchCase("fake_norm", "64 float32", lambda: (torch.ones(64),),
                     {"triton": lambda x: x * 1, "eager": lambda x: x + 0}, reference=lambda x: x.double(),
                     goals=[Goal.faster("triton", "eager", 1.5), Goal.faster("triton", "eager", 1.0),
                            Goal("triton", "ratio", "<=", 2.0, "eager")])


def in_process_runs(monkeypatch, speedups, broken=None):
    """run_once for bench.main(--repeat): run k is bench.main in this process with eager timed at
    speedups[k] x triton's time; ``broken`` maps a run number to what it does instead. Returns (run_once,
    the argument lists it was given)."""
    fake = types.ModuleType("fake_repeat_ops")
    fake.bench_cases = lambda quick: [ratio_case()]
    monkeypatch.setitem(sys.modules, "fake_repeat_ops", fake)
    given = []

    def run_once(argv):
        given.append(argv)
        k = len(given)
        if broken and k in broken:
            return broken[k](argv)
        times = iter([1.0, speedups[k - 1]])  # triton, then eager
        return bench.main(argv, timer=lambda fn: next(times), ceilings=CEILINGS, modules=("fake_repeat_ops",))
    return run_once, given


def test_repeat_runs_the_suite_n_times_and_judges_each_goal_on_its_worst_run(tmp_path, monkeypatch, capsys):
    run_once, given = in_process_runs(monkeypatch, [1.8, 1.4, 1.7, 2.1])
    out = tmp_path / "bench-quick.json"
    assert bench.main(["--quick", "--repeat", "4", "--no-progress", "--json", str(out)], run_once=run_once) == 0
    assert [a[-1] for a in given] == [str(tmp_path / f"bench-quick-run{k}.json") for k in (1, 2, 3, 4)]
    assert all(json.loads((tmp_path / f"bench-quick-run{k}.json").read_text())["goals_total"] == 3 for k in (1, 2, 3, 4))
    summary = json.loads(out.read_text())
    assert summary["repeat"] == 4 and [r["exit"] for r in summary["runs"]] == [0, 0, 0, 0]
    assert summary["quick"] and "fresh process" in summary["method"] and "gpu" in summary
    goals = {g["goal"]: g for g in summary["goals"]}
    at_least = goals["triton: eager/triton >= 1.5"]
    assert at_least["values"] == pytest.approx([1.8, 1.4, 1.7, 2.1])
    assert at_least["worst"] == pytest.approx(1.4) and at_least["median"] == pytest.approx(1.75)
    assert not at_least["passed"]  # three runs pass, the worst does not: a MISS
    at_most = goals["triton: eager/triton <= 2"]
    assert at_most["worst"] == pytest.approx(2.1) and at_most["cmp"] == "<=" and not at_most["passed"]
    assert goals["triton: eager/triton >= 1"]["passed"] and goals["triton: eager/triton >= 1"]["runs"] == 4
    assert summary["goals_passed"] == 1 and summary["goals_total"] == 3
    printed = capsys.readouterr().out
    table = printed[printed.index("each goal judged on its worst run"):].splitlines()
    rows = [line for line in table if line.startswith("fake_norm")]
    assert len(rows) == 3 and "1.400" in rows[0] and "1.750" in rows[0] and ">= 1.5" in rows[0]
    assert "MISS" in rows[0] and rows[0].endswith("4/4") and "PASS" in rows[1] and "2.100" in rows[2]
    assert table[-1].startswith("goals: 1/3 passed") and "wrote" in printed  # the table comes last


def test_a_run_that_crashes_is_reported_and_the_others_are_summarised(tmp_path, monkeypatch, capsys):
    def killed(argv):
        return -9  # no results file at all

    def cut_off(argv):  # a run that finished one goal, then died
        path = pathlib.Path(argv[-1])
        bench.main(argv, timer=lambda fn: 1.0, ceilings=CEILINGS, modules=("fake_repeat_ops",))
        data = json.loads(path.read_text())
        path.write_text(json.dumps({**data, "partial": True, "goals": data["goals"][:1]}))
        return 1

    run_once, _ = in_process_runs(monkeypatch, [1.8, None, None, 1.9], broken={2: killed, 3: cut_off})
    out = tmp_path / "bench-quick.json"
    assert bench.main(["--repeat", "4", "--no-progress", "--json", str(out)], run_once=run_once) == 1
    summary = json.loads(out.read_text())
    errors = [r.get("error") for r in summary["runs"]]
    assert errors[0] is None and errors[3] is None
    assert errors[1] == "was killed by signal 9 and left no results"
    assert errors[2] == "exited with code 1 before it finished (1 goal(s) measured, kept)"
    goals = {g["goal"]: g for g in summary["goals"]}
    first = goals["triton: eager/triton >= 1.5"]
    assert first["values"] == pytest.approx([1.8, None, 1.0, 1.9]) and first["runs"] == 3
    assert first["worst"] == pytest.approx(1.0) and first["median"] == pytest.approx(1.8)
    # a goal that passed in every run that measured it still misses: two of four runs did not measure it
    passed_where_measured = goals["triton: eager/triton >= 1"]
    assert passed_where_measured["runs"] == 2 and not passed_where_measured["passed"]
    printed = capsys.readouterr().out
    assert "run 2 was killed by signal 9" in printed and "2/4" in printed


def test_a_repeated_call_cut_off_resumes_at_the_next_run(tmp_path, monkeypatch, capsys):
    run_once, given = in_process_runs(monkeypatch, [1.6, 1.7, 1.8, 1.9, 1.75])
    out = tmp_path / "bench.json"
    now = [0.0]

    def clock():
        return now[0]

    def timed(argv):  # each run takes 100 s
        now[0] += 100
        return run_once(argv)

    args = bench.parse_args(["--repeat", "3", "--no-progress", "--json", str(out), "--stop-after", "150"])
    assert bench.repeat(args, timed, clock=clock) == 1  # run 2 would end at 200 s: not started
    assert len(given) == 1 and "stopped before run 2 of 3" in capsys.readouterr().out
    assert json.loads(out.read_text())["goals_passed"] == 0  # one run of three judges nothing
    (tmp_path / "bench-run2.json").write_text('{"partial": true, "goals": []}')  # cut off mid-run
    args = bench.parse_args(["--repeat", "3", "--no-progress", "--json", str(out)])
    assert bench.repeat(args, timed, clock=clock) == 0
    assert len(given) == 3  # run 1 kept, runs 2 and 3 run
    summary = json.loads(out.read_text())
    assert [r.get("kept", False) for r in summary["runs"]] == [True, False, False]
    assert summary["goals"][0]["values"] == pytest.approx([1.6, 1.7, 1.8]) and summary["goals"][0]["passed"]
    # a finished run of another suite is not kept
    args = bench.parse_args(["--repeat", "1", "--quick", "--no-progress", "--json", str(out)])
    assert bench.repeat(args, timed, clock=clock) == 0 and len(given) == 4
    # runs kept from a call on another GPU make no distribution with this one's: nothing passes
    second = tmp_path / "bench-run2.json"
    second.write_text(json.dumps({**json.loads(second.read_text()), "gpu": "NVIDIA H200"}))
    args = bench.parse_args(["--repeat", "3", "--no-progress", "--json", str(out)])
    assert bench.repeat(args, timed, clock=clock) == 1 and len(given) == 5  # runs 2 and 3 kept, run 1 run
    summary = json.loads(out.read_text())
    assert "different machines" in summary["error"] and "NVIDIA H200" in summary["error"]
    assert summary["goals_passed"] == 0 and "no goal passes" in capsys.readouterr().out


def test_repeat_arguments_and_the_runs_it_starts():
    args = bench.parse_args(["--quick", "--ops", "a,b", "--repeat", "3", "--clock", "gpu", "--no-progress"])
    assert bench.child_args(args, "x.json") == ["--quick", "--ops", "a,b", "--clock", "gpu", "--no-progress",
                                                "--json", "x.json"]
    assert bench.child_args(bench.parse_args(["--repeat", "2"]), "y.json") == ["--clock", "protocol", "--json", "y.json"]
    assert bench.run_paths("r/bench-quick.json", 2) == ["r/bench-quick-run1.json", "r/bench-quick-run2.json"]
    with pytest.raises(SystemExit):
        bench.parse_args(["--repeat", "0"])


def test_goals_summarised_over_runs_worst_by_direction():
    def verdicts(*values):
        return [{"op": "o", "label": "l", "goal": "triton: fraction of peak >= 0.9", "value": values[0],
                 "passed": values[0] is not None and values[0] >= 0.9},
                {"op": "o", "label": "l", "goal": "triton: eager/triton <= 1.1", "value": values[1],
                 "passed": values[1] is not None and values[1] <= 1.1}]

    [peak, ratio] = benchmarking.summarise_runs([verdicts(0.95, 1.0), verdicts(0.91, 1.05), verdicts(0.97, 0.9)], 3)
    assert (peak["worst"], peak["median"], peak["runs"], peak["passed"]) == (0.91, 0.95, 3, True)
    assert (ratio["worst"], ratio["median"], ratio["passed"]) == (1.05, 1.0, True)
    [peak, ratio] = benchmarking.summarise_runs([verdicts(0.95, 1.0), verdicts(None, 1.2)], 2)
    assert peak["worst"] == 0.95 and peak["runs"] == 1 and not peak["passed"]  # a run without a value fails
    assert ratio["worst"] == 1.2 and not ratio["passed"]
    assert benchmarking.goal_rule("triton: eager/triton >= 1.5") == (">=", 1.5)


def test_stopping_a_repeated_bench_stops_the_run_it_started(monkeypatch):
    """A time limit's SIGTERM to `kernels_ref.bench --repeat` ends the run in flight too: a run left going
    would hold the GPU unseen while the next stage times."""
    import os
    import signal
    import subprocess
    import threading

    started, popen = [], subprocess.Popen

    def sleeper(cmd, **kw):  # stands in for a run of the suite that takes a minute
        started.append(popen([sys.executable, "-c", "import time; time.sleep(60)"], **kw))
        return started[-1]

    class Unhandled(Exception):
        pass

    def unhandled(signum, frame):
        raise Unhandled("run_child left SIGTERM to its default: this process would die, its run go on")

    monkeypatch.setattr(bench.subprocess, "Popen", sleeper)
    previous = signal.signal(signal.SIGTERM, unhandled)
    try:
        threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGTERM)).start()
        with pytest.raises(SystemExit) as stopped:
            bench.run_child(["--quick"])
        assert stopped.value.code == 128 + signal.SIGTERM
        assert started and started[0].poll() is not None  # the run ended with this process
        assert signal.getsignal(signal.SIGTERM) is unhandled  # and the handler it found is back
    finally:
        signal.signal(signal.SIGTERM, previous)
        for child in started:
            if child.poll() is None:
                child.kill()
