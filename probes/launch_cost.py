"""What a Triton launch costs the CPU, and what binding it saves, for the memory-bound reference kernels.

    python -m probes.launch_cost [--shape 16384x4096] [--dtype bfloat16] [--profile KERNEL]

The course's protocol (measure.timer) times flush + call + synchronize. The CPU prepares the call while the
GPU writes the flush buffer (~60 us on an H200, ~85 us on an H100); a launch that takes the CPU longer
than that leaves the GPU idle inside the timed window, and the kernel is charged for it. Each reference
kernel launches through ``kernels_ref._launch.BoundLaunches``: after a specialization's first call, its
compiled kernel is launched directly, past the autotuner's and the JIT's per-call Python.

For bias_gelu, softmax, online_softmax, LayerNorm forward and backward at one shape, and the transformer
block's prefill and decode step (``BLOCK``: seven and nine launches a call), this prints, with the
bound launch and with every call through the autotuner and the JIT (``BoundLaunches.off()``):
CPU microseconds per call (calls queued without waiting), the protocol's median and the GPU's time alone
(``gpu_event_clock``: the launch hidden behind queued GPU work). Each path is checked against the other's
output first: binding must not change a bit. ``--profile KERNEL`` instead runs cProfile over that kernel's
bound calls (queued as above) and prints where their CPU time goes, the costliest functions first.

``--grader``: what a grading worker adds to each launch of a learner's kernel (which goes through the JIT,
as the unbound path does): CPU microseconds per call of each kernel (and rope_kv_append, a launch of 25
arguments) plain; then with the grader's launch wrappers (``autograder.legality``: the launch counter, the
checks of callbacks, grid and arguments) as a timed call runs them and as a checked call does (judged);
then a timed call with the worker's audit hook and ``__import__`` guard added (``autograder.runtime_audit``);
last, cProfile's table of the kernel that a timed call slows most.
"""
from __future__ import annotations

import contextlib
import sys

import torch

import course
from probes.args import gpu_options


KERNELS = ("bias_gelu", "softmax", "online_softmax", "layer_norm_fwd", "layer_norm_bwd")
BLOCKS = ("transformer_block_prefill", "transformer_block_decode")
BLOCK = (1, 2048, 1024, 16)  # B, S (decode: the caches' context), D, H: the suite's headline block


