"""FlashAttention forward and backward (causal and not), as Triton kernels and an autograd.Function.

Tensors are ``[B, H, S, D]`` (batch, heads, sequence, head dim); ``o = softmax(q k^T * sm_scale) v``,
``lse`` = the natural-log log-sum-exp of each row of scaled scores, float32 ``[B, H, S]``.

Cost (non-causal; causal does about half): forward ``4*B*H*S*S*D`` FLOPs (two matmuls), backward
``10*B*H*S*S*D`` (five matmuls: recompute S, dV, dP, dQ, dK; counted as 2.5x forward). The naive version
materializes the ``S x S`` scores and probabilities: at B4 H32 S4096 that is 2 GiB per bf16 matrix, and
it reads and writes them several times, so it is memory-bound and O(S^2) in memory. Here the scores
live only in registers, one ``BLOCK_M x BLOCK_N`` tile at a time: device memory traffic is
``~4*B*H*S*D*itemsize`` bytes forward (q, k, v read, o written; k and v re-read from L2 per query block)
and memory is O(S): o and the ``lse`` vector (4 bytes per row) are all the forward keeps.

Forward (one program per ``BLOCK_M`` query rows of one (b, h)): the online softmax in base 2. The
scale is folded into ``log2(e)`` once (``qk_scale = sm_scale * log2 e``); on a whole tile the row max is
taken of the raw scores and scaled once, so each score costs one FMA and one ``exp2`` (the MUFU unit's
native op); the running max ``m`` and sum ``l`` rescale the accumulator only by ``exp2(m_old - m_new)``
per tile. Causal: key tiles strictly below the diagonal run with no mask; only the tiles that cross the
diagonal (and a ragged last tile when ``S`` is not a multiple of ``BLOCK_N``) pay for ``tl.where``; tiles
above the diagonal are never visited (half the FLOPs). On Hopper, from head dim 128, whole key and value
tiles come by TMA (``_tma_views``). What bounds it there: the exponentials (16 per clock per SM, against
4096 matmul FLOPs) take half the matmuls' time at D=128 and are not overlapped with them, which cuDNN
does by warp specialization (results/NOTES.md: its two matmuls alone run 1.07-1.14x cuDNN, the whole
forward 0.77x).

Backward by recomputation (no ``S x S`` matrix is ever stored; ``P = exp(S - lse)`` is rebuilt from
the saved ``lse``), deterministic (no atomics):
1. ``_bwd_preprocess``: ``delta = rowsum(dO * O)`` (= ``rowsum(dP * P)``), float32 ``[B, H, S]``;
2. ``_bwd_dkdv_kernel``: one program per ``BLOCK_N`` keys, looping over query tiles, accumulates
   ``dV += P^T dO`` and ``dK += dS^T Q`` with ``dS = P * (dP - delta)``, ``dP = dO V^T``;
3. ``_bwd_dq_kernel``: one program per ``BLOCK_M`` queries, looping over key tiles, ``dQ += dS K``.
Step 3 recomputes ``QK^T`` and ``dO V^T`` once more (7 matmuls of work instead of 5), the price of not
needing atomics on dQ; both kernels skip fully masked tiles and mask only the diagonal ones.

On the GPU the block shapes, warps and pipeline depth are autotuned among Hopper-minded configs; under
the interpreter small fixed blocks run (so the tiny test shapes cross full, diagonal and ragged tiles)
with dots upcast to fp32 (``course.triton_compat.dot``). Inputs of any strides are read in place.
"""
from __future__ import annotations

import course  # noqa: F401  (first: sets TRITON_INTERPRET=1 without a GPU)
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from course.triton_compat import autotune, dot
from kernels_ref._launch import BoundLaunches, cdiv
from kernels_ref._triton_math import LOG2E
from kernels_ref._validate import cuda_capability_major
from measure import reference

try:  # host-side TMA descriptors: triton >= 3.4
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # pragma: no cover - older triton: pointer loads only
    TensorDescriptor = None

_SUPPORTED = (torch.float16, torch.bfloat16, torch.float32)


def _set_kv_block_shapes(nargs):
    """Autotune pre-hook: with TMA loads (``kernel="tma"``) the key and value descriptors' block shape is
    the config's key tile, [BLOCK_N, HEAD_DIM]."""
    if nargs.get("TMA"):
        for name in ("K_DESC", "V_DESC"):
            nargs[name].block_shape = [nargs["BLOCK_N"], nargs["HEAD_DIM"]]


def _configs(pairs, pre_hook=None):
    return [
        triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w, num_stages=s, pre_hook=pre_hook)
        for bm, bn, w, s in pairs
    ]


