"""Guarantee 5: honest timing on a GPU, and the arithmetic that turns times into credit.

Timing (``time_interleaved``): warm-up calls first; then for every repetition the submission and the
baseline alternate (same clocks, same temperature), each call timed by ``timed_call``: with the device
idle, a begin event, the L2 flush (a buffer larger than L2 is overwritten), the call, then
``torch.cuda.synchronize()`` (every stream) *before* the end event, so work a call queued on a side
stream and never waited for is counted. The flush, the synchronize's latency and the end event cost
the same for every call: an empty call timed the same way, interleaved too, is subtracted from each
median. Optionally every output is poisoned (NaN) after its call, outside the timed window, so the
next call cannot return memory a previous call (or the baseline) left filled with the right answer.

Credit (``performance_credit``): speedup = baseline_ms / time_ms, a ratio measured in this run (so the
threshold holds on any GPU); full credit at speedup >= threshold, none at <= floor, linear between.
"""
from __future__ import annotations

import statistics

NOT_GRADED_REASON = "performance is graded on a GPU; not graded on this machine"


def performance_credit(speedup: float | None, threshold: float, floor: float) -> float:
    """Fraction of the performance points in [0, 1]."""
    if speedup is None or not speedup > 0:
        return 0.0
    if speedup >= threshold:
        return 1.0
    if speedup <= floor:
        return 0.0
    return (speedup - floor) / (threshold - floor)


def performance_entry(perf_spec, time_ms, baseline_ms, nbytes, flops, peaks) -> dict:
    """The JSON ``performance`` object (DESIGN.md keys) from measured numbers."""
    speedup = baseline_ms / time_ms if time_ms and baseline_ms else None
    if flops:
        value, unit = flops / (time_ms * 1e-3) / 1e12, "TFLOP/s"
        peak = (peaks or {}).get("matmul_tflops")
    else:
        value, unit = nbytes / (time_ms * 1e-3) / 1e9, "GB/s"
        peak = (peaks or {}).get("copy_gbps")
    credit = performance_credit(speedup, perf_spec.threshold, perf_spec.floor)
    return {
        "graded": True,
        "time_ms": time_ms,
        "baseline": perf_spec.baseline_name,
        "baseline_ms": baseline_ms,
        "speedup": speedup,
        "achieved": {"value": value, "unit": unit},
        "fraction_of_peak": value / peak if peak else None,
        "threshold": perf_spec.threshold,
        "passed": credit >= 1.0,
    }


def not_graded_entry(perf_spec) -> dict:
    return {"graded": False, "time_ms": None, "baseline": perf_spec.baseline_name, "baseline_ms": None,
            "speedup": None, "achieved": None, "fraction_of_peak": None, "threshold": perf_spec.threshold,
            "passed": False}


def should_time(on_gpu: bool, perf_spec) -> tuple[bool, str]:
    """Whether to time this exercise here, and why not."""
    if perf_spec is None:
        return False, "this exercise has no performance part"
    if not on_gpu:
        return False, NOT_GRADED_REASON
    return True, ""


# ----------------------------------------------------------------------------- GPU measurement

def l2_flush_buffer():
    """A buffer twice the size of L2 (at least 256 MiB): writing it evicts everything the kernel touched."""
    import torch

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    size = max(2 * getattr(props, "L2_cache_size", 50 << 20), 256 << 20)
    return torch.empty(size // 4, dtype=torch.int32, device="cuda")


MIN_MS = 1e-3  # a median at or below the empty call's is reported as this (a microsecond)


def timed_call(fn, args: tuple, flush) -> tuple[float, object]:
    """(milliseconds, output) of one call of fn(*args), L2 flushed first; flush time included (see above)."""
    import torch

    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()  # idle device: nothing queued earlier (by any stream) overlaps this call
    begin.record()
    flush.zero_()  # fn's launch overhead on the CPU hides behind this, as it would behind earlier work
    out = fn(*args)
    torch.cuda.synchronize()  # every stream: side-stream work the call did not wait for is its cost too
    end.record()
    end.synchronize()
    return begin.elapsed_time(end), out


def poison_output(out) -> None:
    """Overwrite a call's floating-point output(s) with NaN (in place), so the memory holds no answer."""
    import torch

    if isinstance(out, torch.Tensor):
        if out.is_floating_point() or out.is_complex():
            with torch.no_grad():
                out.fill_(float("nan"))
    elif isinstance(out, (tuple, list)):
        for o in out:
            poison_output(o)


def _empty_call(*_args):
    return None


def time_interleaved(fns: dict, args: tuple, reps: int = 50, warmup: int = 5, max_seconds: float = 20.0,
                     poison_outputs: bool = False) -> dict:
    """Median ms per call of each fn(*args), repetitions interleaved (see the module docstring)."""
    import time

    flush = l2_flush_buffer()
    calls = dict(fns)
    calls[_EMPTY] = _empty_call  # the protocol's own cost, subtracted below
    for fn in calls.values():
        for _ in range(warmup):
            _, out = timed_call(fn, args, flush)
            if poison_outputs:
                poison_output(out)
            del out
    times = {name: [] for name in calls}
    start = time.perf_counter()
    for rep in range(reps):
        for name, fn in calls.items():
            ms, out = timed_call(fn, args, flush)
            if poison_outputs:
                poison_output(out)  # outside the timed window
            del out
            times[name].append(ms)
        if rep >= 10 and time.perf_counter() - start > max_seconds:
            break
    del flush
    empty = statistics.median(times.pop(_EMPTY))
    return {name: max(statistics.median(t) - empty, MIN_MS) for name, t in times.items()}


_EMPTY = "__empty_call__"


# ----------------------------------------------------------------------------- this GPU's peaks

def cache_path():
    from pathlib import Path

    return Path.home() / ".cache" / "gpu-kernels-course" / "peaks.json"


def machine_key() -> str:
    import torch
    import triton

    name = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    return f"{name}|torch {torch.__version__}|triton {triton.__version__}|cuda {torch.version.cuda}"


NOMINAL_H100 = {"copy_gbps": 3019.0, "matmul_tflops": 698.0,
                "source": "nominal: measured on an H100 80GB HBM3 (DESIGN.md), not this machine"}


def measure_peaks() -> dict:
    """Device-to-device copy bandwidth (read + write) and bf16 matmul rate of this GPU, timed like submissions."""
    from course.ceilings import measure_ceilings

    copy_gbps, matmul_tflops = measure_ceilings(lambda fn: time_interleaved({"fn": lambda: fn()}, (), reps=20)["fn"])
    return {"copy_gbps": copy_gbps, "matmul_tflops": matmul_tflops, "source": "measured on this machine"}


def get_peaks(measure: bool = True) -> dict:
    """This GPU's peaks, measured once per machine and versions and cached as JSON."""
    import json

    from autograder.report import write_json_atomic

    path = cache_path()
    key = machine_key()
    try:
        cached = json.loads(path.read_text())
    except (OSError, ValueError):
        cached = {}
    if key in cached:
        return cached[key]
    import torch

    if not (measure and torch.cuda.is_available()):
        return dict(NOMINAL_H100)
    peaks = measure_peaks()
    cached[key] = peaks
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, cached)
    return peaks
