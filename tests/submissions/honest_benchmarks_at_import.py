# An honest softmax that times itself at import, in the forms the documentation shows: timeit with the
# statement as a string and globals=globals(), and PyTorch's benchmark Timer (which takes statements as
# strings only). The literal statements are audited as code; the worker lets exactly them run.
import timeit

import torch.utils.benchmark

import torch
import triton
import triton.language as tl



@triton.jit
def _rows(x_ptr, y_ptr, xs, ys, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + tl.program_id(0) * xs + offs, mask=mask, other=-float("inf")).to(tl.float32)
    num = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + tl.program_id(0) * ys + offs, (num / tl.sum(num, axis=0)).to(y_ptr.dtype.element_ty), mask=mask)


def softmax(x):
    if x.dim() != 2 or x.shape[1] > 65536:
        raise ValueError("softmax needs a 2-D input with rows of at most 65536")
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    _rows[(m,)](x, y, x.stride(0), y.stride(0), n, BLOCK=triton.next_power_of_2(n))
    return y


x = torch.randn(16, 100)
seconds = timeit.timeit("softmax(x)", globals=globals(), number=2)
print(f"timeit: {seconds / 2 * 1e3:.3f} ms")
print(torch.utils.benchmark.Timer(stmt="softmax(x)", globals={"x": x, "softmax": softmax}).timeit(2))
