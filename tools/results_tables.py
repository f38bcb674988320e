"""The generated tables of README.md and results/README.md: the curriculum from the course manifest, the
measured results from results/ (one command, nothing copied by hand).

    python -m tools.results_tables           # print every generated section
    python -m tools.results_tables --write   # replace the text between each section's markers, in every file
    python -m tools.results_tables --check   # exit 1 if a file differs from what is generated

A section lives between ``<!-- results:NAME begin -->`` and ``<!-- results:NAME end -->``. README.md holds
``curriculum`` (notebooks and their graded exercises, from ``course/manifest.py``) and ``headline`` (each
performance exercise's solution speedup on the newest calibration run of every GPU); results/README.md holds
the full tables: ``goals`` (each goal of the quick benchmark suite on every GPU: its worst run, a repeated
suite's or a single run's), ``bench`` (the reference kernels, ``python -m kernels_ref.bench``,
a repeated suite's goals with their worst and median runs), ``autograder`` (the
grader's reports and the naive versions' speedups) and ``calibration`` (solution and naive speedups on every
GPU against today's thresholds in autograder/specs). tests/test_results.py checks that both are in sync.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from dataclasses import dataclass

from tools import results

# Which file holds which generated sections (paths relative to the repository root).
FILES = {"README.md": ("curriculum", "headline"), "results/README.md": ("goals", "bench", "autograder", "calibration")}
SECTIONS = tuple(name for names in FILES.values() for name in names)
DTYPES = {"bfloat16": "bf16", "bf16": "bf16", "float32": "fp32", "float16": "fp16"}
MAIN_BASELINES = ("eager", "compiled")  # the bench table's two speedup columns


def markers(name: str) -> tuple[str, str]:
    return f"<!-- results:{name} begin -->", f"<!-- results:{name} end -->"


def table(header: list[str], rows: list[list[str]]) -> str:
    def line(cells):
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    return "\n".join([line(header), line(["---"] * len(header))] + [line(r) for r in rows])


def times(x: float | None, suffix: str = "x") -> str:
    """A ratio as the README prints it: 0.83x, 2.66x, 10.8x, 125x."""
    if x is None:
        return "-"
    return f"{x:.2f}{suffix}" if x < 10 else f"{x:.3g}{suffix}"


def machine_line(meta: dict) -> str:
    return (f"{meta['gpu']} (driver {meta.get('driver') or 'not recorded'}), torch {meta['torch']}, "
            f"triton {meta['triton']}, Python {meta.get('python') or 'not recorded'}, {str(meta['date'])[:10]}")


# ----------------------------------------------------------------------------- bench

def split_label(label: str) -> tuple[str, str | None]:
    """("16384x4096", "fp32") from "16384x4096 float32": the shape and the dtype, shortened."""
    words = label.split()
    if words and words[-1] in DTYPES:
        return " ".join(words[:-1]), DTYPES[words[-1]]
    return label, None


def goal_cell(goals: list[dict], extras: list[str], repeat: int = 1) -> str:
    """The goals column: the verdict over the runs, then each goal with its worst value (and median, where the
    suite was repeated); ``goals`` as ``distribution`` gives them."""
    if not goals:
        return "; ".join(extras) or "-"
    verdict = "pass" if all(g["passed"] for g in goals) else "miss"
    runs = "1 run" if repeat == 1 else f"worst of {repeat} runs"
    return f"{verdict} ({runs}): " + "; ".join([f"{goal_text(g)} ({measured(g, repeat)})" for g in goals] + extras)


def measured(goal: dict, repeat: int) -> str:
    """"got 1.32" (one run), "worst 1.27, median 1.45" (repeated): a goal without a value has "-"."""
    if repeat == 1:
        return f"got {number(goal['worst'])}"
    text = f"worst {number(goal['worst'])}, median {number(goal['median'])}"
    return text if goal["runs"] == repeat else f"{text}, measured in {goal['runs']} of {repeat} runs"


def number(x: float | None) -> str:
    return "-" if x is None else format(x, ".3g")


def distribution(verdict: dict) -> dict:
    """A single run's goal verdict in the shape of a repeated suite's goal (kernels_ref.benchmarking.
    summarise_runs): its one value is its worst and its median."""
    if "worst" in verdict:
        return verdict
    value = verdict["value"]
    return {**verdict, "worst": value, "median": value, "runs": int(value is not None)}


def goal_text(verdict: dict) -> str:
    """"eager/triton >= 1" from the goal "triton: eager/triton >= 1"."""
    return verdict["goal"].split(": ", 1)[-1]


def baseline(verdict: dict) -> str:
    return goal_text(verdict).split("/")[0]


def with_verdicts(row: dict, goals: list[dict]) -> dict:
    return {**row, "verdicts": [g for g in goals if (g["op"], g["label"]) == (row["op"], row["label"])]}


def bench_row(row: dict, case_rows: list[dict], companions: list[dict], repeat: int = 1) -> list[str]:
    """One table row for the triton candidate of a case (its goals in row["verdicts"], as ``distribution``
    gives them): rate, fraction of peak, speedups, goals; companions are the triton rows of the case's
    "... vs X" variants; ``repeat``: how many runs the file judged its goals on."""
    shape, dtype = split_label(row["label"])
    memory = row["peak_bytes"] is not None
    if memory:
        rate = f"{row['peak_bytes'] / 2**20:.0f} MiB peak"
    elif row["gbps"] is not None:
        rate = f"{row['gbps']:.0f} GB/s"
    elif row["tflops"] is not None:
        rate = f"{row['tflops']:.0f} TFLOP/s"
    else:  # not timed: its outputs were wrong (the goals column says so)
        rate = "not timed" if row.get("correct", True) else "wrong, not timed"
    suffix = "x less memory" if memory else "x"
    speedup = row["speedup"]
    extras = []
    if memory:  # the other candidates' peaks say what the ratios say
        extras += [f"{r['candidate']} {r['peak_bytes'] / 2**20:.0f} MiB" for r in case_rows
                   if r["candidate"] != row["candidate"] and r["peak_bytes"] is not None]
        eager = next((r for r in case_rows if r["candidate"] == "eager" and r["ms"]), None)
        if eager:
            extras.append(f"time {times(eager['ms'] / row['ms'])} eager")
    else:  # speedups over candidates without a column or a goal (cuDNN's attention, the bare matmul)
        for r in [row] + companions:
            named = {baseline(v) for v in r["verdicts"]}
            extras += [f"{times(x)} {name}" for name, x in r["speedup"].items()
                       if name not in MAIN_BASELINES and name not in named]
    goals = goal_cell(row["verdicts"] + [v for c in companions for v in c["verdicts"]], extras, repeat)
    return [row["op"] + (f" {dtype}" if dtype and dtype != "bf16" else ""), shape, rate,
            "-" if memory or row["fraction_of_peak"] is None else f"{row['fraction_of_peak']:.3g}",
            times(speedup.get("eager"), suffix), times(speedup.get("compiled"), suffix.replace(" memory", "")),
            goals]


def with_files(runs: list[results.Run], kind: str):
    """(run, its files of ``kind``) for every run that has some."""
    return [(run, run.files(kind)) for run in runs if run.files(kind)]


@dataclass
class BenchFile:
    """One bench result as the table shows it: a single run's file, or a repeated suite's summary (``python -m
    kernels_ref.bench --repeat N``) with its runs' rows folded into medians."""

    path: str
    data: dict
    rows: list[dict]
    goals: list[dict]
    repeat: int
    ceilings: list[dict]

    @classmethod
    def load(cls, run: results.Run, entry: dict) -> "BenchFile":
        data = run.load(entry)
        if "repeat" not in data:
            return cls(entry["path"], data, data["rows"], [distribution(v) for v in data["goals"]], 1,
                       [data["ceilings"]] if data["ceilings"].get("copy_gbps") else [])
        folder = (run.path / entry["path"]).parent
        runs = [json.loads((folder / r["file"]).read_text()) for r in data["runs"] if (folder / r["file"]).exists()]
        return cls(entry["path"], data, median_rows(runs), data["goals"], data["repeat"],
                   [d["ceilings"] for d in runs if d.get("ceilings", {}).get("copy_gbps")])

    def described(self) -> str:
        text = f"`{self.path}`" + (" (transcribed from its log)" if self.data.get("transcribed") else "")
        if self.repeat > 1:
            text += f" (the summary of {len(self.data['runs'])} of {self.repeat} runs, each in a file beside it)"
        return text

    def ceilings_text(self, named: bool) -> str:
        """This file's ceilings, each measured in its own run: a range over repeated runs."""
        if not self.ceilings:
            return ""
        name = f" (`{self.path}`{f', {len(self.ceilings)} runs' if self.repeat > 1 else ''})" if named else ""
        copy = spread([c["copy_gbps"] for c in self.ceilings], ".0f")
        matmul = spread([c["matmul_tflops"] for c in self.ceilings], ".0f")
        return (f"Ceilings{name}: device-to-device copy **{copy} GB/s** (read + write), "
                f"bf16 matmul **{matmul} TFLOP/s**.")


