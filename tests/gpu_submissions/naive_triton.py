"""Legal but slow softmax and bias_gelu: one Triton launch each, right values, and no performance.

Each program walks one row 16 elements at a time with a single warp (the loop a learner ports from
CPU code): 64-byte loads, a dependent round trip to memory per step, 3 passes over the row for softmax.
On an H100 with the specs' workloads this runs several times slower than the eager baselines.
"""
import course  # noqa: F401
import torch
import triton
import triton.language as tl

BLOCK = 16


@triton.jit
def _softmax_row_walk(x_ptr, y_ptr, x_row_stride, y_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * x_row_stride
    y_row = y_ptr + row * y_row_stride
    m = -float("inf")
    for start in range(0, n_cols, BLOCK):  # pass 1: the row max (reads the row)
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + offs, mask=offs < n_cols, other=-float("inf")).to(tl.float32)
        m = tl.maximum(m, tl.max(x, axis=0))
    s = 0.0
    for start in range(0, n_cols, BLOCK):  # pass 2: the sum of exp (reads it again)
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + offs, mask=offs < n_cols, other=-float("inf")).to(tl.float32)
        s += tl.sum(tl.exp(x - m), axis=0)
    for start in range(0, n_cols, BLOCK):  # pass 3: normalise (reads a third time, writes once)
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n_cols
        x = tl.load(x_row + offs, mask=mask, other=-float("inf")).to(tl.float32)
        tl.store(y_row + offs, (tl.exp(x - m) / s).to(y_ptr.dtype.element_ty), mask=mask)


def softmax_into(x, y):
    """Slow row softmax of x written into y (both [M, N])."""
    m, n = x.shape
    _softmax_row_walk[(m,)](x, y, x.stride(0), y.stride(0), n, BLOCK=BLOCK, num_warps=1)
    return y


def softmax(x):
    if x.dim() != 2 or x.shape[1] > 65536:  # the exercise's rule: longer rows are online_softmax's job
        raise ValueError(f"softmax needs a 2-D input with rows of at most 65536, got {tuple(x.shape)}")
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    return softmax_into(x, y)


@triton.jit
def _bias_gelu_row_walk(x_ptr, b_ptr, y_ptr, x_row_stride, y_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    for start in range(0, n_cols, BLOCK):
        col = start + tl.arange(0, BLOCK)
        mask = col < n_cols
        z = (tl.load(x_ptr + row * x_row_stride + col, mask=mask).to(tl.float32)
             + tl.load(b_ptr + col, mask=mask).to(tl.float32))
        u = 0.7978845608028654 * (z + 0.044715 * z * z * z)
        t = 1.0 - 2.0 / (tl.exp(2.0 * u) + 1.0)  # tanh(u), saturating without overflow
        tl.store(y_ptr + row * y_row_stride + col, (0.5 * z * (1.0 + t)).to(y_ptr.dtype.element_ty), mask=mask)


def bias_gelu(x, bias):
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    _bias_gelu_row_walk[(m,)](x, bias, y, x.stride(0), y.stride(0), n, BLOCK=BLOCK, num_warps=1)
    return y
