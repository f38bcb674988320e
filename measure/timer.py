"""The course's one timer protocol, for the grader, the benchmark suite and the notebooks.

The protocol (``interleaved_medians``): every candidate is warmed up first (compilation, autotuning,
lazy initialisation stay out of the numbers); then in each repetition every candidate runs once, in turn,
so all of them see the same clocks and temperature; each run is timed with the L2 cache cold and with
every stream of the device waited for, so work a call queued and did not wait for is its cost too; the
result is each candidate's median, less the median of an empty call timed the same way (the cost of the
protocol itself: the flush, the synchronization, the clock).

How one run is timed is the *clock*, and it is separate from the protocol:
- ``event_clock``: CUDA events in this process around flush + call + synchronize. For code this process
  trusts: the benchmark suite, baselines, the notebooks' own measurements.
- the grader's clock (``autograder.timing``) times a call in another process, from outside, through the
  same protocol, so that a learner's code cannot touch the clock that times it.
- ``wall_clock``: ``time.perf_counter`` around the call, on the CPU (no flush: the interpreter's time is
  all Python); ``cold_wall_clock(flush)``: the same after writing a buffer twice the size of the CPU's
  last-level cache (``cold=True``), so that data a previous call left in the cache is read from DRAM
  again, as a GPU benchmark flushes L2. A roofline's points must be measured cold: a small input that
  stays in cache moves faster than DRAM's bandwidth, above the roof.

``median_ms(fn, *args)`` is the one-line use: the protocol with one candidate on this machine's clock.
The notebooks time with ``bench(fn, *args)`` (one function) and ``bench_interleaved({name: fn}, *args)``
(several compared in one cell): the same protocol, with repetitions sized for the machine (few on the CPU).

What the protocol charges besides the kernel: the CPU's preparation of a call that outlasts the flush.
``cpu_us_per_call`` measures that preparation; ``gpu_event_clock`` times the call's GPU work alone (its
launch hidden behind a busy GPU), and ``graph_replay`` makes a call without Python (a CUDA graph recorded
once), to time the same kernels with and without their launch.
"""
from __future__ import annotations

import statistics
import time
from typing import Callable

MIN_MS = 1e-3  # a median at or below the empty call's is reported as this (a microsecond)
EMPTY = "__empty_call__"


