"""Tiled matmul and the fused ``linear_bias_gelu`` (GELU in the matmul's epilogue).

``matmul(a, b)`` = ``a @ b`` with a ``[M, K]``, b ``[K, N]``;
``linear_bias_gelu(x, weight, bias)`` = ``gelu_tanh(x @ weight.T + bias)`` with ``weight`` ``[N, K]``
(``nn.Linear`` layout) and ``x`` ``[..., K]``.
``linear(x, weight, bias, gelu=False, residual=None)`` = ``[gelu](x @ weight.T + bias) [+ residual]``: the
four projections of a transformer block (``kernels_ref.transformer_block``), the skip connection's add in
the epilogue too (one read of the ``[M, N]`` residual, where eager PyTorch writes the projection's output
and reads it back with the residual: two more passes).

Cost of one ``[M, K] @ [K, N]``: ``2*M*N*K`` FLOPs; at least ``(M*K + K*N + M*N) * itemsize`` bytes.
At 8192^3 in bf16 that is 1.1 TFLOP against 0.4 GB: about 2700 FLOP/byte, far right of an H100's
ridge point (~700 TFLOP/s / ~3 TB/s ~ 230 FLOP/byte), so the kernel is compute-bound and everything
here serves the tensor cores:

- each program owns a ``BLOCK_M x BLOCK_N`` tile of C and walks K in ``BLOCK_K`` steps; a tile reads
  ``(BLOCK_M + BLOCK_N) * BLOCK_K`` elements per ``BLOCK_M * BLOCK_N * BLOCK_K`` multiply-adds, so
  128x256 tiles do ~85 FLOP per byte loaded from L2 (enough to keep wgmma fed);
- accumulation is float32 in registers whatever the input dtype; ``num_stages`` 3-4 software-pipelines
  the loads behind the ``tl.dot`` of the previous step;
- tiles are visited in *grouped* order: ``GROUP_M`` row-blocks share a band of B's columns, so tiles
  that run at the same time reuse the same A rows and B columns from L2 instead of DRAM;
- the epilogue (bias + GELU) runs on the fp32 accumulator in registers before the one store: fusing it
  costs no extra memory traffic, where eager PyTorch writes the matmul's output and reads it back for the
  GELU: ``2*M*N*itemsize`` extra bytes (``4*M*N*itemsize`` when the bias is a separate add too).

Two kernels, one choice (:func:`_pick_kernel`):

``_matmul_tma_persistent_kernel`` (Hopper and newer, fp16/bf16, TMA-aligned operands): the fast path.
  A *persistent* grid, one program per SM, each walking tiles ``start, start + NUM_SMS, ...`` with
  ``tl.range(..., flatten=True)``: the compiler flattens the tile loop and the K loop into one pipelined
  loop, so the loads of the next tile's first K steps are in flight while this tile's epilogue runs
  (a one-tile-per-program grid pays each tile's prologue and epilogue in full: at 16384x4096x4096 a
  128x256 tile has 64 K steps, and the un-overlapped epilogue cost ~20% against cuBLAS). Operands come
  through TMA tensor descriptors (the copy engine moves whole tiles into shared memory, out-of-range rows
  and the K tail read as zeros, so the kernel has no masks); the epilogue can run in two ``BLOCK_N / 2``
  halves (``EPILOGUE_SUBTILE``: fewer live registers, a smaller staging tile, the first half's TMA store
  under way while the second is computed), which the autotuner weighs against storing the whole tile. ``WARP_SPECIALIZE`` asks the compiler to give loads and MMAs their own warps: on
  by default on Blackwell, where the tutorial's kernels gain from it; on Hopper triton 3.6 leaves this
  kernel unpartitioned (identical PTX with it on or off, checked by compiling for sm_90a), so it is off.
``_matmul_kernel``: one program per tile, pointer loads, masks: any strides, any dtype, and the kernel
  that runs under the Triton interpreter (which has no TMA hardware to model timing on anyway).

Any M, N, K (odd ones too). On the GPU the tile shape is autotuned per (M, N, K, dtype, epilogue, layout)
(``COURSE_AUTOTUNE_MAX=N`` keeps the first N - 1 configs and the last); under the interpreter one small fixed config runs (so
tiny test shapes still exercise several tiles, the K tail and the grouped ordering), with dots upcast to
fp32 (``course.triton_compat.dot``).
"""
from __future__ import annotations

import math

import course  # noqa: F401  (first: sets TRITON_INTERPRET=1 without a GPU)
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from course.device import INTERPRET
from course.triton_compat import autotune, dot
from kernels_ref._launch import BoundLaunches, CompiledLaunch, cdiv, unchecked_descriptor
from kernels_ref._triton_math import gelu_tanh, gelu_tanh_fast
from kernels_ref._validate import cuda_capability_major, cuda_sm_count

try:  # host-side TMA descriptors: triton >= 3.4
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # pragma: no cover - older triton: the pointer kernel does everything
    TensorDescriptor = None

_SUPPORTED = (torch.float16, torch.bfloat16, torch.float32)


# --------------------------------------------------------------------------------------------------
# Shared pieces: the grouped tile order and the epilogue
# --------------------------------------------------------------------------------------------------

