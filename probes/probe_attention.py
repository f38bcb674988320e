"""The FlashAttention forward's two ways of reading keys and values, timed config by config beside cuDNN;
with --backward, the backward's kernels one by one and a one-kernel backward with atomic dQ.

    python -m probes.probe_attention [--backward | --decode] [--shapes B,H,S,D;...] [--json PATH]

For each shape (bf16, causal and not) the forward kernel runs with pointer loads and with TMA loads of
its key and value tiles (``flash_attention_fwd(kernel=...)``), first through the autotuner, then pinned
to each of its configs; every output is compared with cuDNN's (normwise, bf16's tolerance) before it is
timed, and all are timed together by the course's protocol (measure.timer: interleaved medians, L2
flushed) beside PyTorch's flash and cuDNN attention. Prints one table per case, TFLOP/s and the ratio to
cuDNN, and with --json writes every number with the machine (tools.results). A GPU of compute capability
9 or newer only: the TMA loads need Hopper.

--backward: the reference backward (two kernels: dK and dV by key tile, then dQ by query tile, 7 matmuls
of work for the 5 counted), each of its kernels alone, and ``_bwd_atomic_kernel`` (one program per key
tile adds its share of dQ into a float32 buffer with atomics: 5 matmuls, not deterministic), config by
config, beside PyTorch's flash and cuDNN backward (autograd on a graph built once). Each row gives TFLOP/s
of the counted 5 matmuls and of the matmuls it executes.

--decode: the decode step's attention (``kernels_ref.transformer_block.decode_attention``: one query per
head against a cache of L keys, split along the cache and merged) as it launches and with each of
DECODE_VARIANTS (keys per step, programs per SM, warps, stages), beside PyTorch's SDPA.
"""
from __future__ import annotations

import argparse
import sys
import time

import course
import torch
import triton
import triton.language as tl

from course.triton_compat import dot
from kernels_ref import flash_attention as fa
from kernels_ref._triton_math import LOG2E
from probes.args import shape_list

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


# ----------------------------------------------------------------------------- backward

@triton.jit
def _atomic_tiles(dk, dv, k, v, Q, DO, LSE, DELTA, DQ, base, row_base, offs_n, lo, hi, sm_scale, qk_scale,
                  HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, MASK_CAUSAL: tl.constexpr):
    """The reference's dK/dV loop (keys along rows) plus this tile's share of dQ = dS K, added atomically."""
    offs_m = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    for start_m in range(lo, hi, BLOCK_M):
        rows = start_m + offs_m
        qt = tl.load(Q + base + rows[None, :] * HEAD_DIM + offs_d[:, None])       # Q^T [D, BLOCK_M]
        do = tl.load(DO + base + rows[:, None] * HEAD_DIM + offs_d[None, :])      # dO  [BLOCK_M, D]
        lse = tl.load(LSE + row_base + rows)
        delta = tl.load(DELTA + row_base + rows)
        st = dot(k, qt, tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)) * qk_scale
        if MASK_CAUSAL:
            st = tl.where(rows[None, :] >= offs_n[:, None], st, float("-inf"))
        pt = tl.exp2(st - (lse * LOG2E)[None, :])
        dv = dot(pt.to(do.dtype), do, dv)
        dpt = dot(v, tl.trans(do), tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32))
        dst = (pt * (dpt - delta[None, :])).to(qt.dtype)
        dk = dot(dst, tl.trans(qt), dk)
        dq = dot(tl.trans(dst), k, tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)) * sm_scale
        # relaxed: only the sum matters, no other memory is ordered by it (the default, acq_rel, fences)
        tl.atomic_add(DQ + base + rows[:, None] * HEAD_DIM + offs_d[None, :], dq, sem="relaxed")
    return dk, dv