def l2_flush_buffer():
    """A buffer twice the size of L2 (at least 256 MiB): writing it evicts everything the kernel touched."""
    import torch

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    size = max(2 * getattr(props, "L2_cache_size", 50 << 20), 256 << 20)
    return torch.empty(size // 4, dtype=torch.int32, device="cuda")


def event_clock(flush) -> Callable[[Callable[[], object]], tuple[float, object]]:
    """Time ``run()`` with CUDA events: an idle device, a begin event, the L2 flush, the call, then
    ``torch.cuda.synchronize()`` (every stream) before the end event. Returns (ms, output)."""
    import torch

    def timed(run):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()  # idle device: nothing queued earlier (by any stream) overlaps this call
        begin.record()
        flush.zero_()  # the call's launch overhead on the CPU hides behind this, as behind earlier work
        out = run()
        torch.cuda.synchronize()  # every stream: side-stream work the call did not wait for counts
        end.record()
        end.synchronize()
        return begin.elapsed_time(end), out

    return timed


# GPU cycles of busy-waiting that ``gpu_event_clock`` queues ahead of each call: ~1 ms at Hopper's ~2 GHz,
# longer than any launcher measured here takes the CPU (at most ~200 us).
LAUNCH_HIDING_CYCLES = 2_000_000


def gpu_event_clock(flush) -> Callable[[Callable[[], object]], tuple[float, object]]:
    """The GPU's time alone: like ``event_clock``, but a kernel that keeps the device busy (~1 ms) is queued
    before the flush, so the CPU has launched the whole call before the begin event runs, and the events
    bracket only the call's GPU work on this stream, L2 cold. Not the protocol (which charges a launch that
    outlasts the flush, and waits for every stream): it tells the kernel's speed from its launch's cost."""
    import torch

    def timed(run):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        torch.cuda._sleep(LAUNCH_HIDING_CYCLES)
        flush.zero_()
        begin.record()
        out = run()
        end.record()
        end.synchronize()
        return begin.elapsed_time(end), out

    return timed


def wall_clock(run) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = run()
    return (time.perf_counter() - t0) * 1e3, out


def cpu_cache_bytes() -> int:
    """The CPU's largest cache in bytes (Linux sysfs, macOS sysctl); 64 MiB where it cannot be read."""
    import glob
    import subprocess

    sizes = []
    for path in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*/size"):
        try:
            text = open(path).read().strip().upper()
            sizes.append(int(text[:-1]) * {"K": 1 << 10, "M": 1 << 20}[text[-1]] if text[-1] in "KM" else int(text))
        except (OSError, ValueError):
            pass
    if not sizes:
        try:
            out = subprocess.run(["sysctl", "-n", "hw.l3cachesize", "hw.l2cachesize"], capture_output=True,
                                 text=True, timeout=5).stdout.split()
            sizes = [int(v) for v in out if v.isdigit()]
        except (OSError, subprocess.SubprocessError):
            pass
    return max(sizes) if sizes and max(sizes) > 0 else 64 << 20


def cpu_flush_buffer():
    """A CPU buffer twice the size of the largest cache (at least 32 MiB): writing it evicts a call's data."""
    import torch

    return torch.empty(max(2 * cpu_cache_bytes(), 32 << 20) // 4, dtype=torch.int32)


def cold_wall_clock(flush) -> Callable[[Callable[[], object]], tuple[float, object]]:
    """The wall clock after evicting the CPU's caches (writing ``flush``, outside the timed window)."""
    def timed(run):
        flush.zero_()
        return wall_clock(run)

    return timed


def poison_output(out) -> None:
    """Overwrite a call's floating-point output(s) with NaN in place, so that memory holds no answer."""
    import torch

    if isinstance(out, torch.Tensor):
        if out.is_floating_point() or out.is_complex():
            with torch.no_grad():
                out.fill_(float("nan"))
    elif isinstance(out, (tuple, list)):
        for o in out:
            poison_output(o)


def interleaved_medians(runs: dict[str, Callable[[], float]], reps: int = 50, warmup: int = 5,
                        max_seconds: float = 20.0, min_reps: int = 10) -> dict[str, float]:
    """The protocol. ``runs[name]()`` performs one timed run and returns its milliseconds; it must include
    ``EMPTY``, an empty call timed the same way, whose median is subtracted from every other median."""
    if EMPTY not in runs:
        raise ValueError("interleaved_medians needs an EMPTY run: the protocol's own cost is subtracted")
    for run in runs.values():
        for _ in range(warmup):
            run()
    times = {name: [] for name in runs}
    start = time.perf_counter()
    for rep in range(reps):
        for name, run in runs.items():
            times[name].append(run())
        if rep + 1 >= min_reps and time.perf_counter() - start > max_seconds:
            break
    empty = statistics.median(times.pop(EMPTY))
    return {name: max(statistics.median(t) - empty, MIN_MS) for name, t in times.items()}


def _empty(*_args):
    return None


def time_interleaved(fns: dict, args: tuple = (), reps: int = 50, warmup: int = 5, max_seconds: float = 20.0,
                     poison_outputs: bool = False, clock=None, cold: bool = False) -> dict[str, float]:
    """Median ms per call of each ``fn(*args)`` in this process, by the protocol above.

    ``clock`` defaults to CUDA events on a GPU (L2 flushed) and the wall clock on the CPU (caches flushed
    too with ``cold``). ``poison_outputs``: every output is overwritten with NaN after its run (outside the
    timed window), so no call can hand back memory a previous call left holding the right answer."""
    import torch

    flush = None
    if clock is None:
        if torch.cuda.is_available():
            flush = l2_flush_buffer()
            clock = event_clock(flush)
        elif cold:
            flush = cpu_flush_buffer()
            clock = cold_wall_clock(flush)
        else:
            clock = wall_clock

    def timed_run(fn):
        def run():
            ms, out = clock(lambda: fn(*args))
            if poison_outputs:
                poison_output(out)
            return ms
        return run

    runs = {name: timed_run(fn) for name, fn in fns.items()}
    runs[EMPTY] = timed_run(_empty)
    try:
        return interleaved_medians(runs, reps=reps, warmup=warmup, max_seconds=max_seconds)
    finally:
        del flush


def median_ms(fn: Callable, *args, reps: int = 50, warmup: int = 5, max_seconds: float = 10.0,
              cold: bool = False) -> float:
    """Median milliseconds of ``fn(*args)`` on this machine, by the course's protocol (``cold``: the CPU's
    caches flushed before every call too; a GPU's L2 always is)."""
    return time_interleaved({"fn": fn}, args, reps=reps, warmup=warmup, max_seconds=max_seconds, cold=cold)["fn"]


def gpu_median_ms(fn: Callable, *args, reps: int = 50, warmup: int = 5, max_seconds: float = 10.0) -> float:
    """Median milliseconds of ``fn(*args)``'s GPU work alone, its launch hidden (``gpu_event_clock``)."""
    return time_interleaved({"fn": fn}, args, reps=reps, warmup=warmup, max_seconds=max_seconds,
                            clock=gpu_event_clock(l2_flush_buffer()))["fn"]


def bench(fn: Callable, *args, reps: int | None = None, warmup: int | None = None, cold: bool = False) -> float:
    """Median ms of ``fn(*args)`` for a notebook cell: ``median_ms`` with repetitions sized for the machine
    (``course.pick``: 3 after 1 warm-up on the CPU, where the Triton interpreter is slow; 50 after 5 on a
    GPU). To compare several functions, time them together with ``bench_interleaved``."""
    return bench_interleaved({"fn": fn}, *args, reps=reps, warmup=warmup, cold=cold)["fn"]


def bench_interleaved(fns: dict, *args, reps: int | None = None, warmup: int | None = None,
                      cold: bool = False) -> dict[str, float]:
    """Median ms of each ``fns[name](*args)`` for a notebook cell, the candidates taking turns in every
    repetition (``time_interleaved``): all of them see the same clocks, temperature and neighbours, so
    their ratio means more than that of two ``bench`` calls made one after the other."""
    from course import pick

    return time_interleaved(fns, args, reps=pick(small=3, large=50) if reps is None else reps,
                            warmup=pick(small=1, large=5) if warmup is None else warmup,
                            max_seconds=pick(small=5.0, large=10.0), cold=cold)


def cpu_us_per_call(fn: Callable, *args, calls: int = 50) -> float:
    """CPU microseconds per ``fn(*args)``, the calls queued on the GPU without waiting for each other."""
    import torch

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn(*args)
    per_call = (time.perf_counter() - t0) / calls * 1e6
    torch.cuda.synchronize()
    return per_call


def graph_replay(fn: Callable, *args) -> Callable:
    """``fn(*args)`` recorded once into a CUDA graph; the returned function (any arguments, ignored)
    replays it: the same kernels, launched without Python, the autotuner or Triton's launcher."""
    import torch

    graph, side = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn(*args)  # warm-up (autotuning, compilation) outside the graph, as capture requires
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(graph):
        fn(*args)
    return lambda *_: graph.replay()
