"""bias_gelu(x, bias) = gelu(x + bias) with GELU's tanh approximation, one Triton launch.

Cost per element: read x (s bytes), write y (s bytes); the bias row ([N], s bytes each) is read once
per tile and stays in L2, so the fewest bytes are 2*M*N*s (+ N*s). About 10 FLOPs per element: far below
any GPU's ridge point, so the kernel is memory-bound and its only job is to stream at copy bandwidth.

Design: 2-D tiles [BLOCK_M, BLOCK_N] on one grid axis, a row block's column blocks consecutive (so the
programs running together stream whole rows). The bias slice is loaded once per tile and broadcast over the
rows (no per-element modulo); tiles of 4-8K elements give each thread several 16-byte vector loads in
flight. 0.5*(1 + tanh(u)) == sigmoid(2u), so gelu(z) = z / (1 + exp(-2u)): one exp2 and one division,
and it saturates correctly (exp2 -> inf gives -0.0 for very negative z, 0 gives z for large z).
"""
from __future__ import annotations

import course  # noqa: F401  (TRITON_INTERPRET before the kernels below are defined)
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from course.triton_compat import autotune
from measure import reference
from kernels_ref._launch import BoundLaunches, cdiv
from kernels_ref._triton_math import gelu_tanh
from kernels_ref._validate import check_same, check_shape, check_tensor, rows_contiguous



def bias_gelu_torch(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """The definition: GELU (tanh approximation) of x + bias, in x's dtype (float64-capable)."""
    return reference.gelu_tanh(x + bias)


# What the autotuner chooses from: tiles of 4-16K elements, two pipeline stages. Timed one by one on an
# H100 with the tiles launched a row block at a time (probe-configs-gelu-ref-order*-15h22.log), one stage
# was slower than two for five of the six tiles in bfloat16, by up to 1.36x (8x512, 4 warps: the
# autotuner's pick in earlier runs); in float32 all twelve were within 0.95-0.98 of copy speed.
CONFIGS = [
    triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w, num_stages=2)
    for bm, bn, w in [(8, 512, 4), (8, 1024, 8), (16, 512, 8), (4, 1024, 4), (16, 1024, 8), (32, 256, 8)]
]


@autotune(
    configs=CONFIGS,
    key=["M", "N"],
    fallback=triton.Config({"BLOCK_M": 4, "BLOCK_N": 64}, num_warps=4),
)
@triton.jit
def _bias_gelu_kernel(x_ptr, b_ptr, y_ptr, M, N, stride_xm, stride_ym,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # One grid axis, the column blocks of a row block first: programs launched together read whole rows
    # side by side (contiguous DRAM), where column block 0 of consecutive row blocks read 2 KB pieces a row
    # stride apart and ran at 0.94 of copy speed against 1.01 with 1024-column rows (H100,
    # results/h100-2026-11-26/probe-configs-gelu-flat-15h10.log).
    tiles_n = tl.cdiv(N, BLOCK_N)
    pid_m = tl.program_id(0) // tiles_n
    pid_n = tl.program_id(0) % tiles_n
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < M
    col_ok = cols < N
    mask = row_ok[:, None] & col_ok[None, :]
    rows64 = rows.to(tl.int64)  # M*N may exceed 2**31 elements
    # x is streamed once, with the default cache policy: evict_first on it cost 11% on an H200 and gained
    # nothing on an H100 (probes.probe_kernel_configs, results/*-2026-11-26/probe-configs-copy-c*.log); the
    # bias stays in L2 by its own evict_last.
    x = tl.load(x_ptr + rows64[:, None] * stride_xm + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=col_ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
    y = gelu_tanh(x + b[None, :])
    tl.store(y_ptr + rows64[:, None] * stride_ym + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


# The autotuned kernel, launched directly after each specialization's first call (kernels_ref._launch).
_BIAS_GELU = BoundLaunches(_bias_gelu_kernel)


def bias_gelu(x: torch.Tensor, bias: torch.Tensor, *, config: dict | None = None) -> torch.Tensor:
    """gelu(x + bias) for x [M, N], bias [N]; output in x's dtype; computed in fp32.

    ``config``: explicit launch parameters {BLOCK_M, BLOCK_N, num_warps, num_stages} instead of the
    autotuner's choice (probes/probe_kernel_configs.py times them one by one)."""
    check_tensor("x", x, ndim=2)
    check_tensor("bias", bias, ndim=1)
    check_same("bias", bias, "x", x)
    check_shape("bias", bias, (x.shape[1],))
    x = rows_contiguous(x)
    bias = bias.contiguous()
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if x.numel() == 0:
        return y
    grid = lambda meta: (cdiv(M, meta["BLOCK_M"]) * cdiv(N, meta["BLOCK_N"]),)  # noqa: E731
    kernel = _BIAS_GELU if config is None else _bias_gelu_kernel.fn  # .fn: the kernel beneath autotune
    kernel[grid](x, bias, y, M, N, x.stride(0), y.stride(0), **(config or {}))
    return y


def bench_cases(quick: bool = False):
    from kernels_ref.benchmarking import BenchCase, Goal
    from course import DEVICE

    def eager(x, b):
        return F.gelu(x + b, approximate="tanh")

    compiled = torch.compile(eager)
    shapes = [(16384, 4096, torch.bfloat16)] if quick else [
        (16384, 4096, torch.bfloat16), (16384, 4096, torch.float32), (8192, 8192, torch.bfloat16),
        (65536, 1024, torch.bfloat16), (4096, 16384, torch.bfloat16),
    ]
    cases = []
    for M, N, dtype in shapes:
        def make(M=M, N=N, dtype=dtype):
            return (torch.randn(M, N, device=DEVICE, dtype=dtype), torch.randn(N, device=DEVICE, dtype=dtype))

        size = torch.empty((), dtype=dtype).element_size()
        cases.append(BenchCase(
            op="bias_gelu", label=f"{M}x{N} {str(dtype).replace('torch.', '')}", make_inputs=make,
            candidates={"triton": bias_gelu, "eager": eager, "compiled": compiled},
            reference=lambda x, b: bias_gelu_torch(x.double(), b.double()),
            nbytes=(2 * M * N + N) * size,
            goals=[Goal.peak("triton", 0.9), Goal.faster("triton", "eager"), Goal.faster("triton", "compiled")],
        ))
    return cases
