"""kernels_ref.matmul: matmul and linear_bias_gelu against float64 references.

CPU (interpreter, one fixed 16x32x16 tile config, GROUP_M 2): shapes chosen to cross several tiles, the
masked K tail (K % 16 != 0) and the unmasked EVEN_K loop (K % 16 == 0). bf16 inputs are tested on the
CPU too: the interpreter upcasts the dot (course.triton_compat.dot), so only the final rounding differs.
"""
import course
import pytest
import torch
import torch.nn.functional as F

from kernels_ref.matmul import linear_bias_gelu, linear_bias_gelu_torch, matmul, matmul_torch

from sm90 import compile_sm90 as _compile_sm90

DEV = course.DEVICE



# Allowed error relative to max|ref|, per output dtype: the kernel accumulates in fp32 and rounds once,
# so a few units of the output's last place (fp16 2^-11, bf16 2^-8). fp32 on a GPU goes through TF32.
TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
GPU_TOL = {torch.float32: 5e-3, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}

SHAPES = [(37, 45, 29), (64, 64, 64), (130, 70, 33), (1, 1, 1), (3, 100, 16)]
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def assert_close(out, ref, tol):
    assert out.shape == ref.shape, (out.shape, ref.shape)
    out = out.double()
    assert not torch.isnan(out).any(), "NaN in output"
    scale = ref.abs().max().clamp_min(1e-6)
    # Elementwise, with a relative part (rounding of each output) and an absolute part scaled to the tensor.
    err = ((out - ref).abs() - tol * ref.abs()).max() / scale
    assert err <= tol, f"max error {err.item():.3g} (relative to max|ref| {scale.item():.3g}) > {tol}"


