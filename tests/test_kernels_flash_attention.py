"""kernels_ref.flash_attention: forward (o, lse), backward (dq, dk, dv) and the autograd.Function against
float64 references.

CPU (interpreter): forward tiles 32x16, dK/dV tiles 16 queries x 32 keys, dQ tiles 32x16, so S = 17, 64
and 100 cross full tiles, diagonal (causal) tiles and a ragged last tile, and S = 64 takes the EVEN
(no sequence-end mask) paths; S = 1 is a single ragged tile. bf16/fp16 inputs run with dots upcast by the
interpreter, so only the kernel's own roundings (P and dS to the input dtype, outputs) differ.
"""
import math

import course
import pytest
import torch

from kernels_ref.flash_attention import (
    FlashAttentionFunction,
    attention_torch,
    flash_attention,
    flash_attention_bwd,
    flash_attention_fwd,
    naive_attention,
)

from sm90 import compile_sm90 as _compile_sm90

DEV = course.DEVICE



# Error allowed relative to max|ref| per dtype: outputs pass through one rounding of P (to the input
# dtype) before P @ V, gradients through P and dS; fp32 on a GPU uses TF32 dots.
OUT_TOL = {torch.float32: 2e-5, torch.float16: 3e-3, torch.bfloat16: 2e-2}
GRAD_TOL = {torch.float32: 1e-4, torch.float16: 6e-3, torch.bfloat16: 4e-2}
# Full-size GPU checks are normwise, ||out - ref|| / ||ref||: causal gradients span a wide range (the first
# keys collect gradient from every query, dq of the first query is exactly 0), so an elementwise bound
# mostly measures that range. Measured on an H100 (triton 3.6, S=1024, D=64, every autotune config,
# 2026-11-22): bf16 o 2.0e-3, dq 2.5e-3, dk 2.4e-3, dv 2.3e-3, causal or not; fp16 has 3 more mantissa bits.
GPU_NORMWISE_TOL = {torch.float32: 1e-3, torch.float16: 2e-3, torch.bfloat16: 1e-2}
LSE_ATOL = 1e-4  # lse is float32 from fp32 scores whatever the input dtype

SHAPES = [(1, 1, 1, 16), (2, 1, 17, 16), (1, 2, 64, 64), (1, 1, 100, 64), (2, 2, 100, 16)]


def assert_close(out, ref, tol, what=""):
    assert out.shape == ref.shape, (what, out.shape, ref.shape)
    out = out.double()
    assert not torch.isnan(out).any(), f"{what}: NaN in output"
    # An all-zero reference (S = 1: dq = dk = 0 exactly) is judged against a floor of 0.1, still well below
    # the O(1) values of every other case: the kernel's dq there is (dP - delta) K, the fp32 rounding of two
    # 16-term dot products of O(1) values times O(1) (up to ~1e-6, which a floor of 1e-2 failed on some seeds),
    # while a wrong gradient is O(1).
    scale = ref.abs().max().clamp_min(0.1)
    err = ((out - ref).abs() - tol * ref.abs()).max() / scale
    assert err <= tol, f"{what}: max error {err.item():.3g} (relative to max|ref| {scale.item():.3g}) > {tol}"


