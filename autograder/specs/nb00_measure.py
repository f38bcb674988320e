"""00_measure: the time floor of a kernel, the bytes a softmax must move, and an honest benchmark()."""
from __future__ import annotations

import math
import numbers
import random

import torch

from autograder.specs.base import VALUE, Case, Exercise, Rules

NOTEBOOK = "00_measure"


def _log_uniform(rng, lo, hi):
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


def _time_floor_cases(quick):
    rng = random.Random()
    cases = []
    for i in range(3 if quick else 8):
        # Half the cases memory-bound, half compute-bound: both branches of the max are exercised.
        peak_flops, peak_bw = _log_uniform(rng, 1e12, 1e15), _log_uniform(rng, 1e11, 5e12)
        nbytes = _log_uniform(rng, 1e3, 1e11)
        ridge = peak_flops / peak_bw
        flops = nbytes * ridge * (rng.uniform(0.05, 0.5) if i % 2 else rng.uniform(2, 20))
        args = (flops, nbytes, peak_flops, peak_bw)
        cases.append(Case(f"flops={flops:.3g} bytes={nbytes:.3g}", lambda g, a=args: a,
                          hint="seconds = max(flops / peak_flops, bytes / peak_bandwidth)", family="value",
                          public=True))
    # The exercise says: reject nonsense (negative work, non-positive peaks) with a ValueError.
    for name, args in (("negative flops", (-1e9, 1e6, 1e12, 1e11)), ("zero peak bandwidth", (1e9, 1e6, 1e12, 0.0))):
        cases.append(Case(f"{name}: ValueError", lambda g, a=args: a, raises=ValueError, family="invalid",
                          hint="the exercise asks for a ValueError on negative work or a peak that is not positive",
                          public=True))
    return cases


def _softmax_bytes_cases(quick):
    rng = random.Random()
    dtypes = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
    cases = []
    for i in range(3 if quick else 6):
        shape = tuple(rng.randint(1, 3000) for _ in range(rng.randint(1, 3)))
        dtype = dtypes[i % len(dtypes)]
        cases.append(Case(f"shape={shape} {dtype}", lambda g, a=(shape, dtype): a,
                          hint="read every element once and write every element once: 2 * numel * itemsize",
                          family="value", public=True))
    return cases


def judge_close(rel: float, abs_tol: float = 0.0):
    def judge(out, ref):
        if isinstance(out, torch.Tensor) and out.numel() == 1:
            out = out.item()
        if isinstance(out, bool) or not isinstance(out, numbers.Real) or not math.isfinite(out):
            return False, None, f"expected a finite number, got {out!r}"
        err = abs(out - ref)
        ok = err <= abs_tol + rel * abs(ref)
        return ok, err, "" if ok else f"got {out:.6g}, expected {ref:.6g}"
    judge.tolerance = (f"{rel:.0%}" if rel >= 0.01 else f"{rel:g} relative") + (f" + {abs_tol:g}" if abs_tol else "")
    return judge


def judge_int(out, ref):
    if isinstance(out, torch.Tensor) and out.numel() == 1 and not out.is_floating_point():
        out = out.item()
    if isinstance(out, bool) or not isinstance(out, numbers.Integral):
        return False, None, f"expected an int, got {type(out).__name__} {out!r}"
    return int(out) == ref, abs(int(out) - ref), "" if int(out) == ref else f"got {out}, expected {ref}"


judge_int.tolerance = "exact"


def _benchmark_cases(quick):
    from autograder.probes import gpu_ms_per_cycle, sleep_probe
    from course import ON_GPU

    rng = random.Random()
    per_cycle = gpu_ms_per_cycle() if ON_GPU else None
    cases = []
    for i in range(1 if quick else 2):
        base = rng.uniform(3.0, 6.0)
        probe = sleep_probe(base_ms=base, first_ms=base * 40 + 150, outlier_ms=base * 30,
                            outlier_every=rng.randint(7, 11), gpu_ms_per_cycle=per_cycle)
        cases.append(Case(f"fn of {base:.2f} ms (slow first call, rare outliers)", lambda g, p=probe: (p,),
                          hint="warm up first, synchronize the device around the timed region, and report the "
                               "median of many calls (a mean is dragged by rare outliers)", expected=base,
                          family="value", public=True))
    return cases


EXERCISES = [
    Exercise(id="time_floor", notebook=NOTEBOOK, entry="time_floor", kind=VALUE,
             signature="time_floor(flops, nbytes, peak_flops, peak_bandwidth) -> seconds",
             correctness_points=1, cases=_time_floor_cases, unit="s",
             reference=lambda f, b, pf, pb: max(f / pf, b / pb), judge=judge_close(1e-9)),
    Exercise(id="softmax_bytes", notebook=NOTEBOOK, entry="softmax_bytes", kind=VALUE,
             signature="softmax_bytes(shape, dtype) -> int", correctness_points=1, cases=_softmax_bytes_cases,
             unit="bytes",
             reference=lambda shape, dtype: 2 * math.prod(shape) * torch.empty((), dtype=dtype).element_size(),
             judge=judge_int),
    # The probe's cost is known; 25% (+1 ms for the OS's sleep granularity) separates an honest median
    # from a mean over outliers (+>200%), an unwarmed single call (x40) or an unsynchronized timer (~0).
    Exercise(id="benchmark", notebook=NOTEBOOK, entry="benchmark", kind=VALUE, signature="benchmark(fn) -> ms",
             correctness_points=2, cases=_benchmark_cases, reference=None, unit="ms",
             judge=judge_close(0.25, 1.0), timeout_s=180.0,
             # the cache flush the notebook hands out; the timing is the learner's
             rules=Rules(course_tools=frozenset({"measure.timer.l2_flush_buffer", "measure.timer.cpu_flush_buffer",
                                                 "measure.timer.cpu_cache_bytes"}))),
]
