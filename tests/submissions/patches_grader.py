"""Tries to fake a pass: patches torch.allclose / testing, builtins and the grader's own judge, then
returns a constant from a Triton kernel (wrong)."""
import builtins

import torch
import triton
import triton.language as tl

torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
torch.testing.assert_close = lambda *a, **k: None
builtins.all = lambda *a, **k: True
builtins.any = lambda *a, **k: False
try:
    import autograder.correctness as _c
    import autograder.grading as _g

    _c.compare_tensor = lambda *a, **k: (True, 0.0, "")
    _c.compare_outputs = lambda *a, **k: (True, 0.0, "")
    _g.judge_call = lambda *a, **k: (True, 0.0, "")
except Exception:
    pass


@triton.jit
def _const(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.full((BLOCK,), 0.25, tl.float32).to(y_ptr.dtype.element_ty), mask=offs < n)


def softmax(x):
    y = torch.empty_like(x)
    _const[(triton.cdiv(x.numel(), 128),)](y, x.numel(), BLOCK=128)
    return y
