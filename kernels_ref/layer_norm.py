"""LayerNorm over the last dim: forward, backward (weight/bias gradients reduced in a second pass),
and an autograd.Function.

Forward, per row of N: mean, biased variance, rstd = 1/sqrt(var + eps), y = (x - mean) * rstd * w + b.
Bytes: read x, write y (2*M*N*s) + w, b once + mean, rstd (8*M): one pass, the row held in registers.

Backward, with xhat = (x - mean) * rstd and g = dy * w:
    dx = rstd * (g - xhat * mean(g * xhat) - mean(g))      (row-local)
    dweight = sum over rows of dy * xhat,  dbias = sum over rows of dy   (column reductions)
Bytes: read x, dy, write dx (3*M*N*s) + partials. The column sums are the hard part: kernel 1 runs a
fixed number of programs G (a few per SM), each walking rows pid, pid+G, ... and accumulating its own
fp32 partial sums of dy*xhat and dy in registers, written once to a [G, N] buffer; kernel 2 sums the G
partials per column. Deterministic (no atomics), and the partial buffer (2*G*N*4 bytes) is tiny next
to the M*N traffic. FLOPs: ~10 per element forward, ~15 backward: memory-bound. Rows of 16384 columns
and more go in two passes (``TWO_PASS_FROM``): a first kernel sums each row (many small programs streaming
x and dy), then the row kernel, handed those sums, tiles the columns: x and dy are read twice (5 passes
over [M, N] instead of 3) but at near copy speed, where one long row a program held each SM to a single
program. (``config={"SPLIT": n, "two_pass": False}`` still runs the one-pass way for such rows: SPLIT
programs share a row block, each summing the whole rows a chunk at a time and owning BLOCK_N / SPLIT
columns.)

Fused with an activation (``layer_norm_gelu``, inference): the same forward kernel with a GELU epilogue
(a ``tl.constexpr`` flag) and no statistics stored: read x, write y, nothing else; eager PyTorch runs
LayerNorm then GELU and moves [M, N] four times.

Rows up to MAX_N elements are held in one block (hidden sizes are far below that).
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import course  # noqa: F401  (TRITON_INTERPRET before the kernels below are defined)
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from course.triton_compat import autotune
from kernels_ref._launch import BoundLaunches, alignment_mask, cdiv, next_power_of_2
from kernels_ref._triton_math import gelu_tanh
from kernels_ref._validate import check_same, check_shape, check_tensor, cuda_sm_count, rows_contiguous
from measure.tolerance import GRAD_TOLERANCES

MAX_N = 65536


def layer_norm_torch(x, weight, bias, eps: float = 1e-5):
    """The definition: LayerNorm over the last dim with the biased variance (float64-capable)."""
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def layer_norm_fwd_torch(x, weight, bias, eps: float = 1e-5):
    """Reference for layer_norm_fwd: (y, mean [M], rstd [M])."""
    mean = x.mean(dim=-1)
    var = ((x - mean[:, None]) ** 2).mean(dim=-1)
    rstd = 1.0 / torch.sqrt(var + eps)
    return (x - mean[:, None]) * rstd[:, None] * weight + bias, mean, rstd


def layer_norm_gelu_torch(x, weight, bias, eps: float = 1e-5):
    """Reference for layer_norm_gelu: GELU (tanh approximation) of the LayerNorm (float64-capable)."""
    return F.gelu(layer_norm_torch(x, weight, bias, eps), approximate="tanh")


def layer_norm_bwd_torch(dy, x, weight, mean, rstd):
    """Reference for layer_norm_bwd, the closed form (float64-capable): (dx, dweight, dbias)."""
    xhat = (x - mean[:, None]) * rstd[:, None]
    g = dy * weight
    dx = rstd[:, None] * (g - xhat * (g * xhat).mean(-1, keepdim=True) - g.mean(-1, keepdim=True))
    return dx, (dy * xhat).sum(0), dy.sum(0)


def _row_configs():
    return [triton.Config({}, num_warps=w, num_stages=s) for w in (4, 8, 16, 32) for s in (1, 2)]


def _rows_per_program(block_n: int, m: int) -> int:
    return max(1, min(4096 // block_n, next_power_of_2(max(m, 1)), 32))


@triton.jit
def row_tile(x_ptr, stride_xm, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """This program's BLOCK_M rows of x in float32 (0 past M and N; read once, so evicted first), with the
    row indices (64-bit ones for offsets), the columns and the masks that its stores use."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    row_ok = rows < M
    col_ok = cols < N
    mask = row_ok[:, None] & col_ok[None, :]
    rows64 = rows.to(tl.int64)
    x = tl.load(x_ptr + rows64[:, None] * stride_xm + cols[None, :], mask=mask, other=0.0,
                eviction_policy="evict_first").to(tl.float32)
    return x, rows, rows64, cols, row_ok, col_ok, mask


