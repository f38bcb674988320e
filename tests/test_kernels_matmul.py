"""kernels_ref.matmul: matmul and linear_bias_gelu against float64 references.

CPU (interpreter, one fixed 16x32x16 tile config, GROUP_M 2): shapes chosen to cross several tiles, the
masked K tail (K % 16 != 0) and the unmasked EVEN_K loop (K % 16 == 0). bf16 inputs are tested on the
CPU too: the interpreter upcasts the dot (course.triton_compat.dot), so only the final rounding differs.
"""
import course
import pytest
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from kernels_ref.matmul import linear_bias_gelu, linear_bias_gelu_torch, matmul, matmul_torch, matmul_untuned

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
        rows = run_case(case, Ceilings(copy_gbps=1.0, matmul_tflops=1.0), timer=lambda fn: 1.0,
                        gpu_timer=lambda fn: 1.0)
        assert all(r.correct for r in rows), [(r.candidate, r.note) for r in rows]
        assert all(r.ms == 1.0 and r.tflops > 0 for r in rows)
        assert len(evaluate_goals(case, rows)) == len(case.goals)


# The persistent TMA kernel, forced under the interpreter (which models TMA descriptors): NUM_SMS is 4 here,
# so 16x32 tiles over these shapes make each program walk several tiles; K tails read as zeros from TMA.
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("M,N,K", [(37, 48, 40), (70, 96, 16), (5, 32, 24)])
def test_tma_persistent_kernel(M, N, K, dtype):
    x, w, b = _randn(M, K, dtype=dtype), _randn(N, K, dtype=dtype) / K**0.5, _randn(N, dtype=dtype)
    ref = linear_bias_gelu_torch(x.double(), w.double(), b.double())
    assert_close(linear_bias_gelu(x, w, b, kernel="tma"), ref, TOL[dtype])
    bt = _randn(K, N, dtype=dtype)  # row-major b: the other B layout of the kernel, no epilogue
    assert_close(matmul(x, bt, kernel="tma"), x.double() @ bt.double(), TOL[dtype])


@pytest.mark.parametrize("flatten", [True, False])
def test_tma_kernel_with_one_config(flatten):
    # config= launches one configuration (probes.probe_matmul_configs): the descriptors take its block shapes,
    # and the unflattened tile loop (which warp specialization needs on Hopper) computes the same.
    x, w, b = _randn(37, 40, dtype=torch.bfloat16), _randn(96, 40, dtype=torch.bfloat16) / 40**0.5, \
        _randn(96, dtype=torch.bfloat16)
    ref = linear_bias_gelu_torch(x.double(), w.double(), b.double())
    config = {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 16, "GROUP_M": 2, "EPILOGUE_SUBTILE": flatten,
              "FLATTEN": flatten, "num_warps": 4, "num_stages": 1}
    assert_close(linear_bias_gelu(x, w, b, kernel="tma", config=config), ref, TOL[torch.bfloat16])


def test_kernel_choice():
    from kernels_ref.matmul import _pick_kernel

    a, b = _randn(64, 64, dtype=torch.bfloat16), _randn(64, 64, dtype=torch.bfloat16)
    want = "tma" if course.ON_GPU and torch.cuda.get_device_capability()[0] >= 9 else "pointer"
    assert _pick_kernel(a, b) == want and _pick_kernel(a, b.t()) == want  # both B layouts
    assert _pick_kernel(a[:, :63], b[:63]) == "pointer"        # rows not 16-byte aligned
    assert _pick_kernel(a.float(), b.float()) == "pointer"     # fp32: the pointer kernel's tiles
    few = "skinny" if want == "tma" else "pointer"             # decode rows: few-row tiles on Hopper
    assert _pick_kernel(a[:16], b) == few and _pick_kernel(a[:1], b.t()) == few
    assert _pick_kernel(a[:17], b) == want


@pytest.mark.parametrize("M", [1, 5, 16])
def test_skinny_kernel_every_epilogue(M):
    # The few-row tiles (forced here; chosen by default on a Hopper GPU for M <= 16) with each epilogue,
    # a K with a ragged tail and an N that is not a multiple of any column block.
    from kernels_ref.matmul import linear

    K, N = 200, 70
    x, w = _randn(M, K, dtype=torch.bfloat16), _randn(N, K, dtype=torch.bfloat16) / K**0.5
    b, r = _randn(N, dtype=torch.bfloat16), _randn(M, N, dtype=torch.bfloat16)
    ref = (x.double() @ w.double().t() + b.double())
    assert_close(linear(x, w, b, kernel="skinny"), ref, TOL[torch.bfloat16])
    assert_close(linear(x, w, b, gelu=True, kernel="skinny"), F.gelu(ref, approximate="tanh"),
                 TOL[torch.bfloat16])
    assert_close(linear(x, w, b, residual=r, kernel="skinny"), ref + r.double(), TOL[torch.bfloat16])
    assert_close(matmul(x, w.t(), kernel="skinny"), x.double() @ w.double().t(), TOL[torch.bfloat16])


