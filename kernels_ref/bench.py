"""The benchmark suite: ``python -m kernels_ref.bench [--quick] [--json FILE] [--ops a,b] [--clock gpu]``.

Collects ``bench_cases(quick)`` from every reference module the course manifest names
(``course.manifest``; a module that is not there yet is skipped with a note), runs them with kernels_ref.benchmarking.run_suite on the GPU, prints one table per
op with the goal verdicts, and with --json writes the results and one plot per op next to the file
(``bench-quick.json`` -> ``bench-quick-matmul.png``, ...; a run's folder of results/ holds both).
Without a GPU it exits with code 2 and one line saying so.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

import course  # noqa: F401  (before any kernel module)
from course import manifest
from kernels_ref import benchmarking

# Op modules in the order their tables are printed: the course's order.
MODULES = tuple(manifest.reference_modules())


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m kernels_ref.bench", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="a small subset: the headline shape of each op")
    p.add_argument("--json", metavar="FILE", help="write results here, and one PNG plot per op beside it")
    p.add_argument("--ops", metavar="a,b", type=lambda s: [o.strip() for o in s.split(",") if o.strip()],
                   help="only these ops (e.g. softmax,layer_norm_fwd); default: all")
    p.add_argument("--no-progress", action="store_true", help="no tqdm progress bar")
    p.add_argument("--clock", choices=("protocol", "gpu"), default="protocol",
                   help="gpu: time every case by the GPU's work alone, its launch hidden (labels say 'GPU time'); "
                        "default: the protocol, which charges a launch that outlasts the L2 flush")
    return p.parse_args(argv)


def on_gpu_clock(cases):
    """The timed cases re-labelled and timed by the GPU's time alone (BenchCase.clock "gpu")."""
    import dataclasses

    timed_so = {(c.op, c.label) for c in cases if c.clock == "gpu"}  # e.g. linear_bias_gelu's own GPU-time case
    moved = []
    for c in cases:
        if c.metric == "time" and c.clock != "gpu":
            c = dataclasses.replace(c, label=f"{c.label} GPU time", clock="gpu")
            if (c.op, c.label) in timed_so:  # that case times it already: one row per label
                continue
        moved.append(c)
    return moved


def collect_cases(quick: bool, ops: list[str] | None = None, modules=MODULES):
    """(cases, notes): every module's bench cases, filtered by op name; missing modules become notes."""
    cases, notes = [], []
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:  # the module exists but something it imports does not: a real error
                raise
            notes.append(f"skipped {name}: not written yet")
            continue
        if not hasattr(module, "bench_cases"):
            notes.append(f"skipped {name}: it has no bench_cases(quick)")
            continue
        cases.extend(module.bench_cases(quick))
    if ops:
        known = {c.op for c in cases}
        unknown = [o for o in ops if o not in known]
        if unknown:
            raise SystemExit(f"unknown op(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        cases = [c for c in cases if c.op in ops]
    return cases, notes


def main(argv=None, *, timer=None, peak_memory=None, ceilings=None, modules=MODULES, gpu_timer=None) -> int:
    """Run the suite. timer/gpu_timer/peak_memory/ceilings are injected by tests (no GPU needed then)."""
    args = parse_args(argv)
    injected = timer is not None
    if not injected and not course.ON_GPU:
        print("kernels_ref.bench needs a CUDA GPU: none found here (correctness runs in `pytest`).", file=sys.stderr)
        return 2
    cases, notes = collect_cases(args.quick, args.ops, modules)
    if args.clock == "gpu":
        cases = on_gpu_clock(cases)
    for note in notes:
        print(note)
    print(course.describe(), flush=True)
    meta = {"quick": args.quick, "ops": args.ops, "notes": notes, "clock": args.clock}

    def on_case(ceilings, rows, verdicts, case_rows, case_verdicts):
        if args.no_progress:  # no bar: show each case as it finishes
            print(benchmarking.format_table(case_rows, case_verdicts), flush=True)
        if args.json:  # keep what is finished if the run is cut off
            benchmarking.write_json(args.json, ceilings, rows, verdicts, meta={**meta, "partial": True})

    ceilings, rows, verdicts = benchmarking.run_suite(
        cases,
        ceilings=ceilings,
        timer=timer or benchmarking.default_timer,
        gpu_timer=gpu_timer or timer or benchmarking.default_gpu_timer,
        peak_memory=peak_memory or benchmarking.default_peak_memory,
        progress=not args.no_progress,
        on_case=on_case,
    )
    print(f"ceilings: copy {ceilings.copy_gbps:.0f} GB/s, bf16 matmul {ceilings.matmul_tflops:.0f} TFLOP/s")
    print(benchmarking.format_table(rows, verdicts))
    if args.json:
        benchmarking.write_json(args.json, ceilings, rows, verdicts, meta=meta)
        stem = os.path.splitext(os.path.basename(args.json))[0]
        plots = benchmarking.write_plots(os.path.dirname(os.path.abspath(args.json)), rows, ceilings,
                                         prefix=f"{stem}-")
        print(f"wrote {args.json}" + (f" and {len(plots)} plot(s)" if plots else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