def assert_normwise(out, ref, tol, what=""):
    assert out.shape == ref.shape, (what, out.shape, ref.shape)
    assert not torch.isnan(out).any(), f"{what}: NaN in output"
    err = ((out.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()
    assert err <= tol, f"{what}: normwise relative error {err:.3g} > {tol}"


def _qkv(B, H, S, D, dtype):
    return [torch.randn(B, H, S, D, device=DEV, dtype=dtype) for _ in range(3)]


def _ref(q, k, v, causal, sm_scale=None, do=None):
    """float64 (o, lse) and, with do, the float64 gradients by autograd of the reference."""
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    o, lse = attention_torch(*leaves, causal=causal, sm_scale=sm_scale)
    grads = torch.autograd.grad(o, leaves, do.double()) if do is not None else None
    return o.detach(), lse.detach(), grads


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("B,H,S,D", SHAPES)
def test_forward(B, H, S, D, causal, dtype):
    q, k, v = _qkv(B, H, S, D, dtype)
    saved = [t.clone() for t in (q, k, v)]
    o, lse = flash_attention_fwd(q, k, v, causal, None)
    assert o.shape == q.shape and o.dtype == dtype
    assert lse.shape == (B, H, S) and lse.dtype == torch.float32
    ro, rlse, _ = _ref(q, k, v, causal)
    assert_close(o, ro, OUT_TOL[dtype], "o")
    torch.testing.assert_close(lse.double(), rlse, atol=LSE_ATOL, rtol=0)
    assert all(torch.equal(t, s) for t, s in zip((q, k, v), saved)), "inputs were modified"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("B,H,S,D", SHAPES)
def test_autograd_function(B, H, S, D, causal, dtype):
    q, k, v = [t.requires_grad_() for t in _qkv(B, H, S, D, dtype)]
    do = torch.randn(B, H, S, D, device=DEV, dtype=dtype)
    o = flash_attention(q, k, v, causal=causal)
    o.backward(do)
    ro, _, (dq, dk, dv) = _ref(q, k, v, causal, do=do)
    assert_close(o.detach(), ro, OUT_TOL[dtype], "o")
    for name, got, want in (("dq", q.grad, dq), ("dk", k.grad, dk), ("dv", v.grad, dv)):
        assert got.dtype == dtype
        assert_close(got, want, GRAD_TOL[dtype], name)


@pytest.mark.parametrize("causal", [False, True])
def test_backward_entry_point_fp16_and_scale(causal):
    # flash_attention_bwd called directly (the exercise's signature), with a non-default sm_scale.
    B, H, S, D, scale = 1, 2, 37, 32, 0.3
    q, k, v = _qkv(B, H, S, D, torch.float16)
    do = torch.randn_like(q)
    o, lse = flash_attention_fwd(q, k, v, causal, scale)
    saved = [t.clone() for t in (do, q, k, v, o, lse)]
    dq, dk, dv = flash_attention_bwd(do, q, k, v, o, lse, causal, scale)
    ro, rlse, grads = _ref(q, k, v, causal, sm_scale=scale, do=do)
    assert_close(o, ro, OUT_TOL[torch.float16], "o")
    torch.testing.assert_close(lse.double(), rlse, atol=LSE_ATOL, rtol=0)
    for name, got, want in zip(("dq", "dk", "dv"), (dq, dk, dv), grads):
        assert_close(got, want, GRAD_TOL[torch.float16], name)
    assert all(torch.equal(t, s) for t, s in zip((do, q, k, v, o, lse), saved)), "inputs were modified"


def test_non_contiguous_inputs():
    # q from a [B, S, H, D] layout (heads transposed in), k with head_dim not the unit stride,
    # v a slice of a wider tensor, do transposed too: all read in place through their strides.
    B, H, S, D = 2, 2, 45, 16
    q = torch.randn(B, S, H, D, device=DEV).transpose(1, 2)
    k = torch.randn(B, H, D, S, device=DEV).transpose(2, 3)
    v = torch.randn(B, H, S, 2 * D, device=DEV)[..., ::2]
    do = torch.randn(B, S, H, D, device=DEV).transpose(1, 2)
    assert not any(t.is_contiguous() for t in (q, k, v, do))
    for causal in (False, True):
        o, lse = flash_attention_fwd(q, k, v, causal, None)
        dq, dk, dv = flash_attention_bwd(do, q, k, v, o, lse, causal, None)
        ro, rlse, grads = _ref(q, k, v, causal, do=do)
        assert_close(o, ro, OUT_TOL[torch.float32], "o")
        torch.testing.assert_close(lse.double(), rlse, atol=LSE_ATOL, rtol=0)
        for name, got, want in zip(("dq", "dk", "dv"), (dq, dk, dv), grads):
            assert_close(got, want, GRAD_TOL[torch.float32], name)


def test_outputs_fully_written(monkeypatch):
    # Every fresh float allocation starts as NaN: a row, tile or gradient the kernels skip shows up.
    real_empty, real_empty_like = torch.empty, torch.empty_like

    def poison(t):
        return t.fill_(float("nan")) if t.is_floating_point() else t

    monkeypatch.setattr(torch, "empty", lambda *a, **kw: poison(real_empty(*a, **kw)))
    monkeypatch.setattr(torch, "empty_like", lambda *a, **kw: poison(real_empty_like(*a, **kw)))
    B, H, S, D = 1, 2, 50, 16
    q, k, v = _qkv(B, H, S, D, torch.float32)
    do = torch.randn_like(q)
    for causal in (False, True):
        o, lse = flash_attention_fwd(q, k, v, causal, None)
        grads = flash_attention_bwd(do, q, k, v, o, lse, causal, None)
        ro, rlse, rgrads = _ref(q, k, v, causal, do=do)
        assert_close(o, ro, OUT_TOL[torch.float32], "o")
        assert not torch.isnan(lse).any()
        torch.testing.assert_close(lse.double(), rlse, atol=LSE_ATOL, rtol=0)
        for name, got, want in zip(("dq", "dk", "dv"), grads, rgrads):
            assert_close(got, want, GRAD_TOL[torch.float32], name)


def test_large_scores_stay_finite():
    # Scores of magnitude ~1e3: a softmax without the running max would overflow exp.
    B, H, S, D = 1, 1, 40, 16
    q, k, v = _qkv(B, H, S, D, torch.float32)
    q = q * 30
    k = k * 30
    for causal in (False, True):
        o, lse = flash_attention_fwd(q, k, v, causal, None)
        ro, rlse, _ = _ref(q, k, v, causal)
        assert torch.isfinite(o).all() and torch.isfinite(lse).all()
        assert_close(o, ro, 1e-4, "o")
        torch.testing.assert_close(lse.double(), rlse, atol=1e-3, rtol=1e-6)


def test_reference_matches_definition():
    q, k, v = [torch.randn(1, 2, 9, 4, dtype=torch.float64) for _ in range(3)]
    for causal in (False, True):
        s = q @ k.transpose(-2, -1) / math.sqrt(4)
        if causal:
            s = s + torch.full((9, 9), float("-inf"), dtype=torch.float64).triu(1)
        p = torch.softmax(s, -1)
        o, lse = attention_torch(q, k, v, causal)
        torch.testing.assert_close(o, p @ v)
        torch.testing.assert_close(lse, torch.logsumexp(s, -1))
        torch.testing.assert_close(naive_attention(q, k, v, causal), p @ v)


def test_bad_inputs_raise():
    q, k, v = _qkv(1, 1, 8, 16, torch.float32)
    with pytest.raises(ValueError, match="power of two"):
        flash_attention_fwd(*_qkv(1, 1, 8, 48, torch.float32), False, None)
    with pytest.raises(ValueError, match="4-D"):
        flash_attention_fwd(q[0], k[0], v[0], False, None)
    with pytest.raises(ValueError, match="shape"):
        flash_attention_fwd(q, k[:, :, :4], v, False, None)
    with pytest.raises(TypeError, match="dtype"):
        flash_attention_fwd(q.double(), k.double(), v.double(), False, None)
    with pytest.raises(ValueError, match="float16"):
        flash_attention_fwd(q, k.half(), v, False, None)
    o, lse = flash_attention_fwd(q, k, v, False, None)
    with pytest.raises(ValueError, match="lse"):
        flash_attention_bwd(torch.randn_like(o), q, k, v, o, lse[:, :, :3], False, None)


def test_bench_cases_are_well_formed():
    from kernels_ref.benchmarking import BenchCase
    from kernels_ref.flash_attention import bench_cases

    for quick in (True, False):
        cases = bench_cases(quick)
        assert cases and all(isinstance(c, BenchCase) for c in cases)
        ops = {c.op for c in cases}
        assert {"flash_attention_fwd", "flash_attention_bwd", "flash_attention_memory"} <= ops
        assert all("sdpa_flash" in c.candidates for c in cases)
        assert any(c.metric == "peak_memory" for c in cases)
    assert any(c.sweep == "S" for c in bench_cases(False))


def test_bench_reference_is_chunked_float64():
    # The suite's reference works a few heads at a time; it must equal the plain one.
    from kernels_ref.flash_attention import _reference

    q, k, v = _qkv(2, 3, 20, 16, torch.float32)
    do = torch.randn_like(q)
    for causal in (False, True):
        o = _reference(q, k, v, causal)
        ro, _, grads = _ref(q, k, v, causal, do=do)
        assert o.dtype == torch.float64
        torch.testing.assert_close(o, ro)
        for got, want in zip(_reference(q, k, v, causal, do), grads):
            torch.testing.assert_close(got, want)


def test_bench_case_wiring_runs_on_tiny_shapes():
    # The GPU suite's cases, shrunk: triton and the naive candidate agree with the chunked float64
    # reference through the suite's own checker (stub timer and memory meter; SDPA's flash backend may
    # not exist on a CPU, so its rows are not asserted).
    from kernels_ref.benchmarking import Ceilings, run_case
    from kernels_ref.flash_attention import attention_bwd_case, attention_fwd_case, attention_memory_case

    cases = [attention_fwd_case(1, 2, 20, 16, causal, torch.float32, naive=True) for causal in (False, True)]
    cases += [attention_bwd_case(1, 2, 20, 16, causal, torch.float32, naive=True) for causal in (False, True)]
    cases.append(attention_memory_case(1, 1, 24, 16, torch.float32))
    for case in cases:
        rows = run_case(case, Ceilings(copy_gbps=1.0, matmul_tflops=1.0), timer=lambda fn: 1.0,
                        peak_memory=lambda fn: 1)
        by_name = {r.candidate: r for r in rows}
        for name in ("triton", "eager"):
            assert by_name[name].correct, (case.op, case.label, name, by_name[name].note)
            assert by_name[name].ms == 1.0


@pytest.mark.parametrize("kernel", ["_fwd_kernel", "_bwd_dkdv_kernel", "_bwd_dq_kernel"])
def test_compiles_for_hopper_with_wgmma(kernel):
    # No GPU here, but Triton can compile for sm_90 ahead of time: the first autotune config of each
    # kernel at head_dim 128 must lower to wgmma with cp.async pipelining and fit in 227 KB of shared memory.
    info = _compile_sm90("kernels_ref.flash_attention", kernel, 128)
    assert info["wgmma"] and info["cp_async"], info
    assert info["shared"] <= 227 * 1024, info


# --------------------------------------------------------------------------------------- GPU, full size

@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("B,H,S,D", [(2, 8, 1024, 128), (2, 8, 1024, 64), (1, 4, 1000, 128), (3, 2, 333, 64)])
def test_forward_backward_gpu(B, H, S, D, causal, dtype):
    q, k, v = [t.requires_grad_() for t in _qkv(B, H, S, D, dtype)]
    do = torch.randn_like(q)
    o, lse = flash_attention_fwd(q.detach(), k.detach(), v.detach(), causal, None)
    flash_attention(q, k, v, causal).backward(do)
    ro, rlse, grads = _ref(q, k, v, causal, do=do)
    assert_normwise(o, ro, GPU_NORMWISE_TOL[dtype], "o")
    torch.testing.assert_close(lse.double(), rlse, atol=1e-3, rtol=0)
    for name, got, want in zip(("dq", "dk", "dv"), (q.grad, k.grad, v.grad), grads):
        assert_normwise(got, want, GPU_NORMWISE_TOL[dtype], name)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("B,H,S,D", [(2, 2, 100, 16), (1, 2, 64, 32)])
def test_forward_with_tma_key_and_value_tiles(B, H, S, D, causal):
    # Whole key tiles by TMA from the [B*H*S, D] views, the ragged last one (S = 100) by pointers: a tile
    # read past a head's S would be the next head's keys, and only a wrong output would show it.
    q, k, v = _qkv(B, H, S, D, torch.bfloat16)
    o, lse = flash_attention_fwd(q, k, v, causal, None, kernel="tma")
    ro, rlse, _ = _ref(q, k, v, causal)
    assert_close(o, ro, OUT_TOL[torch.bfloat16], "o")
    torch.testing.assert_close(lse.double(), rlse, atol=LSE_ATOL, rtol=0)


@pytest.mark.parametrize("kernel", ["pointer", "tma"])
@pytest.mark.parametrize("causal", [False, True])
def test_forward_with_a_negative_scale(causal, kernel):
    # Whole tiles take the row max of the raw scores and scale it once, which holds only for a scale >= 0:
    # a negative one must take the other path (its largest scaled score is the smallest raw one).
    q, k, v = _qkv(1, 2, 64, 16, torch.bfloat16)
    o, lse = flash_attention_fwd(q, k, v, causal, -0.3, kernel=kernel)
    ro, rlse, _ = _ref(q, k, v, causal, sm_scale=-0.3)
    assert_close(o, ro, OUT_TOL[torch.bfloat16], "o")
    torch.testing.assert_close(lse.double(), rlse, atol=LSE_ATOL, rtol=0)


def test_without_a_gpu_the_default_is_pointer_loads():
    from kernels_ref.flash_attention import _tma_views

    q, k, v = _qkv(1, 2, 32, 128, torch.bfloat16)
    assert _tma_views(None, k, v) is None and _tma_views("tma", k, v) is not None
    assert _tma_views("pointer", k, v) is None


def test_tma_forward_refuses_what_it_cannot_read():
    q, k, v = _qkv(1, 2, 32, 16, torch.bfloat16)
    with pytest.raises(ValueError, match="kernel must be"):
        flash_attention_fwd(q, k, v, kernel="wgmma")
    with pytest.raises(ValueError, match="16-bit"):
        flash_attention_fwd(*(t.float() for t in (q, k, v)), kernel="tma")
    heads_inside = [t.transpose(1, 2).contiguous().transpose(1, 2) for t in (q, k, v)]  # [B, S, H, D] memory
    with pytest.raises(ValueError, match="layouts"):
        flash_attention_fwd(*heads_inside, kernel="tma")
    o, _ = flash_attention_fwd(*heads_inside, kernel="pointer")  # the pointer kernel reads any strides
    assert_close(o, _ref(q, k, v, False)[0], OUT_TOL[torch.bfloat16], "o")


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("S", [1000, 1024])
def test_tma_forward_gpu(S, causal):
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("TMA needs a Hopper or newer GPU")
    q, k, v = _qkv(2, 4, S, 128, torch.bfloat16)
    o, lse = flash_attention_fwd(q, k, v, causal, None, kernel="tma")
    ro, rlse, _ = _ref(q, k, v, causal)
    assert_normwise(o, ro, GPU_NORMWISE_TOL[torch.bfloat16], "o")
    torch.testing.assert_close(lse.double(), rlse, atol=1e-3, rtol=0)
    po, plse = flash_attention_fwd(q, k, v, causal, None, kernel="pointer")
    assert_normwise(o, po.double(), GPU_NORMWISE_TOL[torch.bfloat16], "o vs the pointer kernel")
    from kernels_ref.flash_attention import _tma_views

    def use_tma(kernel, k, v):
        return _tma_views(kernel, k, v) is not None

    assert use_tma(None, k, v) and not use_tma(None, k[..., :64], v[..., :64])  # TMA by default from D=128
    assert not use_tma(None, k.transpose(1, 2).contiguous().transpose(1, 2), v)  # a layout it cannot view


@pytest.mark.gpu
def test_deterministic_backward_gpu():
    q, k, v = _qkv(2, 4, 777, 64, torch.bfloat16)
    do = torch.randn_like(q)
    o, lse = flash_attention_fwd(q, k, v, True, None)
    first = flash_attention_bwd(do, q, k, v, o, lse, True, None)
    second = flash_attention_bwd(do, q, k, v, o, lse, True, None)
    assert all(torch.equal(a, b) for a, b in zip(first, second)), "the two-kernel backward must be bitwise repeatable"


@pytest.mark.gpu
def test_memory_is_linear_in_sequence_gpu():
    # Extra memory of forward + backward: O(S) (o, lse, delta, grads), never an S x S matrix.
    B, H, S, D = 1, 8, 8192, 64
    q, k, v = _qkv(B, H, S, D, torch.bfloat16)
    do = torch.randn_like(q)
    # Warm up first: autotuning (first call per shape) allocates do_bench's L2-flush buffer.
    o, lse = flash_attention_fwd(q, k, v, False, None)
    grads = flash_attention_bwd(do, q, k, v, o, lse, False, None)
    del o, lse, grads
    # Warm-up first: autotuning's first call allocates do_bench's 256 MB L2-flush buffer.
    flash_attention_bwd(do, q, k, v, *flash_attention_fwd(q, k, v, False, None), False, None)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    o, lse = flash_attention_fwd(q, k, v, False, None)
    grads = flash_attention_bwd(do, q, k, v, o, lse, False, None)
    torch.cuda.synchronize()
    extra = torch.cuda.max_memory_allocated() - before
    per_tensor = q.numel() * q.element_size()
    # o + dq + dk + dv (4 tensors like q) + lse + delta (4 bytes per row each), plus slack for the allocator.
    assert extra <= 4 * per_tensor + 2 * 4 * B * H * S + 2**21, extra
    assert extra < B * H * S * S * 2 // 10  # an S x S bf16 matrix would be 1 GiB here
    del grads
