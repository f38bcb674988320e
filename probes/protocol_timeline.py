"""Where the timing protocol's time goes in one call: the L2 flush, the CPU's way to the first launch, the
GPU's idle stretches and kernels, the synchronize, read from a torch.profiler timeline (CUPTI's times).
Also for the transformer block (``--kernels transformer_block_prefill,transformer_block_decode``): seven
and ten launches a call, where ``gaps`` is the GPU waiting for the CPU between them.

    python -m probes.protocol_timeline [--shape 16384x4096] [--dtype bfloat16] [--reps 30] [--kernels a,b]
                                      [--block B,S,D,H] [--detail] [--positions N]

``measure.timer.event_clock`` records the begin event, writes the L2 flush buffer, calls, synchronizes,
then records the end event. The flush hides the CPU's preparation of the call; a call whose CPU work
before its first launch outlasts the flush leaves the GPU idle inside the window, and that idle time is
charged to the kernel. This runs those same steps under the profiler for each reference kernel
(``probes.launch_cost``'s calls, bound launches) and its eager PyTorch twin, and prints per call the medians
over ``--reps`` of:

- ``flush``: the flush kernel's GPU time, what hides the CPU's preparation;
- ``to launch``: CPU time from the call's start to its first kernel's launch call returning;
- ``idle``: GPU idle from the flush's end to the call's first kernel: the launch charged to the kernel;
- ``gaps``: GPU idle between the call's own kernels;
- ``kernels``: the call's kernels' GPU time, summed;
- ``after``: from the last kernel's end to the synchronize's return (the end event is recorded after it).

Every time is in microseconds. The profiler's callbacks (~1-2 us an API call) are inside the CPU columns.
``--detail`` lists each call's kernels one by one with their median time: where a block's GPU time goes,
kernel against kernel beside eager's. ``--positions N`` instead times N identical copies of each call
together by the protocol: whether a candidate's place in the interleaved rounds changes its median.
"""
from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

import course

REP, CALL = "protocol_rep", "protocol_call"  # the profiler ranges around one repetition and its call
GPU_CATEGORIES = ("kernel", "gpu_memset", "gpu_memcpy")
LAUNCH_CATEGORIES = ("cuda_runtime", "cuda_driver")
COLUMNS = ("flush", "to_launch", "idle", "gaps", "kernels", "after")
KERNELS = ("bias_gelu", "softmax", "layer_norm_fwd", "layer_norm_bwd")
BLOCKS = ("transformer_block_prefill", "transformer_block_decode")  # probes.launch_cost.BLOCK's shape


def _eager(name: str, args: tuple):
    """The eager PyTorch call a reference kernel's goals compare against, on the same arguments."""
    if name == "bias_gelu":
        return lambda x, b: F.gelu(x + b, approximate="tanh")
    if name == "softmax":
        return lambda x: torch.softmax(x, dim=-1)
    if name == "layer_norm_fwd":
        return lambda x, w, b: torch.native_layer_norm(x, [x.shape[-1]], w, b, 1e-5)
    if name in BLOCKS:
        from kernels_ref import transformer_block as tb

        if name == "transformer_block_prefill":
            return tb.transformer_block_torch
        return lambda x, p, k, v: tb.decode_step_torch(x, p, k, v, k.shape[2] - 1)
    if name == "layer_norm_bwd":
        bias = torch.zeros_like(args[2])  # the op's schema wants one (its values do not enter the gradients)
        return lambda dy, x, w, mean, rstd: torch.ops.aten.native_layer_norm_backward(
            dy, x, [x.shape[-1]], mean[:, None], rstd[:, None], w, bias, [True, True, True])
    raise KeyError(name)


def calls(shape: tuple[int, int], dtype: torch.dtype, kernels=KERNELS, block=None) -> dict:
    """(kernel, path) -> (function, arguments), path "triton" (the reference) or "eager"; the transformer
    block's (BLOCKS) at ``block`` (B, S, D, H; default probes.launch_cost.BLOCK) where ``kernels`` name them."""
    from probes.launch_cost import BLOCK, _calls

    out = {}
    wants_block = any(name in BLOCKS for name in kernels)
    for name, (fn, args) in _calls(shape, dtype, (block or BLOCK) if wants_block else None).items():
        if name in kernels:
            out[name, "triton"] = (fn, args)
            out[name, "eager"] = (_eager(name, args), args)
    return out


