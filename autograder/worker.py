"""A grading worker: ``python -m autograder.worker FD``, one fresh interpreter per graded exercise.

It holds the code under test (the learner's entry point, or a trusted baseline timed through the same
path) and answers the requests of ``autograder.protocol`` on the socket ``FD``. It judges nothing and
times nothing: the grading process makes the inputs, reads the clock from outside and compares the
outputs with float64 references. Every call is made the same way (``Worker.call``): with the operator
recorder and the launch counter on (they name the learner's lines in feedback; no verdict rests on what
they report), every stream waited for before the reply. Memory the call did not write reads as NaN: on
the CPU through ``fill_uninitialized_memory`` (no timing there), on a GPU by poisoning the allocator's
free blocks while preparing a call, outside any timed window.

``serve(fn, sock)`` is the same loop for ``check()`` in a notebook, on a forked child of its kernel.
"""
from __future__ import annotations

import contextlib
import gc
import os
import socket
import sys
import traceback

from autograder import protocol, torch_internals


# Plain values an entry point may return beside tensors (the measuring exercises' numbers and words).
_PLAIN_VALUES = (type(None), bool, int, float, str)


def _numpy_scalars() -> frozenset:
    """numpy's own scalar types (np.float64 from a median, np.int64 from a sum), where numpy is loaded."""
    numpy = sys.modules.get("numpy")
    if numpy is None:
        return frozenset()
    return frozenset(t for t in numpy.sctypeDict.values() if isinstance(t, type) and issubclass(t, numpy.generic))


def type_name(obj) -> str:
    """The name of ``obj``'s class, read without running any code of that class or of its metaclass."""
    return type.__dict__["__name__"].__get__(type(obj))


def not_plain(obj, depth: int = 0) -> str | None:
    """None when ``obj`` is plain data, else the class that is not: exactly a tensor, a tuple or list of plain
    data, None, a bool, int, float or str, or a numpy scalar. Decided by ``type(x) is`` alone, so no method of
    a learner's class (an ``__iter__``, ``__len__``, ``__getitem__``, ``__eq__``, a ``__class__`` property)
    runs: outputs are read after the call, outside the operator recorder, and must hold no code."""
    from autograder.frames import TENSOR  # torch's class, bound before graded code ran

    kind = type(obj)
    if kind is TENSOR or kind in _PLAIN_VALUES or kind in _numpy_scalars():
        return None
    if (kind is tuple or kind is list) and depth < 8:
        return next((why for why in (not_plain(o, depth + 1) for o in obj) if why is not None), None)
    return type_name(obj)


def ship(obj):
    """A copy of an output or an argument that crosses as plain data (tensors, plain values), made by exact
    types and unbound methods alone: whatever the learner's code left in it (a subclass, an object of its
    own, an instance attribute named ``detach``) runs nothing here. A CUDA tensor's copy stays on its GPU: it
    crosses as a raw frame (one pinned copy to the host, restored on the grading process's GPU, where its
    reference is), where a copy to pageable host memory here, then to the GPU there, cost ~4x the time per
    byte (online_softmax's outputs: 9.7 s of a grading's cases on an H200)."""
    from autograder.frames import TENSOR as Tensor  # torch's class, bound before graded code ran

    kind = type(obj)
    if kind is Tensor:
        plain = Tensor.detach(obj)
        if Tensor.is_cuda.__get__(plain):
            return Tensor.clone(plain)
        return Tensor.to(plain, "cpu", copy=True)
    if kind is tuple or kind is list:
        return kind(ship(o) for o in obj)
    if kind is dict and all(type(k) is str for k in obj):
        return {k: ship(v) for k, v in dict.items(obj)}  # e.g. transformer_block's params, shipped back
    if kind in _PLAIN_VALUES:
        return obj
    if kind in _numpy_scalars():
        return obj.item()  # numpy's own conversion to a Python number
    return {"__unsupported__": type_name(obj)}


