"""Launch configurations of the memory-bound reference kernels, checked and timed one by one on a GPU.

    python -m probes.probe_kernel_configs [--ops bias_gelu,softmax,layer_norm_bwd] [--quick] [--json PATH]
                                         [--shapes MxN,...] [--variants a,b] [--dtype bf16|fp32]

For each op, every variant (block sizes, warps, pipeline stages, elements per program, a persistent grid
of k programs per SM, eviction hints; for bias_gelu also the GELU's math and the tensor as one flat
vector; for layer_norm_bwd also the programs per SM, i.e. the partial-sum groups, the programs sharing a
row block, and the second reduction step; for softmax also the two-pass online kernel, timed on every
shape) is first checked against float64 on the headline shape, bf16 16384x4096 unless --shapes and --dtype
say otherwise (measure.tolerance). Then all correct ones are timed together by the course's protocol
(measure.timer: interleaved medians, L2 flushed), beside a torch copy of the same bytes, plain Triton
copies of them (what a load/store kernel reaches on this GPU), eager PyTorch and the current kernel (its
heuristics and its autotuner), launched bound and unbound (kernels_ref._launch). For layer_norm_bwd every
column split and every two-pass tiling is timed on every shape. --shapes replaces the shapes (the first is
the headline), --variants keeps the variants whose name holds one of its words. The fastest few are then
checked and timed on 4096x4096, 16384x1024 and 4096x16384: the best variant is the fastest on the headline
shape that is nowhere slower than the current kernel (within 2%). Prints a table per op, the best variants
last; --json writes every number with the machine (tools.results). A few minutes on a GPU; on the CPU (the
interpreter) it checks every variant on tiny shapes, and its times are the interpreter's.

The variants launch the reference kernels with explicit parameters (their ``config=`` argument) or, for
what the reference kernels do not do (persistent grids, other eviction hints), the kernels below.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

import course
import torch
import triton
import triton.language as tl

from kernels_ref import bias_gelu as bg, layer_norm as ln, softmax as sm
from kernels_ref._triton_math import LOG2E, gelu_tanh, gelu_tanh_arg, gelu_tanh_fast
from kernels_ref._validate import cuda_sm_count
from measure.timer import time_interleaved
from measure.tolerance import compare
from probes.args import shape_list

OPS = ("bias_gelu", "softmax", "layer_norm_bwd")
GPU_SHAPES = ((16384, 4096), (4096, 4096), (16384, 1024), (4096, 16384))  # the headline shape first
CPU_SHAPES = ((40, 96), (16, 64), (33, 32))                 # the interpreter: tiny, and not powers of two
TOP = 4                 # variants, besides the current kernel, carried to the other shapes
NO_REGRESSION = 0.98    # on every other shape the best runs at >= this fraction of the current kernel's speed
EPS = 1e-5


# ----------------------------------------------------------------------------- kernels of the variants

@triton.jit
def _load(ptrs, mask, other, EVICT_FIRST: tl.constexpr):
    if EVICT_FIRST:
        return tl.load(ptrs, mask=mask, other=other, eviction_policy="evict_first")
    else:
        return tl.load(ptrs, mask=mask, other=other)


@triton.jit
def _store(ptrs, values, mask, HINT: tl.constexpr):
    # 0: none; 1: evict_first (L2 evicts the written lines first); 2: .cs (streaming, likely used once)
    if HINT == 1:
        tl.store(ptrs, values, mask=mask, eviction_policy="evict_first")
    elif HINT == 2:
        tl.store(ptrs, values, mask=mask, cache_modifier=".cs")
    else:
        tl.store(ptrs, values, mask=mask)


@triton.jit
def _gelu(z, MATH: tl.constexpr):
    """0: the reference's gelu_tanh (exp2, then an IEEE division: a dozen instructions); 1: the GPU's tanh
    (gelu_tanh_fast: one special-function op); 2: gelu_tanh with the approximate division (div.full.f32,
    2 ulp). 1 and 2 are PTX: compiled kernels only. On an H200 a bf16 element has ~30 issue slots of the SM's
    time at copy speed (4.8 TB/s, 4 bytes an element), so the math's instruction count can matter."""
    if MATH == 1:
        return gelu_tanh_fast(z)
    elif MATH == 2:
        d = 1.0 + tl.exp2(gelu_tanh_arg(z) * (-2.0 * LOG2E))
        return tl.inline_asm_elementwise("div.full.f32 $0, $1, $2;", "=r,r,r", [z, d], dtype=tl.float32,
                                         is_pure=True, pack=1)
    else:
        return gelu_tanh(z)


