"""Guarantees 1-4 of docs/GUARANTEES.md, each shown with a submission that breaks it (tests/submissions/)."""
from __future__ import annotations

import time

import pytest
import torch

from _autograder_helpers import GOOD_TRITON_EXERCISES as TRITON_EXERCISES, graded, text


# --------------------------------------------------------------------------- a correct submission

def test_correct_triton_kernels_get_every_correctness_point():
    res = graded("good_triton.py", TRITON_EXERCISES)
    for ex_id in TRITON_EXERCISES:
        ex = res[ex_id]
        assert ex["correct"], (ex_id, text(ex))
        assert ex["violations"] == []
        assert all(c["verdict"] == "ok" for c in ex["cases"])
        from autograder.specs import get
        spec = get(ex_id)
        assert ex["score"] * ex["points"] == pytest.approx(spec.correctness_points)  # no GPU: perf points 0


def test_cases_cover_odd_tiny_dtypes_hard_rows_and_strides():
    cases = [c["case"] for c in graded("good_triton.py", TRITON_EXERCISES)["softmax"]["cases"]]
    assert any(c.startswith("1x1") for c in cases)
    assert any("17" in c for c in cases)
    for dtype in ("float32", "float16", "bfloat16"):
        assert any(c.endswith(dtype) for c in cases)
    assert any(c.startswith("hard rows") for c in cases) and any(c.startswith("row-strided") for c in cases)


def test_inputs_are_fresh_every_run():
    from autograder.runner import make_plan
    from autograder.specs import get

    spec = get("softmax")
    p1, p2 = make_plan(spec, True, 1), make_plan(spec, True, 2)
    assert not torch.equal(p1[-1][1][0], p2[-1][1][0])
    assert not torch.equal(p1[-1][1][0], p1[-1][2][0])  # inputs A and B of one case differ too


# --------------------------------------------------------------------------- guarantee 1: correct on any valid input

def test_wrong_only_on_odd_shapes_fails_and_says_so():
    ex = graded("wrong_on_odd.py", ("softmax",))["softmax"]
    assert not ex["correct"] and ex["score"] == 0
    failed = [c for c in ex["cases"] if c["verdict"] == "FAIL"]
    assert failed and all(int(c["shape"].split("x")[1]) % 2 == 1 for c in failed)
    assert "NaN" in text(ex)  # the unwritten column reads as poisoned NaN


def test_wrong_only_in_bfloat16_fails_on_bfloat16_cases_only():
    ex = graded("wrong_in_bf16.py", ("softmax",))["softmax"]
    assert not ex["correct"]
    failed = {c["dtype"] for c in ex["cases"] if c["verdict"] == "FAIL"}
    assert failed == {"bfloat16"}
    assert "bfloat16" in text(ex)


def test_missing_max_subtraction_fails_the_hard_rows():
    ex = graded("no_max_subtraction.py", ("softmax",))["softmax"]
    assert not ex["correct"]
    assert any(c["case"].startswith("hard rows") and c["verdict"] == "FAIL" for c in ex["cases"])
    assert "row max" in text(ex)


def test_ignoring_row_strides_fails_the_strided_case():
    ex = graded("ignores_strides.py", ("softmax",))["softmax"]
    failed = [c["case"] for c in ex["cases"] if c["verdict"] == "FAIL"]
    assert failed and all(c.startswith("row-strided") for c in failed)


def test_mutating_an_input_fails():
    ex = graded("mutates_input.py", ("softmax",))["softmax"]
    assert not ex["correct"]
    assert "modified its input" in text(ex)


# --------------------------------------------------------------------------- guarantee 2: the learner wrote the kernel

