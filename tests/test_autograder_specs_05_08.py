"""The exercise specs of notebooks 05-08: the correct Triton solutions
earn every correctness point, one that calls the torch operator the exercise teaches earns nothing and the
operator is named, and the hard cases fail what they are there to catch. CPU, quick cases (~80 s)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from _autograder_helpers import graded, listed, text
from _rounding import operand
from _solutions import solution_graded  # noqa: F401  (the fixture)
from course import manifest

ROOT = Path(__file__).resolve().parent.parent
LATER = ("layer_norm_fwd", "layer_norm_bwd", "layer_norm_gelu", "matmul", "linear_bias_gelu", "flash_attention_fwd",
         "flash_attention_bwd", "linear_cross_entropy")
NOTEBOOKS = {ex: nb for ex, nb in manifest.exercise_notebook().items() if ex in LATER}
# The operator each illegal entry point calls, as the violation must name it.
NAMED = {"layer_norm_fwd": "aten.native_layer_norm ", "layer_norm_bwd": "aten.native_layer_norm_backward",
         "layer_norm_gelu": "aten.gelu ",
         "matmul": "aten.mm ", "linear_bias_gelu": "aten.addmm", "flash_attention_fwd": "aten._scaled_dot_product",
         "flash_attention_bwd": "aten._scaled_dot_product", "linear_cross_entropy": "aten._log_softmax"}


def test_list_shows_the_later_exercises_with_their_notebooks():
    out = listed()
    assert out.returncode == 0, out.stderr
    for ex_id, nb in NOTEBOOKS.items():
        line = next(l for l in out.stdout.splitlines() if l.startswith(ex_id + " "))
        assert nb in line and "10  (7 + 3)" in line


def test_specs_are_complete():
    from autograder import specs

    for ex_id in LATER:
        spec = specs.get(ex_id)
        if ex_id == "linear_cross_entropy":  # graded by the peak memory of forward + backward, not by time
            assert spec.memory is not None and spec.memory.peak_ratio == 0.25 and spec.harness is not None
        else:
            assert spec.performance is not None and spec.performance.floor < spec.performance.threshold
        assert spec.kind == "triton" and spec.rules.allowed_ops is not None and spec.rules.min_launches >= 1
        names = [c.name for c in spec.cases(True)]
        assert len(names) == len(set(names)) and any(c.public for c in spec.cases(True))
        for dtype in ("float32", "float16", "bfloat16"):
            assert any(dtype in n for n in names), (ex_id, dtype)
    assert specs.get("layer_norm_bwd").rules.max_launches == 2 and specs.get("flash_attention_bwd").rules.max_launches == 3
    for one in ("layer_norm_fwd", "layer_norm_gelu", "matmul", "linear_bias_gelu", "flash_attention_fwd"):
        assert specs.get(one).rules.max_launches == 1


@pytest.mark.parametrize("ex_id", [pytest.param(ex, marks=pytest.mark.xdist_group(f"solution-{NOTEBOOKS[ex]}"))
                                   for ex in LATER])
def test_correct_triton_submission_earns_every_correctness_point(ex_id, solution_graded):
    """The course's own Triton solutions earn every point the CPU gives, case by case, with no violation: each
    notebook graded whole once per run (tests/_solutions.py; the test runs in that notebook's xdist group, with
    the tests of test_notebooks.py and test_solutions_graded.py that read the same grade). A second correct
    submission of all eight exercises would cost a grading of 50 s of CPU; later/good_05_08.py's loss, with its
    own memory profile, is graded in test_autograder_specs_08.py."""
    from autograder.specs import get

    done = solution_graded(NOTEBOOKS[ex_id])
    assert done.result, done.log
    ex = done.exercise(ex_id)
    assert ex["correct"], text(ex)
    assert not ex["violations"]
    cases = done.case_rows(ex_id)
    assert cases and all(row.endswith("  ok") for row in cases), cases
    spec = get(ex_id)
    if spec.memory is not None:  # memory is graded in place of time, on every device: all its points here too
        assert ex["score"] * ex["points"] == pytest.approx(spec.points)
        return
    assert ex["score"] * ex["points"] == pytest.approx(spec.correctness_points)  # no GPU: perf points 0
    assert any("performance is graded on a GPU" in f for f in ex["feedback"])


@pytest.mark.parametrize("ex_id", LATER)
def test_calling_the_taught_torch_operator_scores_zero_and_names_it(ex_id):
    ex = graded("later/uses_torch_ops_05_08.py", LATER, 300.0)[ex_id]
    assert ex["score"] == 0 and not ex["correct"]
    assert any(NAMED[ex_id] in v and "at line" in v for v in ex["violations"]), ex["violations"]
    assert any("launched 0 Triton kernel" in v for v in ex["violations"])


def test_layer_norm_gelu_names_both_eager_launches_and_rejects_two_triton_launches():
    ex = graded("later/uses_torch_ops_05_08.py", LATER, 300.0)["layer_norm_gelu"]
    assert any("aten.native_layer_norm " in v and "at line" in v for v in ex["violations"]), ex["violations"]
    two = graded("later/two_launches_05.py", ("layer_norm_gelu",), 300.0)["layer_norm_gelu"]
    assert two["score"] == 0 and not two["correct"]
    assert all(c["verdict"] == "ok" for c in two["cases"]), "right values: only the fusion is missing"
    assert any("launched 2 Triton kernels in one call" in v and "allows 1" in v for v in two["violations"]), two["violations"]


# ------------------------------------------------------------------------- the hard cases bite (no worker)

def _judged(ex_id, impl, quick=False):
    """{case name: passed} for ``impl`` (plain torch, in process) on the spec's fresh cases."""
    from autograder import correctness, specs
    from autograder.runner import make_plan
    from autograder.specs.base import fresh_seed

    spec = specs.get(ex_id)
    verdicts = {}
    for case, a, _b, ref, _ in make_plan(spec, quick, fresh_seed()):
        if case.raises is not None:  # inputs the exercise says to reject: nothing to compare
            continue
        out, _ = spec.call(impl, a)  # through the exercise's harness (08's loss: forward and backward)
        ok, _, _ = correctness.compare_outputs(out, ref, correctness.expected_dtypes(a, ref, spec), spec, case)
        verdicts[case.name] = ok
    return verdicts


