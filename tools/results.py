"""GPU results: where they live, what every result file says about where it was measured, and the index.

One folder per run, ``results/<gpu>-<date>/`` (e.g. ``results/h100-2026-11-22/``), described in
``results/README.md``. Every result file carries the machine and the method: a JSON file as the keys of
META_KEYS, a markdown or log file as a header (``header``); ``run.json`` lists the run's files, each with
its kind, so that tools (``tools.results_tables``) and tests (``tests/test_results.py``) find them.

    python -m tools.results name                            # this machine's run folder, e.g. h100-2026-11-22
    python -m tools.results header --method TEXT            # the header a log file starts with
    python -m tools.results stamp FILE.json --method TEXT   # add this machine's keys to a JSON result file
    python -m tools.results index DIR [--method TEXT]       # write DIR/run.json listing the run's files
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from measure.files import write_json_atomic

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "results"
RUN_FILE = "run.json"
CALIBRATION_FILE = "calibration.json"
MARGIN = 1.15  # the solution clears a performance threshold by at least this factor, on every GPU

# The keys of every JSON result file; markdown and log files carry the same facts in their header.
META_KEYS = ("gpu", "driver", "python", "torch", "triton", "date", "method")
HEADER_LABELS = {"GPU": "gpu", "Driver": "driver", "Python": "python", "torch": "torch", "triton": "triton",
                 "Date": "date", "Method": "method"}
HEADER_LINES = 30  # a header is found within a file's first lines

# What each kind of file in a run folder is (run.json's "kind"), from its name.
KINDS = (
    (r"bench[^/]*-run\d+\.json", "bench-run"),  # python -m kernels_ref.bench --repeat N: one run of N
    (r"bench[^/]*\.json", "bench"),            # python -m kernels_ref.bench --json (with --repeat: the summary)
    (r"(.*/)?calibration\.json", "calibration"),  # tools/gpu_autograde.py: solution and naive speedups (per
                                                 # repeated grading: run-k/, tools/gpu_repeat_grading.py)
    (r"(.*/)?autograde\.json", "autograde"),   # tools/gpu_autograde.py: calibration rows + nbgrader runs
    (r"(.*/)?repeat-summary\.json", "repeat"),  # tools/gpu_repeat_grading.py: the gradings' distribution
    (r"(.*/)?summary\.json", "check"),         # tools/gpu_autograder_check.py: expectations and spreads
    (r"(.*/)?seed-scan\.json", "seed-scan"),  # tools/gpu_seed_scan.py: measured exercises graded again and again
    (r"(.*/)?throughput\.json", "throughput"),  # tools/synthetic_class.py: a class graded on 1 and on N GPUs
    (r"probe-configs[^/]*\.json", "probe"),    # probes/probe_kernel_configs.py: launch configurations timed
    (r"probe-attention-bwd[^/]*\.json", "probe-attention-bwd"),  # probes/probe_attention.py --backward
    (r"probe-attention-decode[^/]*\.json", "probe-attention-decode"),  # probes/probe_attention.py --decode
    (r"probe-attention[^/]*\.json", "probe-attention"),  # probes/probe_attention.py: the attention forward's loads
    (r"probe-int8-launch[^/]*\.json", "probe-int8-launch"),  # probes/int8_launch.py: the launch at decode sizes
    (r"probe-matmul[^/]*\.json", "probe-matmul"), # probes/probe_matmul_configs.py: the fused GEMM's configurations
    (r"(.*/)?capstone\.json", "capstone"),    # tools/capstone_gpu.py: notebook 09's claims measured
    (r"(.*/)?grading-run\d+\.json", "grading"),  # tools/gpu_autograde.py: a notebook's grading, where its time went
    (r"(.*/)?[^/]+-(solution|untouched)\.json", "outcome"),  # python -m autograder autograde: one student's notebook
    (r".*\.json", "grade"),                    # python -m autograder grade --json
    (r".*\.png", "plot"),
    (r".*\.md", "report"),
    (r".*\.(log|txt)", "log"),
    (r"\d\d_[a-z_]+(-\d\dh\d\d)?\.ipynb", "executed"),  # a course notebook run top to bottom (tools/execute_notebook.py)
    (r".*\.ipynb", "notebook"),               # a notebook a run built and graded (the faults notebook)
    (r".*\.csv", "table"),                    # a class report's scores (autograder/class_report.py)
    (r".*\.html", "page"),                    # a class report's leaderboard
    (r".*", "other"),
)
# What a file of each kind is, until someone writes better in run.json.
WHAT = {"bench": "python -m kernels_ref.bench --json (with --repeat N: each goal's worst and median over the runs)",
        "bench-run": "one run of python -m kernels_ref.bench --repeat N, the summary beside it", "calibration": "speedups of the solutions and the naive "
        "versions, per exercise", "autograde": "tools/gpu_autograde.py: calibration rows and nbgrader autograde",
        "repeat": "tools/gpu_repeat_grading.py: each exercise's speedups over the repeated gradings, and the rules",
        "capstone": "tools/capstone_gpu.py: notebook 09's claims (the loss, the training step, prefill, decode) "
        "measured against naive, eager, torch.compile and CUDA graphs, each checked against float64 first",
        "check": "tools/gpu_autograder_check.py: rows, repeat spreads and expectations",
        "grade": "python -m autograder grade --json", "plot": "a plot of the bench results beside it",
        "report": "what the run showed", "log": "printed output", "notebook": "a notebook the run graded",
        "executed": "a course notebook executed top to bottom on the GPU, its outputs kept (tools/execute_notebook.py --save-to)",
        "throughput": "tools/synthetic_class.py: submissions per minute on 1 and on N GPUs",
        "seed-scan": "tools/gpu_seed_scan.py: each measured or counted exercise graded again and again from its "
                     "solution, every grading's seed and failed cases",
        "grading": "tools/gpu_autograde.py: each solution's and untouched notebook's grading, per exercise: "
        "score, speedup, feedback and where the seconds went",
        "probe": "probes/probe_kernel_configs.py: launch configurations of the memory-bound kernels, timed against "
                 "a copy of the same bytes",
        "probe-int8-launch": "probes/int8_launch.py: int8_weight_linear at decode sizes, bound, autotuned and "
                             "JIT launches against cuBLAS, by the protocol and by the GPU's time",
        "probe-matmul": "probes/probe_matmul_configs.py: launch configurations of the fused linear_bias_gelu, timed "
                        "against cuBLAS's bare matmul and eager",
        "probe-attention": "probes/probe_attention.py: the FlashAttention forward with pointer and TMA loads of its "
                           "key and value tiles, autotuned and config by config, timed against cuDNN",
        "probe-attention-bwd": "probes/probe_attention.py --backward: the FlashAttention backward's two kernels "
                               "alone and together, and a one-kernel backward with atomic dQ, timed against "
                               "PyTorch's flash and cuDNN",
        "probe-attention-decode": "probes/probe_attention.py --decode: the decode step's attention, launch "
                                  "configuration by configuration, timed against PyTorch's SDPA",
        "outcome": "python -m autograder autograde: one student's graded notebook as recorded in the gradebook "
                   "(every exercise's report, the seconds each part took)",
        "table": "a class report's scores per student and exercise", "page": "a class report's leaderboard",
        "other": "a file the run wrote"}


def this_machine() -> dict:
    """This machine's META_KEYS less "method" (on a GPU machine: name, driver, versions, now)."""
    from measure.files import environment

    return {k: v for k, v in environment("").items() if k != "method"}


