# The interpreter starts a kernel's text at the last line of its source that begins with "def ": the
# string in the body holds a second _rows (Triton's library softmax), which runs in place of the body.
import torch
import triton
import triton.language as tl


@triton.jit
def _rows(x_ptr, y_ptr, sx, sy, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + tl.program_id(0) * sx + offs, mask=offs < N, other=-float("inf")).to(tl.float32)
    num = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + tl.program_id(0) * sy + offs, (num / tl.sum(num, axis=0)).to(y_ptr.dtype.element_ty), mask=offs < N)
    """
def _rows(x_ptr, y_ptr, sx, sy, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + tl.program_id(0) * sx + offs, mask=offs < N, other=-float("inf")).to(tl.float32)
    tl.store(y_ptr + tl.program_id(0) * sy + offs, tl.softmax(x).to(y_ptr.dtype.element_ty), mask=offs < N)
    return  # """


def softmax(x):
    if x.ndim != 2 or x.shape[1] > 65536:
        raise ValueError("2-D, rows up to 65536")
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    _rows[(x.shape[0],)](x, y, x.stride(0), y.stride(0), x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return y
