"""How much of linear_bias_gelu's timed cost is the CPU preparing its launch, on a GPU.

    python -m tools.matmul_launch_cost

The course's protocol (measure.timer) times flush + call + synchronize: while the GPU writes the 256 MiB
flush buffer the CPU prepares the call, and a launch that takes the CPU longer than the flush takes the GPU
leaves the device idle inside the timed window. The persistent TMA kernel's launch (three host tensor
descriptors, the autotuner, Triton's launcher) costs far more CPU time than cuBLAS's. This prints, for the
fused kernel, eager, cuBLAS's bare matmul and cuBLASLt's fused epilogue at 16384x4096x4096 bf16: the
protocol's median; the protocol around a CUDA graph replay of the call (no launch preparation; cuBLAS may
pick another algorithm inside a graph); 20 calls back to back (launches overlap the previous kernel; the
GPU runs without pause, at the clocks its power limit allows under sustained load); and the CPU
microseconds per launch.
"""
import statistics
import sys
import time

import torch

import course
from kernels_ref import matmul as mm
from measure.timer import time_interleaved
from tools.probe_matmul_configs import inputs_of

if not course.ON_GPU:
    print("tools.matmul_launch_cost needs a GPU")
    sys.exit(2)
args = inputs_of(16384, 4096, 4096)
fns = {"triton": mm.linear_bias_gelu, "eager": mm.linear_bias_gelu_torch, "cublas_matmul_only": lambda x, w, b: x @ w.t(),
       "addmm_gelu": mm.linear_bias_gelu_cublaslt}
for f in fns.values():
    f(*args)
torch.cuda.synchronize()
proto = time_interleaved(fns, args, reps=30, warmup=3)

def back_to_back(fn, n=20):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize(); s.record()
    for _ in range(n):
        fn(*args)
    e.record(); e.synchronize()
    return s.elapsed_time(e) / n

def host_us(fn, n=50):
    torch.cuda.synchronize(); t0 = time.perf_counter()
    for _ in range(n):
        fn(*args)
    t = (time.perf_counter() - t0) / n * 1e6
    torch.cuda.synchronize()
    return t

def graphed(fn):
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn(*args)
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        fn(*args)
    return lambda *a: g.replay()

b2b = {k: statistics.median(back_to_back(f) for _ in range(5)) for k, f in fns.items()}
host = {k: host_us(f) for k, f in fns.items()}
graphs = {}
for k, f in fns.items():
    try:
        graphs[k] = graphed(f)
    except Exception as exc:  # noqa: BLE001
        print(k, "graph capture failed:", exc)
gproto = time_interleaved(graphs, args, reps=30, warmup=3)
print(course.describe())
print(f"{'fn':<20}{'protocol ms':>12}{'graph+protocol':>15}{'back-to-back':>13}{'CPU us/launch':>14}")
for k in fns:
    print(f"{k:<20}{proto[k]:>12.4f}{gproto.get(k, float('nan')):>15.4f}{b2b[k]:>13.4f}{host[k]:>14.1f}")
for name, d in (("protocol", proto), ("graph+protocol", gproto), ("back-to-back", b2b)):
    if "triton" in d:
        print(f"{name}: triton {d['eager'] / d['triton']:.3f}x eager, {d['cublas_matmul_only'] / d['triton']:.3f}x bare cuBLAS")
