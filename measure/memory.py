"""Memory of one call, three ways: the allocator's view (``peak_bytes``, ``allocated_during``: the CUDA
allocator's statistics on a GPU, the profiler's memory events on the CPU) and the operators' view
(``MemoryMeter``: storage that torch operators return, alive now and at peak; deterministic).

``MemoryMeter`` is a TorchDispatchMode that sees every torch operator while it is active (forward and the
backward the autograd engine runs for it). It keeps a weak reference to each *fresh* storage an operator
hands back (one that none of the operator's own inputs lives in: a view or an in-place result is not
fresh) with its size in bytes, and after every operator adds up the storages still alive:
- ``live_bytes()``: bytes of fresh storages alive now (a weak reference expires when the last tensor on
  the storage goes, wherever it was kept: ``ctx.save_for_backward``, an attribute of ``ctx``, a global list);
- ``peak``: the most bytes alive right after any operator (memory peaks right after an allocation);
- ``held(output)``: what a call keeps after it returned, beyond its output's own bytes (a storage larger
  than the output, hiding other data behind it, counts beyond the output's bytes).
Counted from the operators' outputs, so the numbers are the same on every run and every device, and an
allocator's caching or rounding plays no part; storage an operator uses only inside itself (a matmul's
workspace) is not seen. The grader measures ``checkpointed_mlp`` with it; notebook 08 uses all three.

Given the call's ``inputs`` (``MemoryMeter(inputs=args)``, as the grader's harnesses do), it also counts
storage that no operator allocated once an operator writes into it (``Provenance``): a tensor over a Python
buffer (``torch.frombuffer``), a file, numpy memory, a storage built by hand and ``set_``, one kept from
before the call: memory it holds all the same.
"""
from __future__ import annotations

import gc
import sys

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode


def peak_bytes(fn, *args) -> int:
    """Peak bytes allocated during one call of ``fn(*args)`` above what was allocated before it."""
    on_gpu = any(isinstance(a, torch.Tensor) and a.is_cuda for a in args) or (not args and torch.cuda.is_available())
    if on_gpu:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()  # blocks cached from earlier calls must not hide this call's allocations
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        out = fn(*args)
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - before
        del out
        return int(peak)
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        out = fn(*args)
        del out
    return _cpu_levels(prof)[1]


def _cpu_levels(prof) -> tuple[int, int]:
    """(bytes allocated at the end, peak) above the start of a CPU profile with profile_memory=True."""
    level = peak = 0
    for e in sorted(prof.events(), key=lambda e: e.time_range.start):
        # Each event's own (self) allocations minus frees; "[memory]" events are those outside any op.
        level += e.self_cpu_memory_usage
        peak = max(peak, level)
    return int(level), int(peak)


def allocated_during(fn, *args):
    """(fn(*args), bytes still allocated after the call that were not before it, peak bytes above the
    start), as the allocator counts them: the CUDA allocator's statistics on a GPU, the profiler's memory
    events on the CPU. What a call leaves allocated beyond its output is what it holds (autograd's saved
    activations, after a forward)."""
    from course import ON_GPU

    if ON_GPU:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        out = fn(*args)
        torch.cuda.synchronize()
        return out, torch.cuda.memory_allocated() - before, torch.cuda.max_memory_allocated() - before
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        out = fn(*args)
    return (out, *_cpu_levels(prof))


def values_in(obj, kinds) -> list:
    """Every value of the types ``kinds`` (tensor or storage classes) in a (nested) operator argument or
    output: tuples, lists, dicts, in order. Judged by the object's own class and read through the containers'
    own methods, as torch's classes define them: ``isinstance`` would ask an object of another class for its
    ``__class__``, and a container's class may replace ``__iter__`` or ``values``: a property or a method of
    the caller's would run here, inside a meter's or the recorder's handler. (A list, not a generator: the
    meter and the recorder walk every operator's arguments several times, and nested generators cost them
    most of their time.)"""
    found: list = []
    _gather(obj, kinds, found)
    return found


_NONE = type(None)  # the scalar classes (never of the kinds looked for) are skipped without a call: told apart by
# identity, never by hashing an item's class into a set (a class's metaclass may have a __hash__ of the caller's,
# which would run here, inside a meter's or the recorder's handler: a storage of such a class reaches set_ itself)


