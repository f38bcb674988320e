"""The benchmark suite's vocabulary (BenchCase, Goal) and its runner.

An op module (``kernels_ref.softmax``, ``kernels_ref.matmul``, ...) exposes ``bench_cases(quick) ->
list[BenchCase]``; ``kernels_ref.bench`` collects them and hands them to :func:`run_suite`, which

1. measures the machine's two ceilings in the same run (:func:`measure_ceilings`): device-to-device copy
   bandwidth (read + write bytes counted) and the bf16 matmul rate at 8192^3;
2. checks every candidate against the case's float64 reference before timing it (``measure.tolerance``:
   the course's one tolerance table, elementwise, NaN never passes); a wrong kernel of ours (a goal's
   candidate, or any "triton" candidate) is reported and not timed; a baseline (eager, torch.compile, a
   vendor library) whose outputs are off but finite is reported as off and timed all the same: it is what
   a user would run, and a goal against it needs its time;
3. times each candidate with the course's one timer protocol (``measure.timer.median_ms``: warm-up, L2
   flushed before every repetition, every stream waited for, median less an empty call's; torch.compile
   has already compiled during the check);
4. evaluates the case's goals (PASS / MISS) and returns rows that :func:`format_table`, :func:`write_json`
   and :func:`write_plots` turn into a table, a JSON file and one plot per op.

A case may ask for the GPU's time alone instead (``clock="gpu"``: the launch hidden behind a busy GPU,
``measure.timer.gpu_event_clock``), to tell a kernel's speed from its launcher's CPU cost; its label says so.
Timing, peak-memory measurement and the ceilings are injectable (``timer=``, ``gpu_timer=``, ``peak_memory=``,
``ceilings=``) so the suite's CPU-checkable parts are tested without a GPU.
"""
from __future__ import annotations

import math
import os
import re
import statistics
from dataclasses import asdict, dataclass, field
from typing import Callable, Sequence

import torch

from measure import files, memory, timer as course_timer
from measure.memory import tensors_in
from measure.tolerance import compare

COMPARISONS = (">=", "<=")


@dataclass(frozen=True)
class Goal:
    """One machine-checkable goal for one candidate of a case.

    ``quantity`` is one of
    - ``"ratio"``: ``value(baseline) / value(candidate)`` where value is the case's metric (milliseconds for
      ``metric="time"``, peak bytes for ``metric="peak_memory"``): above 1 means the candidate is faster
      (or uses less memory). ``Goal("triton", "ratio", ">=", 1.5, baseline="eager")`` = 1.5x eager.
    - ``"fraction_of_peak"``: achieved GB/s over the measured copy bandwidth (cases with ``nbytes``) or
      achieved TFLOP/s over the measured bf16 matmul rate (cases with ``flops``).
    The goal holds when ``quantity cmp threshold``; a goal whose numbers are missing (candidate failed its
    check, baseline absent) is a MISS, never a pass.
    """

    candidate: str
    quantity: str
    cmp: str
    threshold: float
    baseline: str | None = None

    def __post_init__(self):
        if self.quantity not in ("ratio", "fraction_of_peak"):
            raise ValueError(f"Goal.quantity must be 'ratio' or 'fraction_of_peak', not {self.quantity!r}")
        if self.cmp not in COMPARISONS:
            raise ValueError(f"Goal.cmp must be one of {COMPARISONS}, not {self.cmp!r}")
        if self.quantity == "ratio" and not self.baseline:
            raise ValueError("a 'ratio' goal needs a baseline candidate")

    @staticmethod
    def faster(candidate: str, baseline: str, by: float = 1.0) -> "Goal":
        """candidate at least ``by`` times faster (or leaner, for peak_memory cases) than baseline."""
        return Goal(candidate, "ratio", ">=", by, baseline)

    @staticmethod
    def peak(candidate: str, fraction: float) -> "Goal":
        """candidate reaches at least ``fraction`` of the measured ceiling."""
        return Goal(candidate, "fraction_of_peak", ">=", fraction)

    def describe(self) -> str:
        if self.quantity == "ratio":
            return f"{self.candidate}: {self.baseline}/{self.candidate} {self.cmp} {self.threshold:g}"
        return f"{self.candidate}: fraction of peak {self.cmp} {self.threshold:g}"


