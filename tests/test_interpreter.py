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
from triton.language.extra import libdevice
from triton.language.extra.libdevice import tanh

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


@triton.jit
def _libdevice_gelu(x_ptr, y_ptr, e_ptr, n, BLOCK: tl.constexpr):  # Liger-Kernel's spelling: tanh imported by name
    r = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + r, mask=r < n, other=0.0).to(tl.float32)
    y = 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
    tl.store(y_ptr + r, y.to(y_ptr.dtype.element_ty), mask=r < n)
    tl.store(e_ptr + r, libdevice.pow(libdevice.exp(x), 2.0), mask=r < n)


@triton.jit
def _libdevice_unknown(x_ptr, n, BLOCK: tl.constexpr):
    r = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + r, mask=r < n)
    tl.store(x_ptr + r, libdevice.j0(x), mask=r < n)


@pytest.mark.parametrize("dtype", [torch.float32, BF16])
def test_libdevice_functions_compute_under_the_interpreter(dtype):
    # without the patch libdevice.tanh is Triton's stub, which returns None under the interpreter
    x = torch.randn(37).to(dtype)
    y, e = torch.empty_like(x), torch.empty(37)
    _libdevice_gelu[(1,)](x, y, e, 37, BLOCK=64)
    ref = torch.nn.functional.gelu(x.double(), approximate="tanh")
    tol = 1e-6 if dtype == torch.float32 else 1e-2
    assert torch.allclose(y.double(), ref, atol=tol, rtol=tol)
    assert torch.allclose(e.double(), torch.exp(2 * x.double()), rtol=1e-5)
    assert tanh.__module__ == "triton.language.extra.libdevice" and libdevice.exp.__module__ == tanh.__module__


def test_a_libdevice_function_with_no_interpreter_version_names_itself():
    from course.interpreter import LibdeviceUnavailable

    with pytest.raises(Exception) as info:
        _libdevice_unknown[(1,)](torch.randn(8), 8, BLOCK=8)
    chain = [info.value, info.value.__cause__, info.value.__context__]
    assert any(isinstance(e, LibdeviceUnavailable) and "libdevice.j0" in str(e) and "GPU" in str(e) for e in chain) \
        or "libdevice.j0 has no version under the Triton interpreter" in str(info.value), repr(info.value)


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


def test_the_interpreter_answers_the_device_query_triton_s_tutorials_make_at_import():
    """``triton.runtime.driver.active.get_active_torch_device()`` (Triton's tutorials, at import) raised "0
    active drivers" without a GPU: the interpreter's driver answers the CPU; what only a GPU's driver does
    raises an error that names it."""
    from course.interpreter import InterpreterDriver

    active = triton.runtime.driver.active
    assert isinstance(active, InterpreterDriver)
    assert active.get_active_torch_device() == torch.device("cpu") and active.get_current_device() == 0
    with pytest.raises(AttributeError, match="get_benchmarker: the Triton interpreter"):
        active.get_benchmarker()


