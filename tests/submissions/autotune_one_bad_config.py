"""A vector_add whose autotuner lists one wrong config (BIAS=1 adds one): autotuning might never pick it on
the grader's shapes, but the learner listed it, so some case runs it and fails, naming the config."""
import triton
import triton.language as tl
from good_triton import launch_add


@triton.autotune(configs=[triton.Config({"BIAS": 0}), triton.Config({"BIAS": 1}), triton.Config({"BIAS": 0}, num_warps=2)],
                 key=["n"])
@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, BIAS: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, (x + y + BIAS).to(out_ptr.dtype.element_ty), mask=mask)


def vector_add(x, y):
    return launch_add(_add_kernel, x, y)