@dataclass
class BenchCase:
    op: str                                  # "softmax", "layer_norm_bwd", "flash_attention_fwd", ...
    label: str                               # "16384x4096 bf16"
    make_inputs: Callable[[], tuple]         # fresh random inputs on the course DEVICE
    candidates: dict[str, Callable]          # {"triton": ..., "eager": ..., "compiled": ..., "sdpa_flash": ...}; each takes *inputs
    reference: Callable | None = None        # float64 reference on the same inputs, to check every candidate before timing
    nbytes: int | None = None                # fewest bytes moved: memory-bound ops report GB/s and fraction of copy bandwidth
    flops: int | None = None                 # compute-bound ops report TFLOP/s and fraction of the bf16 matmul peak
    metric: str = "time"                     # "time" or "peak_memory"
    goals: list[Goal] = field(default_factory=list)  # machine-checkable goals, see Goal
    sweep: str | None = None                 # name of the swept parameter ("N") for the per-op plot
    sweep_value: float | None = None         # this case's value of the swept parameter (x axis of the plot)
    tolerances: dict | None = None           # {dtype: (atol, rtol)} overriding measure.tolerance (say why)
    clock: str = "protocol"                  # "protocol" (measure.timer: a launch that outlasts the flush counts)
                                             # or "gpu" (the GPU's time alone, the launch hidden: gpu_event_clock)

    def __post_init__(self):
        if self.metric not in ("time", "peak_memory"):
            raise ValueError(f"BenchCase.metric must be 'time' or 'peak_memory', not {self.metric!r}")
        if self.clock not in ("protocol", "gpu"):
            raise ValueError(f"BenchCase.clock must be 'protocol' or 'gpu', not {self.clock!r}")
        for goal in self.goals:
            for name in (goal.candidate, goal.baseline):
                if name is not None and name not in self.candidates:
                    raise ValueError(f"{self.op} {self.label}: goal names unknown candidate {name!r}")


@dataclass
class Ceilings:
    copy_gbps: float       # device-to-device copy, (read + write) bytes / time
    matmul_tflops: float   # bf16 8192^3 torch.matmul


@dataclass
class Row:
    """One candidate on one case."""

    op: str
    label: str
    candidate: str
    correct: bool
    error: float | None = None            # max abs error vs the float64 reference (worst output)
    ms: float | None = None
    peak_bytes: int | None = None
    gbps: float | None = None
    tflops: float | None = None
    fraction_of_peak: float | None = None
    speedup: dict[str, float] = field(default_factory=dict)  # baseline value / this value, per other candidate
    sweep: str | None = None
    sweep_value: float | None = None
    note: str = ""


@dataclass
class Verdict:
    op: str
    label: str
    goal: str
    value: float | None
    passed: bool


# ---------------------------------------------------------------------------------------------- measuring

def default_timer(fn: Callable[[], object]) -> float:
    """Median milliseconds of ``fn()`` by the course's one timer protocol (measure.timer)."""
    return course_timer.median_ms(fn, reps=100, warmup=10)


def default_gpu_timer(fn: Callable[[], object]) -> float:
    """Median milliseconds of ``fn()``'s GPU work, its launch hidden (measure.timer.gpu_event_clock)."""
    return course_timer.gpu_median_ms(fn, reps=100, warmup=10)


def default_peak_memory(fn: Callable[[], object]) -> int:
    """Peak device bytes allocated by one call of ``fn()`` above what was allocated before it."""
    return memory.peak_bytes(fn)


def measure_ceilings(timer: Callable = default_timer, device="cuda") -> Ceilings:
    """The two roofs of this machine, measured now (measure.ceilings): copy GB/s and bf16 matmul TFLOP/s."""
    from measure.ceilings import measure_ceilings as measure

    return Ceilings(*measure(timer, device))


# ---------------------------------------------------------------------------------------------- checking

def check_outputs(out, ref, tolerances: dict | None = None) -> tuple[bool, float, str]:
    """Compare a candidate's output(s) to the float64 reference's; returns (ok, worst error, note)."""
    ok, worst, msg = compare(out, ref, tolerances)
    return ok, (math.inf if worst is None else worst), ("" if ok else f"outside the tolerance: {msg}")


# ---------------------------------------------------------------------------------------------- running

