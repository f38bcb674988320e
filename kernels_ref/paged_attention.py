"""paged_decode_attention(q, k_pages, v_pages, block_table, seq_lens, sm_scale) -> o: one query token per
sequence against a paged KV cache, split over the keys.

Why: a serving engine keeps every sequence's keys and values in fixed-size **pages** of one shared pool
(``[num_pages, page_size, H_kv, D]``), so that sequences grow without reallocating and memory is not
reserved for the longest possible sequence; each sequence's **block table** lists its pages in order.
A decode step's attention reads all of a sequence's cached keys and values once for one query: it is
bound by those bytes. Gathering the pages into a contiguous tensor first (what PyTorch's SDPA needs)
reads them, writes them and reads them again: 3x the bytes, plus the padding of every sequence to the
longest.

Split over keys (split-K, "flash decoding"): one program per (sequence, key/value head) would leave most
SMs idle at a small batch. Each program instead takes one *split* of a sequence's keys, for all the query
heads that share its key/value head (grouped-query attention: the keys are loaded once for the group),
and writes its partial softmax state (max, sum, unnormalized output) in float32; a second launch combines
the splits of each (sequence, head): ``o = sum_s e^(m_s - M) acc_s / sum_s e^(m_s - M) l_s``. The split
count is chosen from the block table's capacity (no device-to-host read of seq_lens): enough programs to
fill the GPU twice; a split past a short sequence's end exits at once.

Key j of sequence b lives at ``k_pages[block_table[b, j // P], j % P]``: each tile of keys looks its
pages up, so any page size works (also one that is not a power of two, or smaller than the tile).
"""
from __future__ import annotations

import math

import course  # noqa: F401  (TRITON_INTERPRET before the kernels below are defined)
import torch
import triton
import triton.language as tl

from course.device import INTERPRET
from course.triton_compat import dot
from kernels_ref._launch import cdiv, next_power_of_2
from kernels_ref._validate import check_tensor, cuda_sm_count
from measure.serving import gather_then_sdpa, kv_bytes, paged_inputs  # noqa: F401  (the inputs and baseline live there)

_FLOATS = (torch.float32, torch.float16, torch.bfloat16)
LOG2E = 1.4426950408889634


@triton.jit
def _paged_split_kernel(q_ptr, kp_ptr, vp_ptr, bt_ptr, len_ptr, m_ptr, l_ptr, acc_ptr, qk_scale, keys_per_split,
                        n_splits, H_KV, P, sq_b, sq_h, sk_page, sk_tok, sk_h, sv_page, sv_tok, sv_h, s_bt,
                        GROUP: tl.constexpr, D: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_D: tl.constexpr,
                        BLOCK_N: tl.constexpr):
    pid, split = tl.program_id(0), tl.program_id(1)
    b, hk = pid // H_KV, pid % H_KV
    seq_len = tl.load(len_ptr + b)
    start = split * keys_per_split
    end = tl.minimum(start + keys_per_split, seq_len)
    offs_g = tl.arange(0, BLOCK_G)
    offs_d = tl.arange(0, BLOCK_D)
    heads = hk * GROUP + offs_g                                   # the query heads of this kv head
    qd_mask = (offs_g[:, None] < GROUP) & (offs_d[None, :] < D)
    q = tl.load(q_ptr + b.to(tl.int64) * sq_b + heads[:, None] * sq_h + offs_d[None, :], mask=qd_mask, other=0.0)
    m = tl.full((BLOCK_G,), float("-inf"), tl.float32)
    l = tl.zeros((BLOCK_G,), tl.float32)
    acc = tl.zeros((BLOCK_G, BLOCK_D), tl.float32)
    for n0 in range(start, end, BLOCK_N):
        j = n0 + tl.arange(0, BLOCK_N)
        ok = j < end
        page = tl.load(bt_ptr + b.to(tl.int64) * s_bt + j // P, mask=ok, other=0).to(tl.int64)
        kv_mask = ok[:, None] & (offs_d[None, :] < D)
        k = tl.load(kp_ptr + (page * sk_page + (j % P) * sk_tok + hk * sk_h)[:, None] + offs_d[None, :],
                    mask=kv_mask, other=0.0)
        v = tl.load(vp_ptr + (page * sv_page + (j % P) * sv_tok + hk * sv_h)[:, None] + offs_d[None, :],
                    mask=kv_mask, other=0.0)
        s = dot(q, tl.trans(k), tl.zeros((BLOCK_G, BLOCK_N), tl.float32)) * qk_scale   # base-2 scores
        s = tl.where(ok[None, :], s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 1))                       # finite: every tile has a key
        alpha = tl.exp2(m - m_new)
        p = tl.exp2(s - m_new[:, None])
        l = l * alpha + tl.sum(p, 1)
        acc = dot(p.to(v.dtype), v, acc * alpha[:, None])
        m = m_new
    row = (b * (H_KV * GROUP) + heads).to(tl.int64) * n_splits + split
    g_ok = offs_g < GROUP
    tl.store(m_ptr + row, m, mask=g_ok)
    tl.store(l_ptr + row, l, mask=g_ok)
    tl.store(acc_ptr + row[:, None] * D + offs_d[None, :], acc, mask=qd_mask)