def _gather(obj, kinds, found: list) -> None:
    kind = type(obj)
    if issubclass(kind, kinds):
        found.append(obj)
        return
    if issubclass(kind, tuple):
        items = tuple.__iter__(obj)
    elif issubclass(kind, list):
        items = list.__iter__(obj)
    elif issubclass(kind, dict):
        items = iter(dict.values(obj))
    else:
        return
    for item in items:
        kind = type(item)
        if kind is not int and kind is not float and kind is not bool and kind is not _NONE:
            _gather(item, kinds, found)


def tensors_in(obj):
    """Every tensor in a (nested) operator argument or output."""
    return values_in(obj, torch.Tensor)


def is_plain(t) -> bool:
    """Whether ``t`` is of torch's plain tensor classes (torch.Tensor, torch.nn.Parameter): they run no Python of
    their own when read (a subclass's class, torch's own subclasses included, runs its __torch_function__ or
    __torch_dispatch__; torch's own keep state in attributes named like Tensor's methods, NestedTensor's
    _values; a learner's subclass is an escape already). Told by identity: ``type(t) in (...)`` compares
    classes with ``==``, which a class's metaclass may answer with Python of its own."""
    kind = type(t)
    return kind is torch.Tensor or kind is torch.nn.Parameter


# A storage's methods are called unbound, as torch's classes define them: a storage object carries a __dict__
# of its own, where an attribute would hide a method (code hung there would run inside a meter's handler).
_Storage = torch.UntypedStorage


def storage_of(t: torch.Tensor):
    return torch.Tensor.untyped_storage(t)


def storage_nbytes(storage) -> int:
    return _Storage.nbytes(storage)


def _storage_key(t: torch.Tensor):
    try:
        return StorageWeakRef.from_weakref(_Storage._weak_ref(storage_of(t)))
    except (RuntimeError, NotImplementedError):  # a tensor without storage of its own (meta): nothing held
        return None


_SPARSE_PARTS = {torch.sparse_coo: ("_indices", "_values"), torch.sparse_csr: ("crow_indices", "col_indices", "values"),
                 torch.sparse_bsr: ("crow_indices", "col_indices", "values"),
                 torch.sparse_csc: ("ccol_indices", "row_indices", "values"),
                 torch.sparse_bsc: ("ccol_indices", "row_indices", "values")}


def _dense_parts(t: torch.Tensor) -> list:
    """The strided tensors holding ``t``'s memory: itself, or a sparse tensor's indices and values. Read
    unbound, as torch's class defines them: an attribute in the tensor's own __dict__ would hide the method
    (code hung there would run inside a meter's or the recorder's handler)."""
    parts = _SPARSE_PARTS.get(t.layout)
    if parts is None:
        return [t]
    return [getattr(torch.Tensor, p)(t) for p in parts]


def fresh_outputs(args, kwargs, out):
    """The tensors of ``out`` on storage that none of the inputs lives in (not views, not in-place); a
    sparse output's indices and values (a sparse copy holds memory as a dense one does)."""
    outputs = tensors_in(out)
    if not outputs:  # (an operator that returns no tensor: its inputs need no walk)
        return
    inputs = {k for a in tensors_in((args, kwargs)) for p in _dense_parts(a) if (k := _storage_key(p)) is not None}
    for o in outputs:
        for t in _dense_parts(o):
            key = _storage_key(t)
            if key is not None and key not in inputs:
                yield t, key


# Operators that grow the tensor they are given (its storage with it).
_GROWING = frozenset({"resize_", "resize_as_"})


def written_arguments(func, args, kwargs, in_place: bool = False) -> list:
    """The tensors an operator writes its result into among its arguments (``out=``) or grows (``resize_``),
    from its schema: results that are not fresh storage but hold what the operator made. (An in-place
    operator on a tensor that exists writes no more than that tensor already held: ``in_place`` adds them.)"""
    schema = getattr(func, "_schema", None)
    if schema is None:
        return []
    growing = func.overloadpacket.__name__ in _GROWING
    kwargs = kwargs or {}
    written = []
    for i, arg in enumerate(schema.arguments):
        if arg.alias_info is not None and arg.alias_info.is_write and (arg.is_out or growing or in_place):
            value = args[i] if i < len(args) and not arg.kwarg_only else kwargs.get(arg.name)
            written.extend(tensors_in(value))
    return written