def run_case(
    case: BenchCase,
    ceilings: Ceilings,
    timer: Callable = default_timer,
    peak_memory: Callable = default_peak_memory,
    gpu_timer: Callable = default_gpu_timer,
) -> list[Row]:
    """Check, then time (and for peak_memory cases measure memory of) every candidate of one case, with
    ``timer`` (the protocol) or, for a case whose clock is "gpu", ``gpu_timer``."""
    clock = gpu_timer if case.clock == "gpu" else timer
    try:
        inputs = case.make_inputs()
        ref = case.reference(*inputs) if case.reference is not None else None
    except Exception as exc:  # a broken case is reported on every candidate; the suite goes on
        note = f"case set-up failed: {type(exc).__name__}: {exc}".splitlines()[0][:200]
        return [Row(case.op, case.label, name, correct=False, note=note, sweep=case.sweep,
                    sweep_value=case.sweep_value) for name in case.candidates]
    rows: list[Row] = []
    for name, fn in case.candidates.items():
        row = Row(case.op, case.label, name, correct=True, sweep=case.sweep, sweep_value=case.sweep_value)
        try:
            out = fn(*inputs)  # also the warm-up that makes torch.compile compile before timing
            timed_off = False
            if ref is not None:
                row.correct, row.error, row.note = check_outputs(out, ref, case.tolerances)
                timed_off = not row.correct and not _ours(case, name) and _finite(out)
                if timed_off:
                    row.note = f"a baseline, timed though its outputs are {row.note}"
            del out
            if row.correct or timed_off:
                if case.metric == "peak_memory":
                    row.peak_bytes = peak_memory(lambda: fn(*inputs))
                row.ms = clock(lambda: fn(*inputs))
        except Exception as exc:  # one broken candidate must not end the suite
            row.correct = False
            row.note = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
        if row.ms is not None and row.ms > 0:
            seconds = row.ms * 1e-3
            if case.nbytes:
                row.gbps = case.nbytes / seconds / 1e9
                row.fraction_of_peak = row.gbps / ceilings.copy_gbps
            if case.flops:
                row.tflops = case.flops / seconds / 1e12
                row.fraction_of_peak = row.tflops / ceilings.matmul_tflops
        rows.append(row)
    _fill_speedups(case, rows)
    return rows


def _ours(case: BenchCase, name: str) -> bool:
    """Whether a candidate is a kernel of ours (judged strictly: wrong means not timed)."""
    return name.startswith("triton") or any(goal.candidate == name for goal in case.goals)


def _finite(out) -> bool:
    return all(torch.isfinite(t).all().item() for t in tensors_in(out) if t.is_floating_point())


def _value(case: BenchCase, row: Row) -> float | None:
    return row.peak_bytes if case.metric == "peak_memory" else row.ms


def _fill_speedups(case: BenchCase, rows: list[Row]) -> None:
    for row in rows:
        mine = _value(case, row)
        for other in rows:
            theirs = _value(case, other)
            if other is not row and mine and theirs:
                row.speedup[other.candidate] = theirs / mine


def evaluate_goals(case: BenchCase, rows: list[Row]) -> list[Verdict]:
    by_name = {r.candidate: r for r in rows if r.op == case.op and r.label == case.label}
    verdicts = []
    for goal in case.goals:
        row = by_name.get(goal.candidate)
        value = None
        if row is not None and row.correct:
            if goal.quantity == "ratio":
                value = row.speedup.get(goal.baseline)
            else:
                value = row.fraction_of_peak
        passed = value is not None and (value >= goal.threshold if goal.cmp == ">=" else value <= goal.threshold)
        verdicts.append(Verdict(case.op, case.label, goal.describe(), value, bool(passed)))
    return verdicts


def run_suite(
    cases: Sequence[BenchCase],
    ceilings: Ceilings | None = None,
    timer: Callable = default_timer,
    peak_memory: Callable = default_peak_memory,
    gpu_timer: Callable = default_gpu_timer,
    progress: bool = True,
    on_case: Callable | None = None,
) -> tuple[Ceilings, list[Row], list[Verdict]]:
    """Measure the ceilings (unless given), then run every case with a tqdm progress bar.

    ``on_case(ceilings, rows, verdicts, case_rows, case_verdicts)`` runs after each case, so a long run
    can print and save what it has (a run cut off by a time limit keeps every finished case).
    """
    from tqdm.auto import tqdm

    if ceilings is None:
        ceilings = measure_ceilings(timer)
    rows: list[Row] = []
    verdicts: list[Verdict] = []
    bar = tqdm(cases, desc="benchmarks", unit="case", disable=not progress)
    for case in bar:
        bar.set_postfix_str(f"{case.op} {case.label}")
        case_rows = run_case(case, ceilings, timer=timer, peak_memory=peak_memory, gpu_timer=gpu_timer)
        case_verdicts = evaluate_goals(case, case_rows)
        rows.extend(case_rows)
        verdicts.extend(case_verdicts)
        if on_case is not None:
            on_case(ceilings, rows, verdicts, case_rows, case_verdicts)
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    return ceilings, rows, verdicts


