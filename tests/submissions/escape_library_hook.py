"""Class 1, a library function as a launch callback: torch.softmax itself is the kernel's pre-run hook, and
the kernel's parameters are named so that Triton calls ``torch.softmax(x, dim=-1, out=y)`` with the
launch's tensors. No line of the submission is on the stack while it runs: the launch is refused (line 22)."""
import torch
import triton
import triton.language as tl

from good_triton import check_softmax_input


@triton.jit
def _nothing(x, dim, out):
    pass


_nothing.add_pre_run_hook(torch.softmax)


def softmax(x):
    check_softmax_input(x)
    y = torch.empty_like(x)
    _nothing[(1,)](x, dim=-1, out=y)
    return y
