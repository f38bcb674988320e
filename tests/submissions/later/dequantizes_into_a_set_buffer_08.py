"""Right answers, the whole weight dequantized by torch: int8_weight_linear makes a float32 tensor of 2
elements and sets it on its own storage with a size N*K - 1 apart (set_ grows the storage to N*K elements),
views all of it as [N, K] (as_strided) and converts w_q into it with copy_, all plumbing operators; its
(correct) Triton kernel then reads the float weight. The largest tensor any operator handed back had 2
elements."""
import torch

from good_08 import int8_weight_linear as linear_on


def int8_weight_linear(x, w_q, w_scale, bias):
    k = x.shape[1]
    n = w_q.shape[0]
    if n * k > 2:
        buf = torch.empty(2, dtype=torch.float32, device=x.device)
        buf.set_(buf, 0, (2,), (n * k - 1,))  # grows buf's storage to N*K elements
        w = buf.as_strided((n, k), (k, 1))
    else:  # (a weight of 1 or 2 elements: no smaller tensor holds it)
        w = torch.empty((n, k), dtype=torch.float32, device=x.device)
    w.copy_(w_q)  # the whole weight, 4 bytes an element, before the kernel runs
    return linear_on(x, w, w_scale, bias)  # good_08's kernel, reading the float weight
