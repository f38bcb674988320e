"""Guarantee 2: the learner wrote the kernel.

- ``OpRecorder``: a TorchDispatchMode that records every aten operator run during a checked call, wherever
  its Python runs: the entry point, a helper, and Triton's launch callbacks (pre-run hooks, grid callables,
  heuristics, autotune hooks) alike, with the submission's own source line that led to it (walking the
  stack to the submission's file). Deny by default: the judge lets only an exercise's allowed operators
  pass, so no place in a launch is a blind spot. (The Triton interpreter's own copies of a launch's
  arguments are plumbing operators every exercise allows.) It also records the calls that take a tensor's
  values out of torch (``Tensor.numpy``, ``tolist``, ``__array__``, ``__dlpack__``), where the operators that
  follow are invisible to it.
- ``install_launch_counter``: counts Triton kernel launches where they are made, at the launcher that runs
  a compiled (or interpreted) kernel: a launch made from a hook or a grid callable of another launch counts
  too; an autotuner's benchmarking trials do not (they serve the one launch that follows).
- ``LaunchCallbacks``: every callable Triton runs during a launch (pre-run hooks, a grid callable, heuristics,
  autotune's hooks, pruning and performance model, launch-metadata and launch hooks) must be the learner's
  own Python code; anything else (a builtin such as ``torch.softmax``, a library's function or bound method,
  a ``functools.partial`` of one) runs with no learner frame on the stack, where the recorder cannot tell
  it from the interpreter's plumbing: the launch is refused and recorded.
- ``CourseTools``: a measuring exercise's graded call may not run the course's own measuring functions
  (``measure``'s timer and memory meters), which answer it for the learner.
- ``KernelsRefWatch``: records any import of ``kernels_ref`` by the submission.
- ``ThreadGuard``: graded code may not start threads (the recorder and the memory meter are per-thread
  dispatch modes: work on another thread is invisible to them); a start is refused and recorded.
- ``judge``: runs in the grading process; turns what the worker recorded into violations.
"""
from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import os
import site
import sys
import sysconfig
import threading
import types
import weakref

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from autograder.audit import resolve_path
from autograder.imports import INSTALLED
from measure.memory import (MemoryMeter, Provenance, fresh_outputs, is_plain, storage_nbytes, storage_of, tensors_in,
                            values_in, written_outputs)


class _LaunchState(threading.local):
    launches = 0
    benchmarking = 0  # inside an autotuner's benchmark: its trial launches are not the program's
    null = False  # launches are counted but do nothing (the behaviour check: outputs must then change)


STATE = _LaunchState()
_INSTALLED = False


def _meter_launch(values) -> None:
    """A memory exercise's meters learn what a launch was handed (a kernel may write into it): the tensors
    among ``values``, and the one inside a holder (``triton.reinterpret``'s wrapper, a TensorDescriptor)."""
    if not MemoryMeter.active:
        return
    holders = _triton_argument_types()["holders"]

    def opened(v):  # at any depth: Triton takes tuples of pointers too
        if type(v) in holders:
            return getattr(v, "base", None)
        if isinstance(v, (tuple, list)):
            return [opened(item) for item in v]
        return v

    for meter in MemoryMeter.active:
        meter.launched([opened(v) for v in values])


def _counting(run):
    def run_and_count(self, *args, **kwargs):
        grid = kwargs.get("grid")
        LaunchCallbacks.check(self, grid)
        LaunchCallbacks.check_arguments(self, args, kwargs)
        if callable(grid):  # what the learner's grid callable answers is a grid too
            kwargs["grid"] = LaunchCallbacks.answering_plain_grids(self, grid)
        if kwargs.get("warmup"):
            return run(self, *args, **kwargs)
        if STATE.benchmarking == 0 and STATE.null:
            STATE.launches += 1
            return None
        _meter_launch((*args, *kwargs.values()))
        with _counted():
            out = run(self, *args, **kwargs)
        LaunchCallbacks.check(self, grid)  # again: a hook of its own may have added another
        return out
    run_and_count.__wrapped__ = run
    return run_and_count


def _never_started(exc: BaseException) -> bool:
    """Whether a launch that raised ``exc`` never ran a program: Triton compiles a kernel before it launches
    it, and a kernel that does not compile or fit (``CompilationError``, ``OutOfResources``: a launcher may
    try a smaller block then) never started. Any other failure may come after programs ran (under the
    interpreter, a kernel fails in a program, after the programs before it stored their results)."""
    from course.triton_internals import internal

    try:
        never = (internal("CompilationError"), internal("OutOfResources"))
    except ImportError:  # MissingInternal
        return False
    return isinstance(exc, never)


@contextlib.contextmanager
def _counted():
    """Around a launch: it counts once it ran, or once it failed after it may have started running."""
    try:
        yield
    except BaseException as exc:
        if STATE.benchmarking == 0 and not _never_started(exc):
            STATE.launches += 1
        raise
    if STATE.benchmarking == 0:
        STATE.launches += 1


def _benchmarking(bench):
    def bench_uncounted(self, *args, **kwargs):
        STATE.benchmarking += 1
        try:
            return bench(self, *args, **kwargs)
        finally:
            STATE.benchmarking -= 1
    bench_uncounted.__wrapped__ = bench
    return bench_uncounted


def _checked_launch(self, launch, args, kwargs, *grid):
    """One launch between two looks at its callbacks: before, and again after (a callback of its own may have
    swapped in another while it ran)."""
    LaunchCallbacks.check(self, *grid)
    LaunchCallbacks.check_arguments(self, args, kwargs)
    out = launch(*args, **kwargs)
    LaunchCallbacks.check(self, *grid)
    return out


def _checking(run):
    def run_checked(self, *args, **kwargs):
        return _checked_launch(self, lambda *a, **k: run(self, *a, **k), args, kwargs)
    run_checked.__wrapped__ = run
    return run_checked


def _checked_getitem(getitem):
    """``kernel[grid](...)`` of a launcher that runs its grid callable and config's pre-hook itself."""
    def checked_getitem(self, grid):
        launch = getitem(self, grid)
        return lambda *args, **kwargs: _checked_launch(self, launch, args, kwargs, grid)
    checked_getitem.__wrapped__ = getitem
    return checked_getitem


def _compiled_getitem(getitem):
    """``compiled[grid](*args)``: a kernel compiled ahead (``kernel.warmup``) and launched directly."""
    def counted_getitem(self, grid):
        runner = getitem(self, grid)

        def counted_runner(*args, **kwargs):
            LaunchCallbacks.check_arguments(self, args, kwargs)
            if STATE.benchmarking == 0 and STATE.null:
                STATE.launches += 1
                return None
            _meter_launch((*args, *kwargs.values()))
            with _counted():
                return runner(*args, **kwargs)
        return counted_runner
    counted_getitem.__wrapped__ = getitem
    return counted_getitem


def install_launch_counter() -> None:
    """Wrap every Triton launcher (class level, once per process): JITFunction.run and the interpreter's
    run (what every ``kernel[grid](...)``, autotuner and heuristics launch ends in), a compiled kernel's
    ``[grid]``, and the autotuner's benchmark (whose trial launches are not counted)."""
    global _INSTALLED
    if _INSTALLED:
        return
    from course.triton_internals import internal

    for cls in (internal("JITFunction"), internal("InterpretedFunction")):
        if "run" in cls.__dict__:
            cls.run = _counting(cls.__dict__["run"])
    Autotuner = internal("Autotuner")
    if "_bench" in Autotuner.__dict__:
        Autotuner._bench = _benchmarking(Autotuner.__dict__["_bench"])
    for name in ("Autotuner", "Heuristics"):  # their callbacks run before the launch they wrap
        cls = internal(name)
        if "run" in cls.__dict__:
            cls.run = _checking(cls.__dict__["run"])
    from course.triton_compat import _FixedConfig  # the interpreter's stand-in for an autotuner

    _FixedConfig.__getitem__ = _checked_getitem(_FixedConfig.__dict__["__getitem__"])
    CompiledKernel = internal("CompiledKernel")
    if "__getitem__" in CompiledKernel.__dict__:
        CompiledKernel.__getitem__ = _compiled_getitem(CompiledKernel.__dict__["__getitem__"])
    _INSTALLED = True


def disable_triton_launches() -> None:
    """From now on every Triton launch in this process does nothing (the kernels never run)."""
    install_launch_counter()
    STATE.null = True


def reset_launches() -> None:
    STATE.launches = 0
    STATE.benchmarking = 0


def launches() -> int:
    return STATE.launches