# Forward: 128 query rows per program (a wgmma M of 64 per warpgroup, two warpgroups at num_warps 8),
# key tiles of 64 or 128. BLOCK_M must be a multiple of BLOCK_N (the causal split assumes it).
# Shared memory per stage: (BLOCK_N * D) * 2 tensors * 2 bytes: 64 KB for 128x128 at D=128, so 2-3 stages.
# Compiled for sm_90 (triton 3.9, no GPU): every config below lowers to wgmma with cp.async pipelining;
# 128x128 at D=128 with 8 warps and 3 stages takes 224 KB of shared memory (the limit is 227 KB) and 254
# registers; with 4 warps it spills, so that one is left out. Timed one by one on an H100 (probes.probe_attention,
# results/h100-2026-11-26/probe-attention*.log): 128x128/8 warps/3 stages and 64x64/4/3 lead at D=128,
# 64x64/4/3 and 128x64/8/3 at D=64; two stages, and 128x64 with 4 warps and 4 stages, were never ahead and
# are left out (fewer configs: less autotuning noise and time). The last, the smallest, fits float32.
_FWD_CONFIGS = _configs([
    (128, 128, 8, 3), (64, 64, 4, 3), (128, 64, 8, 3), (128, 64, 4, 3), (64, 32, 4, 4),
], pre_hook=_set_kv_block_shapes)
# dK/dV: few queries per step (BLOCK_M) against many keys held in registers (BLOCK_N); BLOCK_N must be
# a multiple of BLOCK_M. dQ: the mirror image; BLOCK_M a multiple of BLOCK_N.
_DKDV_CONFIGS = _configs([
    (64, 128, 8, 2), (64, 128, 8, 3), (32, 128, 4, 3), (32, 128, 8, 3),
    (64, 64, 4, 3), (32, 64, 4, 3), (16, 128, 4, 4),
])
_DQ_CONFIGS = _configs([
    (128, 64, 8, 2), (128, 64, 8, 3), (128, 32, 4, 3), (128, 32, 8, 3),
    (64, 64, 4, 3), (64, 32, 4, 3), (128, 16, 4, 4),
])
# Interpreter: small tiles so that S = 17, 64, 100 cross several full, diagonal and ragged tiles.
_FWD_INTERPRET = triton.Config({"BLOCK_M": 32, "BLOCK_N": 16}, num_warps=4, num_stages=1,
                               pre_hook=_set_kv_block_shapes)
_DKDV_INTERPRET = triton.Config({"BLOCK_M": 16, "BLOCK_N": 32}, num_warps=4, num_stages=1)
_DQ_INTERPRET = triton.Config({"BLOCK_M": 32, "BLOCK_N": 16}, num_warps=4, num_stages=1)

_EVEN = {
    "EVEN_M": lambda args: args["S"] % args["BLOCK_M"] == 0,
    "EVEN_N": lambda args: args["S"] % args["BLOCK_N"] == 0,
}


# ------------------------------------------------------------------------------------------- forward