def _ranges(events: list[dict], name: str) -> list[tuple[float, float]]:
    return sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                  if e.get("cat") == "user_annotation" and e.get("name") == name)


def rep_timings(events: list[dict]) -> list[dict]:
    """One dict of COLUMNS (us) per repetition found in a chrome trace's events (``traceEvents``)."""
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") in LAUNCH_CATEGORIES and "correlation" in e.get("args", {})}
    gpu = sorted(((launches[e["args"]["correlation"]], e) for e in events
                  if e.get("cat") in GPU_CATEGORIES and e.get("args", {}).get("correlation") in launches),
                 key=lambda pair: pair[1]["ts"])
    syncs = [e for e in events if e.get("cat") in LAUNCH_CATEGORIES and e.get("name") == "cudaDeviceSynchronize"]
    call_ranges = _ranges(events, CALL)
    rows = []
    for r0, r1 in _ranges(events, REP):
        c0, c1 = next(((a, b) for a, b in call_ranges if r0 <= a and b <= r1), (None, None))
        if c0 is None:
            continue
        flush = [g for launch, g in gpu if r0 <= launch["ts"] < c0]
        own = [(launch, g) for launch, g in gpu if c0 <= launch["ts"] <= c1]
        sync = [s for s in syncs if c1 <= s["ts"] <= r1]
        if not flush or not own or not sync:
            continue
        kernels = [g for _, g in own]
        ends = [g["ts"] + g["dur"] for g in kernels]
        gaps = sum(max(0.0, g["ts"] - max(ends[:i])) for i, g in enumerate(kernels) if i)
        rows.append({
            "flush": flush[-1]["dur"],
            "to_launch": min(launch["ts"] + launch["dur"] for launch, _ in own) - c0,
            "idle": max(0.0, kernels[0]["ts"] - (flush[-1]["ts"] + flush[-1]["dur"])),
            "gaps": gaps,
            "kernels": sum(g["dur"] for g in kernels),
            "after": sync[0]["ts"] + sync[0]["dur"] - max(ends),
            "each": tuple((g["name"], g["dur"]) for g in kernels),  # the call's kernels in GPU order
        })
    return rows


def medians(rows: list[dict]) -> dict:
    return {column: statistics.median(row[column] for row in rows) for column in COLUMNS} if rows else {}


def kernel_medians(rows: list[dict]) -> list[tuple[str, float]]:
    """(name, median us) of each of a call's kernels, in order, over the repetitions that ran the most
    common sequence of kernels (an autotuner's first run, or a stray kernel, makes a different one)."""
    sequences = [tuple(name for name, _ in row["each"]) for row in rows]
    if not sequences:
        return []
    common = max(set(sequences), key=sequences.count)
    same = [row["each"] for row, seq in zip(rows, sequences) if seq == common]
    return [(name, statistics.median(each[i][1] for each in same)) for i, name in enumerate(common)]


def timeline(fn, args: tuple, reps: int = 30, warmup: int = 5) -> list[dict]:
    """The protocol's steps (measure.timer.event_clock), ``reps`` times under torch.profiler: rep_timings."""
    from torch.profiler import ProfilerActivity, profile, record_function

    from measure.timer import event_clock, l2_flush_buffer

    clock = event_clock(l2_flush_buffer())

    def call():
        with record_function(CALL):
            return fn(*args)

    for _ in range(warmup):  # tuning, compiling and binding stay out of the timeline
        clock(lambda: fn(*args))
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            with record_function(REP):
                clock(call)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        events = json.loads(path.read_text())["traceEvents"]
    return rep_timings(events)


