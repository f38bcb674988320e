"""Notebook 09's claims measured in one run: ``python -m tools.capstone_gpu OUT_DIR [--quick] [--only a,b]``.

Sections (``--only`` picks some; all by default), each checked for correctness before it is timed:
- ``loss``: linear_cross_entropy forward + backward (M8192 H4096 V128256 bf16) against eager and torch.compile:
  the loss and both gradients against float64 (chunked), then time (interleaved medians) and peak memory;
  the goals: at most 0.25x eager's peak, at least 0.9x its speed.
- ``train``: the training step of ``kernels_ref.gpt`` (8 blocks of D1024, GPT-2's vocabulary 50257, B8 S1024
  bf16) for eager, torch.compile, the course's kernels and the course's with one step at a time done eagerly
  (which kernel earns what): step ms, tokens/s, peak memory, kernels launched; the course's loss and
  gradients checked against float64 at a small size first, beside eager's own error. Goals: 1.15x eager's
  step time, at most 0.6x its peak.
- ``prefill``: the block at B1 S2048 D1024 (launch-bound) and B8 S2048 D2048 (busy), for 01's naive block
  (materialized S x S attention, separate ops), eager, torch.compile, the course's block, and CUDA graphs of
  eager and the course's; checked against float64 first.
- ``decode``: one token after 2048 (B1 and B8, D1024) for the naive step, eager and the course's, launched
  and as CUDA graphs.
- the claims (1.72-2.22x prefill, 1.1-1.5x decode) against what they compare, each verdict computed here.

Writes OUT_DIR/capstone.json (GPU, driver, versions, date, method, every number; after each section) and
OUT_DIR/capstone.md (the tables); prints the tables last. Autotuning is capped (COURSE_AUTOTUNE_MAX, 4 unless
set). Without a GPU it runs every section at tiny sizes under the Triton interpreter (a smoke test: times
there say nothing about a GPU). About 6-8 minutes on an H100, most of it compiling and autotuning.
"""
from __future__ import annotations

import argparse
import math
import os
import pathlib

os.environ.setdefault("COURSE_AUTOTUNE_MAX", "4")

import course  # noqa: E402  (after the autotuning cap, before any kernel)
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from measure import reference  # noqa: E402
from measure.files import environment, write_json_atomic  # noqa: E402
from tools.results import header  # noqa: E402
from measure.memory import peak_bytes  # noqa: E402
from measure.timer import bench_interleaved, graph_replay  # noqa: E402
from measure.tolerance import compare  # noqa: E402

SECTIONS = ("loss", "train", "prefill", "decode")
CLAIMS = {"prefill": (1.72, 2.22), "decode": (1.1, 1.5)}
METHOD = ("correctness first (float64 references, measure.tolerance); times: measure.timer.bench_interleaved "
          "(warm-up, L2 flushed before each repetition, candidates in turns, medians); peak: "
          "measure.memory.peak_bytes (the CUDA allocator's peak of one call above what was allocated before); "
          "kernels: torch.profiler's CUDA events of one call; CUDA graphs: measure.timer.graph_replay; "
          f"autotuning capped at COURSE_AUTOTUNE_MAX={os.environ['COURSE_AUTOTUNE_MAX']} configs")


def sizes(quick: bool) -> dict:
    """Every size of the run: a GPU's (the issue's), or tiny ones for the interpreter."""
    from kernels_ref.gpt import GPTConfig

    if not course.ON_GPU:
        return {"loss": (64, 16, 2048), "train": (GPTConfig(1, 32, 2, 128), 1, 16), "check": (GPTConfig(1, 32, 2, 96), 1, 8),
                "prefill": [(1, 16, 32, 2)], "decode": [(1, 16, 32, 2)]}
    return {"loss": (8192, 4096, 128256), "train": (GPTConfig(8, 1024, 16, 50257), 8, 1024),
            "check": (GPTConfig(2, 256, 4, 1000), 2, 256),
            "prefill": [(1, 2048, 1024, 16)] + ([] if quick else [(8, 2048, 2048, 16)]),
            "decode": [(1, 2048, 1024, 16)] + ([] if quick else [(8, 2048, 1024, 16)])}


