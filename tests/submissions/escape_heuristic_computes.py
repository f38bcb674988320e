"""Class 1, a heuristic that computes: the ``triton.heuristics`` function of a copy kernel writes the row
softmax through tensor methods (.exp, .sum, .amax: a spelling no source audit of torch.softmax sees) and
returns a block size. The operators run during the launch; deny by default sees each (line 12)."""
import torch
import triton
import triton.language as tl

from good_triton import check_softmax_input


def _block(args):
    x, y = args["x_ptr"], args["y_ptr"]
    e = (x.float() - x.float().amax(-1, keepdim=True)).exp()
    y.copy_((e / e.sum(-1, keepdim=True)).to(y.dtype))
    return 16


@triton.heuristics({"BLOCK": _block})
@triton.jit
def _copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(y_ptr + offs, mask=offs < n), mask=offs < n)


def softmax(x):
    check_softmax_input(x)
    y = torch.empty_like(x)
    _copy[(1,)](x, y, x.numel())
    return y
