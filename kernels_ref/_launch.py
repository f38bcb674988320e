"""Launching a compiled Triton kernel without the per-call work of ``kernel[grid](...)``.

``autotuned[grid](*args)`` does, on every call, in Python: the autotuner's key and its config's pre-hook,
then ``JITFunction.run``: binding every argument to the signature, specializing each one (dtype,
alignment, divisibility), a cache lookup, a check that no global the kernel read has changed, the grid.
For most kernels that is 20-30 us of CPU time, hidden behind the GPU's work. For the persistent TMA
matmul it measured 100-200 us a call (``results/*/matmul-launch-cost.md``), longer than the L2 flush that
the timing protocol runs before each call, so the GPU sat idle inside the timed window.

:class:`CompiledLaunch` does that work once for one specialization (the caller's key must capture
everything the specialization depends on: dtypes, the integer arguments' values or their divisibility
by 16, pointer alignment) and then launches the compiled kernel directly: per call it only fills the
arguments that change (pointers, descriptors) into a prepared argument list.
"""
from __future__ import annotations

import inspect


def _jit_function(kernel):
    """The ``@triton.jit`` function beneath autotune/heuristics wrappers."""
    while not hasattr(kernel, "arg_names"):
        kernel = kernel.fn
    return kernel


class CompiledLaunch:
    """One compiled specialization of a ``@triton.jit`` kernel, its grid and its constant arguments bound.

    ``values`` names every argument the launch needs (constexprs and launch options such as
    ``num_warps`` included, exactly as ``kernel[grid](**values)`` would take them: the compiled kernel
    found is the one that call would run, compiled now if it was not yet); ``runtime`` names the
    arguments that change from call to call, in the order ``__call__`` takes them.
    """

    def __init__(self, kernel, grid: tuple, values: dict, runtime: tuple[str, ...]):
        fn = _jit_function(kernel)
        compiled = fn.warmup(grid=grid, **values)
        if hasattr(compiled, "result"):  # asynchronous compilation hands back a future
            compiled = compiled.result()
        params = inspect.signature(fn.fn).parameters
        template = []
        for name, param in params.items():
            if name in values:
                template.append(values[name])
            elif param.default is not inspect.Parameter.empty:
                template.append(param.default)
            else:
                raise TypeError(f"CompiledLaunch: no value for {fn.__name__}'s argument {name!r}")
        names = list(params)
        self._slots = tuple(names.index(name) for name in runtime)
        for slot in self._slots:  # hold no reference to this call's tensors
            template[slot] = None
        self._template = template
        self.compiled = compiled
        self.grid = tuple(grid) + (1,) * (3 - len(grid))  # the compiled kernel's launcher wants all three
        self._run = compiled[self.grid]

    def __call__(self, *runtime_values) -> None:
        args = list(self._template)
        for slot, value in zip(self._slots, runtime_values):
            args[slot] = value
        self._run(*args)


def unchecked_descriptor(descriptor_type, tensor, block_shape):
    """``TensorDescriptor.from_tensor(tensor, block_shape)`` without its checks (alignment, strides, block
    shape: ~2.5 us of Python each), for a launch path whose key already guarantees them: the same fields,
    the defaulted ones (``padding``, and whatever a newer Triton adds) read from the dataclass's defaults."""
    desc = object.__new__(descriptor_type)
    desc.base, desc.shape, desc.strides, desc.block_shape = tensor, tensor.shape, tensor.stride(), block_shape
    return desc
