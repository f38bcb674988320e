"""Under the Triton interpreter, a load or store outside the tensors a kernel was given raises a clear error.

Without this, an unmasked ``tl.store`` past the end of a tensor writes into whatever memory follows it:
the process (a notebook's kernel, a grading worker) may abort in malloc, hang, or carry on with corrupted
objects; an unmasked ``tl.load`` reads garbage. Here every ``tl.load``/``tl.store`` (and atomic) of an
interpreted launch first checks that each active lane (mask true) addresses bytes inside the storage of
one of the launch's tensor arguments, and raises ``OutOfBounds`` naming the kernel, the operation and the
nearest tensor otherwise, before any memory is touched. Compiled kernels (on a GPU) are untouched.

``install()`` is called by ``import course`` when the interpreter is on; it patches the interpreter's
classes once (``GridExecutor`` for the launch's tensors, ``InterpreterBuilder`` for the accesses) and does
nothing on Triton versions whose interpreter has other internals.
"""
from __future__ import annotations

import threading

import numpy as np
import torch

_STATE = threading.local()  # .launch: (kernel name, [(lo, hi, argument name)]) of the running launch


class OutOfBounds(IndexError):
    """A masked-on lane of a load or store addresses memory outside every tensor of the launch."""


def _ranges(named_args):
    """[(first byte, one past the last byte, name)] of the storage of every tensor among the arguments."""
    out = []

    def walk(name, arg):
        if isinstance(arg, (tuple, list)):
            for i, a in enumerate(arg):
                walk(f"{name}[{i}]", a)
        elif isinstance(arg, torch.Tensor):  # by what it is: no other object's method runs here
            storage = arg.untyped_storage()
            if storage.nbytes():
                out.append((storage.data_ptr(), storage.data_ptr() + storage.nbytes(), name))
        elif isinstance(getattr(arg, "base", None), torch.Tensor):  # a TensorDescriptor, triton.reinterpret's
            walk(name, arg.base)

    for name, arg in named_args:
        walk(name, arg)
    return out


def _check(op: str, ptrs, mask) -> None:
    launch = getattr(_STATE, "launch", None)
    if launch is None:
        return
    kernel, ranges = launch
    addr = np.asarray(ptrs.data).astype(np.uint64, copy=False)
    active = np.ones(addr.shape, bool) if mask is None else np.broadcast_to(np.asarray(mask.data, bool), addr.shape)
    lanes = addr[active]
    if lanes.size == 0:
        return
    from course.triton_internals import internal

    _get_np_dtype = internal("_get_np_dtype")

    size = np.uint64(np.dtype(_get_np_dtype(ptrs.get_element_ty())).itemsize)
    inside = np.zeros(lanes.shape, bool)
    for lo, hi, _ in ranges:
        inside |= (lanes >= np.uint64(lo)) & (lanes + size <= np.uint64(hi))
    if inside.all():
        return
    first = int(lanes[~inside][0])
    below = [r for r in ranges if r[0] <= first]
    if below:
        lo, hi, name = max(below, key=lambda r: r[0])
        where = (f"{(first - hi) // int(size) + 1} element(s) past the end of the tensor passed as {name}"
                 if first >= hi else f"inside {name}'s last element")
    else:
        where = "before the start of every tensor argument"
    raise OutOfBounds(f"{op} in {kernel}: {int((~inside).sum())} of {lanes.size} active lanes address memory "
                      f"outside the tensors passed to the kernel (the first {where}). Mask it, e.g. "
                      f"mask=offsets < n: under the interpreter an unmasked access here would corrupt memory, "
                      f"on a GPU read or write memory the kernel does not own")


def install() -> bool:
    """Patch the interpreter (once); False where its internals are not the ones this knows."""
    try:
        from course.triton_internals import internal

        itp = internal("interpreter")

        executor, builder = itp.GridExecutor, itp.InterpreterBuilder
        init, call = executor._init_args_hst, executor.__call__
        load, store = builder.create_masked_load, builder.create_masked_store
    except (ImportError, AttributeError):
        return False
    if getattr(executor, "_course_bounds", False):
        return True

    def _init_args_hst(self, args_dev, kwargs):
        args_hst, kwargs_hst = init(self, args_dev, kwargs)
        names = list(getattr(self, "arg_names", [])) or [f"argument {i}" for i in range(len(args_hst))]
        named = list(zip(names, args_hst)) + list(kwargs_hst.items())
        _STATE.launch = (getattr(self.fn, "__name__", "the kernel"), _ranges(named))
        return args_hst, kwargs_hst

    def __call__(self, *args, **kwargs):
        outer = getattr(_STATE, "launch", None)
        try:
            return call(self, *args, **kwargs)
        finally:
            _STATE.launch = outer

    def create_masked_load(self, ptrs, mask, other, *rest, **kw):
        _check("tl.load", ptrs, mask)
        return load(self, ptrs, mask, other, *rest, **kw)

    def create_masked_store(self, ptrs, value, mask, *rest, **kw):
        _check("tl.store", ptrs, mask)
        return store(self, ptrs, value, mask, *rest, **kw)

    executor._init_args_hst, executor.__call__ = _init_args_hst, __call__
    builder.create_masked_load, builder.create_masked_store = create_masked_load, create_masked_store
    for name in ("create_atomic_rmw", "create_atomic_load", "create_atomic_store"):
        original = getattr(builder, name, None)
        if original is not None:
            setattr(builder, name, _atomic(original))
    executor._course_bounds = True
    return True


def _atomic(original):
    def guarded(self, *args, **kwargs):
        import inspect

        bound = inspect.signature(original).bind(self, *args, **kwargs)
        _check("atomic", bound.arguments["ptr"], bound.arguments.get("mask"))
        return original(self, *args, **kwargs)
    return guarded
