"""tools/probe_attention without a GPU: its arguments, its refusal, and its table."""
import argparse

import course
import pytest

from tools import probe_attention as probe
from tools.args import shape_list


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
