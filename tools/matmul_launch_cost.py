"""How much of linear_bias_gelu's timed cost is the CPU preparing its launch, on a GPU.

    python -m tools.matmul_launch_cost

The course's protocol (measure.timer) times flush + call + synchronize: while the GPU writes the 256 MiB
flush buffer the CPU prepares the call, and a launch that takes the CPU longer than the flush takes the GPU
leaves the device idle inside the timed window. The persistent TMA kernel's launch costs far more CPU time
than cuBLAS's. This prints, at 16384x4096x4096 bf16:

1. for the fused kernel, eager, cuBLAS's bare matmul and cuBLASLt's fused epilogue: the protocol's median;
   the protocol around a CUDA graph replay of the call (no launch preparation; cuBLAS may pick another
   algorithm inside a graph); 20 calls back to back (launches overlap the previous kernel; the GPU runs
   without pause, at the clocks its power limit allows under sustained load); CPU microseconds per launch;
2. where the fused kernel's CPU microseconds go: each step of its launch path timed alone (the output's
   allocation, the kernel choice, the three host descriptors, the autotuner's dispatch, Triton's launch of
   the chosen config, and the compiled kernel launched with its arguments bound in advance), beside a
   launch of the pointer kernel and of bias_gelu's simple kernel, then cProfile's functions by their own
   time.
"""
from __future__ import annotations

import cProfile
import io
import pstats
import statistics
import sys

import torch

import course

SHAPE = (16384, 4096, 4096)


def back_to_back(fn, args, n: int = 20) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(n):
        fn(*args)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / n


def compare_paths(fns: dict, args) -> dict:
    from measure.timer import cpu_us_per_call, graph_replay, time_interleaved

    for fn in fns.values():
        fn(*args)
    torch.cuda.synchronize()
    proto = time_interleaved(fns, args, reps=30, warmup=3)
    b2b = {k: statistics.median(back_to_back(f, args) for _ in range(5)) for k, f in fns.items()}
    host = {k: cpu_us_per_call(f, *args) for k, f in fns.items()}
    graphs = {}
    for k, f in fns.items():
        try:
            graphs[k] = graph_replay(f, *args)
        except Exception as exc:  # noqa: BLE001  (a call that cannot be captured is reported, not fatal)
            print(f"{k}: graph capture failed: {exc}")
    in_graph = time_interleaved(graphs, args, reps=30, warmup=3)
    return {"protocol": proto, "graph+protocol": in_graph, "back-to-back": b2b, "cpu_us": host}


