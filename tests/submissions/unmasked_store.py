"""vector_add whose store has no mask: the last program writes past the end of the output. Under the
Triton interpreter that corrupts the heap (the process aborts); on a GPU it writes memory it does not own."""
import triton
import triton.language as tl

from good_triton import add_fp32, launch_add


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, add_fp32(x_ptr, y_ptr, offs, offs < n).to(out_ptr.dtype.element_ty))  # bug: no mask


def vector_add(x, y):
    return launch_add(_add_kernel, x, y)
