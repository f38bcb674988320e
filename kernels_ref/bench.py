"""The benchmark suite: ``python -m kernels_ref.bench [--quick] [--json FILE] [--ops a,b] [--clock gpu]``.

Collects ``bench_cases(quick)`` from every reference module the course manifest names
(``course.manifest``; a module that is not there yet is skipped with a note), runs them with kernels_ref.benchmarking.run_suite on the GPU, prints one table per
op with the goal verdicts, and with --json writes the results and one plot per op next to the file
(``bench-quick.json`` -> ``bench-quick-matmul.png``, ...; a run's folder of results/ holds both).
Without a GPU it exits with code 2 and one line saying so.

``--repeat N`` runs the selected suite N times, each run in a fresh process (:func:`repeat`): with --json
FILE, run k writes ``<FILE stem>-run<k>.json`` (and its plots) beside FILE, and FILE holds the summary:
each goal's value in every run, its worst (the minimum of a ``>=`` goal, the maximum of a ``<=`` one),
median and verdict (PASS only when every run passed). A run that crashes is reported in the summary and
the others are still summarised; a finished run of the same suite found beside FILE is kept, so a call cut
off by a time limit resumes (``--stop-after S`` starts no run that would end past S seconds); runs kept
from a call on another GPU or other versions make no distribution with these, and no goal passes then.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import course  # noqa: F401  (before any kernel module)
from course import manifest
from kernels_ref import benchmarking
from measure import files

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
    p.add_argument("--repeat", metavar="N", type=positive_int,
                   help="run the suite N times, each in a fresh process, and judge every goal on its worst run")
    p.add_argument("--stop-after", metavar="SECONDS", type=float,
                   help="with --repeat: start no run that would end past this many seconds (the longest run so far "
                        "as its estimate); a later call with the same --json resumes")
    return p.parse_args(argv)


def positive_int(text: str) -> int:
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"needs 1 or more, not {n}")
    return n


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


def main(argv=None, *, timer=None, peak_memory=None, ceilings=None, modules=MODULES, gpu_timer=None,
         run_once=None) -> int:
    """Run the suite. timer/gpu_timer/peak_memory/ceilings (and, for --repeat, run_once: one run's argument
    list -> its exit code) are injected by tests (no GPU needed then)."""
    args = parse_args(argv)
    injected = timer is not None or run_once is not None
    if not injected and not course.ON_GPU:
        print("kernels_ref.bench needs a CUDA GPU: none found here (correctness runs in `pytest`).", file=sys.stderr)
        return 2
    if args.repeat is not None:
        return repeat(args, run_once or run_child)
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


# ---------------------------------------------------------------------------------------------- --repeat

def child_args(args: argparse.Namespace, json_path: str) -> list[str]:
    """The arguments of one run of a repeated suite: the same suite, its own JSON file."""
    out = ["--quick"] if args.quick else []
    out += ["--ops", ",".join(args.ops)] if args.ops else []
    out += ["--clock", args.clock] + (["--no-progress"] if args.no_progress else [])
    return out + ["--json", json_path]


def run_child(argv: list[str]) -> int:
    """One run in a fresh Python process, its output passed through. Stopping this process (a time limit's
    SIGTERM, Ctrl-C) stops the run too: it must not go on holding the GPU unseen."""
    child = subprocess.Popen([sys.executable, "-m", "kernels_ref.bench", *argv])
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        return child.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)
        if child.poll() is None:
            child.terminate()
            child.wait()


def run_paths(summary: str, n: int) -> list[str]:
    """Run k's JSON file beside the summary: bench-quick.json -> bench-quick-run1.json, ..."""
    root, ext = os.path.splitext(summary)
    return [f"{root}-run{k}{ext or '.json'}" for k in range(1, n + 1)]


def read_run(path: str) -> dict | None:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def finished(data: dict | None, args: argparse.Namespace) -> bool:
    """A complete run of the same suite (kept when a repeated call resumes)."""
    return (data is not None and not data.get("partial") and "goals" in data
            and (data.get("quick"), data.get("ops"), data.get("clock")) == (args.quick, args.ops, args.clock))


