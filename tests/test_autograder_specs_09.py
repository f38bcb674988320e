"""The capstone's spec (09, ``transformer_block``): the correct Triton block earns every correctness point,
one built from F.linear and SDPA earns nothing with the operators named, the tolerances pass eager PyTorch
and fail the plausible bugs of a block, the launch bound bites, and the params dict is a first-class
argument (moved, re-filled, jittered, shipped and checked like a top-level tensor). CPU, quick cases."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch

from _autograder_helpers import graded, listed, text
from _solutions import solution_graded  # noqa: F401  (the fixture)

ROOT = Path(__file__).resolve().parent.parent
EX = ("transformer_block",)


def test_list_shows_the_capstone():
    out = listed()
    assert out.returncode == 0, out.stderr
    line = next(l for l in out.stdout.splitlines() if l.startswith("transformer_block "))
    assert "09_capstone" in line and "10  (7 + 3)" in line


def test_spec_is_complete():
    from autograder import specs
    from course import manifest

    spec = specs.get("transformer_block")
    assert manifest.by_name("09_capstone").exercises == EX
    perf = spec.performance
    assert perf.floor < perf.threshold and perf.naive is not None and perf.flops is not None
    rules = spec.rules
    assert spec.kind == "triton" and rules.min_launches == 1 and rules.max_launches == 16
    assert "add" in rules.allowed_ops and "view" in rules.allowed_ops
    for op in ("mm", "addmm", "bmm", "_softmax", "native_layer_norm", "gelu",
               "_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_for_cpu"):
        assert op not in rules.allowed_ops and op in rules.why, op
    cases = spec.cases(True)
    names = [c.name for c in cases]
    assert len(names) == len(set(names)) and any(c.public for c in cases)
    for dtype in ("float32", "float16", "bfloat16"):
        assert any(dtype in n for n in names), dtype
    shapes = [(c.build(torch.Generator().manual_seed(0))[0].shape, c.name) for c in cases]
    assert any(s[0] > 1 for s, _ in shapes), "B > 1"
    assert any(s[1] % 2 for s, _ in shapes if s[1] > 1), "odd S"
    assert any(s[2] & (s[2] - 1) for s, _ in shapes), "D not a power of two"


@pytest.mark.xdist_group("solution-09_capstone")
def test_correct_triton_block_earns_every_correctness_point(solution_graded):
    """The course's own block (09's solution, graded whole once per run: tests/_solutions.py, read in that
    notebook's xdist group). later/good_09.py's block of simple fixed-tile kernels would take a grading of its
    own, 40 s of CPU in the interpreter; it is run in process below, on one case."""
    from autograder.specs import get

    done = solution_graded("09_capstone")
    assert done.result, done.log
    ex = done.exercise("transformer_block")
    assert ex["correct"], text(ex)
    assert not ex["violations"]
    cases = done.case_rows("transformer_block")
    assert cases and all(row.endswith("  ok") for row in cases), cases
    assert ex["score"] * ex["points"] == pytest.approx(get("transformer_block").correctness_points)
    assert any("performance is graded on a GPU" in f for f in ex["feedback"])


def test_block_from_torch_operators_scores_zero_and_names_them():
    ex = graded("later/uses_torch_ops_09.py", EX, 300.0)["transformer_block"]
    assert ex["score"] == 0 and not ex["correct"]
    for named in ("aten._scaled_dot_product", "aten.addmm", "aten.native_layer_norm", "aten.gelu"):
        assert any(named in v and "at line" in v for v in ex["violations"]), (named, ex["violations"])
    assert any("launched 0 Triton kernel" in v for v in ex["violations"])


# ------------------------------------------------------------------------- tolerances (no worker)

def _judged(impl):
    """{case name: passed} for ``impl`` (plain torch, in process) on the spec's fresh quick cases."""
    from autograder import correctness, specs
    from autograder.runner import make_plan
    from autograder.specs.base import fresh_seed

    spec = specs.get("transformer_block")
    verdicts = {}
    for case, a, _b, ref, _ in make_plan(spec, True, fresh_seed()):
        ok, _, _ = correctness.compare_outputs(impl(*a), ref, correctness.expected_dtypes(a, ref, spec), spec, case)
        verdicts[case.name] = ok
    return verdicts


