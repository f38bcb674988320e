"""Triton helpers that hide the interpreter's limits (docs/CONTRACTS.md), so kernels need no special cases.

- ``autotune(configs, key, fallback)``: ``triton.autotune`` on a GPU; under the interpreter autotune
  fails ("0 active drivers": it benchmarks through a driver), so the kernel gets ``fallback`` fixed.
  ``COURSE_AUTOTUNE_MAX=N`` keeps only the first N configs on a GPU: correctness runs (``pytest -m gpu``)
  then skip most of the compiling and benchmarking (the first H100 run spent ~9 of 10 minutes there).
- ``launch(kernel, grid, key, *args, config=None, **kwargs)``: ``kernel[grid](*args, **kwargs)`` for a kernel
  under ``autotune``, through the autotuner once per ``key``, then its choice launched directly: the
  autotuner's dispatch costs tens of microseconds of Python per call, as much as a small kernel runs.
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
    from course.interpreter import round_interpreted_bf16

    round_interpreted_bf16()


def autotune(configs, key, fallback: triton.Config | None = None, **kwargs):
    """Autotune on a GPU; a fixed config (``fallback`` or the first of ``configs``) when interpreting."""
    if not INTERPRET:
        limit = os.environ.get("COURSE_AUTOTUNE_MAX", "")
        if limit:
            if not limit.isdigit() or int(limit) < 1:
                raise ValueError(f"COURSE_AUTOTUNE_MAX must be a positive whole number, not {limit!r}")
            configs = list(configs)[: int(limit)]
        return triton.autotune(configs=configs, key=key, **kwargs)
    fixed = fallback or configs[0]

    return lambda kernel: _FixedConfig(kernel, fixed)


def launch(kernel, grid, key: tuple, *args, config: dict | None = None, **kwargs):
    """``kernel[grid](*args, **kwargs)`` for a kernel under ``autotune``, at the cost of a plain launch.

    The first call per ``key`` goes through the autotuner (which benchmarks its configs, or takes the one it
    cached); later calls launch the config it chose straight on the kernel beneath it. ``key`` must fix
    everything the autotuner keys on: its ``key`` arguments and the dtypes of the tensors. Measured on an
    H100 (triton 3.6, tools/probe_kernel_configs.py): bias_gelu on 16384x1024 bf16 took 71 us through the
    autotuner and 29 us launched directly, the same config. ``config``: explicit launch parameters instead
    of the autotuner's choice (the probe times them one by one)."""
    if config is not None:
        return kernel.fn[grid](*args, **kwargs, **config)
    chosen = getattr(kernel, "course_chosen", None)
    if chosen is None:
        chosen = kernel.course_chosen = {}
    best = chosen.get(key)
    if best is not None:
        return kernel.fn[grid](*args, **kwargs, **best)
    out = kernel[grid](*args, **kwargs)
    picked = getattr(kernel, "best_config", None)  # the interpreter's fixed config has none: nothing to skip
    if picked is not None and picked.pre_hook is None:
        chosen[key] = picked.all_kwargs()
    return out


class _FixedConfig:
    """What ``kernel[grid](...)`` looks like with one config's meta-parameters filled in."""

    def __init__(self, kernel, config: triton.Config):
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