def launch_steps(args) -> dict:
    """CPU microseconds of each step of the fused kernel's launch path, and of two other Triton launches."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    from kernels_ref import bias_gelu as bg, matmul as mm
    from kernels_ref._validate import cuda_sm_count
    from measure.timer import cpu_us_per_call

    x, w, b = args
    M, K = x.shape
    N = w.shape[0]
    c = torch.empty((M, N), device=x.device, dtype=x.dtype)
    descs = [TensorDescriptor.from_tensor(t, [16, 16]) for t in (x, w, c)]
    num_sms = cuda_sm_count(x.device)
    flags = dict(HAS_BIAS=True, GELU=True, B_KMAJOR=True, NUM_SMS=num_sms, WARP_SPECIALIZE=False)
    mm.linear_bias_gelu(*args)  # autotuned: the cache holds this shape's config
    torch.cuda.synchronize()
    config = mm._matmul_tma_persistent_kernel.best_config
    meta = dict(config.kwargs)
    mm._set_block_shapes({**meta, **flags, "a_desc": descs[0], "b_desc": descs[1], "c_desc": descs[2]})

    def grid(m):
        return (min(num_sms, -(-M // m["BLOCK_M"]) * -(-N // m["BLOCK_N"])),)

    xb = torch.randn(M, N, device=x.device, dtype=x.dtype)
    kwargs = dict(flags, **meta, num_warps=config.num_warps, num_stages=config.num_stages)
    steps = {
        "torch.empty of the output": lambda: torch.empty((M, N), device=x.device, dtype=x.dtype),
        "_pick_kernel": lambda: mm._pick_kernel(x, w.t()),
        "three TensorDescriptor.from_tensor": lambda: [TensorDescriptor.from_tensor(t, [16, 16]) for t in (x, w, c)],
        "cuda_sm_count + get_device_capability": lambda: (cuda_sm_count(x.device),
                                                          torch.cuda.get_device_capability(x.device)),
        "autotuner dispatch + launch (descriptors ready)": lambda: mm._matmul_tma_persistent_kernel[grid](
            *descs, b, M, N, K, **flags),
        "jit launch of the chosen config": lambda: mm._matmul_tma_persistent_body[grid(meta)](
            *descs, b, M, N, K, **kwargs),
        "linear_bias_gelu (all of it)": lambda: mm.linear_bias_gelu(*args),
        "linear_bias_gelu, pointer kernel": lambda: mm.linear_bias_gelu(*args, kernel="pointer"),
        "bias_gelu (a simple Triton kernel)": lambda: bg.bias_gelu(xb, b),
    }
    try:  # the compiled kernel itself, its arguments bound once: what a cached launch path would cost
        steps["compiled kernel launched directly"] = direct_launch(
            mm._matmul_tma_persistent_body, grid(meta), (*descs, b, M, N, K), kwargs)
    except Exception as exc:  # noqa: BLE001  (Triton's internals differ between versions: report, go on)
        print(f"compiled kernel launched directly: not measured ({type(exc).__name__}: {exc})")
    for fn in steps.values():
        fn()
    torch.cuda.synchronize()
    cost = {name: cpu_us_per_call(fn, calls=100) for name, fn in steps.items()}
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(100):
        mm.linear_bias_gelu(*args)
    profile.disable()
    torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(20)
    return {"config": str(config), "cpu_us": cost, "profile": text.getvalue()}


def direct_launch(jit_fn, grid: tuple, args: tuple, kwargs: dict):
    """A launch of ``jit_fn``'s compiled kernel with every argument bound in advance: no autotuner, no
    argument binding or cache lookup per call, only Triton's launcher (``CompiledKernel[grid](...)`` takes
    every parameter in signature order, constexprs included, as ``JITFunction.run`` passes them)."""
    import inspect

    compiled = jit_fn.warmup(*args, grid=grid, **kwargs)  # the cached compile of these arguments
    params = list(inspect.signature(jit_fn.fn).parameters.values())
    values = dict(zip([p.name for p in params], args))
    for p in params[len(args):]:
        values[p.name] = kwargs.get(p.name, p.default)
    bound = [values[p.name] for p in params]
    launch = compiled[grid]
    return lambda: launch(*bound)


def main() -> int:
    if not course.ON_GPU:
        print("tools.matmul_launch_cost needs a GPU")
        return 2
    from kernels_ref import matmul as mm
    from tools.probe_matmul_configs import inputs_of

    args = inputs_of(*SHAPE)
    fns = {"triton": mm.linear_bias_gelu, "eager": mm.linear_bias_gelu_torch,
           "cublas_matmul_only": lambda x, w, b: x @ w.t(), "addmm_gelu": mm.linear_bias_gelu_cublaslt}
    paths = compare_paths(fns, args)
    print(course.describe())
    print(f"{'fn':<20}{'protocol ms':>12}{'graph+protocol':>15}{'back-to-back':>13}{'CPU us/launch':>14}")
    for k in fns:
        print(f"{k:<20}{paths['protocol'][k]:>12.4f}{paths['graph+protocol'].get(k, float('nan')):>15.4f}"
              f"{paths['back-to-back'][k]:>13.4f}{paths['cpu_us'][k]:>14.1f}")
    for name in ("protocol", "graph+protocol", "back-to-back"):
        d = paths[name]
        if "triton" in d:
            print(f"{name}: triton {d['eager'] / d['triton']:.3f}x eager, "
                  f"{d['cublas_matmul_only'] / d['triton']:.3f}x bare cuBLAS")
    steps = launch_steps(args)
    print(f"\nCPU microseconds per call, each step of the fused kernel's launch alone (config {steps['config']}):")
    for name, us in steps["cpu_us"].items():
        print(f"  {name:<50}{us:>8.1f}")
    print("\ncProfile of 100 calls of linear_bias_gelu, by own time:")
    print(steps["profile"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