class Provenance:
    """Which storages a span's operators allocated. Any other storage an operator writes into (in place,
    ``out=``, ``set_``) and that is not one of the span's ``inputs`` is foreign: no operator allocated it (a
    tensor over a Python buffer, a file or numpy memory, a storage built by hand, one kept from before the
    span), so no count of operators' outputs saw it, yet it holds what was written."""

    def __init__(self, inputs=()):
        self._known: dict = {}  # StorageWeakRef -> itself (equal keys of a dead storage are stale)
        self._given: dict = {}  # an input's StorageWeakRef -> its bytes when the span began
        # the inputs' storages an operator wrote into, with their bytes when the span began: one grown since
        # (resize_ or out= on an alias of an input: x.detach().resize_(...)) holds its growth, as a foreign
        # storage holds what was written into it
        self.grown: dict = {}
        for t in tensors_in(inputs):
            for part in _dense_parts(t):
                key = _storage_key(part)
                if key is not None:
                    self._known[key] = key
                    self._given.setdefault(key, storage_nbytes(storage_of(part)))

    def growth(self) -> int:
        """Bytes the inputs' storages written by an operator have grown by since the span began."""
        total = 0
        for key, given in self.grown.items():
            storage = torch.UntypedStorage._new_with_weak_ptr(key.cdata)
            if storage is not None:
                total += max(0, storage_nbytes(storage) - given)
        return total

    def _is_known(self, key) -> bool:
        seen = self._known.get(key)
        return seen is not None and not seen.expired()  # a dead storage's address may be a new one's

    def foreign(self, values) -> list:
        """[(tensor, key)]: the foreign storages among ``values`` (tensors, in containers too), each once
        (then it is known): what a kernel launch was handed that the span neither allocated nor took as an
        input. A kernel may write any tensor it is handed, and no operator records what it writes."""
        return self._unknown(tensors_in(values))

    def foreign_writes(self, func, args, kwargs, out, fresh=None) -> list:
        """[(tensor, key)]: the foreign storages this operator wrote into, each once (then it is known).
        ``fresh``: the operator's ``fresh_outputs``, where the caller has them already."""
        for t, key in (fresh_outputs(args, kwargs, out) if fresh is None else fresh):
            self._known[key] = key
        return self._unknown(written_arguments(func, args, kwargs, in_place=True))

    def _unknown(self, tensors) -> list:
        """[(part, key)]: the storages of ``tensors`` not known yet, each once, known from now on."""
        found = []
        for t in tensors:
            for part in _dense_parts(t):
                key = _storage_key(part)
                if key is None:
                    continue
                if not self._is_known(key):
                    self._known[key] = key
                    found.append((part, key))
                elif key in self._given and key not in self.grown:  # an input's: its growth counts from now
                    self.grown[key] = self._given[key]
        return found


def written_outputs(func, args, kwargs, out, fresh=None) -> list:
    """Every tensor an operator produced: fresh outputs, and the arguments it wrote (``out=``, in place,
    ``resize_``), so ``torch.mm(a, b, out=torch.empty(0))`` counts the product it wrote. ``fresh``: the
    operator's ``fresh_outputs``, where the caller has them already."""
    fresh = fresh_outputs(args, kwargs, out) if fresh is None else fresh
    return [t for t, _ in fresh] + written_arguments(func, args, kwargs)


