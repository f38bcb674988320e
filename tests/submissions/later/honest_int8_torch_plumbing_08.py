"""Honest: an autotuned int8 kernel with torch for the plumbing around it: x made contiguous, w_scale and bias
converted to float32 by torch, a float32 output buffer (torch.zeros) converted to x's dtype at the end. Every
tensor is the size of x, y or a row: it keeps every correctness point under the held-bytes rule."""
import torch
import triton
import triton.language as tl

from course.triton_compat import dot


@triton.autotune(configs=[triton.Config({"BM": 16, "BN": 32, "BK": 32}),
                         triton.Config({"BM": 16, "BN": 16, "BK": 64})],
                 key=["M", "N", "K"])
@triton.jit
def _k(x_ptr, w_ptr, s_ptr, b_ptr, y_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(1) * BM + tl.arange(0, BM)
    rn = tl.program_id(0) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        x = tl.load(x_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        w = tl.load(w_ptr + rn[None, :] * K + rk[:, None], mask=(rn[None, :] < N) & (rk[:, None] < K), other=0)
        acc = dot(x.to(tl.float32), w.to(tl.float32), acc)
    acc = acc * tl.load(s_ptr + rn, mask=rn < N, other=0.0)[None, :] + tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def int8_weight_linear(x, w_q, w_scale, bias):
    x = x.contiguous()
    m, k = x.shape
    n = w_q.shape[0]
    acc = torch.zeros((m, n), dtype=torch.float32, device=x.device)
    grid = lambda meta: (triton.cdiv(n, meta["BN"]), triton.cdiv(m, meta["BM"]))
    _k[grid](x, w_q.contiguous(), w_scale.float(), bias.float(), acc, m, n, k)
    return acc.to(x.dtype)
