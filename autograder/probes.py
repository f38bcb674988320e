"""Functions of known cost, handed to the learner's measuring tools (00_measure, 02_profiling).

A probe travels to the worker as a plain dict ({"__probe__": kind, ...}: loadable with
weights_only=True) and becomes a callable on each side with ``materialize``. The grading process
measures the same probe itself (``count_launches`` / ``peak_memory``) to know the right answer.
"""
from __future__ import annotations

import threading
import time

import torch

PROBE_KEY = "__probe__"


def sleep_probe(base_ms: float, first_ms: float, outlier_ms: float, outlier_every: int,
                gpu_ms_per_cycle: float | None = None) -> dict:
    """fn() costs base_ms; its first call costs first_ms (warm-up); every outlier_every-th call outlier_ms.

    On a GPU the cost is queued device work (torch.cuda._sleep): fn() returns at once, and only a timer
    that synchronizes sees it.
    """
    return {PROBE_KEY: "sleep", "base_ms": base_ms, "first_ms": first_ms, "outlier_ms": outlier_ms,
            "outlier_every": outlier_every, "gpu_ms_per_cycle": gpu_ms_per_cycle}


def ops_probe(ops: list[str]) -> dict:
    """fn(x) applies the listed unary elementwise ops in turn: one kernel (one leaf aten op) each."""
    return {PROBE_KEY: "ops", "ops": list(ops)}


def alloc_probe(live: int) -> dict:
    """fn(x) keeps ``live`` temporaries the size of x alive at once, then returns their sum."""
    return {PROBE_KEY: "alloc", "live": int(live)}


UNARY = {"exp": torch.exp, "neg": torch.neg, "sin": torch.sin, "abs": torch.abs, "cos": torch.cos,
         "sigmoid": torch.sigmoid}


def materialize(obj):
    """Turn probe dicts (anywhere in nested args) into callables."""
    if isinstance(obj, dict) and PROBE_KEY in obj:
        return _build(obj)
    if isinstance(obj, (list, tuple)):
        return type(obj)(materialize(o) for o in obj)
    return obj


def _build(p: dict):
    kind = p[PROBE_KEY]
    if kind == "sleep":
        calls = [0]
        per_cycle = p["gpu_ms_per_cycle"]

        def fn():
            calls[0] += 1
            if calls[0] == 1:
                ms = p["first_ms"]
            elif calls[0] % p["outlier_every"] == 0:
                ms = p["outlier_ms"]
            else:
                ms = p["base_ms"]
            if per_cycle:
                torch.cuda._sleep(int(ms / per_cycle))
            else:
                time.sleep(ms / 1000.0)
        return fn
    if kind == "ops":
        chain = [UNARY[name] for name in p["ops"]]

        def fn(x):
            for op in chain:
                x = op(x)
            return x
        return fn
    if kind == "alloc":
        live = p["live"]

        def fn(x):
            temps = [x * float(i + 2) for i in range(live)]
            total = temps[0]
            for t in temps[1:]:
                total = total + t
            return total
        return fn
    raise ValueError(f"unknown probe kind {kind!r}")


def gpu_ms_per_cycle() -> float:
    """Milliseconds per torch.cuda._sleep cycle on this GPU, measured with events (once per process)."""
    global _MS_PER_CYCLE
    if _MS_PER_CYCLE is None:
        cycles = 10_000_000
        torch.cuda._sleep(cycles)
        torch.cuda.synchronize()
        times = []
        for _ in range(5):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            torch.cuda._sleep(cycles)
            b.record()
            torch.cuda.synchronize()
            times.append(a.elapsed_time(b))
        _MS_PER_CYCLE = sorted(times)[2] / cycles
    return _MS_PER_CYCLE


_MS_PER_CYCLE = None


# The grading process grades exercises side by side in threads, and 02's references run under
# torch.profiler: two profiles at once in one process crash it (Kineto: "External init callback must run in
# same thread as registerClient", then a segmentation fault). One profile at a time; each one records only
# its own thread's operators, so the wait changes no answer.
PROFILER_LOCK = threading.Lock()


def count_launches(fn, *args) -> int:
    """Kernels one call of fn(*args) launches: CUDA kernels on a GPU, leaf aten ops on the CPU."""
    with PROFILER_LOCK:
        return _count_launches(fn, *args)


def _count_launches(fn, *args) -> int:
    from torch.profiler import ProfilerActivity, profile

    fn(*args)  # warm-up: first calls may initialise lazily
    on_gpu = any(isinstance(a, torch.Tensor) and a.is_cuda for a in args)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    with profile(activities=acts) as prof:
        fn(*args)
        if on_gpu:
            torch.cuda.synchronize()
    events = prof.events()
    if on_gpu:
        return sum(1 for e in events if e.device_type == torch.autograd.DeviceType.CUDA)
    # Leaves that only allocate or re-view memory run no kernel (aten::abs = aten::empty + the abs kernel):
    # the course's one list of them, which notebook 02 uses too.
    from measure.launches import NO_KERNEL_OPS

    return sum(1 for e in events
               if e.name.startswith("aten::") and not e.cpu_children and e.name not in NO_KERNEL_OPS)


def peak_memory(fn, *args) -> int:
    """Peak extra bytes allocated during one call of fn(*args) (measure.memory: the course's one method)."""
    from measure.memory import peak_bytes

    with PROFILER_LOCK:
        return peak_bytes(fn, *args)