def run_name(meta: dict) -> str:
    """The run folder's name: the GPU's model and the date, e.g. "h100-2026-11-22" ("cpu-..." without one)."""
    words = re.split(r"[^A-Za-z0-9]+", meta.get("gpu") or "")
    model = next((w for w in words if re.search(r"\d", w) and w.upper() != "NVIDIA"), None)
    return f"{(model or 'cpu').lower()}-{str(meta['date'])[:10]}"


# ----------------------------------------------------------------------------- metadata of one file

def header(meta: dict, prefix: str = "# ") -> str:
    """The lines a log (prefix "# ") or markdown file (prefix "- ") starts with: one fact a line."""
    return "".join(f"{prefix}{label}: {meta.get(key) if meta.get(key) is not None else 'unknown'}\n"
                   for label, key in HEADER_LABELS.items())


def read_header(text: str) -> dict:
    """The META_KEYS found in a file's header (see ``header``)."""
    found = {}
    for line in text.splitlines()[:HEADER_LINES]:
        m = re.match(r"^[#\-\s]*(\w+): (.+)$", line)
        if m and m.group(1) in HEADER_LABELS and HEADER_LABELS[m.group(1)] not in found:
            found[HEADER_LABELS[m.group(1)]] = m.group(2).strip()
    return found