def test_tma_launch_key_captures_the_specialization():
    # After a key's first call the TMA kernel's compiled specialization is launched directly
    # (kernels_ref._launch), so the key must change with everything that specialization depends on.
    from kernels_ref.matmul import _tma_flags, _tma_key

    def key(x, b, bias=None, residual=None, gelu=True):
        return _tma_key(x, b, bias, residual, _tma_flags(x, b, bias, gelu, None, residual))

    x, w = _randn(64, 48, dtype=torch.bfloat16), _randn(32, 48, dtype=torch.bfloat16)
    bias = _randn(40, dtype=torch.bfloat16)
    base = key(x, w.t(), bias[:32])
    assert key(_randn(64, 48, dtype=torch.bfloat16), w.t(), bias[:32]) == base   # fresh tensors: same kernel
    assert key(x, w.t(), bias[1:33]) != base                                       # bias not 16-byte aligned
    assert key(x, w.t(), None) != base and key(x, w.t(), bias[:32], gelu=False) != base
    assert key(x[:63], w.t(), bias[:32]) != base                                   # M
    assert key(x, w.t().contiguous(), bias[:32]) != base                           # layout of b
    wide = _randn(64, 64, dtype=torch.bfloat16)
    assert key(wide[:, :48], w.t(), bias[:32]) != base                             # a's row stride
    r = _randn(64, 40, dtype=torch.bfloat16)
    assert key(x, w.t(), bias[:32], r[:, :32]) != key(x, w.t(), bias[:32], r[:, :32].contiguous())
    assert all(not isinstance(part, torch.Tensor) for part in key(x, w.t(), bias[:32], r[:, :32]))


def test_unchecked_descriptor_matches_from_tensor():
    # The bound TMA launch builds its descriptors without TensorDescriptor's checks (its key guarantees
    # them): every field must be what from_tensor gives, the defaulted ones included.
    import dataclasses

    from triton.tools.tensor_descriptor import TensorDescriptor

    from kernels_ref._launch import unchecked_descriptor

    t = _randn(64, 48, dtype=torch.bfloat16)[:, :32]
    fast, checked = unchecked_descriptor(TensorDescriptor, t, [16, 32]), TensorDescriptor.from_tensor(t, [16, 32])
    as_list = lambda v: list(v) if isinstance(v, (list, tuple, torch.Size)) else v  # noqa: E731
    assert fast.base is t
    for f in dataclasses.fields(TensorDescriptor)[1:]:
        assert as_list(getattr(fast, f.name)) == as_list(getattr(checked, f.name)), f.name


def test_untuned_matmul_is_correct():
    a, b = _randn(45, 37, dtype=torch.float32), _randn(37, 70, dtype=torch.float32)
    assert_close(matmul_untuned(a, b), a.double() @ b.double(), TOL[torch.float32])


@pytest.mark.parametrize("fast_gelu", [True, False])
def test_tma_kernel_compiles_for_hopper_without_spills(fast_gelu):
    # The fast path's first config, compiled for sm_90a here without a GPU (course.aot): the fused
    # 128x256 epilogue must not spill and the operand ring + store staging must fit in 227 KB; with the
    # hardware tanh (16-bit outputs on a GPU) and without.
    from triton.tools.tensor_descriptor import TensorDescriptor

    from course.aot import resource_usage
    from kernels_ref import matmul as mm

    M, N, K = 16384, 4096, 4096
    x, w, c = (torch.empty(s, dtype=torch.bfloat16) for s in [(M, K), (N, K), (M, N)])
    cfg = mm._tma_configs()[0]
    meta = dict(cfg.kwargs)
    descs = [TensorDescriptor.from_tensor(t, [16, 16]) for t in (x, w, c)]
    mm._set_block_shapes({"a_desc": descs[0], "b_desc": descs[1], "c_desc": descs[2], "B_KMAJOR": True, **meta})
    usage = resource_usage(mm._matmul_tma_persistent_body, *descs, torch.empty(N, dtype=torch.bfloat16), M, N, K,
                           HAS_BIAS=True, GELU=True, B_KMAJOR=True, NUM_SMS=132, WARP_SPECIALIZE=False,
                           FAST_GELU=fast_gelu, num_warps=cfg.num_warps, num_stages=cfg.num_stages, **meta)
    assert usage["n_spills"] == 0 and usage["n_regs"] <= 255, usage
    assert usage["shared"] <= 227 * 1024, usage