# The refusal of an output that is not plain data (a recorded call's error, named like an exception).
OUTPUT_REFUSED = "OutputRefused"
# Refused outputs stay referenced until the worker exits: their finalizers (__del__) are learner code too.
_REFUSED: list = []


def refuse_unplain(done, out):
    """``out`` when it is plain data; else None, with ``done`` marked failed by the reason."""
    why = not_plain(out) if done.ok else None
    if why is None:
        return out
    _REFUSED.append(out)
    done.ok = False
    done.error = (f"{OUTPUT_REFUSED}: returned a {why} where the exercise returns plain tensors (or a plain "
                  "tuple or list of them): the grader reads no subclass or object of your own, so that none of "
                  "your code runs after your function has returned (return tuple(...) of the tensors)")
    return None


def describe_error(exc: BaseException, source_file: str | None) -> str:
    """'ValueError: msg [line N]': the learner's deepest line in the traceback, not the grader's."""
    if isinstance(exc, SystemExit):
        text = f"called sys.exit({exc.code!r})"
    elif isinstance(exc, KeyboardInterrupt):
        text = "raised KeyboardInterrupt"
    else:
        text = f"{type(exc).__name__}: {str(exc).strip()[:500]}"
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == source_file:
            line = frame.lineno
    return text if line is None else f"{text} [line {line}]"


# A new process's allocator has no free block: its first outputs would come from memory the device has just
# mapped (zeros, in practice), where every later call's come from poisoned blocks, so a kernel that leaves
# elements unwritten could pass on a process's first case and fail on the next (and the cases are shared out
# among several processes: autograder.warm). The first time, blocks of both of the allocator's pools are made
# and freed, then poisoned with the rest: two segments of the small pool (allocations of up to 1 MiB) and
# one large block, split for any output up to its size.
FIRST_POISON_BYTES = (1 << 20,) * 4 + (64 << 20,)
_first_poison_done = False


def poison_free_cuda_memory() -> None:
    """Overwrite the allocator's cached free blocks with 0xFF bytes (NaN in every float dtype), so an
    output allocated from them and never written cannot hold an earlier answer. One request per free
    block, largest first, all held at once: each lands in a free block (best fit) rather than new memory."""
    import torch

    global _first_poison_done
    held = []
    try:
        if not _first_poison_done:
            _first_poison_done = True
            freed = [torch.empty(n, dtype=torch.uint8, device="cuda") for n in FIRST_POISON_BYTES]
            del freed  # cached by the allocator, free: poisoned below with the rest
        sizes = sorted((b["size"] for seg in torch.cuda.memory_snapshot() for b in seg["blocks"]
                        if b["state"] == "inactive"), reverse=True)
        for size in sizes:
            held.append(torch.empty(size, dtype=torch.uint8, device="cuda"))
        for t in held:
            t.fill_(0xFF)
    except Exception:  # noqa: BLE001  (a second line of defence: outputs are judged on fresh values anyway)
        pass
    del held


