"""RMSNorm over the last dim: forward, backward (weight gradient reduced in a second pass), autograd.Function.

Forward: rstd = 1/sqrt(mean(x^2) + eps), y = x * rstd * w. Bytes: read x, write y (2*M*N*s) + w + rstd.
Backward, with xhat = x * rstd and g = dy * w:
    dx = rstd * (g - xhat * mean(g * xhat)),   dweight = sum over rows of dy * xhat.
Bytes: read x, dy, write dx (3*M*N*s). Same structure as kernels_ref.layer_norm: a persistent first
kernel writes per-program fp32 partial sums [G, N], `column_sum` reduces them (deterministic, no atomics).
"""
from __future__ import annotations

import course  # noqa: F401  (TRITON_INTERPRET before the kernels below are defined)
import torch
import triton
import triton.language as tl

from course.triton_compat import autotune
from kernels_ref._launch import BoundLaunches, cdiv, next_power_of_2
from kernels_ref._validate import check_same, check_shape, check_tensor, rows_contiguous
from kernels_ref.layer_norm import (_check_x_w, _n_programs, _row_configs, _rows_per_program, bench_shapes,
                                    column_sum, row_tile)
from measure.tolerance import GRAD_TOLERANCES


def rms_norm_torch(x, weight, eps: float = 1e-6):
    """The definition: x / sqrt(mean(x^2) + eps) * weight over the last dim (float64-capable)."""
    return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps) * weight


def rms_norm_fwd_torch(x, weight, eps: float = 1e-6):
    """Reference for rms_norm_fwd: (y, rstd [M])."""
    rstd = 1.0 / torch.sqrt((x * x).mean(dim=-1) + eps)
    return x * rstd[:, None] * weight, rstd


def rms_norm_bwd_torch(dy, x, weight, rstd):
    """Reference for rms_norm_bwd, the closed form: (dx, dweight)."""
    xhat = x * rstd[:, None]
    g = dy * weight
    return rstd[:, None] * (g - xhat * (g * xhat).mean(-1, keepdim=True)), (dy * xhat).sum(0)