# ---------------------------------------------------------------------------------------------- reporting

def _fmt(x, spec: str, missing: str = "-") -> str:
    return missing if x is None else format(x, spec)


def format_table(rows: Sequence[Row], verdicts: Sequence[Verdict] = ()) -> str:
    """One block per op: case, candidate, time, rate, fraction of peak, speedups; then the goal verdicts."""
    lines: list[str] = []
    ops = list(dict.fromkeys(r.op for r in rows))
    for op in ops:
        lines.append(f"\n== {op} ==")
        header = f"{'case':<24} {'candidate':<12} {'ms':>9} {'rate':>13} {'peak%':>6} {'peak MiB':>9}  speedup / notes"
        lines.append(header)
        lines.append("-" * len(header))
        for r in (r for r in rows if r.op == op):
            if r.gbps is not None:
                rate = f"{r.gbps:8.0f} GB/s"
            elif r.tflops is not None:
                rate = f"{r.tflops:6.1f} TFLOP/s"
            else:
                rate = "-"
            frac = _fmt(None if r.fraction_of_peak is None else 100 * r.fraction_of_peak, ".0f")
            mib = _fmt(None if r.peak_bytes is None else r.peak_bytes / 2**20, ".0f")
            extra = " ".join(f"x{v:.2f} vs {k}" for k, v in r.speedup.items() if r.candidate == "triton")
            if not r.correct:
                extra = f"WRONG ({r.note})"
            elif r.note:
                extra = f"{extra} {r.note}".strip()
            lines.append(f"{r.label:<24} {r.candidate:<12} {_fmt(r.ms, '9.4f'):>9} {rate:>13} {frac:>6} {mib:>9}  {extra}")
        for v in (v for v in verdicts if v.op == op):
            value = _fmt(v.value, ".3f")
            lines.append(f"  {'PASS' if v.passed else 'MISS'}  {v.label:<24} {v.goal} (got {value})")
    if verdicts:
        passed = sum(v.passed for v in verdicts)
        lines.append(f"\ngoals: {passed}/{len(verdicts)} passed")
    return "\n".join(lines)


METHOD = ("measure.timer protocol: median of up to 100 repetitions after 10 warm-up calls, L2 flushed "
          "before each, every stream synchronized, less the median of an empty call timed the same way, "
          "CUDA events; every candidate checked against a float64 reference before timing "
          "(measure.tolerance); torch.compile warmed during the check; ceilings measured in the same run "
          "(1 GiB device-to-device copy counting read+write bytes, bf16 matmul 8192^3); cases labelled "
          "'GPU time': the GPU's work alone, its launch hidden behind ~1 ms of queued GPU work, L2 flushed, "
          "the same medians")


def write_json(path: str, ceilings: Ceilings, rows: Sequence[Row], verdicts: Sequence[Verdict],
               meta: dict | None = None) -> None:
    """Write the whole run as one JSON object, atomically, with where and how it was measured."""
    payload = {
        **files.environment(METHOD),
        **(meta or {}),
        "ceilings": asdict(ceilings),
        "rows": [asdict(r) for r in rows],
        "goals": [asdict(v) for v in verdicts],
        "goals_passed": sum(v.passed for v in verdicts),
        "goals_total": len(verdicts),
    }
    files.write_json_atomic(path, payload, nonfinite_as_null=True)


# ---------------------------------------------------------------------------------------------- repeated runs

def goal_rule(goal: str) -> tuple[str, float]:
    """(comparison, threshold) of a goal's text: ("<=", 1.5) from "triton: eager/triton <= 1.5"."""
    m = re.search(r"(>=|<=) (\S+)$", goal)
    if not m:
        raise ValueError(f"not a goal's text: {goal!r}")
    return m.group(1), float(m.group(2))