@triton.jit
def _paged_reduce_kernel(m_ptr, l_ptr, acc_ptr, o_ptr, n_splits, H, so_b, so_h, D: tl.constexpr,
                         BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)                           # b * H + h
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, BLOCK_D)
    s_ok = offs_s < n_splits
    m = tl.load(m_ptr + row * n_splits + offs_s, mask=s_ok, other=float("-inf"))
    l = tl.load(l_ptr + row * n_splits + offs_s, mask=s_ok, other=0.0)
    acc = tl.load(acc_ptr + (row * n_splits + offs_s)[:, None] * D + offs_d[None, :],
                  mask=s_ok[:, None] & (offs_d[None, :] < D), other=0.0)
    w = tl.exp2(m - tl.max(m, 0))                                 # empty splits: exp2(-inf) = 0
    o = tl.sum(acc * w[:, None], 0) / tl.sum(l * w, 0)
    b, h = row // H, row % H
    tl.store(o_ptr + b * so_b + h * so_h + offs_d, o.to(o_ptr.dtype.element_ty), mask=offs_d < D)


def check_paged_args(q, k_pages, v_pages, block_table, seq_lens) -> None:
    check_tensor("q", q, ndim=3, dtypes=_FLOATS)
    B, H, D = q.shape
    for name, t in (("k_pages", k_pages), ("v_pages", v_pages)):
        check_tensor(name, t, ndim=4, dtypes=(q.dtype,), device=q.device)
        if t.shape[3] != D or t.stride(3) != 1:
            raise ValueError(f"{name} must be [num_pages, page_size, H_kv, {D}] with contiguous heads, "
                             f"got {tuple(t.shape)}")
    if k_pages.shape != v_pages.shape:
        raise ValueError(f"k_pages and v_pages differ: {tuple(k_pages.shape)} and {tuple(v_pages.shape)}")
    if H % k_pages.shape[2]:
        raise ValueError(f"{H} query heads cannot share {k_pages.shape[2]} key/value heads evenly")
    check_tensor("block_table", block_table, ndim=2, dtypes=(torch.int32, torch.int64), device=q.device)
    check_tensor("seq_lens", seq_lens, ndim=1, dtypes=(torch.int32, torch.int64), device=q.device)
    if block_table.shape[0] != B or seq_lens.shape[0] != B:
        raise ValueError(f"block_table and seq_lens need one row per sequence ({B})")


def split_plan(B: int, H_kv: int, max_keys: int, block_n: int, device) -> tuple[int, int]:
    """(n_splits, keys_per_split): about two programs per SM over B * H_kv * n_splits, splits of whole
    tiles, at least 4 tiles of keys each so that the reduction stays small next to the reading."""
    want = cdiv(2 * cuda_sm_count(device), max(B * H_kv, 1))
    n_splits = max(1, min(want, cdiv(max_keys, 4 * block_n)))
    keys_per_split = cdiv(cdiv(max_keys, n_splits), block_n) * block_n
    return cdiv(max_keys, keys_per_split), keys_per_split


