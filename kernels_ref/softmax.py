"""Row softmax over the last dim of a 2-D tensor: `softmax` (a row fits one block) and `online_softmax`
(any row length, running max and sum).

Bytes: the fewest a softmax can move is read once + write once, 2*M*N*s. `softmax` does exactly that:
each row is loaded into registers once, max, exp, sum and the division happen there, the row is stored
once. FLOPs are ~5 per element, so both kernels are memory-bound.

`online_softmax` cannot hold a row: pass 1 streams the row keeping, per lane, a running max m and a
running sum s rescaled by exp(m_old - m_new) when the max grows (no cross-lane reduction inside the loop);
the lanes are combined once at the end; pass 2 reads the row again and writes exp(x - m) / s. That is
3*M*N*s bytes from DRAM in the worst case; on a GPU the second read of a row usually hits L2 (a 64K fp32
row is 256 KB, and only a few hundred rows are in flight at once).

-inf entries: they contribute exp(-inf) = 0. A row that is entirely -inf has no defined softmax: both
kernels return NaN for every element of such a row, as torch.softmax does.
"""
from __future__ import annotations

import course  # noqa: F401  (TRITON_INTERPRET before the kernels below are defined)
import torch
import triton
import triton.language as tl

from course.triton_compat import autotune
from kernels_ref._launch import BoundLaunches, cdiv, next_power_of_2
from kernels_ref._triton_math import LOG2E
from kernels_ref._validate import check_tensor, rows_contiguous

# A row up to this many elements is held in registers by `softmax` (64K fp32 = 256 KB per program,
# 32 warps -> 64 values per thread). Longer rows need `online_softmax`.
MAX_FUSED_N = 65536


def softmax_torch(x: torch.Tensor) -> torch.Tensor:
    """The definition: numerically stable softmax over the last dim (float64-capable)."""
    m = x.amax(dim=-1, keepdim=True)
    e = torch.exp(x - m)
    return e / e.sum(dim=-1, keepdim=True)


def _warps_configs():
    return [triton.Config({}, num_warps=w, num_stages=s) for w in (4, 8, 16, 32) for s in (1, 2)]