# The recorded name of a call that takes a tensor's values out of torch: this prefix, a colon, the call
# ("Tensor.tolist"). What is computed from such values no operator records.
LEAVES_TORCH = "leaves_torch"
# Code of the learner's that started inside the recorder's own handlers (see ``OpRecorder._unseen``).
UNSEEN = "unseen"
_UNSEEN_WHY = ("torch ran it while it was running an operator or function for the grader's recorder, where "
               "the recorder's modes are off and nothing it does is seen (a finalizer or weakref callback of an "
               "object the operator freed, a __del__, a hook the autograd engine calls, a callable handed to a "
               "torch function): graded work runs in your own functions, your autograd.Function and your kernels")
_LEAVE_WHY = ("hands the tensor's values out of torch (as text, Python numbers or lists, a numpy array, a "
              "storage or a pointer to its memory), where the grader cannot see what is computed with them: "
              "the exercise's work must be done by the torch operators it allows and your own kernels "
              "(printing a tensor counts too: print its shape, or print outside the graded function)")

# Calls that read a tensor's header (shape, layout, dtype, device, identity, its autograd hooks), never its
# element values. Deny by default: any other call that answers with something other than tensors hands
# values out, unless an operator the recorder saw read them (``item``, ``float(t)``, ``f"{t:.3f}"``: judged
# as that operator).
_HEADER = frozenset({
    "size", "stride", "dim", "ndimension", "numel", "nelement", "element_size", "storage_offset", "data_ptr",
    "get_device", "type", "dim_order", "sparse_dim", "dense_dim", "has_names", "_is_view", "__len__",
    "__hash__", "__sizeof__", "__dir__", "__dlpack_device__", "__iter__", "__reversed__",
    "register_hook", "register_post_accumulate_grad_hook", "retain_grad", "requires_grad_",
    "result_type", "can_cast", "promote_types",
    "__eq__", "__ne__"})  # with a tensor they answer a tensor; with None (`bias == None`) a bool from identity
# Answers that describe a tensor and can hold none of its values.
_HEADER_TYPES = (torch.dtype, torch.device, torch.layout, torch.memory_format, torch.Size, type(None))
_ONE_VALUE = (bool, int, float, complex, str)
_CUDA_ARRAY_INTERFACE = torch.Tensor.__dict__.get("__cuda_array_interface__")


def without_value_exits(records) -> list:
    """A call's records without the values it took out of torch, for a call that raised: it answered
    nothing, so no output was computed from them (an error message that shows the tensor, ``f"...{x}"``),
    and the next call's fresh values make any kept copy stale."""
    return [r for r in records if not str(r[0]).startswith(LEAVES_TORCH + ":")]


def _is(obj, kinds) -> bool:
    """``isinstance`` by the object's own class: ``isinstance`` asks an object of another class for its
    ``__class__``, a property of the caller's that would run inside the recorder's handler (its mode off)."""
    return issubclass(type(obj), kinds)


def _only_tensors(out) -> bool:
    if _is(out, (tuple, list)):
        return all(_only_tensors(o) for o in (tuple.__iter__(out) if _is(out, tuple) else list.__iter__(out)))
    return _is(out, torch.Tensor) or out is None


def _exit_name(func) -> str:
    """How a call that took values out of torch is named in feedback: ``Tensor.tolist``, ``torch.x``."""
    name = getattr(func, "__name__", None) or type(func).__name__
    if name == "__get__":  # a property (its getter names it): Tensor.__cuda_array_interface__
        prop = func.__self__
        return f"Tensor.{getattr(prop, '__name__', None) or getattr(getattr(prop, 'fget', None), '__name__', '?')}"
    if getattr(torch.Tensor, name, None) is not None:
        return f"Tensor.{name}"
    return f"{getattr(func, '__module__', None) or 'torch'}.{name}"


def hands_values_out(func, args, kwargs, out, operators_ran: bool) -> bool:
    """Whether a call (seen by ``__torch_function__``) took a tensor's element values out of torch: it
    answered with something other than tensors, or ran a Python function of the caller's on the values
    (``apply_``, ``map_``), and it is not a read of the tensor's header. Decided from what the call did."""
    name = getattr(func, "__name__", "")
    if name == "__get__":  # a property: shape, dtype, grad, T...; the one that hands out memory is not
        return getattr(func, "__self__", None) is _CUDA_ARRAY_INTERFACE
    if name in _HEADER or (name.startswith("is_") and _is(out, bool)):
        return False
    values = list(args) + list((kwargs or {}).values())
    if any(callable(v) and not _is(v, (type, torch.Tensor)) for v in values):
        return True  # a Python function run on each value (Tensor.apply_, map_, map2_)
    if _only_tensors(out) or _is(out, _HEADER_TYPES):
        return False
    return not (operators_ran and _is(out, _ONE_VALUE))


class Metadata:
    """The arguments of the exercise graded in this process that are metadata (``Exercise.metadata``: lengths,
    block tables, positions), by position; set where the exercise is known (the worker, ``check``)."""

    positions: tuple = ()

    def __init__(self, inputs):
        # storage -> its bytes when the call began: the grader's own integers, as long as they stay unchanged
        self.kept: dict = {}
        for i in self.positions if inputs is not None else ():
            if i < len(inputs) and isinstance(inputs[i], torch.Tensor):
                self.keep(inputs[i])

    @staticmethod
    def _key(t):
        return t.device, torch.UntypedStorage.data_ptr(storage_of(t))

    @staticmethod
    def _bytes(t):
        return torch.empty(0, dtype=torch.uint8, device=t.device).set_(storage_of(t))

    def keep(self, t) -> None:
        from torch.utils._python_dispatch import _disable_current_modes

        with _disable_current_modes():
            self.kept[self._key(t)] = self._bytes(t).clone()

    def holds(self, t) -> bool:
        """Whether ``t`` shows (a view of) a metadata argument, or a copy of one, with the values it was given:
        values the grader chose, that carry none of the data the exercise computes on."""
        if not self.kept or not _is(t, torch.Tensor) or t.is_sparse:
            return False
        kept = self.kept.get(self._key(t))
        if kept is None:
            return False
        from torch.utils._python_dispatch import _disable_current_modes

        with _disable_current_modes():
            return bool(torch.equal(self._bytes(t), kept))


@contextlib.contextmanager
def _pushed(mode):
    """``mode`` on torch's function-mode stack for the block, unless it is there already (inside its own
    handler torch has taken it off)."""
    from torch.overrides import _get_current_function_mode_stack

    if any(m is mode for m in _get_current_function_mode_stack()):
        yield
    else:
        with mode:
            yield


def backward_in_view(out, grad) -> None:
    """``out.backward(grad)`` for a harness of the grader's, with the recorder's function half left on: the
    learner's autograd.Function.backward then runs seen, as its forward does. (Tensor.backward is a torch
    function: the function mode's handler would run the whole backward with the mode off.) The engine's
    entry point is private to torch and the same in torch 2.11-2.13 (pyproject's range)."""
    _run_engine((out,), (grad,), False, False, (), accumulate=True)


def _run_engine(outputs, grads, retain_graph, create_graph, inputs, accumulate: bool, allow_unused=True):
    """torch.autograd.backward / grad below their torch-function check: the engine itself (not a torch
    function), so the modes on the stack stay on while it runs the learner's backward and hooks."""
    from torch.autograd import _make_grads, _tensor_or_tensors_to_tuple
    from torch.autograd.graph import _engine_run_backward

    grads = _make_grads(outputs, _tensor_or_tensors_to_tuple(grads, len(outputs)), is_grads_batched=False)
    retain_graph = create_graph if retain_graph is None else retain_graph
    return _engine_run_backward(outputs, grads, retain_graph, create_graph, inputs,
                                allow_unused if not accumulate else True, accumulate_grad=accumulate)


def _as_tuple(value) -> tuple:
    return (value,) if isinstance(value, torch.Tensor) else tuple(value)


def _autograd_in_view(func, args, kwargs):
    """Tensor.backward, torch.autograd.backward and torch.autograd.grad called by graded code, run by the
    engine with the recorder's function half on (the learner's autograd.Function.backward and hooks it runs
    are seen as any of its code is); None for a spelling this does not cover (batched or materialized
    gradients, a dict of inputs, gradient edges): the function then runs as torch runs it, watched."""
    import inspect

    try:
        a = inspect.signature(func).bind(*args, **(kwargs or {}))
    except TypeError:
        return None
    a.apply_defaults()
    a = a.arguments
    inputs = a.get("inputs")
    if isinstance(inputs, dict) or any(not isinstance(t, torch.Tensor) for t in _as_tuple(inputs or ())):
        return None
    if func is torch.Tensor.backward:
        _run_engine((a["self"],), a["gradient"], a["retain_graph"], a["create_graph"], _as_tuple(inputs or ()), True)
        return _NOTHING
    if func is torch.autograd.backward:
        if a.get("grad_variables") is not None:
            return None
        _run_engine(_as_tuple(a["tensors"]), a["grad_tensors"], a["retain_graph"], a["create_graph"],
                    _as_tuple(inputs or ()), True)
        return _NOTHING
    if a.get("is_grads_batched") or a.get("materialize_grads"):
        return None
    allow_unused = bool(a.get("allow_unused"))
    return _run_engine(_as_tuple(a["outputs"]), a["grad_outputs"], a["retain_graph"], a["create_graph"],
                       _as_tuple(a["inputs"]), False, allow_unused)


