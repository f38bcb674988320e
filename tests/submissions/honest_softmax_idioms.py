# An honest fused softmax written the way public kernels are: a table of compiled kernels by block size
# and warps (Triton's fused-softmax tutorial), a launch configuration filled in a helper keyed by its own
# parameter, and a zeroed output from x.new_zeros. It must keep every correctness point.
import torch
import triton
import triton.language as tl


@triton.jit
def _row_softmax(x_ptr, y_ptr, n_cols, sx, sy, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * sx + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * sy + cols, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=cols < n_cols)


_SETTINGS = {}
kernels = {}


def settings(n):
    if n not in _SETTINGS:
        _SETTINGS[n] = (triton.next_power_of_2(n), 4 if n < 2048 else 8)
    return _SETTINGS[n]


def softmax(x):
    if x.dim() != 2 or x.shape[1] > 65536:
        raise ValueError("softmax expects a 2-D input with rows of at most 65536")
    rows, cols = x.shape
    block, warps = settings(cols)
    kernel = kernels.get((block, warps))
    if kernel is None:
        kernels[block, warps] = kernel = _row_softmax
    y = x.new_zeros((rows, cols))
    kernel[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=block, num_warps=warps)
    return y