def checked(name, fn, args, ref, tolerances=None) -> dict:
    """fn(*args) against the float64 ``ref``: {ok, max_error[, error]}; a candidate that fails to run (e.g.
    torch.compile on this machine) is reported and not timed, never fatal."""
    try:
        out = fn(*args)
    except Exception as exc:  # noqa: BLE001
        print(f"  {name}: could not run ({type(exc).__name__}: {str(exc).splitlines()[0][:200]}); not timed")
        return {"ok": False, "max_error": None, "error": f"{type(exc).__name__}: {exc}"[:500]}
    ok, err, msg = compare(list(out) if isinstance(out, tuple) else out, ref, tolerances)
    if not ok:
        print(f"  {name}: WRONG against float64 ({msg}); not timed")
    return {"ok": bool(ok), "max_error": err}


def timed_rows(fns: dict, args: tuple, checks: dict, kernels=True) -> dict:
    """{name: {ms, peak_bytes, kernels, check}} for the candidates that passed their check."""
    from kernels_ref.gpt import count_kernels

    good = {n: f for n, f in fns.items() if checks.get(n, {"ok": True})["ok"]}
    ms = bench_interleaved(good, *args) if good else {}
    rows = {}
    for name, fn in fns.items():
        row = {"check": checks.get(name)}
        if name in good:
            row.update(ms=ms[name], peak_bytes=peak_bytes(fn, *args),
                       kernels=count_kernels(lambda fn=fn: fn(*args)) if kernels else None)
        rows[name] = row
    return rows


def ratio(rows, a, b, key="ms"):
    """rows[b][key] / rows[a][key]: above 1 means a is faster (or leaner)."""
    try:
        return rows[b][key] / rows[a][key]
    except (KeyError, TypeError, ZeroDivisionError):
        return None


# ------------------------------------------------------------------------------------------- sections

def section_loss(sz) -> dict:
    from kernels_ref.cross_entropy import linear_cross_entropy, linear_cross_entropy_reference, linear_cross_entropy_torch

    M, H, V = sz["loss"]
    dtype = torch.bfloat16 if course.ON_GPU else torch.float32
    x = torch.randn(M, H, device=course.DEVICE, dtype=dtype)
    w = (torch.randn(V, H, device=course.DEVICE) * H ** -0.5).to(dtype)
    t = torch.randint(0, V, (M,), device=course.DEVICE)

    def fwd_bwd(loss_fn):
        def run(x, w, t):
            xl, wl = x.detach().requires_grad_(), w.detach().requires_grad_()
            loss = loss_fn(xl, wl, t)
            loss.backward()
            return loss.detach(), xl.grad, wl.grad
        return run

    fns = {"eager": fwd_bwd(linear_cross_entropy_torch), "course": fwd_bwd(linear_cross_entropy)}
    if course.ON_GPU:
        fns["torch.compile"] = fwd_bwd(torch.compile(linear_cross_entropy_torch))
    ref = linear_cross_entropy_reference(x, w, t)
    checks = {n: checked(f"loss {n}", f, (x, w, t), list(ref)) for n, f in fns.items()}
    rows = timed_rows(fns, (x, w, t), checks, kernels=False)
    return {"shape": f"M{M} H{H} V{V} {str(dtype)[6:]}", "rows": rows,
            "speed_vs_eager": ratio(rows, "course", "eager"),
            "memory_vs_eager": None if ratio(rows, "course", "eager", "peak_bytes") is None
            else 1 / ratio(rows, "course", "eager", "peak_bytes"),
            "goals": {"memory at most 0.25x eager's": 0.25, "speed at least 0.9x eager's": 0.9}}


def section_train(sz) -> dict:
    from kernels_ref import gpt

    cfg_c, Bc, Sc = sz["check"]
    dtype = torch.bfloat16 if course.ON_GPU else torch.float32
    params = gpt.make_gpt(cfg_c, dtype)
    batch = gpt.make_batch(cfg_c, Bc, Sc)
    errors = {}
    for name, ops in (("eager", gpt.EAGER), ("course", gpt.COURSE)):
        loss_err, errs = gpt.float64_check(params, *batch, ops)
        errors[name] = {"loss": loss_err, "worst_gradient_relative": max(e / max(m, 1e-30) for _, e, m in errs)}
    # A training step is as right as eager's when its error against float64 is of the same size.
    check_ok = errors["course"]["worst_gradient_relative"] <= 2 * errors["eager"]["worst_gradient_relative"] + 1e-3
    cfg, B, S = sz["train"]
    variants = gpt.step_variants(compiled=course.ON_GPU)
    graphs = ("eager", "eager, padded vocabulary", "course")
    rows = gpt.measure_training_step(cfg, B, S, variants, dtype, graphs=graphs) if check_ok else []
    profiles = {}
    if check_ok:  # where each step's time goes: its kernels (and the device's idle time) for eager and the course's
        params, (tokens, targets) = gpt.make_gpt(cfg, dtype), gpt.make_batch(cfg, B, S)
        for name in ("eager", "course"):
            profiles[name] = gpt.where_time_goes(lambda fn=variants[name]: fn(params, tokens, targets))
    return {"shape": f"{cfg.label()} B{B} S{S} {str(dtype)[6:]}", "check_size": f"{cfg_c.label()} B{Bc} S{Sc}",
            "float64_errors": errors, "check_ok": check_ok, "rows": rows, "profiles": profiles,
            "goals": {"step time at least 1.15x eager's": 1.15, "peak at most 0.6x eager's": 0.6}}


