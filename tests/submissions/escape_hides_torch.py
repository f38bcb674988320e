"""Computes the answer outside any kernel (numpy, which the operator recorder cannot see) and launches a
kernel that does nothing useful so that a launch is counted: only the behaviour check (the kernels made to
do nothing, the outputs must change) sees through it."""
import numpy as np
import torch
import triton
import triton.language as tl

from good_triton import check_softmax_input


@triton.jit
def _touch(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    y = tl.load(y_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, y, mask=offs < n)


def softmax(x):
    check_softmax_input(x)  # the exercise's rule, kept honestly
    a = x.detach().cpu().float().numpy()
    e = np.exp(a - a.max(-1, keepdims=True))
    y = torch.from_numpy(e / e.sum(-1, keepdims=True)).to(device=x.device, dtype=x.dtype)
    _touch[(triton.cdiv(y.numel(), 128),)](y, y.numel(), BLOCK=128)
    return y
