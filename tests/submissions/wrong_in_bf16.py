"""A softmax that is right in float32 and float16 and 10% off in bfloat16."""
import torch
import triton
import triton.language as tl
from good_triton import check_softmax_input, load_row, store_row


@triton.jit
def _kernel(x_ptr, y_ptr, x_stride, y_stride, n_cols, scale, BLOCK: tl.constexpr):
    x, offs, mask = load_row(x_ptr, x_stride, n_cols, BLOCK)
    num = tl.exp(x - tl.max(x, axis=0))
    store_row(y_ptr, y_stride, num / tl.sum(num, axis=0) * scale, offs, mask)


def softmax(x):
    check_softmax_input(x)  # the exercise's rule (2-D, rows that fit one block)
    m, n = x.shape
    y = torch.empty_like(x)
    scale = 1.1 if x.dtype == torch.bfloat16 else 1.0
    _kernel[(m,)](x, y, x.stride(0), y.stride(0), n, scale, BLOCK=triton.next_power_of_2(n))
    return y
