"""A roofline of the learner's kernels against this machine's measured roofs, in one call.

    from measure.roofline import roofline
    roofline({"my softmax": (softmax, (x,), 0, 2 * x.numel() * x.element_size()),   # timed here
              "my matmul": (flops, nbytes, seconds)})                               # already measured

Roofs: the copy bandwidth and matmul rate measured once on this machine (``measure.ceilings.peaks``,
cached): on a GPU its DRAM bandwidth and bf16 tensor-core rate, on a CPU its DRAM bandwidth (a copy far
larger than its caches) and fp32 rate. The title says which machine they were measured on.

Points given as functions are timed cold, like the roofs: the GPU's L2 is flushed before every call, and
on the CPU its caches are (``measure.timer``, ``cold=True``). Timed hot, a small input read from cache
moves faster than DRAM allows and plots above the bandwidth roof, which is a statement about the cache,
not about the kernel. Labels give GB/s and FLOP/s with three significant digits (an interpreted kernel's
0.004 GB/s is not 0).
"""
from __future__ import annotations


def _ceilings():
    from measure.ceilings import machine_name, peaks

    return peaks(), f"measured roofs of {machine_name()}"


def _rate(value: float, unit: str) -> str:
    """'1.23 TFLOP/s', '45.6 GFLOP/s', '0.00412 GB/s': three significant digits, never rounded to 0."""
    if value >= 1e12:
        return f"{value / 1e12:.3g} T{unit}"
    return f"{value / 1e9:.3g} G{unit}"


def roofline(kernels: dict, peaks: dict | None = None, ax=None, title: str | None = None, reps: int | None = None):
    """Plot each kernel at (FLOP/byte, achieved FLOP/s) under the bandwidth and compute ceilings.

    ``kernels``: name -> (fn, args, flops, nbytes), timed here cold (``reps`` repetitions: 20 on a GPU,
    5 on the CPU), or name -> (flops, nbytes, seconds) already measured."""
    import matplotlib.pyplot as plt
    import numpy as np
    import torch
    from matplotlib.ticker import EngFormatter

    from measure.timer import median_ms

    label = "given ceilings"
    if peaks is None:
        peaks, label = _ceilings()
    if reps is None:
        reps = 20 if torch.cuda.is_available() else 5
    bw = peaks["copy_gbps"] * 1e9
    compute = peaks["matmul_tflops"] * 1e12
    if ax is None:
        fig, ax = plt.subplots(figsize=(10, 4.5))
    else:
        fig = ax.figure
    points = []
    for name, spec in kernels.items():
        if callable(spec[0]):
            fn, args, flops, nbytes = spec
            seconds = median_ms(fn, *args, reps=reps, warmup=2, cold=True) * 1e-3
        else:
            flops, nbytes, seconds = spec
        intensity = max(flops, 1.0) / nbytes  # memory-bound kernels with ~0 FLOPs sit at the far left
        points.append((name, intensity, max(flops, 1.0) / seconds, nbytes / seconds))
    ridge = compute / bw
    lo = min([p[1] for p in points] + [ridge]) / 10
    hi = max([p[1] for p in points] + [ridge]) * 10
    x = np.logspace(np.log10(lo), np.log10(hi), 200)
    ax.loglog(x, np.minimum(x * bw, compute), color="black", lw=2, label="roofline")
    for name, intensity, rate, gbps in points:
        ax.plot(intensity, rate, "o", ms=8, label=f"{name}: {_rate(gbps, 'B/s')}, {_rate(rate, 'FLOP/s')}")
    ax.set_ylim(min([p[2] for p in points] + [lo * bw]) / 3, compute * 3)
    bottom = ax.get_ylim()[0]
    # Roof labels where no point is: the ridge's along its line, the roofs' just above them.
    ax.axvline(ridge, color="gray", ls=":", lw=1)
    ax.text(ridge * 1.1, bottom * 1.3, f"ridge {ridge:.3g} FLOP/B", fontsize=8, color="gray", rotation=90, va="bottom")
    ax.text(lo * 1.2, lo * 1.2 * bw * 4, _rate(bw, "B/s"), fontsize=8)
    ax.text(ridge * 1.5, compute * 1.25, _rate(compute, "FLOP/s"), fontsize=8)
    ax.yaxis.set_major_formatter(EngFormatter(unit="FLOP/s"))
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_title(title or f"Roofline ({label})", fontsize=10)
    # The legend sits outside the axes: names never overlap the points or each other.
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    return fig