@autotune(configs=_row_configs(), key=["N", "BLOCK_M", "BLOCK_N", "GELU"], fallback=triton.Config({}, num_warps=4))
@triton.jit
def _layer_norm_fwd_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, M, N, stride_xm, stride_ym, eps,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                           GELU: tl.constexpr, STORE_STATS: tl.constexpr):
    # GELU: an epilogue on y in registers (layer_norm_gelu), no extra traffic. STORE_STATS: write mean
    # and rstd for the backward (layer_norm_fwd); the fused inference path needs neither. Both are
    # compile-time: each combination is its own compiled kernel with no trace of the other branch.
    x, rows, rows64, cols, row_ok, col_ok, mask = row_tile(x_ptr, stride_xm, M, N, BLOCK_M, BLOCK_N)
    mean = tl.sum(x, axis=1) / N
    # Two-pass variance from registers: no extra memory traffic, no E[x^2]-E[x]^2 cancellation.
    xc = tl.where(mask, x - mean[:, None], 0.0)
    var = tl.sum(xc * xc, axis=1) / N
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=col_ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
    b = tl.load(b_ptr + cols, mask=col_ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
    y = xc * rstd[:, None] * w[None, :] + b[None, :]
    if GELU:
        y = gelu_tanh(y)
    tl.store(y_ptr + rows64[:, None] * stride_ym + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)
    if STORE_STATS:
        tl.store(mean_ptr + rows, mean, mask=row_ok)
        tl.store(rstd_ptr + rows, rstd, mask=row_ok)


@triton.jit
def _row_grad(x, dy, w, mean, rstd, c1, c2):
    """xhat and dx of a block of rows (or of a column chunk of them), given c1 = mean(g * xhat) and
    c2 = mean(g) over each whole row, g = dy * w."""
    xhat = (x - mean[:, None]) * rstd[:, None]
    dx = rstd[:, None] * (dy * w[None, :] - xhat * c1[:, None] - c2[:, None])
    return xhat, dx


@autotune(configs=_row_configs(), key=["N", "BLOCK_M", "BLOCK_N", "SPLIT", "SUMS_GIVEN"],
          fallback=triton.Config({}, num_warps=4))
@triton.jit
def _layer_norm_bwd_dx_kernel(dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, part_ptr, sums_ptr, M, N,
                              stride_dym, stride_xm, stride_dxm, stride_pm, db_offset,
                              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, SPLIT: tl.constexpr = 1,
                              SUMS_GIVEN: tl.constexpr = False):
    # SPLIT programs share each row block: program (g, s) sums the whole rows for c1, c2 chunk by chunk,
    # then computes dx and accumulates dweight, dbias for its own BLOCK_N / SPLIT columns only. A wide row
    # (16384 columns) no longer has to sit whole in one program's registers next to two row-sized
    # accumulators (which spilled), and the SPLIT programs of a row block are neighbours in launch order,
    # so the row's second and third reads hit L2. SUMS_GIVEN: the row sums come from sums_ptr ([2, M]:
    # _layer_norm_bwd_sums_kernel's), so each program reads only its own columns of x and dy.
    COLS: tl.constexpr = BLOCK_N // SPLIT
    pid = tl.program_id(0) // SPLIT
    part = tl.program_id(0) % SPLIT
    n_programs = tl.num_programs(0) // SPLIT
    cols = part * COLS + tl.arange(0, COLS)
    col_ok = cols < N
    w = tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    dw_acc = tl.zeros([BLOCK_M, COLS], tl.float32)
    db_acc = tl.zeros([BLOCK_M, COLS], tl.float32)
    # Persistent: this program owns row blocks pid, pid + G, pid + 2G, ... and one row of partial sums.
    for start in range(pid * BLOCK_M, M, n_programs * BLOCK_M):
        rows = start + tl.arange(0, BLOCK_M)
        row_ok = rows < M
        rows64 = rows.to(tl.int64)
        mean = tl.load(mean_ptr + rows, mask=row_ok, other=0.0)
        rstd = tl.load(rstd_ptr + rows, mask=row_ok, other=0.0)
        if SUMS_GIVEN:
            s1 = tl.load(sums_ptr + rows, mask=row_ok, other=0.0)
            s2 = tl.load(sums_ptr + M + rows, mask=row_ok, other=0.0)
        elif SPLIT > 1:  # whole-row sums, a chunk at a time, before this program's own columns are loaded
            s1, s2 = _row_sums(dy_ptr, x_ptr, w_ptr, mean, rstd, rows64, row_ok, N, stride_dym, stride_xm,
                               BLOCK_M, COLS, SPLIT)
        mask = row_ok[:, None] & col_ok[None, :]
        x = tl.load(x_ptr + rows64[:, None] * stride_xm + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + rows64[:, None] * stride_dym + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        if SPLIT == 1 and not SUMS_GIVEN:  # the whole row is this program's: one read of x and dy
            s1, s2 = _grad_sums(x, dy, w, mean, rstd, mask)
        xhat, dx = _row_grad(x, dy, w, mean, rstd, s1 / N, s2 / N)
        xhat = tl.where(mask, xhat, 0.0)
        tl.store(dx_ptr + rows64[:, None] * stride_dxm + cols[None, :], dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw_acc += dy * xhat
        db_acc += dy
    # One partial-sum buffer: this program's dweight row at part_ptr + pid * stride_pm, its dbias row
    # db_offset elements further (one pointer, not two views of the buffer: a view costs the host ~3 us).
    tl.store(part_ptr + pid * stride_pm + cols, tl.sum(dw_acc, axis=0), mask=col_ok)
    tl.store(part_ptr + db_offset + pid * stride_pm + cols, tl.sum(db_acc, axis=0), mask=col_ok)


@triton.jit
def _grad_terms(x, dy, w, mean, rstd, mask):
    """g * xhat and g of each element of a block (g = dy * w; elements outside ``mask`` give 0 to g * xhat,
    and g is 0 there since dy was loaded as 0)."""
    xhat = tl.where(mask, (x - mean[:, None]) * rstd[:, None], 0.0)
    g = dy * w[None, :]
    return g * xhat, g


@triton.jit
def _grad_sums(x, dy, w, mean, rstd, mask):
    """sum(g * xhat) and sum(g) of each row of a block (g = dy * w; columns outside ``mask`` add 0)."""
    gx, g = _grad_terms(x, dy, w, mean, rstd, mask)
    return tl.sum(gx, axis=1), tl.sum(g, axis=1)


@triton.jit
def _row_sums(dy_ptr, x_ptr, w_ptr, mean, rstd, rows64, row_ok, N, stride_dym, stride_xm,
              BLOCK_M: tl.constexpr, COLS: tl.constexpr, SPLIT: tl.constexpr):
    """``_grad_sums`` over each whole row, COLS columns at a time."""
    s1 = tl.zeros([BLOCK_M], tl.float32)
    s2 = tl.zeros([BLOCK_M], tl.float32)
    for chunk in tl.static_range(SPLIT):
        cols = chunk * COLS + tl.arange(0, COLS)
        col_ok = cols < N
        mask = row_ok[:, None] & col_ok[None, :]
        x = tl.load(x_ptr + rows64[:, None] * stride_xm + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + rows64[:, None] * stride_dym + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
        c1, c2 = _grad_sums(x, dy, w, mean, rstd, mask)
        s1 += c1
        s2 += c2
    return s1, s2


@triton.jit
def _layer_norm_bwd_sums_kernel(dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, sums_ptr, M, N, stride_dym, stride_xm,
                                BLOCK_M: tl.constexpr, CHUNK: tl.constexpr):
    """The two-pass backward's first pass: sums[0, m] = sum(g * xhat), sums[1, m] = sum(g) over row m
    (g = dy * w), for BLOCK_M rows a program, CHUNK columns at a time, summed element-wise in registers and
    reduced once. Reads x and dy (2*M*N*s bytes), writes 8*M; many small programs, no row held whole."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < M
    rows64 = rows.to(tl.int64)
    mean = tl.load(mean_ptr + rows, mask=row_ok, other=0.0)
    rstd = tl.load(rstd_ptr + rows, mask=row_ok, other=0.0)
    acc1 = tl.zeros([BLOCK_M, CHUNK], tl.float32)
    acc2 = tl.zeros([BLOCK_M, CHUNK], tl.float32)
    for start in range(0, N, CHUNK):
        cols = start + tl.arange(0, CHUNK)
        col_ok = cols < N
        mask = row_ok[:, None] & col_ok[None, :]
        x = tl.load(x_ptr + rows64[:, None] * stride_xm + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + rows64[:, None] * stride_dym + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=col_ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
        gx, g = _grad_terms(x, dy, w, mean, rstd, mask)
        acc1 += gx
        acc2 += g
    tl.store(sums_ptr + rows, tl.sum(acc1, axis=1), mask=row_ok)
    tl.store(sums_ptr + M + rows, tl.sum(acc2, axis=1), mask=row_ok)


@triton.jit
def _column_sum_kernel(part_ptr, out_ptr, G, N, stride_pg, BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr):
    """out[n] = sum_g part[g, n] (fp32 partials, stored in out's dtype); one program per column block."""
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    acc = tl.zeros([BLOCK_G, BLOCK_N], tl.float32)
    for start in range(0, G, BLOCK_G):
        g = start + tl.arange(0, BLOCK_G)
        mask = (g < G)[:, None] & col_ok[None, :]
        acc += tl.load(part_ptr + g[:, None] * stride_pg + cols[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + cols, tl.sum(acc, axis=0).to(out_ptr.dtype.element_ty), mask=col_ok)


# The kernels, launched directly after each specialization's first call (kernels_ref._launch).
_COLUMN_SUM = BoundLaunches(_column_sum_kernel)
_LAYER_NORM_FWD = BoundLaunches(_layer_norm_fwd_kernel)
_LAYER_NORM_BWD_DX = BoundLaunches(_layer_norm_bwd_dx_kernel)
_LAYER_NORM_BWD_SUMS = BoundLaunches(_layer_norm_bwd_sums_kernel)


def column_sum_config(N: int) -> dict:
    """Column blocks narrow enough for about 64 programs: with 256 columns each, a 1024-column buffer gave 4
    programs, and the sum took longer than the row kernel (H100, probes/probe_kernel_configs.py: 64 columns
    of 128 (64 x 128 tiles, 4 warps) at 2N = 8192 and of 32 (16 x 32, 1 warp) at 2N = 2048 were fastest)."""
    block_n = max(16, min(256, next_power_of_2(cdiv(N, 64))))
    return {"BLOCK_G": 64 if block_n >= 128 else 32 if block_n >= 64 else 16, "BLOCK_N": block_n,
            "num_warps": max(1, min(4, block_n // 32))}


def column_sum(part: torch.Tensor, dtype: torch.dtype, *, config: dict | None = None) -> torch.Tensor:
    """Sum a [G, N] fp32 partial-sum buffer (unit column stride) over G in one launch (the second pass of
    the backward). ``config``: {BLOCK_G, BLOCK_N, num_warps} instead of ``column_sum_config(N)``."""
    G, N = part.shape
    out = torch.empty(N, dtype=dtype, device=part.device)
    meta = {**column_sum_config(N), **(config or {})}
    meta["BLOCK_N"] = min(meta["BLOCK_N"], next_power_of_2(N))
    _COLUMN_SUM[(cdiv(N, meta["BLOCK_N"]),)](part, out, G, N, part.stride(0), **meta)
    return out


def _check_x_w(x, weight, name_w="weight"):
    check_tensor("x", x, ndim=2)
    check_tensor(name_w, weight, ndim=1)
    check_same(name_w, weight, "x", x)
    check_shape(name_w, weight, (x.shape[1],))
    if x.shape[1] > MAX_N:
        raise ValueError(f"rows of {x.shape[1]} elements exceed the one-block limit of {MAX_N}")
    if x.shape[1] == 0:
        raise ValueError("cannot normalize rows of length 0")


def _check_stats(mean, rstd, M, x):
    for name, t in (("mean", mean), ("rstd", rstd)):
        check_tensor(name, t, ndim=1, dtypes=(torch.float32,), device=x.device)
        check_shape(name, t, (M,))


def _check_fwd(x, weight, bias):
    _check_x_w(x, weight)
    check_tensor("bias", bias, ndim=1)
    check_same("bias", bias, "x", x)
    check_shape("bias", bias, (x.shape[1],))
    return rows_contiguous(x), weight.contiguous(), bias.contiguous()


def _launch_fwd(x, weight, bias, y, mean, rstd, eps, gelu: bool):
    """y (and mean, rstd where given) must be fresh: the launch's key assumes them aligned, y's rows N apart."""
    M, N = x.shape
    if M == 0:
        return
    BLOCK_N = next_power_of_2(N)
    BLOCK_M = _rows_per_program(BLOCK_N, M)
    stats = mean is not None
    # Everything the specialization depends on: the blocks derive from M and N (a key made from the 15
    # arguments costs the host ~8 us, on the way to a launch the L2 flush hides only ~60-85 us of).
    key = (x.device, x.dtype, M, N, x.stride(0), gelu, stats, alignment_mask(x, weight, bias))
    _LAYER_NORM_FWD.keyed(key, (cdiv(M, BLOCK_M),))(
        x, weight, bias, y, mean if stats else y, rstd if stats else y, M, N, x.stride(0), N,
        float(eps), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, GELU=gelu, STORE_STATS=stats)


def layer_norm_fwd(x, weight, bias, eps: float = 1e-5):
    """LayerNorm of x [M, N] with weight, bias [N]: returns (y in x's dtype, mean [M] fp32, rstd [M] fp32)."""
    x, weight, bias = _check_fwd(x, weight, bias)
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    mean = torch.empty(M, dtype=torch.float32, device=x.device)
    rstd = torch.empty(M, dtype=torch.float32, device=x.device)
    _launch_fwd(x, weight, bias, y, mean, rstd, eps, gelu=False)
    return y, mean, rstd


def layer_norm_gelu(x, weight, bias, eps: float = 1e-5):
    """gelu_tanh(LayerNorm(x)) for x [M, N], weight, bias [N], in one launch: read x once, write y once.

    The forward kernel with its GELU epilogue on and the statistics off (inference: no backward needs
    them). Eager PyTorch runs two kernels and moves [M, N] four times; this moves it twice."""
    x, weight, bias = _check_fwd(x, weight, bias)
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    _launch_fwd(x, weight, bias, y, None, None, eps, gelu=True)
    return y


def _programs(sm_count: int, N: int, M: int, BLOCK_M: int, per_sm: int | None = None) -> int:
    # A few programs per SM: enough to fill the GPU, few enough that the partials stay small.
    per_sm = per_sm or (4 if N <= 8192 else 2)
    return max(1, min(sm_count * per_sm, cdiv(M, BLOCK_M)))


def _n_programs(x: torch.Tensor, M: int, BLOCK_M: int, per_sm: int | None = None) -> int:
    return _programs(cuda_sm_count(x.device), x.shape[1], M, BLOCK_M, per_sm)


def _column_split(block_n: int) -> int:
    """Programs sharing each row block in the one-pass backward (rows below TWO_PASS_FROM, or two_pass
    off): one per 8192 columns. At 16384 columns one program
    held the row, dy, xhat and two row-wide fp32 accumulators, past the registers a thread can have, and
    ran at 0.63x eager on an H200 (results/h200-2026-11-23/bench.log)."""
    return max(1, block_n // 8192)


class _BwdPlan(NamedTuple):
    """The backward's launch parameters for one [M, N] on one GPU (hashable: part of the launch's key)."""
    BLOCK_N: int
    BLOCK_M: int     # rows a program takes a step
    SPLIT: int       # programs sharing a row block, each with BLOCK_N / SPLIT columns
    G: int           # programs per column slice: rows of partial sums
    two_pass: object  # False, True, or the row-sum pass's config (a dict: explicit configs only)


def _bwd_plan(M: int, N: int, sm_count: int, config: dict) -> _BwdPlan:
    """The heuristics below, each overridden by its key in ``config`` (popped: what is left is launch
    options for the row kernel)."""
    BLOCK_N = next_power_of_2(N)
    two_pass = config.pop("two_pass", BLOCK_N >= TWO_PASS_FROM)
    SPLIT = config.pop("SPLIT", max(1, BLOCK_N // TWO_PASS_COLS) if two_pass else _column_split(BLOCK_N))
    BLOCK_M = config.pop("BLOCK_M", TWO_PASS_ROWS if two_pass else _rows_per_program(BLOCK_N, M))
    per_sm = config.pop("per_sm", TWO_PASS_PER_SM if two_pass else None)
    G = max(1, _programs(sm_count, N, M, BLOCK_M, per_sm) // SPLIT)
    return _BwdPlan(BLOCK_N, BLOCK_M, SPLIT, G, two_pass)


@functools.lru_cache(maxsize=1024)
def _default_bwd_plan(M: int, N: int, sm_count: int) -> _BwdPlan:
    return _bwd_plan(M, N, sm_count, {})


def _check_bwd(dy, x, weight, mean, rstd) -> None:
    _check_x_w(x, weight)
    check_tensor("dy", dy, ndim=2)
    check_same("dy", dy, "x", x)
    check_shape("dy", dy, tuple(x.shape))
    _check_stats(mean, rstd, x.shape[0], x)


def layer_norm_bwd(dy, x, weight, mean, rstd, *, config: dict | None = None):
    """Gradients of LayerNorm: (dx like x, dweight and dbias like weight), from forward's mean and rstd.

    ``config``: explicit launch parameters instead of the heuristics and the autotuner's choice
    (probes/probe_kernel_configs.py times them one by one): BLOCK_M (rows per step), num_warps, num_stages
    per_sm (programs per SM) and SPLIT (programs sharing a row block, each with its own columns) for the
    row kernel; "one_sum" (default True) puts both partials in one
    [G, 2N] buffer summed by one launch, False in two; "sum": column_sum's config, or "torch" for torch.sum
    over G; "two_pass": True or {BLOCK_M, CHUNK, num_warps} (``_sums_config``) computes the row sums first
    (``_layer_norm_bwd_sums_kernel``: x and dy read twice, no row held whole), and SPLIT then tiles the
    columns (default: 1024 a program).

    The host's work up to the row kernel's launch is kept short (a cached plan, one partial-sum buffer
    passed whole, a launch keyed by the few facts that decide its specialization): the timing protocol's
    L2 flush hides only ~60-85 us of it, and beyond that the GPU waits (probes/protocol_timeline.py)."""
    _check_bwd(dy, x, weight, mean, rstd)
    dy, x = rows_contiguous(dy), rows_contiguous(x)
    weight, mean, rstd = weight.contiguous(), mean.contiguous(), rstd.contiguous()
    M, N = x.shape
    dx = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M == 0:
        return dx, torch.zeros_like(weight), torch.zeros_like(weight)
    config = dict(config or {})
    one_sum, sum_config = config.pop("one_sum", True), config.pop("sum", None)
    sm_count = cuda_sm_count(x.device)
    plan = _bwd_plan(M, N, sm_count, config) if config else _default_bwd_plan(M, N, sm_count)
    sums = _row_sums_first(dy, x, weight, mean, rstd, plan.two_pass) if plan.two_pass else mean  # mean: unused
    G = plan.G
    # Partial sums: dw's in columns [0, N) of a row, db's in [N, 2N) with one_sum, else a [2, G, N] buffer.
    part = torch.empty((G, 2 * N) if one_sum else (2, G, N), dtype=torch.float32, device=x.device)
    stride_pm, db_offset = (2 * N, N) if one_sum else (N, G * N)
    args = (dy, x, weight, mean, rstd, dx, part, sums, M, N, dy.stride(0), x.stride(0), N, stride_pm, db_offset)
    meta = dict(BLOCK_M=plan.BLOCK_M, BLOCK_N=plan.BLOCK_N, SPLIT=plan.SPLIT, SUMS_GIVEN=bool(plan.two_pass))
    grid = (G * plan.SPLIT,)
    if config:  # launch options of its own: the JIT function beneath the autotuner
        _layer_norm_bwd_dx_kernel.fn[grid](*args, **meta, **config)
    else:  # everything the specialization depends on: the rest of args derives from these
        key = (x.device, x.dtype, M, N, dy.stride(0), x.stride(0), plan, one_sum,
               alignment_mask(dy, x, weight, mean, rstd))
        _LAYER_NORM_BWD_DX.keyed(key, grid)(*args, **meta)
    if one_sum:
        return (dx, *_sum_partials(part, weight.dtype, sum_config).view(2, N).unbind(0))
    return dx, _sum_partials(part[0], weight.dtype, sum_config), _sum_partials(part[1], weight.dtype, sum_config)


def _sum_partials(part: torch.Tensor, dtype: torch.dtype, sum_config) -> torch.Tensor:
    """A partial-sum buffer summed over its rows: column_sum, or torch.sum with sum_config == "torch"."""
    return part.sum(0).to(dtype) if sum_config == "torch" else column_sum(part, dtype, config=sum_config)


# The two-pass backward: from rows of 16384 columns (BLOCK_N) on, by default; its second kernel's
# programs own 1024 columns by 2 rows a step, 8 programs an SM. On an H100 at 4096x16384 bf16 it ran 1.29x
# the one-pass kernel with split rows, and 0.75-0.88x it at 8192 columns and fewer (two more reads of x
# and dy against rows held whole): results/h100-2026-11-26/probe-configs-ln-two-pass.log.
TWO_PASS_FROM, TWO_PASS_COLS, TWO_PASS_ROWS, TWO_PASS_PER_SM = 16384, 1024, 2, 8


def _sums_config(N: int, M: int) -> dict:
    """The row-sum pass's blocks: CHUNK columns (up to 2048) by BLOCK_M rows, about 4096 elements a step."""
    chunk = min(next_power_of_2(N), 2048)
    return {"BLOCK_M": max(1, min(4096 // chunk, next_power_of_2(M))), "CHUNK": chunk, "num_warps": 8}


def _row_sums_first(dy, x, weight, mean, rstd, two_pass) -> torch.Tensor:
    """[2, M] fp32: sum(dy * w * xhat) and sum(dy * w) of every row (the two-pass backward's first pass)."""
    M, N = x.shape
    meta = {**_sums_config(N, M), **(two_pass if isinstance(two_pass, dict) else {})}
    sums = torch.empty((2, M), dtype=torch.float32, device=x.device)
    _LAYER_NORM_BWD_SUMS[(cdiv(M, meta["BLOCK_M"]),)](dy, x, weight, mean, rstd, sums, M, N,
                                                      dy.stride(0), x.stride(0), **meta)
    return sums


class LayerNormFunction(torch.autograd.Function):
    """Autograd wrapper: forward saves x, weight, mean, rstd; backward calls layer_norm_bwd."""

    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        shape = x.shape
        y, mean, rstd = layer_norm_fwd(x.reshape(-1, shape[-1]), weight, bias, eps)
        ctx.save_for_backward(x, weight, mean, rstd)
        return y.reshape(shape)

    @staticmethod
    def backward(ctx, dy):
        x, weight, mean, rstd = ctx.saved_tensors
        n = x.shape[-1]
        dx, dw, db = layer_norm_bwd(dy.reshape(-1, n), x.reshape(-1, n), weight, mean, rstd)
        return dx.reshape(x.shape), dw, db, None


def layer_norm(x, weight, bias, eps: float = 1e-5):
    """Differentiable LayerNorm over the last dim of x (any leading dims), Triton forward and backward."""
    return LayerNormFunction.apply(x, weight, bias, eps)


def bench_shapes(quick: bool):
    """(M, N, dtype) of the norms' benchmarks: 16K rows of 4096, and a sweep of widths at 64M elements."""
    shapes = [(16384, 4096, torch.bfloat16)] + ([] if quick else [(16384, 4096, torch.float32)])
    return shapes + ([] if quick else [(2**26 // n, n, torch.bfloat16) for n in (512, 1024, 2048, 8192, 16384)])


def bench_cases(quick: bool = False):
    from kernels_ref.benchmarking import BenchCase, Goal
    from course import DEVICE

    eps = 1e-5

    def eager_fwd(x, w, b, dy):
        y, mean, rstd = torch.native_layer_norm(x, [x.shape[-1]], w, b, eps)
        return y, mean.view(-1), rstd.view(-1)

    @torch.compile
    def compiled_fwd(x, w, b, dy):
        # What Inductor makes of the definition, producing the same three outputs as the kernel.
        y, mean, rstd = layer_norm_fwd_torch(x.float(), w.float(), b.float(), eps)
        return y.to(x.dtype), mean, rstd

    def eager_bwd(x, w, b, dy, mean, rstd):
        # The kernel eager autograd launches for LayerNorm's backward.
        return torch.ops.aten.native_layer_norm_backward(
            dy, x, [x.shape[-1]], mean[:, None], rstd[:, None], w, b, [True, True, True])

    @torch.compile
    def compiled_bwd(x, w, b, dy, mean, rstd):
        return layer_norm_bwd_torch(dy.float(), x.float(), w.float(), mean, rstd)

    def fwd_ref(x, w, b, dy):
        return layer_norm_fwd_torch(x.double(), w.double(), b.double(), eps)

    def bwd_ref(x, w, b, dy, mean, rstd):
        _, m, r = layer_norm_fwd_torch(x.double(), w.double(), b.double(), eps)
        return layer_norm_bwd_torch(dy.double(), x.double(), w.double(), m, r)

    def gelu_case(M, N, dtype, make, common):
        from kernels_ref.bias_gelu import bias_gelu

        def eager_gelu(x, w, b, zero):
            return F.gelu(F.layer_norm(x, (N,), w, b, eps), approximate="tanh")

        def make_gelu(make=make):
            x, w, b, _ = make()
            return x, w, b, torch.zeros(N, device=x.device, dtype=x.dtype)

        def two_kernels(x, w, b, zero):
            # What a learner has before fusing: their LayerNorm kernel, then a GELU kernel (bias_gelu with
            # a zero bias): y goes through memory between the two.
            return bias_gelu(layer_norm_fwd(x, w, b, eps)[0], zero)

        size = torch.empty((), dtype=dtype).element_size()
        return BenchCase(
            op="layer_norm_gelu", make_inputs=make_gelu, **common,
            reference=lambda x, w, b, zero: layer_norm_gelu_torch(x.double(), w.double(), b.double(), eps),
            candidates={"triton": lambda x, w, b, zero: layer_norm_gelu(x, w, b, eps), "two_kernels": two_kernels,
                        "eager": eager_gelu, "compiled": torch.compile(eager_gelu)},
            nbytes=2 * M * N * size + 2 * N * size,  # x in, y out, w and b once
            # First principles (awaits a GPU run): one pass against four (eager: LayerNorm at ~0.74 of copy,
            # then GELU), so >= 2x eager; >= 1.8x our own two kernels; Inductor fuses the pair too: a tie.
            goals=[Goal.peak("triton", 0.9), Goal.faster("triton", "eager", 2.0),
                   Goal.faster("triton", "two_kernels", 1.8), Goal.faster("triton", "compiled")],
        )

    cases = []
    for M, N, dtype in bench_shapes(quick):
        def make(M=M, N=N, dtype=dtype):
            x = torch.randn(M, N, device=DEVICE, dtype=dtype)
            w = 1 + 0.1 * torch.randn(N, device=DEVICE, dtype=dtype)
            b = 0.1 * torch.randn(N, device=DEVICE, dtype=dtype)
            return x, w, b, torch.randn(M, N, device=DEVICE, dtype=dtype)

        def make_bwd(make=make):
            x, w, b, dy = make()
            _, mean, rstd = layer_norm_fwd(x, w, b, eps)
            return x, w, b, dy, mean, rstd

        size = torch.empty((), dtype=dtype).element_size()
        label = f"{M}x{N} {str(dtype).replace('torch.', '')}"
        swept = dtype == torch.bfloat16  # the bf16 shapes are the sweep over N (4096 among them)
        common = dict(label=label, sweep="N" if swept else None, sweep_value=N if swept else None)
        cases.append(BenchCase(
            op="layer_norm_fwd", make_inputs=make, reference=fwd_ref, **common,
            candidates={"triton": lambda x, w, b, dy: layer_norm_fwd(x, w, b, eps), "eager": eager_fwd,
                        "compiled": compiled_fwd},
            nbytes=2 * M * N * size + 2 * N * size + 8 * M,
            goals=[Goal.peak("triton", 0.9), Goal.faster("triton", "eager"), Goal.faster("triton", "compiled")],
        ))
        cases.append(gelu_case(M, N, dtype, make, common))
        cases.append(BenchCase(
            op="layer_norm_bwd", make_inputs=make_bwd, reference=bwd_ref, **common,
            candidates={"triton": lambda x, w, b, dy, mean, rstd: layer_norm_bwd(dy, x, w, mean, rstd),
                        "eager": eager_bwd, "compiled": compiled_bwd},
            nbytes=3 * M * N * size + 3 * N * size + 8 * M,
            goals=[Goal.faster("triton", "eager", 1.5)],
            # dweight sums M rows: float32 is held to the gradient tolerance (16384 rows on an H200 put one
            # dweight value 7.6e-5 off, past the plain float32 bound), as the kernel tests and the grader do.
            tolerances=GRAD_TOLERANCES,
        ))
    return cases

