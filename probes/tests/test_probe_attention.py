"""probes/probe_attention without a GPU: its arguments, its refusal, and its table."""
import argparse

import course
import pytest

from probes import probe_attention as probe
from probes.args import shape_list


def test_shapes_parse_and_bad_ones_are_refused():
    assert probe.parse_args(["--shapes", "1,2,64,16;2,2,32,32"]).shapes == ((1, 2, 64, 16), (2, 2, 32, 32))
    for bad in ("1,2,64", "1,2,0,16", "a,b,c,d"):
        with pytest.raises(argparse.ArgumentTypeError):
            shape_list(bad, 4, ";", ",")


@pytest.mark.skipif(course.ON_GPU, reason="without a GPU only")
def test_without_a_hopper_gpu_it_says_so(capsys):
    assert probe.main([]) == 2
    assert "Hopper" in capsys.readouterr().err


def test_candidates_name_both_kernels_and_pytorchs():
    names = list(probe.candidates(causal=False))
    assert names[:2] == ["pointer (autotuned)", "tma (autotuned)"] and names[-2:] == ["sdpa_flash", "sdpa_cudnn"]


def test_table_marks_a_wrong_output_and_an_untimed_one():
    case = {"case": "B1 H1 S64 D16 bf16", "rows": [
        {"candidate": "tma (autotuned)", "ms": 1.0, "tflops": 500.0, "x_cudnn": 0.9, "correct": True, "error": 1e-3,
         "note": ""},
        {"candidate": "pointer 128x64 w4 s3", "ms": None, "tflops": None, "x_cudnn": None, "correct": False,
         "error": 0.5, "note": ""}]}
    text = probe.table(case)
    assert "500" in text and "0.900" in text and "WRONG: normwise 5.00e-01" in text


def test_the_dissected_loop_with_its_softmax_is_attention():
    import torch

    from kernels_ref.flash_attention import attention_torch

    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 2, 64, 16) for _ in range(3))
    want, _ = attention_torch(q.double(), k.double(), v.double())
    got = probe.dissected(True, 16, 16, 4, 1)(q, k, v, False)
    assert (got.double() - want).abs().max() < 1e-4
    gemms = probe.dissected(False, 16, 16, 4, 1)(q, k, v, False)   # (q k^T) v, unnormalized: timed only
    assert torch.allclose(gemms.double(), (q.double() @ k.double().transpose(-2, -1)) @ v.double(), rtol=1e-4, atol=1e-3)


def _backward_inputs(causal, B=1, H=2, S=64, D=16):
    import torch

    from kernels_ref.flash_attention import flash_attention_fwd

    torch.manual_seed(1)
    q, k, v, do = (torch.randn(B, H, S, D) for _ in range(4))
    o, lse = flash_attention_fwd(q, k, v, causal)
    return q, k, v, do, o, lse


@pytest.mark.parametrize("causal", [False, True])
def test_the_atomic_backward_is_the_gradient(causal):
    from measure import reference

    q, k, v, do, o, lse = _backward_inputs(causal)
    want = reference.attention(q.double(), k.double(), v.double(), causal, do=do.double())
    got = probe.atomic_backward(16, 32, 4, 1)(q, k, v, do, o, lse, causal)
    for name, g, w in zip("dq dk dv".split(), got, want):
        assert g.dtype == q.dtype and (g.double() - w).abs().max() < 1e-3, name


def test_the_atomic_backward_refuses_what_it_cannot_tile():
    q, k, v, do, o, lse = _backward_inputs(False, S=48)
    with pytest.raises(ValueError, match="multiple of 32"):
        probe.atomic_backward(16, 32, 4, 1)(q, k, v, do, o, lse, False)


@pytest.mark.parametrize("causal", [False, True])
def test_the_reference_parts_together_make_its_backward(causal):
    from kernels_ref.flash_attention import flash_attention_bwd

    q, k, v, do, o, lse = _backward_inputs(causal)
    fns = probe.backward_candidates(causal, atomic=False)
    state = {}
    fns["part dkdv (autotuned)"](q, k, v, do, o, lse, state)
    dq, dk, dv = fns["part dq (autotuned)"](q, k, v, do, o, lse, state)
    for got, want in zip((dq, dk, dv), flash_attention_bwd(do, q, k, v, o, lse, causal)):
        assert torch_equal(got, want)
    assert list(fns)[:3] == ["reference (autotuned)", "part dkdv (autotuned)", "part dq (autotuned)"]
    assert list(fns)[-2:] == ["sdpa_flash", "sdpa_cudnn"]


def torch_equal(a, b):
    import torch

    return torch.equal(a, b)


def test_backward_table_counts_the_matmuls_each_candidate_runs():
    rows = {name: {"candidate": name, "ms": 1.0, "x_cudnn": 1.0, "correct": True, "error": 0.0, "note": ""}
            for name in ("reference (autotuned)", "part dq (autotuned)", "atomic 64x128 w8 s2", "sdpa_cudnn")}
    case = probe._case("B1 H1 S64 D16 bf16 backward", 5 * 10**12, rows,
                       mm_flops=lambda name: probe.matmuls(name) * 10**12)
    by_name = {r["candidate"]: r for r in case["rows"]}
    assert [by_name[n]["mm_tflops"] for n in rows] == [7000.0, 3000.0, 5000.0, 5000.0]
    assert all(r["tflops"] == 5000.0 for r in case["rows"])
    assert "mm TF/s" in probe.table(case)
    assert "part dq 5000 (1.000)" in probe.summary([case])


def test_the_decode_candidates_agree_with_attention():
    # --decode: the reference and a few of its launch configurations against the float64 definition (the
    # interpreter keeps its own key block; the other parameters still reach the launch); SDPA's backends
    # need a GPU and are only named here.
    import torch

    from kernels_ref.flash_attention import attention_torch

    fns = probe.decode_candidates()
    assert list(fns)[0] == "reference" and list(fns)[-3:] == ["sdpa", "sdpa_flash", "sdpa_cudnn"]
    assert len(fns) == 1 + len(probe.DECODE_VARIANTS) + 3
    torch.manual_seed(2)
    q, k, v = torch.randn(2, 2, 16), torch.randn(2, 2, 37, 16), torch.randn(2, 2, 37, 16)
    want, _ = attention_torch(q[:, :, None].double(), k.double(), v.double())
    for name in ["reference", "split 64 ps8 w2 s3", "split 128 ps2 w8 s4", "sdpa"]:
        assert (fns[name](q, k, v).double() - want[:, :, 0]).abs().max() < 1e-4, name
    assert probe.parse_args(["--decode"]).decode and probe.parse_args([]).shapes is None
