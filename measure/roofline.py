"""A roofline of the learner's kernels against this machine's measured roofs, in one call.

    from measure.roofline import roofline
    roofline({"my softmax": (softmax, (x,), 0, 2 * x.numel() * x.element_size()),   # timed here
              "my matmul": (flops, nbytes, seconds)})                               # already measured

Roofs: the copy bandwidth and matmul rate measured once on this machine (``measure.ceilings.peaks``,
cached): on a GPU its DRAM bandwidth and bf16 tensor-core rate, on a CPU its DRAM bandwidth (a copy far
larger than its caches) and fp32 rate. The title says which machine they were measured on.
"""
from __future__ import annotations


def _ceilings():
    from measure.ceilings import machine_name, peaks

    return peaks(), f"measured roofs of {machine_name()}"


def roofline(kernels: dict, peaks: dict | None = None, ax=None):
    """Plot each kernel at (FLOP/byte, achieved FLOP/s) under the bandwidth and compute ceilings."""
    import matplotlib.pyplot as plt
    import numpy as np

    from measure.timer import median_ms

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
            seconds = median_ms(fn, *args, reps=20) * 1e-3
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