def _graphed(fns: dict, args, checks: dict) -> dict:
    """CUDA graphs of eager's and the course's versions (those that passed their check); a capture that fails
    is reported, not fatal."""
    graphs = {}
    for n in ("eager", "course"):
        if not course.ON_GPU or not checks[n]["ok"]:
            continue
        try:
            graphs[f"{n}, CUDA graph"] = graph_replay(fns[n], *args)
        except Exception as exc:  # noqa: BLE001
            print(f"  {n}: no CUDA graph ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})")
    return graphs


def section_prefill(sz) -> list[dict]:
    from autograder.specs.nb09_capstone import BLOCK_TOLERANCES, naive_block
    from kernels_ref.transformer_block import make_params, transformer_block, transformer_block_torch

    out = []
    for B, S, D, H in sz["prefill"]:
        dtype = torch.bfloat16 if course.ON_GPU else torch.float32
        x = torch.randn(B, S, D, device=course.DEVICE, dtype=dtype)
        p = make_params(D, H, dtype)
        fns = {"naive (01)": naive_block, "eager": transformer_block_torch, "course": transformer_block}
        if course.ON_GPU:
            fns["torch.compile"] = torch.compile(transformer_block_torch)
        ref = reference.transformer_block(x, p)
        checks = {n: checked(f"prefill {n}", f, (x, p), ref, BLOCK_TOLERANCES) for n, f in fns.items()}
        fns.update(_graphed(fns, (x, p), checks))
        rows = timed_rows(fns, (x, p), checks)
        out.append({"shape": f"B{B} S{S} D{D} H{H} {str(dtype)[6:]}", "rows": rows,
                    "flops": 2 * B * S * 12 * D * D + 2 * B * S * S * D})
    return out