class AutotunePin:
    """Checked calls run each ``triton.autotune`` kernel with one of its own configs, chosen by the grader,
    rather than compiling and benchmarking every config for every new shape (that is most of a matmul
    exercise's grading time: configs x shapes compilations). The cases rotate through the configs, so each
    config a submission lists is exercised on some case; timed calls autotune as the learner's program
    would, and the config they pick is checked in the timed calls."""

    index: int | None = None
    skip = 0      # configs passed over because they do not fit this GPU (as the autotuner passes them over)
    used: list = []
    _original = None

    @classmethod
    def install(cls) -> None:
        try:
            from course.triton_internals import internal

            Autotuner, OutOfResources = internal("Autotuner"), internal("OutOfResources")
        except ImportError:
            return
        if cls._original is not None:
            return
        cls._original = prune, run, bench = Autotuner.prune_configs, Autotuner.run, Autotuner._bench

        def pinned_prune(self, kwargs):
            configs = prune(self, kwargs)
            if cls.index is None or len(configs) <= 1:
                return configs
            chosen = configs[(cls.index + cls.skip) % len(configs)]
            cls.used.append(f"{getattr(self.base_fn, '__name__', 'kernel')}: {chosen}")
            return [chosen]

        def pinned_run(self, *args, **kwargs):
            if cls.index is None:
                return run(self, *args, **kwargs)
            # A pinned call runs its own config whatever its process ran before: the autotuner's cache (by the
            # key's arguments and the dtypes) would hand a later case of the same key the config pinned for an
            # earlier one, so a case's config, and its verdict, would depend on which worker ran it and what
            # that worker ran first (autograder.warm shares the cases out). Unpinned calls keep their cache.
            kept, self.cache = self.cache, {}
            try:
                return pinned_retry(self, *args, **kwargs)
            finally:
                self.cache = kept

        def pinned_retry(self, *args, **kwargs):
            for _ in range(len(self.configs)):
                try:
                    return run(self, *args, **kwargs)
                except OutOfResources:
                    # Too many registers or too much shared memory for this GPU: autotuning would time it as
                    # infinitely slow and pick another, so the pinned call takes the next config.
                    failed = getattr(self, "best_config", None)
                    if failed is None:
                        raise
                    for key in [k for k, v in self.cache.items() if v is failed]:
                        del self.cache[key]
                    cls.skip += 1
                    if cls.used:
                        cls.used[-1] += " (did not fit this GPU: the next config ran)"
            return run(self, *args, **kwargs)

        def pinned_bench(self, *args, config, **meta):
            # A pinned call has one config left: timing it (triton.testing.do_bench, ~0.15 s a shape) picks
            # nothing. The launch that follows compiles and runs it, and fails as the benchmark would have.
            if cls.index is not None:
                return [0.0, 0.0, 0.0]
            return bench(self, *args, config=config, **meta)

        Autotuner.prune_configs, Autotuner.run, Autotuner._bench = pinned_prune, pinned_run, pinned_bench

    @classmethod
    def uninstall(cls) -> None:
        if cls._original is not None:
            from course.triton_internals import internal

            Autotuner = internal("Autotuner")
            (Autotuner.prune_configs, Autotuner.run, Autotuner._bench), cls._original = cls._original, None

    @classmethod
    def pinned(cls, index: int | None):
        import contextlib

        @contextlib.contextmanager
        def scope():
            cls.index, cls.skip, cls.used = index, 0, []
            try:
                yield cls.used
            finally:
                cls.index = None

        return scope()


