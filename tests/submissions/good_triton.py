"""A correct submission for softmax, online_softmax, bias_gelu and vector_add (one Triton launch each)."""
import course  # noqa: F401
import torch
import triton
import triton.language as tl


@triton.jit
def load_row(x_ptr, row_stride, n_cols, BLOCK: tl.constexpr):
    """This program's row (program_id(0)) in float32, -inf past its end; with its offsets and mask."""
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + tl.program_id(0) * row_stride + offs, mask=mask, other=-float("inf"))
    return x.to(tl.float32), offs, mask


@triton.jit
def store_row(y_ptr, row_stride, y, offs, mask):
    tl.store(y_ptr + tl.program_id(0) * row_stride + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, x_row_stride, y_row_stride, n_cols, BLOCK: tl.constexpr):
    x, offs, mask = load_row(x_ptr, x_row_stride, n_cols, BLOCK)
    num = tl.exp(x - tl.max(x, axis=0))
    store_row(y_ptr, y_row_stride, num / tl.sum(num, axis=0), offs, mask)


MAX_FUSED_ROW = 65536


def check_softmax_input(x):
    """The exercise's rule: 2-D input, rows that fit one block (longer rows are online_softmax's job)."""
    if x.dim() != 2 or x.shape[1] > MAX_FUSED_ROW:
        raise ValueError(f"softmax needs a 2-D input with rows of at most {MAX_FUSED_ROW}, got {tuple(x.shape)}")


def softmax(x):
    check_softmax_input(x)
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    _softmax_kernel[(m,)](x, y, x.stride(0), y.stride(0), n, BLOCK=triton.next_power_of_2(n))
    return y


@triton.jit
def _online_softmax_kernel(x_ptr, y_ptr, x_row_stride, y_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m_run = -float("inf")
    s_run = 0.0
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * x_row_stride + offs, mask=offs < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m_run, tl.max(x, axis=0))
        m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)  # a block of only -inf so far: no -inf - -inf
        s_run = s_run * tl.exp(m_run - m_safe) + tl.sum(tl.exp(x - m_safe), axis=0)
        m_run = m_new
    m_safe = tl.where(m_run == -float("inf"), 0.0, m_run)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n_cols
        x = tl.load(x_ptr + row * x_row_stride + offs, mask=mask, other=-float("inf")).to(tl.float32)
        y = tl.exp(x - m_safe) / s_run
        tl.store(y_ptr + row * y_row_stride + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def online_softmax(x):
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    _online_softmax_kernel[(m,)](x, y, x.stride(0), y.stride(0), n, BLOCK=256)
    return y


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


@triton.jit
def add_fp32(x_ptr, y_ptr, offs, mask):
    # upcast: the interpreter gets bf16 arithmetic wrong; on a GPU fp32 math costs nothing here
    return tl.load(x_ptr + offs, mask=mask).to(tl.float32) + tl.load(y_ptr + offs, mask=mask).to(tl.float32)


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, add_fp32(x_ptr, y_ptr, offs, mask).to(out_ptr.dtype.element_ty), mask=mask)


def launch_add(kernel, x, y):
    """out = x + y by one launch of ``kernel(x_ptr, y_ptr, out_ptr, n, BLOCK)`` over 1024-element blocks."""
    if x.shape != y.shape or x.dtype != y.dtype or x.device != y.device:
        raise ValueError("vector_add needs x and y of the same shape, dtype and device")
    out = torch.empty_like(x)
    n = x.numel()
    kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    return out


def vector_add(x, y):
    return launch_add(_add_kernel, x, y)


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < n), mask=offs < n)


def copy_into(src, dst):
    """dst (contiguous, src's size) <- src, by one Triton launch: an escape's way of making its output come
    from a kernel while something else computed it (the null-kernel check then sees it change)."""
    _copy_kernel[(triton.cdiv(src.numel(), 1024),)](src.contiguous(), dst, src.numel(), BLOCK=1024)
    return dst