def summarise_runs(runs: Sequence[Sequence[dict] | None], repeat: int) -> list[dict]:
    """Each goal judged on its distribution over repeated runs of the suite.

    ``runs`` holds each run's verdicts as write_json wrote them (``None`` for a run that left none), in run
    order; ``repeat`` is how many runs were asked for. Per goal: its value in each run (``None`` where the run
    gave none: the candidate failed its check, or the run crashed before the case), the worst of them (the
    minimum of a ``>=`` goal, the maximum of a ``<=`` goal), their median, and how many runs measured it. A
    goal passes only when every one of the ``repeat`` runs measured it and passed: its worst run passes, and a
    run that is missing counts against it, never for it.
    """
    found: dict[tuple, dict] = {}
    for k, verdicts in enumerate(runs):
        for v in verdicts or ():
            key = (v["op"], v["label"], v["goal"])
            if key not in found:
                cmp, threshold = goal_rule(v["goal"])
                found[key] = {"op": v["op"], "label": v["label"], "goal": v["goal"], "cmp": cmp,
                              "threshold": threshold, "values": [None] * len(runs), "passes": [False] * len(runs)}
            found[key]["values"][k] = v["value"]
            found[key]["passes"][k] = bool(v["passed"]) and v["value"] is not None
    summary = []
    for g in found.values():
        measured = [x for x in g["values"] if x is not None]
        worst = (min if g["cmp"] == ">=" else max)(measured) if measured else None
        passes = g.pop("passes")
        summary.append({**g, "worst": worst, "median": statistics.median(measured) if measured else None,
                        "runs": len(measured), "passed": len(passes) == repeat and all(passes)})
    return summary


def format_repeat_table(goals: Sequence[dict], repeat: int) -> str:
    """One line per goal over the runs: worst, median, threshold, PASS/MISS, runs that measured it."""
    cases = [f"{g['op']} {g['label']}" for g in goals]
    texts = [g["goal"].rsplit(f" {g['cmp']} ", 1)[0] for g in goals]  # the threshold has its own column
    wc, wg = max(map(len, cases), default=4), max(map(len, texts), default=4)
    header = f"{'case':<{wc}}  {'goal':<{wg}} {'worst':>8} {'median':>8} {'threshold':>10}  verdict  runs"
    lines = [header, "-" * len(header)]
    for g, case, text in zip(goals, cases, texts):
        lines.append(f"{case:<{wc}}  {text:<{wg}} {_fmt(g['worst'], '8.3f'):>8} {_fmt(g['median'], '8.3f'):>8} "
                     f"{g['cmp'] + ' ' + format(g['threshold'], 'g'):>10}  {'PASS' if g['passed'] else 'MISS':<7}  "
                     f"{g['runs']}/{repeat}")
    passed = sum(g["passed"] for g in goals)
    lines.append(f"goals: {passed}/{len(goals)} passed in every one of {repeat} runs")
    return "\n".join(lines)


def write_plots(directory: str, rows: Sequence[Row], ceilings: Ceilings, prefix: str = "") -> list[str]:
    """One PNG per op that has a sweep, ``<prefix><op>.png``: rate (GB/s or TFLOP/s) of each candidate vs
    the swept parameter, with the measured ceiling as a dashed line. Returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(directory, exist_ok=True)
    written = []
    for op in dict.fromkeys(r.op for r in rows):
        swept = [r for r in rows if r.op == op and r.sweep and r.sweep_value is not None]
        if not swept:
            continue
        use_gbps = any(r.gbps is not None for r in swept)
        fig, ax = plt.subplots(figsize=(7, 4.5))
        # One line per (candidate, the label with the sweep value stripped, e.g. the dtype).
        series: dict[str, list[tuple[float, float]]] = {}
        for r in swept:
            rate = r.gbps if use_gbps else (r.tflops if r.tflops is not None else (r.ms and 1.0 / r.ms))
            if rate is None:
                continue
            group = r.label.split()[-1] if " " in r.label else ""
            series.setdefault(f"{r.candidate} {group}".strip(), []).append((r.sweep_value, rate))
        for name, points in sorted(series.items()):
            points.sort()
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=name)
        roof = ceilings.copy_gbps if use_gbps else ceilings.matmul_tflops
        ax.axhline(roof, linestyle="--", color="gray", label="measured ceiling")
        ax.set_xscale("log", base=2)
        ax.set_xlabel(swept[0].sweep)
        ax.set_ylabel("GB/s" if use_gbps else "TFLOP/s")
        ax.set_title(op)
        ax.legend(fontsize="small")
        ax.grid(True, alpha=0.3)
        path = os.path.join(directory, f"{prefix}{op}.png")
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written
