"""What ``course`` changes in Triton's interpreter so that interpreted kernels compute what compiled ones do.

Applied when something that runs kernels is imported while ``course`` interprets (no GPU): the
autograder (every notebook imports it, every grading worker runs under it) and ``course.triton_compat``
(the reference kernels). Not at ``import course``: a script may still switch the interpreter off after that
and before it imports Triton (tests/_sm90_compile.py compiles for a GPU that way).

- ``round_interpreted_bf16()``: the interpreter's ``x.to(tl.bfloat16)`` drops the low 16 bits of a float32
  (rounds toward zero: up to 1 ulp off, and biased), where compiled kernels round to nearest even. Seen
  here (triton 3.9), it doubled the error of a bf16 transformer block against float64. Patched so the
  interpreter rounds like the GPU.
"""
from __future__ import annotations

import numpy as np
import torch


def round_interpreted_bf16() -> bool:
    """Make the interpreter's float32 -> bfloat16 cast round to nearest even, as compiled kernels do.

    Returns whether the patch is in place (False when this Triton's interpreter is laid out differently:
    then casts keep its own behaviour)."""
    try:
        import triton.language as tl

        from course.triton_internals import internal

        interpreter = internal("interpreter")
        builder, handle = interpreter.InterpreterBuilder, interpreter.TensorHandle
    except (ImportError, AttributeError):
        return False
    original = builder.cast_impl
    if getattr(original, "_rounds_bf16", False):
        return True

    def cast_impl(self, src, dst_type):
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            # torch's cast rounds to nearest even; bfloat16 values live in the interpreter as uint16 bits
            bits = torch.from_numpy(np.ascontiguousarray(src.data)).to(torch.bfloat16).view(torch.int16)
            return handle(bits.numpy().view(np.uint16), dst_type.scalar)
        return original(self, src, dst_type)

    cast_impl._rounds_bf16 = True
    builder.cast_impl = cast_impl
    return True
