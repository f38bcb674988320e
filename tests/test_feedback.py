"""Feedback a learner can trust: a PASSED ``check`` predicts the grader's correctness verdict, hints follow
the symptom, and rules stated in an exercise are graded.

- every family of inputs the hidden grading uses has a public case (``check`` runs it), for every exercise
  of every notebook, in each size regime (quick, CPU, GPU);
- the symptom hints (``autograder.symptoms``), one test per symptom;
- a case may expect an exception (an input the exercise says to reject).
"""
from __future__ import annotations

import pytest
import torch

import course
from autograder import specs
from autograder.specs.base import known_family


def _cases(spec, regime, monkeypatch):
    if regime == "gpu-shapes":  # the GPU's case list, built without a GPU (building cases touches no device)
        monkeypatch.setattr(course, "ON_GPU", True)
        from autograder import probes

        monkeypatch.setattr(probes, "gpu_ms_per_cycle", lambda: 1e-6)
    return spec.cases(regime == "quick")


@pytest.mark.parametrize("regime", ["quick", "cpu", "gpu-shapes"])
def test_every_hidden_family_has_a_public_case(regime, monkeypatch):
    missing = {}
    for spec in specs.EXERCISES.values():
        cases = _cases(spec, regime, monkeypatch)
        assert all(c.family and known_family(c.family) for c in cases), \
            (spec.id, [c.name for c in cases if not known_family(c.family)])
        public = {c.family for c in cases if c.public}
        hidden = {c.family for c in cases} - public
        if hidden:
            missing[spec.id] = sorted(hidden)
    assert not missing, f"families graded without a public case ({regime}): {missing}"


def _tensor_axes(args) -> list[tuple[tuple, bool]]:
    """(shape, contiguous) of every tensor in a case's arguments, in order."""
    from autograder.argtree import tensors

    return [(tuple(t.shape), t.is_contiguous()) for t in tensors(args)]


