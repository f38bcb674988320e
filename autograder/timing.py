"""Honest timing on a GPU (docs/GUARANTEES.md, 5), and the arithmetic that turns times into credit.

Timing follows the course's one protocol (``measure.timer``: warm-up, L2 cold, every stream waited for,
interleaved repetitions, medians less an empty call's).

Credit (``performance_credit``): speedup = baseline_ms / time_ms, a ratio measured in this run (so the
threshold holds on any GPU); full credit at speedup >= threshold, none at <= floor, linear between.
"""
from __future__ import annotations

NOT_GRADED_REASON = "performance is graded on a GPU; not graded on this machine"

# The timing protocol thresholds are calibrated for: a speedup is only comparable with one measured the
# same way. "cross-process": each timed request made by the grading process over a socket (its clock),
# CALLS_PER_ROUND_TRIP calls back to back per request, both sides sandboxed alike (autograder/grading.py).
# Before it, "in-process-events": CUDA events around one call in the learner's process, the call's launch
# hidden behind the L2 flush. Calibration records in results/ name theirs.
PROTOCOL = "cross-process"


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
    """The JSON ``performance`` object (docs/CONTRACTS.md keys) from measured numbers."""
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


def memory_entry(mem_spec, held_worst, peak_worst, credit: float) -> dict:
    """The JSON ``performance`` object of a memory exercise (specs.base.Memory): docs/CONTRACTS.md's keys, with
    no time; ``achieved`` is the bytes held between forward and backward, ``memory`` the details (the
    worst case for each measure: held against its limit, peak against the baseline's)."""
    _, held, held_limit, base_held, held_case = held_worst
    _, peak, peak_allowed, base_peak, peak_case = peak_worst
    return {"graded": True, "time_ms": None, "baseline": mem_spec.baseline_name, "baseline_ms": None,
            "speedup": None, "achieved": {"value": held, "unit": "bytes held"}, "fraction_of_peak": None,
            "threshold": mem_spec.peak_ratio, "passed": credit >= 1.0,
            "memory": {"held_bytes": held, "held_limit_bytes": held_limit, "baseline_held_bytes": base_held,
                       "held_case": held_case, "peak_bytes": peak, "peak_allowed_bytes": int(peak_allowed),
                       "baseline_peak_bytes": base_peak, "peak_case": peak_case}}


def not_graded_entry_memory(mem_spec) -> dict:
    return {"graded": False, "time_ms": None, "baseline": mem_spec.baseline_name, "baseline_ms": None,
            "speedup": None, "achieved": None, "fraction_of_peak": None, "threshold": mem_spec.peak_ratio,
            "passed": False}


def should_time(on_gpu: bool, perf_spec) -> tuple[bool, str]:
    """Whether to time this exercise here, and why not."""
    if perf_spec is None:
        return False, "this exercise has no performance part"
    if not on_gpu:
        return False, NOT_GRADED_REASON
    return True, ""


def get_peaks() -> dict | None:
    """This GPU's measured roofs (measure.ceilings, cached per machine); None without a GPU."""
    import torch

    if not torch.cuda.is_available():
        return None
    from measure.ceilings import peaks

    return peaks()
