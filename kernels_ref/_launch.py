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
:class:`BoundLaunches` does it for any kernel whose arguments are tensors, integers, floats and constants:
``BoundLaunches(kernel)[grid](...)`` in place of ``kernel[grid](...)``, its key made from the arguments.
"""
from __future__ import annotations

import contextlib
import inspect

import torch

from course.device import INTERPRET


# Host-side twins of ``triton.cdiv`` and ``triton.next_power_of_2``: those are constexpr functions in
# triton 3.6 and later (usable inside kernels), ~3 us a call from Python, and a launcher calls them several
# times per launch (LayerNorm's backward: 7, in cProfile on an H100 host).

def cdiv(a: int, b: int) -> int:
    """Ceiling division, for grids and block counts."""
    return -(-a // b)


def next_power_of_2(n: int) -> int:
    """The smallest power of 2 >= n (0 for n <= 0, as triton's)."""
    return 1 << (n - 1).bit_length() if n > 0 else 0


def _jit_function(kernel):
    """The ``@triton.jit`` function beneath autotune/heuristics wrappers: the first whose ``fn`` is the
    Python function itself (an autotuner has ``arg_names`` too, and its ``fn`` is the JIT function)."""
    while not inspect.isfunction(getattr(kernel, "fn", None)):
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
        self.runtime = tuple(runtime)
        self.grid = tuple(grid) + (1,) * (3 - len(grid))  # the compiled kernel's launcher wants all three
        self._run = compiled[self.grid]

    def __call__(self, *runtime_values) -> None:
        args = list(self._template)
        for slot, value in zip(self._slots, runtime_values):
            args[slot] = value
        self._run(*args)

    def positional(self, n: int):
        """A launch taking a call's ``n`` positional arguments as they are, when every runtime argument is
        among them: the other positional values equal the bound ones (the key holds them), and the bound
        values of the arguments after them are appended. None where a runtime argument comes later."""
        if any(slot >= n for slot in self._slots):
            return None
        run, tail = self._run, tuple(self._template[n:])
        return lambda args: run(*args, *tail)


def unchecked_descriptor(descriptor_type, tensor, block_shape):
    """``TensorDescriptor.from_tensor(tensor, block_shape)`` without its checks (alignment, strides, block
    shape: ~2.5 us of Python each), for a launch path whose key already guarantees them: the same fields,
    the defaulted ones (``padding``, and whatever a newer Triton adds) read from the dataclass's defaults."""
    desc = object.__new__(descriptor_type)
    desc.base, desc.shape, desc.strides, desc.block_shape = tensor, tensor.shape, tensor.stride(), block_shape
    return desc


def alignment_mask(*tensors) -> int:
    """Bit i set where ``tensors[i]`` is 16-byte aligned: all a compiled kernel's pointer specialization
    reads of a tensor besides its dtype (for a caller's own key, :meth:`BoundLaunches.keyed`)."""
    mask = 0
    for i, t in enumerate(tensors):
        if t.data_ptr() % 16 == 0:
            mask |= 1 << i
    return mask


def _specialization(value):
    """What of one argument a compiled kernel depends on: a tensor's dtype and 16-byte alignment, an
    integer's value (its divisibility by 16, whether it is 1, and the grid that may derive from it), a
    float's type only (Triton passes floats at run time), any other argument itself (a constant)."""
    if isinstance(value, torch.Tensor):
        return value.dtype, value.data_ptr() % 16 == 0
    if isinstance(value, float):
        return float
    return value


def _with_heuristics(kernel, values: dict) -> dict:
    """``values`` with what each ``@triton.heuristics`` layer between ``kernel`` and its JIT function
    computes from them (as the layer does at launch, after the autotuner's config is in)."""
    from course.triton_internals import internal

    Heuristics = internal("Heuristics")

    layer = kernel
    while not inspect.isfunction(getattr(layer, "fn", None)):
        if isinstance(layer, Heuristics):  # in order: one heuristic may read an earlier one's value
            values = dict(values)
            for name, heuristic in layer.values.items():
                values[name] = heuristic(values)
        layer = layer.fn
    return values


class BoundLaunches:
    """``kernel[grid](*args, **kwargs)`` that, after a specialization's first call (through the autotuner
    and the JIT, which tune and compile), launches that call's compiled kernel directly
    (:class:`CompiledLaunch`) whenever the same specialization comes again: tensors and floats are what
    change between calls, every other argument is part of the key. Under the interpreter, or for a
    kernel it cannot bind (another Triton's internals), it is ``kernel[grid](...)`` itself."""

    MAX_KEYS = 1024  # past this many specializations, new ones launch unbound (each key holds little)
    enabled = True  # False: every call goes through the autotuner and the JIT (probes.launch_cost compares)

    def __init__(self, kernel):
        self.kernel = kernel
        self._names = None if INTERPRET else list(inspect.signature(_jit_function(kernel).fn).parameters)
        # key -> (CompiledLaunch, where its runtime arguments are in a call), or None where binding failed
        self._bound: dict = {}
        self.unbound_reason = ""  # why the last binding failed, if one did

    @staticmethod
    @contextlib.contextmanager
    def off():
        """Inside, every launch goes through the autotuner and the JIT (the tools compare both paths)."""
        before, BoundLaunches.enabled = BoundLaunches.enabled, False
        try:
            yield
        finally:
            BoundLaunches.enabled = before

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self._launch(grid, args, kwargs)

    def keyed(self, key, grid, by_arguments: bool = False):
        """``self[grid]`` for a launcher whose own ``key`` (hashable) determines the specialization: each
        tensor's dtype and alignment (:func:`alignment_mask`) and every argument that is not a tensor or a
        float, as values or as what they derive from. The key made from the arguments costs ~0.5 us an
        argument; a launcher that derives 15 of them from a shape, a dtype and two strides names those.
        ``by_arguments``: the key made from the arguments too, ``key`` adding what the grid depends on
        beyond them (attention's batch size, which no argument carries)."""
        return lambda *args, **kwargs: self._launch(grid, args, kwargs, ("keyed", key), by_arguments)

    def _launch(self, grid, args, kwargs, key=None, by_arguments: bool = True) -> None:
        if self._names is None or not BoundLaunches.enabled:
            self.kernel[grid](*args, **kwargs)
            return
        # The key by position (the signature fixes each position's name) and keyword: built per call, so
        # kept to one pass over the arguments (LayerNorm's backward passes 19; by name it cost ~8 us a launch).
        if by_arguments:
            key = (key, tuple(map(_specialization, args)), tuple((k, _specialization(v)) for k, v in kwargs.items()))
        try:
            hit = self._bound.get(key)
        except TypeError:  # an argument that cannot be a key (a list): no binding for it
            self.kernel[grid](*args, **kwargs)
            return
        if hit is not None:
            launch, picks = hit
            if picks is None:  # every runtime argument positional: the call's own tuple, no rebuilding
                launch(args)
            else:
                launch(*[args[p] if p.__class__ is int else kwargs[p] for p in picks])
            return
        self.kernel[grid](*args, **kwargs)
        if key not in self._bound and len(self._bound) < self.MAX_KEYS:
            values = {**dict(zip(self._names, args)), **kwargs}
            launch = self._bind(grid, values)
            self._bound[key] = None if launch is None else self._entry(launch, len(args))

    def _entry(self, launch: CompiledLaunch, n_positional: int) -> tuple:
        """What a hit calls: (launch of the positional tuple, None), else (launch, where each runtime
        argument is in a call)."""
        positional = launch.positional(n_positional)
        if positional is not None:
            return positional, None
        return launch, self._picks(launch.runtime, n_positional)

    def _picks(self, runtime: tuple[str, ...], n_positional: int) -> tuple:
        """Where each runtime argument of a bound launch is in a call of this key: its position among the
        positional arguments, else its keyword."""
        position = {name: i for i, name in enumerate(self._names[:n_positional])}
        return tuple(position.get(name, name) for name in runtime)

    def _bind(self, grid, values: dict) -> CompiledLaunch | None:
        config = getattr(self.kernel, "best_config", None)  # what the autotuner just launched
        if config is not None:
            values = {**values, **config.all_kwargs()}
            if config.pre_hook is not None:
                config.pre_hook(values)
        values = _with_heuristics(self.kernel, values)
        runtime = tuple(name for name, value in values.items() if isinstance(value, (torch.Tensor, float)))
        try:
            return CompiledLaunch(self.kernel, grid(values) if callable(grid) else tuple(grid), values, runtime)
        except Exception as exc:  # noqa: BLE001  (Triton's internals moved: this key keeps the ordinary launch)
            self.unbound_reason = f"{type(exc).__name__}: {exc}"
            return None