def repeat(args: argparse.Namespace, run_once, clock=time.monotonic) -> int:
    """Run the suite args.repeat times and judge each goal on its distribution (benchmarking.summarise_runs).

    Each run is a fresh process, not a loop in this one: what changes between real runs must change here too
    (the autotuner's choice among near-equal configs, where the allocator and the CUDA context put things,
    clocks warming), and a crash (an illegal memory access poisons a CUDA context) ends one run, not the rest.
    Returns 0 when every run finished, 1 when one did not (its summary written all the same).
    """
    scratch = None if args.json else tempfile.TemporaryDirectory()
    summary_path = args.json or os.path.join(scratch.name, "bench.json")
    os.makedirs(os.path.dirname(os.path.abspath(summary_path)), exist_ok=True)
    records, verdicts, datas, goals, mixed = [], [], [], [], None
    started, longest = clock(), 0.0
    for k, path in enumerate(run_paths(summary_path, args.repeat), start=1):
        record = {"run": k, "file": os.path.basename(path)}
        data = read_run(path)
        if finished(data, args):
            record.update(exit=0, kept=True)
        else:
            if args.stop_after is not None and clock() - started + longest > args.stop_after:
                print(f"stopped before run {k} of {args.repeat}: it would end past {args.stop_after:g} s", flush=True)
                break
            if os.path.exists(path):  # a run cut off in an earlier call: start it again, never read its leftovers
                os.remove(path)
            print(f"== run {k} of {args.repeat} ==", flush=True)
            t0 = clock()
            record["exit"] = run_once(child_args(args, path))
            record["seconds"] = round(clock() - t0, 1)
            longest = max(longest, clock() - t0)
            data = read_run(path)
            problem = run_problem(record["exit"], data)
            if problem:
                record["error"] = problem
        records.append(record)
        verdicts.append(data.get("goals") if data else None)
        if data:
            datas.append(data)
        goals, mixed = judge(verdicts, datas, args.repeat)
        write_summary(summary_path, args, records, goals, datas, mixed)  # after every run: a call cut off keeps it
    if args.json:
        print(f"wrote {args.json} and {len(datas)} run file(s) beside it")
    if mixed:
        print(f"no goal passes: {mixed}")
    for r in records:  # a crashed run is named, never dropped silently
        if r.get("error"):
            print(f"run {r['run']} {r['error']}")
    print(f"\n== {len(records)} of {args.repeat} runs, each goal judged on its worst run ==")
    print(benchmarking.format_repeat_table(goals, args.repeat))
    if scratch is not None:
        scratch.cleanup()
    return 1 if any(r.get("error") for r in records) or len(records) < args.repeat or mixed else 0


MACHINE_KEYS = ("gpu", "torch", "triton")


def judge(verdicts: list, datas: list[dict], n: int) -> tuple[list[dict], str | None]:
    """Each goal over the runs, and why none may pass where the runs kept from earlier calls were measured on
    another machine than the others (a distribution of one GPU's runs, never of two)."""
    goals = benchmarking.summarise_runs(verdicts, n)
    machines = sorted({tuple(str(d.get(k)) for k in MACHINE_KEYS) for d in datas})
    if len(machines) < 2:
        return goals, None
    for g in goals:
        g["passed"] = False
    return goals, "the runs were measured on different machines: " + "; ".join(", ".join(m) for m in machines)


def run_problem(exit_code: int, data: dict | None) -> str | None:
    """What went wrong with one run, in words, or None."""
    if exit_code == 0 and data is not None and not data.get("partial"):
        return None
    how = "exited with code {}".format(exit_code) if exit_code >= 0 else f"was killed by signal {-exit_code}"
    if data is None:
        return f"{how} and left no results"
    done = len(data.get("goals", []))
    return f"{how} before it finished ({done} goal(s) measured, kept)" if data.get("partial") else how


def write_summary(path: str, args, records: list[dict], goals: list[dict], datas: list[dict],
                  mixed: str | None = None) -> None:
    """The repeated runs' summary: where (the runs' own machine keys), how, each run, each goal's distribution."""
    meta = next(({k: d.get(k) for k in ("gpu", "driver", "torch", "triton", "python", "date")} for d in datas), None)
    method = (f"{args.repeat} runs of python -m kernels_ref.bench, each in a fresh process, every goal judged on "
              f"its worst run; each run: {benchmarking.METHOD}")
    payload = {
        **(meta or files.environment("")), "method": method,
        "quick": args.quick, "ops": args.ops, "clock": args.clock, "repeat": args.repeat, "runs": records,
        "goals": goals, "goals_passed": sum(g["passed"] for g in goals), "goals_total": len(goals),
        **({"error": mixed} if mixed else {}),
    }
    files.write_json_atomic(path, payload, nonfinite_as_null=True)


if __name__ == "__main__":
    sys.exit(main())
