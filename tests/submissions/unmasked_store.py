"""vector_add whose store has no mask: the last program writes past the end of the output. Under the
Triton interpreter that corrupts the heap (the process aborts); on a GPU it writes memory it does not own."""
import torch
import triton
import triton.language as tl


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, (x + y).to(out_ptr.dtype.element_ty))  # bug: no mask


def vector_add(x, y):
    if x.shape != y.shape or x.dtype != y.dtype or x.device != y.device:
        raise ValueError("vector_add needs x and y of the same shape, dtype and device")
    out = torch.empty_like(x)
    n = x.numel()
    _add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    return out