_NOTHING = object()  # what backward returns (None), told apart from "not covered"
_AUTOGRAD_ENTRIES = (torch.Tensor.backward, torch.autograd.backward, torch.autograd.grad)


class _profiled:
    """This thread's Python profile function is ``profile`` for the block (None: none), as it was after. (A
    class, not a generator context: the recorder enters four of these an operator.)"""

    __slots__ = ("profile", "saved")

    def __init__(self, profile):
        self.profile = profile

    def __enter__(self):
        self.saved = sys.getprofile()
        sys.setprofile(self.profile)

    def __exit__(self, *exc):
        sys.setprofile(self.saved)


class _Exits(TorchFunctionMode):
    """The function-level half of the recorder: notes the calls that take values out of torch
    (``hands_values_out``) made by anyone but the grader and the interpreter (``_asked_by``)."""

    def __init__(self, recorder):
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if self.recorder.handling:  # the recorder's own bookkeeping, inside its dispatch handler
            return func(*args, **(kwargs or {}))
        if getattr(func, "__self__", None) is _CUDA_ARRAY_INTERFACE:  # a pointer to device memory: noted
            self._note(func, sys._getframe(1))                        # before it is read (it raises on a CPU)
            return func(*args, **(kwargs or {}))
        _refuse_shadowed(args, kwargs, sys._getframe(1))  # (a storage freed inside a torch function: Tensor.data = ...)
        if func in _AUTOGRAD_ENTRIES:  # the engine runs the learner's backward: with this mode on again
            with self:
                done = _autograd_in_view(func, args, kwargs)
            if done is not None:
                return None if done is _NOTHING else done
        before = self.recorder.operators
        # what func may let go of (a setter's old value, a tensor's graph or gradient) is kept while it runs and
        # let go of under the recorder: a finalizer it holds (a C callable, which no watch sees) runs seen
        held = _let_go_of(func, args, kwargs)
        with self.recorder.watching():  # this mode is off while func runs: code of the learner's started there is not seen
            out = func(*args, **(kwargs or {}))
        if held:
            with self.recorder.back_on():
                held.clear()
        if (hands_values_out(func, args, kwargs, out, self.recorder.operators != before)
                and not (args and self.recorder.metadata.holds(args[0]))):  # seq_lens.tolist(): the grader's integers
            self._note(func, sys._getframe(1))
        return out

    def _note(self, func, frame) -> None:
        if _asked_by(frame) == LEARNER:
            self.recorder.note(f"{LEAVES_TORCH}:{_exit_name(func)}", frame)


_TENSOR_STATE = tuple((n, getattr(torch._C.TensorBase, n)) for n in (
    "grad_fn", "_grad", "_backward_hooks", "_post_accumulate_grad_hooks") if hasattr(torch._C.TensorBase, n))


def _let_go_of(func, args, kwargs) -> list:
    """What a torch function may let go of while it runs with the recorder's function half off: the old value
    of a tensor attribute it sets or deletes (``w.grad = None``, ``del w.grad``, ``t._backward_hooks = {}``), and the state of each plain
    tensor it is handed that torch keeps Python objects in (its graph, which ``detach_`` frees with every
    tensor and ``ctx`` saved there; its gradient; its hooks). Read through the descriptors themselves: nothing
    of the tensor's own runs."""
    held = []
    setter = getattr(func, "__self__", None) if getattr(func, "__name__", None) in ("__set__", "__delete__") else None
    if setter is not None and args and hasattr(type(setter), "__get__"):
        import warnings

        try:
            with warnings.catch_warnings():  # (a non-leaf's .grad read warns)
                warnings.simplefilter("ignore")
                held.append(setter.__get__(args[0], type(args[0])))
        except Exception:  # noqa: BLE001  (nothing to read: nothing to keep)
            pass
    for t in tensors_in((args, kwargs or {})):
        if is_plain(t):
            leaf = torch._C.TensorBase.is_leaf.__get__(t)
            for name, state in _TENSOR_STATE:
                if name == "_grad" and not leaf:
                    continue  # (a non-leaf's .grad read warns; one set on it is a setter's old value)
                try:
                    value = state.__get__(t)
                except Exception:  # noqa: BLE001
                    continue
                if value is not None:
                    held.append(value)
    return held


def _fewest_values(inputs) -> tuple[int, int] | None:
    """(elements, element size) of the floating-point tensor with the fewest elements (2 at least) among a
    call's inputs, or None."""
    if inputs is None:
        return None
    from autograder.argtree import tensors

    T = torch.Tensor  # unbound: an attribute of the tensor's own runs nothing here
    sizes = [(T.numel(t), T.element_size(t)) for t in tensors(inputs) if T.is_floating_point(t) and T.numel(t) >= 2]
    return min(sizes) if sizes else None


_METHODS: dict = {}


def hidden_methods(kind: type) -> frozenset:
    """The names an attribute of an instance of ``kind`` itself would hide: its class attributes that are
    not data descriptors (methods, plain values), found first along its MRO as attribute lookup finds them."""
    if kind not in _METHODS:
        first: dict = {}
        for klass in kind.__mro__:
            for name, value in vars(klass).items():
                first.setdefault(name, value)
        _METHODS[kind] = frozenset(n for n, v in first.items() if not hasattr(type(v), "__set__"))
    return _METHODS[kind]


def _refuse_shadowed(args, kwargs, frame) -> None:
    """Refuse an operator handed a tensor whose own attributes hide Tensor methods, however they got there
    (``t.copy_ = f`` is refused where it is set; ``functools.update_wrapper`` fills ``__dict__`` itself): the
    recorder's bookkeeping and torch call those methods on it, where the learner's function would run unseen.
    Refuse one handed a storage (or a tensor whose storage is one) that carries anything of its own, an
    attribute or a weak reference: torch keeps a storage's Python object as long as its memory, and frees it
    inside the operator that lets the memory go (``set_``), where a finalizer, a ``__del__`` of what its
    attributes hold or a method it hides would run with the recorder's modes off."""
    from autograder import runtime_audit

    for t in tensors_in((args, kwargs or {})):
        own = getattr(t, "__dict__", None) if is_plain(t) else None
        # a plain dict of plain names, read by their own classes: a key of another class (a str of the
        # learner's, kept by setattr and copied by functools.update_wrapper) would run its __hash__ here,
        # a dict of another class its __len__ or __iter__
        names = list(dict.__iter__(own)) if type(own) is dict else ()
        if (own is not None and type(own) is not dict) or any(type(n) is not str for n in names):
            runtime_audit.refuse("hands an operator a tensor whose own __dict__ is not a plain dict of names",
                                 "shadow", frame)
        hidden = sorted(n for n in names if n in hidden_methods(type(t)))
        if hidden:
            runtime_audit.refuse(f"hands an operator a tensor whose own attribute {hidden[0]} hides "
                                 f"Tensor.{hidden[0]}", "shadow", frame)
    for storage in _storages_in((args, kwargs or {})):
        if _carries_own(storage):
            runtime_audit.refuse("hands an operator a storage that carries an attribute or a weak reference of "
                                 "its own (a finalizer runs when the operator frees it, where the recorder's modes "
                                 "are off)", "shadow", frame)


_SET = torch.ops.aten.set_


def _plain(t) -> bool:
    return is_plain(t) and t.layout == torch.strided


def _storages_in(obj):
    """The storages an operator is handed: storage objects, and those of the (plain, strided) tensors."""
    for value in values_in(obj, (torch.UntypedStorage, torch.Tensor)):
        if issubclass(type(value), torch.UntypedStorage):  # (isinstance would ask a tensor of another class for
            yield value                                    # its __class__: a property of the learner's)
        elif _plain(value):
            try:
                yield storage_of(value)
            except (RuntimeError, NotImplementedError):  # no storage of its own
                pass


def _carries_own(storage) -> bool:
    import weakref

    own = object.__getattribute__(storage, "__dict__") if hasattr(type(storage), "__dict__") else None
    # (a dict of another class answers its own __len__: it carries something of its own)
    return (own is not None and (type(own) is not dict or dict.__len__(own) > 0)) \
        or weakref.getweakrefcount(storage) > 0


def operator_name(func) -> str:
    """An aten operator by its name (``softmax``: what an exercise's rules list), any other by its namespace
    too (``mylib::softmax``): a learner's own operator is never taken for torch's."""
    name = func.overloadpacket.__name__
    return name if func.namespace == "aten" else f"{func.namespace}::{name}"


