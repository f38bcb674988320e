"""int8_weight_linear at decode sizes: how much of its timed cost is the launch, as a learner launches it.

    python -m probes.int8_launch [--shapes 16x4096x16384,16x8192x28672,16x8192x57344] [--json FILE]

The grader times a call by the course's protocol (measure.timer: L2 flush, call, synchronize; the CPU
prepares the call while the GPU writes the flush buffer). At M = 16 the int8 kernel moves its weight in
tens of microseconds, while a launch through ``triton.autotune`` and the JIT costs the CPU about as long
(kernels_ref/quant.py): a kernel written as notebook 08 asks can then be charged for the host's Python.
For each shape M x K x N (bf16 x, int8 weight, bf16 bias) this times, in one interleaved run against
cuBLAS on the dequantized bf16 weight (the exercise's baseline):

- ``bound``: the reference kernel launched directly after its first call (``BoundLaunches``);
- ``autotuned``: the same kernel through the autotuner, heuristics and JIT on every call, as a learner's
  ``kernel[grid](...)`` with ``@triton.autotune`` runs;
- ``jit``: the same kernel through the JIT alone, with the config the autotuner chose (a learner who fixes
  the config per shape);

each by the protocol (ms, speedup over cuBLAS) and by the GPU's time alone (the launch hidden), with the
CPU microseconds per call. Every path's output is checked against cuBLAS first.
"""
from __future__ import annotations

import argparse
import pathlib
import sys

import torch

import course
from probes.args import gpu_options

SHAPES = "16x4096x16384,16x8192x28672,16x8192x57344"


def _inputs(m: int, k: int, n: int):
    from kernels_ref.quant import dequantize_int8

    g = torch.Generator(device=course.DEVICE).manual_seed(0)
    x = torch.randn(m, k, device=course.DEVICE, dtype=torch.bfloat16, generator=g)
    w_q = torch.randint(-127, 128, (n, k), device=course.DEVICE, dtype=torch.int8, generator=g)
    w_scale = torch.rand(n, device=course.DEVICE, generator=g) / (73.0 * k ** 0.5)
    bias = torch.randn(n, device=course.DEVICE, dtype=torch.bfloat16, generator=g)
    return (x, w_q, w_scale, bias), dequantize_int8(w_q, w_scale, torch.bfloat16)


def _paths(args):
    """name -> fn(x, w_q, w_scale, bias): the three launches of the same kernel."""
    from kernels_ref import quant
    from kernels_ref._launch import BoundLaunches, cdiv

    def autotuned(*a):
        with BoundLaunches.off():
            return quant.int8_weight_linear(*a)

    autotuned(*args)  # tunes: the jit path takes the config chosen here
    tuner = quant._int8_linear_kernel
    best = tuner.best_config
    jit = tuner.fn  # the heuristics (EVEN_K) over the JIT function

    def jit_launch(x, w_q, w_scale, bias):
        M, K = x.shape
        N = w_q.shape[0]
        y = torch.empty((M, N), device=x.device, dtype=x.dtype)
        grid = (cdiv(N, best.kwargs["BLOCK_N"]), cdiv(M, best.kwargs["BLOCK_M"]))
        jit[grid](x, w_q, w_scale, bias, y, M, N, K, x.stride(0), x.stride(1), w_q.stride(0), w_q.stride(1),
                  y.stride(0), HAS_BIAS=True, num_warps=best.num_warps, num_stages=best.num_stages, **best.kwargs)
        return y

    return {"bound": quant.int8_weight_linear, "autotuned": autotuned, "jit": jit_launch}, str(best)


def measure(shape: tuple[int, int, int]) -> dict:
    import torch.nn.functional as F

    from measure.timer import cpu_us_per_call, gpu_event_clock, l2_flush_buffer, time_interleaved

    args, w_bf16 = _inputs(*shape)
    x, _, _, bias = args
    fns, config = _paths(args)
    expected = F.linear(x, w_bf16, bias).float()
    row = {"shape": "x".join(map(str, shape)), "config": config, "weight_MB": round(args[1].numel() / 1e6, 1)}
    for name, fn in fns.items():
        got = fn(*args).float()
        row[f"{name}_max_error"] = float((got - expected).abs().max())
        row[f"{name}_ok"] = bool(torch.allclose(got, expected, atol=3e-2, rtol=2e-2))
    timed = {**{name: (lambda fn=fn: fn(*args)) for name, fn in fns.items()},
             "cublas": lambda: F.linear(x, w_bf16, bias)}
    protocol = time_interleaved(timed, (), reps=50, warmup=5)
    gpu = time_interleaved(timed, (), reps=50, warmup=5, clock=gpu_event_clock(l2_flush_buffer()))
    for name, fn in timed.items():
        row[f"{name}_cpu_us"] = round(cpu_us_per_call(fn, calls=100), 1)
        row[f"{name}_protocol_ms"] = protocol[name]
        row[f"{name}_gpu_ms"] = gpu[name]
        row[f"{name}_speedup"] = protocol["cublas"] / protocol[name]
        row[f"{name}_gpu_speedup"] = gpu["cublas"] / gpu[name]
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", default=SHAPES, help="M x K x N, comma separated")
    p.add_argument("--json", default=None)
    opts = gpu_options(p, argv, "int8_launch")
    if opts is None:
        return 2
    rows = [measure(tuple(int(v) for v in s.split("x"))) for s in opts.shapes.split(",")]
    if opts.json:
        from tools import results

        method = f"python -m probes.int8_launch --shapes {opts.shapes} (probes/int8_launch.py: {__doc__.split(chr(10))[0]})"
        results.write_json(pathlib.Path(opts.json), {**results.this_machine(), "method": method,
                                                     "device": course.describe(), "rows": rows})
    print("\nspeedup over cuBLAS bf16 by the protocol (by GPU time alone), CPU us per call")
    print(f"{'M x K x N':<16}{'bound':>16}{'autotuned':>16}{'jit':>16}{'cuBLAS ms':>11}{'CPU us a/j/b/cuBLAS':>24}  ok")
    for r in rows:
        cells = "".join(f"{r[f'{n}_speedup']:>7.2f} ({r[f'{n}_gpu_speedup']:.2f})" for n in ("bound", "autotuned", "jit"))
        cpu = "/".join(f"{r[f'{n}_cpu_us']:.0f}" for n in ("autotuned", "jit", "bound", "cublas"))
        ok = all(r[f"{n}_ok"] for n in ("bound", "autotuned", "jit"))
        print(f"{r['shape']:<16}{cells}{r['cublas_protocol_ms']:>11.4f}{cpu:>24}  {ok}")
    return 0 if all(r[f"{n}_ok"] for r in rows for n in ("bound", "autotuned", "jit")) else 1


if __name__ == "__main__":
    sys.exit(main())