def _block_calls(block: tuple[int, int, int, int], dtype: torch.dtype) -> dict:
    """The transformer block's prefill ([B, S, D] causal) and one decode step at position S: seven and
    nine launches a call, so the launchers' host cost adds up. name -> (function, arguments)."""
    from kernels_ref import transformer_block as tb

    B, S, D, H = block
    device = course.DEVICE
    params = tb.make_params(D, H, dtype)
    caches = [torch.randn(B, H, S + 1, D // H, device=device, dtype=dtype) for _ in range(2)]
    return {
        "transformer_block_prefill": (tb.transformer_block, (torch.randn(B, S, D, device=device, dtype=dtype), params)),
        "transformer_block_decode": (lambda x, p, k, v: tb.decode_step(x, p, k, v, S),
                                     (torch.randn(B, 1, D, device=device, dtype=dtype), params, *caches)),
    }


def _calls(shape: tuple[int, int], dtype: torch.dtype, block=None) -> dict:
    """Each kernel's call on fresh inputs of one shape, and with ``block`` (B, S, D, H) the transformer
    block's: name -> (function, arguments)."""
    from kernels_ref import bias_gelu as bg, layer_norm as ln, softmax as sm

    M, N = shape
    device = course.DEVICE
    x = torch.randn(M, N, device=device, dtype=dtype)
    dy = torch.randn(M, N, device=device, dtype=dtype)
    w = torch.randn(N, device=device, dtype=dtype)
    b = torch.randn(N, device=device, dtype=dtype)
    _, mean, rstd = ln.layer_norm_fwd(x, w, b)
    return {
        "bias_gelu": (bg.bias_gelu, (x, b)),
        "softmax": (sm.softmax, (x,)),
        "online_softmax": (sm.online_softmax, (x,)),
        "layer_norm_fwd": (ln.layer_norm_fwd, (x, w, b)),
        "layer_norm_bwd": (ln.layer_norm_bwd, (dy, x, w, mean, rstd)),
        **(_block_calls(block, dtype) if block else {}),
    }


def measure(shape: tuple[int, int], dtype: torch.dtype, block=BLOCK) -> dict:
    """name -> {path -> {cpu_us, protocol_ms, gpu_ms}} for path in ("bound", "unbound")."""
    from kernels_ref._launch import BoundLaunches
    from measure.memory import tensors_in
    from measure.timer import cpu_us_per_call, gpu_event_clock, l2_flush_buffer, time_interleaved

    rows = {}
    for name, (fn, args) in _calls(shape, dtype, block).items():
        row = {}
        outputs = {}
        for path in ("unbound", "bound"):
            with BoundLaunches.off() if path == "unbound" else contextlib.nullcontext():
                outputs[path] = [t.clone() for t in tensors_in(fn(*args))]
                fn(*args)  # the bound path binds on the first call; this one is bound
                torch.cuda.synchronize()
                row[path] = {
                    "cpu_us": cpu_us_per_call(fn, *args, calls=200),
                    "protocol_ms": time_interleaved({path: fn}, args, reps=30, warmup=3)[path],
                    "gpu_ms": time_interleaved({path: fn}, args, reps=30, warmup=3,
                                               clock=gpu_event_clock(l2_flush_buffer()))[path],
                }
        row["identical"] = all(torch.equal(a, b) for a, b in zip(outputs["bound"], outputs["unbound"]))
        rows[name] = row
    return rows


def profile(name: str, shape: tuple[int, int], dtype: torch.dtype, calls: int = 300, top: int = 25,
            block=BLOCK) -> str:
    """cProfile's table (by own time) of ``calls`` bound calls of one kernel (or block), queued without
    waiting."""
    import cProfile
    import io
    import pstats

    fn, args = _calls(shape, dtype, block if name in BLOCKS else None)[name]
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    for _ in range(2):  # the first call tunes, compiles and binds
        fn(*args)
    sync()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn(*args)
    prof.disable()
    sync()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def _rope_call(dtype: torch.dtype):
    from kernels_ref import rope_cache

    case = rope_cache.rope_case(64, dtype=dtype, goal=None)
    return case.candidates["triton"], case.make_inputs()


def grader_overhead(shape: tuple[int, int], dtype: torch.dtype) -> tuple[dict, str]:
    """{kernel: {"plain", "timed", "checked", "audited": CPU us per call}} through the JIT, and the profile of
    the kernel a timed call slows most (the wrappers and the hook stay in this process once added)."""
    import cProfile
    import io
    import pstats

    from autograder import legality, runtime_audit
    from kernels_ref._launch import BoundLaunches
    from measure.timer import cpu_us_per_call

    calls = {**_calls(shape, dtype, BLOCK), "rope_kv_append": _rope_call(dtype)}
    rows: dict = {name: {} for name in calls}
    recorder = legality.OpRecorder("<submission>", ".")  # marks the checked span; never entered here
    spans = {"timed": legality.ThreadGuard.armed_for, "checked": lambda: legality.ThreadGuard.armed_for(recorder),
             "audited": legality.ThreadGuard.armed_for}
    with BoundLaunches.off():
        for name, (fn, args) in calls.items():
            fn(*args)
            rows[name]["plain"] = cpu_us_per_call(fn, *args, calls=200)
        legality.install_launch_counter()
        legality.LaunchCallbacks.arm(recorder)
        for stage, span in spans.items():
            if stage == "audited":
                runtime_audit.install()
            with span():
                for name, (fn, args) in calls.items():
                    fn(*args)
                    rows[name][stage] = cpu_us_per_call(fn, *args, calls=200)
        worst = max(rows, key=lambda n: rows[n]["audited"] - rows[n]["plain"])
        fn, args = calls[worst]
        prof = cProfile.Profile()
        with legality.ThreadGuard.armed_for():
            prof.enable()
            for _ in range(200):
                fn(*args)
            prof.disable()
        torch.cuda.synchronize()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(22)
    return rows, f"{worst}, a timed call with the audit hook:\n{out.getvalue()}"


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="16384x4096", help="M x N")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    parser.add_argument("--profile", metavar="KERNEL", choices=KERNELS + BLOCKS,
                        help="where one kernel's CPU time per call goes (cProfile), instead of the table")
    parser.add_argument("--grader", action="store_true",
                        help="what a grading worker's launch checks and audit hook add to each call")
    opts = gpu_options(parser, argv, "launch_cost")
    if opts is None:
        return 2
    shape = tuple(int(n) for n in opts.shape.split("x"))
    if opts.profile:
        print(profile(opts.profile, shape, getattr(torch, opts.dtype)))
        return 0
    if opts.grader:
        rows, table = grader_overhead(shape, getattr(torch, opts.dtype))
        print(table)
        print("CPU us per call through the JIT: plain; in a worker's timed call; in a checked call; timed, with "
              "the audit hook")
        for name, row in rows.items():
            print(f"{name:<26}" + "".join(f"{row[k]:>8.1f}" for k in ("plain", "timed", "checked", "audited")))
        return 0
    rows = measure(shape, getattr(torch, opts.dtype))
    print(f"\n{opts.shape} {opts.dtype}; CPU us per call, protocol ms, GPU-time ms: unbound -> bound")
    print(f"{'kernel':<26}{'CPU us':>18}{'protocol ms':>20}{'GPU ms':>20}  identical")
    for name, row in rows.items():
        u, b = row["unbound"], row["bound"]
        print(f"{name:<26}{u['cpu_us']:>8.1f} -> {b['cpu_us']:>6.1f}{u['protocol_ms']:>10.4f} -> {b['protocol_ms']:.4f}"
              f"{u['gpu_ms']:>10.4f} -> {b['gpu_ms']:.4f}  {row['identical']}")
    return 0 if all(row["identical"] for row in rows.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