@triton.jit
def _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """(row, column) of tile ``tile_id`` in grouped order: GROUP_M rows of tiles walk one column band.

    Row-major order (GROUP_M = 1) sweeps a whole row of tiles, so the tiles in flight together read
    1 row band of A and *every* column band of B; grouped, they read GROUP_M row bands and only a few
    column bands, which L2 keeps between them.
    """
    tiles_per_group = GROUP_M * num_pid_n
    group = tile_id // tiles_per_group
    first_pid_m = group * GROUP_M
    group_rows = min(num_pid_m - first_pid_m, GROUP_M)  # the last group may be shorter
    pid_m = first_pid_m + (tile_id % tiles_per_group) % group_rows
    pid_n = (tile_id % tiles_per_group) // group_rows
    return pid_m, pid_n


@triton.jit
def _epilogue(acc, bias_ptr, offs_n, N, HAS_BIAS: tl.constexpr, GELU: tl.constexpr,
              r_ptr=None, offs_m=None, M=0, stride_rm=0, HAS_RESIDUAL: tl.constexpr = False,
              FAST_GELU: tl.constexpr = False):
    """bias + GELU (+ a residual tile) on the fp32 accumulator tile, in registers: no memory traffic but
    the bias row (and the residual's [BLOCK_M, BLOCK_N] tile, whose rows are contiguous). ``FAST_GELU``:
    the hardware tanh (``gelu_tanh_fast``), for bfloat16 outputs of compiled kernels."""
    if HAS_BIAS:
        bias = tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0)
        acc += bias.to(tl.float32)[None, :]
    if GELU:
        if FAST_GELU:
            acc = gelu_tanh_fast(acc)
        else:
            acc = gelu_tanh(acc)
    if HAS_RESIDUAL:
        r_ptrs = r_ptr + offs_m.to(tl.int64)[:, None] * stride_rm + offs_n[None, :]
        mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
        acc += tl.load(r_ptrs, mask=mask, other=0.0).to(tl.float32)
    return acc


# --------------------------------------------------------------------------------------------------
# The fast path: persistent, TMA descriptors, sub-tiled epilogue (Hopper and newer)
# --------------------------------------------------------------------------------------------------

def _set_block_shapes(nargs):
    """Autotune pre-hook: the descriptors' block shapes follow the config being launched."""
    bm, bn, bk = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    nargs["a_desc"].block_shape = [bm, bk]
    nargs["b_desc"].block_shape = [bn, bk] if nargs["B_KMAJOR"] else [bk, bn]
    nargs["c_desc"].block_shape = [bm, bn // 2] if nargs["EPILOGUE_SUBTILE"] else [bm, bn]


def _tma_config(bm, bn, bk, stages, warps=8, subtile=True, group_m=8):
    meta = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group_m, "EPILOGUE_SUBTILE": subtile}
    return triton.Config(meta, num_warps=warps, num_stages=stages, pre_hook=_set_block_shapes)


def _tma_configs():
    """Hopper tile shapes (228 KB shared memory per SM, wgmma on 64-row warpgroup tiles).

    Shared memory: num_stages * (BLOCK_M + BLOCK_N) * BLOCK_K * 2 bytes of operand buffers (bf16), plus
    the epilogue's staging tile for the TMA store (BLOCK_M * BLOCK_N / 2 * 2 bytes when sub-tiled):
    128x256x64 is 48 KB a stage (3 stages 144 KB, 4 stages 192 KB) + 32 KB; 128x128x64 is 32 KB a stage.
    8 warps = two warpgroups, each holding half of the fp32 accumulator: 128x256 is 128 registers per
    thread for the accumulator alone (ptxas: 180 in all with bias + GELU, no spills; triton 3.6, sm_90a).
    The first config is the likely winner (``COURSE_AUTOTUNE_MAX=2`` keeps it and the last): in
    ``probes.probe_matmul_configs`` on an H100 and an H200 (results/*-2026-11-23/probe-matmul.log) a whole
    128x256 tile stored at once (no sub-tiling: its 64 KB staging tile leaves room for 3 stages, not 4) and
    GROUP_M 16 ran fastest at 16384x4096x4096 and at the two other shapes probed, 3-5% ahead of the
    sub-tiled 3-stage config that autotuning used to pick.
    """
    return [_tma_config(bm, bn, bk, stages, subtile=subtile, group_m=group_m)
            for bm, bn, bk, stages, subtile, group_m in [(128, 256, 64, 3, False, 16), (128, 256, 64, 4, True, 16),
                                                         (128, 128, 64, 4, True, 8), (128, 128, 64, 3, True, 8)]]


# Under the interpreter (tests force this path to check its indexing): 16x32x16 tiles, a 2-row group.
_TMA_INTERPRET_CONFIG = _tma_config(16, 32, 16, 1, warps=4, group_m=2)