def _ln_fwd(x, w, b, eps, one_pass=False):
    xf = x.float()
    mean = xf.mean(-1)
    var = (xf * xf).mean(-1) - mean * mean if one_pass else ((xf - mean[:, None]) ** 2).mean(-1)
    rstd = torch.rsqrt(var + eps)
    return ((xf - mean[:, None]) * rstd[:, None] * w.float() + b.float()).to(x.dtype), mean, rstd


def test_layer_norm_mean_300_case_fails_the_one_pass_variance():
    good = _judged("layer_norm_fwd", _ln_fwd)
    assert all(good.values()), good
    bad = _judged("layer_norm_fwd", lambda *a: _ln_fwd(*a, one_pass=True))
    assert not bad[next(n for n in bad if n.startswith("mean 300"))]


def test_layer_norm_gelu_saturation_case_fails_an_overflowing_tanh():
    def gelu_via_exp(x, w, b, eps, stable=True):
        y = _ln_fwd(x, w, b, eps)[0].float()
        if stable:
            return F.gelu(y, approximate="tanh").to(x.dtype)
        e = torch.exp(2 * 0.7978845608028654 * (y + 0.044715 * y ** 3))  # inf / inf = nan once it overflows
        return (0.5 * y * (1 + (e - 1) / (e + 1))).to(x.dtype)

    assert all(_judged("layer_norm_gelu", gelu_via_exp, quick=True).values())
    bad = _judged("layer_norm_gelu", lambda *a: gelu_via_exp(*a, stable=False), quick=True)
    assert not bad[next(n for n in bad if n.startswith("GELU saturates"))]


def test_matmul_admits_tf32_but_not_a_dropped_k_tail():
    def tf32_like(a, b):  # operands read as TF32 (10-bit mantissa), products accumulated in fp32
        return (operand(a, a.dtype) @ operand(b, b.dtype)).to(a.dtype)

    def drops_tail(a, b):  # the last partial K tile (K % 16 columns) never added
        k = a.shape[1] - a.shape[1] % 16
        return (a[:, :k].float() @ b[:k].float()).to(a.dtype)

    assert all(_judged("matmul", tf32_like).values())
    bad = _judged("matmul", drops_tail)
    assert not all(bad.values())


def test_cross_entropy_large_logits_case_fails_without_the_max_subtraction():
    def no_max(x, w, t):
        logits = (x @ w.T).float()
        return (torch.log(torch.exp(logits).sum(-1)) - logits.gather(1, t[:, None])[:, 0]).mean()

    assert all(_judged("linear_cross_entropy", lambda x, w, t: F.cross_entropy((x @ w.T).float(), t)).values())
    bad = _judged("linear_cross_entropy", no_max)
    assert not bad[next(n for n in bad if n.startswith("large logits"))]


