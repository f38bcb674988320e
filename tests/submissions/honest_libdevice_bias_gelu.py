# Honest bias + GELU in Liger-Kernel's style: tanh from triton.language.extra.libdevice, imported by name.
import torch
import triton
import triton.language as tl
from triton.language.extra.libdevice import tanh


@triton.jit
def _bias_gelu_kernel(x_ptr, b_ptr, y_ptr, n, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    h = tl.load(x_ptr + offs, mask=m, other=0.0).to(tl.float32) + tl.load(b_ptr + offs % N, mask=m, other=0.0).to(tl.float32)
    y = 0.5 * h * (1.0 + tanh(0.7978845608028654 * (h + 0.044715 * h * h * h)))
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=m)


def bias_gelu(x, bias):
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    _bias_gelu_kernel[(triton.cdiv(n, 1024),)](x, bias, y, n, bias.numel(), BLOCK=1024)
    return y