def _layout_only(case, gen):
    """A case's arguments with every tensor's shape, strides and dtype and no data: built under torch's fake
    tensors (no memory, no arithmetic: the GPU's cases cost seconds instead of a minute of CPU), then as meta
    tensors (``argtree`` walks plain tensors only). A builder that reads its own values (a mean offset, a
    rounding check) cannot run on fake tensors: that case is built for real."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._pytree import tree_map

    try:
        with FakeTensorMode(allow_non_fake_inputs=True):
            args = case.build(gen)
    except Exception:  # noqa: BLE001  (data-dependent: the real build below is the authority, and may raise)
        return _built(case, gen)
    return tree_map(lambda t: torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
                    if isinstance(t, torch.Tensor) else t, args)


def _built(case, gen):
    return case.build(gen)


def _axes_used(cases, gen, build) -> tuple[dict, dict]:
    """Per tensor argument (its place and rank): the axes longer than 1 in some case, and those of its
    non-contiguous layouts (``is_contiguous`` ignores axes of length 1: a transposed [B, S, H, D] view with
    B = H = 1 is the contiguous memory order, which no stride bug can fail)."""
    sizes, strided = {}, {}
    for case in cases:
        for place, (shape, contiguous) in enumerate(_tensor_axes(build(case, gen))):
            axes = {i for i, n in enumerate(shape) if n > 1}
            sizes.setdefault((place, len(shape)), set()).update(axes)
            if not contiguous:
                strided.setdefault((place, len(shape)), set()).update(axes)
    return sizes, strided


def test_a_layout_without_data_is_the_real_builds_layout():
    """_layout_only stands for the real build in the GPU regime: each exercise's first case and its strided
    ones (views, transposes, rows of a wider buffer) have the same shapes, strides and dtypes either way."""
    from autograder.argtree import tensors

    checked, without_data = 0, 0
    for spec in specs.EXERCISES.values():
        if not spec.judged_on_tensors:
            continue
        cases = [c for c in spec.cases(True) if c.raises is None]
        for case in cases[:1] + [c for c in cases if c.family == "strided"]:
            fake, real = (list(tensors(build(case, torch.Generator().manual_seed(0))))
                          for build in (_layout_only, _built))
            assert [(t.shape, t.stride(), t.dtype) for t in fake] == [(t.shape, t.stride(), t.dtype) for t in real], \
                (spec.id, case.name)
            checked += 1
            without_data += bool(fake) and all(t.device.type == "meta" for t in fake)
    assert without_data >= checked / 2, (without_data, checked)  # most are layouts, not real builds again


# The GPU's cases are built here as layouts without data (_layout_only; ten seconds of CPU): slow all the same.
@pytest.mark.parametrize("regime", ["quick", "cpu", pytest.param("gpu-shapes", marks=pytest.mark.slow)])
def test_every_axis_and_layout_the_grade_varies_a_public_case_varies(regime, monkeypatch):
    """A kernel whose grid leaves out the batch, or that steps heads by the wrong stride, fails ``check``
    wherever it fails the grade: every axis some graded case makes longer than 1 is longer than 1 in a
    public case, and every non-contiguous layout is public with the same axes longer than 1."""
    gen = torch.Generator().manual_seed(0)
    missing = {}
    for spec in specs.EXERCISES.values():
        if not spec.judged_on_tensors:
            continue
        cases = [c for c in _cases(spec, regime, monkeypatch) if c.raises is None]
        # the small regimes' real builds are cheaper than fake tensors' bookkeeping
        build = _layout_only if regime == "gpu-shapes" else _built
        graded_sizes, graded_strided = _axes_used(cases, gen, build)
        public_sizes, public_strided = _axes_used([c for c in cases if c.public], gen, build)
        for key, axes in graded_sizes.items():
            if not axes <= public_sizes.get(key, set()):
                missing.setdefault(spec.id, []).append(f"tensor {key[0]}: axes {sorted(axes)} > 1")
        for key, axes in graded_strided.items():
            if not axes <= public_strided.get(key, set()):
                missing.setdefault(spec.id, []).append(f"tensor {key[0]}: non-contiguous with axes {sorted(axes)} > 1")
    assert not missing, f"graded without a public case ({regime}): {missing}"


# --------------------------------------------------------------------------- hints from the symptom

from autograder import symptoms  # noqa: E402
from autograder.specs._cases import neg_inf_blocks, row_strided  # noqa: E402
from autograder.specs.base import TORCH, TRITON, VALUE, Case  # noqa: E402
from measure import reference  # noqa: E402

TOL32 = (1e-5, 1e-4)
TRITON_WORDS = ("tl.", "mask", "grid", "program", "BLOCK", "kernel")


def _case(family="shape", hint=""):
    return Case("a case", lambda g: (), hint=hint, family=family)


def _hint(kind, out, ref, args, family="shape", case_hint="", dtype=torch.float32):
    found = symptoms.diagnose(out, ref, dtype, TOL32, args)
    return found, symptoms.hint(kind, _case(family, case_hint), found)


def _tanh_overflowing(h):
    e = torch.exp(2 * h)  # inf past h = 44: inf / inf = NaN
    return (e - 1) / (e + 1)


def test_nan_only_at_large_magnitudes_is_an_overflow_not_a_mask():
    x = torch.randn(3, 17) * 3
    x[0, 0] = 60.0  # one element past exp's range
    u = 0.7978845608028654 * (x + 0.044715 * x ** 3)
    out = 0.5 * x * (1 + _tanh_overflowing(u))
    found, text = _hint(TRITON, out, reference.gelu_tanh(x.double()), (x,))
    assert found.name == "overflow" and "overflow" in text and "masked" not in text


def test_nan_in_rows_with_leading_neg_inf_blocks_asks_for_a_safe_max():
    x = neg_inf_blocks(torch.randn(3, 300))
    m = x.amax(-1, keepdim=True)
    out = torch.exp(x - m) / torch.exp(x - m).sum(-1, keepdim=True)
    out[0, :4] = float("nan")  # what -inf - (-inf) in the first block leaves behind
    found, text = _hint(TRITON, out, reference.softmax(x.double()), (x,), family="neg-inf-blocks")
    assert found.name == "neg-inf" and "safe max" in text


def test_only_the_last_partial_block_wrong_points_at_masks_and_the_grid():
    x = torch.randn(3, 17)
    out = x.clone()
    out[:, 16] = float("nan")  # the last column never written
    found, text = _hint(TRITON, out, x.double(), (x,))
    assert found.name == "tail-columns" and found.numbers["first"] == 16
    assert "partial block" in text and "cdiv" in text
    _, torch_text = _hint(TORCH, out, x.double(), (x,))
    assert not any(w in torch_text for w in TRITON_WORDS)


def test_only_strided_inputs_wrong_points_at_the_row_stride():
    x = row_strided(torch.randn(5, 33))
    contiguous_rows = x.as_strided(x.shape, (x.shape[1], 1))  # what a kernel stepping by n_cols reads
    found, text = _hint(TRITON, contiguous_rows.clone(), x.double(), (x,), family="strided")
    assert found.name in ("tail-rows", "nonfinite") and "stride(0)" in text


def test_unbiased_variance_is_off_by_the_square_root_of_n_over_n_minus_1():
    x, w, b = torch.randn(3, 17), torch.randn(17), torch.randn(17)
    unbiased = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + 1e-5) * w + b
    found, text = _hint(TORCH, unbiased, reference.layer_norm(x.double(), w.double(), b.double(), 1e-5), (x, w, b))
    assert found.name == "n-minus-1" and "N - 1" in text and not any(w_ in text for w_ in TRITON_WORDS)


@pytest.mark.filterwarnings("ignore:var")
def test_nan_on_one_element_rows_in_torch_is_a_division_by_n_minus_1():
    x = torch.randn(1, 1)
    out = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + 1e-5)
    found, text = _hint(TORCH, out, torch.zeros(1, 1, dtype=torch.float64), (x,), family="tiny")
    assert found.name == "nan-on-one-element" and "N - 1" in text and "grid" not in text
    _, triton_text = _hint(TRITON, torch.full((1, 1), float("nan")), torch.zeros(1, 1, dtype=torch.float64), (x,),
                           family="tiny")
    assert "nothing was written" in triton_text


def test_right_values_wrong_dtype():
    x = torch.randn(4, 8, dtype=torch.bfloat16)
    found = symptoms.diagnose(x.float(), x.double(), torch.bfloat16, (8e-3, 1.6e-2), (x,))
    assert found.name == "dtype" and found.numbers["values_right"]
    text = symptoms.hint(TORCH, _case("dtype:bfloat16"), found)
    assert "values are right" in text and ".to(x.dtype)" in text
    assert "element_ty" in symptoms.hint(TRITON, _case("dtype:bfloat16"), found)


def test_nothing_written_is_named_for_triton():
    ref = torch.randn(4, 8, dtype=torch.float64)
    found, text = _hint(TRITON, torch.full((4, 8), float("nan")), ref, ())
    assert found.name == "all-nan" and "nothing was written" in text


def test_nan_everywhere_names_a_computed_nan_beside_nothing_written_and_never_the_grid():
    """NaN from exp(-inf - (-inf)) in masked lanes looks like fresh memory: both causes, no grid advice."""
    for out_shape in ((4, 8), (4, 1)):
        ref = torch.randn(out_shape, dtype=torch.float64)
        found, text = _hint(TRITON, torch.full(out_shape, float("nan")), ref, (), family="tiny")
        assert found.name in ("all-nan", "nan-on-one-element") and "-inf - (-inf)" in text and "grid" not in text


def test_a_mask_hint_only_for_an_output_wrong_in_the_last_partial_block_alone():
    """A forgotten tl.where(mask) before a sum, a LayerNorm backward's math, a backward without delta: wrong
    from the first element on, so the advice to mask the last block (the family's or the case's) is not given."""
    from autograder.specs import nb07_flash_attention as nb07

    ref = torch.randn(6, 50, dtype=torch.float64)
    wrong_everywhere = ref + 0.3 * torch.randn(6, 50, dtype=torch.float64)
    for case_hint in ("", nb07.HINT_TAIL):
        found, text = _hint(TRITON, wrong_everywhere.float(), ref, (ref.float(),), case_hint=case_hint)
        assert found.name == "values" and not (text and "mask" in text), text
    tail = ref.clone()
    tail[:, 40:] += 1.0
    found, text = _hint(TRITON, tail.float(), ref, (ref.float(),), case_hint=nb07.HINT_TAIL)
    assert found.name == "tail-columns" and "mask" in text


def test_a_name_error_is_named_with_its_line_not_blamed_on_the_grid():
    error = "NameError: name 'BLOCK' is not defined [line 12]"
    text = symptoms.hint(TRITON, _case("tiny"), symptoms.diagnose_error(error))
    assert "NameError" in text and "line 12" in text and "grid" not in text


def test_a_wrong_output_is_named_as_the_contract_names_it():
    from autograder import correctness

    spec = specs.get("layer_norm_bwd")
    ref = tuple(torch.randn(n, dtype=torch.float64) for n in (5, 3, 3))
    out = (ref[0].float(), ref[1].float() + 1, ref[2].float())
    ok, _, msg = correctness.compare_outputs(out, ref, [torch.float32] * 3, spec)
    assert not ok and msg.startswith("dweight:") and "output 1" not in msg
    assert [specs.get("flash_attention_fwd").output_name(i) for i in range(2)] == ["o", "lse"]
    assert specs.get("flash_attention_bwd").output_name(1) == "dk"
    assert specs.get("checkpointed_mlp").output_name(2) == "dw1"
    assert specs.get("softmax").output_name(0) == "output 0"


def test_every_value_off_by_one_factor():
    ref = torch.rand(4, 8, dtype=torch.float64)
    found, text = _hint(TRITON, (ref * 1.1).float(), ref, ())
    assert found.name == "scale" and "1.1" in text


def test_a_number_off_by_a_power_of_1000_is_a_unit():
    found = symptoms.diagnose_value(2.5, 2.5e-3)
    assert found.name == "units"
    assert "seconds" in symptoms.hint(VALUE, _case("value"), found, unit="s")
    assert symptoms.diagnose_value(2.6, 2.5) is None


def test_torch_exercises_never_get_triton_advice():
    for family in ("tiny", "shape", "dtype:bfloat16", "strided", "large", "long-rows", "mean-offset"):
        for name, numbers in (("values", {}), ("raised", {}), ("nonfinite", {"count": 1, "of": 2}),
                              ("tail-rows", {"first": 1, "n": 3}), ("tail-columns", {"first": 1, "n": 3}),
                              ("all-nan", {}), ("overflow", {}), ("neg-inf", {})):
            text = symptoms.hint(TORCH, _case(family), symptoms.Symptom(name, numbers)) or ""
            assert not any(w in text for w in TRITON_WORDS), (family, name, text)


# --------------------------------------------------------------------------- rules stated in exercises

def test_a_case_that_expects_an_exception_passes_only_on_that_exception():
    from autograder.protocol import CallDone, Shipped
    from autograder.runner import judge_call

    spec = specs.get("vector_add")
    case = next(c for c in spec.cases(True) if c.raises is not None)
    args = case.build(torch.Generator().manual_seed(0))
    shipped = Shipped(None, list(args))
    assert judge_call(spec, case, args, None, CallDone(ok=False, error="ValueError: shapes differ [line 4]"), shipped).ok
    wrong = judge_call(spec, case, args, None, CallDone(ok=False, error="RuntimeError: size mismatch"), shipped)
    assert not wrong.ok and "asks for a ValueError" in wrong.message
    silent = judge_call(spec, case, args, None, CallDone(ok=True), Shipped(args[0], list(args)))
    assert not silent.ok and "returned a result" in silent.message


def test_rules_the_notebooks_state_are_graded_cases():
    """Each 'raise ValueError' sentence of an exercise's text has cases that expect it (and only those)."""
    import json
    import re

    from course import manifest

    stated = set()
    for nb in manifest.NOTEBOOKS:
        if not nb.released:
            continue
        cells = json.load(open(nb.source))["cells"]
        for i, cell in enumerate(cells):
            text = "".join(cell["source"])
            if cell["cell_type"] == "markdown" and re.search(r"ValueError", text):
                exercise = re.findall(r"Exercise `(\w+)`", text)
                assert exercise, f"{nb.name}: a ValueError rule outside an exercise's text: {text[:80]!r}"
                stated.add(exercise[-1])
    with_cases = {ex_id for ex_id, spec in specs.EXERCISES.items() if any(c.raises for c in spec.cases(True))}
    assert stated == with_cases