class Worker:
    """The code under test and the state the requests act on (argument slots, the last output)."""

    def __init__(self, fn, source_file: str | None, poison: bool, harness=None, prepare=None, fresh=None,
                 folder: str | None = None, course_tools: frozenset | None = None, trusted: bool = False,
                 kernel_library: dict | None = None):
        import course
        import torch

        from autograder import legality

        self.fn, self.source_file, self.poison, self.folder = fn, source_file, poison, folder
        # harness(fn, args) -> (output, measured): how a call is made (specs.base.Exercise.harness);
        # prepare(args) -> args: a baseline's own arguments, made when a slot is loaded (Performance.baseline_args).
        # fresh(bases, seed) -> args: a timed call's fresh values (Performance.fresh_args; None: jittered_args).
        self.harness, self.prepare, self.fresh = harness, prepare, fresh
        # the timed calls' harness: the same, but for one that measures around checked calls alone (checked_only)
        self.timed_harness = None if getattr(harness, "checked_only", False) else harness
        self.course_tools = course_tools  # the course's functions a checked call may run (None: any)
        self.trusted = trusted  # a baseline: its outputs (torch's own tuple types too) are never refused
        self.collects = False  # collect a call's garbage inside it (a grading worker; not check()'s session)
        self.on_gpu = course.ON_GPU
        self.device = course.DEVICE
        self.slots: dict[int, tuple] = {}
        self.bases: dict[int, tuple] = {}   # a slot's values as loaded: fresh values derive from them
        self.last = None
        self.flush = None
        self.dropped: list = []  # recorders of what ran while the learner's objects were dropped between calls
        self.torch, self.legality = torch, legality
        legality.install_launch_counter()
        # launch callbacks are judged against the learner's files (or, with no file, code outside the libraries)
        # ... and a launch's arguments against what Triton takes (the exercise's refused library functions too)
        legality.LaunchCallbacks.arm(legality.OpRecorder(source_file, folder), kernel_library)
        AutotunePin.install()
        import torch.utils.deterministic

        self._saved = (torch.are_deterministic_algorithms_enabled(),
                       torch.utils.deterministic.fill_uninitialized_memory)
        if poison and not self.on_gpu:
            # Every torch.empty / empty_like now holds NaN (ints: their max): never-written outputs show.
            torch_internals.deterministic_algorithms(torch)
            torch.utils.deterministic.fill_uninitialized_memory = True

    def restore(self) -> None:
        """Undo the process-wide switches (for a worker that lives in a learner's notebook process)."""
        import torch.utils.deterministic

        self.torch.use_deterministic_algorithms(self._saved[0], warn_only=True)
        torch.utils.deterministic.fill_uninitialized_memory = self._saved[1]
        AutotunePin.uninstall()

    # ---------------------------------------------------------------- requests
    def handle(self, req: dict):
        op = req["op"]
        if op == "load":
            args = self._to_device(req["args"])
            old, self.slots[req["slot"]] = self.slots.get(req["slot"]), self.prepare(args) if self.prepare else args
            self.bases.pop(req["slot"], None)
            with self._dropping():
                del old
        elif op == "refill":
            self._refill(req["slot"], req["args"])
        elif op == "jitter":
            self._jitter(req["slot"], req["seed"])
        elif op == "prepare":
            for slot, seed in req.get("jitter", ()):  # fresh values first: the L2 flush then evicts them too
                self._jitter(slot, seed)
            self._prepare(poison=req.get("poison", True))
        elif op == "clone":
            from autograder.argtree import map_tensors

            # every tensor its own copy, inside an argument dict too: jittering one slot leaves the others be
            old = self.slots.get(req["to"])
            self.slots[req["to"]] = tuple(map_tensors(self.torch.Tensor.clone, a) for a in self.slots[req["slot"]])
            self.bases.pop(req["to"], None)
            with self._dropping():
                del old
        elif op == "call":
            slots = [self.slots[i] for i in req["slots"]]
            if req.get("record", True):
                return protocol.to_wire(self.call(slots[0], empty=req.get("empty", False), config=req.get("config"),
                                                  device_time=req.get("device_time", False)))
            return protocol.to_wire(self.call_many(slots, empty=req.get("empty", False)))
        elif op == "ship":
            from autograder import runtime_audit

            # torch's own methods, whatever ran since the call (a finalizer while a timed call's outputs were
            # dropped): shipping calls them on the outputs (what was replaced is charged to the next checked call)
            runtime_audit.check_modules()
            out, args = self.last[req.get("index", 0)]
            # "inputs": False (timed calls, whose inputs nobody judges) ships the output alone: half the bytes
            inputs = ship(list(args)) if req.get("inputs", True) else []
            return protocol.to_wire(protocol.Shipped(ship(out), inputs))
        elif op == "drop":
            with self._dropping():
                self.last = None
        elif op == "nullify":
            from autograder.legality import disable_triton_launches

            disable_triton_launches()
        else:
            raise ValueError(f"unknown request {op!r}")
        return {"type": "ack"}

    def call_many(self, slots: list, empty: bool = False) -> protocol.CallDone:
        """The timed way: each slot's call back to back (a call's launch overlaps the previous call's device
        work, as in a program), then every stream waited for. Nothing else runs inside the window."""
        outs, done = [], protocol.CallDone(ok=True)
        try:
            with self.legality.ThreadGuard.armed_for():
                try:
                    self.last = None  # the previous outputs' finalizers run inside this call (see ``call``)
                    self._call_each(slots, outs, empty)
                except BaseException as exc:  # noqa: BLE001
                    done.ok, done.error = False, describe_error(exc, self.source_file)  # armed: its __str__ is code
            self._sync()
        except BaseException as exc:  # noqa: BLE001
            done.ok, done.error = False, describe_error(exc, self.source_file)
        outs = outs if self.trusted else [refuse_unplain(done, out) for out in outs]
        self.last = list(zip(outs, slots))
        return done

    def _call_each(self, slots: list, outs: list, empty: bool) -> None:
        for args in slots:
            # the harness, where there is one, adds what the call wrote in place to its output (a
            # memory harness never times: memory exercises have no performance part)
            if empty:
                outs.append(None)
            elif self.timed_harness is None:
                outs.append(self.fn(*args))
            else:
                outs.append(self.timed_harness(self.fn, args)[0])

    def call(self, args: tuple, empty: bool = False, config: int | None = None,
             device_time: bool = False) -> protocol.CallDone:
        """A checked call: under the operator recorder and the launch counter (to name lines in feedback),
        autotuned kernels pinned to their config number ``config`` (``AutotunePin``) unless it is None;
        ``device_time`` (on a GPU): also the device time of the kernels it ran (``CallDone.device_ms``)."""
        if device_time and self.on_gpu:
            with self._device_profiler() as prof:
                done = self.call(args, empty, config)
            done.device_ms = busy_ms(prof.events())
            return done
        rec = self.legality.OpRecorder(self.source_file, self.folder, inputs=args)
        from autograder import runtime_audit

        runtime_audit.check_modules()  # the library functions the import or an unrecorded call replaced
        runtime_audit.charge_pending(rec)  # refused at import, in a finalizer or in an unrecorded call
        dropped, self.dropped = self.dropped, []
        for old in dropped:
            for op, line, n in old.records():  # what finalizers ran while objects were dropped between calls
                rec.count((op, line), n)
        self.legality.reset_launches()
        done = protocol.CallDone(ok=True)
        out = None
        try:
            with no_automatic_collection(), rec, AutotunePin.pinned(config) as used, \
                    self.legality.ThreadGuard.armed_for(rec), self._tools(rec):
                try:
                    # The previous call's outputs are dropped here, under this call's recorder: a finalizer the
                    # learner's code hung on them (__del__, weakref.finalize) is that code running, and never
                    # runs between a call and the shipping of its outputs.
                    self.last = None
                    if empty:
                        out = None
                    elif self.harness is None:
                        out = self.fn(*args)
                    else:
                        out, measured = self.harness(self.fn, args)
                        done.measured = rec.place(measured) if isinstance(measured, dict) else measured
                except BaseException as exc:  # noqa: BLE001  (sys.exit inside the call is the learner's, not ours)
                    # described here, recorded and armed: an exception's __str__ may be the learner's code too
                    done.ok, done.error = False, describe_error(exc, self.source_file)
                # garbage the call left in reference cycles is collected now, under the recorder: a finalizer
                # (__del__, weakref.finalize) it triggers is part of the call, not work done after it (a grading
                # worker froze what existed before its first call: this looks at the calls' objects alone)
                if self.collects:
                    gc.collect()
            self._sync()
        except BaseException as exc:  # noqa: BLE001  (the device's own error, found when waiting for it)
            done.ok, done.error = False, describe_error(exc, self.source_file)
        runtime_audit.check_modules()
        runtime_audit.charge_pending(rec)  # what the call asked for and was refused, once it is judged who saw it
        done.ops, done.largest, done.launches = rec.records(), rec.largest_seen(), self.legality.launches()
        done.autotune = list(dict.fromkeys(used))
        self.last = [(out if self.trusted else refuse_unplain(done, out), args)]
        return done

    # ---------------------------------------------------------------- helpers
    def _dropping(self):
        """A context in which the worker lets go of objects the learner's code may have touched (outputs,
        inputs it kept): their finalizers are the learner's code, so they run under a recorder, garbage cycles
        included, and what it records is charged to the next checked call (as refusals made outside a call are)."""
        import contextlib

        @contextlib.contextmanager
        def scope():
            rec = self.legality.OpRecorder(self.source_file, self.folder)
            with no_automatic_collection(), rec, self.legality.ThreadGuard.armed_for(rec):
                yield
                if self.collects:
                    gc.collect()
            self.dropped.append(rec)

        return contextlib.nullcontext() if self.trusted else scope()

    def _tools(self, rec):
        import contextlib

        if self.course_tools is None:
            return contextlib.nullcontext()
        return self.legality.CourseTools(self.course_tools, rec)

    def _to_device(self, args) -> tuple:
        from autograder.argtree import to_device
        from autograder.probes import materialize

        return to_device(materialize(args), self.device)

    def _refill(self, slot: int, values) -> None:
        """Same tensors (same pointers, shapes, strides; inside containers too), new values: a cache keyed
        on them now lies."""
        from autograder.argtree import holds_tensors, tensors
        from autograder.probes import materialize

        fresh = materialize(values)
        old = self.slots[slot]
        with self.torch.no_grad():
            for a, b in zip(tensors(old), tensors(fresh)):
                self.torch.Tensor.copy_(a, b)  # unbound: an attribute of the tensor's own runs nothing here
        self.slots[slot] = tuple(a if holds_tensors(a) else b for a, b in zip(old, fresh))

    def _jitter(self, slot: int, seed: int) -> None:
        """Fresh values in the slot's own tensors (same pointers), derived from its base and ``seed``."""
        from autograder.argtree import map_tensors, tensors
        from autograder.fresh import jittered_args

        args = self.slots[slot]
        if slot not in self.bases:
            self.bases[slot] = tuple(map_tensors(self.torch.Tensor.clone, a) for a in args)
        with self.torch.no_grad():
            for a, new in zip(tensors(args), tensors((self.fresh or jittered_args)(self.bases[slot], seed))):
                if self.torch.Tensor.is_floating_point(a):
                    self.torch.Tensor.copy_(a, new)

    def _prepare(self, poison: bool = True) -> None:
        if not self.on_gpu:
            return
        from measure.timer import l2_flush_buffer

        if self.flush is None:
            self.flush = l2_flush_buffer()
        with self._dropping():
            self.last = None
        if self.poison and poison:
            poison_free_cuda_memory()
        self.flush.zero_()
        self.torch.cuda.synchronize()

    def _device_profiler(self):
        """torch.profiler recording the GPU's activity alone (each kernel's device time), started and stopped
        by the worker outside the call's recorder."""
        from torch.profiler import ProfilerActivity, profile

        return profile(activities=[ProfilerActivity.CUDA])

    def _sync(self) -> None:
        if self.on_gpu:
            self.torch.cuda.synchronize()  # every stream: side-stream work is part of the call


