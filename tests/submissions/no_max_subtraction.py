"""A softmax without the max subtraction: exp overflows on large magnitudes (hard rows)."""
import torch
import triton
import triton.language as tl
from good_triton import check_softmax_input, load_row, store_row


@triton.jit
def _kernel(x_ptr, y_ptr, x_stride, y_stride, n_cols, BLOCK: tl.constexpr):
    x, offs, mask = load_row(x_ptr, x_stride, n_cols, BLOCK)
    num = tl.exp(x)  # bug: no max subtracted
    store_row(y_ptr, y_stride, num / tl.sum(num, axis=0), offs, mask)


def softmax(x):
    check_softmax_input(x)  # the exercise's rule (2-D, rows that fit one block)
    m, n = x.shape
    y = torch.empty_like(x)
    _kernel[(m,)](x, y, x.stride(0), y.stride(0), n, BLOCK=triton.next_power_of_2(n))
    return y