class MemoryMeter(TorchDispatchMode):
    """Bytes of storage that torch operators allocated while the meter was on, alive now and at peak."""

    active: list = []  # the meters on now (innermost last): a kernel launch tells them what it was handed

    def __init__(self, inputs=None, skip=None, limit: int | None = None):
        super().__init__()
        self._live: dict = {}  # StorageWeakRef -> bytes
        self.peak = 0
        # with ``limit``: the code that made most of the bytes held at the highest peak past it, as the stack's
        # (file, line) pairs, innermost first (the last storage to push the bytes past a limit is rarely the cause)
        self.limit = limit
        self.held_most_at: list | None = None
        self._made_at: dict = {}  # StorageWeakRef -> the stack that made it (with a limit only)
        # skip(frame) -> bool: operators not to count, told by the frame that ran them (the grader's: the CPU
        # Triton interpreter's own work inside a launch, which no GPU does)
        self._skip = skip
        # with the call's inputs: foreign storage written by an operator counts too (module docstring), and
        # foreign storage handed to a kernel launch (``launched``)
        self._provenance = Provenance(inputs) if inputs is not None else None

    def __enter__(self):
        MemoryMeter.active.append(self)
        return super().__enter__()

    def __exit__(self, *exc):
        if self in MemoryMeter.active:
            MemoryMeter.active.remove(self)
        return super().__exit__(*exc)

    def launched(self, values) -> None:
        """A kernel was launched with ``values``: a storage among them that no operator of the span allocated
        and that is not an input (a workspace made before the call) holds what the kernel wrote into it, as
        a foreign write by an operator does."""
        if self._provenance is None:
            return
        with torch._C.DisableTorchFunction():  # the meter's own reads, not the launching code's
            for t, key in self._provenance.foreign(values):
                if key not in self._live:
                    self._seen(key, t)
            self._new_peak()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self._skip is not None and self._skip(sys._getframe(1)):
            return out
        # The bookkeeping outside any Python profile function set around the operator (the grader's recorder
        # watches each operator with one, for code of the learner's that starts inside it): where every tensor
        # it reads is of torch's plain classes it starts no code but torch's and the meter's (tensors and
        # storages read through torch's classes; the grader runs no automatic collection under a recorder),
        # and a watch over it cost half of a recorded operator's time. A subclass's tensor (torch's own
        # included) runs its class's Python when read: then the watch stays on.
        watch = sys.getprofile()
        plain = watch is not None and all(is_plain(t) for t in tensors_in((args, kwargs, out)))
        if plain:
            sys.setprofile(None)
        try:
            with torch._C.DisableTorchFunction():  # the meter's own reads, not the code that ran the operator
                self._account(func, args, kwargs, out)
        finally:
            if plain:
                sys.setprofile(watch)
        return out

    def _account(self, func, args, kwargs, out) -> None:
        self._prune()  # before adding: an expired entry must not shadow a new storage
        found = list(fresh_outputs(args, kwargs, out))
        if self._provenance is not None:  # the fresh outputs walked once: the meter pays per operator
            found += self._provenance.foreign_writes(func, args, kwargs, out, fresh=tuple(found))
        for t, key in found:
            if key not in self._live:
                self._seen(key, t)
        self._new_peak()

    def _seen(self, key, t) -> None:
        self._live[key] = storage_nbytes(storage_of(t))
        if self.limit is not None:
            frame, stack = sys._getframe(2), []
            while frame is not None and len(stack) < 200:
                stack.append((frame.f_code.co_filename, frame.f_lineno))
                frame = frame.f_back
            self._made_at[key] = tuple(stack)

    def _new_peak(self) -> None:
        total = self._total()
        if total > self.peak and self.limit is not None and total > self.limit:
            by_stack: dict = {}
            for key, nbytes in self._live.items():
                stack = self._made_at.get(key, ())
                by_stack[stack] = by_stack.get(stack, 0) + nbytes
            # an input's storage grown in place holding more (or nothing of the call's own alive): no line is
            # known for it (a storage's resize_ is no operator), none is named
            most = max(by_stack, key=by_stack.get) if by_stack else None
            grown = self._provenance.growth() if self._provenance is not None else 0
            self.held_most_at = list(most) if most is not None and by_stack[most] >= grown else []
        self.peak = max(self.peak, total)

    def _prune(self) -> None:
        for key in [k for k in self._live if k.expired()]:
            del self._live[key]
            self._made_at.pop(key, None)

    def _total(self) -> int:
        """Bytes of the storages seen, as large as each is now: one grown after it was first seen (by
        ``resize_``, of the tensor or of its storage) counts at its present size."""
        total = self._provenance.growth() if self._provenance is not None else 0
        for key in list(self._live):
            storage = torch.UntypedStorage._new_with_weak_ptr(key.cdata)
            if storage is not None:
                self._live[key] = storage_nbytes(storage)
            total += self._live[key]
        return total

    def live_bytes(self) -> int:
        gc.collect(1)  # cycles the call just left behind are garbage, not memory it holds (young generations: fast)
        self._prune()
        return self._total()

    def held(self, output) -> int:
        """Bytes alive now beyond the output's own: what a call keeps for later (its saved activations)."""
        total = self.live_bytes()
        for t in tensors_in(output):
            key = _storage_key(t)
            if key is not None and key in self._live:
                total -= min(self._live[key], t.numel() * t.element_size())
        return total


def fmt_bytes(n: float) -> str:
    """1536 -> '1.5 KiB' (binary units, as allocators count)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"
