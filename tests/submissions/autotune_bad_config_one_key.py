"""A vector_add whose autotuner keys on nothing but the dtypes (``key=[]``) and lists one wrong config (BIAS=1
adds one): every case of a dtype shares one entry of the autotuner's cache, so a case pinned to the wrong
config must still run it after a case of the same dtype ran the right one in the same worker."""
import triton
import triton.language as tl
from good_triton import launch_add


@triton.autotune(configs=[triton.Config({"BIAS": 0}), triton.Config({"BIAS": 1})], key=[])
@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, BIAS: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, (x + y + BIAS).to(out_ptr.dtype.element_ty), mask=mask)


def vector_add(x, y):
    return launch_add(_add_kernel, x, y)
