"""The FlashAttention forward's two ways of reading keys and values, timed config by config beside cuDNN.

    python -m tools.probe_attention [--shapes B,H,S,D;...] [--json PATH]

For each shape (bf16, causal and not) the forward kernel runs with pointer loads and with TMA loads of
its key and value tiles (``flash_attention_fwd(kernel=...)``), first through the autotuner, then pinned
to each of its configs; every output is compared with cuDNN's (normwise, bf16's tolerance) before it is
timed, and all are timed together by the course's protocol (measure.timer: interleaved medians, L2
flushed) beside PyTorch's flash and cuDNN attention. Prints one table per case, TFLOP/s and the ratio to
cuDNN, and with --json writes every number with the machine (tools.results). A GPU of compute capability
9 or newer only: the TMA loads need Hopper.
"""
from __future__ import annotations

import argparse
import sys
import time

import course
import torch
import triton
import triton.language as tl

from kernels_ref import flash_attention as fa
from kernels_ref._triton_math import LOG2E
from tools.args import shape_list

SHAPES = ((4, 32, 4096, 128), (2, 16, 8192, 128), (8, 32, 2048, 64))
# Where the forward's time goes, non-causal only: its two matmuls alone (the softmax left out: p = the
# scores, no max, exp or rescaling), and the full softmax with the scale folded into one FMA per score
# (Triton's tutorial's ordering). Two configs: the autotuner's usual winners on an H100.
DISSECT_CONFIGS = ((128, 128, 8, 3), (64, 64, 4, 3))


@triton.jit
def _dissect_kernel(Q, K, V, O, S, qk_scale, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                    BLOCK_N: tl.constexpr, SOFTMAX: tl.constexpr):
    """The forward's loop over key tiles for contiguous [B*H, S, D] inputs, S a multiple of both blocks."""
    start_m = tl.program_id(0)
    base = tl.program_id(1).to(tl.int64) * S * HEAD_DIM
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :])
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)
    for start_n in range(0, S, BLOCK_N):
        kt = tl.load(K + base + (start_n + offs_n)[None, :] * HEAD_DIM + offs_d[:, None])
        s = tl.dot(q, kt)
        if SOFTMAX:
            m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
            p = tl.exp2(s * qk_scale - m_new[:, None])
            alpha = tl.exp2(m_i - m_new)
            l_i = l_i * alpha + tl.sum(p, 1)
            acc = acc * alpha[:, None]
            m_i = m_new
        else:
            p = s
        v = tl.load(V + base + (start_n + offs_n)[:, None] * HEAD_DIM + offs_d[None, :])
        acc = tl.dot(p.to(v.dtype), v, acc)
    if SOFTMAX:
        acc = acc / l_i[:, None]
    tl.store(O + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], acc.to(O.dtype.element_ty))


