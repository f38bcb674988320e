"""On a GPU, right answers from the whole weight dequantized by torch in chunks: int8_weight_linear converts
w_q a few rows at a time into float32 buffers, none larger than the tensors the exercise allows (x, y, a row),
keeps them all, and hands their addresses to one Triton kernel as a table; the kernel reads the float weight
through it. No operator produced a tensor larger than y, and the one launch is the learner's kernel: only the
bytes held at once tell (the GPU check's legality group; under the interpreter the kernel's loads through the
table are refused as reaching memory outside the tensors passed to it)."""
import course  # noqa: F401  (TRITON_INTERPRET before the kernel is defined)
import torch
import triton
import triton.language as tl

from course.triton_compat import dot
from keeps_dequantized_chunks_08 import dequantized_pieces


@triton.jit
def _table_kernel(x_ptr, table_ptr, s_ptr, b_ptr, y_ptr, M, N, K, R, sxm, sxk, sym,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(1) * BM + tl.arange(0, BM)
    rn = tl.program_id(0) * BN + tl.arange(0, BN)
    base = tl.load(table_ptr + rn // R, mask=rn < N, other=0)
    row = (rn % R).to(tl.int64) * K
    acc = tl.zeros((BM, BN), tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        x = tl.load(x_ptr + rm[:, None] * sxm + rk[None, :] * sxk, mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        addr = base[None, :] + (row[None, :] + rk[:, None]) * 4
        w = tl.load(addr.to(tl.pointer_type(tl.float32)), mask=(rn[None, :] < N) & (rk[:, None] < K), other=0.0)
        acc = dot(x.to(tl.float32), w, acc)
    acc = acc * tl.load(s_ptr + rn, mask=rn < N, other=0.0)[None, :] + tl.load(b_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
    tl.store(y_ptr + rm[:, None] * sym + rn[None, :], acc.to(y_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def int8_weight_linear(x, w_q, w_scale, bias):
    m, k = x.shape
    n = w_q.shape[0]
    chunks, rows = dequantized_pieces(x, w_q)  # kept: together they are the whole weight in float32
    table = torch.tensor([c.data_ptr() for c in chunks], dtype=torch.int64, device=x.device)
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    _table_kernel[(triton.cdiv(n, 32), triton.cdiv(m, 16))](
        x, table, w_scale, bias, y, m, n, k, rows, x.stride(0), x.stride(1), y.stride(0), BM=16, BN=32, BK=32)
    return y