@triton.jit
def _fwd_tiles(acc, l_i, m_i, q, k_base, v_base, stride_ks, stride_kd, stride_vs, stride_vd,
               offs_m, lo, hi, S, qk_scale, k_desc, v_desc, kv_row0,
               HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               MASK_CAUSAL: tl.constexpr, MASK_KV: tl.constexpr, TMA: tl.constexpr,
               SCALE_NONNEG: tl.constexpr):
    """Fold key tiles [lo, hi) into the running (acc, l, m) of one query tile. With TMA, a whole tile
    (every key < S: not MASK_KV) comes through the descriptors of the [B*H*S, D] views of k and v, row
    kv_row0 + start_n; a ragged last tile by masked pointer loads (a descriptor row past this head's S
    would be the next head's)."""
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    kt_ptrs = k_base + offs_n[None, :] * stride_ks + offs_d[:, None] * stride_kd  # K^T tile [D, BLOCK_N]
    v_ptrs = v_base + offs_n[:, None] * stride_vs + offs_d[None, :] * stride_vd   # V tile [BLOCK_N, D]
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        if MASK_KV:
            kt = tl.load(kt_ptrs + start_n * stride_ks, mask=cols[None, :] < S, other=0.0)
        elif TMA:
            kt = k_desc.load([kv_row0 + start_n, 0]).T
        else:
            kt = tl.load(kt_ptrs + start_n * stride_ks)
        qk = dot(q, kt, tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32))  # 2*BLOCK_M*BLOCK_N*D FLOPs
        # Every row sees at least one unmasked key in its first tile (key 0, or the diagonal), so
        # m_new is finite from the first tile on and exp2(m_i - m_new) never meets -inf - -inf.
        if MASK_CAUSAL or MASK_KV or not SCALE_NONNEG:
            s = qk * qk_scale  # scores in log2 units: one multiply by sm_scale*log2(e)
            if MASK_CAUSAL:
                s = tl.where(offs_m[:, None] >= cols[None, :], s, float("-inf"))
            if MASK_KV:
                s = tl.where(cols[None, :] < S, s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            p = tl.exp2(s - m_new[:, None])
        else:
            # A whole tile, scale >= 0 (it keeps the order): the row max of the raw scores scaled once,
            # then one FMA per score. 8% faster at D=128 on an H100 (results/NOTES.md, probe-attention).
            m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            p = tl.exp2(qk * qk_scale - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        if MASK_KV:
            v = tl.load(v_ptrs + start_n * stride_vs, mask=cols[:, None] < S, other=0.0)
        elif TMA:
            v = v_desc.load([kv_row0 + start_n, 0])
        else:
            v = tl.load(v_ptrs + start_n * stride_vs)
        acc = dot(p.to(v.dtype), v, acc)  # another 2*BLOCK_M*BLOCK_N*D FLOPs
        m_i = m_new
    return acc, l_i, m_i


@autotune(configs=_FWD_CONFIGS, key=["S", "HEAD_DIM", "CAUSAL", "TMA"], fallback=_FWD_INTERPRET)
@triton.heuristics(_EVEN)
@triton.jit
def _fwd_kernel(Q, K, V, O, LSE, sm_scale, H, S,
                stride_qb, stride_qh, stride_qs, stride_qd,
                stride_kb, stride_kh, stride_ks, stride_kd,
                stride_vb, stride_vh, stride_vs, stride_vd,
                stride_ob, stride_oh, stride_os, stride_od,
                K_DESC, V_DESC,
                CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                EVEN_M: tl.constexpr, EVEN_N: tl.constexpr, TMA: tl.constexpr = False,
                SCALE_NONNEG: tl.constexpr = True):
    # K_DESC, V_DESC: TMA descriptors of k and v seen as [B*H*S, D] when TMA, else unused (k and v again).
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    q_base = Q + b * stride_qb + h * stride_qh
    k_base = K + b * stride_kb + h * stride_kh
    v_base = V + b * stride_vb + h * stride_vh
    o_base = O + b * stride_ob + h * stride_oh

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q_ptrs = q_base + offs_m[:, None] * stride_qs + offs_d[None, :] * stride_qd
    if EVEN_M:
        q = tl.load(q_ptrs)
    else:
        q = tl.load(q_ptrs, mask=offs_m[:, None] < S, other=0.0)

    kv_row0 = bh * S  # this head's first row in the [B*H*S, D] views (TMA)
    qk_scale = sm_scale * LOG2E  # log2(e): exp(x * sm_scale) == exp2(x * qk_scale)
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)

    if CAUSAL:
        # Keys [0, start_m*BLOCK_M) are below the diagonal for every row of this tile: no mask.
        diag = start_m * BLOCK_M
        acc, l_i, m_i = _fwd_tiles(acc, l_i, m_i, q, k_base, v_base, stride_ks, stride_kd, stride_vs,
                                   stride_vd, offs_m, 0, diag, S, qk_scale, K_DESC, V_DESC, kv_row0,
                                   HEAD_DIM, BLOCK_M, BLOCK_N, False, False, TMA, SCALE_NONNEG)
        # The BLOCK_M / BLOCK_N tiles on the diagonal: causal mask (and the ragged end of the sequence).
        acc, l_i, m_i = _fwd_tiles(acc, l_i, m_i, q, k_base, v_base, stride_ks, stride_kd, stride_vs,
                                   stride_vd, offs_m, diag, tl.minimum(diag + BLOCK_M, S), S, qk_scale,
                                   K_DESC, V_DESC, kv_row0, HEAD_DIM, BLOCK_M, BLOCK_N, True, not EVEN_N, TMA,
                                   SCALE_NONNEG)
    else:
        n_full = (S // BLOCK_N) * BLOCK_N
        acc, l_i, m_i = _fwd_tiles(acc, l_i, m_i, q, k_base, v_base, stride_ks, stride_kd, stride_vs,
                                   stride_vd, offs_m, 0, n_full, S, qk_scale, K_DESC, V_DESC, kv_row0,
                                   HEAD_DIM, BLOCK_M, BLOCK_N, False, False, TMA, SCALE_NONNEG)
        if not EVEN_N:
            acc, l_i, m_i = _fwd_tiles(acc, l_i, m_i, q, k_base, v_base, stride_ks, stride_kd,
                                       stride_vs, stride_vd, offs_m, n_full, S, S, qk_scale,
                                       K_DESC, V_DESC, kv_row0, HEAD_DIM, BLOCK_M, BLOCK_N, False, True, TMA,
                                       SCALE_NONNEG)

    o = acc / l_i[:, None]
    lse = (m_i + tl.log2(l_i)) * 0.6931471805599453  # back to natural log: ln(x) = log2(x) * ln(2)
    o_ptrs = o_base + offs_m[:, None] * stride_os + offs_d[None, :] * stride_od
    lse_ptrs = LSE + bh.to(tl.int64) * S + offs_m
    if EVEN_M:
        tl.store(o_ptrs, o.to(O.dtype.element_ty))
        tl.store(lse_ptrs, lse)
    else:
        tl.store(o_ptrs, o.to(O.dtype.element_ty), mask=offs_m[:, None] < S)
        tl.store(lse_ptrs, lse, mask=offs_m < S)


# ------------------------------------------------------------------------------------------- backward

@triton.jit
def _bwd_preprocess(O, DO, DELTA, H, S,
                    stride_ob, stride_oh, stride_os, stride_od,
                    stride_db, stride_dh, stride_ds, stride_dd,
                    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    """delta = rowsum(dO * O) in fp32: reads 2*S*D*itemsize, writes 4*S bytes per (b, h); memory-bound."""
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    mask = offs_m[:, None] < S
    o = tl.load(O + b * stride_ob + h * stride_oh + offs_m[:, None] * stride_os + offs_d[None, :] * stride_od,
                mask=mask, other=0.0)
    do = tl.load(DO + b * stride_db + h * stride_dh + offs_m[:, None] * stride_ds + offs_d[None, :] * stride_dd,
                 mask=mask, other=0.0)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
    tl.store(DELTA + bh.to(tl.int64) * S + offs_m, delta, mask=offs_m < S)


@triton.jit
def _dkdv_tiles(dk, dv, k, v, q_base, do_base, lse_base, delta_base,
                stride_qs, stride_qd, stride_dos, stride_dod,
                offs_n, lo, hi, S, qk_scale,
                HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                MASK_CAUSAL: tl.constexpr, MASK_Q: tl.constexpr):
    """Accumulate dK, dV of one key tile over query tiles [lo, hi). Works on transposed tiles
    (keys along rows) so that dV += P^T dO and dK += dS^T Q are plain dots with no transposed store."""
    offs_m = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    qt_ptrs = q_base + offs_m[None, :] * stride_qs + offs_d[:, None] * stride_qd     # Q^T  [D, BLOCK_M]
    do_ptrs = do_base + offs_m[:, None] * stride_dos + offs_d[None, :] * stride_dod  # dO   [BLOCK_M, D]
    for start_m in range(lo, hi, BLOCK_M):
        rows = start_m + offs_m
        if MASK_Q:
            qt = tl.load(qt_ptrs + start_m * stride_qs, mask=rows[None, :] < S, other=0.0)
            do = tl.load(do_ptrs + start_m * stride_dos, mask=rows[:, None] < S, other=0.0)
            lse = tl.load(lse_base + rows, mask=rows < S, other=0.0)
            delta = tl.load(delta_base + rows, mask=rows < S, other=0.0)
        else:
            qt = tl.load(qt_ptrs + start_m * stride_qs)
            do = tl.load(do_ptrs + start_m * stride_dos)
            lse = tl.load(lse_base + rows)
            delta = tl.load(delta_base + rows)
        st = dot(k, qt, tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)) * qk_scale  # S^T in log2 units
        if MASK_CAUSAL:
            st = tl.where(rows[None, :] >= offs_n[:, None], st, float("-inf"))
        if MASK_Q:
            st = tl.where(rows[None, :] < S, st, float("-inf"))
        pt = tl.exp2(st - (lse * LOG2E)[None, :])                 # P^T = exp(S - lse)
        dv = dot(pt.to(do.dtype), do, dv)                                       # dV += P^T dO
        dpt = dot(v, tl.trans(do), tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32))  # dP^T = V dO^T
        dst = pt * (dpt - delta[None, :])                                        # dS^T (w.r.t. scaled scores)
        dk = dot(dst.to(qt.dtype), tl.trans(qt), dk)                             # dK += dS^T Q (scaled later)
    return dk, dv


@autotune(configs=_DKDV_CONFIGS, key=["S", "HEAD_DIM", "CAUSAL"], fallback=_DKDV_INTERPRET)
@triton.heuristics(_EVEN)
@triton.jit
def _bwd_dkdv_kernel(Q, K, V, DO, LSE, DELTA, DK, DV, sm_scale, H, S,
                     stride_qb, stride_qh, stride_qs, stride_qd,
                     stride_kb, stride_kh, stride_ks, stride_kd,
                     stride_vb, stride_vh, stride_vs, stride_vd,
                     stride_dob, stride_doh, stride_dos, stride_dod,
                     stride_dkb, stride_dkh, stride_dks, stride_dkd,
                     stride_dvb, stride_dvh, stride_dvs, stride_dvd,
                     CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     EVEN_M: tl.constexpr, EVEN_N: tl.constexpr):
    start_n = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    q_base = Q + b * stride_qb + h * stride_qh
    do_base = DO + b * stride_dob + h * stride_doh
    lse_base = LSE + bh.to(tl.int64) * S
    delta_base = DELTA + bh.to(tl.int64) * S

    offs_n = start_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    k_ptrs = K + b * stride_kb + h * stride_kh + offs_n[:, None] * stride_ks + offs_d[None, :] * stride_kd
    v_ptrs = V + b * stride_vb + h * stride_vh + offs_n[:, None] * stride_vs + offs_d[None, :] * stride_vd
    if EVEN_N:
        k = tl.load(k_ptrs)
        v = tl.load(v_ptrs)
    else:
        k = tl.load(k_ptrs, mask=offs_n[:, None] < S, other=0.0)
        v = tl.load(v_ptrs, mask=offs_n[:, None] < S, other=0.0)

    qk_scale = sm_scale * LOG2E
    dk = tl.zeros((BLOCK_N, HEAD_DIM), dtype=tl.float32)
    dv = tl.zeros((BLOCK_N, HEAD_DIM), dtype=tl.float32)
    m_full = (S // BLOCK_M) * BLOCK_M  # query tiles below this need no sequence-end mask
    lo = 0
    if CAUSAL:
        # Queries before this key tile never see it: start at the diagonal. The BLOCK_N / BLOCK_M query
        # tiles on the diagonal need the causal mask; all later ones see every key of this tile.
        lo = start_n * BLOCK_N
        diag_end = tl.minimum(lo + BLOCK_N, S)
        dk, dv = _dkdv_tiles(dk, dv, k, v, q_base, do_base, lse_base, delta_base,
                             stride_qs, stride_qd, stride_dos, stride_dod, offs_n, lo, diag_end, S,
                             qk_scale, HEAD_DIM, BLOCK_M, BLOCK_N, True, not EVEN_M)
        lo = lo + BLOCK_N
    dk, dv = _dkdv_tiles(dk, dv, k, v, q_base, do_base, lse_base, delta_base,
                         stride_qs, stride_qd, stride_dos, stride_dod, offs_n, lo, m_full, S,
                         qk_scale, HEAD_DIM, BLOCK_M, BLOCK_N, False, False)
    if not EVEN_M:
        dk, dv = _dkdv_tiles(dk, dv, k, v, q_base, do_base, lse_base, delta_base,
                             stride_qs, stride_qd, stride_dos, stride_dod, offs_n,
                             tl.maximum(lo, m_full), S, S,
                             qk_scale, HEAD_DIM, BLOCK_M, BLOCK_N, False, True)

    dk = dk * sm_scale  # dS was taken w.r.t. the scaled scores sm_scale * QK^T
    dk_ptrs = DK + b * stride_dkb + h * stride_dkh + offs_n[:, None] * stride_dks + offs_d[None, :] * stride_dkd
    dv_ptrs = DV + b * stride_dvb + h * stride_dvh + offs_n[:, None] * stride_dvs + offs_d[None, :] * stride_dvd
    if EVEN_N:
        tl.store(dk_ptrs, dk.to(DK.dtype.element_ty))
        tl.store(dv_ptrs, dv.to(DV.dtype.element_ty))
    else:
        tl.store(dk_ptrs, dk.to(DK.dtype.element_ty), mask=offs_n[:, None] < S)
        tl.store(dv_ptrs, dv.to(DV.dtype.element_ty), mask=offs_n[:, None] < S)


@triton.jit
def _dq_tiles(dq, q, do, lse2, delta, k_base, v_base, stride_ks, stride_kd, stride_vs, stride_vd,
              offs_m, lo, hi, S, qk_scale,
              HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              MASK_CAUSAL: tl.constexpr, MASK_KV: tl.constexpr):
    """Accumulate dQ of one query tile over key tiles [lo, hi)."""
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    kt_ptrs = k_base + offs_n[None, :] * stride_ks + offs_d[:, None] * stride_kd  # K^T [D, BLOCK_N]
    vt_ptrs = v_base + offs_n[None, :] * stride_vs + offs_d[:, None] * stride_vd  # V^T [D, BLOCK_N]
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        if MASK_KV:
            kt = tl.load(kt_ptrs + start_n * stride_ks, mask=cols[None, :] < S, other=0.0)
            vt = tl.load(vt_ptrs + start_n * stride_vs, mask=cols[None, :] < S, other=0.0)
        else:
            kt = tl.load(kt_ptrs + start_n * stride_ks)
            vt = tl.load(vt_ptrs + start_n * stride_vs)
        s = dot(q, kt, tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)) * qk_scale
        if MASK_CAUSAL:
            s = tl.where(offs_m[:, None] >= cols[None, :], s, float("-inf"))
        if MASK_KV:
            s = tl.where(cols[None, :] < S, s, float("-inf"))
        p = tl.exp2(s - lse2[:, None])
        dp = dot(do, vt, tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32))
        ds = p * (dp - delta[:, None])
        dq = dot(ds.to(kt.dtype), tl.trans(kt), dq)  # dQ += dS K (scaled later)
    return dq