def median_rows(runs: list[dict]) -> list[dict]:
    """The rows of repeated runs of a suite, one per case and candidate: each measured number the median of
    the runs that measured it; correct only if correct in every run."""
    same: dict[tuple, list[dict]] = {}
    for data in runs:
        for r in data["rows"]:
            same.setdefault((r["op"], r["label"], r["candidate"]), []).append(r)
    rows = []
    for found in same.values():
        row = {**found[0], "correct": all(r["correct"] for r in found)}
        for key in ("ms", "peak_bytes", "gbps", "tflops", "fraction_of_peak"):
            row[key] = median_of([r[key] for r in found])
        names = dict.fromkeys(k for r in found for k in r["speedup"])
        row["speedup"] = {k: median_of([r["speedup"].get(k) for r in found]) for k in names}
        rows.append(row)
    return rows


def median_of(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def bench_section(runs: list[results.Run]) -> str:
    parts = []
    for run, files in with_files(runs, "bench"):
        loaded = [BenchFile.load(run, f) for f in files]
        ceilings = [b for b in loaded if b.ceilings]
        text = [f"{machine_line(run.info)}. Method: {loaded[0].data['method']}."]
        text += [b.ceilings_text(named=len(ceilings) > 1) for b in ceilings]
        text.append(f"Files: `results/{run.name}/`: {', '.join(b.described() for b in loaded)}, and the plots "
                    f"beside them.")
        if len(loaded) > 1:
            text.append("A case timed by several files is shown from the newest.")
        newest = {}  # (op, label) -> its table row, from the newest file that timed the case
        for b in sorted(loaded, key=lambda b: b.data.get("date") or ""):
            cases = {}
            for r in b.rows:
                cases.setdefault((r["op"], r["label"]), []).append(r)
            for (op, label), case_rows in cases.items():
                triton = next((r for r in case_rows if r["candidate"] == "triton"), None)
                if triton is None or " vs " in label:
                    continue
                companions = [with_verdicts(r, b.goals) for r in b.rows
                              if r["op"] == op and r["candidate"] == "triton" and r["label"].startswith(label + " vs ")]
                newest[(op, label)] = bench_row(with_verdicts(triton, b.goals), case_rows, companions, b.repeat)
        rows = list(newest.values())
        header = ["op (bf16 unless noted)", "shape", "Triton", "of peak", "vs eager", "vs torch.compile", "goals"]
        parts.append(wrap(" ".join(text)) + "\n\n" + table(header, rows))
    return "\n\n".join(parts)


def goals_section(runs: list[results.Run]) -> str:
    """The quick suite's goals on each GPU, each from the newest quick run (protocol clock) that judged it: its
    worst run's value and verdict, and how many runs that was (a goal judged on one run says "1 run")."""
    newest: dict[str, dict] = {}  # GPU model -> (op, label, goal) -> (goal, repeat, date)
    for run in runs:  # oldest first: a newer file replaces an older one
        loaded = [BenchFile.load(run, f) for f in run.files("bench")]
        for b in sorted(loaded, key=lambda b: b.data.get("date") or ""):
            if not b.data.get("quick") or b.data.get("clock") == "gpu":
                continue
            for g in b.goals:
                newest.setdefault(gpu_model(run), {})[(g["op"], g["label"], g["goal"])] = (g, b.repeat, run_date(run))
    gpus = sorted(newest)
    keys = list(dict.fromkeys(k for gpu in gpus for k in newest[gpu]))
    rows = []
    for op, label, goal in keys:
        cells = []
        for gpu in gpus:
            found = newest[gpu].get((op, label, goal))
            if found is None:
                cells.append("-")
                continue
            g, repeat, date = found
            runs_text = "1 run" if repeat == 1 else f"worst of {repeat} runs"
            cells.append(f"{number(g['worst'])} {'pass' if g['passed'] else 'MISS'} ({runs_text}, {date})")
        shape, dtype = split_label(label)
        rows.append([op + (f" {dtype}" if dtype and dtype != "bf16" else ""), shape, goal_text({"goal": goal})] + cells)
    return table(["op (bf16 unless noted)", "shape", "goal"] + [gpu.upper() for gpu in gpus], rows)


# ----------------------------------------------------------------------------- autograder

def spec_performance(exercise_id: str):
    from autograder import specs

    return specs.EXERCISES[exercise_id].performance


def reason(ex: dict) -> str:
    """The first thing a failed exercise's report says went wrong, in one short clause."""
    skip = ("hint:", "correctness points withheld", "performance not timed")
    messages = list(ex.get("violations") or []) + [f for f in ex.get("feedback") or [] if not f.startswith(skip)]
    text = messages[0] if messages else "wrong"
    return re.split(r": |; ", text, maxsplit=1)[0] if len(text) > 80 else text


def spread(values: list[float], fmt: str) -> str:
    lo, hi = min(values), max(values)
    return format(lo, fmt) if format(lo, fmt) == format(hi, fmt) else f"{lo:{fmt}}-{hi:{fmt}}"


def grade_rows(label: str, reports: list[dict]) -> list[list[str]]:
    """Rows for one submission graded once or more: speedups as a range over the runs, the verdict."""
    by_exercise = {}
    for report in reports:
        for ex in report["exercises"]:
            by_exercise.setdefault(ex["id"], []).append(ex)
    rows = []
    for exercise_id, runs in by_exercise.items():
        perf = [ex["performance"] or {} for ex in runs]
        what = f"`{exercise_id}` vs {perf[0].get('baseline') or '-'}"
        if not all(ex["correct"] for ex in runs):
            rows.append([label, what, "-", f"0 points: {reason(next(ex for ex in runs if not ex['correct']))}"])
            continue
        graded = [p for p in perf if p.get("graded")]
        if not graded:
            rows.append([label, what, "-", "correct; performance not graded"])
            continue
        graded = [p for p in graded if p.get("speedup") is not None]  # timed; memory graded has no speedup
        if not graded:
            rows.append([label, what, "-", "correct; performance graded by memory, not time"])
            continue
        speed = spread([p["speedup"] for p in graded], ".2f")
        rates = [p["achieved"]["value"] for p in graded if p.get("achieved")]
        if rates:
            speed += f" ({spread(rates, '.0f')} {graded[0]['achieved']['unit']})"
        passed = [p["passed"] for p in graded]
        verdict = ("passed" if all(passed) else "failed" if not any(passed)
                   else f"passed {sum(passed)} of {len(passed)}")
        then, now = spread([p["threshold"] for p in graded], "g"), spec_performance(exercise_id)
        now = f"now {now.threshold:g}" if now else "not timed now"  # e.g. a loss now graded on memory instead
        rows.append([label, what, speed, f"{verdict} (threshold then {then}; {now})"])
    return rows


def naive_rows(calibration: dict) -> list[list[str]]:
    rows = []
    for exercise_id, c in calibration["exercises"].items():
        if c.get("naive_speedup") is None:
            continue
        floor = spec_performance(exercise_id).floor
        below = "below" if c["naive_speedup"] <= floor else "ABOVE"
        rows.append([f"naive eager: {c.get('naive', '-')}", f"`{exercise_id}` vs {c['baseline']}",
                     f"{c['naive_speedup']:.2f}", f"timed, not graded: {below} the floor {floor:g}"])
    return rows


def autograder_section(runs: list[results.Run]) -> str:
    parts = []
    for run, grades in with_files(runs, "grade"):
        by_label = {}
        for f in grades:
            by_label.setdefault(f.get("submission", f["path"]), []).append(run.load(f))
        # solutions, then the naive eager versions, then other submissions, escape attempts last
        order = sorted(by_label, key=lambda label: (not label.startswith("solution"), label.startswith("escape")))
        rows = [r for label in order if label.startswith("solution") for r in grade_rows(label, by_label[label])]
        calibration = run.calibration()
        if calibration:
            rows += naive_rows(calibration)
        rows += [r for label in order if not label.startswith("solution") for r in grade_rows(label, by_label[label])]
        method = by_label[order[0]][0]["method"]
        text = (f"{machine_line(run.info)}. Method: {method}. Files: `results/{run.name}/autograder/` (one JSON "
                f"report per grading call){', `calibration.json`' if calibration else ''}.")
        header = ["submission", "exercise", "speedup over baseline", "verdict"]
        parts.append(wrap(text) + "\n\n" + table(header, rows))
    return "\n\n".join(parts)


# ----------------------------------------------------------------------------- calibration

def calibration_section(runs: list[results.Run]) -> str:
    from autograder import specs

    recorded = [(run, run.calibration()) for run in runs if run.calibration()]
    rows = []
    for exercise_id, spec in specs.EXERCISES.items():
        for run, cal in recorded:
            c = cal["exercises"].get(exercise_id)
            if not c or spec.performance is None:
                continue
            perf, sol, naive = spec.performance, c.get("solution_speedup"), c.get("naive_speedup")
            gpu = run.name + (" (transcribed)" if cal.get("transcribed") else "")
            rows.append([f"`{exercise_id}`", gpu, "-" if sol is None else f"{sol:.2f}",
                         "-" if naive is None else f"{naive:.2f}", f"{perf.threshold:g} / {perf.floor:g}",
                         "-" if sol is None else f"{sol / perf.threshold:.2f}"])
    header = ["exercise", "run", "solution", "naive eager", "threshold / floor now", "solution / threshold"]
    return table(header, rows)


def gpu_model(run: results.Run) -> str:
    """"h100" from the run folder "h100-2026-11-23"."""
    return run.name.rsplit("-", 3)[0]


def run_date(run: results.Run) -> str:
    """"2026-11-23" for the run folder "h100-2026-11-23"."""
    return run.name[len(gpu_model(run)) + 1:]


def column(run: results.Run) -> str:
    """"H100, 2026-11-23" for the run folder "h100-2026-11-23"."""
    return f"{gpu_model(run).upper()}, {run_date(run)}"


def headline_section(runs: list[results.Run]) -> str:
    """Per performance exercise, the solution's speedup over its baseline in the newest calibration of it on
    each GPU (a run may calibrate a few exercises only; the full history is in results/README.md), beside the
    threshold graded today. Each GPU's column is named after its newest run with a calibration."""
    from autograder import specs

    newest, records = {}, {}  # GPU model -> its newest run with a calibration; -> exercise -> newest record
    for run in runs:  # oldest first: a newer record replaces an older one
        for calibration in run.calibrations():
            newest[gpu_model(run)] = run
            records.setdefault(gpu_model(run), {}).update(calibration["exercises"])
    header = ["exercise", "baseline"] + [column(run) for run in newest.values()] + ["threshold"]
    rows = []
    for exercise_id, spec in specs.EXERCISES.items():
        if spec.performance is None:
            continue
        found = [records[gpu].get(exercise_id) or {} for gpu in newest]
        if not any(c.get("solution_speedup") for c in found):
            continue
        rows.append([f"`{exercise_id}`", spec.performance.baseline_name]
                    + [times(c.get("solution_speedup")) for c in found] + [times(spec.performance.threshold)])
    return table(header, rows)


# ----------------------------------------------------------------------------- README

def wrap(text: str, width: int = 105) -> str:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return "\n".join(lines + [line])


def curriculum_section() -> str:
    """One row per notebook of the course manifest: what it teaches and its graded entry points."""
    from course import manifest

    rows = []
    for nb in manifest.NOTEBOOKS:
        graded = ", ".join(f"`{e}`" for e in nb.exercises) or "-"
        name = f"`{nb.name}`" + ("" if nb.released else " (to come)")
        rows.append([name, nb.teaches, graded])
    return table(["notebook", "teaches", "graded exercises"], rows)


def sections(runs: list[results.Run] | None = None) -> dict[str, str]:
    runs = results.runs() if runs is None else runs
    return {"curriculum": curriculum_section(), "headline": headline_section(runs), "goals": goals_section(runs),
            "bench": bench_section(runs),
            "autograder": autograder_section(runs), "calibration": calibration_section(runs)}


def for_file(relative: str, generated: dict[str, str]) -> dict[str, str]:
    """The generated sections that ``relative`` (a key of FILES) holds."""
    return {name: generated[name] for name in FILES[relative]}


def render(text: str, generated: dict[str, str]) -> str:
    """``text`` with each section's markers holding its generated body."""
    for name, body in generated.items():
        begin, end = markers(name)
        pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
        if not pattern.search(text):
            raise ValueError(f"no {begin} ... {end} markers")
        text = pattern.sub(lambda _m, b=body, s=begin, e=end: f"{s}\n{b.rstrip()}\n{e}", text)
    return text


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.results_tables", description=__doc__.splitlines()[0])
    g = p.add_mutually_exclusive_group()
    g.add_argument("--write", action="store_true", help="replace the marked sections of " + ", ".join(FILES))
    g.add_argument("--check", action="store_true", help="exit 1 if a file's marked sections are stale")
    args = p.parse_args(argv)
    generated = sections()
    if not (args.write or args.check):
        for name, body in generated.items():
            print(f"{markers(name)[0]}\n{body}\n{markers(name)[1]}\n")
        return 0
    stale = 0
    for relative in FILES:
        path = results.ROOT / relative
        text = path.read_text()
        try:
            new = render(text, for_file(relative, generated))
        except ValueError as exc:
            print(f"{relative}: {exc}", file=sys.stderr)
            return 2
        if args.write:
            path.write_text(new)
        elif new != text:
            print(f"{relative} is out of date with results/: run python -m tools.results_tables --write")
            stale = 1
    return stale


if __name__ == "__main__":
    sys.exit(main())
