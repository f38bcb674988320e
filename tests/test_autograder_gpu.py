"""The autograder's performance path on a GPU, and the logic of tools/gpu_autograder_check.

GPU tests grade the submissions of tests/gpu_submissions with the real grading path (workers, timing,
the checked timed call): a correct Triton softmax passes performance, a slow legal one fails it, and
the ones that try to escape the timer (side stream, cache after warm-up, unwritten memory) neither
pass nor get a shorter time. CPU tests cover the check script's helpers and poison_output.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import pytest
import torch

from tools import gpu_autograder_check as gac

ROOT = Path(__file__).resolve().parent.parent
GPU_SUBS = ROOT / "tests" / "gpu_submissions"
SUBMISSIONS = ROOT / "tests" / "submissions"
SUBS = ROOT / "tests" / "submissions"


@lru_cache(maxsize=None)
def _graded(path: str, exercise: str, timeout: float = 120.0) -> dict:
    from autograder.grading import grade_submission

    result = grade_submission(path, [exercise], quick=True, timeout=timeout)
    return result["exercises"][0]


def _text(ex):
    return "\n".join(ex["feedback"] + ex["violations"])


# ----------------------------------------------------------------------------- GPU: performance path

@pytest.mark.gpu
def test_correct_triton_softmax_passes_performance():
    ex = _graded(str(SUBS / "good_triton.py"), "softmax")
    perf = ex["performance"]
    assert ex["correct"], _text(ex)
    assert perf["graded"] and perf["passed"], (perf, _text(ex))
    assert perf["time_ms"] > 0 and perf["baseline_ms"] > 0
    assert perf["speedup"] == pytest.approx(perf["baseline_ms"] / perf["time_ms"])
    assert perf["achieved"]["unit"] == "GB/s" and 0.05 < perf["fraction_of_peak"] < 1.5
    assert ex["score"] == pytest.approx(1.0)


@pytest.mark.gpu
def test_slow_legal_softmax_is_correct_but_fails_performance():
    ex = _graded(str(GPU_SUBS / "naive_triton.py"), "softmax")
    assert ex["correct"], _text(ex)
    assert ex["performance"]["graded"] and not ex["performance"]["passed"]
    assert ex["performance"]["speedup"] < 0.9
    assert "performance: speedup" in _text(ex)


@lru_cache(maxsize=None)
def _timed_directly(path: str, exercise: str) -> tuple:
    """The timing protocol alone on a submission (no audit, no cases): (entry, credit, ok, notes). The
    static audit already gives these escapes 0 points; this shows the clock would not be fooled either."""
    import tempfile

    from autograder import specs
    from autograder.grading import submission_job, time_against_baseline
    from autograder.isolation import WorkerSession
    from autograder.submission import load

    spec, sub = specs.get(exercise), load(path)
    with tempfile.TemporaryDirectory() as tmp:
        source = sub.write(Path(tmp))
        with WorkerSession(submission_job(spec, sub, source), 300, cwd=str(Path(path).parent),
                           scratch=str(Path(tmp) / "w")) as worker:
            return time_against_baseline(worker, spec, 1234)


@pytest.mark.gpu
def test_side_stream_work_is_timed():
    honest = _graded(str(GPU_SUBS / "naive_triton.py"), "softmax")["performance"]["time_ms"]
    ex = _graded(str(GPU_SUBS / "side_stream.py"), "softmax")
    assert not ex["correct"] and any("stream" in v for v in ex["violations"]), _text(ex)  # the audit sees it
    perf, _credit, ok, _notes = _timed_directly(str(GPU_SUBS / "side_stream.py"), "softmax")
    assert ok  # right values once every stream is synchronized
    assert not perf["passed"]
    assert perf["time_ms"] >= 0.5 * honest, (perf["time_ms"], honest)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["cache_after_warmup.py", "stale_unless_poisoned.py"])
def test_answers_faked_while_timed_do_not_pass(name):
    ex = _graded(str(GPU_SUBS / name), "softmax")
    assert not ex["correct"] and not ex["performance"]["passed"]
    assert ex["performance"]["time_ms"] is None  # a faked time is not reported
    assert ex["violations"], _text(ex)  # the audit names what it does (state kept, poisoning read)
    perf, credit, ok, notes = _timed_directly(str(GPU_SUBS / name), "softmax")
    assert not ok and credit == 0.0 and perf is None
    assert "wrong in a timed call" in notes[0]


@pytest.mark.gpu
def test_deferred_work_is_wrong():
    ex = _graded(str(GPU_SUBS / "deferred.py"), "softmax")
    assert not ex["correct"] and not ex["performance"]["passed"]


@pytest.mark.gpu
def test_time_interleaved_counts_side_stream_work():
    from measure.timer import time_interleaved

    side = torch.cuda.Stream()

    def hidden(x):
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.cuda._sleep(4_000_000)  # 4M cycles: over 2 ms at any clock up to 2 GHz; nobody waits
        return x

    x = torch.zeros(4, device="cuda")
    med = time_interleaved({"hidden": hidden, "noop": lambda x: x}, (x,), reps=11, warmup=1)
    assert med["hidden"] >= 1.5, med
    assert med["noop"] < 0.5, med


@pytest.mark.gpu
def test_poisoned_outputs_leave_no_answer_behind():
    from measure.timer import time_interleaved

    torch.cuda.empty_cache()  # no stale 4 MiB blocks from earlier tests: only this test's outputs are free
    x = torch.randn(1024, 1024, device="cuda")
    seen = []

    def reuses(x):  # returns unwritten memory: the block the baseline's output just freed
        y = torch.empty_like(x)
        seen.append(bool(torch.isnan(y).all()))
        return y

    time_interleaved({"baseline": lambda x: torch.softmax(x, -1), "reuses": reuses}, (x,), reps=11, warmup=1,
                     poison_outputs=True)
    assert all(seen[1:]), seen


@pytest.mark.gpu
def test_illegal_memory_access_and_oom_cost_only_their_exercise():
    from autograder.grading import grade_submission

    result = grade_submission(GPU_SUBS / "faults.py", ["softmax", "online_softmax", "bias_gelu"], quick=True,
                              timeout=120)
    by_id = {ex["id"]: ex for ex in result["exercises"]}
    assert not by_id["softmax"]["correct"]
    assert "memory it does not own" in _text(by_id["softmax"])
    assert not by_id["online_softmax"]["correct"]
    assert "out of memory" in _text(by_id["online_softmax"])
    assert by_id["bias_gelu"]["correct"] and by_id["bias_gelu"]["performance"]["graded"], _text(by_id["bias_gelu"])


# ----------------------------------------------------------------------------- CPU: the check's logic

def _exercise(graded=True, passed=True, correct=True, feedback=("a very long message " * 10,)):
    perf = {"graded": graded, "time_ms": 0.25 if graded else None, "baseline": "torch.softmax (eager)",
            "baseline_ms": 0.24 if graded else None, "speedup": 0.96 if graded else None,
            "achieved": {"value": 2147.5, "unit": "GB/s"} if graded else None,
            "fraction_of_peak": 0.71 if graded else None, "threshold": 0.9, "passed": passed and graded}
    return {"id": "softmax", "score": 1.0, "points": 10, "correct": correct, "performance": perf,
            "violations": [], "feedback": list(feedback)}


def test_row_from_exercise_reads_the_cli_json():
    row = gac.row_from_exercise("good", _exercise(), run=2)
    assert (row["submission"], row["exercise"], row["run"], row["correct"]) == ("good", "softmax", 2, True)
    assert (row["time_ms"], row["baseline_ms"], row["speedup"], row["gbps"], row["fraction_of_peak"]) == \
        (0.25, 0.24, 0.96, 2147.5, 0.71)
    assert row["perf_passed"] is True and row["message"].startswith("a very long")
    cpu = gac.row_from_exercise("good", _exercise(graded=False, feedback=["not graded on this machine"]))
    assert cpu["perf_passed"] is None and cpu["time_ms"] is None and cpu["gbps"] is None
    tflops = _exercise()
    tflops["performance"]["achieved"] = {"value": 500.0, "unit": "TFLOP/s"}
    assert gac.row_from_exercise("mm", tflops)["gbps"] is None
    violation = dict(_exercise(correct=False, feedback=["hint: mask it", "correctness points withheld: rules"]),
                     violations=["calls torch operator aten.exp"])
    assert gac.row_from_exercise("v", violation)["message"] == "calls torch operator aten.exp"
    oom = dict(_exercise(correct=False, feedback=["first failure: 1x1: ran out of memory", "hint: tiny"]),
               violations=["launched 0 Triton kernel(s)"])
    row = gac.row_from_exercise("f", oom)
    assert row["message"] == "first failure: 1x1: ran out of memory"  # what went wrong, before a rule
    assert "launched 0" in row["all_messages"] and "hint" not in row["all_messages"]


def test_format_table_columns_truncation_and_missing_values():
    rows = [gac.row_from_exercise("good_triton", _exercise(), run=1),
            gac.row_from_exercise("good_triton", _exercise(), run=2),
            gac.row_from_exercise("naive", _exercise(graded=False, feedback=["performance is graded on a GPU"])),
            gac.skipped_row("faults", "softmax", "CUDA only")]
    table = gac.format_table(rows).splitlines()
    assert len(table) == 2 + len(rows)
    header = table[0].split()
    assert header[:3] == ["submission", "exercise", "correct"] and header[-1] == "message"
    assert "GB/s" in table[0] and "of peak" in table[0] and "speedup" in table[0]
    assert "good_triton #2" in table[3] and "good_triton #" not in table[2]  # run 1 is not numbered
    assert "0.25" in table[2] and "0.96" in table[2] and "2148" in table[2] and "71%" in table[2]
    assert "..." in table[2] and len(table[2].split("  ")[-1].strip()) <= gac.MESSAGE_WIDTH
    naive = table[4]
    assert "naive" in naive and naive.count(" - ") >= 5  # no perf numbers, perf passed shown as '-'
    assert "skipped: CUDA only" in table[5]
    widths = {len(line) for line in table[:2]}
    assert len(widths) == 1 or table[1].strip("- ") == ""  # the rule spans the header


def test_truncate_collapses_whitespace():
    assert gac.truncate("a\n  b", 10) == "a b"
    assert gac.truncate("x" * 20, 10) == "xxxxxxx..."


def test_spread_and_repeat_spreads():
    assert gac.spread(1.0, 1.0) == 0.0
    assert gac.spread(0.9, 1.1) == pytest.approx(0.2)
    assert gac.spread(None, 1.0) is None
    r1 = gac.row_from_exercise("good", _exercise(), 1)
    r2 = dict(gac.row_from_exercise("good", _exercise(), 2), time_ms=0.26, speedup=0.92)
    lone = gac.row_from_exercise("other", _exercise(), 1)
    (s,) = gac.repeat_spreads([r1, lone, r2])
    assert s["time_ms"] == [0.25, 0.26] and s["time_spread"] == pytest.approx(0.01 / 0.255)
    assert s["same_verdicts"]
    assert "spread" in gac.format_spreads([s]) and "agree" in gac.format_spreads([s])
    r3 = dict(r2, perf_passed=False)
    assert not gac.repeat_spreads([r1, r3])[0]["same_verdicts"]


def _row(label, correct=True, passed=False, time_ms=None, message="", graded=True):
    return {"submission": label, "exercise": "softmax", "run": 1, "correct": correct, "perf_graded": graded,
            "perf_passed": passed if graded else None, "time_ms": time_ms, "speedup": None, "message": message}


def test_judge_row_performance_expectations():
    assert gac.judge_row(_row("g", passed=True, time_ms=0.2), "fast", [], True)[0] is True
    assert gac.judge_row(_row("g", passed=False, time_ms=0.2), "fast", [], True)[0] is False
    assert gac.judge_row(_row("g", correct=False), "fast", [], False)[0] is False
    assert gac.judge_row(_row("g", graded=False), "fast", [], False)[0] is None  # n/a on a CPU
    assert gac.judge_row(_row("n", passed=False, time_ms=2.0), "slow", [], True)[0] is True
    assert gac.judge_row(_row("n", passed=True, time_ms=0.2), "slow", [], True)[0] is False


def test_judge_row_escapes_compare_with_the_honest_slow_kernel():
    honest = [_row("naive_triton", time_ms=2.0), _row("naive_triton", time_ms=2.2)]
    assert gac.judge_row(_row("side", time_ms=1.9), "escape", honest, True)[0] is True
    ok, why = gac.judge_row(_row("side", time_ms=0.01), "escape", honest, True)
    assert ok is False and "escaped" in why
    assert gac.judge_row(_row("side", passed=True, time_ms=5.0), "escape", honest, True)[0] is False
    assert gac.judge_row(_row("side", correct=False), "escape", honest, True)[0] is False
    assert gac.judge_row(_row("deferred", correct=True), "escape_wrong", honest, False)[0] is False
    assert gac.judge_row(_row("deferred", correct=False, graded=False), "escape_wrong", honest, False)[0] is None
    assert gac.judge_row(_row("cache", correct=False), "escape_wrong_on_gpu", honest, True)[0] is True
    assert gac.judge_row(_row("cache", correct=True), "escape_wrong_on_gpu", honest, True)[0] is False
    assert gac.judge_row(_row("cache", correct=True, graded=False), "escape_wrong_on_gpu", honest, False)[0] is None


def test_judge_row_faults_and_the_rest_of_the_notebook():
    msg = "did not finish within the time limit of 45 s and was stopped"
    assert gac.judge_row(_row("f", correct=False, message=msg), "fault:time limit", [], True)[0] is True
    assert gac.judge_row(_row("f", correct=False, message="raised"), "fault:time limit", [], True)[0] is False
    assert gac.judge_row(_row("f", correct=True, message=msg), "fault:time limit", [], True)[0] is False
    assert gac.judge_row(_row("f", correct=True), "graded", [], True)[0] is True
    assert gac.judge_row(_row("f", correct=True, graded=False), "graded", [], True)[0] is False
    assert gac.judge_row(_row("f", correct=True, graded=False), "graded", [], False)[0] is True
    assert gac.judge_row(gac.skipped_row("f", "softmax", "CUDA only"), "fault:x", [], False)[0] is None
    with pytest.raises(ValueError):
        gac.judge_row(_row("f"), "nonsense", [], True)


def test_faults_notebook_is_a_gradable_notebook(tmp_path):
    from autograder.submission import load

    nb = gac.notebook_from_source((GPU_SUBS / "faults.py").read_text())
    path = tmp_path / "faults_notebook.ipynb"
    path.write_text(json.dumps(nb))
    sub = load(path)
    assert sub.kind == "notebook" and len(nb["cells"]) >= 4
    assert {"softmax", "online_softmax", "vector_add", "bias_gelu"} <= sub.defined
    assert sub.where(sub.source.splitlines().index("def vector_add(x, y):") + 1).startswith("cell ")


def test_plan_names_every_submission_and_expectation(tmp_path):
    grades = gac.plan(tmp_path, 45.0)
    assert (tmp_path / "faults_notebook.ipynb").exists()
    for g in grades:
        assert g.path.exists(), g.path
        assert set(g.exercises) == set(g.expect), g.label
    # the H100 budget of the core group (one call): ~30 workers of 5-20 s (the solutions of 03 and 04 included);
    # the legality groups are their own calls (--only legality, --only legality-solutions)
    assert sum(g.repeat * len(g.exercises) for g in grades if g.group == "core") <= 30


def test_poison_output_fills_floats_and_leaves_the_rest():
    from measure.timer import poison_output

    a, b, i = torch.ones(3), torch.ones(2, dtype=torch.bfloat16), torch.ones(2, dtype=torch.int32)
    poison_output((a, [b, i], None))
    assert torch.isnan(a).all() and torch.isnan(b.float()).all() and (i == 1).all()


def test_slow_and_deferred_submissions_are_graded_for_correctness():
    import course

    naive = _graded(str(GPU_SUBS / "naive_triton.py"), "softmax")
    assert naive["correct"], _text(naive)
    assert naive["performance"]["graded"] == course.ON_GPU
    deferred = _graded(str(GPU_SUBS / "deferred.py"), "softmax")
    assert not deferred["correct"]
    assert "NaN" in _text(deferred) or "values off" in _text(deferred), _text(deferred)


class _HostEvent:
    """A stand-in for torch.cuda.Event on the CPU: the host clock at record()."""

    def __init__(self, enable_timing=False):
        self.t = None

    def record(self):
        import time

        self.t = time.perf_counter()

    def synchronize(self):
        pass

    def elapsed_time(self, end):
        return (end.t - self.t) * 1e3


def test_time_interleaved_protocol_with_host_events(monkeypatch):
    """The loop's logic without a GPU: medians minus the empty call's, outputs poisoned between calls,
    warm-up calls made, the baseline interleaved."""
    import time

    from measure import timer as timing

    monkeypatch.setattr(torch.cuda, "Event", _HostEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(timing, "l2_flush_buffer", lambda: torch.empty(16))
    order, outs = [], []

    def slow(x):
        order.append("slow")
        time.sleep(0.004)
        y = x * 2
        outs.append(y)
        return y

    def fast(x):
        order.append("fast")
        return x + 1

    med = timing.time_interleaved({"slow": slow, "fast": fast}, (torch.ones(4),), reps=12, warmup=2,
                                  poison_outputs=True)
    assert 3.0 < med["slow"] < 40.0 and med["fast"] < 1.0
    assert med["fast"] >= timing.MIN_MS
    assert order[:4] == ["slow", "slow", "fast", "fast"]  # warm-up, then interleaved
    assert order[4:8] == ["slow", "fast", "slow", "fast"] and len(order) == 4 + 24
    assert all(torch.isnan(y).all() for y in outs)  # every output poisoned after its call


class _FakeWorker:
    """A worker stand-in for the timing loop on the CPU: answers every request, its call 'takes' ms."""

    def __init__(self, ms, answer, timeout_s=30.0):
        from autograder.fresh import jittered_args

        self.ms, self.answer, self.timeout_s, self.args, self.jittered = ms, answer, timeout_s, None, jittered_args
        self.seeds, self.requests, self.jitter_counts = {}, [], set()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def request(self, req, reply=None):
        from autograder.protocol import Shipped

        self.requests.append(req["op"])
        if req["op"] == "prepare":
            self.jitter_counts.add(len(req.get("jitter", ())))
        if req["op"] == "load":
            self.args = req["args"]
        elif req["op"] == "prepare":
            self.seeds.update(dict(req.get("jitter", ())))
        elif req["op"] == "ship":
            slot = sorted(self.seeds)[req["index"]]
            return Shipped(self.answer(*self.jittered(self.args, self.seeds[slot])), [])
        return {"type": "ack"}

    def timed(self, req):
        from autograder.protocol import CallDone

        self.requests.append("call")
        per_call = 0.01 if req.get("empty") else self.ms
        return per_call * len(req["slots"]), CallDone(ok=True)


def test_the_checked_timed_calls_are_judged_on_fresh_values_remade_here():
    import dataclasses

    from autograder import grading, specs
    from autograder.fresh import jittered_args
    from autograder.protocol import CallDone, Shipped
    from autograder.specs.base import rand

    spec = specs.get("softmax")
    small = dataclasses.replace(spec.performance, inputs=lambda g, dev: (rand(g, (37, 129), device=dev),))
    spec = dataclasses.replace(spec, performance=small)
    base = small.inputs(torch.Generator().manual_seed(7), torch.device("cpu"))
    right = torch.softmax(jittered_args(base, 11)[0], -1)
    assert grading.judge_timed_outputs(spec, base, [(11, CallDone(ok=True), Shipped(right, []))]) == (True, "")
    ok, msg = grading.judge_timed_outputs(spec, base, [(12, CallDone(ok=True), Shipped(right, []))])
    assert not ok and "values off" in msg  # an answer for other values (a cache) is wrong
    ok, msg = grading.judge_timed_outputs(spec, base, [(11, CallDone(ok=True), Shipped(torch.full_like(right, float("nan")), []))])
    assert not ok and "NaN" in msg  # poisoned memory returned unwritten
    assert not grading.judge_timed_outputs(spec, base, [(11, CallDone(ok=False, error="boom"), Shipped(None, []))])[0]

    # The whole loop with fake workers: a submission that answers stale values loses its time and correctness.
    stale = torch.softmax(base[0], -1)
    sub = _FakeWorker(0.001, lambda x: stale)
    perf, credit, ok, notes = grading.time_against_baseline(
        sub, spec, 7, reps=12, warmup=2, open_baseline=lambda: _FakeWorker(1.0, lambda x: torch.softmax(x, -1)))
    assert not ok and credit == 0.0 and perf is None
    assert "wrong in a timed call" in notes[0]
    # An honest one gets its speedup: (1.0 - 0.01) / (0.5 - 0.01), medians less the empty call's.
    honest = _FakeWorker(0.5, lambda x: torch.softmax(x.double(), -1).float())
    perf, credit, ok, notes = grading.time_against_baseline(
        honest, spec, 7, reps=12, warmup=2, open_baseline=lambda: _FakeWorker(1.0, lambda x: x))
    assert ok and abs(perf["speedup"] - 0.99 / 0.49) < 1e-6 and credit == 1.0
    # Every timed request was prepared and every call given fresh values; three were shipped, the rest dropped.
    batch = grading.CALLS_PER_ROUND_TRIP
    assert honest.requests.count("prepare") == honest.requests.count("call") == 2 * 14
    assert honest.jitter_counts == {batch, 0}  # every slot of a call fresh values; an empty request none
    assert honest.requests.count("ship") == 3 and honest.requests.count("drop") == 2 * 14 - 3
    # A run cut short by its time budget still checks three calls: the number of repetitions is fixed before
    # the first one (here the minimum, 10), and the checked ones are drawn from all of them.
    short = _FakeWorker(0.5, lambda x: torch.softmax(x.double(), -1).float())
    perf, credit, ok, notes = grading.time_against_baseline(
        short, spec, 7, reps=50, warmup=2, max_seconds=0.0, open_baseline=lambda: _FakeWorker(1.0, lambda x: x))
    assert ok and short.requests.count("ship") == 3 and short.requests.count("call") == 2 * (2 + 10)


def test_only_rejects_an_unknown_submission_and_names_the_known_ones(tmp_path, capsys):
    from tools import gpu_autograder_check

    with pytest.raises(SystemExit) as stop:
        gpu_autograder_check.main(["--out", str(tmp_path), "--only", "faults_notebook,nope"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "unknown submission(s) ['nope']" in err and "faults_notebook" in err


def test_the_legality_group_grades_every_escape_class_and_the_solutions(tmp_path):
    grades = gac.plan(tmp_path, 30.0)
    legality = {g.label: g for g in grades if g.group == "legality"}
    assert set(gac.LEGALITY_ESCAPES) <= set(legality) and "lce_logits_through_out" in legality
    for label in (*gac.LEGALITY_ESCAPES, "lce_logits_through_out"):
        assert set(legality[label].expect.values()) == {"zero_on_gpu" if label in gac.TIMED_ONLY else "zero"}, label
        assert legality[label].path.is_file(), label
    assert legality["liger_style_lce"].expect == {"linear_cross_entropy": "correct"}
    assert legality["honest_triton_op_softmax"].expect == {"softmax": "correct"}    # PyTorch's documented way
    assert legality["honest_libdevice_bias_gelu"].expect == {"bias_gelu": "correct"}  # Liger's libdevice.tanh
    for label, exercise in (("honest_environment_banner", "softmax"), ("honest_benchmarks_at_import", "softmax"),
                            ("liger_style_layer_norm", "layer_norm_fwd"), ("paged_metadata", "paged_decode_attention")):
        assert legality[label].expect == {exercise: "correct"} and legality[label].path.is_file(), label
    assert "max(seq_lens.tolist())" in legality["paged_metadata"].path.read_text()
    # an escape of other exercises is graded on those (the course's tools as benchmark, peak_memory_bytes)
    assert legality["escape_course_tools"].expect == {"benchmark": "zero", "peak_memory_bytes": "zero"}
    assert legality["escape_lazy_tuple"].expect == {"layer_norm_fwd": "zero"}
    assert legality["escape_modules_through_parameters"].expect == {"benchmark": "zero", "peak_memory_bytes": "zero"}
    assert legality["honest_kernels_made_by_calls"].expect == {"softmax": "correct"}
    assert (tmp_path / "bytecode_beside" / "fastops" / "rows.pyc").is_file()
    solutions = [g for g in grades if g.group == "legality-solutions"]
    assert {g.path.parent.name for g in solutions} == {nb for nb, _ in gac.LEGALITY_SOLUTIONS}
    assert all(g.path.is_file() for g in solutions)
    row = {"correct": True, "perf_passed": False, "message": ""}
    assert gac.judge_row(row, "correct", [], on_gpu=True) == (True, "correct; performance not passed")
    assert gac.judge_row(dict(row, correct=False), "correct", [], on_gpu=False)[0] is False
    timed_only = {"correct": True, "score": 0.7, "message": ""}
    assert gac.judge_row(timed_only, "zero_on_gpu", [], on_gpu=False)[0] is None
    assert gac.judge_row(timed_only, "zero_on_gpu", [], on_gpu=True)[0] is False


def test_jobs_share_the_gpu_only_among_gradings_that_expect_correctness_alone(tmp_path, monkeypatch):
    """--jobs runs escapes and honest code side by side; a grading whose verdict rests on a time (fast,
    slow, a fault's time limit) runs alone, after them, with nothing else running."""
    import threading
    import time as clock

    running, overlaps, lock = set(), {}, threading.Lock()

    def fake_cli(grade, exercises, out, run, quick, meta=None):
        with lock:
            overlaps[grade.label] = set(running)
            running.add(grade.label)
        clock.sleep(0.05)
        with lock:
            running.discard(grade.label)
        return [{"id": e, "correct": True} for e in exercises], 0.05, 0

    monkeypatch.setattr(gac, "run_cli", fake_cli)
    monkeypatch.setattr(gac, "row_from_exercise", lambda label, ex, run=1: {"submission": label, "exercise": ex["id"]})
    grades = [gac.Grade("escape_a", tmp_path, ["softmax"], {"softmax": "zero"}),
              gac.Grade("timed", tmp_path, ["softmax"], {"softmax": "fast"}),
              gac.Grade("escape_b", tmp_path, ["softmax"], {"softmax": "zero_on_gpu"}),
              gac.Grade("honest", tmp_path, ["softmax"], {"softmax": "correct"})]
    calls = [(g, 1) for g in grades]
    order = [call["label"] for _, call, _ in gac.graded_in_order(calls, 3, tmp_path, True, {}, True)]
    assert order == ["escape_a", "escape_b", "honest", "timed"]
    assert overlaps["timed"] == set()                      # alone on the GPU
    assert any(overlaps[label] for label in ("escape_b", "honest"))  # the others shared it
    overlaps.clear()
    order = [call["label"] for _, call, _ in gac.graded_in_order(calls, 1, tmp_path, True, {}, True)]
    assert order == [g.label for g in grades] and not any(overlaps.values())  # one at a time, in plan order


def test_timed_calls_may_not_take_less_than_the_checked_calls_kernels():
    """A timed call is never recorded: code that tells it from a checked call (by an operator's cost, a frame,
    a warning) could do the work with torch there. Its time must then cover most of the device time of the
    kernels a checked call ran on the same inputs; unmeasured (no GPU) or slower is no finding."""
    from autograder import grading

    assert grading.timed_work_violation(0.2, 1.0).startswith("the timed calls took 0.2 ms each, less than the 1 ms")
    assert grading.timed_work_violation(0.8, 1.0) is None             # noise above the 0.75 share
    assert grading.timed_work_violation(3.0, 1.0) is None             # launch overheads on top: slower is honest
    assert grading.timed_work_violation(0.2, None) is None and grading.timed_work_violation(None, 1.0) is None


def test_the_device_is_busy_for_the_union_of_its_kernels():
    """Kernels that overlap on two streams count once; host events do not count."""
    from types import SimpleNamespace

    from torch.autograd import DeviceType

    from autograder.worker import busy_ms

    def event(start, end, device=DeviceType.CUDA):
        return SimpleNamespace(time_range=SimpleNamespace(start=start, end=end), device_type=device)

    events = [event(0, 100), event(50, 150), event(200, 300), event(210, 250), event(0, 10_000, DeviceType.CPU)]
    assert busy_ms(events) == 0.25 and busy_ms([]) == 0.0


def test_the_recorded_call_on_the_timed_workload_is_judged_on_fresh_values():
    """The recorded call on the timed workload sets the bar the timed calls must reach (its kernels' device
    time), so its output is judged too, on fresh values of its own: a call that did less than the work there
    is wrong. Run here with a real worker on a small timed workload (the device time is a GPU's: None here)."""
    import dataclasses
    import tempfile

    from autograder import grading, specs
    from autograder.isolation import WorkerSession
    from autograder.specs.base import rand
    from autograder.submission import load

    spec = specs.get("softmax")
    small = dataclasses.replace(spec.performance, inputs=lambda g, dev: (rand(g, (37, 129), device=dev),))
    spec = dataclasses.replace(spec, performance=small)

    def judged(path):
        sub = load(path)
        with tempfile.TemporaryDirectory() as tmp:
            source = sub.write(Path(tmp))
            with WorkerSession(grading.submission_job(spec, sub, source), 300, cwd=str(Path(path).parent),
                               scratch=str(Path(tmp) / "w")) as worker:
                loaded = grading.load_timed_inputs(worker, spec, 5, open_baseline=lambda: _FakeWorker(1.0, lambda x: x))
                with loaded.stack:
                    perf = {"time_ms": 1.0}
                    return grading.timed_shape_violations(worker, spec, loaded, sub.where, perf), perf

    found, perf = judged(str(SUBMISSIONS / "good_triton.py"))
    assert found == [] and "checked_device_ms" not in perf
    with tempfile.TemporaryDirectory() as folder:  # the timed workload's rows only half done
        (Path(folder) / "good_triton.py").write_text((SUBMISSIONS / "good_triton.py").read_text())
        (Path(folder) / "half.py").write_text("from good_triton import softmax as whole\n\n\ndef softmax(x):\n"
                                              "    y = whole(x)\n    if x.shape == (37, 129):\n"
                                              "        y[18:] = 0.0\n    return y\n")
        found, _ = judged(str(Path(folder) / "half.py"))
    assert found and found[0].startswith("the recorded call on the timed workload was wrong"), found


def test_a_checked_call_whose_kernels_the_grader_could_not_time_costs_the_points():
    """Kineto keeps one profiling session: a profiler of the code's own ends the grader's, which then sees no
    kernel of a call that launched some. That is a finding, not a pass (the bar would be 0)."""
    import dataclasses

    from autograder import grading, specs
    from autograder.fresh import jittered_args
    from autograder.protocol import CallDone, Shipped
    from autograder.specs.base import rand

    spec = specs.get("softmax")
    small = dataclasses.replace(spec.performance, inputs=lambda g, dev: (rand(g, (37, 129), device=dev),))
    spec = dataclasses.replace(spec, performance=small)
    base = small.inputs(torch.Generator().manual_seed(3), torch.device("cpu"))

    class Worker:
        def request(self, req, reply=None):
            if req["op"] == "jitter":
                self.seed = req["seed"]
            if req["op"] == "call":
                return CallDone(ok=True, launches=1, device_ms=self.device_ms)
            if req["op"] == "ship":
                return Shipped(torch.softmax(jittered_args(base, self.seed)[0], -1), [])
            return {"type": "ack"}

    loaded = grading.TimedInputs(base, {}, [1], None)
    worker = Worker()
    worker.device_ms = 0.0
    found = grading.timed_shape_violations(worker, spec, loaded, lambda line: f"line {line}", {"time_ms": 0.1})
    assert found and "could not time the checked call's kernels" in found[0], found
    worker.device_ms = 0.1
    assert grading.timed_shape_violations(worker, spec, loaded, lambda line: f"line {line}", {"time_ms": 0.1}) == []


@pytest.mark.gpu
def test_cases_made_on_the_gpu_are_reproducible_from_their_seed():
    from autograder import runner, specs
    from autograder.specs.base import rand

    def made(seed):
        return rand(torch.Generator().manual_seed(seed), (1025, 4097), torch.bfloat16, device="cuda")

    a, b, c = made(7), made(7), made(8)
    assert a.device.type == "cuda" and a.dtype == torch.bfloat16 and torch.equal(a, b) and not torch.equal(a, c)
    assert 0.95 < a.float().std().item() < 1.05  # Gaussian, unit scale
    spec = specs.get("online_softmax")
    first, again = runner.make_plan(spec, False, 11), runner.make_plan(spec, False, 11)
    assert all(torch.equal(p.a[0], q.a[0]) and torch.equal(p.b[0], q.b[0]) for p, q in zip(first, again))


@pytest.mark.gpu
def test_a_cuda_output_ships_as_a_copy_on_its_gpu_and_is_judged_there():
    """The worker's copy of a CUDA output stays on the GPU (it crosses as a raw frame), keeps its strides, and
    shares no memory with what the learner's code holds; an input compared there needs no host copy."""
    from autograder import correctness
    from autograder.worker import ship

    out = torch.arange(6.0, device="cuda").view(2, 3).t()
    shipped = ship({"o": out, "n": 3})
    assert shipped["o"].is_cuda and shipped["o"].stride() == out.stride() and torch.equal(shipped["o"], out)
    assert shipped["o"].data_ptr() != out.data_ptr() and shipped["n"] == 3
    out.add_(1)  # the learner's tensor changed after shipping: the grader's copy did not
    assert not torch.equal(shipped["o"], out)
    assert correctness.same_values(out, out.clone().cpu()) and not correctness.same_values(out, shipped["o"])