@triton.jit
def _matmul_tma_persistent_body(
    a_desc, b_desc, c_desc, bias_ptr,
    M, N, K,
    HAS_BIAS: tl.constexpr, GELU: tl.constexpr, B_KMAJOR: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    EPILOGUE_SUBTILE: tl.constexpr, WARP_SPECIALIZE: tl.constexpr, NUM_SMS: tl.constexpr,
    r_ptr=None, stride_rm=0, HAS_RESIDUAL: tl.constexpr = False, FLATTEN: tl.constexpr = True,
    FAST_GELU: tl.constexpr = False,
):
    start = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    k_steps = tl.cdiv(K, BLOCK_K)
    # The epilogue recomputes its tile's coordinates from its own counter instead of reusing the main
    # loop's: after flattening, the loads of tile i+1 are issued while tile i's epilogue runs.
    tile_out = start - NUM_SMS
    for tile_id in tl.range(start, num_tiles, NUM_SMS, flatten=FLATTEN, warp_specialize=WARP_SPECIALIZE):
        pid_m, pid_n = _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_steps):
            off_k = ki * BLOCK_K
            a = a_desc.load([off_m, off_k])          # [BLOCK_M, BLOCK_K]; rows >= M and k >= K read 0
            if B_KMAJOR:                              # weight [N, K]: the nn.Linear layout
                acc = dot(a, b_desc.load([off_n, off_k]).T, acc)
            else:                                     # b [K, N] row-major
                acc = dot(a, b_desc.load([off_k, off_n]), acc)

        tile_out += NUM_SMS
        pid_m, pid_n = _tile_coords(tile_out, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        offs_m = off_m + tl.arange(0, BLOCK_M)
        if EPILOGUE_SUBTILE:
            # [BM, BN] -> two [BM, BN/2] halves: half the epilogue's live registers, and the first
            # half's TMA store runs while the second half's bias + GELU are computed.
            halves = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
            acc0, acc1 = tl.split(halves)
            offs0 = off_n + tl.arange(0, BLOCK_N // 2)
            acc0 = _epilogue(acc0, bias_ptr, offs0, N, HAS_BIAS, GELU, r_ptr, offs_m, M, stride_rm, HAS_RESIDUAL,
                             FAST_GELU)
            c_desc.store([off_m, off_n], acc0.to(c_desc.dtype))   # TMA clips rows >= M, columns >= N
            acc1 = _epilogue(acc1, bias_ptr, offs0 + BLOCK_N // 2, N, HAS_BIAS, GELU, r_ptr, offs_m, M, stride_rm,
                             HAS_RESIDUAL, FAST_GELU)
            c_desc.store([off_m, off_n + BLOCK_N // 2], acc1.to(c_desc.dtype))
        else:
            acc = _epilogue(acc, bias_ptr, off_n + tl.arange(0, BLOCK_N), N, HAS_BIAS, GELU, r_ptr, offs_m, M,
                            stride_rm, HAS_RESIDUAL, FAST_GELU)
            c_desc.store([off_m, off_n], acc.to(c_desc.dtype))


_matmul_tma_persistent_kernel = autotune(_tma_configs(), key=["M", "N", "K", "HAS_BIAS", "GELU", "B_KMAJOR", "WARP_SPECIALIZE",
                                                              "HAS_RESIDUAL"],
                                         fallback=_TMA_INTERPRET_CONFIG)(_matmul_tma_persistent_body)


# --------------------------------------------------------------------------------------------------
# The portable path: one program per tile, pointer loads (any strides, any dtype, the interpreter)
# --------------------------------------------------------------------------------------------------

def _hopper_configs():
    """Tile shapes for the one-tile-per-program kernel on Hopper (see _tma_configs for the arithmetic).

    Smaller tiles are there for shapes where 128x256 leaves SMs idle (few tiles) and for the fp32
    (tf32) path, which needs twice the bytes.
    """
    cfg = []
    for bm, bn, bk, warps, stages in [
        (128, 256, 64, 8, 3),
        (128, 256, 64, 8, 4),
        (256, 128, 64, 8, 3),
        (128, 128, 64, 8, 4),
        (128, 128, 64, 4, 4),
        (128, 128, 32, 4, 4),
        (128, 64, 64, 4, 4),
        (64, 128, 64, 4, 4),
        (64, 64, 64, 4, 3),
    ]:
        cfg.append(triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8},
                                 num_warps=warps, num_stages=stages))
    return cfg


# (BLOCK_N, BLOCK_K, num_warps, num_stages) of 16-row tiles that stream a weight at decode: the few-row
# matmul below and int8_weight_linear (kernels_ref.quant) both tune over these.
SKINNY_TILES = tuple((bn, bk, w, s) for bn, bk in [(32, 256), (64, 256), (64, 128), (32, 512), (128, 128)]
                     for w, s in [(4, 4), (4, 6), (8, 4)])


def _skinny_configs():
    """Tiles for a few rows (M <= SKINNY_MAX_M: decode, where the matmul is the weight's bytes over the
    bandwidth): 16 rows, narrow column blocks so that N / BLOCK_N programs cover the SMs (N = 1024 at
    BLOCK_N = 32: 32 programs, where the persistent kernel's 128-256 column tiles make 4-8), and
    BLOCK_N * BLOCK_K * num_stages weight bytes in flight per program (SKINNY_TILES)."""
    return [triton.Config({"BLOCK_M": 16, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 1}, num_warps=w, num_stages=s)
            for bn, bk, w, s in SKINNY_TILES]


SKINNY_MAX_M = 16


# Under the interpreter: small tiles so that a 37x45x29 problem still spans several tiles in M and N,
# a K loop with a masked tail, and a GROUP_M smaller than the grid (the grouped ordering is exercised).
_INTERPRET_CONFIG = triton.Config({"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 16, "GROUP_M": 2},
                                  num_warps=4, num_stages=1)


@triton.jit
def _matmul_body(
    a_ptr, b_ptr, c_ptr, bias_ptr,
    M, N, K,
    stride_am, stride_ak,
    stride_bk, stride_bn,
    stride_cm, stride_cn,
    HAS_BIAS: tl.constexpr, GELU: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr, EVEN_K: tl.constexpr,
    r_ptr=None, stride_rm=0, HAS_RESIDUAL: tl.constexpr = False,
):
    pid_m, pid_n = _tile_coords(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    # Rows/columns past the edge are clamped to a valid index (modulo) for the *loads*, so the hot loop
    # needs no M/N masks; their results land in rows/columns that the masked store drops.
    rows = (offs_m % M).to(tl.int64)
    cols = (offs_n % N).to(tl.int64)
    a_ptrs = a_ptr + rows[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + cols[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            k_left = K - k * BLOCK_K
            a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    acc = _epilogue(acc, bias_ptr, offs_n, N, HAS_BIAS, GELU, r_ptr, offs_m, M, stride_rm, HAS_RESIDUAL)
    c_ptrs = c_ptr + offs_m.to(tl.int64)[:, None] * stride_cm + offs_n[None, :] * stride_cn
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)


_even_k = triton.heuristics({"EVEN_K": lambda args: args["K"] % args["BLOCK_K"] == 0})
_matmul_kernel = autotune(configs=_hopper_configs(), key=["M", "N", "K", "HAS_BIAS", "GELU", "HAS_RESIDUAL"],
                          fallback=_INTERPRET_CONFIG)(_even_k(_matmul_body))
# The first Triton matmul a learner writes: one small fixed tile, row-major tile order (GROUP_M 1), no
# tuning. The autograder's calibration times it as matmul's "naive" version.
_UNTUNED_CONFIG = triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 1},
                                num_warps=4, num_stages=2)
_matmul_kernel_untuned = autotune(configs=[_UNTUNED_CONFIG], key=["M", "N", "K", "HAS_BIAS", "GELU"],
                                  fallback=_INTERPRET_CONFIG)(_even_k(_matmul_body))
_matmul_kernel_skinny = autotune(configs=_skinny_configs(), key=["M", "N", "K", "HAS_BIAS", "GELU", "HAS_RESIDUAL"],
                                 fallback=_INTERPRET_CONFIG)(_even_k(_matmul_body))
# The tuned pointer kernels launched directly after each specialization's first call (kernels_ref._launch);
# the untuned one stays a learner's plain launch, as the calibration times it.
_MATMUL_POINTER = BoundLaunches(_matmul_kernel)
_MATMUL_SKINNY = BoundLaunches(_matmul_kernel_skinny)


# --------------------------------------------------------------------------------------------------
# Launchers
# --------------------------------------------------------------------------------------------------

def _tma_operand(t: torch.Tensor) -> bool:
    """TMA's rules for a 2-D operand: unit inner stride, 16-byte aligned base and row stride."""
    es = t.element_size()
    return t.stride(1) == 1 and t.data_ptr() % 16 == 0 and (t.stride(0) * es) % 16 == 0


def _pick_kernel(a: torch.Tensor, b: torch.Tensor) -> str:
    """The one place that decides which kernel runs: "tma" (persistent, TMA descriptors), "skinny" (the
    pointer kernel with few-row tiles) or "pointer".

    TMA needs a compiled kernel on Hopper or newer (the interpreter runs the pointer kernel: it models no
    TMA hardware, and its speed is not the point there), fp16/bf16 (the tuned tile shapes assume 2-byte
    elements), a row-major ``a``, ``b`` row-major or a transposed view of a row-major ``[N, K]`` weight,
    and 16-byte aligned rows (K and N multiples of 8). Up to SKINNY_MAX_M rows of 16-bit data on Hopper
    take the skinny tiles instead (decode: the weight's bytes spread over more SMs). Everything else
    takes the pointer kernel.
    """
    if INTERPRET or TensorDescriptor is None or a.device.type != "cuda":
        return "pointer"
    if cuda_capability_major(a.device) < 9 or a.dtype not in (torch.float16, torch.bfloat16):
        return "pointer"
    if a.shape[0] <= SKINNY_MAX_M:
        return "skinny"
    n = b.shape[1]
    b_ok = _tma_operand(b) or _tma_operand(b.t())
    return "tma" if _tma_operand(a) and b_ok and (n * a.element_size()) % 16 == 0 else "pointer"


def _residual_args(residual) -> dict:
    """The epilogue's residual arguments (rows contiguous), or none: the kernels' defaults skip it."""
    if residual is None:
        return {}
    return {"r_ptr": residual, "stride_rm": residual.stride(0), "HAS_RESIDUAL": True}


def _tma_flags(a, b, bias, gelu: bool, warp_specialize: bool | None, residual) -> dict:
    """The TMA kernel's flags (constexprs and the residual's row stride) for these operands."""
    if warp_specialize is None:
        warp_specialize = cuda_capability_major(a.device) >= 10
    flags = dict(HAS_BIAS=bias is not None, GELU=gelu, B_KMAJOR=b.stride(1) != 1, NUM_SMS=cuda_sm_count(a.device),
                 WARP_SPECIALIZE=warp_specialize, FAST_GELU=gelu and not INTERPRET and a.dtype == torch.bfloat16)
    if residual is not None:
        flags.update(stride_rm=residual.stride(0), HAS_RESIDUAL=True)
    return flags


def _tma_descriptors(a, b, c, block_shapes=((16, 16),) * 3) -> tuple:
    """Host descriptors of a, b (``weight [N, K]`` itself when b is its transposed view) and c. The
    autotuner's pre-hook (``_set_block_shapes``) sets the block shapes of the config it launches, so a
    first call passes placeholders."""
    b_rows = b.t() if b.stride(1) != 1 else b
    return tuple(TensorDescriptor.from_tensor(t, list(shape)) for t, shape in zip((a, b_rows, c), block_shapes))


def _tma_key(a, b, bias, residual, flags: dict) -> tuple:
    """Everything the TMA kernel's compiled specialization depends on: the flags, the device, the dtype,
    M, N, K and the operands' strides (values, so their divisibility too), the bias's and the residual's
    alignment; and the operands' alignment, which TMA's descriptors require (``_pick_kernel``)."""
    aligned = lambda t: t is None or t.data_ptr() % 16 == 0  # noqa: E731
    return (a.device.index, a.dtype, *a.shape, b.shape[1], *a.stride(), *b.stride(), aligned(a), aligned(b),
            aligned(bias), aligned(residual), *flags.items())


# _tma_key -> the compiled kernel of the config the autotuner chose for that key, bound for launching
# (kernels_ref._launch); made on the key's first call, after the autotuned launch has tuned and compiled.
_TMA_LAUNCHES: dict = {}
_TMA_ARGS = ("a_desc", "b_desc", "c_desc", "bias_ptr", "M", "N", "K")
_TMA_RUNTIME_ARGS = ("a_desc", "b_desc", "c_desc", "bias_ptr", "r_ptr")


def _launch_tma(a, b, c, bias, gelu: bool, warp_specialize: bool | None = None, residual=None,
                config: dict | None = None) -> None:
    """The persistent TMA kernel: autotuned on a key's first call, afterwards the chosen config's compiled
    kernel launched directly (the autotuner's and the JIT's Python cost 100-200 us a call here:
    ``probes.matmul_launch_cost``); or, with ``config`` (meta-parameters, ``num_warps``, ``num_stages``;
    probes.probe_matmul_configs), that one configuration through the JIT."""
    M, K = a.shape
    N = b.shape[1]
    flags = _tma_flags(a, b, bias, gelu, warp_specialize, residual)
    bias_arg = bias if bias is not None else c  # never read without HAS_BIAS
    # The interpreter has no compiled kernel to bind (and the tests force this kernel there on purpose).
    key = _tma_key(a, b, bias, residual, flags) if config is None and not INTERPRET else None
    bound = _TMA_LAUNCHES.get(key)
    if bound is not None:  # TMA's rules were checked on this key's first call (its strides and alignment)
        operands = (a, b.t() if flags["B_KMAJOR"] else b, c)
        descs = [unchecked_descriptor(TensorDescriptor, t, shape) for t, shape in zip(operands, bound.block_shapes)]
        bound(*descs, bias_arg, residual)
        return
    descs = _tma_descriptors(a, b, c)
    num_sms = flags["NUM_SMS"]

    def grid(meta):
        return (min(num_sms, cdiv(M, meta["BLOCK_M"]) * cdiv(N, meta["BLOCK_N"])),)

    args = (*descs, bias_arg, M, N, K)
    r_arg = {} if residual is None else {"r_ptr": residual}
    if config is None:
        _matmul_tma_persistent_kernel[grid](*args, **r_arg, **flags)
        if key is not None:
            _TMA_LAUNCHES[key] = _bind_tma(_matmul_tma_persistent_kernel.best_config, args, r_arg, flags, grid)
        return
    meta = {"GROUP_M": 8, "EPILOGUE_SUBTILE": True, **config}
    launch = {k: meta.pop(k) for k in ("num_warps", "num_stages", "num_ctas") if k in meta}
    _set_block_shapes({**meta, **flags, "a_desc": descs[0], "b_desc": descs[1], "c_desc": descs[2]})
    _matmul_tma_persistent_body[grid(meta)](*args, **r_arg, **flags, **meta, **launch)


def _bind_tma(config: triton.Config, args: tuple, r_arg: dict, flags: dict, grid) -> CompiledLaunch:
    """The compiled kernel of ``config`` (the autotuner's choice) for these arguments, bound for launching,
    with the block shapes its descriptors need."""
    values = {**dict(zip(_TMA_ARGS, args)), **r_arg, **flags, **config.all_kwargs()}
    config.pre_hook(values)  # this config's block shapes, as the autotuner set them for its launch
    bound = CompiledLaunch(_matmul_tma_persistent_body, grid(config.kwargs), values, _TMA_RUNTIME_ARGS)
    bound.block_shapes = tuple(list(values[name].block_shape) for name in _TMA_ARGS[:3])
    return bound


def _launch_pointer(a, b, c, bias, gelu: bool, kernel=None, residual=None) -> None:
    M, K = a.shape
    N = b.shape[1]

    def grid(meta):
        return (cdiv(M, meta["BLOCK_M"]) * cdiv(N, meta["BLOCK_N"]),)

    (kernel or _MATMUL_POINTER)[grid](
        a, b, c, bias if bias is not None else c,
        M, N, K,
        a.stride(0), a.stride(1),
        b.stride(0), b.stride(1),
        c.stride(0), c.stride(1),
        HAS_BIAS=bias is not None, GELU=gelu, **_residual_args(residual),
    )


def _launch(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None, gelu: bool,
            kernel: str | None = None, warp_specialize: bool | None = None,
            residual: torch.Tensor | None = None, config: dict | None = None) -> torch.Tensor:
    """C = epilogue(a @ b) [+ residual] for 2-D a [M, K], b [K, N] of any strides (residual [M, N]); C is a
    fresh contiguous [M, N].

    ``kernel`` forces "tma", "skinny" or "pointer" (tests and benchmarks); by default :func:`_pick_kernel`
    decides.
    ``config`` launches the TMA kernel with that one configuration instead of autotuning (probes).
    """
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    if M == 0 or N == 0:
        return c
    if K == 0:  # an empty sum: the epilogue of zero
        acc = torch.zeros((M, N), device=a.device, dtype=torch.float32)
        if bias is not None:
            acc += bias.float()
        acc = F.gelu(acc, approximate="tanh") if gelu else acc
        return (acc if residual is None else acc + residual.float()).to(a.dtype)
    if bias is not None and bias.stride(0) != 1:
        bias = bias.contiguous()
    if residual is not None and residual.stride(1) != 1:
        residual = residual.contiguous()
    choice = kernel or _pick_kernel(a, b)
    if choice == "tma":
        _launch_tma(a, b, c, bias, gelu, warp_specialize, residual, config)
    else:
        _launch_pointer(a, b, c, bias, gelu, kernel=_MATMUL_SKINNY if choice == "skinny" else None,
                        residual=residual)
    return c


def _check_operand(name: str, t: torch.Tensor, dims: int) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() != dims:
        raise ValueError(f"{name} must be {dims}-D, got shape {tuple(t.shape)}")
    if t.dtype not in _SUPPORTED:
        raise TypeError(f"{name} has dtype {t.dtype}; supported: float16, bfloat16, float32")


def _check_matmul(a: torch.Tensor, b: torch.Tensor) -> None:
    _check_operand("a", a, 2)
    _check_operand("b", b, 2)
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"inner dimensions differ: a is {tuple(a.shape)}, b is {tuple(b.shape)}")
    if a.dtype != b.dtype or a.device != b.device:
        raise ValueError(f"a and b must share dtype and device, got {a.dtype}/{a.device} and {b.dtype}/{b.device}")


def matmul(a: torch.Tensor, b: torch.Tensor, *, kernel: str | None = None) -> torch.Tensor:
    """``a @ b`` for a ``[M, K]``, b ``[K, N]`` (same dtype and device, any strides), fp32 accumulation."""
    _check_matmul(a, b)
    return _launch(a, b, None, gelu=False, kernel=kernel)


def matmul_untuned(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` the way a first Triton matmul does it: 32x32x32 tiles, row-major tile order, no tuning."""
    _check_matmul(a, b)
    c = torch.empty((a.shape[0], b.shape[1]), device=a.device, dtype=a.dtype)
    if c.numel() and a.shape[1]:
        _launch_pointer(a, b, c, None, False, kernel=_matmul_kernel_untuned)
    elif c.numel():
        c.zero_()
    return c


def linear_bias_gelu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, *,
                     kernel: str | None = None, warp_specialize: bool | None = None,
                     config: dict | None = None) -> torch.Tensor:
    """``gelu_tanh(x @ weight.T + bias)``; x ``[..., K]``, weight ``[N, K]``, bias ``[N]``; one launch.

    ``weight.T`` is passed as a strided view (no copy): the TMA kernel describes ``weight`` itself and
    transposes each ``[BLOCK_N, BLOCK_K]`` tile in shared memory (free for wgmma); the pointer kernel reads
    B tiles along K, weight's contiguous dimension. ``kernel`` forces a path ("tma", "skinny" or "pointer") and
    ``warp_specialize`` the TMA kernel's loop attribute, for benchmarks and tests; ``config`` one launch
    configuration of the TMA kernel (:func:`_launch_tma`).
    """
    if not isinstance(x, torch.Tensor) or x.dim() < 1:
        raise ValueError("x must be a tensor with at least one dimension [..., in_features]")
    _check_operand("weight", weight, 2)
    _check_operand("bias", bias, 1)
    N, K = weight.shape
    if x.shape[-1] != K:
        raise ValueError(f"x has {x.shape[-1]} features but weight is {tuple(weight.shape)} ([out, in])")
    if bias.shape[0] != N:
        raise ValueError(f"bias has {bias.shape[0]} entries, weight has {N} output features")
    if not (x.dtype == weight.dtype == bias.dtype):
        raise ValueError(f"x, weight and bias must share a dtype, got {x.dtype}, {weight.dtype}, {bias.dtype}")
    if x.dtype not in _SUPPORTED:
        raise TypeError(f"x has dtype {x.dtype}; supported: float16, bfloat16, float32")
    if not (x.device == weight.device == bias.device):
        raise ValueError("x, weight and bias must be on the same device")
    rows = math.prod(x.shape[:-1])
    x2 = x.reshape(rows, K)  # a view when it can be; strides are passed to the kernel either way
    y = _launch(x2, weight.t(), bias, gelu=True, kernel=kernel, warp_specialize=warp_specialize, config=config)
    return y.reshape(*x.shape[:-1], N)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, gelu: bool = False,
           residual: torch.Tensor | None = None, *, kernel: str | None = None) -> torch.Tensor:
    """``[gelu](x @ weight.T + bias) [+ residual]``; x ``[..., K]``, weight ``[N, K]``, bias ``[N]`` or None,
    residual shaped like the output ``[..., N]`` or None; one launch (``weight.T`` read in place, as in
    ``linear_bias_gelu``)."""
    if not isinstance(x, torch.Tensor) or x.dim() < 1:
        raise ValueError("x must be a tensor with at least one dimension [..., in_features]")
    _check_operand("weight", weight, 2)
    N, K = weight.shape
    if x.shape[-1] != K:
        raise ValueError(f"x has {x.shape[-1]} features but weight is {tuple(weight.shape)} ([out, in])")
    if x.dtype not in _SUPPORTED:
        raise TypeError(f"x has dtype {x.dtype}; supported: float16, bfloat16, float32")
    for name, t, shape in (("bias", bias, (N,)), ("residual", residual, (*x.shape[:-1], N))):
        if t is None:
            continue
        _check_operand(name, t, len(shape))
        if tuple(t.shape) != shape:
            raise ValueError(f"{name} has shape {tuple(t.shape)}, expected {shape}")
    if any(t is not None and (t.dtype != x.dtype or t.device != x.device) for t in (weight, bias, residual)):
        raise ValueError("x, weight, bias and residual must share a dtype and a device")
    rows = math.prod(x.shape[:-1])
    r2 = residual.reshape(rows, N) if residual is not None else None
    y = _launch(x.reshape(rows, K), weight.t(), bias, gelu=gelu, kernel=kernel, residual=r2)
    return y.reshape(*x.shape[:-1], N)


# --------------------------------------------------------------------------------------------------
# References (the readable definitions) and benchmark cases
# --------------------------------------------------------------------------------------------------

def matmul_torch(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a @ b


def linear_bias_gelu_torch(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return F.gelu(F.linear(x, weight, bias), approximate="tanh")


def linear_bias_gelu_cublaslt(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """cuBLASLt's own fused epilogue (bias + GELU, tanh form) behind one torch call, on CUDA.

    On the CPU that call applies the erf GELU instead (up to 5e-4 away); here it is addmm + tanh GELU,
    which is what the CUDA call computes when cuBLASLt cannot take the shape."""
    if x.device.type != "cuda":
        return F.gelu(torch.addmm(bias, x, weight.t()), approximate="tanh")
    return torch._addmm_activation(bias, x, weight.t(), use_gelu=True)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def matmul_case(n: int, dtype=torch.bfloat16, compiled=None, goals: bool = True):
    """One square ``n^3`` matmul case: triton (both kernels) vs cuBLAS (eager) and torch.compile."""
    from course import DEVICE
    from kernels_ref.benchmarking import BenchCase, Goal

    def make():
        return torch.randn(n, n, device=DEVICE, dtype=dtype), torch.randn(n, n, device=DEVICE, dtype=dtype)

    candidates = {"triton": matmul, "triton_tile": lambda a, b: matmul(a, b, kernel="pointer"),
                  "eager": torch.matmul}
    if compiled is not None:
        candidates["compiled"] = compiled
    return BenchCase(
        op="matmul", label=f"{n}x{n}x{n} {_dtype_name(dtype)}", make_inputs=make, candidates=candidates,
        reference=lambda a, b: a.double() @ b.double(),
        flops=2 * n**3, sweep="N", sweep_value=n,
        goals=[Goal.faster("triton", "eager", 0.95)] if goals else [],
    )


def linear_bias_gelu_cases(M: int, N: int, K: int, dtype=torch.bfloat16, compiled=None, goals: bool = True):
    """Two cases on one shape (tokens M, out N, in K).

    1. The fused op checked against float64 and timed against what a user would pick instead: eager
       (F.linear + F.gelu: cuBLAS addmm, then a GELU kernel), torch.compile, cuBLASLt's fused epilogue
       (``torch._addmm_activation``); and against our own variants: warp specialization forced on
       (``triton_ws``: the default is off on Hopper) and the one-tile-per-program kernel (``triton_tile``);
       at decode sizes (M <= SKINNY_MAX_M), where the default takes the few-row tiles, also the
       persistent kernel (``triton_tma``).
    2. The same kernel against cuBLAS doing the *bare* matmul (no bias, no GELU): the goal's baseline,
       the speed of a free epilogue; ``triton_matmul_only`` is our kernel with its epilogue switched off
       (the epilogue's own cost). Their outputs are not the fused op's, so that case checks nothing
       (correctness is checked in the first).
    3. The fused kernel, eager, cuBLASLt's epilogue and the bare matmul by the GPU's time alone
       (``clock="gpu"``): the kernel's speed apart from its launch, which the protocol charges when it takes
       the CPU longer than the L2 flush takes the GPU (a Triton launch costs ~70 us of Python here against
       ~15-25 us for cuBLAS's: ``probes.matmul_launch_cost``).
    """
    from course import DEVICE
    from kernels_ref.benchmarking import BenchCase, Goal

    def make():
        x = torch.randn(M, K, device=DEVICE, dtype=dtype)
        w = torch.randn(N, K, device=DEVICE, dtype=dtype) / K**0.5  # unit-scale pre-activations
        b = torch.randn(N, device=DEVICE, dtype=dtype)
        return x, w, b

    label = f"{M}x{N}x{K} {_dtype_name(dtype)}"
    flops = 2 * M * N * K
    candidates = {
        "triton": linear_bias_gelu,
        "triton_ws": lambda x, w, b: linear_bias_gelu(x, w, b, kernel="tma", warp_specialize=True),
        "triton_tile": lambda x, w, b: linear_bias_gelu(x, w, b, kernel="pointer"),
        "eager": linear_bias_gelu_torch,
        "addmm_gelu": linear_bias_gelu_cublaslt,
    }
    if M <= SKINNY_MAX_M:  # the default is the few-row tiles here: the persistent kernel beside them
        candidates["triton_tma"] = lambda x, w, b: linear_bias_gelu(x, w, b, kernel="tma")
    if course.INTERPRET or (course.ON_GPU and torch.cuda.get_device_capability()[0] < 9):
        del candidates["triton_ws"]  # no TMA here
        candidates.pop("triton_tma", None)
    if compiled is not None:
        candidates["compiled"] = compiled
    bare = {"triton": linear_bias_gelu, "triton_matmul_only": lambda x, w, b: matmul(x, w.t()),
            "cublas_matmul_only": lambda x, w, b: x @ w.t()}
    gpu_time = {name: candidates[name] for name in ("triton", "eager", "addmm_gelu")}
    gpu_time["cublas_matmul_only"] = bare["cublas_matmul_only"]
    return [
        BenchCase(
            op="linear_bias_gelu", label=label, make_inputs=make, candidates=candidates,
            reference=lambda x, w, b: linear_bias_gelu_torch(x.double(), w.double(), b.double()),
            flops=flops, goals=[Goal.faster("triton", "eager")] if goals else [],
        ),
        BenchCase(
            op="linear_bias_gelu", label=f"{label} vs bare matmul", make_inputs=make,
            candidates=bare, reference=None,
            flops=flops, goals=[Goal.faster("triton", "cublas_matmul_only", 0.95)] if goals else [],
        ),
        BenchCase(
            op="linear_bias_gelu", label=f"{label} GPU time", make_inputs=make, candidates=gpu_time,
            reference=None, flops=flops, clock="gpu",  # outputs checked in the first case
            goals=[Goal.faster("triton", "eager"), Goal.faster("triton", "cublas_matmul_only", 0.95)] if goals else [],
        ),
    ]


def bench_cases(quick: bool = False):
    """matmul at 8192^3 (plus a square sweep 1024..8192); linear_bias_gelu at transformer MLP shapes
    (tokens, out, in), all bf16: 16384 x 4096 x 4096 (the headline, with the goals); and in the full
    suite 16384 x 11008 x 4096 (LLaMA-7B's up-projection), 8192 x 4096 x 1024 (short K: the epilogue is a
    larger share, fusion gains most) and 16 x 16384 x 4096 (decode: the matmul is memory-bound on the
    weight, the epilogue's bytes are 0.4% of it, fusion gains nothing)."""
    compiled_matmul = torch.compile(matmul_torch)
    compiled_lbg = torch.compile(linear_bias_gelu_torch)
    cases = [matmul_case(n, compiled=compiled_matmul, goals=n == 8192)
             for n in ([8192] if quick else [1024, 2048, 4096, 8192])]
    shapes = [(16384, 4096, 4096)]
    if not quick:
        shapes += [(16384, 11008, 4096), (8192, 4096, 1024), (16, 16384, 4096)]
    for M, N, K in shapes:
        cases += linear_bias_gelu_cases(M, N, K, compiled=compiled_lbg, goals=(M, N, K) == shapes[0])
    return cases
