"""A notebook's worth of exercises with three faults: each must cost only its own exercise.

- softmax: stores far outside its output (offsets * 2**34 elements, unmasked): on a GPU an illegal
  memory access, a sticky CUDA error that poisons the whole process (CUDA only: under the CPU
  interpreter it would write into the grader's own memory, so the CPU run skips it);
- online_softmax: asks for 10 TB (an out-of-memory);
- vector_add: never returns (a hang);
- bias_gelu: correct (tests/submissions/good_triton.py's, copied: graded code imports no course file)
  and must be graded as usual.
"""
import torch
import triton
import triton.language as tl


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


@triton.jit
def _bias_gelu_kernel(x_ptr, b_ptr, y_ptr, x_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    col = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = col < n_cols
    x = tl.load(x_ptr + row * x_row_stride + col, mask=mask).to(tl.float32)
    b = tl.load(b_ptr + col, mask=mask).to(tl.float32)
    z = x + b
    inner = 0.7978845608028654 * (z + 0.044715 * z * z * z)
    # tanh(u) = 1 - 2 / (exp(2u) + 1): saturates to +-1 without overflow (exp -> inf gives 1).
    t = 1.0 - 2.0 / (tl.exp(2.0 * inner) + 1.0)
    y = 0.5 * z * (1.0 + t)
    tl.store(y_ptr + row * n_cols + col, y.to(y_ptr.dtype.element_ty), mask=mask)


def bias_gelu(x, bias):
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    block = min(1024, triton.next_power_of_2(n))
    _bias_gelu_kernel[(m, triton.cdiv(n, block))](x, bias, y, x.stride(0), n, BLOCK=block)
    return y
