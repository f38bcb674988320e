"""What ``course`` changes in Triton's interpreter so that interpreted kernels compute what compiled ones do.

Applied (``patch_interpreter()``) when something that runs kernels is imported while ``course`` interprets
(no GPU): the autograder (every notebook imports it, every grading worker runs under it) and
``course.triton_compat`` (the reference kernels). Not at ``import course``: a script may still switch the
interpreter off after that and before it imports Triton (tests/_sm90_compile.py compiles for a GPU that way).

- ``round_interpreted_bf16()``: the interpreter's ``x.to(tl.bfloat16)`` drops the low 16 bits of a float32
  (rounds toward zero: up to 1 ulp off, and biased), where compiled kernels round to nearest even. Seen
  here (triton 3.9), it doubled the error of a bf16 transformer block against float64. Patched so the
  interpreter rounds like the GPU.
- ``compute_bf16_in_fp32()``: the interpreter keeps bfloat16 values as their uint16 bits (numpy has no
  bfloat16) and computes on those bits as integers: a bf16 ``+`` gave NaN, a 16x16 bf16 ``tl.dot`` was off
  by 2.7e10, a comparison of negative values was reversed. Honest kernels (Triton's vector-add tutorial on
  bf16 inputs, a FlashAttention with a bf16 ``P @ V``) then failed on the CPU only. Patched as a GPU
  computes: bf16 operands widened to float32 (exactly), the operation in float32, a bf16 result rounded to
  nearest even; a ``tl.dot`` of bf16 operands accumulates their exact products in float32, as tensor
  cores do.
- ``float_arguments_as_fp32()``: a Python float kernel argument reached the kernel as a Python float, so
  ``eps.to(tl.float32)``, valid on a GPU (where it is an fp32 scalar), raised. Patched to an fp32 scalar.

``launch_cpu_arguments_in_place()`` is applied at ``import course``, before ``course.bounds`` wraps the same
launch (so that the bounds checks see the tensors the kernel gets): before a launch the interpreter
"copies the arguments to the host" (for CPU tensors: the same storage) and after it copies them back,
each through a nested function that calls itself, a reference cycle that held every argument's storage
until the cycle collector ran. A chunk of logits freed with ``del`` then stayed allocated (08's streamed
loss showed eager's peak on the CPU, and the grader's ``MemoryMeter`` counted every chunk). Patched:
all-CPU arguments are handed to the kernel as they are (what the copy amounted to), and nothing is held
after the launch.
"""
from __future__ import annotations

import numpy as np
import torch


def patch_interpreter() -> bool:
    """Every patch below; whether all are in place (False when this Triton's interpreter is laid out
    differently: then it keeps its own behaviour)."""
    return all([round_interpreted_bf16(), compute_bf16_in_fp32(), float_arguments_as_fp32()])


def _interpreter():
    try:
        import triton.language as tl

        from course.triton_internals import internal

        interpreter = internal("interpreter")
        for name in ("InterpreterBuilder.create_fadd", "InterpreterBuilder.create_dot", "ReduceOps.sum",
                     "ReduceOps.min_max", "_implicit_cvt"):
            internal(name)
        return tl, interpreter
    except (ImportError, AttributeError):
        return None, None


def _to_bf16_bits(fp32: np.ndarray) -> np.ndarray:
    """float32 values rounded to nearest even bfloat16, as uint16 bits (the interpreter's storage)."""
    bits = torch.from_numpy(np.ascontiguousarray(fp32, dtype=np.float32)).to(torch.bfloat16).view(torch.int16)
    return bits.numpy().view(np.uint16)


def _from_bf16_bits(bits: np.ndarray) -> np.ndarray:
    """bfloat16 values (uint16 bits) widened to float32, exactly."""
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)


def round_interpreted_bf16() -> bool:
    """Make the interpreter's float32 -> bfloat16 cast round to nearest even, as compiled kernels do."""
    tl, interpreter = _interpreter()
    if interpreter is None:
        return False
    builder, handle = interpreter.InterpreterBuilder, interpreter.TensorHandle
    original = builder.cast_impl
    if getattr(original, "_rounds_bf16", False):
        return True

    def cast_impl(self, src, dst_type):
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            return handle(_to_bf16_bits(src.data), dst_type.scalar)
        return original(self, src, dst_type)

    cast_impl._rounds_bf16 = True
    builder.cast_impl = cast_impl
    return True


# Builder operations on floats: those whose result is a value of the operands' type (rounded back to bf16)
# and those whose result is a truth value or takes the accumulator's type (``tl.dot``: kept as computed).
_ROUNDED = ("create_fadd", "create_fsub", "create_fmul", "create_fdiv", "create_frem", "create_precise_divf",
            "create_approx_divf", "create_minimumf", "create_maximumf", "create_minnumf", "create_maxnumf",
            "create_fneg", "create_exp", "create_exp2", "create_log", "create_log2", "create_sqrt",
            "create_precise_sqrt", "create_rsqrt", "create_sin", "create_cos", "create_floor", "create_ceil",
            "create_erf", "create_fma", "create_clampf")
_KEPT = tuple(f"create_fcmp{c}" for c in ("OLT", "OGT", "OLE", "OGE", "OEQ", "ONE", "ULT", "UGT", "ULE", "UGE",
                                          "UEQ", "UNE")) + ("create_dot",)