def metadata(path: Path) -> dict:
    """A result file's META_KEYS: a JSON object's keys, or a text file's header; {} for a plot."""
    if path.suffix == ".json":
        data = json.loads(path.read_text())
        return {k: data[k] for k in META_KEYS if k in data}
    if path.suffix in (".md", ".log", ".txt"):
        return read_header(path.read_text())
    return {}


def write_json(path: Path, data) -> None:
    """Atomically: a run cut off mid-write keeps the previous file."""
    write_json_atomic(path, data, nonfinite_as_null=True)


def stamp(path: Path, meta: dict) -> dict:
    """Add the META_KEYS of ``meta`` that a JSON result file lacks, first in the object; returns it."""
    data = json.loads(path.read_text())
    stamped = {**{k: meta.get(k) for k in META_KEYS}, **data}
    write_json(path, stamped)
    return stamped


def outcomes(folder: Path) -> list[Path]:
    """A grading run's outcomes kept, its scratch course dropped: each ``course/autograder_results/<notebook>/
    <student>.json`` becomes ``<notebook>-<student>.json`` beside ``autograde.json``, stamped with the run's
    machine keys and the timing protocol (what tests/test_results.py reads); ``course/`` is removed."""
    import shutil

    from autograder.timing import PROTOCOL

    run = json.loads((folder / "autograde.json").read_text())
    method = ("python -m autograder autograde (tools/gpu_autograde.py, tools/gpu_session.sh grading-time): "
              "this student's outcome as recorded in the scratch course's gradebook: every exercise's "
              "report and where its seconds went")
    written = []
    for found in sorted((folder / "course" / "autograder_results").glob("*/*.json")):
        assignment, student = found.parent.name, found.stem
        outcome = json.loads(found.read_text())
        # the outcome's own machine keys where it has them (its "gpu" is null: the grading process names it
        # under "device"), the run's otherwise
        data = {**{k: run.get(k) for k in META_KEYS}, "method": method, "protocol": PROTOCOL,
                "assignment": assignment, "student": student,
                **{k: v for k, v in outcome.items() if v is not None or k not in META_KEYS}}
        target = folder / f"{assignment}-{student}.json"
        write_json(target, data)
        written.append(target)
    shutil.rmtree(folder / "course", ignore_errors=True)
    return written


# ----------------------------------------------------------------------------- runs and their index

def file_kind(relative: str) -> str:
    return next(kind for pattern, kind in KINDS if re.fullmatch(pattern, relative))


def index(directory: Path, meta: dict) -> dict:
    """Write directory/run.json: the run's META_KEYS and every file in it: its kind, what it is (what an
    earlier run.json said, else what its kind is), and for a grader report the submission. Returns it."""
    old, old_meta = {}, {}
    if (directory / RUN_FILE).exists():
        previous = json.loads((directory / RUN_FILE).read_text())
        old = {f["path"]: f for f in previous.get("files", [])}
        # Re-indexing elsewhere (a CPU, later) keeps the machine the run was measured on.
        old_meta = {k: previous[k] for k in META_KEYS if previous.get(k) is not None}
    files = []
    for path in sorted(p for p in directory.rglob("*") if p.is_file() and p.name != RUN_FILE):
        relative = path.relative_to(directory).as_posix()
        kind = file_kind(relative)
        entry = {"path": relative, "kind": kind, "what": WHAT[kind]}
        if kind == "grade":  # "solution 04_fused_softmax" for a solution notebook, else the file's name
            graded = Path(json.loads(path.read_text()).get("submission") or relative)
            entry["submission"] = f"solution {graded.stem}" if "solutions" in graded.parts else graded.name
        files.append({**entry, **old.get(relative, {}), "kind": kind})
    info = {**{k: meta.get(k) for k in META_KEYS}, **old_meta, "files": files}
    write_json(directory / RUN_FILE, info)
    return info


