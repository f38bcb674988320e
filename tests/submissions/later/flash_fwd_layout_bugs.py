"""A FlashAttention forward with one of three grid or layout mistakes (``BUG``), each right on a single
(batch, head) pair in the contiguous layout and wrong elsewhere; ``flash_*_07.py`` each launch one of them.

- "no_batch": the grid covers the heads of batch 0 only;
- "contiguous": offsets computed for a contiguous [B, H, S, D] tensor, whatever its strides;
- "bh_stride_h": the (batch, head) pair's base is ``bh * stride_h``, which is right only when B = 1 or the
  layout is the contiguous one."""
import course  # noqa: F401  (TRITON_INTERPRET before the kernels are defined)
import torch
import triton
import triton.language as tl

from course.triton_compat import dot


@triton.jit
def _base(ptr, bh, b, h, H, S, sb, sh, D: tl.constexpr, BUG: tl.constexpr):
    if BUG == "contiguous":
        return ptr + bh * S * D
    if BUG == "bh_stride_h":
        return ptr + bh * sh
    return ptr + b * sb + h * sh


@triton.jit
def _flash_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, H, S, scale,
                      sqb, sqh, sqs, sqd, skb, skh, sks, skd, svb, svh, svs, svd, sob, soh, sos, sod,
                      CAUSAL: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr,
                      BUG: tl.constexpr):
    if BUG == "no_batch":
        b, h = 0, tl.program_id(1)
    else:
        b, h = tl.program_id(1) // H, tl.program_id(1) % H
    bh = b * H + h
    if BUG == "contiguous":  # element strides of a contiguous [B, H, S, D] tensor
        sqs, sqd, sks, skd, svs, svd = D, 1, D, 1, D, 1
    q_base, k_base = _base(q_ptr, bh, b, h, H, S, sqb, sqh, D, BUG), _base(k_ptr, bh, b, h, H, S, skb, skh, D, BUG)
    v_base = _base(v_ptr, bh, b, h, H, S, svb, svh, D, BUG)
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rd = tl.arange(0, D)
    q = tl.load(q_base + rm[:, None] * sqs + rd[None, :] * sqd, mask=rm[:, None] < S, other=0.0)
    m_i = tl.full((BM,), float("-inf"), tl.float32)
    l_i = tl.zeros((BM,), tl.float32)
    acc = tl.zeros((BM, D), tl.float32)
    for n0 in range(0, S, BN):
        rn = n0 + tl.arange(0, BN)
        kt = tl.load(k_base + rn[None, :] * sks + rd[:, None] * skd, mask=rn[None, :] < S, other=0.0)
        v = tl.load(v_base + rn[:, None] * svs + rd[None, :] * svd, mask=rn[:, None] < S, other=0.0)
        s = dot(q, kt, tl.zeros((BM, BN), tl.float32)) * scale
        keep = rn[None, :] < S
        if CAUSAL:
            keep = keep & (rn[None, :] <= rm[:, None])
        s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp(s - m_safe[:, None])
        alpha = tl.exp(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    l_safe = tl.where(l_i == 0.0, 1.0, l_i)
    tl.store(o_ptr + b * sob + h * soh + rm[:, None] * sos + rd[None, :] * sod,
             (acc / l_safe[:, None]).to(o_ptr.dtype.element_ty), mask=rm[:, None] < S)
    tl.store(lse_ptr + bh * S + rm, m_i + tl.log(l_safe), mask=rm < S)


def launch(q, k, v, causal, sm_scale, bug):
    B, H, S, D = q.shape
    o = torch.empty((B, H, S, D), dtype=q.dtype, device=q.device)
    lse = torch.empty((B, H, S), dtype=torch.float32, device=q.device)
    programs = H if bug == "no_batch" else B * H
    scale = 1.0 / D ** 0.5 if sm_scale is None else float(sm_scale)
    _flash_fwd_kernel[(triton.cdiv(S, 16), programs)](q, k, v, o, lse, H, S, scale, *q.stride(), *k.stride(),
                                                      *v.stride(), *o.stride(), CAUSAL=causal, BM=16, BN=16, D=D,
                                                      BUG=bug)
    return o, lse