def table(results: dict) -> str:
    """results: (kernel, path) -> (medians, repetitions[, kernel_medians]). One line each, times in us."""
    lines = [f"{'kernel':<26}{'path':<8}" + "".join(f"{c:>11}" for c in COLUMNS) + "   reps"]
    for (name, path), (row, n, *_) in results.items():
        cells = "".join(f"{row[c]:>11.1f}" for c in COLUMNS) if row else f"{'no complete repetition':>66}"
        lines.append(f"{name:<26}{path:<8}{cells}{n:>7}")
    return "\n".join(lines)


def position_medians(fn, args: tuple, copies: int = 4, reps: int = 30) -> list[float]:
    """The protocol's medians (ms) of ``copies`` identical candidates timed together: what a candidate's
    place in each round of the interleaving costs or saves (equal medians: nothing)."""
    from measure.timer import time_interleaved

    ms = time_interleaved({f"copy {i}": fn for i in range(copies)}, args, reps=reps, warmup=3)
    return [ms[f"copy {i}"] for i in range(copies)]


def all_timed(results: dict) -> bool:
    """Whether every call had at least one complete repetition (the exit status)."""
    return all(entry[1] for entry in results.values())


def detail(results: dict) -> str:
    """Each call's kernels in order, with their median GPU time (us)."""
    lines = []
    for (name, path), (_, _, each) in results.items():
        lines.append(f"\n{name} {path}: {len(each)} kernels, {sum(us for _, us in each):.1f} us")
        lines += [f"  {us:>9.1f}  {kernel[:90]}" for kernel, us in each]
    return "\n".join(lines)


def _at_least_two(text: str) -> int:
    n = int(text)
    if n < 2:
        raise ValueError("--positions needs 2 copies or more")
    return n


def parse_args(argv=None):
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="16384x4096", help="M x N")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--kernels", default=",".join(KERNELS), help=f"a subset of {','.join(KERNELS + BLOCKS)}")
    parser.add_argument("--block", default=None, help="B,S,D,H of the transformer block (default: probes.launch_cost.BLOCK)")
    parser.add_argument("--detail", action="store_true", help="each call's kernels, one by one (median us)")
    parser.add_argument("--positions", type=_at_least_two, default=0, metavar="N",
                        help="instead: N identical copies of each call timed together by the protocol")
    return parser.parse_args(argv)


def print_positions(chosen: dict, copies: int, reps: int) -> int:
    print(f"\nthe protocol's median ms of {copies} identical copies, timed together (first to last)")
    for (name, path), (fn, args) in chosen.items():
        medians_ms = position_medians(fn, args, copies, reps)
        print(f"{name:<26}{path:<8}" + "".join(f"{m:>10.4f}" for m in medians_ms)
              + f"   first/rest {medians_ms[0] / statistics.median(medians_ms[1:]):.3f}")
    return 0


def print_timelines(chosen: dict, title: str, reps: int, with_detail: bool) -> int:
    results = {}
    for key, (fn, args) in chosen.items():
        rows = timeline(fn, args, reps=reps)
        results[key] = (medians(rows), len(rows), kernel_medians(rows))
    print(f"\n{title}; medians over repetitions, us (profiler's timeline)")
    print(table(results))
    if with_detail:
        print(detail(results))
    return 0 if all_timed(results) else 1


def main(argv=None) -> int:
    from probes.launch_cost import BLOCK

    opts = parse_args(argv)
    if not course.ON_GPU:
        print("probes.protocol_timeline needs a GPU")
        return 2
    print(course.describe())
    kernels = opts.kernels.split(",")
    block = tuple(int(n) for n in opts.block.split(",")) if opts.block else BLOCK
    shape = tuple(int(n) for n in opts.shape.split("x"))
    chosen = calls(shape, getattr(torch, opts.dtype), kernels, block)
    if opts.positions:
        return print_positions(chosen, opts.positions, opts.reps)
    sizes = [opts.shape] if any(k in KERNELS for k in kernels) else []
    if any(k in BLOCKS for k in kernels):
        sizes.append("block B{} S{} D{} H{}".format(*block))
    return print_timelines(chosen, f"{', '.join(sizes)} {opts.dtype}", opts.reps, opts.detail)


if __name__ == "__main__":
    sys.exit(main())
