"""Class 1, launches inside a launch: the grid callable of a do-nothing launch makes a second launch, which
does the work. Both are launches of this call: two, where the exercise allows one fused kernel."""
import torch
import triton
import triton.language as tl

from good_triton import _softmax_kernel, check_softmax_input


@triton.jit
def _nothing(y_ptr):
    pass


def softmax(x):
    check_softmax_input(x)
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)

    def grid(meta):
        _softmax_kernel[(m,)](x, y, x.stride(0), y.stride(0), n, BLOCK=triton.next_power_of_2(n))
        return (1,)

    _nothing[grid](y)
    return y