@triton.jit
def _bias_gelu_tile(x_ptr, b_ptr, y_ptr, M, N, stride_xm, stride_ym, pid_m, pid_n, BLOCK_M: tl.constexpr,
                    BLOCK_N: tl.constexpr, EVICT_X: tl.constexpr, STORE_HINT: tl.constexpr,
                    MATH: tl.constexpr):
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    mask = (rows < M)[:, None] & col_ok[None, :]
    rows64 = rows.to(tl.int64)
    x = _load(x_ptr + rows64[:, None] * stride_xm + cols[None, :], mask, 0.0, EVICT_X).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=col_ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
    y = _gelu(x + b[None, :], MATH)
    _store(y_ptr + rows64[:, None] * stride_ym + cols[None, :], y.to(y_ptr.dtype.element_ty), mask, STORE_HINT)


@triton.jit
def _bias_gelu_variant_kernel(x_ptr, b_ptr, y_ptr, M, N, stride_xm, stride_ym, BLOCK_M: tl.constexpr,
                              BLOCK_N: tl.constexpr, EVICT_X: tl.constexpr, STORE_HINT: tl.constexpr,
                              PERSISTENT: tl.constexpr, MATH: tl.constexpr):
    if PERSISTENT:  # a fixed grid: each program walks tiles pid, pid + P, ... (num_stages pipelines the loop)
        tiles_n = tl.cdiv(N, BLOCK_N)
        for tile in range(tl.program_id(0), tl.cdiv(M, BLOCK_M) * tiles_n, tl.num_programs(0)):
            _bias_gelu_tile(x_ptr, b_ptr, y_ptr, M, N, stride_xm, stride_ym, tile // tiles_n, tile % tiles_n,
                            BLOCK_M, BLOCK_N, EVICT_X, STORE_HINT, MATH)
    else:
        _bias_gelu_tile(x_ptr, b_ptr, y_ptr, M, N, stride_xm, stride_ym, tl.program_id(0), tl.program_id(1),
                        BLOCK_M, BLOCK_N, EVICT_X, STORE_HINT, MATH)


@triton.jit
def _softmax_rows(x_ptr, y_ptr, M, N, stride_xm, stride_ym, start, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  EVICT_X: tl.constexpr, STORE_HINT: tl.constexpr):
    rows = start + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    rows64 = rows.to(tl.int64)
    x = _load(x_ptr + rows64[:, None] * stride_xm + cols[None, :], mask, -float("inf"), EVICT_X).to(tl.float32)
    m = tl.max(x, axis=1)
    e = tl.exp2((x - m[:, None]) * LOG2E)
    y = e / tl.sum(e, axis=1)[:, None]
    _store(y_ptr + rows64[:, None] * stride_ym + cols[None, :], y.to(y_ptr.dtype.element_ty), mask, STORE_HINT)


@triton.jit
def _softmax_variant_kernel(x_ptr, y_ptr, M, N, stride_xm, stride_ym, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                            EVICT_X: tl.constexpr, STORE_HINT: tl.constexpr, PERSISTENT: tl.constexpr):
    if PERSISTENT:
        for start in range(tl.program_id(0) * BLOCK_M, M, tl.num_programs(0) * BLOCK_M):
            _softmax_rows(x_ptr, y_ptr, M, N, stride_xm, stride_ym, start, BLOCK_M, BLOCK_N, EVICT_X, STORE_HINT)
    else:
        _softmax_rows(x_ptr, y_ptr, M, N, stride_xm, stride_ym, tl.program_id(0) * BLOCK_M, BLOCK_M, BLOCK_N,
                      EVICT_X, STORE_HINT)


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    """dst = src, BLOCK elements per program: the loads and stores of a memory-bound kernel with no arithmetic
    (and no cache hints: evict_first on the loads made them slower on an H200)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def triton_copy_of(nbytes: int, block: int, num_warps: int):
    """A plain Triton copy moving nbytes (half read, half written) as bfloat16, BLOCK elements per program:
    what a Triton load/store kernel reaches on this GPU, the ceiling of the element-wise and row kernels."""
    src = torch.empty(nbytes // 4, dtype=torch.bfloat16, device=course.DEVICE).normal_()
    dst = torch.empty_like(src)
    grid = (triton.cdiv(src.numel(), block),)
    return lambda *_inputs: _copy_kernel[grid](src, dst, src.numel(), BLOCK=block, num_warps=num_warps)


# Plain copies timed beside every shape's variants: (elements per program, warps); 8192 and 8 warps are
# bias_gelu's tiles (8x1024) and softmax's rows at 4096 columns (2 rows).
TRITON_COPIES = ((8192, 8), (16384, 16), (4096, 4))


@triton.jit
def _bias_gelu_flat_kernel(x_ptr, b_ptr, y_ptr, n, N, BLOCK: tl.constexpr, WRAP: tl.constexpr,
                           MATH: tl.constexpr):
    """bias_gelu over a contiguous [M, N] seen as one vector of n = M * N elements, BLOCK a program, as
    torch.compile writes element-wise kernels: no row and column masks, 16-byte accesses throughout. The
    bias column is the program's first column (one scalar modulo) plus the lane, wrapped by an int32 modulo
    only when a block can cross a row's end (WRAP: N not a multiple of BLOCK)."""
    start = tl.program_id(0).to(tl.int64) * BLOCK
    offs = start + tl.arange(0, BLOCK)
    mask = offs < n
    cols = (start % N).to(tl.int32) + tl.arange(0, BLOCK)
    if WRAP:
        cols = cols % N
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    tl.store(y_ptr + offs, _gelu(x + b, MATH).to(y_ptr.dtype.element_ty), mask=mask)


