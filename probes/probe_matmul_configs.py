"""Launch configurations of the fused ``linear_bias_gelu`` (the persistent TMA kernel), checked and timed on a GPU.

    python -m probes.probe_matmul_configs [--quick] [--json PATH]

The goal it serves: the fused GEMM at or above eager PyTorch (cuBLAS addmm, then a GELU kernel) and at or
above 0.95x cuBLAS doing the bare matmul, at the headline shape bf16 16384x4096x4096 (tokens x out x in).
Each variant is one launch configuration of ``kernels_ref.matmul``'s TMA kernel (``config=``): tile shape,
pipeline stages, warps, the sub-tiled epilogue, the grouped order's GROUP_M, whether the tile loop is
flattened into the K loop, and warp specialization (which Triton applies on Hopper only to an unflattened
loop). The search has two rounds on the headline shape: tile x stages x warps with the other knobs at the
kernel's defaults, then each of the other knobs varied on the round's fastest few. Every variant is checked
against float64 first (measure.tolerance), and all correct ones are timed together by the course's protocol
(measure.timer: interleaved medians, L2 flushed) beside cuBLAS's bare matmul, eager, cuBLASLt's fused
epilogue and the current kernel (its autotuner). The fastest few are then timed on two more shapes (LLaMA's
up-projection and a short K): the best variant is the fastest on the headline shape that is nowhere slower
than the current kernel (within 2%). Prints a table per round and shape and the best last; --json writes
every number with the machine (tools.results). Needs a GPU with TMA (Hopper or newer).
"""
from __future__ import annotations

import argparse
import sys
import time

import torch

import course
from kernels_ref import matmul as mm
from measure.timer import time_interleaved
from probes.probe_kernel_configs import NO_REGRESSION, _f, check

HEADLINE = (16384, 4096, 4096)
OTHER_SHAPES = ((16384, 11008, 4096), (8192, 4096, 1024))
TOP = 3                 # variants of a round carried to the next round and to the other shapes
DEFAULTS = {"EPILOGUE_SUBTILE": True, "GROUP_M": 8, "FLATTEN": True, "WARP_SPECIALIZE": False}
# (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps); shared memory per stage: (BM + BN) * BK * 2 bytes
TILES = [(128, 256, 64, 3, 8), (128, 256, 64, 4, 8), (256, 128, 64, 3, 8), (256, 128, 64, 4, 8),
         (128, 256, 128, 2, 8), (128, 128, 64, 4, 8), (128, 128, 64, 5, 4), (128, 128, 128, 3, 8),
         (128, 128, 64, 6, 8)]
KNOBS = [{"EPILOGUE_SUBTILE": False}, {"GROUP_M": 4}, {"GROUP_M": 16}, {"GROUP_M": 32},
         {"FLATTEN": False}, {"FLATTEN": False, "WARP_SPECIALIZE": True}, {"EPILOGUE_SUBTILE": False, "GROUP_M": 16},
         {"num_ctas": 2}]


def _name(p: dict) -> str:
    short = {"BLOCK_M": "", "BLOCK_N": "x", "BLOCK_K": "x", "num_stages": " s", "num_warps": " w",
             "EPILOGUE_SUBTILE": " sub", "GROUP_M": " g", "FLATTEN": " flat", "WARP_SPECIALIZE": " ws",
             "num_ctas": " ctas"}
    return "".join(f"{short[k]}{int(v) if isinstance(v, bool) else v}" for k, v in p.items() if k in short)


def variant(p: dict):
    config = {k: v for k, v in p.items() if k != "WARP_SPECIALIZE"}
    return lambda x, w, b: mm.linear_bias_gelu(x, w, b, kernel="tma", warp_specialize=p["WARP_SPECIALIZE"],
                                               config=config)


def tile_params(tile) -> dict:
    bm, bn, bk, stages, warps = tile
    return {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "num_stages": stages, "num_warps": warps, **DEFAULTS}


def baselines() -> dict:
    return {"cublas_matmul_only": lambda x, w, b: x @ w.t(), "eager": mm.linear_bias_gelu_torch,
            "addmm_gelu": mm.linear_bias_gelu_cublaslt, "current": mm.linear_bias_gelu}


def inputs_of(M: int, N: int, K: int):
    x = torch.randn(M, K, device=course.DEVICE, dtype=torch.bfloat16)
    w = torch.randn(N, K, device=course.DEVICE, dtype=torch.bfloat16) / K**0.5
    b = torch.randn(N, device=course.DEVICE, dtype=torch.bfloat16)
    return x, w, b


def probe(shape, variants: list[dict], reps: int, log=print) -> dict:
    """Check every variant on ``shape``, then time the correct ones beside the baselines."""
    M, N, K = shape
    inputs = inputs_of(M, N, K)
    ref = mm.linear_bias_gelu_torch(*(t.double() for t in inputs))
    rows, fns = {}, {}
    for name, fn in baselines().items():
        rows[name] = {"variant": name, "params": {}, "correct": True, "note": ""}
        fns[name] = fn
    for p in variants:
        checked = check(variant(p), inputs, ref)  # a config that does not compile or fit is noted, not fatal
        rows[_name(p)] = {"variant": _name(p), "params": p, "correct": checked.correct,
                          "note": "" if checked.correct else checked.note}
        if checked.correct:
            fns[_name(p)] = variant(p)
    del ref
    ms = time_interleaved(fns, inputs, reps=reps, warmup=3, max_seconds=20.0)
    flops = 2 * M * N * K
    for name, row in rows.items():
        row["ms"] = ms.get(name)
        if row["ms"] is not None:
            row["tflops"] = flops / (row["ms"] * 1e-3) / 1e12
            row["x_cublas"] = ms["cublas_matmul_only"] / row["ms"]
            row["x_eager"] = ms["eager"] / row["ms"]
            row["x_current"] = ms["current"] / row["ms"]
    picked = getattr(mm._matmul_tma_persistent_kernel, "best_config", None)
    result = {"shape": f"{M}x{N}x{K} bf16", "autotuned": str(picked) if picked else None,
              "rows": sorted(rows.values(), key=lambda r: (r["ms"] is None, r["ms"] or 0.0))}
    log(table(result), flush=True)
    return result


