"""A softmax without the max subtraction: exp overflows on large magnitudes (hard rows)."""
import torch
import triton
import triton.language as tl
from good_triton import check_softmax_input


@triton.jit
def _kernel(x_ptr, y_ptr, x_stride, y_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * x_stride + offs, mask=mask, other=-float("inf")).to(tl.float32)
    num = tl.exp(x)
    tl.store(y_ptr + row * y_stride + offs, (num / tl.sum(num, axis=0)).to(y_ptr.dtype.element_ty), mask=mask)


def softmax(x):
    check_softmax_input(x)  # the exercise's rule (2-D, rows that fit one block)
    m, n = x.shape
    y = torch.empty_like(x)
    _kernel[(m,)](x, y, x.stride(0), y.stride(0), n, BLOCK=triton.next_power_of_2(n))
    return y
