"""A notebook's worth of exercises with three faults: each must cost only its own exercise.

- softmax: stores far outside its output (offsets * 2**34 elements, unmasked): on a GPU an illegal
  memory access, a sticky CUDA error that poisons the whole process (CUDA only: under the CPU
  interpreter it would write into the grader's own memory, so the CPU run skips it);
- online_softmax: asks for 10 TB (an out-of-memory);
- vector_add: never returns (a hang);
- bias_gelu: correct (good_triton's) and must be graded as usual.
"""
import torch
import triton
import triton.language as tl
from good_triton import bias_gelu  # noqa: F401  (tests/submissions must be on PYTHONPATH)


@triton.jit
def _store_far_away(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK).to(tl.int64)
    tl.store(y_ptr + offs * (1 << 34), tl.zeros([BLOCK], dtype=tl.float32) + n)  # no mask, 64 GiB apart


def softmax(x):
    y = torch.empty(x.shape, dtype=torch.float32, device=x.device)
    _store_far_away[(1,)](y, x.numel(), BLOCK=64)
    return y.to(x.dtype)


def online_softmax(x):
    huge = torch.empty(10 * 2**40, dtype=torch.uint8, device=x.device)  # 10 TiB
    return huge[: x.numel()].view(x.shape)


def vector_add(x, y):
    while True:
        pass