def _randn(*shape, dtype):
    return torch.randn(*shape, device=DEV, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("M,N,K", SHAPES)
def test_matmul(M, N, K, dtype):
    a, b = _randn(M, K, dtype=dtype), _randn(K, N, dtype=dtype)
    a0, b0 = a.clone(), b.clone()
    c = matmul(a, b)
    assert c.dtype == dtype and c.shape == (M, N) and c.device == a.device
    assert_close(c, a.double() @ b.double(), TOL[dtype])
    assert torch.equal(a, a0) and torch.equal(b, b0), "inputs were modified"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("M,N,K", [(37, 45, 29), (64, 64, 64), (130, 70, 33)])
def test_linear_bias_gelu(M, N, K, dtype):
    x, w, b = _randn(M, K, dtype=dtype), _randn(N, K, dtype=dtype), _randn(N, dtype=dtype)
    saved = [t.clone() for t in (x, w, b)]
    y = linear_bias_gelu(x, w, b)
    assert y.dtype == dtype and y.shape == (M, N)
    assert_close(y, linear_bias_gelu_torch(x.double(), w.double(), b.double()), TOL[dtype])
    assert all(torch.equal(t, s) for t, s in zip((x, w, b), saved)), "inputs were modified"


def test_linear_bias_gelu_batched_noncontiguous_and_extremes():
    # x [2, 5, K] built from a transposed storage, weight a transposed view of a [K, N] tensor, and
    # biases of +-60 so that GELU sees both tails (x -> -0 and x -> x, no overflow, no NaN).
    K, N = 24, 33
    x = _randn(2, K, 5, dtype=torch.float32).transpose(1, 2)
    w = _randn(K, N, dtype=torch.float32).t()
    b = _randn(N, dtype=torch.float32)
    b[::2] += 60
    b[1::2] -= 60
    assert not x.is_contiguous() and not w.is_contiguous()
    y = linear_bias_gelu(x, w, b)
    assert y.shape == (2, 5, N)
    assert_close(y, linear_bias_gelu_torch(x.double(), w.double(), b.double()), TOL[torch.float32])


def test_matmul_strided_views():
    a = _randn(29, 37, dtype=torch.float16).t()          # [37, 29], column-major
    b = _randn(29, 90, dtype=torch.float16)[:, ::2]      # [29, 45], stride 2 along N
    c = matmul(a, b)
    assert c.is_contiguous()
    assert_close(c, a.double() @ b.double(), TOL[torch.float16])


def test_outputs_fully_written(monkeypatch):
    # Poison every fresh allocation with NaN: a tile the kernel forgets to store shows up as NaN.
    real_empty = torch.empty

    def poisoned_empty(*args, **kwargs):
        t = real_empty(*args, **kwargs)
        if t.is_floating_point():
            t.fill_(float("nan"))
        return t

    monkeypatch.setattr(torch, "empty", poisoned_empty)
    a, b = _randn(50, 23, dtype=torch.float32), _randn(23, 67, dtype=torch.float32)
    assert_close(matmul(a, b), a.double() @ b.double(), TOL[torch.float32])
    w, bias = _randn(67, 23, dtype=torch.float32), _randn(67, dtype=torch.float32)
    assert_close(linear_bias_gelu(a, w, bias),
                 linear_bias_gelu_torch(a.double(), w.double(), bias.double()), TOL[torch.float32])


def test_empty_and_degenerate_shapes():
    assert matmul(_randn(0, 5, dtype=torch.float32), _randn(5, 7, dtype=torch.float32)).shape == (0, 7)
    c = matmul(_randn(4, 0, dtype=torch.float32), _randn(0, 6, dtype=torch.float32))
    assert torch.equal(c, torch.zeros(4, 6, device=DEV))
    b = _randn(6, dtype=torch.float32)
    y = linear_bias_gelu(_randn(4, 0, dtype=torch.float32), _randn(6, 0, dtype=torch.float32), b)
    torch.testing.assert_close(y, F.gelu(b, approximate="tanh").expand(4, 6))


def test_reference_definitions():
    a, b = torch.randn(5, 3, dtype=torch.float64), torch.randn(3, 4, dtype=torch.float64)
    torch.testing.assert_close(matmul_torch(a, b), a @ b)
    w, bias = torch.randn(4, 3, dtype=torch.float64), torch.randn(4, dtype=torch.float64)
    pre = a @ w.T + bias
    want = 0.5 * pre * (1 + torch.tanh((2 / torch.pi) ** 0.5 * (pre + 0.044715 * pre**3)))
    torch.testing.assert_close(linear_bias_gelu_torch(a, w, bias), want)


def test_bad_inputs_raise():
    f32 = dict(dtype=torch.float32)
    with pytest.raises(ValueError, match="inner dimensions"):
        matmul(_randn(3, 4, **f32), _randn(5, 6, **f32))
    with pytest.raises(ValueError, match="2-D"):
        matmul(_randn(3, **f32), _randn(3, 6, **f32))
    with pytest.raises(TypeError, match="dtype"):
        matmul(torch.ones(3, 4, dtype=torch.int32, device=DEV), torch.ones(4, 2, dtype=torch.int32, device=DEV))
    with pytest.raises(ValueError, match="share"):
        matmul(_randn(3, 4, **f32), _randn(4, 2, dtype=torch.float16))
    with pytest.raises(ValueError, match="features"):
        linear_bias_gelu(_randn(3, 4, **f32), _randn(6, 5, **f32), _randn(6, **f32))
    with pytest.raises(ValueError, match="bias"):
        linear_bias_gelu(_randn(3, 4, **f32), _randn(6, 4, **f32), _randn(5, **f32))


def test_bench_cases_are_well_formed():
    from kernels_ref.benchmarking import BenchCase
    from kernels_ref.matmul import bench_cases

    for quick in (True, False):
        cases = bench_cases(quick)  # builds BenchCase objects (goal names validated); allocates nothing
        assert cases and all(isinstance(c, BenchCase) for c in cases)
        ops = {c.op for c in cases}
        assert ops == {"matmul", "linear_bias_gelu"}
        assert any("cublas_matmul_only" in c.candidates for c in cases)
        assert all(c.flops and c.flops > 0 for c in cases)


def test_bench_case_wiring_runs_on_tiny_shapes():
    # The GPU suite's cases, shrunk: every candidate takes the case's inputs and the checked ones agree
    # with the float64 reference (a stub timer stands in for do_bench).
    from kernels_ref.benchmarking import Ceilings, evaluate_goals, run_case
    from kernels_ref.matmul import linear_bias_gelu_cases, matmul_case

    cases = [matmul_case(40, torch.float32)] + linear_bias_gelu_cases(33, 20, 17, torch.float32)
    for case in cases:
        rows = run_case(case, Ceilings(copy_gbps=1.0, matmul_tflops=1.0), timer=lambda fn: 1.0)
        assert all(r.correct for r in rows), [(r.candidate, r.note) for r in rows]
        assert all(r.ms == 1.0 and r.tflops > 0 for r in rows)
        assert len(evaluate_goals(case, rows)) == len(case.goals)


def test_compiles_for_hopper_with_wgmma():
    # No GPU here, but Triton can compile for sm_90 ahead of time: the first autotune config of the
    # fused kernel must lower to wgmma with cp.async pipelining and fit in 227 KB of shared memory.
    info = _compile_sm90("kernels_ref.matmul", "_matmul_kernel", 0)
    assert info["wgmma"] and info["cp_async"], info
    assert info["shared"] <= 227 * 1024, info


# --------------------------------------------------------------------------------------- GPU, full size

@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("M,N,K", [(4096, 4096, 4096), (1000, 3001, 777), (16384, 1024, 4096)])
def test_matmul_gpu(M, N, K, dtype):
    a, b = _randn(M, K, dtype=dtype), _randn(K, N, dtype=dtype)
    assert_close(matmul(a, b), a.double() @ b.double(), GPU_TOL[dtype])


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("M,N,K", [(4096, 11008, 4096), (999, 1001, 1003)])
def test_linear_bias_gelu_gpu(M, N, K, dtype):
    x, w, b = _randn(M, K, dtype=dtype), _randn(N, K, dtype=dtype) / K**0.5, _randn(N, dtype=dtype)
    ref = linear_bias_gelu_torch(x.double(), w.double(), b.double())
    assert_close(linear_bias_gelu(x, w, b), ref, GPU_TOL[dtype])
