"""Right answers, the whole weight dequantized by torch: int8_weight_linear allocates a float32 buffer of the
weight's N*K elements as a tensor of 2 (empty_strided, the second element N*K - 1 away), views all of it as
[N, K] (as_strided) and converts w_q into it with copy_, all plumbing operators; its (correct) Triton kernel
then reads the float weight. The largest tensor any operator handed back had 2 elements."""
import torch

from good_08 import int8_weight_linear as linear_on


def int8_weight_linear(x, w_q, w_scale, bias):
    k = x.shape[1]
    n = w_q.shape[0]
    if n * k > 2:
        buf = torch.empty_strided((2,), (n * k - 1,), dtype=torch.float32, device=x.device)
        w = buf.as_strided((n, k), (k, 1))
    else:  # (a weight of 1 or 2 elements: no smaller tensor holds it)
        w = torch.empty((n, k), dtype=torch.float32, device=x.device)
    w.copy_(w_q)  # the whole weight, 4 bytes an element, before the kernel runs
    return linear_on(x, w, w_scale, bias)  # good_08's kernel, reading the float weight
