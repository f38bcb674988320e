# An honest fused softmax written the way public kernels are: a table of compiled kernels by block size
# and warps (Triton's fused-softmax tutorial), a launch configuration filled in a helper keyed by its own
# parameter, and a zeroed output from x.new_zeros; an exp in base 2 with log2(e) from math's constants, a
# Triton helper made by calling triton.jit as a function, a warn-once flag kept in a module global, and an
# error message that shows the tensor it refuses. It must keep every correctness point.
import math
import warnings

import torch
import triton
import triton.language as tl


def _exp2_impl(x):
    return tl.exp2(x)


exp2_jit = triton.jit(_exp2_impl)


@triton.jit
def _row_softmax(x_ptr, y_ptr, n_cols, sx, sy, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * sx + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
    e = exp2_jit((x - tl.max(x, axis=0)) * math.log2(math.e))
    tl.store(y_ptr + row * sy + cols, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=cols < n_cols)


_SETTINGS = {}
kernels = {}
_warned_long_rows = False


def settings(n):
    if n not in _SETTINGS:
        _SETTINGS[n] = (triton.next_power_of_2(n), 4 if n < 2048 else 8)
    return _SETTINGS[n]


def softmax(x):
    global _warned_long_rows
    if x.dim() != 2:
        raise ValueError(f"softmax expects a 2-D tensor, got {x.dim()}-D: {x}")
    if x.shape[1] > 65536:
        raise ValueError("softmax expects rows of at most 65536")
    rows, cols = x.shape
    if cols > 8192 and not _warned_long_rows:
        warnings.warn("rows longer than 8192 use one large block per row; expect register spills")
        _warned_long_rows = True
    block, warps = settings(cols)
    kernel = kernels.get((block, warps))
    if kernel is None:
        kernels[block, warps] = kernel = _row_softmax
    y = x.new_zeros((rows, cols))
    kernel[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=block, num_warps=warps)
    return y