def test_flash_attention_checks_the_mask_and_the_scale():
    from autograder.specs.nb07_flash_attention import fwd_reference

    def ignores(q, k, v, causal, sm_scale, what):
        o, lse = fwd_reference(q, k, v, causal and what != "causal", None if what == "scale" else sm_scale)
        return o.to(q.dtype), lse.float()

    assert all(_judged("flash_attention_fwd", lambda *a: ignores(*a, what="")).values())
    no_mask = _judged("flash_attention_fwd", lambda *a: ignores(*a, what="causal"), quick=True)
    assert not any(ok for name, ok in no_mask.items() if "causal=True" in name and "x1x16" not in name)
    no_scale = _judged("flash_attention_fwd", lambda *a: ignores(*a, what="scale"), quick=True)
    assert not no_scale[next(n for n in no_scale if n.startswith("sm_scale"))]


def test_flash_attention_naive_versions_compute_attention():
    """The eager S x S versions that calibration times against SDPA compute what the exercises ask for."""
    from autograder.specs import nb07_flash_attention as nb07

    g = torch.Generator().manual_seed(0)
    for causal, sm_scale in ((False, None), (True, 0.3)):
        q, k, v, do = (torch.randn(2, 3, 33, 16, generator=g) for _ in range(4))
        o, lse = nb07.naive_attention_fwd(q, k, v, causal, sm_scale)
        for got, want in zip((o, lse), nb07.fwd_reference(q, k, v, causal, sm_scale)):
            torch.testing.assert_close(got.double(), want, atol=1e-5, rtol=1e-4)
        grads = nb07.naive_attention_bwd(do, q, k, v, o, lse, causal, sm_scale)
        for got, want in zip(grads, nb07.bwd_reference(do, q, k, v, o, lse, causal, sm_scale)):
            torch.testing.assert_close(got.double(), want, atol=1e-5, rtol=1e-4)


def test_cross_entropy_that_materializes_the_full_logits_is_a_violation(capsys):
    """A Triton loss kernel over x @ weight.T computed in one go: right answer, wrong memory."""
    import importlib.util

    from autograder import check

    spec = importlib.util.spec_from_file_location("good_05_08", ROOT / "tests/submissions/later/good_05_08.py")
    good = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(good)

    class FullLogits(good._LinearCrossEntropy):  # the same backward, a forward over all the logits
        @staticmethod
        def forward(ctx, x, weight, targets):
            m, v = x.shape[0], weight.shape[0]
            logits = x @ weight.T  # [M, V] at once
            losses, lse = (torch.empty(m, dtype=torch.float32, device=x.device) for _ in range(2))
            good._row_loss_kernel[(m,)](logits, targets, losses, lse, v, logits.stride(0), BLOCK=1024)
            ctx.save_for_backward(x, weight, targets, lse)
            return losses.sum() / m

    def full_logits(x, weight, targets):
        return FullLogits.apply(x, weight, targets)

    assert check("linear_cross_entropy", good.linear_cross_entropy, quick=True)
    capsys.readouterr()
    assert not check("linear_cross_entropy", full_logits, quick=True)
    out = capsys.readouterr().out
    assert "violation: aten.mm at line" in out and "must never hold more than" in out