def test_an_interpreted_launch_adds_nothing_to_the_kernels_module(tmp_path):
    """The interpreter rewrites a kernel into calls of its own and used to copy its module's globals (np,
    inspect, time, its internals) into the kernel's module at the first launch: a submission then held
    numpy and inspect without importing them. The kernel still runs (comparisons and assignments are what
    the rewriting turns into the interpreter's calls), and its module holds only what its source binds."""
    import importlib.util
    import sys

    path = tmp_path / "leak_probe.py"
    path.write_text("import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
                    "def double_small(x_ptr, n, BLOCK: tl.constexpr):\n"
                    "    offs = tl.arange(0, BLOCK)\n"
                    "    x = tl.load(x_ptr + offs, mask=offs < n)\n"
                    "    tl.store(x_ptr + offs, tl.where(x < 2.0, x * 2, x), mask=offs < n)\n")
    spec = importlib.util.spec_from_file_location("leak_probe", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        before = set(vars(module))
        x = torch.arange(5.0)
        module.double_small[(1,)](x, 5, BLOCK=8)
        assert x.tolist() == [0.0, 2.0, 2.0, 3.0, 4.0]
        assert set(vars(module)) == before, sorted(set(vars(module)) - before)
    finally:
        sys.modules.pop("leak_probe", None)


@triton.jit
def _scale_if(x_ptr, y_ptr, flip, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, tl.where(flip, -x, x), mask=offs < n)


@pytest.mark.parametrize("flip", [True, False])
def test_a_bool_argument_is_an_int1_scalar(flip):
    """A bool argument reaches the kernel as the int1 scalar a GPU launch makes of it (Triton 3.6's
    interpreter held it in an array its own int1 type refused)."""
    x = torch.randn(10)
    out = torch.empty_like(x)
    _scale_if[(1,)](x, out, flip, 10, BLOCK=16)
    assert torch.equal(out, -x if flip else x)


@triton.jit
def _row_total(row_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, n, BLOCK):  # n is a runtime scalar handed down from the kernel
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(row_ptr + offs, mask=offs < n, other=0.0)
    return tl.sum(acc, axis=0)


@triton.jit
def _row_totals(x_ptr, y_ptr, stride, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    tl.store(y_ptr + row, _row_total(x_ptr + row * stride, n, BLOCK))


def test_a_loop_bound_handed_to_a_triton_function_is_read_as_its_value():
    """``range(0, n, BLOCK)`` in a Triton function called with the kernel's runtime ``n`` (Triton 3.6 with
    NumPy 2.4 refused to read the one-element scalar as an int)."""
    x = torch.randn(3, 37)
    out = torch.empty(3)
    _row_totals[(3,)](x, out, x.stride(0), 37, BLOCK=16)
    torch.testing.assert_close(out, x.sum(1))


@triton.jit
def _gelu_helper(x):  # a kernel's helper: the interpreter calls it inside the kernel's launch
    return 0.5 * x * (1.0 + libdevice.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


@triton.jit
def _gelu_through_a_helper(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    r = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + r, mask=r < n, other=0.0)
    for _ in range(3):  # the helper called again and again inside one launch
        y = _gelu_helper(x)
    tl.store(y_ptr + r, tl.maximum(y, tl.minimum(y, 0.0)), mask=r < n)


def test_builtin_wrappers_are_made_once_and_the_librarys_own_are_back_after_each_launch(monkeypatch):
    """An interpreted launch wraps triton.language's builtins and swaps libdevice for numpy; the wrappers are
    made once per package (listing a package's members at every launch took ~40% of a small kernel's CPU
    time), a helper called inside the launch finds them in place, and after the launch every name is the
    library's own again."""
    import inspect

    _gelu_through_a_helper[(1,)](torch.randn(4), torch.empty(4), 4, BLOCK=8)  # the first launch of the process makes them
    listed = []
    real_getmembers = inspect.getmembers
    monkeypatch.setattr(inspect, "getmembers", lambda obj, *a: listed.append(obj) or real_getmembers(obj, *a))
    own = {"tl.maximum": tl.maximum, "tl.tensor.to": tl.tensor.to, "libdevice.tanh": libdevice.tanh,
           "tl.math.exp": tl.math.exp}
    x = torch.randn(50)
    for _ in range(3):
        y = torch.empty_like(x)
        _gelu_through_a_helper[(1,)](x, y, 50, BLOCK=64)
        ref = torch.nn.functional.gelu(x.double(), approximate="tanh")
        assert torch.allclose(y.double(), ref, atol=1e-6)
    after = {"tl.maximum": tl.maximum, "tl.tensor.to": tl.tensor.to, "libdevice.tanh": libdevice.tanh,
             "tl.math.exp": tl.math.exp}
    assert after == own
    assert not any(obj in (tl, tl.tensor, tl.math) for obj in listed), "a package's builtins listed again"


@triton.jit
def _relu(x_ptr, y_ptr, BLOCK: tl.constexpr):
    r = tl.arange(0, BLOCK)
    tl.store(y_ptr + r, tl.maximum(tl.load(x_ptr + r), 0.0))


def test_a_builtin_replaced_in_python_is_not_what_an_interpreted_kernel_calls(monkeypatch):
    """Code that replaces a triton.language builtin with a Python function of its own gets Python run inside
    no kernel: the launch sets the library's own wrapper for its duration, and puts the replacement back."""
    ran = []
    replacement = lambda a, b, **kw: ran.append(1) or a  # noqa: E731
    monkeypatch.setattr(tl, "maximum", replacement)
    x, y = torch.randn(8), torch.empty(8)
    _relu[(1,)](x, y, BLOCK=8)
    assert not ran and torch.equal(y, x.clamp(min=0))
    assert tl.maximum is replacement
