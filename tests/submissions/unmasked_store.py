"""vector_add whose store has no mask: the last program writes past the end of the output. Under the
Triton interpreter that corrupts the heap (the process aborts); on a GPU it writes memory it does not own."""
import triton
import triton.language as tl

from good_triton import launch_add


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, (x + y).to(out_ptr.dtype.element_ty))  # bug: no mask


def vector_add(x, y):
    return launch_add(_add_kernel, x, y)