# --------------------------------------------------------------------------- a kernel that writes out of bounds

def test_an_unmasked_store_raises_a_clear_error_instead_of_corrupting_memory():
    """Under the interpreter (course.bounds) the store is refused before it writes: no abort, no hang."""
    import sys

    from course.bounds import OutOfBounds
    from _autograder_helpers import SUBMISSIONS

    if not course.INTERPRET:
        pytest.skip("the bounds guard is the interpreter's; a GPU reports an illegal memory access")
    sys.path.insert(0, str(SUBMISSIONS))
    try:
        import unmasked_store
    finally:
        sys.path.remove(str(SUBMISSIONS))
    with pytest.raises(Exception) as err:
        unmasked_store.vector_add(torch.randn(17), torch.randn(17))
    assert isinstance(err.value.__cause__, OutOfBounds) or "OutOfBounds" in str(err.value)
    assert "past the end of the tensor passed as out_ptr" in str(err.value) and "mask" in str(err.value)
    found = symptoms.diagnose_error(f"InterpreterError: {err.value!r}")
    assert found.name == "out-of-bounds"
    assert "mask every tl.load and tl.store" in symptoms.hint(TRITON, _case("tiny"), found)


def test_a_tile_too_big_for_the_gpu_asks_for_smaller_blocks_not_masks():
    found = symptoms.diagnose_error("OutOfResources: out of resource: shared memory, Required: 262144, "
                                    "Hardware limit: 232448. [line 100]")
    text = symptoms.hint(TRITON, _case("dtype:float32"), found)
    assert "shared memory" in text and "num_stages" in text and "mask" not in text


