"""bias_gelu that steps between rows by the row length (ignores x.stride(0)) and writes tanh(u) as
(e^2u - 1) / (e^2u + 1), which is inf/inf = NaN once u > 44. Right on small contiguous inputs."""
import torch
import triton
import triton.language as tl


@triton.jit
def _kernel(x_ptr, b_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    col = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = col < n_cols
    x = tl.load(x_ptr + row * n_cols + col, mask=mask).to(tl.float32)  # bug: row step n_cols, not stride(0)
    z = x + tl.load(b_ptr + col, mask=mask).to(tl.float32)
    e = tl.exp(2.0 * 0.7978845608028654 * (z + 0.044715 * z * z * z))
    y = 0.5 * z * (1.0 + (e - 1.0) / (e + 1.0))  # bug: inf / inf = NaN for large z
    tl.store(y_ptr + row * n_cols + col, y.to(y_ptr.dtype.element_ty), mask=mask)


def bias_gelu(x, bias):
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    block = min(1024, triton.next_power_of_2(n))
    _kernel[(m, triton.cdiv(n, block))](x, bias, y, n, BLOCK=block)
    return y