def paged_decode_attention(q, k_pages, v_pages, block_table, seq_lens, sm_scale=None) -> torch.Tensor:
    """o ``[B, H, D]`` in q's dtype: q ``[B, H, D]`` against the keys and values of each sequence's pages
    (``seq_lens[b]`` >= 1 keys, pages listed in ``block_table[b]``); two launches (splits, then their sum)."""
    check_paged_args(q, k_pages, v_pages, block_table, seq_lens)
    B, H, D = q.shape
    P, H_kv = k_pages.shape[1], k_pages.shape[2]
    o = torch.empty((B, H, D), dtype=q.dtype, device=q.device)
    if B == 0:
        return o
    if q.stride(-1) != 1:
        q = q.contiguous()
    scale = 1.0 / math.sqrt(D) if sm_scale is None else float(sm_scale)
    block_n = 16 if INTERPRET else 64
    n_splits, per_split = split_plan(B, H_kv, block_table.shape[1] * P, block_n, q.device)
    m = torch.empty((B, H, n_splits), dtype=torch.float32, device=q.device)
    l = torch.empty_like(m)
    acc = torch.empty((B, H, n_splits, D), dtype=torch.float32, device=q.device)
    group = H // H_kv
    block_d = max(next_power_of_2(D), 16)
    opts = {} if INTERPRET else {"num_warps": 4, "num_stages": 3}
    _paged_split_kernel[(B * H_kv, n_splits)](
        q, k_pages, v_pages, block_table, seq_lens, m, l, acc, scale * LOG2E, per_split, n_splits, H_kv, P,
        q.stride(0), q.stride(1), *k_pages.stride()[:3], *v_pages.stride()[:3], block_table.stride(0),
        GROUP=group, D=D, BLOCK_G=max(next_power_of_2(group), 16), BLOCK_D=block_d, BLOCK_N=block_n, **opts)
    _paged_reduce_kernel[(B * H,)](m, l, acc, o, n_splits, H, o.stride(0), o.stride(1), D=D,
                                   BLOCK_S=max(next_power_of_2(n_splits), 2), BLOCK_D=block_d)
    return o


# --------------------------------------------------------------------------------------------------
# Benchmark cases: decode batches with very different lengths, and long contexts
# --------------------------------------------------------------------------------------------------

def paged_case(lengths, label: str, H: int = 32, H_kv: int = 8, D: int = 128, page_size: int = 16,
               goals=("faster",), dtype=torch.bfloat16):
    from course import DEVICE
    from kernels_ref.benchmarking import BenchCase, Goal
    from measure import reference

    goal_list = []
    if "faster" in goals:
        goal_list.append(Goal.faster("triton", "gather_sdpa", 1.5))
    if "bandwidth" in goals:  # the goal: most of the copy bandwidth on K and V at long contexts
        goal_list.append(Goal.peak("triton", 0.8))
    return BenchCase(
        op="paged_decode_attention", label=f"{label} H{H}/{H_kv} D{D} page {page_size}",
        make_inputs=lambda: paged_inputs(lengths, H, H_kv, D, page_size, dtype, DEVICE),
        candidates={"triton": paged_decode_attention, "gather_sdpa": gather_then_sdpa},
        reference=reference.paged_decode_attention,
        nbytes=2 * sum(lengths) * H_kv * D * torch.tensor([], dtype=dtype).element_size(),  # kv_bytes, made up front
        sweep="tokens", sweep_value=sum(lengths), goals=goal_list)


def bench_cases(quick: bool = False):
    """Mixed lengths at small and large batch (every sequence from 1 to 32k keys), and long contexts where
    the bytes of K and V decide (copy bandwidth the goal)."""
    g = torch.Generator().manual_seed(0)
    mixed = [int(n) for n in torch.randint(1, 32768, (8,), generator=g)]
    long = [32768] * 8
    if quick:
        return [paged_case(long, "8 x 32k", goals=("faster", "bandwidth"))]
    return [paged_case(mixed, "8 mixed 1-32k"), paged_case([1, 7, 100, 32768], "4 of 1..32k"),
            paged_case(long, "8 x 32k", goals=("faster", "bandwidth")),
            paged_case([131072] * 2, "2 x 128k", goals=("faster", "bandwidth")),
            paged_case([int(n) for n in torch.randint(1, 4096, (128,), generator=g)], "128 mixed 1-4k")]
