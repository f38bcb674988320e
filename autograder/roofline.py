"""A roofline of the learner's kernels against this GPU's ceilings, in one call.

    from autograder.roofline import roofline
    roofline({"my softmax": (softmax, (x,), 0, 2 * x.numel() * x.element_size()),   # timed here
              "my matmul": (flops, nbytes, seconds)})                               # already measured

Ceilings: the copy bandwidth and bf16 matmul rate measured once on this GPU (timing.get_peaks, cached).
Without a GPU it draws a cached measurement if there is one, else the nominal H100 numbers of
DESIGN.md, and says so in the title.
"""
from __future__ import annotations

import statistics
import time


def _time_seconds(fn, args) -> float:
    import course

    if course.ON_GPU:
        from autograder.timing import time_interleaved

        return time_interleaved({"k": fn}, tuple(args), reps=20)["k"] * 1e-3
    fn(*args)
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _ceilings():
    import course

    from autograder import timing

    if course.ON_GPU:
        peaks = timing.get_peaks()
        return peaks, f"measured ceilings of {timing.machine_key().split('|')[0]}"
    peaks = timing.get_peaks(measure=False)
    if "nominal" in peaks.get("source", ""):
        return peaks, "no GPU here: nominal H100 ceilings (DESIGN.md), not this machine's"
    return peaks, "no GPU here: ceilings cached from an earlier GPU measurement"


def roofline(kernels: dict, peaks: dict | None = None, ax=None):
    """Plot each kernel at (FLOP/byte, achieved FLOP/s) under the bandwidth and compute ceilings."""
    import matplotlib.pyplot as plt
    import numpy as np

    label = "given ceilings"
    if peaks is None:
        peaks, label = _ceilings()
    bw = peaks["copy_gbps"] * 1e9
    compute = peaks["matmul_tflops"] * 1e12
    if ax is None:
        fig, ax = plt.subplots(figsize=(7, 4.5))
    else:
        fig = ax.figure
    points = []
    for name, spec in kernels.items():
        if callable(spec[0]):
            fn, args, flops, nbytes = spec
            seconds = _time_seconds(fn, args)
        else:
            flops, nbytes, seconds = spec
        intensity = max(flops, 1.0) / nbytes  # memory-bound kernels with ~0 FLOPs sit at the far left
        points.append((name, intensity, max(flops, 1.0) / seconds, nbytes / seconds))
    lo = min([p[1] for p in points] + [compute / bw]) / 10
    hi = max([p[1] for p in points] + [compute / bw]) * 10
    x = np.logspace(np.log10(lo), np.log10(hi), 200)
    ax.loglog(x, np.minimum(x * bw, compute), color="black", lw=2, label="roofline")
    ax.axvline(compute / bw, color="gray", ls=":", lw=1)
    ax.text(compute / bw, compute * 1.15, f" ridge {compute / bw:.0f} FLOP/B", fontsize=8, color="gray")
    ax.text(lo * 1.2, lo * bw * 1.4, f"{peaks['copy_gbps']:.0f} GB/s", fontsize=8, rotation=20)
    ax.text(hi / 8, compute * 1.15, f"{peaks['matmul_tflops']:.0f} TFLOP/s", fontsize=8)
    for name, intensity, rate, gbps in points:
        ax.plot(intensity, rate, "o", ms=8, label=f"{name}: {gbps / 1e9:.0f} GB/s, {rate / 1e12:.2f} TFLOP/s")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("FLOP/s")
    ax.set_title(f"Roofline ({label})", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(True, which="both", alpha=0.3)
    return fig