def test_check_survives_a_crashing_kernel_and_names_the_likely_cause(capsys):
    """On the CPU check() runs the calls in a forked child: a kernel that aborts the process (as memory
    corrupted by an unmasked store does) ends the child, and the notebook's process carries on."""
    import faulthandler

    from autograder import check

    if course.ON_GPU:
        pytest.skip("on a GPU the calls run in the notebook's process (CUDA cannot be forked)")

    def vector_add(x, y):
        faulthandler._sigabrt()  # what glibc does on a corrupted heap: "malloc(): ... detected", SIGABRT

    assert check("vector_add", vector_add) is False
    out = capsys.readouterr().out
    assert "check('vector_add') stopped: crashed (aborted)" in out and "masked" in out
    assert check("softmax_bytes", lambda shape, dtype: 0, show=False) is False  # this process is fine


def test_check_computes_in_its_child_after_this_process_ran_operators_on_several_threads(capsys):
    """OpenMP's thread pool does not survive fork(): a child that used the pool this process started would
    wait forever (stopped at the time limit, 120 s). check()'s child takes one thread; this process's pool is
    started here on two, since the test run keeps torch to one (tests/conftest.py) and a notebook need not."""
    from autograder import check

    if course.ON_GPU:
        pytest.skip("on a GPU the calls run in the notebook's process (CUDA cannot be forked)")
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        a = torch.randn(1000, 1000)
        (a @ a).sum()
        torch.ones(1 << 22).exp().sum()

        def naive_softmax(x):
            x.new_ones(1 << 22).exp().sum()  # large enough to run on the pool's threads
            e = torch.exp(x - x.amax(-1, keepdim=True))
            return e / e.sum(-1, keepdim=True)

        assert check("naive_softmax", naive_softmax, quick=True, show=False) is True, capsys.readouterr().out
    finally:
        torch.set_num_threads(threads)


