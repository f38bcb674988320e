"""How much of linear_bias_gelu's timed cost is the CPU preparing its launch, on a GPU.

    python -m probes.matmul_launch_cost [--shapes 16384x4096x4096,8192x4096x1024]

The course's protocol (measure.timer) times flush + call + synchronize: while the GPU writes the 256 MiB
flush buffer the CPU prepares the call, and a launch that takes the CPU longer than the flush takes the GPU
leaves the device idle inside the timed window. The persistent TMA kernel's launch costs far more CPU time
than cuBLAS's. This prints, at each shape (bf16; by default the headline and the short-K shape):

1. for the fused kernel (bound launch; and through the autotuner on every call), eager, cuBLAS's bare
   matmul and cuBLASLt's fused epilogue: the protocol's median; the GPU's time alone (``gpu_event_clock``:
   the launch hidden behind a busy GPU, L2 cold); the protocol around a CUDA graph replay of the call (no launch preparation; cuBLAS may pick another
   algorithm inside a graph); 20 calls back to back (launches overlap the previous kernel; the GPU runs
   without pause, at the clocks its power limit allows under sustained load); CPU microseconds per launch;
2. where the fused kernel's CPU microseconds go: each step of its launch path timed alone (the output's
   allocation, the kernel choice, the three host descriptors, the autotuner's dispatch, Triton's launch of
   the chosen config, and the compiled kernel launched with its arguments bound in advance, which is
   what linear_bias_gelu launches after a shape's first call: ``kernels_ref._launch``), beside a launch of
   the pointer kernel and of bias_gelu's simple kernel, then cProfile's functions by their own time.
"""
from __future__ import annotations

import cProfile
import io
import pstats
import statistics
import sys

import torch

import course
from probes.args import gpu_options

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
    from measure.timer import cpu_us_per_call, gpu_event_clock, graph_replay, l2_flush_buffer, time_interleaved

    for fn in fns.values():
        fn(*args)
    torch.cuda.synchronize()
    proto = time_interleaved(fns, args, reps=30, warmup=3)
    gpu_only = time_interleaved(fns, args, reps=30, warmup=3, clock=gpu_event_clock(l2_flush_buffer()))
    b2b = {k: statistics.median(back_to_back(f, args) for _ in range(5)) for k, f in fns.items()}
    host = {k: cpu_us_per_call(f, *args) for k, f in fns.items()}
    graphs = {}
    for k, f in fns.items():
        try:
            graphs[k] = graph_replay(f, *args)
        except Exception as exc:  # noqa: BLE001  (a call that cannot be captured is reported, not fatal)
            print(f"{k}: graph capture failed: {exc}")
    in_graph = time_interleaved(graphs, args, reps=30, warmup=3)
    return {"protocol": proto, "gpu-only": gpu_only, "graph+protocol": in_graph, "back-to-back": b2b,
            "cpu_us": host}


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
    flags = mm._tma_flags(x, w.t(), b, True, None, None)
    autotuned_launch(*args)  # through the autotuner at this shape: best_config is this shape's
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
        "linear_bias_gelu (all of it: the bound launch)": lambda: mm.linear_bias_gelu(*args),
        "linear_bias_gelu, pointer kernel": lambda: mm.linear_bias_gelu(*args, kernel="pointer"),
        "bias_gelu (a simple Triton kernel)": lambda: bg.bias_gelu(xb, b),
    }
    bound = mm._TMA_LAUNCHES.get(mm._tma_key(x, w.t(), b, None, mm._tma_flags(x, w.t(), b, True, None, None)))
    if bound is not None:  # what linear_bias_gelu launches after a key's first call
        bound_descs = mm._tma_descriptors(x, w.t(), c, bound.block_shapes)
        steps["bound compiled kernel (descriptors ready)"] = lambda: bound(*bound_descs, b, None)
        try:  # the launcher's own share: encoding the three descriptors for the driver (triton 3.6 internals)
            from course.triton_internals import internal

            make_tensordesc_arg = internal("make_tensordesc_arg")

            metas = bound.compiled.metadata.tensordesc_meta
            steps["launcher: encode three TMA descriptors"] = lambda: [
                make_tensordesc_arg(d, m) for d, m in zip(bound_descs, metas)]
        except Exception as exc:  # noqa: BLE001  (another triton: report, go on)
            print(f"launcher's descriptor encoding: not measured ({type(exc).__name__}: {exc})")
    else:
        print("bound compiled kernel: linear_bias_gelu made no bound launch for this key")
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


def autotuned_launch(x, w, b):
    """linear_bias_gelu as it launched before the bound path: the autotuner and the JIT on every call."""
    from kernels_ref import matmul as mm

    M, N = x.shape[0], w.shape[0]
    c = torch.empty((M, N), device=x.device, dtype=x.dtype)
    flags = mm._tma_flags(x, w.t(), b, True, None, None)

    def grid(meta):
        return (min(flags["NUM_SMS"], -(-M // meta["BLOCK_M"]) * -(-N // meta["BLOCK_N"])),)

    mm._matmul_tma_persistent_kernel[grid](*mm._tma_descriptors(x, w.t(), c), b, M, N, x.shape[1], **flags)
    return c


def compare_shape(shape: tuple) -> None:
    """The launch paths' table at one shape: protocol, CUDA graph, back to back, CPU per launch."""
    from kernels_ref import matmul as mm
    from probes.probe_matmul_configs import inputs_of

    fns = {"triton": mm.linear_bias_gelu, "triton_autotuned": autotuned_launch, "eager": mm.linear_bias_gelu_torch,
           "cublas_matmul_only": lambda x, w, b: x @ w.t(), "addmm_gelu": mm.linear_bias_gelu_cublaslt}
    paths = compare_paths(fns, inputs_of(*shape))
    print(f"\n{'x'.join(map(str, shape))} (M x N x K) bf16")
    print(f"{'fn':<20}{'protocol ms':>12}{'gpu-only ms':>12}{'graph+protocol':>15}{'back-to-back':>13}"
          f"{'CPU us/launch':>14}")
    for k in fns:
        print(f"{k:<20}{paths['protocol'][k]:>12.4f}{paths['gpu-only'][k]:>12.4f}"
              f"{paths['graph+protocol'].get(k, float('nan')):>15.4f}{paths['back-to-back'][k]:>13.4f}"
              f"{paths['cpu_us'][k]:>14.1f}")
    for name in ("protocol", "gpu-only", "graph+protocol", "back-to-back"):
        d = paths[name]
        for k in ("triton", "triton_autotuned"):
            if k in d:
                print(f"{name}: {k} {d['eager'] / d[k]:.3f}x eager, {d['cublas_matmul_only'] / d[k]:.3f}x bare cuBLAS")


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="16384x4096x4096,8192x4096x1024",
                        help="M x N x K shapes, comma-separated (the first gets the step-by-step breakdown)")
    opts = gpu_options(parser, argv, "matmul_launch_cost")
    if opts is None:
        return 2
    from probes.probe_matmul_configs import inputs_of

    shapes = [tuple(int(n) for n in s.split("x")) for s in opts.shapes.split(",")]
    for shape in shapes:
        compare_shape(shape)
    steps = launch_steps(inputs_of(*shapes[0]))
    print(f"\nCPU microseconds per call, each step of the fused kernel's launch alone (config {steps['config']}):")
    for name, us in steps["cpu_us"].items():
        print(f"  {name:<50}{us:>8.1f}")
    print("\ncProfile of 100 calls of linear_bias_gelu, by own time:")
    print(steps["profile"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
