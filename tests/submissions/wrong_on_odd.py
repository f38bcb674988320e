"""A softmax that is right when the row length is even and leaves the last column unwritten when odd."""
import torch
import triton
import triton.language as tl
from good_triton import check_softmax_input


@triton.jit
def _kernel(x_ptr, y_ptr, x_stride, y_stride, n_cols, n_even, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * x_stride + offs, mask=offs < n_cols, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    y = num / tl.sum(num, axis=0)
    tl.store(y_ptr + row * y_stride + offs, y.to(y_ptr.dtype.element_ty), mask=offs < n_even)  # bug


def softmax(x):
    check_softmax_input(x)  # the exercise's rule (2-D, rows that fit one block)
    m, n = x.shape
    y = torch.empty_like(x)
    _kernel[(m,)](x, y, x.stride(0), y.stride(0), n, n - n % 2, BLOCK=triton.next_power_of_2(n))
    return y