def test_flash_backward_fresh_values_keep_o_and_lse_the_forward_of_q_k_v():
    # A timed backward call gets fresh do, q, k, v; o and lse must be their forward's, or every correct
    # kernel (which recomputes P from lse) is judged wrong. Worker and grader make them by the same function.
    from autograder.fresh import jittered_args
    from autograder.specs import get
    from measure import reference

    g = torch.Generator().manual_seed(3)
    q, k, v, do = (torch.randn(1, 2, 33, 16, generator=g) for _ in range(4))
    o, lse = reference.attention(q, k, v, True)
    bases = (do, q, k, v, o.float(), lse.float(), True, None)
    perf = get("flash_attention_bwd").performance
    fresh = perf.fresh_args(bases, 11)
    assert all(torch.equal(a, b) for a, b in zip(fresh[:4], jittered_args(bases[:4], 11)))
    assert not torch.equal(fresh[1], q)
    o2, lse2 = reference.attention(*fresh[1:4], True)
    assert torch.allclose(fresh[4].double(), o2, atol=1e-5) and torch.allclose(fresh[5].double(), lse2, atol=1e-5)
    assert all(torch.equal(a, b) for a, b in zip(fresh[:6], perf.fresh_args(bases, 11)[:6]))  # reproducible
    assert get("softmax").performance.fresh_args((q,), 5)[0].equal(jittered_args((q,), 5)[0])  # the default


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [True, False])
def test_on_a_gpu_the_backwards_fresh_o_and_lse_are_the_forward_to_float32_accuracy(causal):
    # 16-bit inputs on a GPU take PyTorch's flash forward: lse must match the float64 forward as closely as
    # the float32 path does (a correct backward recomputes P from it), and the same inputs give the same bits.
    from autograder.specs import nb07_flash_attention as nb07
    from measure import reference

    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, 4, 1000, 128, generator=g).to(torch.bfloat16).cuda() for _ in range(3))
    o, lse = nb07._attention_flash(q, k, v, causal, None)
    o64, lse64 = reference.attention(q.cpu(), k.cpu(), v.cpu(), causal)
    _, lse32 = nb07._attention_fp32(q, k, v, causal, None)
    err_flash = float((lse.cpu().double() - lse64).abs().max())
    err_fp32 = float((lse32.cpu().double() - lse64).abs().max())
    assert lse.dtype == torch.float32 and err_flash <= max(2 * err_fp32, 1e-5), (err_flash, err_fp32)
    assert float((o.cpu().double() - o64).abs().max()) < 2e-2
    again = nb07._attention_flash(q.clone(), k.clone(), v.clone(), causal, None)
    assert torch.equal(again[0], o) and torch.equal(again[1], lse)


def test_fresh_values_and_baseline_args_do_not_mix():
    from autograder.specs.base import Performance

    with pytest.raises(ValueError, match="use one"):
        Performance(inputs=None, baseline=None, baseline_name="", nbytes=None, fresh=lambda b, s: b,
                    baseline_args=lambda a: a)


# ------------------------------------------------------------- grid and layout mistakes fail check and grade

@pytest.mark.parametrize("bug", ["no_batch", "contiguous", "bh_stride_h"])
def test_flash_forward_grid_and_layout_mistakes_fail_check_and_the_grade(bug):
    """A grid that leaves out the batch, offsets that ignore the strides, heads stepped by ``bh * stride_h``:
    each is right with B = 1 or H = 1 in the contiguous layout, so public cases with B > 1 and H > 1 (and a
    [B, S, H, D] view of them) must catch it in check as well as in the grade."""
    import contextlib
    import importlib.util
    import io

    from _autograder_helpers import SUBMISSIONS

    from autograder import check

    name = f"later/flash_{bug}_07.py"
    ex = graded(name, ("flash_attention_fwd",), 300.0)["flash_attention_fwd"]
    assert not ex["correct"] and ex["score"] == 0, text(ex)
    assert not ex["violations"], ex["violations"]
    sys.path.insert(0, str(SUBMISSIONS / "later"))
    try:
        spec = importlib.util.spec_from_file_location(f"flash_{bug}", SUBMISSIONS / name)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        with contextlib.redirect_stdout(io.StringIO()):
            assert not check("flash_attention_fwd", module.flash_attention_fwd, quick=True)
    finally:
        sys.path.remove(str(SUBMISSIONS / "later"))


# ------------------------------------------------------------------------------- determinism where asked

def test_a_layer_norm_backward_with_atomics_is_a_finding_with_the_notebooks_reason():
    """Right values in one launch, but with tl.atomic_add: notebook 05 asks for a deterministic backward. On
    the CPU the interpreter runs programs in order, so only the source shows it."""
    ex = graded("later/layer_norm_atomics_05.py", ("layer_norm_bwd",), 300.0)["layer_norm_bwd"]
    assert all(c["verdict"] == "ok" for c in ex["cases"]), text(ex)
    assert ex["score"] == 0 and not ex["correct"]
    assert any("calls tl.atomic_add in the Triton kernel _ln_bwd_atomic_kernel" in v and "deterministic" in v
               for v in ex["violations"]), ex["violations"]