@autotune(configs=_row_configs(), key=["N", "BLOCK_M", "BLOCK_N"], fallback=triton.Config({}, num_warps=4))
@triton.jit
def _rms_norm_fwd_kernel(x_ptr, w_ptr, y_ptr, rstd_ptr, M, N, stride_xm, stride_ym, eps,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    x, rows, rows64, cols, row_ok, col_ok, mask = row_tile(x_ptr, stride_xm, M, N, BLOCK_M, BLOCK_N)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / N + eps)
    w = tl.load(w_ptr + cols, mask=col_ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
    y = x * rstd[:, None] * w[None, :]
    tl.store(y_ptr + rows64[:, None] * stride_ym + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(rstd_ptr + rows, rstd, mask=row_ok)


@autotune(configs=_row_configs(), key=["N", "BLOCK_M", "BLOCK_N"], fallback=triton.Config({}, num_warps=4))
@triton.jit
def _rms_norm_bwd_dx_kernel(dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, dw_part_ptr, M, N,
                            stride_dym, stride_xm, stride_dxm, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    n_programs = tl.num_programs(0)
    cols = tl.arange(0, BLOCK_N)
    col_ok = cols < N
    w = tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    dw_acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for start in range(pid * BLOCK_M, M, n_programs * BLOCK_M):
        rows = start + tl.arange(0, BLOCK_M)
        row_ok = rows < M
        mask = row_ok[:, None] & col_ok[None, :]
        rows64 = rows.to(tl.int64)
        x = tl.load(x_ptr + rows64[:, None] * stride_xm + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + rows64[:, None] * stride_dym + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(rstd_ptr + rows, mask=row_ok, other=0.0)
        xhat = x * rstd[:, None]
        g = dy * w[None, :]
        c1 = tl.sum(g * xhat, axis=1) / N
        dx = rstd[:, None] * (g - xhat * c1[:, None])
        tl.store(dx_ptr + rows64[:, None] * stride_dxm + cols[None, :], dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw_acc += dy * xhat
    tl.store(dw_part_ptr + pid * N + cols, tl.sum(dw_acc, axis=0), mask=col_ok)


# The kernels, launched directly after each specialization's first call (kernels_ref._launch), as
# LayerNorm's: unbound, the autotuner's and the JIT's per-call Python can outlast the protocol's L2 flush
# (rms_norm_fwd ran 0.57-0.73 of copy by the protocol on one H100 host, results/h100-2026-11-26/bench-15h37.log).
_RMS_NORM_FWD = BoundLaunches(_rms_norm_fwd_kernel)
_RMS_NORM_BWD_DX = BoundLaunches(_rms_norm_bwd_dx_kernel)


def rms_norm_fwd(x, weight, eps: float = 1e-6):
    """RMSNorm of x [M, N] with weight [N]: returns (y in x's dtype, rstd [M] fp32)."""
    _check_x_w(x, weight)
    x, weight = rows_contiguous(x), weight.contiguous()
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    rstd = torch.empty(M, dtype=torch.float32, device=x.device)
    if M == 0:
        return y, rstd
    BLOCK_N = next_power_of_2(N)
    BLOCK_M = _rows_per_program(BLOCK_N, M)
    _RMS_NORM_FWD[(cdiv(M, BLOCK_M),)](
        x, weight, y, rstd, M, N, x.stride(0), y.stride(0), float(eps), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
    return y, rstd


def rms_norm_bwd(dy, x, weight, rstd):
    """Gradients of RMSNorm: (dx like x, dweight like weight), from forward's rstd."""
    _check_x_w(x, weight)
    check_tensor("dy", dy, ndim=2)
    check_same("dy", dy, "x", x)
    check_shape("dy", dy, tuple(x.shape))
    M, N = x.shape
    check_tensor("rstd", rstd, ndim=1, dtypes=(torch.float32,), device=x.device)
    check_shape("rstd", rstd, (M,))
    dy, x, weight, rstd = rows_contiguous(dy), rows_contiguous(x), weight.contiguous(), rstd.contiguous()
    dx = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M == 0:
        return dx, torch.zeros_like(weight)
    BLOCK_N = next_power_of_2(N)
    BLOCK_M = _rows_per_program(BLOCK_N, M)
    G = _n_programs(x, M, BLOCK_M)
    dw_part = torch.empty((G, N), dtype=torch.float32, device=x.device)
    _RMS_NORM_BWD_DX[(G,)](dy, x, weight, rstd, dx, dw_part, M, N, dy.stride(0), x.stride(0),
                                  dx.stride(0), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
    return dx, column_sum(dw_part, weight.dtype)


class RMSNormFunction(torch.autograd.Function):
    """Autograd wrapper: forward saves x, weight, rstd; backward calls rms_norm_bwd."""

    @staticmethod
    def forward(ctx, x, weight, eps):
        shape = x.shape
        y, rstd = rms_norm_fwd(x.reshape(-1, shape[-1]), weight, eps)
        ctx.save_for_backward(x, weight, rstd)
        return y.reshape(shape)

    @staticmethod
    def backward(ctx, dy):
        x, weight, rstd = ctx.saved_tensors
        n = x.shape[-1]
        dx, dw = rms_norm_bwd(dy.reshape(-1, n), x.reshape(-1, n), weight, rstd)
        return dx.reshape(x.shape), dw, None


def rms_norm(x, weight, eps: float = 1e-6):
    """Differentiable RMSNorm over the last dim of x (any leading dims), Triton forward and backward."""
    return RMSNormFunction.apply(x, weight, eps)


def bench_cases(quick: bool = False):
    from kernels_ref.benchmarking import BenchCase, Goal
    from course import DEVICE

    eps = 1e-6

    def eager_fwd(x, w, dy):  # dy unused: forward candidates share the case's inputs (x, w, dy)
        # Eager RMSNorm as models write it (F.rms_norm is not a single fused kernel in every torch).
        xf = x.float()
        rstd = torch.rsqrt(xf.pow(2).mean(-1) + eps)
        return (xf * rstd[:, None]).to(x.dtype) * w, rstd

    compiled_fwd = torch.compile(eager_fwd)

    def make_graph(x, w):
        xg = x.detach().requires_grad_()
        wg = w.detach().requires_grad_()
        return xg, wg, eager_fwd(xg, wg, None)[0]

    def eager_bwd(x, w, dy, rstd, graph):
        xg, wg, y = graph
        return torch.autograd.grad(y, (xg, wg), dy, retain_graph=True)

    @torch.compile
    def compiled_bwd(x, w, dy, rstd, graph):
        dx, dw = rms_norm_bwd_torch(dy.float(), x.float(), w.float(), rstd)
        return dx.to(x.dtype), dw.to(w.dtype)

    cases = []
    for M, N, dtype in bench_shapes(quick):
        def make(M=M, N=N, dtype=dtype):
            x = torch.randn(M, N, device=DEVICE, dtype=dtype)
            w = 1 + 0.1 * torch.randn(N, device=DEVICE, dtype=dtype)
            return x, w, torch.randn(M, N, device=DEVICE, dtype=dtype)

        def make_bwd(make=make):
            x, w, dy = make()
            _, rstd = rms_norm_fwd(x, w, eps)
            return x, w, dy, rstd, make_graph(x, w)

        size = torch.empty((), dtype=dtype).element_size()
        swept = dtype == torch.bfloat16  # the bf16 shapes are the sweep over N (4096 among them)
        common = dict(label=f"{M}x{N} {str(dtype).replace('torch.', '')}",
                      sweep="N" if swept else None, sweep_value=N if swept else None)
        cases.append(BenchCase(
            op="rms_norm_fwd", make_inputs=make, **common,
            reference=lambda x, w, dy: rms_norm_fwd_torch(x.double(), w.double(), eps),
            candidates={"triton": lambda x, w, dy: rms_norm_fwd(x, w, eps), "eager": eager_fwd,
                        "compiled": compiled_fwd},
            nbytes=2 * M * N * size + N * size + 4 * M,
            goals=[Goal.peak("triton", 0.9), Goal.faster("triton", "eager"), Goal.faster("triton", "compiled")],
        ))
        cases.append(BenchCase(
            op="rms_norm_bwd", make_inputs=make_bwd, **common,
            reference=lambda x, w, dy, rstd, graph: rms_norm_bwd_torch(
                dy.double(), x.double(), w.double(), rms_norm_fwd_torch(x.double(), w.double(), eps)[1]),
            candidates={"triton": lambda x, w, dy, rstd, graph: rms_norm_bwd(dy, x, w, rstd),
                        "eager": eager_bwd, "compiled": compiled_bwd},
            nbytes=3 * M * N * size + 2 * N * size + 4 * M,
            goals=[Goal.faster("triton", "eager", 1.5)],
            # dweight sums M rows: float32 is held to the gradient tolerance (16384 rows on an H200 put one
            # dweight value 7.6e-5 off, past the plain float32 bound), as the kernel tests and the grader do.
            tolerances=GRAD_TOLERANCES,
        ))
    return cases