def _python_operator(func, args, kwargs):
    """The Python function an operator runs, if it is one defined with ``torch.library.custom_op`` or
    ``triton_op`` (PyTorch's documented way to launch one's own Triton kernel): the recorder runs it under
    itself, so each operator and launch inside is seen as if called directly. None for torch's own."""
    from torch._library.custom_ops import OPDEFS

    if not OPDEFS:  # (every operator passes here: none of torch's own is one)
        return None
    # in any namespace: custom_op also defines operators in aten's, whose Python would run unrecorded
    # (an overload of its own of torch's operator too: aten::empty.mine is "empty" to the rules)
    opdef = OPDEFS.get(func.name()) or OPDEFS.get(f"{func.namespace}::{func.overloadpacket.__name__}")
    if opdef is None:
        return None
    devices = [a.device.type for a in (*args, *(kwargs or {}).values()) if _is(a, torch.Tensor)]
    backends = getattr(opdef, "_backend_fns", {})
    return backends.get(devices[0] if devices else None) or backends.get(None) or getattr(opdef, "_init_fn", None)


@contextlib.contextmanager
def _meters_back_on():
    """The memory meters that are on (MemoryMeter.active) but off torch's dispatch stack for the block: a meter
    sits above the recorder, so inside the recorder's handler torch has taken both off, and the operators the
    recorder runs under itself (an operator's Python of the learner's: custom_op, triton_op; a finalizer) would
    allocate memory no meter counts (h computed and kept inside a custom_op held 0 bytes)."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    if not MemoryMeter.active:
        yield
        return
    on = _get_current_dispatch_mode_stack()
    pushed = []
    try:
        for meter in MemoryMeter.active:  # (outermost first: the innermost ends on top, as it was)
            if not any(m is meter for m in on):
                TorchDispatchMode.__enter__(meter)
                pushed.append(meter)
        yield
    finally:
        for meter in reversed(pushed):
            TorchDispatchMode.__exit__(meter, None, None, None)


def _elements_held(t) -> int:
    """The elements ``t``'s storage holds (at least its own), read through torch's class: ``held_elements``."""
    T = torch.Tensor
    try:
        return max(T.numel(t), held_elements(storage_nbytes(storage_of(t)), T.element_size(t)))
    except (RuntimeError, NotImplementedError):  # no storage of its own (a sparse tensor's: its parts are sized)
        return T.numel(t)


def held_elements(nbytes: int, element_size: int) -> int:
    """How many elements ``nbytes`` of storage hold for the size rules: of its tensor's dtype, and at least one
    per 4 bytes (a float32's worth): the rules' limits count floating-point elements, and a buffer of a wider
    dtype (int64, float64) viewed as float16 holds four or two of them per element of its own."""
    return max(nbytes // max(element_size, 1), -(-nbytes // 4))


def _storage_sizes(obj) -> dict:
    """{storage's address: bytes} of the storages an operator is handed (_storages_in), read through torch's
    classes."""
    cdata = torch._C.StorageBase._cdata
    return {cdata.__get__(st): storage_nbytes(st) for st in _storages_in(obj)}


def _grown_by_set(args, sizes: dict) -> int:
    """The elements of the storage ``set_`` put its tensor on, where the operator grew it (``sizes``: those of
    the storages it was handed, before it ran); else 0 (a tensor set on storage that exists materializes nothing)."""
    if not args or not _plain(args[0]):
        return 0
    st = storage_of(args[0])
    size, was = storage_nbytes(st), sizes.get(torch._C.StorageBase._cdata.__get__(st))
    return held_elements(size, torch.Tensor.element_size(args[0])) if was is not None and size > was else 0


class OpRecorder(TorchDispatchMode):
    """Records (operator, submission line) -> count for every aten op a call runs, and the calls that take
    values out of torch (``hands_values_out``)."""

    def __init__(self, source_file: str | None, folder: str | None = None, inputs=None):
        super().__init__()
        self.source_file = source_file
        # given the call's inputs: a write into storage no operator allocated counts for the size rules
        self._provenance = Provenance(inputs) if inputs is not None else None
        self.metadata = Metadata(inputs)
        # the submission's folder: an operator run by a module beside it is named by that file and line
        self.folder = os.path.realpath(folder) + os.sep if folder else None
        self._beside: dict[str, str | None] = {}
        self.ops: dict = {}
        self.largest = [0, None, None]  # [elements, operator, line] of the largest tensor an op produced
        _LEDGER[self] = ({}, [0, None, None])  # the same, kept where no code of the learner's reaches
        self.operators = 0  # operators run so far (plumbing included): what read a value, if one did
        self._exits = _Exits(self)
        # Numbers read one at a time (item, float(t), int(t)): a launcher reads a few (a size, a maximum);
        # reading as many as a floating-point input holds takes its values out of torch as tolist does.
        # A number is counted by the input's values it can carry: an int64 read of a float32 tensor viewed
        # as int64 carries two of them, four of a float16 one.
        fewest = _fewest_values(inputs)
        self._scalars, self._scalar_bound = 0, fewest[0] if fewest else None
        self._scalar_unit = fewest[1] if fewest else 1
        self.handling = 0  # > 0 while the dispatch handler runs (its modes off; _Exits leaves its bookkeeping be)

    def __enter__(self):
        self._exits.__enter__()
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            self._exits.__exit__(*exc)

    def note(self, name: str, frame) -> int | None:
        line = self._line_from(frame)
        self.count((name, line))
        return line

    def count(self, key, n: int = 1) -> None:
        """Count ``n`` more of ``key`` ((operator or what was refused, line)), here and in the ledger."""
        for ops in (self.ops, _LEDGER[self][0]):
            ops[key] = ops.get(key, 0) + n

    def _set_largest(self, numel: int, name, line) -> None:
        self.largest = [numel, name, line]
        _LEDGER[self][1][:] = self.largest

    def largest_seen(self) -> list:
        return list(_LEDGER[self][1])

    @contextlib.contextmanager
    def back_on(self):
        """Inside the dispatch handler (torch has taken this mode off): both halves of the recorder on again for
        the block, the function half only if it is not on already, no watch; and the memory meters above the
        recorder that torch has taken off too (_meters_back_on)."""
        TorchDispatchMode.__enter__(self)
        try:
            with _pushed(self._exits), _meters_back_on(), _profiled(None):  # (the learner's code runs seen again)
                yield
        finally:
            TorchDispatchMode.__exit__(self, None, None, None)

    def watching(self):
        """While torch runs something for one of the recorder's handlers, with the recorder's mode off: a
        Python profile function (this thread's: graded code starts no threads; the autograd engine's threads
        set their own where they dispatch) notes any code of the learner's that starts meanwhile. Torch's
        C++ kernels start none; a finalizer, a weakref callback or a hook is such code."""
        return _profiled(self._unseen)

    def _unseen(self, frame, event, _arg) -> None:
        """Named where the learner's code is entered (a finalizer, a hook), not again for what it calls."""
        name = frame.f_code.co_filename
        if (event == "call" and not name.startswith("<") and self.is_learners(name)  # ("<string>": code a library
                and not (frame.f_back is not None and self.is_learners(frame.f_back.f_code.co_filename))):  # generated)
            self.note(f"{UNSEEN}:{frame.f_code.co_name}", frame)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        # The recorder's own bookkeeping runs unwatched, the operator itself watched (_dispatch): a watch over
        # the bookkeeping saw ~1,700 profile events an operator (a recorded operator cost ~0.33 ms on a 2-core
        # CPU, ~0.14 ms without them). No code of the learner's can start in the bookkeeping:
        # the arguments stay referenced by the caller, what the operator lets go of is let go of under
        # back_on, no automatic collection runs while a recorder is on (worker.no_automatic_collection), the
        # bookkeeping reads a tensor through torch's class, never through the tensor itself (its own __dict__
        # is not consulted: a sparse tensor's values, a subclass's instance, are checked by no one), and the
        # bookkeeping of an operator that saw a tensor of any other class than torch's plain ones (torch's own
        # subclasses run Python of their class's when read) is watched as the operator is (_dispatch).
        with _profiled(None):
            return self._handle(func, args, kwargs)

    def _handle(self, func, args, kwargs):
        self.handling += 1
        try:
            _refuse_shadowed(args, kwargs, sys._getframe(2))
        finally:
            self.handling -= 1
        python = _python_operator(func, args, kwargs)
        if python is not None:  # an operator written in Python (torch.library.triton_op, custom_op): its code
            with self.back_on():  # is seen by both halves of the recorder
                return python(*args, **(kwargs or {}))
        # set_ lets go of the tensor's storage: kept here while it runs, and let go of under the recorder, so
        # whatever dies with it (a finalizer, what its attributes or its memory's Python owner hold) runs seen
        self.handling += 1
        try:
            released = [storage_of(args[0])] if func.overloadpacket is _SET and args and _plain(args[0]) else None
            # set_ with a size grows the storage it sets the tensor on (t.set_(t, 0, (2,), (n,)): n + 1 elements
            # behind a tensor of 2): the sizes before, to tell
            sizes = _storage_sizes((args, kwargs)) if func.overloadpacket is _SET else None
            out = self._dispatch(func, args, kwargs, sizes)
        finally:
            self.handling -= 1
        if released:
            with self.back_on():
                released.clear()
        return out

    def _dispatch(self, func, args, kwargs, sizes=None):
        self.operators += 1
        with self.watching():
            out = func(*args, **(kwargs or {}))
        frame = sys._getframe(1)
        if all(is_plain(t) for t in tensors_in((args, kwargs, out))):
            return self._account(func, args, kwargs, out, frame, sizes)
        # one of torch's own subclasses (an UninitializedBuffer, a nested or masked tensor): reading it runs its
        # class's Python (__torch_function__, __torch_dispatch__), which reaches what the learner set on it
        with self.watching():
            return self._account(func, args, kwargs, out, frame, sizes)

    def _account(self, func, args, kwargs, out, frame, sizes=None):
        """What the operator ``func`` did, on the record (``frame``: the one that ran it). Tensors are read
        through torch's class (``T.numel(t)``): an attribute of the tensor's own runs nothing here."""
        T = torch.Tensor
        name = operator_name(func)
        # Storage no operator allocated (torch.frombuffer, a file, a storage built by hand), written into: it
        # holds all it can hold, whoever writes (the interpreter's copy of a kernel's output too).
        fresh = tuple(fresh_outputs(args, kwargs, out))  # walked once, for the two rules below
        foreign = max((held_elements(storage_nbytes(storage_of(t)), T.element_size(t)) for t, _ in
                       self._provenance.foreign_writes(func, args, kwargs, out, fresh)), default=0) \
            if self._provenance else 0
        if interpreter_plumbing(frame):
            if foreign > _LEDGER[self][1][0]:
                self._set_largest(foreign, name, self._line_from(frame))
            return out
        if (name == "_local_scalar_dense" and self._scalar_bound and _asked_by(frame) == LEARNER
                and not self.metadata.holds(args[0])):
            before = self._scalars
            self._scalars += max(1, -(-T.element_size(args[0]) // self._scalar_unit))
            if before < self._scalar_bound <= self._scalars:
                self.note(f"{LEAVES_TORCH}:Tensor.item (or float(), int()) on an input's worth of values, one at a "
                          "time", frame)
        line = self.note(name, frame)
        if name in ("_to_copy", "clone") and args and self.metadata.holds(args[0]):
            self.metadata.keep(out)  # seq_lens.cpu(): a copy of the metadata, as it was given
        # Memory exercises forbid materializing a large intermediate (the full logits, a dequantized
        # weight): note the largest tensor any operator hands back, whatever the operator is: fresh storage,
        # and results written through out= or grown by resize_ (a view materializes nothing), each by the
        # elements its storage holds (a tensor of 2 elements 2**20 apart, from empty_strided, holds 2**20).
        numel = max(foreign, max((_elements_held(t) for t in written_outputs(func, args, kwargs, out, fresh)),
                                 default=0), _grown_by_set(args, sizes) if sizes else 0)
        if numel > _LEDGER[self][1][0]:
            self._set_largest(numel, name, line)
        return out

    def _line_from(self, frame):
        """The submission's line (an int) that led to the operator, else a module beside it ("helper.py,
        line 3"), else None. (Every recorded operator walks its frames here: ``line_in`` is the same rule over a
        stack already taken, written apart because a generator of pairs would cost this walk twice its time.)"""
        helper = None
        while frame is not None:
            name = frame.f_code.co_filename
            if name == self.source_file or (self.source_file is None and not _is_library(name)):
                return frame.f_lineno
            if helper is None and self._is_beside(name):
                helper = f"{self._beside[name]}, line {frame.f_lineno}"
            frame = frame.f_back
        return helper

    def line_in(self, stack):
        """``_line_from`` for a stack of (file, line) pairs, innermost first."""
        helper = None
        for name, line in stack:
            if name == self.source_file or (self.source_file is None and not _is_library(name)):
                return line
            if helper is None and self._is_beside(name):
                helper = f"{self._beside[name]}, line {line}"
        return helper

    def place(self, measured: dict) -> dict:
        """A harness's measurement with the stack of the code that broke its rule (``stack``) replaced by the
        learner's line (``at``: " [line N]", which the grading process turns into the learner's location, or
        " (at helper.py, line 3)", or "" where no line of the learner's is in the stack)."""
        line = self.line_in(measured.pop("stack", None) or [])
        measured["at"] = f" [line {line}]" if isinstance(line, int) else f" (at {line})" if line else ""
        return measured

    def is_learners(self, filename: str) -> bool:
        return filename == self.source_file or self._is_beside(filename) or (
            self.source_file is None and not _is_library(filename) and not filename.startswith(_COURSE_PACKAGES))

    def _is_beside(self, filename: str) -> bool:
        if self.folder is None or filename.startswith("<"):  # "<frozen runpy>", "<string>": no file, none beside
            return False
        if filename not in self._beside:
            real = os.path.realpath(filename)
            self._beside[filename] = os.path.relpath(real, self.folder) if real.startswith(self.folder) else None
        return self._beside[filename] is not None

    def records(self) -> list:
        """What was recorded, from the ledger; with ``TAMPERED`` when the recorder's own copy, its largest
        tensor or its methods were changed (code that reached the recorder emptied or silenced it)."""
        ops, largest = _LEDGER[self]
        out = [[op, line, n] for (op, line), n in sorted(ops.items(), key=lambda kv: (kv[0][0], str(kv[0][1] or 0)))]
        shadowed = [k for k in vars(self) if k in _RECORDER_METHODS]
        if type(self.ops) is not dict or self.ops != ops or list(self.largest) != largest or shadowed:
            out.append([TAMPERED, None, 1])
        return out


# Each recorder's records (ops, largest), kept beside it where the learner's code does not reach (this module
# is the grader's); the recorder's own attributes are a copy that ``records`` compares with it.
_LEDGER: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()

_RECORDER_METHODS = frozenset(n for n in dir(OpRecorder) if callable(getattr(OpRecorder, n, None)))
# The recorded name of a recorder found changed (judged as a violation).
TAMPERED = "recorder_changed"
_TAMPERED_WHY = ("the grader's operator recorder was changed while your code ran (emptied, reset or a method "
                 "replaced): what graded code runs must stay on the record")

_REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_COURSE = os.path.join(_REPOSITORY, "course") + os.sep
# the course's own packages: their code is not the learner's (the interpreter's bounds check reads storages)
_COURSE_PACKAGES = tuple(os.path.join(_REPOSITORY, p) + os.sep for p in ("course", "measure", "autograder"))


# A memory exercise's harness counts storage with measure.memory.MemoryMeter, a dispatch mode above the
# recorder that passes every operator on: its frame is not the code that asked for the operator (without
# this, the interpreter's own casts inside a launch were charged to the learner's kernel line).
_METER = os.path.join(os.path.dirname(_COURSE.rstrip(os.sep)), "measure", "memory.py")


def _package_dir(name: str) -> str:
    """The folder a package is installed in (found without importing it), ending in a separator."""
    return os.path.dirname(os.path.abspath(importlib.util.find_spec(name).origin)) + os.sep


# Where torch, Triton and the installed libraries really are. A frame is theirs when its file lies under
# one of these folders, never because its path merely contains "/torch/" or "site-packages": a learner can
# name a folder beside the submission that way (mylib/torch/work.py), and its frames must stay theirs.
_TORCH_DIR = _package_dir("torch")
_TRITON_DIR = _package_dir("triton")
_INTERPRETER = os.path.join(_TRITON_DIR, "runtime", "interpreter.py")
_LIBRARY_DIRS = INSTALLED
# Frames passed over when looking for the code that asked for an operator or a value: torch's own, this
# file's (the recorder's function-level half calls on to torch), the memory meter's, and Python's frozen
# import machinery (the code that imports is further out).
_PASSED = (__file__, _METER)
# The grader's call of the learner's function: what lies further out is the grader's, never the learner's.
_WORKER = os.path.join(_REPOSITORY, "autograder", "worker.py")
# Code that works on the learner's behalf only inside a launch: Triton's and the course's own.
_PLUMBING_DIRS = (_TRITON_DIR, *_COURSE_PACKAGES)

LEARNER, INTERPRETER, GRADER = "learner", "interpreter", "grader"


def _asked_by(frame) -> str:
    """Whose work an operator (or a value taken out of torch) is, from the stack above it:

    - ``INTERPRETER``: the Triton interpreter's own, inside a launch (copying a launch's tensors to the
      host and back, emulating a cast, the course's bounds check), on the CPU only;
    - ``LEARNER``: any other code's: the submission, a module beside it, and whatever it called: the
      standard library (``functools.singledispatch``, ``json``) or another library;
    - ``GRADER``: the grader's own (a harness, the memory meter), with nothing else between it and the
      worker's call of the learner's function.

    Walking out from the operator, torch's frames are passed over, and so are Triton's and the course's:
    code of theirs that the learner's code calls directly (``triton.testing``, a course helper) works on
    its behalf, unless the interpreter is met first. The first other frame decides."""
    while frame is not None:
        name = frame.f_code.co_filename
        if name == _INTERPRETER:
            return INTERPRETER
        if name == _WORKER:
            return GRADER
        if not (name.startswith((_TORCH_DIR, "<frozen")) or name in _PASSED or name.startswith(_PLUMBING_DIRS)):
            return LEARNER
        frame = frame.f_back
    return GRADER


def interpreter_plumbing(frame) -> bool:
    """Whether an operator is the CPU interpreter's own work inside a launch (``_asked_by``). Code the
    interpreter calls on the learner's behalf (a kernel's body, hooks, grid callables) is the learner's,
    and on a GPU, where the grade is made, no interpreter runs."""
    return _asked_by(frame) == INTERPRETER


def _is_library(filename: str) -> bool:
    return filename.startswith(_LIBRARY_DIRS) or filename.startswith("<frozen")


# The recorded name of a refused launch callback is this prefix, a colon, and what it was (for the judge).
LAUNCH_CALLBACK = "launch_callback"


class CallbackRefused(RuntimeError):
    """A Triton launch was given a callback that is not the learner's own code."""


def own_code(obj, is_learners, depth: int = 0) -> bool:
    """Whether calling ``obj`` runs the learner's own Python first: a function (or lambda) defined in the
    submission, a method of it bound to any object, a ``functools.partial`` of one, an object of the learner's
    class with its own ``__call__``. Decided from what ``obj`` is, never from its name: a builtin, a class, a
    library's function or method are not (their Python, if any, is not the learner's frame)."""
    if depth > 8:
        return False
    if isinstance(obj, functools.partial):
        return own_code(obj.func, is_learners, depth + 1)
    if isinstance(obj, types.MethodType):
        obj = obj.__func__
    if not isinstance(obj, (types.FunctionType, type)):
        obj = getattr(type(obj), "__call__", None)
    return isinstance(obj, types.FunctionType) and is_learners(obj.__code__.co_filename)


class LaunchCallbacks:
    """Refuses a launch whose callbacks are not the learner's own code, while learner code runs (the span
    ``ThreadGuard`` arms) in a worker that knows the learner's files (``owner``, an ``OpRecorder``)."""

    owner: "OpRecorder | None" = None
    _triton_files: tuple = ()
    # [(object, dotted path, why)]: Triton's library functions the exercise refuses inside its kernels
    refused: list = []

    @classmethod
    def arm(cls, owner: "OpRecorder | None", kernel_library: dict | None = None) -> None:
        """``kernel_library``: {dotted path: why} of the Triton functions a kernel may not be handed
        (``Rules.kernel_library``, and the atomics of an exercise that asks for determinism)."""
        cls.owner = owner
        cls.refused = [(obj, path, why) for path, why in (kernel_library or {}).items()
                       for obj in [resolve_path(path)] if obj is not None]
        if not cls._triton_files:
            from course.triton_internals import internal

            # Triton's own defaults (an autotuner's reset/restore hooks) are Triton's, not the learner's
            cls._triton_files = (sys.modules[internal("Autotuner").__module__].__file__,)

    @classmethod
    def judging(cls) -> bool:
        """Launches are judged in a checked call (learner code running with the operator recorder armed: what
        the correctness points rest on). A timed call is judged by its outputs and the clock alone, as its
        operators are; the checks' Python there (~80-110 us a launch on an H100's host, more than the L2
        flush hides) would be charged to the kernel."""
        return cls.owner is not None and ThreadGuard.armed == threading.get_ident() and ThreadGuard.recorder is not None

    @classmethod
    def check(cls, kernel, grid=None) -> None:
        if not cls.judging():
            return
        if grid is not None and not callable(grid):
            cls._check_grid(kernel, grid, "as its grid")
        for role, hook in cls._callbacks(kernel, grid):
            if hook is None or own_code(hook, cls._allowed):
                continue
            what = f"{role} {_describe(hook)}"
            cls.owner_note(what)
            raise CallbackRefused(f"Triton was given {what}: {_CALLBACK_WHY}")

    @classmethod
    def _check_grid(cls, kernel, grid, role: str) -> None:
        """A grid is what it claims to be: a tuple or list of Python (or numpy) ints. Triton's launch takes its
        length and its numbers (``len(grid)``, ``range(grid[0])``); on an object of another class, those run
        the class's Python outside the learner's code (a ``__len__`` that computes the exercise)."""
        problem = _grid_problem(grid)
        if problem is not None:
            what = f"{_kernel_name(kernel)} with {problem} {role}"
            cls.owner_note(f"{what}{_WHY_SEP}{_GRID_WHY}", LAUNCH_ARGUMENT)
            raise ArgumentRefused(f"Triton's launch of {what}: {_GRID_WHY}")

    @classmethod
    def answering_plain_grids(cls, kernel, grid):
        """The learner's grid callable (while learner code runs), its answer judged like a grid given as it is."""
        if not cls.judging():
            return grid

        def plain_grid(meta):
            answer = grid(meta)
            cls._check_grid(kernel, answer, "as the answer of its grid callable")
            return answer
        return plain_grid

    @classmethod
    def owner_note(cls, what: str, prefix: str = LAUNCH_CALLBACK) -> None:
        rec = ThreadGuard.recorder
        if rec is not None:
            rec.note(f"{prefix}:{what}", sys._getframe(2))

    @classmethod
    def check_arguments(cls, kernel, args, kwargs) -> None:
        """Refuse a launch handed anything but what Triton takes as a kernel's argument (``_argument_problem``):
        deny by default, from what each argument is."""
        if not cls.judging():
            return
        names = list(getattr(kernel, "arg_names", None) or ())
        named = [(names[i] if i < len(names) else f"argument {i + 1}", a) for i, a in enumerate(args)]
        for name, value in [*named, *((k, v) for k, v in kwargs.items() if k != "grid")]:
            problem = cls._argument_problem(value)
            if problem is not None:
                what, why = f"{_kernel_name(kernel)} with {problem[0]} as its argument {name}", problem[1]
                cls.owner_note(f"{what}{_WHY_SEP}{why}", LAUNCH_ARGUMENT)
                raise ArgumentRefused(f"Triton's launch of {what}: {why}")

    @classmethod
    def _argument_problem(cls, value, depth: int = 0) -> tuple[str, str] | None:
        """None when ``value`` is something a Triton launch takes as it is: a tensor, a number, a string, a
        dtype, a tuple of those, a tensor descriptor or reinterpreted tensor, a Triton function (a kernel's
        constexpr) other than those the exercise refuses. Else (what it is, why it is refused), in words."""
        kind = type(value)
        if depth > 8:
            return "a container nested too deep", _ARGUMENT_WHY
        if kind in (torch.Tensor, torch.nn.Parameter):
            shadowing = sorted(n for n in vars(value) if hasattr(kind, n))
            if shadowing:  # t.data_ptr = ...: found on the tensor before its class's own method
                return (f"a tensor whose own attribute {shadowing[0]} hides Tensor.{shadowing[0]}",
                        _SHADOW_WHY)
            return None
        if kind in _PLAIN_ARGUMENTS or (isinstance(value, _np_generic()) and kind.__module__ == "numpy"):
            return None
        if kind in (tuple, list, torch.Size):
            return next((p for p in (cls._argument_problem(v, depth + 1) for v in value) if p), None)
        triton = _triton_argument_types()
        if kind in triton["values"]:
            return None
        if kind in triton["constexpr"]:
            return cls._argument_problem(value.value, depth + 1)
        if kind in triton["holders"]:  # a tensor descriptor, a reinterpreted tensor: the tensor inside
            inner = [value.base, *(getattr(value, a, ()) or () for a in ("shape", "strides", "block_shape"))]
            return next((p for p in (cls._argument_problem(v, depth + 1) for v in inner) if p), None)
        if isinstance(value, triton["functions"]) or _triton_builtin(value):
            inner = getattr(value, "fn", value)
            for obj, path, why in cls.refused:
                if value is obj or inner is getattr(obj, "fn", obj):
                    return path, why
            return None
        return (_describe(value) if callable(value) else f"an object of type {_describe(kind)}"), _ARGUMENT_WHY

    @classmethod
    def _allowed(cls, filename: str) -> bool:
        return cls.owner.is_learners(filename) or filename in cls._triton_files

    @staticmethod
    def _callbacks(kernel, grid):
        yield "a grid callable", grid if callable(grid) else None
        for hook in getattr(kernel, "pre_run_hooks", None) or ():
            yield "a pre-run hook", hook
        yield "a launch-metadata function", getattr(kernel, "launch_metadata", None)
        for name, hook in (getattr(kernel, "values", None) or {}).items():
            yield f"the heuristic for {name}", hook
        for attr in ("pre_hook", "post_hook", "early_config_prune", "perf_model"):
            yield f"an autotune {attr}", getattr(kernel, attr, None)
        configs = getattr(kernel, "configs", None) or [getattr(kernel, "config", None)]
        for config in configs:
            yield "a config's pre_hook", getattr(config, "pre_hook", None)
        runtime = getattr(sys.modules.get("triton.knobs"), "runtime", None)
        for attr in ("launch_enter_hook", "launch_exit_hook", "jit_cache_hook", "jit_post_compile_hook"):
            hook = getattr(runtime, attr, None)
            # triton 3.9 keeps launch hooks in a chain (an empty one by default), 3.6 one callable or None
            for one in getattr(hook, "calls", None) if isinstance(getattr(hook, "calls", None), list) else [hook]:
                yield f"triton.knobs.runtime.{attr}", one


# The recorded name of a launch argument Triton may not take: this prefix, a colon, what it was, _WHY_SEP, why.
LAUNCH_ARGUMENT = "launch_argument"
_WHY_SEP = " :: "


class ArgumentRefused(RuntimeError):
    """A Triton launch was handed an argument that is not a kernel's argument (``LaunchCallbacks``)."""


_ARGUMENT_WHY = ("a Triton kernel takes tensors, numbers, strings, dtypes, tuples of them and Triton "
                 "functions (@triton.jit); anything else is Python that Triton's launch or the interpreter "
                 "calls outside your kernel (an object's methods, a functools.partial, a plain function), "
                 "where the grader cannot see whose work it is")
_PLAIN_ARGUMENTS = frozenset({int, float, bool, str, type(None), torch.Tensor, torch.nn.Parameter, torch.dtype})
_SHADOW_WHY = ("Triton's launch (and, on the CPU, the interpreter) calls a tensor argument's methods (data_ptr, "
               "stride, ...): one set on the tensor itself runs your Python outside your code, where the grader "
               "cannot see whose work it is; hand the kernel a tensor as torch made it")
_GRID_WHY = ("a grid is a tuple (or list) of up to three ints, or a function of yours that returns one: "
             "Triton reads its length and numbers, and an object of another class runs its own Python there, "
             "outside your code")


def _grid_problem(grid) -> str | None:
    """None for a plain grid (a tuple, list or torch.Size of ints); else what it is, in words."""
    if type(grid) not in (tuple, list, torch.Size):
        return f"an object of type {_describe(type(grid))}"
    for n in grid:
        if not (type(n) in (int, bool) or (isinstance(n, _np_generic()) and type(n).__module__ == "numpy")):
            return f"a grid holding an object of type {_describe(type(n))}"
    return None


@functools.cache
def _np_generic():
    import numpy

    return numpy.generic


@functools.cache
def _triton_argument_types() -> dict:
    """Triton's classes a launch argument may be, by what they are: its dtypes (``tl.float16``), constexpr,
    the holders of a tensor (``TensorDescriptor``, ``triton.reinterpret``'s wrapper) and its functions."""
    import triton.language.core as core
    from course.triton_internals import internal

    bases = tuple(getattr(core, n) for n in ("base_type", "dtype") if hasattr(core, n))
    values = {c for c in vars(core).values() if isinstance(c, type) and issubclass(c, bases)}
    holders = set()
    for module, name in (("triton.tools.tensor_descriptor", "TensorDescriptor"), ("triton.runtime.jit", "TensorWrapper")):
        try:
            holders.add(getattr(importlib.import_module(module), name))
        except (ImportError, AttributeError):
            pass
    functions = []
    for name in ("JITFunction", "InterpretedFunction"):
        try:
            functions.append(internal(name))
        except ImportError:
            pass
    return {"values": frozenset(values), "constexpr": frozenset({core.constexpr}), "holders": frozenset(holders),
            "functions": tuple(functions)}


def _triton_builtin(value) -> bool:
    """A function of Triton's language (``tl.exp``, ``tl.maximum``): marked a builtin and defined in Triton."""
    return (isinstance(value, types.FunctionType) and getattr(value, "__triton_builtin__", False) is True
            and value.__code__.co_filename.startswith(_TRITON_DIR))


def _kernel_name(kernel) -> str:
    while hasattr(kernel, "fn") and not isinstance(kernel, types.FunctionType):
        kernel = kernel.fn
    return getattr(kernel, "__name__", "the kernel")


def _describe(obj) -> str:
    if isinstance(obj, functools.partial):
        return f"functools.partial({_describe(obj.func)})"
    if isinstance(obj, (types.BuiltinFunctionType, type)):  # torch.softmax, not torch._VariableFunctionsClass.softmax
        name = obj.__name__
    else:
        name = getattr(obj, "__qualname__", None) or type(obj).__qualname__
    module = getattr(obj, "__module__", None) or type(obj).__module__
    return f"{module}.{name}" if module else name


_CALLBACK_WHY = ("Triton runs its launch callbacks (pre-run hooks, grid callables, heuristics, autotune's "
                 "hooks) outside your code, so each must be a function you wrote (a def or a lambda of your "
                 "own); a library's function given as one computes the exercise where the grader cannot see "
                 "whose work it is")


# The recorded name of a course function a measuring exercise may not run: this prefix, a colon, its name.
COURSE_TOOL = "course_tool"
_MEASURE = os.path.join(_REPOSITORY, "measure") + os.sep
# Callers whose calls into measure are not the learner's: measure itself, and the grader (its recorder's
# size rules use measure.memory; learner code cannot import the grader), but for the worker's call of the
# entry point itself (an entry point that is a course tool, ``peak_memory_bytes = peak_bytes``, runs there).
_TOOL_CALLERS = (_MEASURE, os.path.join(_REPOSITORY, "autograder") + os.sep)


class CourseTools:
    """While a measuring exercise's graded call runs: every function of the course's ``measure`` package that
    the call's code enters from outside measure and the grader (however it got hold of it: an import, an
    alias, a ``functools.partial``, a library it was handed to) is noted in ``recorder`` unless ``allowed``
    names it. A Python profile function (``sys.setprofile``: this thread only, and graded code may not start
    threads) sees each call, so the rule rests on what runs, not on how the source spells it."""

    active: "CourseTools | None" = None
    _installed = False

    def __init__(self, allowed: frozenset, recorder: OpRecorder):
        self.allowed, self.recorder, self._saved = allowed, recorder, None

    @classmethod
    def install(cls) -> None:
        """Also watch each function of the measuring modules where it is defined (before the submission is
        imported, so every name it takes is the watched one): a profile function can be replaced while the
        call runs (``torch.profiler.profile(with_stack=True)`` installs its own), a wrapper cannot."""
        if cls._installed:
            return
        import pkgutil

        import measure

        # every module of measure: one that calls the callable it is handed (measure.ceilings times the
        # "timer" it is given) answers for the learner as the timer would
        modules = [importlib.import_module(f"measure.{m.name}") for m in pkgutil.iter_modules(measure.__path__)]
        for module in modules:
            for name, obj in list(vars(module).items()):
                if isinstance(obj, types.FunctionType) and obj.__module__ == module.__name__:
                    setattr(module, name, cls._watched(obj))
        cls._installed = True

    @classmethod
    def _watched(cls, fn):
        @functools.wraps(fn)
        def watched(*args, **kwargs):
            if cls.active is not None:
                cls.active._judge(fn.__code__, sys._getframe(1))
            return fn(*args, **kwargs)
        return watched

    def __enter__(self):
        self._saved = sys.getprofile()
        sys.setprofile(self._event)
        CourseTools.active = self
        return self

    def __exit__(self, *exc):
        CourseTools.active = None
        sys.setprofile(self._saved)

    def _event(self, frame, event, _arg):
        if event == "call" and frame.f_code.co_filename.startswith(_MEASURE):
            self._judge(frame.f_code, frame.f_back)

    def _judge(self, code, caller) -> None:
        """Note a call of ``code`` (a function of measure) made by ``caller`` (a frame) unless it is allowed."""
        if code.co_name == "<module>":
            return
        if caller is not None and caller.f_code.co_filename.startswith(_TOOL_CALLERS) \
                and caller.f_code.co_filename != _WORKER:
            return
        module = os.path.relpath(code.co_filename, _REPOSITORY)[:-len(".py")].replace(os.sep, ".")
        name = f"{module}.{getattr(code, 'co_qualname', code.co_name)}"
        if name in self.allowed:
            return
        if caller is not None and caller.f_code.co_filename == _WORKER:  # no line of the learner's runs it
            self.recorder.count((f"{COURSE_TOOL}:{name}", "the entry point itself"))
        elif caller is not None:
            self.recorder.note(f"{COURSE_TOOL}:{name}", caller)


_COURSE_TOOL_WHY = ("the course's own measuring tools are what the grader measures with: this exercise asks "
                    "for your own measurement (the notebook shows how), not theirs")


class KernelsRefWatch:
    """A meta-path finder that notes imports of kernels_ref (and lets them proceed, to be reported)."""

    def __init__(self):
        self.seen: list[str] = []

    def find_spec(self, name, path=None, target=None):
        if name == "kernels_ref" or name.startswith("kernels_ref."):
            self.seen.append(name)
        return None

    def install(self):
        sys.meta_path.insert(0, self)
        return self

    def imported(self) -> bool:
        return bool(self.seen) or any(m == "kernels_ref" or m.startswith("kernels_ref.") for m in sys.modules)


def reaches_kernels_ref(fn) -> bool:
    """Whether ``fn`` is, or names (through its globals, transitively), something from kernels_ref: what
    ``check`` can see in the learner's own process, where the grader's import watch is not running."""
    seen, todo = set(), [fn]
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        module = obj.__name__ if isinstance(obj, types.ModuleType) else getattr(obj, "__module__", None)
        if isinstance(module, str) and (module == "kernels_ref" or module.startswith("kernels_ref.")):
            return True
        inner = getattr(obj, "fn", None) if not hasattr(obj, "__code__") else obj  # a Triton kernel's function
        code, glob = getattr(inner, "__code__", None), getattr(inner, "__globals__", {})
        if code is None:
            continue
        names, codes = set(), [code]
        while codes:
            c = codes.pop()
            names.update(c.co_names)
            codes.extend(k for k in c.co_consts if hasattr(k, "co_names"))
        todo.extend(glob[n] for n in names if n in glob)
    return False


# The recorded name of a refused thread start (not a torch operator: judged before the operator rules).
THREAD_START = "start_thread"


class ThreadRefused(RuntimeError):
    """Graded code tried to start a thread."""


class ThreadGuard:
    """Refuses every new thread while armed (the submission's import and its calls), at the lowest level
    (``_thread``'s starters and ``threading``'s references to them): ``threading.Thread``, executors,
    ``QueueListener`` and tqdm's ``thread_map`` all start threads there. The grader's own threads (none in
    the worker while learner code runs) start while it is disarmed. Armed marks the span where learner code
    runs: ``autograder.imports.ImportGuard`` then judges every import, whoever asks."""

    armed = None   # the thread whose starts are refused (the one running learner code), or None
    recorder: OpRecorder | None = None
    _installed = False

    @classmethod
    def install(cls) -> None:
        if cls._installed:
            return
        import _thread

        for module in (_thread, threading):
            for name in ("start_new_thread", "start_new", "start_joinable_thread",
                         "_start_new_thread", "_start_joinable_thread"):
                if callable(getattr(module, name, None)):
                    setattr(module, name, cls._refusing(getattr(module, name)))
        cls._installed = True

    @classmethod
    def _refusing(cls, start):
        def start_refused(*args, **kwargs):
            # only the graded thread's starts: another thread of a notebook process (its kernel's I/O) is not graded
            if cls.armed != threading.get_ident():
                return start(*args, **kwargs)
            if cls.recorder is not None:
                cls.recorder.note(THREAD_START, sys._getframe(1))
            raise ThreadRefused("graded code may not start threads: the grader sees only the work done on "
                                "the thread that calls your function")
        return start_refused

    @classmethod
    def armed_for(cls, recorder: OpRecorder | None = None):
        """A context manager: threads refused inside it (starts noted in ``recorder`` when there is one)."""
        import contextlib

        @contextlib.contextmanager
        def scope():
            cls.install()
            cls.armed, cls.recorder = threading.get_ident(), recorder
            try:
                yield
            finally:
                cls.armed, cls.recorder = None, None

        return scope()


_THREAD_WHY = ("graded code runs on the grader's thread only: the operator recorder and the memory meter "
               "see nothing another thread computes")


# Operations the worker's audit hook refused (autograder.runtime_audit), recorded under this prefix.
REFUSED = "refused"
# ... and one that a library caught and recovered from before the learner's code saw it: a note, not a loss
RECOVERED = "recovered"
_REFUSED_WHY = ("refused while graded code ran: the grader sees only the work done in its worker, by code it "
                "audited (no other processes, no code built or loaded at run time, no unpickling, no ctypes, no "
                "reading the process's memory, no reaching the grader's operator recorder on torch's mode stacks or calling "
                "operators below it)")


def recovered_notes(ops_records, where) -> list[str]:
    """Notes for the operations refused while a library ran and recovered from by the library itself: they
    never ran, and no code of the learner's asked for them or saw them refused."""
    found = dict.fromkeys((op.split(":", 1)[1], line) for op, line, _ in ops_records if op.startswith(RECOVERED + ":"))
    return [f"note: a library the code at {where(line)} called tried to do this and was refused: it {what}; the "
            "library carried on without it (nothing ran: no points withheld)" for what, line in found]


def _launch_argument(what: str, at: str, _values_may_leave) -> str:
    argument, _, why = what.partition(_WHY_SEP)
    return f"launches {argument} at {at}: {why}"


# A marked record ("KIND:what") -> its violation in plain words (None: not one), given where it ran and whether
# the exercise's answer is a number (values leaving torch are then the answer, not a way around a kernel).
_MARKED_RECORDS = {
    COURSE_TOOL: lambda what, at, _: f"runs {what} at {at}: {_COURSE_TOOL_WHY}",
    REFUSED: lambda what, at, _: f"{what} at {at}: {_REFUSED_WHY}",
    RECOVERED: lambda what, at, _: None,  # recovered_notes
    LAUNCH_ARGUMENT: _launch_argument,
    LAUNCH_CALLBACK: lambda what, at, _: f"gives Triton {what} at {at}: {_CALLBACK_WHY}",
    LEAVES_TORCH: lambda what, at, values_may_leave: None if values_may_leave else f"calls {what} at {at}: it {_LEAVE_WHY}",
    UNSEEN: lambda what, at, _: f"runs {what} (code of yours) at {at}: {_UNSEEN_WHY}",
}


def judge(spec, ops_records, launch_counts, used_kernels_ref: bool, where, largest=()) -> list[str]:
    """Violations (plain words) from recorded ops, launches per call, kernels_ref use and, for exercises
    with ``max_intermediate``, the largest tensor an operator produced in each call: ``largest`` holds
    ``(elements, operator, line, limit)`` per call."""
    violations = []
    over = [c for c in largest if c[3] is not None and c[0] > c[3]]
    if over:
        numel, op, line, limit = max(over, key=lambda c: c[0])
        named = op if "::" in str(op) else f"aten.{op}"
        violations.append(f"{named} at {where(line)} produced a tensor of {numel:,} elements; this exercise "
                          f"must never hold more than {limit:,} at once ({spec.rules.intermediate_advice})")
    if used_kernels_ref:
        violations.append("imports kernels_ref (the course's reference kernels): the exercise must be your own code")
    rules = spec.rules
    values_may_leave = getattr(spec, "kind", None) == "value"  # 00/02 measure and count: numbers are their answer
    seen = set()
    for op, line, _count in ops_records:
        if (op, line) in seen:
            continue
        seen.add((op, line))
        if op == TAMPERED:
            violations.append(_TAMPERED_WHY)
            continue
        if op == THREAD_START:
            violations.append(f"starts a thread at {where(line)}: {_THREAD_WHY}")
            continue
        kind, _, what = op.partition(":")
        if kind in _MARKED_RECORDS:
            said = _MARKED_RECORDS[kind](what, where(line), values_may_leave)
            if said:
                violations.append(said)
            continue
        if rules.allowed_ops is None or op in rules.allowed_ops:
            continue
        why = rules.why.get(op, "it is not among the operators this exercise allows")
        violations.append(f"calls torch operator {op if '::' in op else 'aten.' + op} at {where(line)}: {why}")
    counts = [c for c in launch_counts if c is not None]
    if rules.min_launches and counts and min(counts) < rules.min_launches:
        violations.append(f"launched {min(counts)} Triton kernel(s) in a call; the exercise asks for your own "
                          f"Triton kernel (at least {rules.min_launches} launch)")
    if rules.max_launches is not None and counts and max(counts) > rules.max_launches:
        violations.append(f"launched {max(counts)} Triton kernels in one call; the exercise allows "
                          f"{rules.max_launches} (a fused kernel is one launch)")
    return violations