def section_decode(sz) -> list[dict]:
    from kernels_ref.transformer_block import (BENCH_TOLERANCES, decode_reference, decode_step, decode_step_naive,
                                               decode_step_torch, make_params)

    out = []
    for B, context, D, H in sz["decode"]:
        dtype = torch.bfloat16 if course.ON_GPU else torch.float32
        caches = [torch.randn(B, H, context + 1, D // H, device=course.DEVICE, dtype=dtype) for _ in range(2)]
        x = torch.randn(B, 1, D, device=course.DEVICE, dtype=dtype)
        p = make_params(D, H, dtype)
        steps = {"naive (01)": decode_step_naive, "eager": decode_step_torch, "course": decode_step}
        fns = {n: (lambda x, p, kc, vc, f=f: f(x, p, kc, vc, context)) for n, f in steps.items()}
        ref = decode_reference(x, p, *caches, context)
        checks = {n: checked(f"decode {n}", f, (x, p, *caches), ref, BENCH_TOLERANCES) for n, f in fns.items()}
        fns.update(_graphed(fns, (x, p, *caches), checks))
        out.append({"shape": f"B{B} context{context} D{D} H{H} {str(dtype)[6:]}",
                    "rows": timed_rows(fns, (x, p, *caches), checks)})
    return out


def claims(results: dict) -> list[dict]:
    """Each claim against each thing it could be compared with, the verdict computed from the numbers."""
    out = []
    for name, key in (("prefill", "prefill"), ("decode", "decode")):
        low, high = CLAIMS[name]
        for case in results.get(key, []):
            rows = case["rows"]
            pairs = [("course", "naive (01)"), ("course", "eager"), ("course, CUDA graph", "eager, CUDA graph"),
                     ("course, CUDA graph", "eager")]
            for ours, theirs in pairs:
                r = ratio(rows, ours, theirs)
                if r is None:
                    continue
                where = "within" if low <= r <= high else ("below" if r < low else "above")
                out.append({"claim": name, "shape": case["shape"], "compares": f"{ours} vs {theirs}", "speedup": r,
                            "range": [low, high], "verdict": f"{r:.2f}x is {where} {low}-{high}x"})
    return out


# ------------------------------------------------------------------------------------------- report

def _fmt_bytes(n):
    from measure.memory import fmt_bytes

    return fmt_bytes(n) if n is not None else "-"


def tables(results: dict) -> str:
    lines = []
    if "loss" in results:
        r = results["loss"]
        lines += [f"## linear_cross_entropy, forward + backward, {r['shape']}", "",
                  "| variant | ms | peak | float64 check |", "| --- | ---: | ---: | --- |"]
        lines += [f"| {n} | {row.get('ms', math.nan):.3f} | {_fmt_bytes(row.get('peak_bytes'))} | "
                  f"{'ok' if row['check']['ok'] else 'WRONG'} |" for n, row in r["rows"].items()]
        lines += ["", f"course: {_num(r['speed_vs_eager'])}x eager's speed (goal 0.9x), "
                      f"{_num(r['memory_vs_eager'])}x its peak (goal 0.25x)", ""]
    if "train" in results:
        r = results["train"]
        lines += [f"## training step (forward + backward), {r['shape']}", "",
                  f"float64 check at {r['check_size']}: course's worst gradient error "
                  f"{r['float64_errors']['course']['worst_gradient_relative']:.2e} of its scale, eager's "
                  f"{r['float64_errors']['eager']['worst_gradient_relative']:.2e}: {'ok' if r['check_ok'] else 'WRONG'}", "",
                  "| variant | ms | host ms | tokens/s | TFLOP/s | peak | kernels | vs eager | memory vs eager |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        lines += [f"| {w['variant']} | {w['ms']:.2f} | {_num(w.get('host_ms'))} | {w['tokens_per_s']:.0f} | "
                  f"{w['tflops']:.1f} | {_fmt_bytes(w['peak_bytes'])} | {w['kernels']} | "
                  f"{_num(w['speedup_vs_eager'])}x | {_num(w['memory_vs_eager'])}x |" for w in r["rows"]]
        lines += ["", "host ms: the host's time to launch one step; a step whose host time is its whole time waits "
                      "for its launches, not for the GPU."]
        lines.append("")
        for name, prof in r.get("profiles", {}).items():
            lines += [f"where {name}'s step goes (one profiled step): {prof['wall_ms']:.2f} ms wall, "
                      f"{prof['kernel_ms']:.2f} ms in kernels", "", "| kernel | ms | launches |", "| --- | ---: | ---: |"]
            lines += [f"| `{k['kernel']}` | {k['ms']:.3f} | {k['launches']} |" for k in prof["top"]]
            lines.append("")
    for key in ("prefill", "decode"):
        for case in results.get(key, []):
            lines += [f"## {key}, {case['shape']}", "", "| variant | ms | vs eager | kernels | peak |",
                      "| --- | ---: | ---: | ---: | ---: |"]
            for n, row in case["rows"].items():
                lines.append(f"| {n} | {row.get('ms', math.nan):.4f} | {_num(ratio(case['rows'], n, 'eager'))}x | "
                             f"{row.get('kernels', '-')} | {_fmt_bytes(row.get('peak_bytes'))} |")
            lines.append("")
    if results.get("claims"):
        lines += ["## the claims", ""] + [f"- {c['claim']} {c['shape']}, {c['compares']}: {c['verdict']}"
                                          for c in results["claims"]]
    return "\n".join(lines) + "\n"


def _num(v):
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.2f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.capstone_gpu", description=__doc__.splitlines()[0])
    ap.add_argument("out", type=pathlib.Path, help="folder for capstone.json and capstone.md")
    ap.add_argument("--quick", action="store_true", help="the launch-bound prefill and B1 decode only")
    ap.add_argument("--only", type=lambda s: [p.strip() for p in s.split(",") if p.strip()], default=list(SECTIONS),
                    help=f"some of {','.join(SECTIONS)}")
    args = ap.parse_args(argv)
    unknown = set(args.only) - set(SECTIONS)
    if unknown:
        ap.error(f"unknown section(s) {sorted(unknown)}; the sections are {','.join(SECTIONS)}")
    args.out.mkdir(parents=True, exist_ok=True)
    sz = sizes(args.quick)
    results = environment(METHOD)
    run = {"loss": section_loss, "train": section_train, "prefill": section_prefill, "decode": section_decode}
    for name in SECTIONS:
        if name in args.only:
            print(f"[{name}]", flush=True)
            results[name] = run[name](sz)
            results["claims"] = claims(results)
            write_json_atomic(args.out / "capstone.json", results, nonfinite_as_null=True)
    text = tables(results)
    (args.out / "capstone.md").write_text(header(results, prefix="- ") + "\n" + text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