def test_a_check_stopped_at_its_time_limit_shows_the_line_it_was_stuck_on(capsys, monkeypatch):
    """Once past the time limit the forked child writes its stack: the learner sees the line (theirs),
    not the grader's frames."""
    import time

    from autograder import check, notebook

    if course.ON_GPU:
        pytest.skip("on a GPU the calls run in the notebook's process (CUDA cannot be forked)")
    monkeypatch.setattr(notebook, "local_session",
                        lambda fn, spec: notebook.ForkSession(fn, spec.judged_on_tensors, 3.0, spec.harness))

    def vector_add(x, y):
        while True:
            time.sleep(0.01)  # the line the stack must name

    assert check("vector_add", vector_add) is False
    out = capsys.readouterr().out
    stuck_line = vector_add.__code__.co_firstlineno + 2
    assert "did not finish within the time limit of 3 s" in out
    assert f"line {stuck_line} in vector_add" in out, out
    assert "autograder/worker.py" not in out and "autograder/runner.py" not in out


# --------------------------------------------------------------------------- a PASSED check predicts the grade

# Submissions whose mistakes check() is for: honest ones (tests/submissions; the correct ones included).
# Left out: attacks on the grader (escape_*.py, patches_grader.py: check runs in the learner's own process and
# trusts it), a hang (it only costs check's time limit; test_autograder_guarantees covers it), code that
# cannot be imported, and a flood of output (a correct softmax).
NOT_FOR_CHECK = {"patches_grader.py", "hangs.py", "hangs_asleep.py", "raises_at_import.py", "floods_output.py",
                 # an escape on the CPU only (named without escape_: on a GPU it is honest): check() runs the
                 # kernel in the learner's own process, where no audit of its text applies
                 "interpreter_last_def.py"}