@autotune(configs=_warps_configs(), key=["N", "BLOCK_M", "BLOCK_N"], fallback=triton.Config({}, num_warps=4))
@triton.jit
def _softmax_kernel(x_ptr, y_ptr, M, N, stride_xm, stride_ym, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # BLOCK_M rows per program: short rows (N=256) would leave a program with too little to stream.
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    rows64 = rows.to(tl.int64)
    # The default cache policy: evict_first on x ran 1-4% slower on an H100 and an H200
    # (probes.probe_kernel_configs, results/*-2026-11-26/probe-configs-copy-c*.log).
    x = tl.load(x_ptr + rows64[:, None] * stride_xm + cols[None, :], mask=mask, other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=1)
    e = tl.exp2((x - m[:, None]) * LOG2E)  # an all -inf row gives nan here, like torch
    s = tl.sum(e, axis=1)
    y = e / s[:, None]
    tl.store(y_ptr + rows64[:, None] * stride_ym + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


def _rows_per_program(block_n: int, m: int) -> int:
    # Aim for ~4K elements per program so short rows still give each thread 16-byte vectors in flight.
    return max(1, min(4096 // block_n, next_power_of_2(m), 64))


def _check(x: torch.Tensor) -> torch.Tensor:
    check_tensor("x", x, ndim=2)
    return rows_contiguous(x)


# The autotuned kernels, launched directly after each specialization's first call (kernels_ref._launch).
_SOFTMAX = BoundLaunches(_softmax_kernel)


def softmax(x: torch.Tensor, *, config: dict | None = None) -> torch.Tensor:
    """Row softmax of x [M, N] (N <= 65536) in one launch, each row read once and written once.

    ``config``: explicit launch parameters {BLOCK_M (rows per program), num_warps, num_stages} instead of
    the heuristic and the autotuner's choice (probes/probe_kernel_configs.py times them one by one)."""
    x = _check(x)
    M, N = x.shape
    if N > MAX_FUSED_N:
        raise ValueError(f"softmax holds a row in one block: N={N} > {MAX_FUSED_N}; use online_softmax")
    y = torch.empty_like(x, memory_format=torch.contiguous_format)
    if x.numel() == 0:
        return y
    BLOCK_N = next_power_of_2(N)
    meta = {"BLOCK_M": _rows_per_program(BLOCK_N, M), **(config or {})}
    kernel = _SOFTMAX if config is None else _softmax_kernel.fn  # .fn: the kernel beneath autotune
    kernel[(cdiv(M, meta["BLOCK_M"]),)](x, y, M, N, x.stride(0), y.stride(0), BLOCK_N=BLOCK_N, **meta)
    return y


@triton.jit
def online_max_sum(m_lane, s_lane, x):
    """One step of the online softmax, per lane: fold the block x into the running max m and the running
    sum s of exp(x - m), rescaling s by exp(m_old - m_new) when the max grows. Shared with cross_entropy."""
    m_new = tl.maximum(m_lane, x)
    # A lane that has seen only -inf keeps m = -inf; subtracting 0 instead avoids -inf - -inf = nan.
    m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)
    # Subtract before scaling by log2(e): x*log2e first would round away digits of large |x|.
    s_lane = s_lane * tl.exp2((m_lane - m_safe) * LOG2E) + tl.exp2((x - m_safe) * LOG2E)
    return m_new, s_lane


@triton.jit
def online_combine(m_lane, s_lane):
    """The row's max m and sum of exp(x - m) from the per-lane running values (an all -inf row: nan sum)."""
    m = tl.max(m_lane, axis=0)
    return m, tl.sum(s_lane * tl.exp2((m_lane - m) * LOG2E), axis=0)


@triton.jit
def row_max_and_sum(row_ptr, n, BLOCK: tl.constexpr):
    """(m, s) of one row of n values: its max and the sum of exp(x - m), one read of the row in blocks,
    per-lane running max and rescaled sum (exp(d) computed as exp2(d*log2e)). Pass 1 of the online
    softmax, and cross_entropy's log-sum-exp; lanes that saw only padding stay -inf / 0."""
    cols = tl.arange(0, BLOCK)
    m_lane = tl.full([BLOCK], -float("inf"), tl.float32)
    s_lane = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n, BLOCK):
        offs = start + cols
        x = tl.load(row_ptr + offs, mask=offs < n, other=-float("inf")).to(tl.float32)
        m_lane, s_lane = online_max_sum(m_lane, s_lane, x)
    return online_combine(m_lane, s_lane)


@autotune(
    configs=[triton.Config({"BLOCK_N": bn}, num_warps=w, num_stages=s)
             for bn, w in [(2048, 4), (4096, 8), (8192, 8), (8192, 16), (16384, 16)] for s in (2, 3)],
    key=["N"],
    fallback=triton.Config({"BLOCK_N": 64}, num_warps=4),
)
@triton.jit
def _online_softmax_kernel(x_ptr, y_ptr, N, stride_xm, stride_ym, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_xm
    y_row = y_ptr + row * stride_ym
    cols = tl.arange(0, BLOCK_N)
    m, s = row_max_and_sum(x_row, N, BLOCK_N)  # pass 1; an all -inf row: m = -inf -> nan, like torch
    inv_s = 1.0 / s
    # Pass 2: normalize. The row was just read; on a GPU this re-read is mostly served by L2.
    for start in range(0, N, BLOCK_N):
        offs = start + cols
        x = tl.load(x_row + offs, mask=offs < N, other=-float("inf"), eviction_policy="evict_first")
        y = tl.exp2((x.to(tl.float32) - m) * LOG2E) * inv_s
        tl.store(y_row + offs, y.to(y_ptr.dtype.element_ty), mask=offs < N)


_ONLINE_SOFTMAX = BoundLaunches(_online_softmax_kernel)


def online_softmax(x: torch.Tensor) -> torch.Tensor:
    """Row softmax of x [M, N] for any N, one launch: one program per row, looping over blocks."""
    x = _check(x)
    M, N = x.shape
    y = torch.empty_like(x, memory_format=torch.contiguous_format)
    if x.numel() == 0:
        return y
    _ONLINE_SOFTMAX[(M,)](x, y, N, x.stride(0), y.stride(0))
    return y


def bench_cases(quick: bool = False):
    from kernels_ref.benchmarking import BenchCase, Goal
    from course import DEVICE

    def eager(x):
        return torch.softmax(x, dim=-1)

    compiled = torch.compile(eager)
    ref = lambda x: softmax_torch(x.double())  # noqa: E731
    cases = []

    def case(op, fn, M, N, dtype, sweep):
        def make():
            return (torch.randn(M, N, device=DEVICE, dtype=dtype),)
        size = torch.empty((), dtype=dtype).element_size()
        goals = [Goal.peak("triton", 0.9), Goal.faster("triton", "eager"), Goal.faster("triton", "compiled")]
        if op == "online_softmax":  # two reads per row: no copy-bandwidth goal, only "beat PyTorch"
            goals = goals[1:]
        return BenchCase(op=op, label=f"{M}x{N} {str(dtype).replace('torch.', '')}", make_inputs=make,
                         candidates={"triton": fn, "eager": eager, "compiled": compiled}, reference=ref,
                         nbytes=2 * M * N * size, goals=goals, sweep="N" if sweep else None,
                         sweep_value=N if sweep else None)

    for dtype in (torch.float32, torch.bfloat16):
        cases.append(case("softmax", softmax, 16384, 4096, dtype, sweep=False))
        if quick:
            continue
        total = 2**26  # elements per case: 256 MB fp32, well past L2 at every N
        for N in (256, 512, 1024, 2048, 4096, 8192, 16384, 32768):
            cases.append(case("softmax", softmax, total // N, N, dtype, sweep=True))
        for N in (65536, 131072, 262144):
            cases.append(case("online_softmax", online_softmax, total // N, N, dtype, sweep=True))
    if quick:
        cases.append(case("online_softmax", online_softmax, 256, 131072, torch.float32, sweep=False))
    return cases
