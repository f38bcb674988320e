"""rope_kv_append(q, k, v, cos, sin, k_cache, v_cache, positions) -> q_rot: the rotary embedding of one
decode step's q and k, and the write of the rotated k and of v into the KV cache, in one launch.

Why: at decode, each sequence's new token brings ``H`` query heads and ``H_kv`` key and value heads of
``D`` numbers: a few KiB. Eager PyTorch rotates q (slice, multiply, concatenate: ~6 kernels), rotates k the
same way, then scatters k and v into the cache (two index_put kernels): more than a dozen launches of a few
microseconds each for work the GPU finishes in one. Fused, one program per (sequence, head) reads its
position, its row of the cos/sin tables and its head, and writes the rotated q, or the rotated k and the v
straight into their cache rows.

Layouts (docs/CONTRACTS.md): q ``[B, H, D]``, k and v ``[B, H_kv, D]`` (any strides: views of a fused QKV
projection's output are typical), cos and sin ``[max_position, D / 2]`` float32, caches ``[B, L, H_kv, D]``
(a sequence's tokens, each with its heads side by side: the same memory as pages of a paged cache), and
positions ``[B]`` int (the new token's index in its sequence). Rotate-half RoPE (GPT-NeoX, Llama): the
pairs are ``(x[i], x[i + D/2])``.
"""
from __future__ import annotations

import course  # noqa: F401  (TRITON_INTERPRET before the kernels below are defined)
import torch
import triton
import triton.language as tl

from kernels_ref._launch import next_power_of_2
from kernels_ref._validate import check_tensor
from measure.serving import rope_tables  # noqa: F401  (the tables live there)

_FLOATS = (torch.float32, torch.float16, torch.bfloat16)