@triton.jit
def _axpb_kernel(X, Y, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(Y + offs, tl.load(X + offs, mask=offs < N) * 2.0 + 1.0, mask=offs < N)


def test_compiling_for_hopper_names_fp_fusion_as_the_runners_compile(monkeypatch):
    # Left to its default, Triton 3.9 warns into the notebook (06) that 3.10 turns fused multiply-add off;
    # the counts course.aot prints are those of the runners' Triton, which fuses: it says so itself.
    import triton.knobs

    from course.aot import compile_for_hopper

    warned = []
    monkeypatch.setattr(triton.knobs, "warn_once", warned.append, raising=False)  # (Triton 3.6 has none: no warning)
    x = torch.ones(16)
    compiled = compile_for_hopper(_axpb_kernel, x, torch.empty(16), 16, BLOCK=16)
    assert not warned and "fma.rn.f32" in compiled.asm["ptx"]


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
@pytest.mark.parametrize("M,N,K", [(4096, 11008, 4096), (999, 1001, 1003), (1000, 1032, 776), (16, 4096, 4096),
                                   (1, 3072, 1024), (7, 1000, 4104)])
def test_linear_bias_gelu_gpu(M, N, K, dtype):
    x, w, b = _randn(M, K, dtype=dtype), _randn(N, K, dtype=dtype) / K**0.5, _randn(N, dtype=dtype)
    ref = linear_bias_gelu_torch(x.double(), w.double(), b.double())
    assert_close(linear_bias_gelu(x, w, b), ref, GPU_TOL[dtype])
    for kernel in ("pointer", "skinny") + (("tma",) if M <= 16 and K % 8 == 0 and N % 8 == 0 else ()):
        assert_close(linear_bias_gelu(x, w, b, kernel=kernel), ref, GPU_TOL[dtype])


@pytest.mark.gpu
@pytest.mark.parametrize("M,N,K", [(1000, 1032, 776), (8192, 8192, 8192), (129, 136, 4104)])
def test_tma_kernel_gpu(M, N, K):
    # Forced onto the TMA path (rows 16-byte aligned): partial tiles in M, N and a K tail, both B layouts.
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("TMA needs Hopper or newer")
    a, b = _randn(M, K, dtype=torch.bfloat16), _randn(K, N, dtype=torch.bfloat16)
    assert_close(matmul(a, b, kernel="tma"), a.double() @ b.double(), GPU_TOL[torch.bfloat16])
    w = _randn(N, K, dtype=torch.bfloat16)
    assert_close(matmul(a, w.t(), kernel="tma"), a.double() @ w.double().t(), GPU_TOL[torch.bfloat16])
    bias = _randn(N, dtype=torch.bfloat16)
    ref = linear_bias_gelu_torch(a.double(), w.double() / K**0.5, bias.double())
    assert_close(linear_bias_gelu(a, w / K**0.5, bias, kernel="tma", warp_specialize=True), ref,
                 GPU_TOL[torch.bfloat16])


@pytest.mark.gpu
def test_tma_bound_launch_gpu():
    # A shape's first call autotunes; later calls launch the bound compiled kernel (kernels_ref._launch)
    # with new descriptors: fresh tensors each call, a misaligned bias (another specialization), a residual.
    from kernels_ref import matmul as mm

    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("TMA needs Hopper or newer")
    M, N, K = 1000, 1032, 776
    mm._TMA_LAUNCHES.clear()  # other tests launched this shape (other dtypes, warp specialization)
    for call in range(3):
        x, w = _randn(M, K, dtype=torch.bfloat16), _randn(N, K, dtype=torch.bfloat16) / K**0.5
        storage = _randn(N + 8, dtype=torch.bfloat16)
        for bias in (storage[:N], storage[1:N + 1]):  # 16-byte aligned, then not
            ref = linear_bias_gelu_torch(x.double(), w.double(), bias.double())
            assert_close(linear_bias_gelu(x, w, bias), ref, GPU_TOL[torch.bfloat16])
            r = _randn(M, N, dtype=torch.bfloat16)
            ref = F.linear(x.double(), w.double(), bias.double()) + r.double()
            assert_close(mm.linear(x, w, bias, residual=r), ref, GPU_TOL[torch.bfloat16])
    keys = [k for k in mm._TMA_LAUNCHES if k[2:5] == (M, K, N)]
    assert len(keys) == 4, keys  # aligned or not, with a residual or not: each its own bound launch


@pytest.mark.gpu
def test_linear_bias_gelu_gpu_hard_values():
    # gelu of the bias alone (x = 0) over [-60, 60]: the bfloat16 TMA path's hardware tanh near saturation,
    # judged elementwise by the course's bfloat16 tolerance against float64 (NaN never passes).
    from measure.tolerance import compare

    N, K = 4096, 64
    bias = torch.linspace(-60, 60, N, device=DEV).to(torch.bfloat16)
    for dtype in (torch.bfloat16, torch.float16):
        x, w = torch.zeros(256, K, device=DEV, dtype=dtype), _randn(N, K, dtype=dtype)
        out = linear_bias_gelu(x, w, bias.to(dtype))
        ok, worst, msg = compare(out, F.gelu(bias.to(dtype).double(), approximate="tanh").expand(256, N))
        assert ok, (dtype, msg)