def compute_bf16_in_fp32() -> bool:
    """Make the interpreter compute on bfloat16 values in float32 and round results to bfloat16."""
    tl, interpreter = _interpreter()
    if interpreter is None:
        return False
    builder, handle, reduce_ops = interpreter.InterpreterBuilder, interpreter.TensorHandle, interpreter.ReduceOps
    if getattr(builder.create_fadd, "_bf16_in_fp32", False):
        return True

    def is_bf16(x):
        return isinstance(x, handle) and x.dtype.scalar == tl.bfloat16

    def widen(x):
        return handle(_from_bf16_bits(x.data), tl.float32) if is_bf16(x) else x

    def patched(original, rounded: bool):
        def op(self, *args):
            if not any(is_bf16(a) for a in args):
                return original(self, *args)
            out = original(self, *(widen(a) for a in args))
            if rounded and isinstance(out, handle) and out.dtype.scalar == tl.float32:
                return handle(_to_bf16_bits(out.data), tl.bfloat16)
            return out

        op._bf16_in_fp32 = True
        return op

    for names, rounded in ((_ROUNDED, True), (_KEPT, False)):
        for name in names:
            if hasattr(builder, name):
                setattr(builder, name, patched(getattr(builder, name), rounded))

    # Reductions the interpreter does in numpy on the storage (sum, max, min): in float32, rounded once.
    original_sum, original_min_max = reduce_ops.sum, reduce_ops.min_max

    def bf16_tensor(x):
        return isinstance(x, tl.tensor) and x.dtype == tl.bfloat16

    def wide_tensor(x):
        return tl.tensor(handle(_from_bf16_bits(x.handle.data), tl.float32), tl.float32)

    def narrow(out):
        if isinstance(out, tl.tensor) and out.dtype == tl.float32:
            return tl.tensor(handle(_to_bf16_bits(np.asarray(out.handle.data)), tl.bfloat16), tl.bfloat16)
        return out

    def reduce_sum(self, input):
        return narrow(original_sum(self, wide_tensor(input))) if bf16_tensor(input) else original_sum(self, input)

    def min_max(self, input, val_reduce_op, idx_reduce_op=None):
        values = input[0] if isinstance(input, tuple) else input
        if not bf16_tensor(values):
            return original_min_max(self, input, val_reduce_op, idx_reduce_op)
        out = original_min_max(self, wide_tensor(values), val_reduce_op, idx_reduce_op)
        return (narrow(out[0]), out[1]) if isinstance(out, tuple) else (narrow(out) if val_reduce_op else out)

    reduce_ops.sum, reduce_ops.min_max = reduce_sum, min_max
    return True


def float_arguments_as_fp32() -> bool:
    """Hand a Python float kernel argument to the interpreted kernel as an fp32 scalar, as a GPU launch does."""
    tl, interpreter = _interpreter()
    if interpreter is None or not hasattr(interpreter, "_implicit_cvt"):
        return False
    original = interpreter._implicit_cvt
    if getattr(original, "_fp32_floats", False):
        return True

    def implicit_cvt(arg):
        if isinstance(arg, float):
            return tl.tensor(interpreter.TensorHandle(np.array([arg], dtype=np.float32), tl.float32), tl.float32)
        return original(arg)

    implicit_cvt._fp32_floats = True
    interpreter._implicit_cvt = implicit_cvt
    return True


def _on_cpu(arg) -> bool:
    """Whether a launch argument holds no tensor other than CPU tensors (tuples, TensorWrapper and
    TensorDescriptor, which keep theirs in ``.base``, looked into)."""
    if isinstance(arg, torch.Tensor):
        return arg.device.type == "cpu"
    if isinstance(arg, (tuple, list)):
        return all(_on_cpu(a) for a in arg)
    inner = getattr(arg, "base", None)
    return inner is None or _on_cpu(inner)


def launch_cpu_arguments_in_place() -> bool:
    """Hand CPU tensors to interpreted kernels without the interpreter's host round trip (module
    docstring). Returns whether the patch is in place (False for an interpreter laid out differently)."""
    _, interpreter = _interpreter()
    executor = getattr(interpreter, "GridExecutor", None)
    if executor is None or not all(hasattr(executor, n) for n in ("_init_args_hst", "_restore_args_dev")):
        return False
    if getattr(executor, "_course_in_place", False):
        return True
    to_host, from_host = executor._init_args_hst, executor._restore_args_dev

    def init_args_hst(self, args_dev, kwargs):
        if _on_cpu(tuple(args_dev)) and _on_cpu(tuple(kwargs.values())):
            return list(args_dev), dict(kwargs)
        return to_host(self, args_dev, kwargs)

    def restore_args_dev(self, args_dev, args_hst, kwargs, kwargs_hst):
        same = all(a is b for a, b in zip(args_dev, args_hst)) and all(kwargs_hst[k] is v for k, v in kwargs.items())
        if not same:  # the kernel wrote into the arguments themselves otherwise: nothing to copy back
            from_host(self, args_dev, args_hst, kwargs, kwargs_hst)

    executor._init_args_hst, executor._restore_args_dev = init_args_hst, restore_args_dev
    executor._course_in_place = True
    return True