@autotune(configs=_DQ_CONFIGS, key=["S", "HEAD_DIM", "CAUSAL"], fallback=_DQ_INTERPRET)
@triton.heuristics(_EVEN)
@triton.jit
def _bwd_dq_kernel(Q, K, V, DO, LSE, DELTA, DQ, sm_scale, H, S,
                   stride_qb, stride_qh, stride_qs, stride_qd,
                   stride_kb, stride_kh, stride_ks, stride_kd,
                   stride_vb, stride_vh, stride_vs, stride_vd,
                   stride_dob, stride_doh, stride_dos, stride_dod,
                   stride_dqb, stride_dqh, stride_dqs, stride_dqd,
                   CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   EVEN_M: tl.constexpr, EVEN_N: tl.constexpr):
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    k_base = K + b * stride_kb + h * stride_kh
    v_base = V + b * stride_vb + h * stride_vh

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q_ptrs = Q + b * stride_qb + h * stride_qh + offs_m[:, None] * stride_qs + offs_d[None, :] * stride_qd
    do_ptrs = DO + b * stride_dob + h * stride_doh + offs_m[:, None] * stride_dos + offs_d[None, :] * stride_dod
    row_ptrs = bh.to(tl.int64) * S + offs_m
    if EVEN_M:
        q = tl.load(q_ptrs)
        do = tl.load(do_ptrs)
        lse = tl.load(LSE + row_ptrs)
        delta = tl.load(DELTA + row_ptrs)
    else:
        q = tl.load(q_ptrs, mask=offs_m[:, None] < S, other=0.0)
        do = tl.load(do_ptrs, mask=offs_m[:, None] < S, other=0.0)
        lse = tl.load(LSE + row_ptrs, mask=offs_m < S, other=0.0)
        delta = tl.load(DELTA + row_ptrs, mask=offs_m < S, other=0.0)
    lse2 = lse * LOG2E

    qk_scale = sm_scale * LOG2E
    dq = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)
    if CAUSAL:
        diag = start_m * BLOCK_M
        dq = _dq_tiles(dq, q, do, lse2, delta, k_base, v_base, stride_ks, stride_kd, stride_vs, stride_vd,
                       offs_m, 0, diag, S, qk_scale, HEAD_DIM, BLOCK_M, BLOCK_N, False, False)
        dq = _dq_tiles(dq, q, do, lse2, delta, k_base, v_base, stride_ks, stride_kd, stride_vs, stride_vd,
                       offs_m, diag, tl.minimum(diag + BLOCK_M, S), S, qk_scale,
                       HEAD_DIM, BLOCK_M, BLOCK_N, True, not EVEN_N)
    else:
        n_full = (S // BLOCK_N) * BLOCK_N
        dq = _dq_tiles(dq, q, do, lse2, delta, k_base, v_base, stride_ks, stride_kd, stride_vs, stride_vd,
                       offs_m, 0, n_full, S, qk_scale, HEAD_DIM, BLOCK_M, BLOCK_N, False, False)
        if not EVEN_N:
            dq = _dq_tiles(dq, q, do, lse2, delta, k_base, v_base, stride_ks, stride_kd, stride_vs,
                           stride_vd, offs_m, n_full, S, S, qk_scale, HEAD_DIM, BLOCK_M, BLOCK_N, False, True)

    dq = dq * sm_scale
    dq_ptrs = DQ + b * stride_dqb + h * stride_dqh + offs_m[:, None] * stride_dqs + offs_d[None, :] * stride_dqd
    if EVEN_M:
        tl.store(dq_ptrs, dq.to(DQ.dtype.element_ty))
    else:
        tl.store(dq_ptrs, dq.to(DQ.dtype.element_ty), mask=offs_m[:, None] < S)


# ------------------------------------------------------------------------------------------- launchers

# The kernels, launched directly after each specialization's first call (kernels_ref._launch): through
# the autotuner, the heuristics and the JIT, a forward's launch took the CPU ~150 us (cProfile of the
# transformer block on an H100 host, results/h100-2026-11-26/launch-cost-profile-prefill-17h34.log). Each
# launch's key adds the batch size B, which the grids use and no argument carries. Calls with TMA
# descriptors (unhashable) keep the ordinary launch.
_FWD = BoundLaunches(_fwd_kernel)
_BWD_PREPROCESS = BoundLaunches(_bwd_preprocess)
_BWD_DKDV = BoundLaunches(_bwd_dkdv_kernel)
_BWD_DQ = BoundLaunches(_bwd_dq_kernel)


def _check_qkv(q, k, v, **others) -> None:
    for name, t in (("q", q), ("k", k), ("v", v), *others.items()):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, not {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(f"{name} must be 4-D [batch, heads, seq, head_dim], got shape {tuple(t.shape)}")
        if t.shape != q.shape:
            raise ValueError(f"{name} has shape {tuple(t.shape)} but q has {tuple(q.shape)}")
        if t.dtype != q.dtype or t.device != q.device:
            raise ValueError(f"{name} is {t.dtype} on {t.device} but q is {q.dtype} on {q.device}")
    if q.dtype not in _SUPPORTED:
        raise TypeError(f"q has dtype {q.dtype}; supported: float16, bfloat16, float32")
    d = q.shape[-1]
    if d < 16 or d & (d - 1):
        raise ValueError(f"head_dim must be a power of two >= 16 (e.g. 64, 128), got {d}")


_scale = reference.attention_scale


def _strides(t: torch.Tensor):
    return t.stride(0), t.stride(1), t.stride(2), t.stride(3)


def flash_attention_fwd(q, k, v, causal: bool = False, sm_scale: float | None = None, out=None,
                        kernel: str | None = None):
    """``(o, lse)``: o = softmax(q k^T * sm_scale [causal]) v, lse float32 [B, H, S] (natural log).

    ``out``: a ``[B, H, S, D]`` tensor of any strides to write o into (returned as o), e.g. a ``[B, S, H, D]``
    buffer seen through ``.transpose(1, 2)``: the heads then land side by side in each token's row, the
    layout the output projection reads, with no copy (``kernels_ref.transformer_block``).
    ``kernel``: see ``_tma_views``."""
    _check_qkv(q, k, v, **({} if out is None else {"out": out}))
    B, H, S, D = q.shape
    scale = _scale(sm_scale, D)
    o = torch.empty((B, H, S, D), device=q.device, dtype=q.dtype) if out is None else out
    lse = torch.empty((B, H, S), device=q.device, dtype=torch.float32)
    if o.numel() == 0:
        return o, lse

    def grid(meta):
        return (cdiv(S, meta["BLOCK_M"]), B * H)

    views = _tma_views(kernel, k, v)
    # The descriptors' block shape is a placeholder: the autotuner's pre-hook (_set_kv_block_shapes) sets it.
    descs = (k, v) if views is None else tuple(TensorDescriptor.from_tensor(t, [16, D]) for t in views)
    _FWD.keyed(B, grid, by_arguments=True)(
        q, k, v, o, lse, scale, H, S, *_strides(q), *_strides(k), *_strides(v), *_strides(o), *descs,
        CAUSAL=bool(causal), HEAD_DIM=D, TMA=views is not None, SCALE_NONNEG=scale >= 0)
    return o, lse


def _rows_view(t: torch.Tensor) -> torch.Tensor | None:
    """``t [B, H, S, D]`` as ``[B*H*S, D]`` without a copy when (b, h, s) step through memory as one index
    with unit stride along D, 16-byte aligned (what a TMA descriptor needs); else None."""
    B, H, S, D = t.shape
    sb, sh, ss, sd = t.stride()
    if sd != 1 or (H > 1 and sh != S * ss) or (B > 1 and sb != H * sh):
        return None
    if (ss * t.element_size()) % 16 or t.data_ptr() % 16:
        return None
    return t.as_strided((B * H * S, D), (ss, 1))


TMA_FROM_HEAD_DIM = 128  # kernel=None takes TMA loads from this head dim on


def _tma_views(kernel: str | None, k: torch.Tensor, v: torch.Tensor):
    """The ``[B*H*S, D]`` views of k and v to read by TMA, or None for pointer loads. ``kernel``: "tma"
    (key and value tiles by TMA: Hopper or newer, 16-bit, the layouts _rows_view takes; under the
    interpreter too, to check its indexing), "pointer", or None: TMA where it can be and D >= 128 on a
    GPU, else pointer loads. On an H100 TMA ran 3-5% faster at D=128 and 5-11% slower at D=64
    (results/h100-2026-11-26/probe-attention*.log)."""
    if kernel not in (None, "tma", "pointer"):
        raise ValueError(f'kernel must be "tma", "pointer" or None, got {kernel!r}')
    if kernel == "pointer" or kernel is None and (course.INTERPRET or k.shape[-1] < TMA_FROM_HEAD_DIM):
        return None
    views = (_rows_view(k), _rows_view(v))
    ok = (TensorDescriptor is not None and k.dtype in (torch.float16, torch.bfloat16) and None not in views
          and (course.INTERPRET or cuda_capability_major(k.device) >= 9))
    if ok:
        return views
    if kernel is None:
        return None
    raise ValueError("kernel='tma' needs triton >= 3.4, a Hopper or newer GPU (or the interpreter), 16-bit "
                     "k and v, and [B, H, S, D] layouts whose (b, h, s) form one 16-byte aligned row index")


def flash_attention_bwd(do, q, k, v, o, lse, causal: bool = False, sm_scale: float | None = None):
    """``(dq, dk, dv)`` of ``o = flash_attention_fwd(q, k, v, causal, sm_scale)[0]`` given ``do``."""
    _check_qkv(q, k, v, do=do, o=o)
    B, H, S, D = q.shape
    if not isinstance(lse, torch.Tensor) or tuple(lse.shape) != (B, H, S):
        raise ValueError(f"lse must be a [B, H, S] = {(B, H, S)} tensor from flash_attention_fwd")
    lse = lse.to(device=q.device, dtype=torch.float32).contiguous()
    scale = _scale(sm_scale, D)
    dq = torch.empty((B, H, S, D), device=q.device, dtype=q.dtype)
    dk = torch.empty_like(dq)
    dv = torch.empty_like(dq)
    if dq.numel() == 0:
        return dq, dk, dv
    delta = _bwd_delta(o, do)
    _launch_dkdv(q, k, v, do, lse, delta, dk, dv, scale, causal)
    _launch_dq(q, k, v, do, lse, delta, dq, scale, causal)
    return dq, dk, dv


# The backward's three launches, one function each (probes.probe_attention times them one by one).

def _bwd_delta(o, do) -> torch.Tensor:
    """delta = rowsum(dO * O), [B, H, S] float32."""
    B, H, S, D = o.shape
    delta = torch.empty((B, H, S), device=o.device, dtype=torch.float32)
    pre_block = 64 if course.INTERPRET else 128
    _BWD_PREPROCESS.keyed(B, (cdiv(S, pre_block), B * H), by_arguments=True)(
        o, do, delta, H, S, *_strides(o), *_strides(do), HEAD_DIM=D, BLOCK_M=pre_block)
    return delta


def _launch_dkdv(q, k, v, do, lse, delta, dk, dv, scale, causal) -> None:
    B, H, S, D = q.shape
    _BWD_DKDV.keyed(B, lambda meta: (cdiv(S, meta["BLOCK_N"]), B * H), by_arguments=True)(
        q, k, v, do, lse, delta, dk, dv, scale, H, S, *_strides(q), *_strides(k), *_strides(v), *_strides(do),
        *_strides(dk), *_strides(dv), CAUSAL=bool(causal), HEAD_DIM=D)


def _launch_dq(q, k, v, do, lse, delta, dq, scale, causal) -> None:
    B, H, S, D = q.shape
    _BWD_DQ.keyed(B, lambda meta: (cdiv(S, meta["BLOCK_M"]), B * H), by_arguments=True)(
        q, k, v, do, lse, delta, dq, scale, H, S, *_strides(q), *_strides(k), *_strides(v), *_strides(do),
        *_strides(dq), CAUSAL=bool(causal), HEAD_DIM=D)


class FlashAttentionFunction(torch.autograd.Function):
    """Saves q, k, v, o and the float32 lse (O(S) extra), recomputes the probabilities in backward."""

    @staticmethod
    def forward(ctx, q, k, v, causal=False, sm_scale=None):
        o, lse = flash_attention_fwd(q, k, v, causal, sm_scale)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal = bool(causal)
        ctx.sm_scale = sm_scale
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = flash_attention_bwd(do, q, k, v, o, lse, ctx.causal, ctx.sm_scale)
        return dq, dk, dv, None, None


def flash_attention(q, k, v, causal: bool = False, sm_scale: float | None = None):
    """Differentiable FlashAttention: ``o`` only (the lse is kept for backward)."""
    return FlashAttentionFunction.apply(q, k, v, causal, sm_scale)


# ------------------------------------------------------------------------------------------- reference

def attention_torch(q, k, v, causal: bool = False, sm_scale: float | None = None):
    """The readable definition (materializes the S x S scores): ``(o, lse)`` in the inputs' dtype / fp32."""
    scale = _scale(sm_scale, q.shape[-1])
    s = (q @ k.transpose(-2, -1)) * scale
    if causal:
        S = q.shape[-2]
        keep = torch.ones(S, S, dtype=torch.bool, device=q.device).tril()
        s = s.masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    o = torch.softmax(s, dim=-1) @ v
    return o, lse.float() if lse.dtype != torch.float64 else lse


def naive_attention(q, k, v, causal: bool = False, sm_scale: float | None = None):
    """What eager PyTorch does without a fused kernel: the S x S scores and probabilities in memory."""
    scale = _scale(sm_scale, q.shape[-1])
    s = (q @ k.transpose(-2, -1)) * scale
    if causal:
        S = q.shape[-2]
        s = s.masked_fill(~torch.ones(S, S, dtype=torch.bool, device=q.device).tril(), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


# ------------------------------------------------------------------------------------------- benchmarks

def _reference(q, k, v, causal, do=None):
    """float64 o, or (dq, dk, dv) when ``do`` is given (measure.reference.attention)."""
    out = reference.attention(q, k, v, causal, do=do)
    return out if do is not None else out[0]


def _sdpa(backend_name: str):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = getattr(SDPBackend, backend_name)

    def run(q, k, v, causal):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return run


def _cudnn_available() -> bool:
    """cuDNN attention needs a recent cuDNN and GPU; probe once on a tiny input instead of guessing."""
    if not torch.cuda.is_available():
        return False
    try:
        q = torch.randn(1, 1, 128, 64, device="cuda", dtype=torch.bfloat16)
        _sdpa("CUDNN_ATTENTION")(q, q, q, False)
        torch.cuda.synchronize()
        return True
    except Exception:  # no cuDNN attention here: leave the candidate out
        return False


def _naive_fits(B, H, S, itemsize) -> bool:
    """The naive version holds ~4 S x S matrices (scores, scaled, masked, probabilities) at once, and its
    autograd graph plus backward about as many again; keep it to sizes that fit in half the GPU."""
    if not torch.cuda.is_available():
        return False
    total = torch.cuda.get_device_properties(0).total_memory
    return 8 * B * H * S * S * itemsize < total // 2


def _grad_candidate(name, forward, causal):
    """Times backward alone: the forward graph is built once per case (kept in the inputs' ``state``
    dict, so it is freed with them), then each call runs autograd.grad with retain_graph."""

    def run(q, k, v, do, o, lse, state):
        if name not in state:
            leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
            state[name] = (leaves, forward(*leaves, causal))
        leaves, out = state[name]
        return torch.autograd.grad(out, leaves, do, retain_graph=True)

    return run


def _fwd_flops(B, H, S, D, causal) -> int:
    return 4 * B * H * S * S * D // (2 if causal else 1)


def _maker(B, H, S, D, dtype):
    from course import DEVICE

    def make():
        return tuple(torch.randn(B, H, S, D, device=DEVICE, dtype=dtype) for _ in range(3))

    return make


def _label(B, H, S, D, causal, dtype) -> str:
    return f"B{B} H{H} S{S} D{D}{' causal' if causal else ''} {str(dtype).replace('torch.', '')}"


def attention_fwd_case(B, H, S, D, causal, dtype=torch.bfloat16, naive=False, cudnn=False, sweep=False):
    """Forward (o only, the output every candidate shares) vs SDPA's flash backend, cuDNN, naive."""
    from kernels_ref.benchmarking import BenchCase, Goal

    sdpa_flash, sdpa_cudnn = _sdpa("FLASH_ATTENTION"), _sdpa("CUDNN_ATTENTION")
    candidates = {"triton": lambda q, k, v: flash_attention_fwd(q, k, v, causal)[0],
                  "sdpa_flash": lambda q, k, v: sdpa_flash(q, k, v, causal)}
    if cudnn:
        candidates["sdpa_cudnn"] = lambda q, k, v: sdpa_cudnn(q, k, v, causal)
    if naive:
        candidates["eager"] = lambda q, k, v: naive_attention(q, k, v, causal)
    return BenchCase(
        op="flash_attention_fwd", label=_label(B, H, S, D, causal, dtype), make_inputs=_maker(B, H, S, D, dtype),
        candidates=candidates, reference=lambda q, k, v: _reference(q, k, v, causal),
        flops=_fwd_flops(B, H, S, D, causal),
        sweep="S" if sweep else None, sweep_value=S if sweep else None,
        goals=[Goal.faster("triton", "sdpa_flash")],
    )


def attention_bwd_case(B, H, S, D, causal, dtype=torch.bfloat16, naive=False, cudnn=False):
    """Backward alone: inputs are (q, k, v, do, o, lse, state); the triton candidate gets o and lse from
    the triton forward, the autograd candidates build their forward graph once (see _grad_candidate)."""
    from kernels_ref.benchmarking import BenchCase, Goal

    def make():
        q, k, v = _maker(B, H, S, D, dtype)()
        o, lse = flash_attention_fwd(q, k, v, causal)
        return q, k, v, torch.randn_like(q), o, lse, {}

    candidates = {"triton": lambda q, k, v, do, o, lse, state: flash_attention_bwd(do, q, k, v, o, lse, causal),
                  "sdpa_flash": _grad_candidate("sdpa_flash", _sdpa("FLASH_ATTENTION"), causal)}
    if cudnn:
        candidates["sdpa_cudnn"] = _grad_candidate("sdpa_cudnn", _sdpa("CUDNN_ATTENTION"), causal)
    if naive:
        candidates["eager"] = _grad_candidate("eager", naive_attention, causal)
    return BenchCase(
        op="flash_attention_bwd", label=_label(B, H, S, D, causal, dtype), make_inputs=make,
        candidates=candidates,
        reference=lambda q, k, v, do, o, lse, state: _reference(q, k, v, causal, do),
        flops=int(2.5 * _fwd_flops(B, H, S, D, causal)),
        # Gradients go through two roundings to the input dtype (P and dS) before their matmuls, in every
        # flash backward (SDPA's too), and sum over the sequence: a little more room than bf16's default.
        tolerances={torch.bfloat16: (3e-2, 3e-2)},
        goals=[Goal.faster("triton", "sdpa_flash")],
    )


def attention_memory_case(B, H, S, D, dtype=torch.bfloat16):
    """Peak extra memory of one forward: the naive version grows as S^2, the fused kernels as S."""
    from kernels_ref.benchmarking import BenchCase, Goal

    sdpa_flash = _sdpa("FLASH_ATTENTION")
    return BenchCase(
        op="flash_attention_memory", label=_label(B, H, S, D, False, dtype), make_inputs=_maker(B, H, S, D, dtype),
        candidates={"triton": lambda q, k, v: flash_attention_fwd(q, k, v, False)[0],
                    "sdpa_flash": lambda q, k, v: sdpa_flash(q, k, v, False),
                    "eager": lambda q, k, v: naive_attention(q, k, v, False)},
        reference=lambda q, k, v: _reference(q, k, v, False),
        metric="peak_memory", flops=_fwd_flops(B, H, S, D, False),
        # peak(eager) / peak(triton): S x S matrices against o and lse alone.
        goals=[Goal.faster("triton", "eager", 10.0)],
    )


def bench_cases(quick: bool = False):
    """Forward and backward at B4 H32 S4096 (D 128 and 64, causal and not) in bf16, a sequence-length
    sweep at 16k tokens per batch, and peak memory against the naive version (O(S) vs O(S^2))."""
    dtype, itemsize = torch.bfloat16, 2
    cudnn = _cudnn_available()
    cases = []
    for D in [128] if quick else [128, 64]:
        for causal in (False, True):
            B, H, S = 4, 32, 4096
            flags = dict(naive=_naive_fits(B, H, S, itemsize), cudnn=cudnn)
            cases.append(attention_fwd_case(B, H, S, D, causal, dtype, sweep=D == 128 and not causal, **flags))
            cases.append(attention_bwd_case(B, H, S, D, causal, dtype, **flags))
    if not quick:  # S = 4096 is the headline case above
        for S in (512, 1024, 2048, 8192, 16384):
            B, H, D = max(1, 16384 // S), 32, 128
            cases.append(attention_fwd_case(B, H, S, D, False, dtype, naive=_naive_fits(B, H, S, itemsize),
                                            cudnn=cudnn, sweep=True))
    for S in [4096] if quick else [1024, 4096, 16384]:
        cases.append(attention_memory_case(1, 16, S, 64, dtype))
    return cases