def table(result: dict) -> str:
    lines = [f"== linear_bias_gelu {result['shape']} (autotuner: {result['autotuned']})",
             f"{'variant':<46}{'ms':>8}{'TFLOP/s':>9}{'x cuBLAS':>9}{'x eager':>8}{'x cur':>7}  note"]
    for r in result["rows"]:
        lines.append(f"{r['variant'][:45]:<46}{_f(r['ms'], '.4f'):>8}{_f(r.get('tflops'), '.0f'):>9}"
                     f"{_f(r.get('x_cublas'), '.3f'):>9}{_f(r.get('x_eager'), '.3f'):>8}"
                     f"{_f(r.get('x_current'), '.3f'):>7}  " + ("" if r["correct"] else "FAILED " + r["note"]))
    return "\n".join(lines)


def fastest(result: dict, n: int) -> list[dict]:
    timed = [r for r in result["rows"] if r["ms"] is not None and r["params"]]
    return [r["params"] for r in timed[:n]]


def best(head: dict, others: list[dict]) -> dict:
    """The fastest variant on the headline shape that is nowhere else slower than current (NO_REGRESSION)."""
    def row(shape, name):
        return next((r for r in shape["rows"] if r["variant"] == name), None)

    for r in head["rows"]:
        if r["ms"] is None or not r["params"]:
            continue
        elsewhere = [row(s, r["variant"]) for s in others]
        if all(o is not None and o.get("x_current") is not None and o["x_current"] >= NO_REGRESSION for o in elsewhere):
            return {**r, "elsewhere_x_current": {s["shape"]: row(s, r["variant"])["x_current"] for s in others}}
    return {**row(head, "current"), "elsewhere_x_current": {}}


def host_cost(fns: dict, inputs) -> dict:
    """CPU microseconds per launch of each function (probes.matmul_launch_cost breaks the fused one down):
    when a launch costs more CPU time than the protocol's L2 flush takes on the GPU, the device waits for it
    and the timing includes it."""
    from measure.timer import cpu_us_per_call

    return {"us_per_call": {name: cpu_us_per_call(fn, *inputs) for name, fn in fns.items()}}


def run(quick: bool, reps: int, log=print) -> dict:
    tiles = TILES[:3] if quick else TILES
    t0 = time.perf_counter()
    round1 = probe(HEADLINE, [tile_params(t) for t in tiles], reps, log)
    seeds = fastest(round1, TOP)
    knobs = KNOBS[::2] if quick else KNOBS
    round2 = probe(HEADLINE, seeds + [{**p, **k} for p in seeds for k in knobs], reps, log)
    carried = fastest(round2, TOP)
    others = [probe(shape, carried, reps, log) for shape in OTHER_SHAPES]
    chosen = best(round2, others)
    host = host_cost({"current": mm.linear_bias_gelu, "best": variant(chosen["params"]) if chosen["params"]
                      else mm.linear_bias_gelu, "cublas_matmul_only": baselines()["cublas_matmul_only"]},
                     inputs_of(*HEADLINE))
    log("CPU us per launch: " + ", ".join(f"{k} {v:.1f}" for k, v in host["us_per_call"].items()))
    return {"rounds": [round1, round2], "others": others, "best": chosen, "host": host,
            "seconds": time.perf_counter() - t0}


def main(argv=None) -> int:
    from measure.files import write_json_atomic
    from tools.results import this_machine

    p = argparse.ArgumentParser(prog="python -m probes.probe_matmul_configs", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="three tiles and every other knob")
    p.add_argument("--json", metavar="PATH", help="write every row, the best variant and the machine here")
    p.add_argument("--reps", type=int, default=30, help="timed repetitions per variant (default 30)")
    args = p.parse_args(argv)
    if not course.ON_GPU or torch.cuda.get_device_capability()[0] < 9:
        print("probes.probe_matmul_configs needs a GPU with TMA (Hopper or newer); this machine has none")
        return 2
    print(course.describe(), flush=True)
    torch.manual_seed(0)
    method = "python -m probes.probe_matmul_configs " + " ".join(argv if argv is not None else sys.argv[1:])
    record = {**this_machine(), "method": method.strip(), **run(args.quick, args.reps)}
    b = record["best"]
    print(f"best: {b['variant']}: {b['ms']:.4f} ms, {b['tflops']:.0f} TFLOP/s, {b['x_cublas']:.3f}x bare cuBLAS, "
          f"{b['x_eager']:.3f}x eager, {b['x_current']:.3f}x current; elsewhere x current {b['elsewhere_x_current']}")
    if args.json:
        write_json_atomic(args.json, record, nonfinite_as_null=True)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