@triton.jit
def _rotate(src_ptr, dst_ptr, c, s, offs, mask, HALF: tl.constexpr):
    """dst = rotate_half(src) for one head, the halves loaded separately, computed in float32."""
    x1 = tl.load(src_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(src_ptr + HALF + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(dst_ptr + offs, (x1 * c - x2 * s).to(dst_ptr.dtype.element_ty), mask=mask)
    tl.store(dst_ptr + HALF + offs, (x2 * c + x1 * s).to(dst_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rope_kv_kernel(q_ptr, k_ptr, v_ptr, cos_ptr, sin_ptr, kc_ptr, vc_ptr, pos_ptr, o_ptr, H, H_KV,
                    sq_b, sq_h, sk_b, sk_h, sv_b, sv_h, skc_b, skc_l, skc_h, svc_b, svc_l, svc_h, so_b, so_h,
                    HALF: tl.constexpr, BLOCK: tl.constexpr):
    b = tl.program_id(0)
    head = tl.program_id(1)                       # 0 .. H-1: a query head; H .. H+H_KV-1: a key/value head
    pos = tl.load(pos_ptr + b).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < HALF
    c = tl.load(cos_ptr + pos * HALF + offs, mask=mask, other=0.0).to(tl.float32)
    s = tl.load(sin_ptr + pos * HALF + offs, mask=mask, other=0.0).to(tl.float32)
    b64 = b.to(tl.int64)
    if head < H:
        _rotate(q_ptr + b64 * sq_b + head * sq_h, o_ptr + b64 * so_b + head * so_h, c, s, offs, mask, HALF)
    else:
        h = head - H
        _rotate(k_ptr + b64 * sk_b + h * sk_h, kc_ptr + b64 * skc_b + pos * skc_l + h * skc_h, c, s, offs, mask,
                HALF)
        v_src = v_ptr + b64 * sv_b + h * sv_h
        v_dst = vc_ptr + b64 * svc_b + pos * svc_l + h * svc_h
        for part in tl.static_range(2):
            val = tl.load(v_src + part * HALF + offs, mask=mask, other=0.0)
            tl.store(v_dst + part * HALF + offs, val.to(v_dst.dtype.element_ty), mask=mask)


def check_rope_args(q, k, v, cos, sin, k_cache, v_cache, positions) -> None:
    check_tensor("q", q, ndim=3, dtypes=_FLOATS)
    B, H, D = q.shape
    if D % 2:
        raise ValueError(f"the head dimension must be even (pairs of features rotate), got {D}")
    for name, t in (("k", k), ("v", v)):
        check_tensor(name, t, ndim=3, dtypes=(q.dtype,), device=q.device)
    if k.shape != v.shape or k.shape[0] != B or k.shape[2] != D:
        raise ValueError(f"k and v must be [{B}, H_kv, {D}], got {tuple(k.shape)} and {tuple(v.shape)}")
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        check_tensor(name, t, ndim=4, dtypes=(q.dtype,), device=q.device)
        if t.shape[0] != B or t.shape[2:] != k.shape[1:] or t.stride(-1) != 1:
            raise ValueError(f"{name} must be [{B}, L, {k.shape[1]}, {D}] with contiguous heads, got "
                             f"{tuple(t.shape)}")
    for name, t in (("cos", cos), ("sin", sin)):
        check_tensor(name, t, ndim=2, dtypes=(torch.float32,), device=q.device)
        if t.shape[1] != D // 2 or not t.is_contiguous():
            raise ValueError(f"{name} must be a contiguous [max_position, {D // 2}] table, got {tuple(t.shape)}")
    check_tensor("positions", positions, ndim=1, dtypes=(torch.int32, torch.int64), device=q.device)
    if positions.shape[0] != B:
        raise ValueError(f"positions must be [{B}], got {tuple(positions.shape)}")


def rope_kv_append(q, k, v, cos, sin, k_cache, v_cache, positions) -> torch.Tensor:
    """q_rot ``[B, H, D]`` (a new tensor in q's dtype); k rotated and v written into row ``positions[b]`` of
    sequence b's caches, in place. One launch."""
    check_rope_args(q, k, v, cos, sin, k_cache, v_cache, positions)
    B, H, D = q.shape
    H_kv = k.shape[1]
    out = torch.empty((B, H, D), dtype=q.dtype, device=q.device)
    if B == 0:
        return out
    if q.stride(-1) != 1 or k.stride(-1) != 1 or v.stride(-1) != 1:
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    _rope_kv_kernel[(B, H + H_kv)](
        q, k, v, cos, sin, k_cache, v_cache, positions, out, H, H_kv, q.stride(0), q.stride(1), k.stride(0),
        k.stride(1), v.stride(0), v.stride(1), *k_cache.stride()[:3], *v_cache.stride()[:3], out.stride(0),
        out.stride(1), HALF=D // 2, BLOCK=max(next_power_of_2(D // 2), 2))
    return out


def rope_kv_append_torch(q, k, v, cos, sin, k_cache, v_cache, positions) -> torch.Tensor:
    """Eager PyTorch: the rotation as slices, products and a concatenation (q and k each), then two indexed
    writes into the caches."""
    c, s = cos[positions][:, None, :], sin[positions][:, None, :]

    def rotate(x):
        x1, x2 = x.float().chunk(2, dim=-1)
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).to(x.dtype)

    rows = torch.arange(q.shape[0], device=q.device)
    k_cache[rows, positions] = rotate(k)
    v_cache[rows, positions] = v
    return rotate(q)


# --------------------------------------------------------------------------------------------------
# Benchmark cases: one decode step of a Llama-3-8B-like layer (32 query heads, 8 key/value heads of 128)
# --------------------------------------------------------------------------------------------------

def rope_bytes(B: int, H: int, H_kv: int, D: int, itemsize: int) -> int:
    """Fewest bytes: q, k, v read, q_rot written, k and v written into the cache, a cos/sin row per token."""
    return B * ((2 * H + 4 * H_kv) * D * itemsize + 2 * D * 4 + 8)


def rope_case(B: int, H: int = 32, H_kv: int = 8, D: int = 128, L: int = 4096, dtype=torch.bfloat16,
              goal: float | None = 2.0):
    from course import DEVICE
    from kernels_ref.benchmarking import BenchCase, Goal
    from measure import reference

    cos, sin = rope_tables(L, D, device=DEVICE)

    def make():
        qkv = torch.randn(B, H + 2 * H_kv, D, device=DEVICE, dtype=dtype)   # a fused projection's output
        caches = [torch.randn(B, L, H_kv, D, device=DEVICE, dtype=dtype) for _ in range(2)]
        positions = torch.randint(0, L, (B,), device=DEVICE)
        return qkv[:, :H], qkv[:, H:H + H_kv], qkv[:, H + H_kv:], cos, sin, *caches, positions

    def q_rot_only(*args):  # the caches are written in place; q_rot is compared
        return reference.rope_kv_append(*args)[0]

    return BenchCase(
        op="rope_kv_append", label=f"B{B} H{H}/{H_kv} D{D} {str(dtype)[6:]}", make_inputs=make,
        candidates={"triton": rope_kv_append, "eager": rope_kv_append_torch}, reference=q_rot_only,
        nbytes=rope_bytes(B, H, H_kv, D, torch.tensor([], dtype=dtype).element_size()), sweep="B", sweep_value=B,
        goals=[Goal.faster("triton", "eager", goal)] if goal else [])


def bench_cases(quick: bool = False):
    """A decode step's batch of 1 to 256 sequences: the eager sequence's launches dominate at every size."""
    if quick:
        return [rope_case(64)]
    return [rope_case(b) for b in (1, 16, 64, 256)]
