"""The whole weight dequantized by torch in pieces, each under the size rule: int8_weight_linear converts w_q a
few rows at a time (copy_ into float32 buffers no larger than x or y), keeps every piece, then computes y with a
correct int8 kernel. Together the pieces are the weight in float32, N*K*4 bytes held at once. (On a GPU the
pieces' addresses can go to one kernel as a table, which then reads the float weight:
tests/gpu_submissions/dequantized_chunks_table.py.)"""
import torch

from good_08 import _int8_linear_kernel, triton


def dequantized_pieces(x, w_q):
    """w_q in float32, a few rows at a time, every piece kept: (the pieces, the rows of each)."""
    (m, k), n = x.shape, w_q.shape[0]
    rows = max(1, max(m * k, m * n, n, k) // k)  # a piece no larger than the largest tensor allowed
    pieces = []
    for r0 in range(0, n, rows):
        piece = torch.empty((min(rows, n - r0), k), dtype=torch.float32, device=x.device)
        piece.copy_(w_q[r0:r0 + rows])
        pieces.append(piece)
    return pieces, rows


def int8_weight_linear(x, w_q, w_scale, bias):
    m, k = x.shape
    n = w_q.shape[0]
    pieces, _ = dequantized_pieces(x, w_q)  # kept until the kernel has run: the weight in float32, held
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    _int8_linear_kernel[(triton.cdiv(n, 32), triton.cdiv(m, 16))](
        x, w_q, w_scale, bias, y, m, n, k, x.stride(0), x.stride(1), w_q.stride(0), w_q.stride(1), y.stride(0),
        BM=16, BN=32, BK=32)
    return y