def test_atomics_are_a_finding_only_where_determinism_is_asked_and_the_entry_reaches_them():
    from autograder import determinism, specs

    source = ("import triton\nimport triton.language as tl\n\n@triton.jit\ndef shown(p):\n    tl.atomic_add(p, 1.0)\n\n"
              "@triton.jit\ndef used(p):\n    tl.atomic_max(p, 1.0)\n\ndef {entry}(*a):\n    used[(1,)](a[0])\n\n"
              "def demo(p):\n    shown[(1,)](p)\n")
    where = "line {}".format
    bwd = specs.get("flash_attention_bwd")
    assert determinism.source_findings(bwd, source.format(entry=bwd.entry), where) == []  # max: any order
    reached = source.format(entry=bwd.entry).replace("used[(1,)]", "shown[(1,)]")
    assert [f.split(":")[:2] for f in determinism.source_findings(bwd, reached, where)] == [
        ["line 6", " calls tl.atomic_add in the Triton kernel shown"]]
    fwd = specs.get("flash_attention_fwd")
    assert determinism.source_findings(fwd, reached.replace(bwd.entry, fwd.entry), where) == []


def test_same_bits_tells_one_ulp_apart():
    from autograder.determinism import same_bits

    x = torch.randn(100)
    y = x.clone()
    assert same_bits(x, y)
    y[7] = torch.nextafter(y[7], torch.tensor(float("inf")))
    assert not same_bits(x, y)


def test_on_a_gpu_two_calls_on_the_same_inputs_must_give_the_same_bits(monkeypatch):
    """determinism.repeat_check against a worker whose second answer differs in one ulp of dk (made up here:
    this machine has no GPU, where atomics would do it)."""
    from types import SimpleNamespace

    import course
    from autograder import determinism, specs
    from autograder.runner import make_plan

    monkeypatch.setattr(course, "ON_GPU", True)
    spec = specs.get("flash_attention_bwd")
    plan = make_plan(spec, True, 0)

    class Worker:
        def __init__(self, wobble):
            self.calls, self.wobble = 0, wobble

        def request(self, req, reply=None):
            if req["op"] == "call":
                self.calls += 1
                return SimpleNamespace(ok=True)
            if req["op"] == "ship":
                out = [torch.ones(4), torch.ones(4), torch.ones(4)]
                if self.wobble and self.calls == 2:
                    out[1][0] = torch.nextafter(out[1][0], torch.tensor(2.0))
                return SimpleNamespace(output=tuple(out))
            return None

    assert determinism.repeat_check(Worker(False), spec, plan) is None
    found = determinism.repeat_check(Worker(True), spec, plan)
    assert "different bits in dk" in found and "deterministic" in found
    assert determinism.repeat_check(Worker(True), specs.get("flash_attention_fwd"), plan) is None


def test_atomics_in_a_kernel_of_a_module_beside_the_submission_are_a_finding(tmp_path):
    """The submission's kernel calls a @triton.jit helper of a module beside it that accumulates with
    tl.atomic_add: every module the submission imports is the submission, determinism included."""
    from autograder import grading, specs
    from autograder.submission import load

    (tmp_path / "lnacc.py").write_text("import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
                                       "def accumulate(p, v):\n    tl.atomic_add(p, v)\n\n\n@triton.jit\n"
                                       "def split_k_sum(p, v):  # another exercise's kernel: never reached\n"
                                       "    tl.atomic_add(p, v)\n")
    (tmp_path / "sub.py").write_text("import triton\nfrom lnacc import accumulate\n\n\n@triton.jit\n"
                                     "def kernel(p):\n    accumulate(p, 1.0)\n\n\n"
                                     "def layer_norm_bwd(dy, x, weight, mean, rstd):\n    kernel[(1,)](dy)\n")
    found = grading.static_violations(specs.get("layer_norm_bwd"), load(tmp_path / "sub.py")).violations
    atomic = [v for v in found if "atomic" in v]
    assert len(atomic) == 1 and atomic[0].startswith("lnacc.py, line 7: calls tl.atomic_add in the Triton kernel "
                                                     "accumulate") and "deterministic" in atomic[0], found
    # reached through the module (import lnacc; lnacc.accumulate) and a package's relative import alike
    (tmp_path / "sub.py").write_text((tmp_path / "sub.py").read_text().replace(
        "from lnacc import accumulate", "import lnacc").replace("    accumulate(p", "    lnacc.accumulate(p"))
    found = grading.static_violations(specs.get("layer_norm_bwd"), load(tmp_path / "sub.py")).violations
    assert [v.split(":")[0] for v in found if "atomic" in v] == ["lnacc.py, line 7"], found
    # where the exercise asks for no determinism, the same helper is no finding
    assert not any("atomic" in v for v in grading.static_violations(specs.get("layer_norm_fwd"),
                                                                      load(tmp_path / "sub.py")).violations)