def _block64(x, p, bug=""):
    """The block in float64 with one deliberate bug, cast back to x's dtype."""
    from measure import reference as R

    B, S, D = x.shape
    H = p["n_heads"]
    w = {k: R.as64(v) for k, v in p.items() if isinstance(v, torch.Tensor)}
    x64 = R.as64(x)
    qkv = R.layer_norm(x64, w["ln1_weight"], w["ln1_bias"], 1e-5) @ w["w_qkv"].T + w["b_qkv"]
    if bug == "heads":  # each head's q, k, v side by side instead of all q, then all k, then all v
        q, k, v = qkv.view(B, S, H, 3, D // H).permute(3, 0, 2, 1, 4)
    else:
        q, k, v = qkv.view(B, S, 3, H, D // H).permute(2, 0, 3, 1, 4)
    s = q @ k.transpose(-1, -2) / math.sqrt(D if bug == "scale" else D // H)
    if bug != "mask":
        s = s.masked_fill(torch.ones(S, S, dtype=torch.bool).triu(1), float("-inf"))
    o = torch.softmax(s, -1) @ v
    h = x64 + o.transpose(1, 2).reshape(B, S, D) @ w["w_out"].T + (0 if bug == "bias" else w["b_out"])
    y = h + R.mlp(R.layer_norm(h, w["ln2_weight"], w["ln2_bias"], 1e-5), w["w_fc"], w["b_fc"], w["w_proj"],
                  w["b_proj"])
    return y.to(x.dtype)


def test_tolerances_pass_eager_pytorch_and_fail_the_bugs_of_a_block():
    from kernels_ref.transformer_block import transformer_block_torch

    assert all(_judged(transformer_block_torch).values())
    assert all(_judged(_block64).values())
    for bug in ("mask", "scale", "bias", "heads"):
        verdicts = _judged(lambda x, p: _block64(x, p, bug))
        # one token (S = 1) cannot tell a mask or a head order; every longer case must fail
        longer = [ok for name, ok in verdicts.items() if "S=1 " not in name]
        assert longer and not any(longer), (bug, verdicts)


def test_a_launch_per_head_breaks_the_launch_bound(capsys, monkeypatch):
    """good_09's block with attention launched once per (batch, head): right values, 16+ launches (on the one
    public case with twelve heads: the interpreter's launches are slow)."""
    import importlib.util

    from autograder import check, runner

    make_plan = runner.make_plan
    one = "many heads B=1 S=9 D=192 heads=12 float32"

    def that_case(*args, **kwargs):
        plan = [p for p in make_plan(*args, **kwargs) if p.case.name == one]
        assert plan, f"no public case named {one!r}"
        return plan

    monkeypatch.setattr(runner, "make_plan", that_case)

    sys.path.insert(0, str(ROOT / "tests/submissions/later"))
    try:
        spec = importlib.util.spec_from_file_location("good_09", ROOT / "tests/submissions/later/good_09.py")
        good = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(good)
    finally:
        sys.path.remove(str(ROOT / "tests/submissions/later"))

    original = good.flash_attention_fwd

    def per_head(q, k, v, causal, sm_scale):
        o = torch.empty(q.shape, dtype=q.dtype, device=q.device)
        for b in range(q.shape[0]):
            for h in range(q.shape[1]):
                one = (slice(b, b + 1), slice(h, h + 1))
                o[one] = original(q[one], k[one], v[one], causal, sm_scale)[0]
        return o, None

    good.flash_attention_fwd = per_head
    try:
        assert not check("transformer_block", good.transformer_block, quick=True)
    finally:
        good.flash_attention_fwd = original
    out = capsys.readouterr().out
    assert "Triton kernels in one call; the exercise allows 16" in out


# ------------------------------------------------------------------------- a dict argument, end to end

def test_a_dict_argument_is_moved_refilled_and_jittered_in_place():
    from autograder.argtree import tensors, to_device
    from autograder.fresh import jittered_args
    from autograder.worker import Worker

    params = {"n_heads": 2, "w": torch.randn(3, 4), "b": torch.randn(3)}
    args = (torch.randn(2, 4), params)
    again = jittered_args(args, 7)
    assert torch.equal(again[1]["w"], jittered_args(args, 7)[1]["w"])       # a function of the seed only
    assert not torch.equal(again[1]["w"], params["w"]) and again[1]["n_heads"] == 2
    assert not torch.equal(again[1]["w"][0, :3], again[0][0, :3])          # every tensor its own stream
    assert len(list(tensors(to_device(args, "cpu")))) == 3

    worker = Worker(lambda x, p: x @ p["w"].T + p["b"], None, poison=False)
    try:
        worker.handle({"op": "load", "slot": 0, "args": args})
        held = list(tensors(worker.slots[0]))
        fresh = (torch.randn(2, 4), {"n_heads": 2, "w": torch.randn(3, 4), "b": torch.randn(3)})
        worker.handle({"op": "refill", "slot": 0, "args": fresh})
        assert [t.data_ptr() for t in tensors(worker.slots[0])] == [t.data_ptr() for t in held]
        assert torch.equal(worker.slots[0][1]["w"], fresh[1]["w"])
        worker.handle({"op": "jitter", "slot": 0, "seed": 3})
        assert torch.equal(worker.slots[0][1]["b"], jittered_args(fresh, 3)[1]["b"])
        assert worker.handle({"op": "call", "slots": [0]})["ok"]
        shipped = worker.handle({"op": "ship"})
        assert shipped["inputs_after"][1]["n_heads"] == 2
        assert torch.equal(shipped["inputs_after"][1]["b"], worker.slots[0][1]["b"])
        worker.handle({"op": "clone", "slot": 0, "to": 1})   # the timed slots: copies, not shared weights
        worker.handle({"op": "jitter", "slot": 1, "seed": 5})
        assert torch.equal(worker.slots[0][1]["b"], jittered_args(fresh, 3)[1]["b"])
        assert worker.slots[1][1]["b"].data_ptr() != worker.slots[0][1]["b"].data_ptr()
    finally:
        worker.restore()


def test_a_weight_modified_in_place_is_reported(capsys):
    from autograder import check
    from autograder.correctness import same_values
    from kernels_ref.transformer_block import transformer_block_torch

    p = {"n_heads": 1, "w": torch.ones(2)}
    assert same_values(p, {"n_heads": 1, "w": torch.ones(2)})
    assert not same_values(p, {"n_heads": 1, "w": torch.tensor([1.0, 2.0])})
    assert not same_values(p, {"n_heads": 1})

    def scales_its_bias(x, params):
        y = transformer_block_torch(x, params)
        params["b_proj"].mul_(0.5)  # the right answer, but the caller's weights changed
        return y

    assert not check("transformer_block", scales_its_bias, quick=True)
    assert "modified its input argument 1" in capsys.readouterr().out


def test_eager_and_naive_blocks_agree_with_the_reference():
    """The performance baseline and the naive version the calibration times compute the block."""
    from autograder.specs.nb09_capstone import block_params, eager_block, naive_block
    from measure import reference

    g = torch.Generator().manual_seed(0)
    x, p = torch.randn(2, 9, 48, generator=g), block_params(g, 48, 3, torch.float32, "cpu")
    ref = reference.transformer_block(x, p)
    for fn in (eager_block, naive_block):
        torch.testing.assert_close(fn(x, p).double(), ref, atol=1e-5, rtol=1e-5)