@dataclass
class Run:
    """One run folder of results/ and its run.json."""

    path: Path
    info: dict

    @property
    def name(self) -> str:
        return self.path.name

    def files(self, kind: str) -> list[dict]:
        return [f for f in self.info["files"] if f["kind"] == kind]

    def load(self, entry: dict):
        return json.loads((self.path / entry["path"]).read_text())

    def calibration(self) -> dict | None:
        path = self.path / CALIBRATION_FILE
        return json.loads(path.read_text()) if path.exists() else None

    def calibrations(self) -> list[dict]:
        """Every calibration record of the run: its own, and one per repeated grading (run-k/calibration.json)."""
        return [self.load(entry) for entry in self.files("calibration")]


def runs(results: Path = RESULTS) -> list[Run]:
    """Every run folder with a run.json, oldest first (then by GPU)."""
    found = [Run(p.parent, json.loads(p.read_text())) for p in results.glob(f"*/{RUN_FILE}")]
    return sorted(found, key=lambda r: (str(r.info.get("date")), r.name))


# ----------------------------------------------------------------------------- calibration records

# Keys of a calibration row (tools/gpu_autograde.py) kept in calibration.json, and their names there.
CALIBRATION_KEYS = {"baseline": "baseline", "naive": "naive", "naive_ms": "naive_ms",
                    "naive_baseline_ms": "naive_baseline_ms", "naive_speedup": "naive_speedup",
                    "solution_ms": "solution_ms", "solution_baseline_ms": "solution_baseline_ms",
                    "solution_speedup": "solution_speedup", "solution_correct": "solution_correct",
                    "solution_passed": "solution_passed", "threshold": "graded_threshold",
                    "floor": "graded_floor"}


def calibration_record(rows: list[dict], meta: dict, **extra) -> dict:
    """calibration.json from tools/gpu_autograde.py's rows: the machine, then exercise id -> speedups of
    the solution and of the naive version, and the threshold/floor the run graded against."""
    exercises = {}
    for row in rows:
        if "note" in row:  # not measured (no GPU)
            continue
        exercises[row["id"]] = {new: row[old] for old, new in CALIBRATION_KEYS.items() if row.get(old) is not None}
    return {**{k: meta.get(k) for k in META_KEYS}, **extra, "margin": MARGIN, "exercises": exercises}


# ----------------------------------------------------------------------------- command line

def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.results", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("name", help="this machine's run folder name")
    h = sub.add_parser("header", help="print the header a log file starts with")
    h.add_argument("--method", required=True)
    s = sub.add_parser("stamp", help="add this machine's keys to JSON result files")
    s.add_argument("files", nargs="+", type=Path)
    s.add_argument("--method", required=True)
    o = sub.add_parser("outcomes", help="keep a grading run's outcomes (DIR/<notebook>-<student>.json), drop its course")
    o.add_argument("directory", type=Path)
    i = sub.add_parser("index", help="write DIR/run.json")
    i.add_argument("directory", type=Path)
    i.add_argument("--method", default="see each file")
    args = p.parse_args(argv)
    meta = this_machine()
    if args.command == "name":
        print(run_name(meta))
    elif args.command == "header":
        print(header({**meta, "method": args.method}), end="")
    elif args.command == "outcomes":
        print(f"kept {len(outcomes(args.directory))} outcomes in {args.directory}")
    elif args.command == "stamp":
        for f in args.files:
            stamp(f, {**meta, "method": args.method})
    else:
        info = index(args.directory, {**meta, "method": args.method})
        print(f"wrote {args.directory / RUN_FILE}: {len(info['files'])} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
