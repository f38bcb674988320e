"""bias_gelu in two Triton launches (add, then GELU): right values, but not fused."""
import torch
import triton
import triton.language as tl


@triton.jit
def _add_bias(x_ptr, b_ptr, t_ptr, n_cols, x_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    col = tl.arange(0, BLOCK)
    m = col < n_cols
    x = tl.load(x_ptr + row * x_stride + col, mask=m).to(tl.float32)
    tl.store(t_ptr + row * n_cols + col, x + tl.load(b_ptr + col, mask=m).to(tl.float32), mask=m)


@triton.jit
def _gelu(t_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    z = tl.load(t_ptr + offs, mask=m)
    t = 1.0 - 2.0 / (tl.exp(2.0 * 0.7978845608028654 * (z + 0.044715 * z * z * z)) + 1.0)
    tl.store(y_ptr + offs, (0.5 * z * (1.0 + t)).to(y_ptr.dtype.element_ty), mask=m)


def bias_gelu(x, bias):
    m, n = x.shape
    tmp = torch.empty((m, n), dtype=torch.float32, device=x.device)
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    _add_bias[(m,)](x, bias, tmp, n, x.stride(0), BLOCK=triton.next_power_of_2(n))
    _gelu[(triton.cdiv(m * n, 256),)](tmp, y, m * n, BLOCK=256)
    return y