# Submissions that end the process they run in (exits, a segfault; on a GPU an illegal memory access).
CRASH_THE_PROCESS = {"crashes.py", "unmasked_store.py"}
# Exercises judged on wall-clock times of a probe (00's benchmark): on a busy machine a verdict can flip, so
# a disagreement is measured once more before it counts. So is a check stopped at its time limit: a correct
# function that ran past it was held up by the machine; the stack the child wrote is in the message if it
# happens twice.
TIMED = {"benchmark"}
EARLY = [ex for nb in ("00_measure", "01_naive_ops", "02_profiling", "03_triton_basics", "04_fused_softmax")
         for ex in specs.for_notebook(nb)]


def _defines_an_early_entry_point(path) -> bool:
    """Read, not imported: a module beside a submission may patch the grader when it is imported (that is
    what some escape fixtures do), and the check/grade agreement is about notebooks 00-04 only."""
    from autograder import submission

    return bool(submission.load(path).defined & {ex.entry for ex in EARLY})


def _known_submissions():
    from _autograder_helpers import SUBMISSIONS

    return sorted(p.name for p in SUBMISSIONS.glob("*.py")
                  if p.name not in NOT_FOR_CHECK and not p.name.startswith(("escape_", "_"))
                  and _defines_an_early_entry_point(p))


def _load(name):
    import importlib.util
    import sys

    from _autograder_helpers import SUBMISSIONS

    sys.path.insert(0, str(SUBMISSIONS))  # submissions import each other's kernels (good_triton)
    try:
        spec = importlib.util.spec_from_file_location(f"submission_{name[:-3]}", SUBMISSIONS / name)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(SUBMISSIONS))
    return module


def _check_shown(check, ex_id, fn) -> tuple[bool, str]:
    """check()'s verdict on the quick public cases, and what it printed."""
    import contextlib
    import io

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        passed = check(ex_id, fn, quick=True, show=True)
    return passed, printed.getvalue()


@pytest.mark.slow
@pytest.mark.parametrize("name", _known_submissions())
def test_a_passed_check_means_full_correctness_points(name):
    """For every exercise of 00-04 the submission defines: check() passes exactly when the grader gives
    every correctness point (quick cases for both; the same families, tests above)."""
    from _autograder_helpers import SUBMISSIONS, graded, text

    from autograder import check
    from autograder.isolation import timeout_message

    if course.ON_GPU and name in CRASH_THE_PROCESS:
        pytest.skip("on a GPU check() runs in this very process (CUDA cannot be forked): a crash would end it")
    module = _load(name)
    exercises = tuple(ex.id for ex in EARLY if callable(getattr(module, ex.entry, None)))
    assert exercises, f"{name} defines no entry point of notebooks 00-04"
    grades = graded(name, exercises)
    disagree = []
    for ex_id in exercises:
        fn = getattr(module, specs.get(ex_id).entry)
        passed, shown = _check_shown(check, ex_id, fn)
        stopped = timeout_message(specs.get(ex_id).timeout_s) in shown
        if passed != grades[ex_id]["correct"] and (ex_id in TIMED or stopped):  # once more
            from autograder.grading import grade_submission

            passed, shown = _check_shown(check, ex_id, fn)
            grades = {**grades, ex_id: grade_submission(SUBMISSIONS / name, [ex_id], quick=True)["exercises"][0]}
        if passed != grades[ex_id]["correct"]:
            disagree.append(f"{ex_id}: check {'PASSED' if passed else 'failed'}, grade "
                            f"{'correct' if grades[ex_id]['correct'] else 'not correct: ' + text(grades[ex_id])}"
                            f"\ncheck printed:\n{shown[-3000:]}")
    assert not disagree, disagree