def test_calling_the_taught_operator_is_a_violation_naming_op_and_line():
    res = graded("uses_torch_softmax.py", ("softmax", "bias_gelu", "naive_softmax"))
    sm = res["softmax"]
    assert not sm["correct"] and sm["score"] == 0
    assert any("aten._softmax" in v and "line 10" in v for v in sm["violations"]), sm["violations"]
    assert any("Triton kernel" in v for v in sm["violations"])
    assert all(c["verdict"] == "ok" for c in sm["cases"])  # right values: the violation alone costs the points
    assert any("aten.gelu" in v for v in res["bias_gelu"]["violations"])
    assert any("aten._softmax" in v for v in res["naive_softmax"]["violations"])


def test_two_launches_exceed_the_fused_limit():
    ex = graded("two_launches.py", ("bias_gelu",))["bias_gelu"]
    assert all(c["verdict"] == "ok" for c in ex["cases"])
    assert not ex["correct"]
    assert any("2 Triton kernels" in v for v in ex["violations"])


def test_importing_kernels_ref_is_a_violation():
    ex = graded("uses_kernels_ref.py", ("softmax",))["softmax"]
    assert not ex["correct"]
    assert any("kernels_ref" in v for v in ex["violations"])


def test_patching_torch_and_builtins_and_the_grader_cannot_fake_a_pass():
    ex = graded("patches_grader.py", ("softmax",))["softmax"]
    assert not ex["correct"] and ex["score"] == 0
    assert any(c["verdict"] == "FAIL" for c in ex["cases"])


def recorded(tmp_path, source: str, *args, as_inputs: bool = False):
    """The recorder's records of one call of ``f`` defined by ``source`` (a file of its own, as a submission);
    ``as_inputs``: the recorder told the arguments are the call's inputs, as the worker tells it."""
    from autograder import legality

    src = tmp_path / "sub.py"
    src.write_text(source)
    ns = {}
    exec(compile(source, str(src), "exec"), ns)
    rec = legality.OpRecorder(str(src), inputs=args if as_inputs else None)
    with rec:
        ns["f"](*args)
    return rec.records()


def test_recorder_sees_ops_and_the_submission_line(tmp_path):
    records = recorded(tmp_path, "import torch\ndef f(x):\n    y = x * 2\n    return torch.exp(y)\n", torch.ones(3))
    assert ["mul", 3, 1] in records and ["exp", 4, 1] in records


@pytest.mark.parametrize("tamper", ["rec.ops.clear()", "rec.largest[:] = [0, None, None]",
                                    "rec.note = lambda *a: None", "rec.ops = {}"])
def test_a_recorder_changed_while_graded_code_runs_keeps_its_records_and_says_so(tmp_path, tamper):
    # code that reaches the recorder (the worker refuses every way it knows of) empties or silences it: the
    # records are kept in a ledger beside it, and the change itself is a violation
    from autograder import legality

    source = "import torch\ndef f(x):\n    return torch.exp(x * 2)\n"
    src = tmp_path / "sub.py"
    src.write_text(source)
    ns = {}
    exec(compile(source, str(src), "exec"), ns)
    rec = legality.OpRecorder(str(src))
    with rec:
        ns["f"](torch.ones(3))
        exec(tamper, {"rec": rec})
        ns["f"](torch.ones(3))
    records = rec.records()
    # what ran before the change stays on the record (a silenced recorder records nothing after it)
    assert any(op == "exp" and line == 3 for op, line, _ in records) and rec.largest_seen()[0] == 3, records
    assert [legality.TAMPERED, None, 1] in records
    spec = __import__("autograder.specs", fromlist=["get"]).get("softmax")
    assert any("recorder was changed" in v for v in legality.judge(spec, records, [1], False, lambda n: f"line {n}"))
    untouched = legality.OpRecorder(str(src))
    with untouched:
        ns["f"](torch.ones(3))
    assert legality.TAMPERED not in [op for op, _, _ in untouched.records()]


# --------------------------------------------------------------------------- guarantee 3: isolation