def dissected(softmax: bool, bm: int, bn: int, warps: int, stages: int):
    def run(q, k, v, causal):
        B, H, S, D = q.shape
        o = torch.empty_like(q)
        _dissect_kernel[(S // bm, B * H)](q, k, v, o, S, D ** -0.5 * LOG2E, HEAD_DIM=D, BLOCK_M=bm, BLOCK_N=bn,
                                          SOFTMAX=softmax, num_warps=warps, num_stages=stages)
        return o
    return run


TOLERANCE = 1e-2    # normwise, bf16 against cuDNN (tests/test_kernels_flash_attention.py: GPU_NORMWISE_TOL)


def pinned(kernel: str, config):
    """The forward with ``kernel`` loads and the autotuner held to ``config`` (None: the autotuner)."""
    tuner = fa._fwd_kernel

    def run(q, k, v, causal):
        if config is None:
            return fa.flash_attention_fwd(q, k, v, causal, kernel=kernel)[0]
        # One config: the autotuner launches it without benchmarking. Its choices for the autotuned
        # candidates are kept aside, so those are never re-tuned inside a timed call.
        configs, cache = tuner.configs, dict(tuner.cache)
        tuner.configs = [config]
        tuner.cache.clear()
        try:
            return fa.flash_attention_fwd(q, k, v, causal, kernel=kernel)[0]
        finally:
            tuner.configs = configs
            tuner.cache.clear()
            tuner.cache.update(cache)
    return run


def _label(config) -> str:
    kw = config.kwargs
    return f"{kw['BLOCK_M']}x{kw['BLOCK_N']} w{config.num_warps} s{config.num_stages}"


def candidates(causal: bool = False, dissect: bool = True) -> dict:
    """name -> fn(q, k, v, causal) -> o: both kernels autotuned, then pinned to each config, the dissected
    loop (non-causal), then PyTorch's. "gemms only" computes no attention: it is timed, not checked."""
    out = {f"{kernel} (autotuned)": pinned(kernel, None) for kernel in ("pointer", "tma")}
    for config in list(getattr(fa._fwd_kernel, "configs", ())):  # the autotuner's (none when interpreting)
        for kernel in ("pointer", "tma"):
            out[f"{kernel} {_label(config)}"] = pinned(kernel, config)
    if dissect and not causal:
        for bm, bn, w, st in DISSECT_CONFIGS:
            out[f"fma-softmax {bm}x{bn} w{w} s{st}"] = dissected(True, bm, bn, w, st)
            out[f"gemms only {bm}x{bn} w{w} s{st}"] = dissected(False, bm, bn, w, st)
    out["sdpa_flash"] = fa._sdpa("FLASH_ATTENTION")
    out["sdpa_cudnn"] = fa._sdpa("CUDNN_ATTENTION")
    return out


def _normwise(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


def probe_case(B, H, S, D, causal, timing: dict, log=print) -> dict:
    from measure.timer import time_interleaved

    torch.manual_seed(0)
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    fns = candidates(causal, dissect=S % 128 == 0)
    want = fns["sdpa_cudnn"](q, k, v, causal)
    rows, timed, picked = {}, {}, {}
    for name, fn in fns.items():
        try:
            out = fn(q, k, v, causal)  # compiles (and autotunes) outside the timed calls
            if name.endswith("(autotuned)"):
                picked[name.split()[0]] = str(getattr(fa._fwd_kernel, "best_config", None))
            err = _normwise(out, want)
            timed_only = name.startswith("gemms only")
            rows[name] = {"candidate": name, "error": err, "correct": timed_only or err <= TOLERANCE,
                          "note": "not attention: timed only" if timed_only else ""}
        except Exception as exc:  # noqa: BLE001  (a config that does not compile is reported, not fatal)
            rows[name] = {"candidate": name, "error": None, "correct": False,
                          "note": f"{type(exc).__name__}: {exc}".splitlines()[0][:200]}
        if rows[name]["correct"]:
            timed[name] = fn
    ms = time_interleaved({n: (lambda fn=fn: fn(q, k, v, causal)) for n, fn in timed.items()}, (), **timing)
    flops = fa._fwd_flops(B, H, S, D, causal)
    for name, row in rows.items():
        row["ms"] = ms.get(name)
        row["tflops"] = None if row["ms"] is None else flops / (row["ms"] * 1e-3) / 1e12
        row["x_cudnn"] = None if row["ms"] is None or "sdpa_cudnn" not in ms else ms["sdpa_cudnn"] / row["ms"]
    case = {"case": f"B{B} H{H} S{S} D{D}{' causal' if causal else ''} bf16", "flops": flops, "autotuned": picked,
            "rows": sorted(rows.values(), key=lambda r: (r["ms"] is None, r["ms"] or 0.0))}
    log(table(case), flush=True)
    return case


def table(case: dict) -> str:
    lines = [f"== {case['case']}", f"{'candidate':<30}{'ms':>9}{'TFLOP/s':>9}{'x cuDNN':>9}  note"]
    for r in case["rows"]:
        ms = "-" if r["ms"] is None else f"{r['ms']:.4f}"
        tf = "-" if r["tflops"] is None else f"{r['tflops']:.0f}"
        x = "-" if r["x_cudnn"] is None else f"{r['x_cudnn']:.3f}"
        note = r["note"] or ("" if r["correct"] else f"WRONG: normwise {r['error']:.2e} vs cuDNN")
        lines.append(f"{r['candidate']:<30}{ms:>9}{tf:>9}{x:>9}  {note}")
    return "\n".join(lines)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tools.probe_attention", description=__doc__.splitlines()[0])
    p.add_argument("--shapes", type=lambda t: shape_list(t, 4, ";", ","), default=SHAPES, metavar="B,H,S,D;...")
    p.add_argument("--json", metavar="PATH", help="write every row and the machine here")
    p.add_argument("--reps", type=int, default=30, help="timed repetitions per candidate")
    return p.parse_args(argv)


def main(argv=None) -> int:
    from measure.files import write_json_atomic
    from tools.results import this_machine

    args = parse_args(argv)
    if not course.ON_GPU or torch.cuda.get_device_capability()[0] < 9:
        print("tools.probe_attention needs a Hopper or newer GPU (TMA loads)", file=sys.stderr)
        return 2
    method = "python -m tools.probe_attention " + " ".join(argv if argv is not None else sys.argv[1:])
    record = {**this_machine(), "method": method.strip(), "cases": []}
    timing = {"reps": args.reps, "warmup": 3, "max_seconds": 10.0}
    t0 = time.perf_counter()
    for B, H, S, D in args.shapes:
        for causal in (False, True):
            record["cases"].append(probe_case(B, H, S, D, causal, timing))
            if args.json:  # what is finished survives a run cut off later
                write_json_atomic(args.json, record, nonfinite_as_null=True)
    print(f"\n== summary ({time.perf_counter() - t0:.0f} s): the fastest of each kind, x cuDNN")
    for case in record["cases"]:
        best = {}
        for r in case["rows"]:
            kind = r["candidate"].split()[0]
            if r["ms"] is not None and kind not in best:
                best[kind] = r
        print(f"{case['case']:<36}" + "  ".join(f"{k} {r['tflops']:.0f} ({r['x_cudnn']:.3f})" for k, r in best.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
