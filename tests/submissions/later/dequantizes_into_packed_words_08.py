"""Right answers, the whole weight dequantized by torch: int8_weight_linear converts w_q into float16 (int8
values are exact in it) with one copy_ into a view of an int64 buffer of N*K/4 elements, viewed as float16:
2 bytes an element, four to each int64. Its (correct) Triton kernel then reads the float16 weight. The
largest tensor any operator handed back had N*K/4 elements, as few as the size rule allows."""
import torch

from good_08 import _int8_linear_kernel, triton


def int8_weight_linear(x, w_q, w_scale, bias):
    m, k = x.shape
    n = w_q.shape[0]
    packed = torch.empty(-(-n * k // 4), dtype=torch.int64, device=x.device)  # N*K float16 behind N*K/4 words
    w = packed.view(torch.float16)[:n * k].view(n, k)
    w.copy_(w_q)  # the whole weight, dequantized (unscaled), before the kernel runs
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    _int8_linear_kernel[(triton.cdiv(n, 32), triton.cdiv(m, 16))](
        x, w, w_scale, bias, y, m, n, k, x.stride(0), x.stride(1), w.stride(0), w.stride(1), y.stride(0),
        BM=16, BN=32, BK=32)
    return y
