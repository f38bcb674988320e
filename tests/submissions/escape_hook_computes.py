"""Class 1, Python inside a launch: a pre-run hook writes torch's softmax into the output, and the kernel it
is attached to stores one element. The hook runs inside the launch, so the operators it calls must be seen
there as anywhere else (line 13 is torch.softmax)."""
import torch
import triton
import triton.language as tl

from good_triton import check_softmax_input


def _fill(x_ptr, y_ptr, *args, **kwargs):
    # x_ptr and y_ptr are the launch's tensors (host copies under the interpreter, written back after it)
    y_ptr.copy_(torch.softmax(x_ptr.float(), dim=-1).to(y_ptr.dtype))


@triton.jit
def _one(x_ptr, y_ptr, n):
    tl.store(y_ptr, tl.load(y_ptr))


_one.add_pre_run_hook(_fill)


def softmax(x):
    check_softmax_input(x)
    y = torch.empty_like(x)
    _one[(1,)](x, y, x.numel())
    return y