def test_a_hang_is_stopped_at_the_time_limit_and_other_exercises_are_graded():
    start = time.monotonic()
    # 15 s: room for bias_gelu's worker on a loaded 2-core machine; the busy loop spends all of it on a core
    res = graded("hangs.py", ("softmax", "bias_gelu"), timeout=15.0)
    assert not res["softmax"]["correct"]
    assert "time limit of 15 s" in text(res["softmax"]) and res["softmax"]["ended"] == "timed out"
    assert res["bias_gelu"]["correct"], text(res["bias_gelu"])
    assert "ended" not in res["bias_gelu"]  # a class report tells these apart by it
    assert time.monotonic() - start < 120


def test_exits_crashes_and_oom_cost_only_their_exercise():
    res = graded("crashes.py", ("softmax", "online_softmax", "naive_softmax", "bias_gelu", "vector_add"))
    assert "sys.exit(3)" in text(res["softmax"])
    assert "ended the process" in text(res["online_softmax"]) and "os._exit" in text(res["online_softmax"])
    assert "segmentation fault" in text(res["naive_softmax"]) and res["naive_softmax"]["ended"] == "crashed"
    assert "out of memory" in text(res["bias_gelu"])
    for ex_id in ("softmax", "online_softmax", "naive_softmax", "bias_gelu"):
        assert not res[ex_id]["correct"] and res[ex_id]["score"] == 0
    assert res["vector_add"]["correct"], text(res["vector_add"])


def test_an_exception_at_import_is_reported_with_its_line():
    ex = graded("raises_at_import.py", ("softmax",))["softmax"]
    assert not ex["correct"]
    assert "breaks at import" in text(ex) and "line 9" in text(ex)


def test_cases_rotate_through_an_autotuners_configs_and_name_the_one_that_failed():
    ex = graded("autotune_one_bad_config.py", ("vector_add",))["vector_add"]
    assert not ex["correct"]
    assert "autotuned kernels ran with _add_kernel: BIAS: 1" in text(ex), text(ex)
    assert any(row["verdict"] == "ok" for row in ex["cases"])  # the other configs pass their cases


def test_a_started_worker_is_stopped_whether_it_was_used_or_not():
    """A baseline's worker starts beside the submission's and is stopped by the grader in every case."""
    from autograder.isolation import WorkerSession
    from autograder.protocol import Shipped
    from autograder.worker import Worker

    job = {"code": "baseline", "exercise": "softmax", "poison": False}
    unused = WorkerSession(job, 60).start()
    unused.close()
    assert unused.proc.poll() is not None and unused.sock is None
    unused.close()  # twice is harmless
    used = WorkerSession(job, 60).start()
    with used as worker:
        assert worker.ready.status == "ok"
        x = torch.randn(3, 5)
        worker.request({"op": "load", "slot": 1, "args": (x,)})
        # fresh values and the device's preparation in one request, as the timing loop sends them
        worker.request({"op": "prepare", "poison": False, "jitter": [[1, 7]]})
        worker.request({"op": "call", "slots": [1], "record": False, "empty": False})
        got = worker.request({"op": "ship", "index": 0}, reply=Shipped)
    used.close()
    assert used.proc.poll() is not None
    local = Worker(lambda t: t, None, poison=False)
    local.handle({"op": "load", "slot": 1, "args": (x,)})
    local.handle({"op": "jitter", "slot": 1, "seed": 7})
    assert torch.allclose(got.output, torch.softmax(local.slots[1][0], -1))  # the baseline on the fresh values