@contextlib.contextmanager
def no_automatic_collection():
    """No automatic garbage collection while a recorder is on: one triggered by an allocation inside the
    recorder's own dispatch (where torch's modes are off) would run a finalizer of the learner's there,
    unrecorded. The call's garbage is collected explicitly under the recorder instead (``Worker.call``).
    By the threshold, which gc.enable() (a careful benchmark's switch) does not undo."""
    saved = gc.get_threshold()
    gc.set_threshold(0)
    try:
        yield
    finally:
        gc.set_threshold(*saved)


def busy_ms(events) -> float:
    """How long the device was busy (ms) in torch.profiler's ``events``: the union of its kernels' and copies'
    intervals, so kernels that overlap on several streams count once."""
    from torch.autograd import DeviceType

    spans = sorted((e.time_range.start, e.time_range.end) for e in events if e.device_type == DeviceType.CUDA)
    busy, end = 0.0, None
    for start, stop in spans:
        if end is None or start > end:
            busy, end = busy + (stop - start), stop
        elif stop > end:
            busy, end = busy + (stop - end), stop
    return busy / 1e3


def serve(worker: Worker, sock: socket.socket) -> None:
    """Answer requests until ``bye`` or until the grading process goes away."""
    while True:
        try:
            req = protocol.recv(sock)
        except protocol.ChannelClosed:
            return
        if req.get("op") == "bye":
            return
        try:
            reply = worker.handle(req)
        except Exception as exc:  # noqa: BLE001  (a grader-side failure: say so and go on)
            reply = {"type": "error", "error": f"{type(exc).__name__}: {exc}"}
        protocol.send(sock, reply)


