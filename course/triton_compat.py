"""Triton helpers that hide the interpreter's limits (docs/CONTRACTS.md), so kernels need no special cases.

- ``autotune(configs, key, fallback)``: ``triton.autotune`` on a GPU; under the interpreter autotune
  fails ("0 active drivers": it benchmarks through a driver), so the kernel gets ``fallback`` fixed.
  ``COURSE_AUTOTUNE_MAX=N`` keeps N configs on a GPU, the first N - 1 and the list's last (its smallest, so
  that one fits float32's twice-as-large tiles: the first two of the matmul's ran out of shared memory on an
  H100): correctness runs (``pytest -m gpu``) then skip most of the compiling and benchmarking (the first
  H100 run spent ~9 of 10 minutes there).
- ``dot(a, b, acc)``: ``tl.dot`` that upcasts operands to float32 under the interpreter, where a bf16
  ``tl.dot`` returns garbage (errors near 1e10); compiled kernels keep the native tensor-core dtype.
- importing this module while interpreting makes the interpreter's float32 -> bfloat16 cast round like a
  GPU's (``course.interpreter``).
"""
from __future__ import annotations

import os

import triton
import triton.language as tl

from course.device import INTERPRET

_UPCAST_DOTS = tl.constexpr(INTERPRET)
if INTERPRET:
    from course.interpreter import patch_interpreter

    patch_interpreter()


def autotune(configs, key, fallback: triton.Config | None = None, **kwargs):
    """Autotune on a GPU; a fixed config (``fallback`` or the first of ``configs``) when interpreting."""
    if not INTERPRET:
        limit = os.environ.get("COURSE_AUTOTUNE_MAX", "")
        if limit:
            if not limit.isdigit() or int(limit) < 1:
                raise ValueError(f"COURSE_AUTOTUNE_MAX must be a positive whole number, not {limit!r}")
            configs = list(configs)
            if int(limit) < len(configs):
                configs = configs[: int(limit) - 1] + configs[-1:]
        return triton.autotune(configs=configs, key=key, **kwargs)
    fixed = fallback or configs[0]

    return lambda kernel: _FixedConfig(kernel, fixed)


class _FixedConfig:
    """What ``kernel[grid](...)`` looks like with one config's meta-parameters filled in."""

    def __init__(self, kernel, config: triton.Config):
        from course.triton_internals import internal

        if not isinstance(kernel, internal("KernelInterface")):  # as triton.autotune, which needs its arguments
            raise TypeError(f"autotune decorates a @triton.jit kernel (or one wrapped by triton.heuristics), "
                            f"not {type(kernel).__name__}")
        self.fn = kernel
        self.config = config
        self.__name__ = getattr(kernel, "__name__", "kernel")

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            meta = dict(self.config.kwargs)
            meta.update(kwargs)
            if self.config.pre_hook is not None:  # e.g. setting TMA descriptors' block shapes, as autotune does
                self.config.pre_hook({**dict(zip(self._arg_names(), args)), **meta})
            g = grid(meta) if callable(grid) else grid
            return self.fn[g](*args, **meta)

        return launch

    def _arg_names(self):
        fn = self.fn
        while not hasattr(fn, "arg_names"):  # through heuristics wrappers to the jitted function
            fn = fn.fn
        return fn.arg_names


@triton.jit
def dot(a, b, acc):
    """acc + a @ b, exact under the interpreter (upcast), tensor cores when compiled."""
    if _UPCAST_DOTS:
        a = a.to(tl.float32)
        b = b.to(tl.float32)
    return tl.dot(a, b, acc)

