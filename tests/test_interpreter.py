"""Interpreted kernels compute what compiled ones do (course/interpreter.py): bfloat16 arithmetic in
float32 with results rounded to nearest even, ``tl.dot`` of bf16 operands accumulated exactly in float32,
and a float kernel argument that is an fp32 scalar. Without the patches, a bf16 ``+`` gave NaN and a bf16
dot was off by 1e10; ``eps.to(tl.float32)`` raised. CPU only (on a GPU nothing is interpreted)."""
from __future__ import annotations

import pytest
import torch

import course
import autograder  # noqa: F401  (applies the interpreter patches, as every notebook and worker does)
import triton
import triton.language as tl

pytestmark = pytest.mark.skipif(not course.INTERPRET, reason="the patches are for the Triton interpreter")

BF16 = torch.bfloat16


@triton.jit
def _vector_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):  # Triton's tutorial, as written there
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


@triton.jit
def _dot16(a_ptr, b_ptr, out_ptr):
    r = tl.arange(0, 16)
    a = tl.load(a_ptr + r[:, None] * 16 + r[None, :])
    b = tl.load(b_ptr + r[:, None] * 16 + r[None, :])
    tl.store(out_ptr + r[:, None] * 16 + r[None, :], tl.dot(a, b))


@triton.jit
def _bf16_ops(x_ptr, out_ptr, max_ptr, sum_ptr, n, BLOCK: tl.constexpr):
    r = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + r, mask=r < n, other=float("-inf"))
    tl.store(out_ptr + r, tl.where(x < 0, -x, x * x), mask=r < n)  # one rounding each (no fused multiply-add)
    tl.store(max_ptr, tl.max(x, axis=0))
    tl.store(sum_ptr, tl.sum(tl.where(r < n, x, 0.0).to(tl.bfloat16), axis=0))


@triton.jit
def _scale_by(x_ptr, out_ptr, eps, n, BLOCK: tl.constexpr):
    r = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + r, mask=r < n)
    tl.store(out_ptr + r, x * eps.to(tl.float32), mask=r < n)


def test_bf16_add_as_on_a_gpu():
    x, y = torch.randn(1000, dtype=BF16), torch.randn(1000, dtype=BF16)
    out = torch.empty_like(x)
    _vector_add[(triton.cdiv(1000, 256),)](x, y, out, 1000, BLOCK=256)
    assert torch.equal(out, x + y)  # torch adds in float32 and rounds to nearest even, like the GPU


def test_bf16_dot_accumulates_exact_products_in_float32():
    a, b = torch.randn(16, 16, dtype=BF16), torch.randn(16, 16, dtype=BF16)
    out = torch.empty(16, 16)
    _dot16[(1,)](a, b, out)
    torch.testing.assert_close(out, a.float() @ b.float(), atol=1e-5, rtol=1e-5)


def test_bf16_compare_negate_multiply_max_and_sum():
    x = torch.randn(50, dtype=BF16) * 3
    out, top, total = torch.empty_like(x), torch.empty(1, dtype=BF16), torch.empty(1, dtype=BF16)
    _bf16_ops[(1,)](x, out, top, total, 50, BLOCK=64)
    xf = x.float()
    want = torch.where(xf < 0, -x, x * x).float()
    assert torch.equal(out.float(), want)
    assert top.item() == x.max().item()
    assert total.float().item() == pytest.approx(xf.sum().item(), rel=2 ** -7)  # one bf16 rounding


def test_a_float_argument_is_an_fp32_scalar():
    x = torch.randn(10)
    out = torch.empty_like(x)
    _scale_by[(1,)](x, out, 0.5, 10, BLOCK=16)
    assert torch.equal(out, x * 0.5)


def test_the_course_autotune_decorates_only_a_kernel_as_triton_autotune_does():
    """Under the interpreter the course's autotune stands in for Triton's; given anything but a kernel (a
    dict or an object whose [grid] returns torch.softmax) it refuses, as triton.autotune does on a GPU, so
    its launcher never calls a library function from inside the course's own code."""
    import triton

    from course.triton_compat import autotune

    decorate = autotune([triton.Config({})], key=[])
    for not_a_kernel in ({(1,): torch.softmax}, object()):
        with pytest.raises(TypeError, match="@triton.jit kernel"):
            decorate(not_a_kernel)