def _display(*objs, **_options):
    """display() as a terminal shows it (IPython's fallback): each object's repr, printed."""
    for obj in objs:
        print(repr(obj))


class IPythonOnly:
    """A value only IPython makes (``r = %timeit -o f(x)``, ``out = !cmd``, ``%%capture log``), as a notebook
    is graded (``autograder.submission.STAND_IN``): the grader times nothing and runs no shell command when it
    imports a notebook, so a later line that prints or reads it must still run. Any attribute, item or call
    of it is itself; it is empty, false, and shows what it stands for."""

    def __init__(self, what: str):
        self._what = what

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self

    def __call__(self, *args, **kwargs):
        return self

    def __getitem__(self, key):
        return self

    def __iter__(self):
        return iter(())

    def __len__(self):
        return 0

    def __bool__(self):
        return False

    def __repr__(self):
        return f"<{self._what}: not run while graded>"

    def __format__(self, spec):
        return repr(self)

    def _same(self, *_args):
        return self

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _same
    __floordiv__ = __rfloordiv__ = __pow__ = __rpow__ = __neg__ = __pos__ = __abs__ = _same


def load_entry(job: dict):
    """(fn or None, Ready): the learner's entry point from its source file, or a spec's baseline."""
    from autograder import legality
    from autograder.specs import get

    spec = get(job["exercise"])
    legality.Metadata.positions = tuple(spec.metadata)
    if job["code"] == "baseline":
        return spec.performance.baseline, protocol.Ready("ok")
    if job["code"] == "naive":  # calibration: the version a learner writes before the course, timed alike
        return spec.performance.naive, protocol.Ready("ok")
    source_file = job["source_file"]
    watch = legality.KernelsRefWatch().install()
    legality.CourseTools.install()  # before the submission takes any name from measure
    from autograder import kernel_source
    from autograder.imports import ImportGuard, seen
    from autograder.runtime_audit import install
    from autograder.submission import STAND_IN

    # The text the grading process audited, handed over in the job (not read from the file again: code of an
    # exercise graded earlier, or beside this one, may have rewritten the file since, and the grade rests on
    # the audit of the text it ran)
    text = job["source"]
    # Triton compiles or interprets only the kernels the grader audited, as it read them (read here, before
    # the audit hook: reading them parses text)
    kernel_source.install({source_file: text, **(job.get("audited") or {})}, job.get("kernels"))
    # from here on, for the life of the worker: no other processes, no code the grader did not audit
    install([source_file, *(job.get("audited") or {})], tensors=spec.judged_on_tensors)
    # after the watch (which notes a kernels_ref import before the guard refuses it)
    ImportGuard(source_file, job["submission_dir"], job.get("audited")).install(position=1)
    sys.path.insert(0, job["submission_dir"])
    import types

    module = types.ModuleType("submission")
    module.__file__ = source_file
    module.display = _display  # Jupyter's kernel provides display(); a notebook that calls it must still load
    setattr(module, STAND_IN, IPythonOnly)  # what a notebook's magics hand back (autograder.submission)
    sys.modules["submission"] = module
    import builtins

    saved_builtins = dict(builtins.__dict__)
    try:
        seen(source_file, text)  # Triton reads its kernels' source as compiled here, whatever a coding line says
        code = compile(text, source_file, "exec")
        with legality.ThreadGuard.armed_for():
            exec(code, module.__dict__)
    except BaseException as exc:  # noqa: BLE001  (sys.exit at import is the learner's, not ours)
        return None, protocol.Ready("import_error", describe_error(exc, source_file), watch.imported())
    finally:
        # Builtins replaced at import (any, all, print...) would break this worker's own plumbing; the
        # static audit reports such patches, and outputs are judged elsewhere whatever is patched here.
        builtins.__dict__.clear()
        builtins.__dict__.update(saved_builtins)
    fn = module.__dict__.get(job["entry"])
    if not callable(fn):
        return None, protocol.Ready("missing", f"no function named {job['entry']!r} is defined", watch.imported())
    return fn, protocol.Ready("ok", None, watch.imported())