@triton.jit
def _bwd_atomic_kernel(Q, K, V, DO, LSE, DELTA, DK, DV, DQ, sm_scale, S, CAUSAL: tl.constexpr,
                       HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """One program per BLOCK_N keys of one (b, h), contiguous [B*H, S, D] inputs, S a multiple of both
    blocks: dK and dV stored once, dQ accumulated in float32 by every key tile (S / BLOCK_N adds each)."""
    start_n = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    base = bh * S * HEAD_DIM
    row_base = bh * S
    offs_n = start_n * BLOCK_N + tl.arange(0, BLOCK_N)
    kv = base + offs_n[:, None] * HEAD_DIM + tl.arange(0, HEAD_DIM)[None, :]
    k = tl.load(K + kv)
    v = tl.load(V + kv)
    qk_scale = sm_scale * LOG2E
    dk = tl.zeros((BLOCK_N, HEAD_DIM), dtype=tl.float32)
    dv = tl.zeros((BLOCK_N, HEAD_DIM), dtype=tl.float32)
    lo = 0
    if CAUSAL:  # query tiles before the diagonal never see these keys; those on it take the mask
        lo = start_n * BLOCK_N
        dk, dv = _atomic_tiles(dk, dv, k, v, Q, DO, LSE, DELTA, DQ, base, row_base, offs_n, lo, lo + BLOCK_N,
                               sm_scale, qk_scale, HEAD_DIM, BLOCK_M, BLOCK_N, True)
        lo = lo + BLOCK_N
    dk, dv = _atomic_tiles(dk, dv, k, v, Q, DO, LSE, DELTA, DQ, base, row_base, offs_n, lo, S,
                           sm_scale, qk_scale, HEAD_DIM, BLOCK_M, BLOCK_N, False)
    tl.store(DK + kv, (dk * sm_scale).to(DK.dtype.element_ty))
    tl.store(DV + kv, dv.to(DV.dtype.element_ty))


def atomic_backward(bm: int, bn: int, warps: int, stages: int):
    """(dq, dk, dv) by ``_bwd_atomic_kernel``: delta first (the reference's), dQ's float32 sum cast last."""
    def run(q, k, v, do, o, lse, causal):
        B, H, S, D = q.shape
        if S % bn or S % bm or bn % bm or not all(t.is_contiguous() for t in (q, k, v, do, o)):
            raise ValueError(f"the atomic backward takes contiguous inputs, S a multiple of {bn} and {bm}")
        delta = fa._bwd_delta(o, do)
        dq = torch.zeros((B, H, S, D), device=q.device, dtype=torch.float32)
        dk, dv = torch.empty_like(k), torch.empty_like(v)
        _bwd_atomic_kernel[(S // bn, B * H)](q, k, v, do, lse, delta, dk, dv, dq, D ** -0.5, S, CAUSAL=causal,
                                              HEAD_DIM=D, BLOCK_M=bm, BLOCK_N=bn, num_warps=warps,
                                              num_stages=stages)
        return dq.to(q.dtype), dk, dv
    return run


def reference_part(part: str, causal: bool):
    """One of the reference backward's two main kernels alone, on the delta it needs (computed at the
    first call, outside the timed ones, and kept in ``state`` with the inputs). Its outputs are partial."""
    def run(q, k, v, do, o, lse, state):
        if "delta" not in state:
            state["delta"] = fa._bwd_delta(o, do)
            state["grads"] = tuple(torch.empty_like(q) for _ in range(3))
        dq, dk, dv = state["grads"]
        scale = q.shape[-1] ** -0.5
        if part == "dkdv":
            fa._launch_dkdv(q, k, v, do, lse, state["delta"], dk, dv, scale, causal)
        else:
            fa._launch_dq(q, k, v, do, lse, state["delta"], dq, scale, causal)
        return dq, dk, dv
    return run


# Candidates' matmuls of S x S x D each (the counted backward is 5): the reference recomputes QK^T and
# dO V^T in its dQ kernel; PyTorch's flash (FA2) and cuDNN add dQ up across key tiles instead.
MATMULS = {"reference": 7, "part dkdv": 4, "part dq": 3, "atomic": 5, "sdpa_flash": 5, "sdpa_cudnn": 5}
ATOMIC_CONFIGS = ((64, 128, 8, 2), (64, 128, 8, 1), (32, 128, 8, 2), (32, 128, 4, 2), (64, 64, 4, 2))
BWD_TOLERANCE = 2e-2  # normwise, bf16 gradients against cuDNN's (two bf16 roundings, P and dS, each side)


def matmuls(name: str) -> int:
    return next(n for prefix, n in MATMULS.items() if name.startswith(prefix))


def backward_candidates(causal: bool, atomic: bool = True) -> dict:
    """name -> fn(q, k, v, do, o, lse, state) -> (dq, dk, dv); "part" rows are timed, not checked."""
    out = {"reference (autotuned)": lambda q, k, v, do, o, lse, state:
           fa.flash_attention_bwd(do, q, k, v, o, lse, causal)}
    for part in ("dkdv", "dq"):
        out[f"part {part} (autotuned)"] = reference_part(part, causal)
    if atomic:
        for bm, bn, w, st in ATOMIC_CONFIGS:
            fn = atomic_backward(bm, bn, w, st)
            out[f"atomic {bm}x{bn} w{w} s{st}"] = (lambda q, k, v, do, o, lse, state, fn=fn:
                                                   fn(q, k, v, do, o, lse, causal))
    for name, backend in (("sdpa_flash", "FLASH_ATTENTION"), ("sdpa_cudnn", "CUDNN_ATTENTION")):
        out[name] = fa._grad_candidate(name, fa._sdpa(backend), causal)
    return out


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


def _measure(fns: dict, args: tuple, want, error, tolerance: float, timing: dict, timed_only=lambda name: False,
             after_first=lambda name: None) -> dict:
    """name -> row: each candidate run once (compiling and autotuning outside the timed calls) and its
    output checked against ``want`` by ``error``, then those that passed timed together by the course's
    protocol (measure.timer: interleaved medians, L2 flushed). A candidate that raises is reported."""
    from measure.timer import time_interleaved

    rows, timed = {}, {}
    for name, fn in fns.items():
        try:
            err = error(fn(*args), want)
            after_first(name)
            only = timed_only(name)
            rows[name] = {"candidate": name, "error": err, "correct": only or err <= tolerance,
                          "note": "timed only: not the whole output" if only else ""}
        except Exception as exc:  # noqa: BLE001  (a config that does not compile is reported, not fatal)
            rows[name] = {"candidate": name, "error": None, "correct": False,
                          "note": f"{type(exc).__name__}: {exc}".splitlines()[0][:200]}
        if rows[name]["correct"]:
            timed[name] = fn
    ms = time_interleaved({n: (lambda fn=fn: fn(*args)) for n, fn in timed.items()}, (), **timing)
    for name, row in rows.items():
        row["ms"] = ms.get(name)
        row["x_cudnn"] = None if row["ms"] is None or "sdpa_cudnn" not in ms else ms["sdpa_cudnn"] / row["ms"]
    return rows


def _case(label: str, flops: int, rows: dict, mm_flops=None, **extra) -> dict:
    """The case's record: rows fastest first, with TFLOP/s of ``flops`` (the counted work) and, given
    ``mm_flops(name)``, of the matmuls each candidate executes."""
    for name, row in rows.items():
        ms = row["ms"]
        row["tflops"] = None if ms is None else flops / (ms * 1e-3) / 1e12
        if mm_flops is not None:
            row["mm_tflops"] = None if ms is None else mm_flops(name) / (ms * 1e-3) / 1e12
    return {"case": label, "flops": flops, **extra,
            "rows": sorted(rows.values(), key=lambda r: (r["ms"] is None, r["ms"] or 0.0))}


def _inputs(B, H, S, D):
    torch.manual_seed(0)
    return tuple(torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))


def _label_of(B, H, S, D, causal) -> str:
    return f"B{B} H{H} S{S} D{D}{' causal' if causal else ''} bf16"


def probe_case(B, H, S, D, causal, timing: dict, log=print) -> dict:
    q, k, v = _inputs(B, H, S, D)
    fns = candidates(causal, dissect=S % 128 == 0)
    want = fns["sdpa_cudnn"](q, k, v, causal)
    picked = {}

    def record_pick(name):
        if name.endswith("(autotuned)"):
            picked[name.split()[0]] = str(getattr(fa._fwd_kernel, "best_config", None))

    rows = _measure({n: (lambda q, k, v, fn=fn: fn(q, k, v, causal)) for n, fn in fns.items()}, (q, k, v), want,
                    _normwise, TOLERANCE, timing, timed_only=lambda name: name.startswith("gemms only"),
                    after_first=record_pick)
    case = _case(_label_of(B, H, S, D, causal), fa._fwd_flops(B, H, S, D, causal), rows, autotuned=picked)
    log(table(case), flush=True)
    return case


def probe_backward_case(B, H, S, D, causal, timing: dict, log=print) -> dict:
    q, k, v = _inputs(B, H, S, D)
    do = torch.randn_like(q)
    o, lse = fa.flash_attention_fwd(q, k, v, causal)
    fns = backward_candidates(causal, atomic=S % 128 == 0)
    state = {}  # the autograd candidates' graphs and the parts' delta, built at their first call
    args = (q, k, v, do, o, lse, state)
    want = fns["sdpa_cudnn"](*args)

    def error(got, want):
        return max(_normwise(g, w) for g, w in zip(got, want))

    rows = _measure(fns, args, want, error, BWD_TOLERANCE, timing, timed_only=lambda name: name.startswith("part"))
    matmul = fa._fwd_flops(B, H, S, D, causal) // 2  # one S x S x D matmul
    case = _case(_label_of(B, H, S, D, causal) + " backward", 5 * matmul, rows,
                 mm_flops=lambda name: matmuls(name) * matmul)
    log(table(case), flush=True)
    return case


DECODE_SHAPES = ((1, 16, 2049, 64), (8, 16, 2049, 64), (8, 32, 4097, 128))  # B, H, cache length, head dim
DECODE_VARIANTS = [{"BLOCK_N": bn, "per_sm": ps, "num_warps": w, "num_stages": st}
                   for bn in (64, 128) for ps in (2, 4, 8) for w in (2, 4, 8) for st in (3, 4)]


def decode_candidates() -> dict:
    """name -> fn(q, k, v) -> o [B, H, d]: the decode step's attention (one query per head against the
    whole cache, ``kernels_ref.transformer_block.decode_attention``) as it launches, then with each launch
    configuration; PyTorch's SDPA (its default choice, flash and cuDNN) on the same tensors."""
    from kernels_ref import transformer_block as tb

    out = {"reference": lambda q, k, v: tb.decode_attention(q, k, v, k.shape[2])}
    for cfg in DECODE_VARIANTS:
        label = "split {BLOCK_N} ps{per_sm} w{num_warps} s{num_stages}".format(**cfg)
        out[label] = lambda q, k, v, cfg=cfg: tb.decode_attention(q, k, v, k.shape[2], config=cfg)
    out["sdpa"] = lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(q[:, :, None], k, v)[:, :, 0]
    for name, backend in (("sdpa_flash", "FLASH_ATTENTION"), ("sdpa_cudnn", "CUDNN_ATTENTION")):
        out[name] = lambda q, k, v, fn=fa._sdpa(backend): fn(q[:, :, None], k, v, False)[:, :, 0]
    return out


def probe_decode_case(B, H, L, D, causal, timing: dict, log=print) -> dict:
    """One decode shape (``causal`` unused: one query sees the whole cache)."""
    torch.manual_seed(0)
    q = torch.randn(B, H, D, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(B, H, L, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    fns = decode_candidates()
    rows = _measure(fns, (q, k, v), fns["sdpa_cudnn"](q, k, v), _normwise, TOLERANCE, timing)
    case = _case(f"decode B{B} H{H} L{L} D{D} bf16", 4 * B * H * L * D, rows)
    log(table(case), flush=True)
    return case


def table(case: dict) -> str:
    executed = any("mm_tflops" in r for r in case["rows"])  # the backward's rows: matmuls executed too
    head = f"{'candidate':<30}{'ms':>9}{'TFLOP/s':>9}" + (f"{'mm TF/s':>9}" if executed else "")
    lines = [f"== {case['case']}", head + f"{'x cuDNN':>9}  note"]
    for r in case["rows"]:
        ms = "-" if r["ms"] is None else f"{r['ms']:.4f}"
        tf = "-" if r["tflops"] is None else f"{r['tflops']:.0f}"
        mm = "" if not executed else f"{'-' if r.get('mm_tflops') is None else format(r['mm_tflops'], '.0f'):>9}"
        x = "-" if r["x_cudnn"] is None else f"{r['x_cudnn']:.3f}"
        note = r["note"] or ("" if r["correct"] else f"WRONG: normwise {r['error']:.2e} vs cuDNN")
        lines.append(f"{r['candidate']:<30}{ms:>9}{tf:>9}{mm}{x:>9}  {note}")
    return "\n".join(lines)


def _kind(name: str) -> str:
    words = name.split()
    return " ".join(words[:2]) if words[0] == "part" else words[0]


def summary(cases: list[dict]) -> str:
    """The fastest row of each kind of candidate, per case: TFLOP/s and x cuDNN."""
    lines = []
    for case in cases:
        best = {}
        for r in case["rows"]:
            if r["ms"] is not None and _kind(r["candidate"]) not in best:
                best[_kind(r["candidate"])] = r
        lines.append(f"{case['case']:<45}" + "  ".join(
            f"{k} {r['tflops']:.0f} ({'-' if r['x_cudnn'] is None else format(r['x_cudnn'], '.3f')})"
            for k, r in best.items()))
    return "\n".join(lines)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m probes.probe_attention", description=__doc__.splitlines()[0])
    p.add_argument("--backward", action="store_true", help="probe the backward instead of the forward")
    p.add_argument("--decode", action="store_true",
                   help="probe the decode step's attention (shapes: B,H,cache length,D) instead of the forward")
    p.add_argument("--shapes", type=lambda t: shape_list(t, 4, ";", ","), default=None, metavar="B,H,S,D;...")
    p.add_argument("--json", metavar="PATH", help="write every row and the machine here")
    p.add_argument("--reps", type=int, default=30, help="timed repetitions per candidate")
    return p.parse_args(argv)


def main(argv=None) -> int:
    from measure.files import write_json_atomic
    from tools.results import this_machine

    args = parse_args(argv)
    if not course.ON_GPU or torch.cuda.get_device_capability()[0] < 9:
        print("probes.probe_attention needs a Hopper or newer GPU (TMA loads)", file=sys.stderr)
        return 2
    method = "python -m probes.probe_attention " + " ".join(argv if argv is not None else sys.argv[1:])
    record = {**this_machine(), "method": method.strip(), "cases": []}
    timing = {"reps": args.reps, "warmup": 3, "max_seconds": 10.0}
    probe = probe_decode_case if args.decode else probe_backward_case if args.backward else probe_case
    shapes = args.shapes or (DECODE_SHAPES if args.decode else SHAPES)
    t0 = time.perf_counter()
    for B, H, S, D in shapes:
        for causal in (False,) if args.decode else (False, True):
            record["cases"].append(probe(B, H, S, D, causal, timing))
            if args.json:  # what is finished survives a run cut off later
                write_json_atomic(args.json, record, nonfinite_as_null=True)
    print(f"\n== summary ({time.perf_counter() - t0:.0f} s): the fastest of each kind, TFLOP/s (x cuDNN)")
    print(summary(record["cases"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