def test_a_worker_ends_at_once_after_its_last_answer(tmp_path, monkeypatch):
    """Said bye to, the worker ends without Python's finalization: the grading process does not wait a second
    or more of CPU for torch and Triton to be torn down, and nothing left for the exit runs (here an atexit
    handler that a sitecustomize on the worker's path installs as it starts)."""
    from autograder.isolation import WorkerSession

    (tmp_path / "sitecustomize.py").write_text(
        "import atexit, os\nos.write(1, b'site loaded\\n')\natexit.register(os.write, 1, b'ran at exit\\n')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    session = WorkerSession({"code": "baseline", "exercise": "softmax", "poison": False}, 60).start()
    with session as worker:
        assert worker.ready.status == "ok"
    assert session.proc.returncode == 0  # it ended by itself (the grader stops one that lingers: -9)
    assert "site loaded" in session.output and "ran at exit" not in session.output, session.output


def test_worker_output_is_capped_in_memory(tmp_path):
    import io

    from autograder.isolation import HEAD_BYTES, TAIL_BYTES, _CappedReader

    reader = _CappedReader(io.BufferedReader(io.BytesIO(b"a" * 5_000_000 + b"END")))
    reader.run()
    assert reader.total == 5_000_003
    assert len(reader.head) == HEAD_BYTES and len(reader.tail) == TAIL_BYTES and reader.tail.endswith(b"END")


# --------------------------------------------------------------------------- guarantee 4: no stale answers

def test_results_cached_by_pointer_and_shape_fail():
    ex = graded("caches_results.py", ("softmax",))["softmax"]
    assert not ex["correct"]
    assert "second call" in text(ex) and "first call's answer" in text(ex)


def test_a_second_call_wrong_without_a_cache_is_not_called_a_cache():
    # Feedback names what was seen: an output that is not the first call's answer is not a cached result.
    ex = graded("wrong_on_second_call.py", ("softmax",))["softmax"]
    assert not ex["correct"]
    assert "second call" in text(ex) and "first call was right" in text(ex) and "cached" not in text(ex)


def test_fresh_memory_is_poisoned_in_the_worker(tmp_path):
    # A kernel that writes nothing returns torch.empty's memory: it must read as NaN and fail, even when
    # the allocator would hand back a block that held the right answer.
    from autograder.grading import grade_submission

    sub = tmp_path / "lazy.py"
    sub.write_text("import torch\n_keep = []\n"
                   "def vector_add(x, y):\n"
                   "    out = torch.empty_like(x)\n"
                   "    return out\n")
    ex = grade_submission(sub, ["vector_add"], quick=True)["exercises"][0]
    assert not ex["correct"]
    assert "NaN" in "\n".join(ex["feedback"])


def test_nan_never_passes_and_specials_must_match():
    from autograder.correctness import compare_tensor

    ref = torch.tensor([1.0, float("-inf"), float("nan")], dtype=torch.float64)
    tol = (1e-5, 1e-4)
    assert compare_tensor(torch.tensor([1.0, float("-inf"), float("nan")]), ref, torch.float32, tol)[0]
    assert not compare_tensor(torch.tensor([1.0, 0.0, float("nan")]), ref, torch.float32, tol)[0]
    assert not compare_tensor(torch.tensor([float("nan"), float("-inf"), float("nan")]), ref, torch.float32, tol)[0]
    assert not compare_tensor(torch.tensor([1.0, 2.0]), torch.tensor([1.0, float("nan")], dtype=torch.float64),
                              torch.float32, tol)[0]
    assert not compare_tensor(torch.tensor([1.0], dtype=torch.float16), ref[:1], torch.float32, tol)[0]  # dtype
    assert not compare_tensor(torch.tensor([[1.0]]), ref[:1], torch.float32, tol)[0]  # shape


def test_same_values_sees_modifications_and_keeps_nan():
    from autograder.correctness import same_values

    a = torch.tensor([1.0, float("nan")])
    assert same_values(a, a.clone())
    assert not same_values(a, torch.tensor([1.5, float("nan")]))


def test_a_pinned_call_does_not_benchmark_its_one_config():
    # Benchmarking the one config a pin leaves (~0.15 s per new shape on a GPU) chooses nothing; unpinned
    # calls (the timed workload) still benchmark every config as the learner's program would.
    from triton.runtime.autotuner import Autotuner

    from autograder.worker import AutotunePin

    benched = []
    AutotunePin.uninstall()
    original = Autotuner._bench
    Autotuner._bench = lambda self, *args, config, **meta: benched.append(config) or [1.0, 1.0, 1.0]
    try:
        AutotunePin.install()
        try:
            with AutotunePin.pinned(4):
                assert Autotuner._bench(None, config="pinned") == [0.0, 0.0, 0.0]
            assert Autotuner._bench(None, config="free") == [1.0, 1.0, 1.0]
        finally:
            AutotunePin.uninstall()
    finally:
        Autotuner._bench = original
    assert benched == ["free"]


def test_a_pinned_config_that_does_not_fit_the_gpu_gives_way_to_the_next_as_autotuning_would():
    import triton
    import triton.language as tl
    from triton.runtime.errors import OutOfResources

    from autograder.worker import AutotunePin

    @triton.autotune(configs=[triton.Config({"B": 1}), triton.Config({"B": 2}), triton.Config({"B": 3})], key=["n"])
    @triton.jit
    def kernel(x_ptr, n, B: tl.constexpr):
        pass

    ran = []

    class TooBigForB1:  # stands in for the compiled kernel: B=1 needs more shared memory than the GPU has
        def run(self, *args, **kwargs):
            if kwargs["B"] == 1:
                raise OutOfResources(294912, 232448, "shared memory")
            ran.append(kwargs["B"])

    kernel.fn = TooBigForB1()
    AutotunePin.install()
    try:
        with AutotunePin.pinned(3) as used:  # 3 mod 3 = config 0, which does not fit: config 1 runs
            kernel.run(None, 5, grid=(1,))
        with AutotunePin.pinned(3):  # same shape: the pin again, and again the next config, never the one that failed
            kernel.run(None, 5, grid=(1,))
        with AutotunePin.pinned(2):
            kernel.run(None, 6, grid=(1,))
    finally:
        AutotunePin.uninstall()
    assert ran == [2, 2, 3]
    assert "B: 1" in used[0] and "did not fit" in used[0] and "B: 2" in used[1]


def test_the_null_kernel_check_uses_cases_a_kernel_that_never_ran_cannot_get_right():
    # linear_cross_entropy's first cases have V = 1, whose loss is exactly 0: a zero-initialised accumulator
    # is right there without any kernel, so those cases cannot tell whether the kernel ran
    from autograder import runner, specs

    spec = specs.get("linear_cross_entropy")
    plan = runner.make_plan(spec, quick=True, seed=7)
    assert plan[0].case.name.startswith("M=1 H=16 V=1")
    chosen = runner.null_check_cases(plan)
    assert len(chosen) == 2
    for _, p in chosen:
        assert p.a[1].shape[0] > 1 and float(p.ref_a[0]) != 0.0, p.case.name  # (loss, dx, dweight)


def test_the_recorder_counts_results_written_through_out_and_resize():
    from autograder import legality

    x, w = torch.randn(40, 8), torch.randn(300, 8)
    rec = legality.OpRecorder(None)
    with rec:
        logits = torch.empty(0)
        torch.mm(x, w.t(), out=logits)            # the full [M, V] logits, into a tensor that starts empty
    assert rec.largest[:2] == [40 * 300, "mm"]
    rec = legality.OpRecorder(None)
    with rec:
        deq = torch.empty(0, dtype=torch.float32)
        torch.zeros(w.shape, out=deq)             # a float copy of a whole weight, made through out=
        deq.copy_(w)
    assert rec.largest[:2] == [300 * 8, "zeros"]


def test_the_recorder_counts_storage_no_operator_allocated_as_what_a_write_into_it_made():
    # a float copy of a whole weight in a tensor over a Python buffer, filled in place (copy_ writes, it
    # allocates nothing): the whole buffer counts; in-place writes into the call's inputs and what its own
    # operators made do not
    from autograder import legality

    w = torch.randint(-127, 128, (300, 8), dtype=torch.int8)
    rec = legality.OpRecorder(None, inputs=(w,))
    with rec:
        w.add_(0)
        small = torch.zeros(10)
        small.add_(1)
        deq = torch.frombuffer(bytearray(w.numel() * 4), dtype=torch.float32).view(w.shape)
        deq[:1].copy_(w[:1])                      # one row written: the whole buffer holds what it can
    assert rec.largest[:2] == [300 * 8, "copy_"]


def test_values_handed_to_numpy_are_a_violation_named_with_the_line_except_where_numbers_are_the_answer(tmp_path):
    from autograder import legality, specs

    records = recorded(tmp_path, "import numpy as np\ndef f(x):\n    a = np.asarray(x)\n    return x.tolist()\n",
                       torch.ones(3))
    assert ["leaves_torch:Tensor.__array__", 3, 1] in records and ["leaves_torch:Tensor.tolist", 4, 1] in records
    where = lambda line: f"line {line}"  # noqa: E731
    found = legality.judge(specs.get("checkpointed_mlp"), records, [], False, where)  # any torch op allowed
    assert any("Tensor.__array__ at line 3" in v for v in found) and any("Tensor.tolist at line 4" in v for v in found)
    assert legality.judge(specs.get("time_floor"), records, [], False, where) == []


def test_a_python_function_run_on_each_value_is_named_like_values_handed_to_numpy(tmp_path):
    from autograder import legality, specs

    src = "def f(x):\n    y = x.clone()\n    y.apply_(lambda v: v * 2)\n    return y.map_(x, lambda a, b: a + b)\n"
    records = recorded(tmp_path, src, torch.ones(3))
    assert ["leaves_torch:Tensor.apply_", 3, 1] in records and ["leaves_torch:Tensor.map_", 4, 1] in records
    found = legality.judge(specs.get("checkpointed_mlp"), records, [], False, lambda line: f"line {line}")
    assert any("Tensor.apply_ at line 3" in v for v in found) and any("Tensor.map_ at line 4" in v for v in found)


def test_values_taken_out_through_the_standard_library_or_as_text_are_seen(tmp_path):
    """A standard-library frame between the learner and torch is the learner's (functools.singledispatch,
    json's default=), and text is a way out like any other (str, repr, format with full precision: torch
    formats with the dispatch modes off, so no operator shows): each call is named with the learner's line."""
    from autograder import legality, specs

    src = ("import functools, json\nimport torch\n"
           "def f(x):\n"
           "    a = functools.singledispatch(torch.Tensor.tolist)(x)\n"
           "    b = json.dumps(x, default=torch.Tensor.tolist)\n"
           "    torch.set_printoptions(precision=17)\n"
           "    c = str(x)\n"
           "    d = f'{x}'\n"
           "    torch.set_printoptions(profile='default')\n"
           "    return x.clone()\n")
    records = recorded(tmp_path, src, torch.randn(3, 4))
    for name, line in (("tolist", 4), ("tolist", 5), ("__repr__", 7), ("__format__", 8)):
        assert [f"leaves_torch:Tensor.{name}", line, 1] in records, (name, records)
    found = legality.judge(specs.get("softmax"), records, [1], False, lambda line: f"line {line}")
    assert any("Tensor.__repr__ at line 7" in v and "printing a tensor counts" in v for v in found), found


def test_reading_a_tensors_header_or_a_value_through_an_operator_is_not_a_way_out(tmp_path):
    """Shapes, strides, dtypes, pointers and hooks describe a tensor (no values leave); a number read by an
    operator (item, float, a formatted scalar) is judged as that operator, _local_scalar_dense."""
    src = ("import torch\n"
           "def f(x):\n"
           "    meta = (x.shape, x.stride(), x.dtype, x.device, x.numel(), x.dim(), x.is_contiguous(), len(x),\n"
           "            x.data_ptr(), x.element_size(), x.storage_offset(), x.is_floating_point(), x.type(), hash(x),\n"
           "            x == None, x.nbytes, x.T, x.grad, x.is_leaf)\n"
           "    rows = [r for r in x]\n"
           "    return float(x[0, 0]), f'{x[0, 1]:.3f}', x[1, 1].item(), meta, rows\n")
    records = recorded(tmp_path, src, torch.randn(3, 4))
    assert not [r for r in records if r[0].startswith("leaves_torch:")], records
    assert ["_local_scalar_dense", 7, 3] in records, records


def test_values_read_one_at_a_time_are_seen_once_a_whole_input_has_been_read(tmp_path):
    """item(), float(t), int(t) are the operator _local_scalar_dense, which a launcher may run to read a size or
    a maximum; reading as many numbers as a floating-point input holds takes that input out of torch."""
    from autograder import legality

    src = ("def f(x, w, lengths):\n"
           "    longest = int(lengths.max())\n"
           "    scale = float(w[0])\n"
           "    return [[float(v) for v in row] for row in x], longest, scale\n")
    path = tmp_path / "sub.py"
    path.write_text(src)
    ns = {}
    exec(compile(src, str(path), "exec"), ns)
    args = (torch.randn(3, 5), torch.randn(4), torch.tensor([3, 9, 2]))
    rec = legality.OpRecorder(str(path), inputs=args)
    with rec:
        ns["f"](*args)
    leaves = [r for r in rec.records() if r[0].startswith("leaves_torch:")]
    # w holds the fewest values (4): the fourth number read, in the loop over x, is where they leave
    assert leaves == [["leaves_torch:Tensor.item (or float(), int()) on an input's worth of values, one at a time",
                       4, 1]], leaves
    honest = legality.OpRecorder(str(path), inputs=args)
    with honest:
        ns["f"](torch.randn(0, 5), *args[1:])  # no rows: the size and the maximum alone
    assert not [r for r in honest.records() if r[0].startswith("leaves_torch:")], honest.records()


def test_values_packed_several_to_a_number_are_counted_by_what_each_number_carries(tmp_path):
    """An input copied into a buffer viewed as int64 hands two float32 values (four float16) out with each
    int(): counted by the input's values each number carries, a packed read reaches the bound as soon."""
    src = ("import torch\n"
           "def f(x):\n"
           "    packed = torch.empty(x.numel() * x.element_size() // 8, dtype=torch.int64)\n"
           "    packed.view(x.dtype).copy_(x.reshape(-1))\n"
           "    return [int(v) for v in packed]\n")
    for dtype in (torch.float32, torch.float16):
        records = recorded(tmp_path, src, torch.randn(4, 8, dtype=dtype), as_inputs=True)
        assert [r[1] for r in records if r[0].startswith("leaves_torch:")] == [5], (dtype, records)


def test_the_interpreter_and_the_grader_take_values_out_on_their_own_behalf_only():
    """Walking out from a call: the interpreter met first is plumbing; the grader's or Triton's code called
    by the learner (a course helper, triton.testing) works on the learner's behalf; with nothing else
    between it and the worker's call of the learner's function, it is the grader's."""
    from autograder import legality

    def module(filename, source):
        ns = {}
        exec(compile(source, filename, "exec"), ns)
        return ns

    here = "import sys\ndef here():\n    return sys._getframe()\n"
    call = "def call(g):\n    return g()\n"
    course = module(legality._COURSE + "helper.py", here)["here"]
    testing = module(legality._TRITON_DIR + "testing.py", here)["here"]
    interpreter = module(legality._INTERPRETER, call)["call"]
    worker = module(legality._WORKER, call)["call"]
    assert legality._asked_by(course()) == legality.LEARNER       # called by this test: the learner's code
    assert legality._asked_by(testing()) == legality.LEARNER
    assert legality._asked_by(interpreter(course)) == legality.INTERPRETER
    assert legality._asked_by(worker(course)) == legality.GRADER
    assert legality._asked_by(worker(lambda: interpreter(course))) == legality.INTERPRETER


def test_an_operator_of_the_learners_own_in_torchs_namespace_is_recorded_inside(tmp_path):
    """custom_op also defines an overload of torch's own operator (aten::empty_like.mine), which the rules
    would take for empty_like: its Python is the learner's and runs under the recorder all the same (and the
    audit reports the name: tests/test_audit.py)."""
    src = ("import torch\n"
           "@torch.library.custom_op('aten::empty_like.course_rec', mutates_args=())\n"
           "def _mine(x: torch.Tensor) -> torch.Tensor:\n"
           "    return torch.softmax(x, -1)\n"
           "def f(x):\n"
           "    return torch.ops.aten.empty_like.course_rec(x)\n")
    records = recorded(tmp_path, src, torch.randn(2, 3))
    assert ["softmax", 4, 1] in records, records


def test_an_operator_written_in_python_is_recorded_inside_and_others_by_their_namespace(tmp_path):
    """A torch.library.custom_op (or triton_op) runs the learner's Python: the recorder runs it under itself,
    so the operators inside are seen with their lines. An operator whose code it cannot run (a Library
    implementation) is named with its namespace, never taken for aten's operator of the same name."""
    from autograder import legality, specs

    src = ("import torch\n"
           "@torch.library.custom_op('course_rec::softmax', mutates_args=())\n"
           "def _mine(x: torch.Tensor) -> torch.Tensor:\n"
           "    return torch.softmax(x, -1)\n"
           "_lib = torch.library.Library('course_rec2', 'DEF')\n"
           "_lib.define('softmax(Tensor x) -> Tensor')\n"
           "_lib.impl('softmax', lambda x: x.exp(), 'CPU')\n"
           "def f(x):\n"
           "    return _mine(x), torch.ops.course_rec2.softmax(x)\n")
    records = recorded(tmp_path, src, torch.randn(2, 3))
    assert ["softmax", 4, 1] in records and ["course_rec2::softmax", 9, 1] in records, records
    assert not [r for r in records if r[0] in ("course_rec::softmax", "exp")], records
    found = legality.judge(specs.get("softmax"), records, [1], False, lambda line: f"line {line}")
    assert any("aten.softmax at line 4" in v for v in found), found
    assert any("calls torch operator course_rec2::softmax at line 9" in v for v in found), found


def test_launches_are_counted_where_they_are_made(tmp_path):
    # a launch from a pre-run hook of another launch is a launch of the call; a warm-up compiles, runs nothing
    import triton
    import triton.language as tl

    from autograder import legality

    src = tmp_path / "kernels.py"
    src.write_text(
        "import triton\nimport triton.language as tl\n"
        "@triton.jit\ndef one(p):\n    tl.store(p, tl.load(p) + 1)\n"
        "@triton.jit\ndef two(p):\n    tl.store(p, tl.load(p) + 2)\n")
    ns = {}
    exec(compile(src.read_text(), str(src), "exec"), ns)
    x = torch.zeros(1)
    legality.install_launch_counter()
    legality.reset_launches()
    ns["two"].add_pre_run_hook(lambda *a, **k: ns["one"][(1,)](x))
    ns["two"][(1,)](x)
    assert legality.launches() == 2 and float(x) == 3.0


def test_device_memory_handed_to_another_library_is_recorded(tmp_path):
    # CuPy, Numba and PyCUDA read a CUDA tensor through __cuda_array_interface__ (on the CPU it raises, after
    # the recorder has seen the learner ask for it)
    source = ("def f(x):\n    try:\n        return x.__cuda_array_interface__\n"
              "    except (AttributeError, RuntimeError):\n        return None\n")
    assert ["leaves_torch:Tensor.__cuda_array_interface__", 3, 1] in recorded(tmp_path, source, torch.ones(3))