def main(argv) -> int:
    os.environ["AUTOGRADER_WORKER"] = "1"
    # A Python a library starts on its own (collect_env's `python -m pip`) must not put the working folder,
    # the submission's, on its path: a module beside the submission would run there, unseen.
    os.environ["PYTHONSAFEPATH"] = "1"
    sock = socket.socket(fileno=int(argv[1]))
    import course  # noqa: F401  (the device and the interpreter, before any kernel is defined)

    from autograder import frames, runtime_audit  # noqa: F401  (frames: the channel's functions, bound now)

    runtime_audit.PROTECTED_DESCRIPTORS.add(sock.fileno())

    job = protocol.recv(sock)
    fn, ready = load_entry(job)
    # The worker's own set-up (the launch counter, the autotune pin, the device's context) is done before it
    # says it is ready: it then overlaps the grading process's own preparation, not the first case.
    worker = make_worker(fn, job) if fn is not None else None
    protocol.send(sock, protocol.to_wire(ready))
    if worker is not None:
        gc.freeze()  # what the libraries, the grader and the import made is never garbage a call left
        worker.collects = True
        serve(worker, sock)
        gc.unfreeze()
    return 0


def make_worker(fn, job: dict) -> Worker:
    from autograder import legality
    from autograder.determinism import atomics
    from autograder.specs import get

    spec = get(job["exercise"])
    fresh = spec.performance.fresh_args if spec.performance else None
    if job["code"] == "baseline":
        worker = Worker(fn, None, poison=job.get("poison", True), prepare=spec.performance.baseline_args, fresh=fresh,
                        trusted=True)
    else:
        worker = Worker(fn, job.get("source_file"), poison=job.get("poison", True), harness=spec.harness, fresh=fresh,
                        folder=job.get("submission_dir"), course_tools=spec.course_tools,
                        kernel_library={**spec.rules.kernel_library, **atomics(spec)})
        # The operator recorder (checked calls; a baseline makes timed calls only) and the memory meter run
        # without importing torch._dynamo until something evaluates frames (dispatch_modes_without_dynamo)
        from measure.memory import MemoryMeter

        torch_internals.dispatch_modes_without_dynamo(worker.legality.OpRecorder, MemoryMeter)
        # its first use, paid here, beside the grading process's own preparation, not in the first case
        with worker.legality.OpRecorder(None):
            worker.torch.zeros(1).add_(1)
    if worker.on_gpu:
        worker.torch.empty(1, device=worker.device)  # the CUDA context, made now rather than at the first load
    return worker


def _end(code: int) -> None:
    """End the process at once: everything was answered, and the grading process waits for the exit. Python's
    own finalization would tear down torch, Triton and the operator recorder (a second or more of CPU per
    worker), and run what graded code left for the exit (finalizers, atexit, non-daemon threads), which has
    nothing left to do but delay it."""
    for stream in (sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()  # unbuffered already (PYTHONUNBUFFERED); a worker started by hand may not be
        except Exception:  # noqa: BLE001  (closed: nothing to flush)
            pass
    os._exit(code)


if __name__ == "__main__":
    _end(main(sys.argv))