def bias_gelu_flat(x, bias, *, elems, num_warps, math=0):
    """bias_gelu by ``_bias_gelu_flat_kernel`` (x contiguous), ``elems`` elements a program."""
    M, N = x.shape
    y = torch.empty_like(x)
    _bias_gelu_flat_kernel[(triton.cdiv(M * N, elems),)](x, bias, y, M * N, N, BLOCK=elems, WRAP=N % elems != 0,
                                                          MATH=math, num_warps=num_warps)
    return y


def _programs(per_sm: int, device, n_work: int) -> int:
    return max(1, min(per_sm * cuda_sm_count(device), n_work))


def _rows(elems: int, M: int, N: int) -> int:
    """Rows per program so that a program holds about ``elems`` elements (the reference's heuristic: 4096)."""
    return max(1, min(elems // triton.next_power_of_2(N), triton.next_power_of_2(M)))


def bias_gelu_variant(x, bias, *, BLOCK_M, BLOCK_N, num_warps, num_stages=1, evict_x=1, store=0, per_sm=0, math=0):
    """bias_gelu with the variant kernel: eviction hints, a persistent grid of per_sm programs per SM, and
    the GELU's math (``_gelu``)."""
    M, N = x.shape
    y = torch.empty_like(x)
    tiles = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    grid = (_programs(per_sm, x.device, tiles[0] * tiles[1]),) if per_sm else tiles
    _bias_gelu_variant_kernel[grid](x, bias, y, M, N, x.stride(0), y.stride(0), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                                    EVICT_X=evict_x, STORE_HINT=store, PERSISTENT=bool(per_sm), MATH=math,
                                    num_warps=num_warps, num_stages=num_stages)
    return y


def softmax_variant(x, *, elems, num_warps, num_stages=1, evict_x=1, store=0, per_sm=0):
    """softmax with the variant kernel: eviction hints, and a persistent grid of per_sm programs per SM."""
    M, N = x.shape
    y = torch.empty_like(x)
    BLOCK_M, BLOCK_N = _rows(elems, M, N), triton.next_power_of_2(N)
    blocks = triton.cdiv(M, BLOCK_M)
    grid = (_programs(per_sm, x.device, blocks) if per_sm else blocks,)
    _softmax_variant_kernel[grid](x, y, M, N, x.stride(0), y.stride(0), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                                  EVICT_X=evict_x, STORE_HINT=store, PERSISTENT=bool(per_sm),
                                  num_warps=num_warps, num_stages=num_stages)
    return y


# ----------------------------------------------------------------------------- the variants of each op

@dataclass
class Variant:
    name: str
    fn: Callable          # the op's inputs -> its output(s)
    params: dict
    everywhere: bool = False  # timed on every shape, not only when among the headline shape's fastest


def _name(params: dict) -> str:
    short = {"BLOCK_M": "bm", "BLOCK_N": "bn", "num_warps": "w", "num_stages": "s", "elems": "e", "per_sm": "p",
             "evict_x": "ev", "store": "st", "math": "m"}
    return " ".join(f"{short.get(k, k)}{v}" for k, v in params.items())


def bias_gelu_variants(quick: bool) -> list[Variant]:
    out = []

    def ref(**p):  # the reference kernel, one explicit config
        out.append(Variant("ref " + _name(p), lambda x, b, p=p: bg.bias_gelu(x, b, config=p), p))

    def var(**p):  # the variant kernel
        out.append(Variant("var " + _name(p), lambda x, b, p=p: bias_gelu_variant(x, b, **p), p))

    autotune_list = [(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.num_warps, c.num_stages) for c in bg.CONFIGS]
    for bm, bn, w, s in autotune_list[: 3 if quick else None]:          # the autotuner's list, one at a time
        ref(BLOCK_M=bm, BLOCK_N=bn, num_warps=w, num_stages=s)
    for bm, bn, w in [(16, 2048, 8), (32, 1024, 8), (32, 1024, 16), (64, 512, 16), (8, 2048, 4)][: 1 if quick else None]:
        ref(BLOCK_M=bm, BLOCK_N=bn, num_warps=w, num_stages=1)          # larger tiles: more bytes in flight
    for ev, st in [(1, 0), (0, 0), (1, 1), (1, 2), (0, 2), (0, 1)][: 2 if quick else None]:
        var(BLOCK_M=8, BLOCK_N=1024, num_warps=8, evict_x=ev, store=st)  # (0, 0) is the reference kernel's
    persistent = [(8, 1024, 8, p, s) for p in (2, 4, 8) for s in (1, 3)] + \
        [(32, 1024, 16, p, s) for p in (1, 2) for s in (1, 3)]
    for bm, bn, w, p, s in persistent[:: 4] if quick else persistent:
        var(BLOCK_M=bm, BLOCK_N=bn, num_warps=w, num_stages=s, per_sm=p)
    def flat(**p):  # the whole tensor as one vector (torch.compile's element-wise kernels)
        out.append(Variant("flat " + _name(p), lambda x, b, p=p: bias_gelu_flat(x, b, **p), p))

    for e, w in ((4096, 4), (8192, 8), (16384, 16), (8192, 4), (2048, 4)):
        flat(elems=e, num_warps=w)
    if not course.INTERPRET:  # the GELU's math in PTX (_gelu): fewer instructions an element
        for bm, w in ((8, 8), (16, 16)):
            for math in (1, 2):
                var(BLOCK_M=bm, BLOCK_N=1024, num_warps=w, evict_x=0, math=math)
        var(BLOCK_M=16, BLOCK_N=1024, num_warps=16, evict_x=0)
        flat(elems=8192, num_warps=8, math=1)
    return out


def softmax_variants(quick: bool) -> list[Variant]:
    out = []

    def ref(elems, **p):  # the reference kernel; rows per program from elements per program, as its heuristic
        def run(x, p=p, elems=elems):
            return sm.softmax(x, config={"BLOCK_M": _rows(elems, *x.shape), **p})
        out.append(Variant("ref " + _name({"elems": elems, **p}), run, {"elems": elems, **p}))

    def var(**p):
        out.append(Variant("var " + _name(p), lambda x, p=p: softmax_variant(x, **p), p))

    grid = [(e, w) for e in (4096, 8192, 16384, 32768) for w in (4, 8, 16, 32)]
    for e, w in grid[:: 5] if quick else grid:
        ref(e, num_warps=w, num_stages=1)
    for ev, st in [(1, 0), (0, 0), (1, 1), (1, 2), (0, 2), (0, 1)][: 2 if quick else None]:
        var(elems=4096, num_warps=8, evict_x=ev, store=st)              # (0, 0) is the reference kernel's
    persistent = [(4096, 8, p, s) for p in (2, 4, 8) for s in (1, 3)] + [(8192, 16, p, s) for p in (2, 4) for s in (1, 3)]
    for e, w, p, s in persistent[:: 4] if quick else persistent:
        var(elems=e, num_warps=w, num_stages=s, per_sm=p)
    # Two passes, one program per row, a block at a time (kernels_ref's online_softmax): few registers, so
    # many programs per SM where the one-pass kernel fits one (32768 columns); the second read is from L2.
    out.append(Variant("online_softmax (two passes)", sm.online_softmax, {"kernel": "online_softmax"},
                       everywhere=True))
    return out


def layer_norm_bwd_variants(quick: bool) -> list[Variant]:
    out = []

    def ref(elems=4096, num_warps=8, num_stages=2, per_sm=4, one_sum=False, sum=None, SPLIT=None, everywhere=False):
        p = {"elems": elems, "num_warps": num_warps, "num_stages": num_stages, "per_sm": per_sm}
        extra = {"one_sum": one_sum}
        if sum is not None:
            extra["sum"] = sum
        if SPLIT is not None:
            extra["SPLIT"] = SPLIT
        name = _name(p) + (" one_sum" if one_sum else "") + \
            ("" if sum is None else " sum=" + (sum if isinstance(sum, str) else _name(sum))) + \
            ("" if SPLIT is None else f" split{SPLIT}")

        def run(x, w, b, dy, mean, rstd, p=p, extra=extra):
            config = {"BLOCK_M": _rows(p["elems"], *x.shape), **{k: v for k, v in p.items() if k != "elems"}, **extra}
            return ln.layer_norm_bwd(dy, x, w, mean, rstd, config=config)
        out.append(Variant(name, run, {**p, **extra}, everywhere=everywhere))

    rows = [dict(num_warps=w, num_stages=s) for w in (4, 8, 16) for s in (1, 2, 3)]       # the row kernel
    rows += [dict(per_sm=g, num_warps=w) for g in (1, 2, 8) for w in (8, 16)]               # partial-sum groups
    rows += [dict(elems=e, num_warps=w) for e in (8192, 16384) for w in (8, 16)]            # rows per step
    rows += [dict(per_sm=g, one_sum=True) for g in (2, 3)]  # one sum in column_sum_config's blocks (p4: below)
    # Programs sharing a row block, on every shape: a wide row's columns per program decide how many
    # programs an SM holds (probes.ptxas_usage: 8192 columns fit one, 4096 fit two).
    rows += [dict(SPLIT=sp, num_warps=w, everywhere=True) for sp in (1, 2, 4) for w in (4, 8, 16)]
    sums = [dict(one_sum=True)] + [dict(one_sum=o, sum=c) for o in (False, True) for c in (
        "torch", {"BLOCK_G": 64, "BLOCK_N": 128, "num_warps": 4}, {"BLOCK_G": 32, "BLOCK_N": 64, "num_warps": 2},
        {"BLOCK_G": 16, "BLOCK_N": 32, "num_warps": 1})]                                    # the second step
    both = rows + sums
    for p in both[:: 6] if quick else both:
        ref(**p)

    def two_pass(cols, rows, num_warps, per_sm, sums=None):
        """The row sums first, then tiles of ``cols`` columns by ``rows`` rows (on every shape)."""
        p = {"cols": cols, "rows": rows, "num_warps": num_warps, "per_sm": per_sm}
        name = "two_pass " + _name(p) + ("" if sums is None else " sums=" + _name(sums))

        def run(x, w, b, dy, mean, rstd, p=p, sums=sums):
            split = max(1, triton.next_power_of_2(x.shape[1]) // p["cols"])
            config = {"two_pass": sums or True, "SPLIT": split, "BLOCK_M": p["rows"], "num_warps": p["num_warps"],
                      "num_stages": 2, "per_sm": p["per_sm"]}
            return ln.layer_norm_bwd(dy, x, w, mean, rstd, config=config)
        out.append(Variant(name, run, {**p, "sums": sums}, everywhere=True))

    tiles = [(1024, 4, 8, 4), (1024, 4, 4, 8), (1024, 8, 8, 4), (1024, 2, 4, 8), (2048, 2, 8, 4), (2048, 4, 8, 4),
             (512, 8, 4, 8), (4096, 1, 8, 4)]
    for t in tiles[:: 4] if quick else tiles:
        two_pass(*t)
    for sums in ({"BLOCK_M": 4, "CHUNK": 1024, "num_warps": 4}, {"BLOCK_M": 1, "CHUNK": 4096, "num_warps": 8},
                 {"BLOCK_M": 8, "CHUNK": 512, "num_warps": 4})[: 1 if quick else None]:
        two_pass(1024, 4, 8, 4, sums)
    return out


# ----------------------------------------------------------------------------- the ops

@dataclass
class Op:
    name: str
    make_inputs: Callable       # (M, N, dtype) -> inputs on the course's device
    reference: Callable         # inputs -> float64 output(s)
    current: Callable           # the reference kernel as the course calls it
    eager: Callable
    nbytes: Callable            # (M, N, element size) -> the fewest bytes moved
    variants: Callable          # quick -> [Variant]
    autotuner: object = None    # the kernel whose autotuner's pick is reported


def _randn(*shape, dtype):
    return torch.randn(*shape, device=course.DEVICE, dtype=dtype)


def _ln_inputs(M, N, dtype):
    x, dy = _randn(M, N, dtype=dtype), _randn(M, N, dtype=dtype)
    w, b = 1 + 0.1 * _randn(N, dtype=dtype), 0.1 * _randn(N, dtype=dtype)
    _, mean, rstd = ln.layer_norm_fwd(x, w, b, EPS)
    return x, w, b, dy, mean, rstd


def _ln_reference(x, w, b, dy, mean, rstd):
    _, m, r = ln.layer_norm_fwd_torch(x.double(), w.double(), b.double(), EPS)
    return ln.layer_norm_bwd_torch(dy.double(), x.double(), w.double(), m, r)


def _ln_eager(x, w, b, dy, mean, rstd):
    # The kernel eager autograd launches; its CPU version wants the statistics in x's dtype.
    stats = [t[:, None].to(x.dtype) if x.device.type == "cpu" else t[:, None] for t in (mean, rstd)]
    return torch.ops.aten.native_layer_norm_backward(dy, x, [x.shape[-1]], *stats, w, b, [True, True, True])


def ops() -> dict[str, Op]:
    import torch.nn.functional as F

    return {o.name: o for o in (
        Op("bias_gelu", lambda M, N, d: (_randn(M, N, dtype=d), _randn(N, dtype=d)),
           lambda x, b: bg.bias_gelu_torch(x.double(), b.double()), bg.bias_gelu,
           lambda x, b: F.gelu(x + b, approximate="tanh"), lambda M, N, s: (2 * M * N + N) * s,
           bias_gelu_variants, bg._bias_gelu_kernel),
        Op("softmax", lambda M, N, d: (_randn(M, N, dtype=d),), lambda x: sm.softmax_torch(x.double()), sm.softmax,
           lambda x: torch.softmax(x, dim=-1), lambda M, N, s: 2 * M * N * s, softmax_variants, sm._softmax_kernel),
        Op("layer_norm_bwd", _ln_inputs, _ln_reference,
           lambda x, w, b, dy, mean, rstd: ln.layer_norm_bwd(dy, x, w, mean, rstd), _ln_eager,
           lambda M, N, s: 3 * M * N * s + 3 * N * s + 8 * M, layer_norm_bwd_variants, ln._layer_norm_bwd_dx_kernel),
    )}


# ----------------------------------------------------------------------------- checking and timing

@dataclass
class Row:
    variant: str
    params: dict = field(default_factory=dict)
    correct: bool = True
    error: float | None = None
    note: str = ""
    ran: bool = True                    # False: it raised (did not compile or launch)
    ms: float | None = None
    gbps: float | None = None
    of_copy: float | None = None        # GB/s over the same-bytes copy's, timed in the same interleaving
    of_copy_1g: float | None = None     # GB/s over the 1 GiB copy's (measure.ceilings: the bench's fraction)
    x_current: float | None = None      # current ms / this ms: above 1 is faster than the current kernel
    x_eager: float | None = None


def check(fn, inputs, ref) -> Row:
    row = Row("")
    try:
        ok, worst, msg = compare(fn(*inputs), ref)
        row.correct, row.error, row.note = ok, (None if worst is None or math.isinf(worst) else worst), msg[:200]
    except Exception as exc:  # noqa: BLE001  (a config that does not compile or launch is reported, not fatal)
        row.correct, row.ran, row.note = False, False, f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
    return row


# Timed beside the variants on every shape: the op as the course calls it (its launches bound after the
# first call, kernels_ref._launch), the same with every call through the autotuner and the JIT, and eager.
BASELINES = ("current", "current unbound", "eager")


def _unbound(fn):
    """``fn`` with kernels_ref._launch's binding switched off for its calls."""
    from kernels_ref._launch import BoundLaunches

    def run(*args):
        with BoundLaunches.off():
            return fn(*args)
    return run


def copy_of(nbytes: int):
    """A torch device copy moving nbytes (half read, half written), like measure.ceilings' copy."""
    src = torch.empty(nbytes // 2, dtype=torch.uint8, device=course.DEVICE).random_(0, 255)
    dst = torch.empty_like(src)
    return lambda *_inputs: dst.copy_(src)


DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}


def probe_shape(op: Op, M: int, N: int, variants: list[Variant], timing: dict, copy_1g: float | None,
                dtype_name: str = "bf16") -> dict:
    """Check every variant on [M, N] of this dtype, then time the correct ones with copy, eager and current."""
    dtype = DTYPES[dtype_name]
    inputs = op.make_inputs(M, N, dtype)
    ref = op.reference(*inputs)
    current_unbound = _unbound(op.current)
    rows = {"current": check(op.current, inputs, ref), "current unbound": check(current_unbound, inputs, ref),
            "eager": check(op.eager, inputs, ref)}
    for v in variants:
        rows[v.name] = check(v.fn, inputs, ref)
        rows[v.name].params = v.params
    del ref
    nbytes = op.nbytes(M, N, torch.empty((), dtype=dtype).element_size())
    copies = {"copy": copy_of(nbytes)}
    copies.update({f"triton copy e{e} w{w}": triton_copy_of(nbytes, e, w) for e, w in TRITON_COPIES})
    fns = {**copies, "current": op.current, "current unbound": current_unbound, "eager": op.eager}
    fns.update({v.name: v.fn for v in variants})
    # A variant is timed when correct; the baselines whenever they run (eager's bf16 sums on a CPU miss).
    fns = {name: fn for name, fn in fns.items()
           if name in copies or rows[name].correct or name in BASELINES and rows[name].ran}
    ms = time_interleaved(fns, inputs, **timing)
    rows.update({name: Row(name) for name in copies})
    for name, row in rows.items():
        row.variant = name
        if name not in ms:
            continue
        row.ms = ms[name]
        row.gbps = nbytes / (row.ms * 1e-3) / 1e9
        row.of_copy = ms["copy"] / row.ms
        row.of_copy_1g = row.gbps / copy_1g if copy_1g else None
        row.x_current = ms["current"] / row.ms if "current" in ms else None
        row.x_eager = ms["eager"] / row.ms if "eager" in ms else None
    picked = getattr(op.autotuner, "best_config", None) or getattr(op.autotuner, "config", None)
    return {"shape": f"{M}x{N} {dtype_name}", "bytes": nbytes, "autotuned": str(picked) if picked else None,
            "rows": [vars(r) for r in sorted(rows.values(), key=lambda r: (r.ms is None, r.ms or 0.0))]}


def probe_op(op: Op, shapes, quick: bool, timing: dict, copy_1g: float | None, log=print,
             only: list[str] | None = None, dtype_name: str = "bf16") -> dict:
    """Every variant (or those whose name holds one of ``only``) on the first shape, the fastest few and
    the ``everywhere`` ones on the others."""
    variants = [v for v in op.variants(quick) if not only or any(o in v.name for o in only)]
    t0 = time.perf_counter()
    head = probe_shape(op, *shapes[0], variants, timing, copy_1g, dtype_name)
    log(table(op.name, head), flush=True)
    ranked = [r["variant"] for r in head["rows"] if r["ms"] is not None and r["variant"] in {v.name for v in variants}]
    carried = [v for v in variants if v.name in ranked[:TOP] or v.everywhere]
    others = []
    for M, N in shapes[1:]:
        others.append(probe_shape(op, M, N, carried, timing, copy_1g, dtype_name))
        log(table(op.name, others[-1]), flush=True)
    result = {"shapes": [head] + others, "seconds": time.perf_counter() - t0}
    result["best"] = best(head, others)
    return result


def is_copy(name: str) -> bool:
    """A copy timed beside the variants (torch's or a plain Triton kernel's): a ceiling, not a candidate."""
    return name == "copy" or name.startswith("triton copy")


def best(head: dict, others: list[dict]) -> dict:
    """The fastest variant on the headline shape that is correct everywhere and nowhere slower than the
    current kernel (NO_REGRESSION); the current kernel when none is."""
    def by_name(shape):
        return {r["variant"]: r for r in shape["rows"]}

    rows = by_name(head)
    fine = []
    for name, row in rows.items():
        if is_copy(name) or name in ("eager", "current unbound") or row["ms"] is None:
            continue
        elsewhere = [by_name(s).get(name) for s in others]
        if all(r is not None and r["correct"] and r["x_current"] is not None and r["x_current"] >= NO_REGRESSION
               for r in elsewhere):
            fine.append(row)
    choice = min(fine, key=lambda r: r["ms"]) if fine else rows["current"]
    return {"variant": choice["variant"], "params": choice["params"], "ms": choice["ms"],
            "of_copy": choice["of_copy"], "of_copy_1g": choice["of_copy_1g"], "x_current": choice["x_current"],
            "x_eager": choice["x_eager"],
            "elsewhere_x_current": {s["shape"]: by_name(s).get(choice["variant"], {}).get("x_current") for s in others}}


# ----------------------------------------------------------------------------- output

def _f(v, fmt):
    return "-" if v is None else format(v, fmt)


def table(op: str, shape: dict) -> str:
    lines = [f"== {op} {shape['shape']} ({shape['bytes'] / 1e6:.0f} MB moved; autotuner: {shape['autotuned']})",
             f"{'variant':<44}{'ms':>9}{'GB/s':>8}{'copy':>7}{'1GiB':>7}{'x cur':>7}{'x eag':>7}  note"]
    for r in shape["rows"]:
        lines.append(f"{r['variant'][:43]:<44}{_f(r['ms'], '.4f'):>9}{_f(r['gbps'], '.0f'):>8}{_f(r['of_copy'], '.3f'):>7}"
                     f"{_f(r['of_copy_1g'], '.3f'):>7}{_f(r['x_current'], '.3f'):>7}{_f(r['x_eager'], '.2f'):>7}  "
                     + ("" if r["correct"] else "WRONG " + r["note"]))
    return "\n".join(lines)


def summary(results: dict, top: int = 3) -> str:
    """Per op on the headline shape: the current kernel, eager, the fastest few variants and the best (*),
    each with its speed relative to the current kernel on the other shapes where it was timed there."""
    lines = ["== summary, headline shape (copy: a torch copy of the same bytes timed alongside; 1GiB: the bench's "
             "ceiling); * = best: fastest, and nowhere slower than current",
             f"{'op':<16}{'variant':<40}{'ms':>8}{'GB/s':>7}{'copy':>7}{'1GiB':>7}{'x cur':>7}{'x eag':>7}  x cur elsewhere"]
    for op, res in results.items():
        head, others = res["shapes"][0], res["shapes"][1:]
        timed = [r for r in head["rows"] if r["ms"] is not None and r["variant"] != "copy"]
        triton_copy = [r for r in timed if is_copy(r["variant"])][:1]   # the fastest plain Triton copy
        timed = [r for r in timed if not is_copy(r["variant"])]
        variants = [r for r in timed if r["variant"] not in BASELINES]
        chosen = res["best"]["variant"]
        show = triton_copy + [r for r in timed if r["variant"] in BASELINES] + variants[:top]
        show += [r for r in timed if r["variant"] == chosen and r not in show]
        for r in show:
            elsewhere = []
            for s in others:
                x = next((o["x_current"] for o in s["rows"] if o["variant"] == r["variant"]), None)
                if x is not None:
                    elsewhere.append(f"{s['shape'].split()[0]} {x:.3f}")
            mark = "*" if r["variant"] == chosen else " "
            lines.append(f"{op:<15}{mark}{r['variant'][:39]:<40}{_f(r['ms'], '.4f'):>8}{_f(r['gbps'], '.0f'):>7}"
                         f"{_f(r['of_copy'], '.3f'):>7}{_f(r['of_copy_1g'], '.3f'):>7}{_f(r['x_current'], '.3f'):>7}"
                         f"{_f(r['x_eager'], '.2f'):>7}  {', '.join(elsewhere)}")
    return "\n".join(lines)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m probes.probe_kernel_configs", description=__doc__.splitlines()[0])
    p.add_argument("--ops", default=",".join(OPS), type=lambda s: [o.strip() for o in s.split(",") if o.strip()],
                   help=f"comma-separated, of {', '.join(OPS)} (default: all)")
    p.add_argument("--quick", action="store_true", help="a few variants of each family, not all")
    p.add_argument("--json", metavar="PATH", help="write every row, the best variants and the machine here")
    p.add_argument("--reps", type=int, default=None, help="timed repetitions per variant (default: 40 on a GPU)")
    p.add_argument("--shapes", type=lambda t: shape_list(t, 2, ",", "x"), default=None, metavar="MxN,...",
                   help="shapes on a GPU, the first one the headline (default: "
                        + ",".join(f"{m}x{n}" for m, n in GPU_SHAPES) + ")")
    p.add_argument("--dtype", default="bf16", choices=tuple(DTYPES), help="the inputs' dtype (default: bf16)")
    p.add_argument("--variants", default=None, type=lambda s: [o.strip() for o in s.split(",") if o.strip()],
                   metavar="a,b", help="only the variants whose name holds one of these (e.g. split,w16)")
    args = p.parse_args(argv)
    unknown = [o for o in args.ops if o not in OPS]
    if unknown:
        p.error(f"unknown op(s) {', '.join(unknown)}; known: {', '.join(OPS)}")
    return args


def main(argv=None) -> int:
    from measure.files import write_json_atomic
    from tools.results import this_machine

    args = parse_args(argv)
    on_gpu = course.ON_GPU
    shapes = (args.shapes or GPU_SHAPES) if on_gpu else CPU_SHAPES
    timing = {"reps": args.reps or (40 if on_gpu else 2), "warmup": 3 if on_gpu else 0, "max_seconds": 10.0}
    print(course.describe(), flush=True)
    torch.manual_seed(0)
    copy_1g = None
    if on_gpu:
        from measure.ceilings import GPU_COPY_BYTES

        copy_1g = 2 * GPU_COPY_BYTES / (time_interleaved({"copy": copy_of(2 * GPU_COPY_BYTES)}, **timing)["copy"]
                                        * 1e-3) / 1e9
        print(f"1 GiB device copy: {copy_1g:.0f} GB/s", flush=True)
    method = "python -m probes.probe_kernel_configs " + " ".join(argv if argv is not None else sys.argv[1:])
    record = {**this_machine(), "method": method.strip(), "quick": args.quick, "copy_1g_gbps": copy_1g,
              "shapes": [f"{M}x{N} bf16" for M, N in shapes], "ops": {}}
    table_of = ops()
    for name in args.ops:
        record["ops"][name] = probe_op(table_of[name], shapes, args.quick, timing, copy_1g, only=args.variants,
                                       dtype_name=args.dtype)
        if args.json:  # what is finished survives a run cut off later
            write_json_atomic(args.json, record, nonfinite_as_null=True)
    print(summary(record["ops"]))
    if args.json:
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