# --------------------------------------------------------------------------- the roofline a learner sees

def test_roofline_times_points_cold_and_never_labels_a_slow_kernel_0_gbs(monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import measure.timer
    from measure.roofline import roofline

    seen = {}

    def fake_median_ms(fn, *args, cold=False, **kw):
        seen["cold"] = cold
        return 250.0  # an interpreted kernel: 250 ms for 0.5 MB

    monkeypatch.setattr(measure.timer, "median_ms", fake_median_ms)
    fig = roofline({"interpreted": (lambda x: x, (torch.ones(1),), 3e5, 5e5)},
                   peaks={"copy_gbps": 20.0, "matmul_tflops": 0.05})
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert seen["cold"] is True
    assert any("0.002 GB/s" in label for label in labels), labels
    assert fig.axes[0].get_legend().get_bbox_to_anchor().x0 > fig.axes[0].get_window_extent().x0  # outside


def test_cold_cpu_timing_flushes_the_last_level_cache(monkeypatch):
    from measure import timer

    assert timer.cpu_cache_bytes() > 0
    flushed = []
    buf = torch.empty(8)
    monkeypatch.setattr(timer, "cpu_flush_buffer", lambda: buf)
    monkeypatch.setattr(buf, "zero_", lambda: flushed.append(1) or buf, raising=False)
    if torch.cuda.is_available():
        pytest.skip("the GPU clock always flushes L2")
    timer.median_ms(lambda: None, reps=3, warmup=1, cold=True)
    assert len(flushed) == 2 * (3 + 1)  # before every call, the empty call's included


def test_the_operators_notebook_01_forbids_are_forbidden_in_every_exercise():
    """01's rules: no torch.softmax / F.softmax, F.gelu, F.layer_norm, F.scaled_dot_product_attention."""
    named = {"_softmax", "gelu", "native_layer_norm", "_scaled_dot_product_flash_attention_for_cpu"}
    for spec in specs.for_notebook("01_naive_ops"):
        assert not named & spec.rules.allowed_ops, (spec.id, named & spec.rules.allowed_ops)


def test_a_submission_wrong_on_every_case_is_diagnosed_once_and_its_hint_names_the_cause(monkeypatch):
    """Only the first failure's symptom makes the hint: a wrong output is diagnosed (float64, on the host)
    where it is asked for, not on every call of every case."""
    from autograder import correctness
    from autograder.protocol import CallDone, Shipped
    from autograder.runner import CaseRun, judge_cases, make_plan

    spec = specs.get("softmax")
    plan = [p for p in make_plan(spec, True, 0) if p.case.raises is None]
    diagnosed = []
    real = correctness.symptom_of
    monkeypatch.setattr(correctness, "symptom_of", lambda *a: diagnosed.append(1) or real(*a))

    def scaled(args, ref):  # every output 1.5x: every call of every case wrong
        out = (ref.double() * 1.5).to(args[0].dtype) if args[0].is_floating_point() else ref
        return CallDone(ok=True), Shipped(out, list(args))

    runs = [CaseRun([scaled(p.a, p.ref_a), scaled(p.b, p.ref_b)]) for p in plan]
    v = judge_cases(spec, plan, runs, where=lambda line: line)
    assert all(r["verdict"] == "FAIL" for r in v.rows), v.rows
    assert len(diagnosed) == 1
    assert v.first_fail is not None and v.first_fail.hint and "1.5" in v.first_fail.hint, v.first_fail
