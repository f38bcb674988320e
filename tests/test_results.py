"""results/: every GPU result says where and how it was measured, every performance threshold holds on every
GPU recorded there (the 15% rule), and the tables of README.md and results/README.md are
what results/ generates."""
import json
import math
import pathlib
import subprocess
import threading

import pytest

from autograder import specs, timing
from tools import results, results_tables

ROOT = pathlib.Path(__file__).resolve().parent.parent
RUNS = results.runs()
# Every calibration record: a run's own, and one per repeated grading of it (run-k/, tools/gpu_repeat_grading.py).
CALIBRATIONS = [(run, cal) for run in RUNS for cal in run.calibrations()]
# Thresholds answer to the speedups measured the way the grader measures now: a record of an older timing
# protocol is history (kept, and shown in the README), not evidence for today's thresholds.
CURRENT = [(run, cal) for run, cal in CALIBRATIONS if cal.get("protocol") == timing.PROTOCOL]

# Benchmark rows that are the evidence for a threshold of a notebook without calibration runs yet: the
# reference kernel (kernels_ref, "triton") against the same baseline as the spec, at the spec's shape (the
# attention cases: the same per-head problem at 4x the spec's batch x heads). exercise -> (op, label, baseline).
BENCH_EVIDENCE = {
    "layer_norm_fwd": ("layer_norm_fwd", "16384x4096 bfloat16", "eager"),
    "layer_norm_bwd": ("layer_norm_bwd", "16384x4096 bfloat16", "eager"),
    "matmul": ("matmul", "8192x8192x8192 bfloat16", "eager"),
    "linear_bias_gelu": ("linear_bias_gelu", "16384x4096x4096 bfloat16", "eager"),
    "flash_attention_fwd": ("flash_attention_fwd", "B4 H32 S4096 D128 causal bfloat16", "sdpa_flash"),
    "flash_attention_bwd": ("flash_attention_bwd", "B4 H32 S4096 D128 causal bfloat16", "sdpa_flash"),
}


def _result_files(run):
    return sorted(p for p in run.path.rglob("*") if p.is_file() and p.name != results.RUN_FILE)


def _timed(exercise: str) -> bool:
    """Whether the exercise is graded by time now: one graded by memory since (linear_cross_entropy) keeps its
    older time records as history, not as evidence for a threshold it no longer has."""
    return specs.get(exercise).performance is not None


def _evidence(exercise: str, date) -> bool:
    """Whether a record of this date times the exercise's workload of today: timed now, and not before its
    timed workload last changed (``Performance.timed_since``); an older record is history."""
    return _timed(exercise) and str(date or "") >= specs.get(exercise).performance.timed_since


def _date(run, record) -> str:
    return record.get("date") or run.info.get("date")


def _recorded(key, calibrations):
    """(run name, exercise id, speedup) for every timed exercise with this key in these calibration files."""
    return [pytest.param(run.name, ex, rec[key], id=f"{run.name}-{ex}") for run, cal in calibrations
            for ex, rec in cal["exercises"].items() if rec.get(key) is not None and _evidence(ex, _date(run, cal))]


def _graded_solutions():
    """(where, exercise id, speedup) of every timed exercise of a solution notebook graded by the current
    protocol, from the autograde outcomes kept in results/ (``outcome`` files)."""
    found = []
    for run in RUNS:
        for entry in run.files("outcome"):
            outcome = run.load(entry)
            if outcome.get("protocol") != timing.PROTOCOL or outcome.get("student") != "solution":
                continue
            for notebook in outcome["notebooks"].values():
                for ex in notebook["exercises"]:
                    perf = ex.get("performance") or {}
                    if perf.get("graded") and perf.get("speedup") and _evidence(ex["id"], _date(run, outcome)):
                        found.append(pytest.param(f"{run.name}/{entry['path']}", ex["id"], perf["speedup"],
                                                  id=f"{run.name}/{entry['path']}-{ex['id']}"))
    return found


GPUS = ("NVIDIA H100 80GB HBM3", "NVIDIA H200")  # the GPUs the course's thresholds are calibrated on


def _bench_evidence():
    found = []
    for run in RUNS:  # a single run's file, and each run of a repeated suite (its summary holds no rows)
        for entry in run.files("bench") + run.files("bench-run"):
            for row in run.load(entry).get("rows", []):
                for ex, (op, label, baseline) in BENCH_EVIDENCE.items():
                    if (row["op"], row["label"], row["candidate"]) == (op, label, "triton") \
                            and row["speedup"].get(baseline) is not None:
                        found.append(pytest.param(f"{run.name}/{entry['path']}", ex, row["speedup"][baseline],
                                                  id=f"{run.name}-{ex}"))
    return found


# --------------------------------------------------------------------------- layout and metadata

def test_results_hold_run_folders_and_their_notes_only():
    assert RUNS, "results/ holds no run folder with a run.json"
    loose = [p.name for p in results.RESULTS.iterdir() if p.is_file()]
    assert sorted(loose) == ["NOTES.md", "README.md", "renamed.json"]
    assert sorted(p.name for p in results.RESULTS.iterdir() if p.is_dir()) == sorted(r.name for r in RUNS)


def test_files_are_named_by_what_ran_and_earlier_names_still_lead_to_them():
    import re

    numbered = [str(p.relative_to(results.RESULTS)) for p in results.RESULTS.rglob("*")
                if re.search(r"-c\d{1,2}[a-z]?(?=[-.])", p.name)]
    assert not numbered, numbered
    renamed = json.loads((results.RESULTS / "renamed.json").read_text())
    assert renamed and not [new for new in renamed.values() if not (results.RESULTS / new).exists()]


@pytest.mark.parametrize("run", RUNS, ids=lambda r: r.name)
def test_run_json_lists_exactly_the_files_of_its_folder(run):
    listed = [f["path"] for f in run.info["files"]]
    assert sorted(listed) == sorted(p.relative_to(run.path).as_posix() for p in _result_files(run))
    for f in run.info["files"]:
        assert f["kind"] == results.file_kind(f["path"]), f["path"]
        assert f.get("what"), f"{run.name}/{f['path']}: run.json says nothing of what it is"
        if f["kind"] == "grade":
            assert f.get("submission"), f"{run.name}/{f['path']}: which submission it graded"
    assert run.name == results.run_name(run.info), "a run folder is named <gpu>-<date>"


def _check_meta(where, meta, run_info, transcribed):
    missing = [k for k in results.META_KEYS if k not in meta]
    assert not missing, f"{where}: lacks {missing}"
    unknown = {"driver", "python"} if transcribed else {"driver"} if meta.get("gpu") is None else set()
    empty = [k for k in results.META_KEYS if k not in unknown and meta[k] in (None, "", "unknown")]
    assert not empty, f"{where}: {empty} not given"
    for key in ("gpu", "torch", "triton", "python", "driver"):
        assert meta[key] in (run_info[key], None) if key in unknown else meta[key] == run_info[key], \
            f"{where}: {key} {meta[key]!r}, but run.json says {run_info[key]!r}"
    assert str(meta["date"])[:10] == str(run_info["date"])[:10], where


@pytest.mark.parametrize("run", RUNS, ids=lambda r: r.name)
def test_every_result_file_says_where_and_how_it_was_measured(run):
    _check_meta(f"{run.name}/run.json", run.info, run.info, run.info.get("transcribed", False))
    for path in _result_files(run):
        if results.file_kind(path.relative_to(run.path).as_posix()) in ("plot", "notebook", "executed", "table", "page"):
            continue  # a picture of a file beside it; a notebook the run graded; a class report's csv and page
        transcribed = path.suffix == ".json" and json.loads(path.read_text()).get("transcribed", False)
        if transcribed:
            assert json.loads(path.read_text()).get("source"), f"{path}: transcribed from what"
        _check_meta(path.relative_to(ROOT), results.metadata(path), run.info, transcribed)


def test_the_notes_say_which_run_they_read():
    meta = results.metadata(results.RESULTS / "NOTES.md")
    assert set(results.META_KEYS) <= set(meta)
    assert any(results.run_name(meta) == r.name for r in RUNS)


# --------------------------------------------------------------------------- thresholds (the 15% rule)

def test_the_current_timing_protocol_is_calibrated_for_every_released_timed_exercise():
    from course import manifest

    timed = {e for nb in manifest.NOTEBOOKS if nb.released for e in nb.exercises
             if specs.get(e).performance is not None}
    for gpu in GPUS:
        covered = {ex for run, cal in CURRENT if run.info.get("gpu") == gpu
                   for ex, rec in cal["exercises"].items()
                   if rec.get("solution_speedup") and _evidence(ex, _date(run, cal))}
        assert timed <= covered, (f"no calibration on the {gpu} under the {timing.PROTOCOL!r} protocol for "
                                  f"{sorted(timed - covered)}")


def test_calibration_files_name_graded_exercises_with_a_performance_part():
    assert CALIBRATIONS
    for run, cal in CALIBRATIONS:
        assert cal.get("protocol") in ("in-process-events", timing.PROTOCOL), run.name
        assert cal["margin"] == results.MARGIN and cal["exercises"], run.name
        for ex, rec in cal["exercises"].items():
            if specs.get(ex).memory is not None and not _timed(ex):
                continue  # graded by memory since this run: its time is history
            assert _timed(ex), f"{run.name}: {ex} has no performance part"
            assert rec.get("baseline") == specs.get(ex).performance.baseline_name, f"{run.name}: {ex}"
            for key in ("solution_speedup", "naive_speedup"):
                assert rec.get(key) is None or (isinstance(rec[key], float) and math.isfinite(rec[key]))


@pytest.mark.parametrize("where,exercise,speedup", _recorded("solution_speedup", CURRENT))
def test_the_solution_clears_its_threshold_by_15_percent_on_every_gpu(where, exercise, speedup):
    threshold = specs.get(exercise).performance.threshold
    assert threshold <= speedup / results.MARGIN, (
        f"{exercise}: the solution's {speedup:.3f}x on {where} clears the threshold {threshold} by only "
        f"{speedup / threshold:.3f}; lower the threshold to <= {speedup / results.MARGIN:.3f}")


@pytest.mark.parametrize("where,exercise,speedup", _graded_solutions())
def test_every_recorded_grading_of_a_solution_clears_its_threshold_by_15_percent(where, exercise, speedup):
    threshold = specs.get(exercise).performance.threshold
    assert threshold <= speedup / results.MARGIN, (
        f"{exercise}: the solution graded at {speedup:.3f}x in {where} clears the threshold {threshold} by only "
        f"{speedup / threshold:.3f}")


REPEATS = 5  # gradings of each solution per GPU that make a distribution (docs: calibrated from distributions)


def _distributions(calibrations) -> dict:
    """(GPU, exercise) -> {"solution": [speedups], "naive": [speedups]} over every current calibration record."""
    found = {}
    for run, cal in calibrations:
        if cal.get("protocol") != timing.PROTOCOL:
            continue
        gpu = cal.get("gpu") or run.info.get("gpu")
        for ex, rec in cal["exercises"].items():
            if not _evidence(ex, _date(run, cal)):
                continue
            d = found.setdefault((gpu, ex), {"solution": [], "naive": []})
            for key in ("solution", "naive"):
                if rec.get(f"{key}_speedup") is not None:
                    d[key].append(rec[f"{key}_speedup"])
    return found


def _distribution_problems(distributions) -> list[str]:
    """Where a GPU has REPEATS or more gradings of a solution: the slowest must clear the threshold by 15%
    and the naive version must fall to the floor in every run."""
    problems = []
    for (gpu, ex), d in sorted(distributions.items()):
        if len(d["solution"]) < REPEATS:
            continue
        perf = specs.get(ex).performance
        if min(d["solution"]) < perf.threshold * results.MARGIN:
            problems.append(f"{ex} on {gpu}: slowest of {len(d['solution'])} gradings {min(d['solution']):.3f}x, "
                            f"needs {perf.threshold * results.MARGIN:.3f}x")
        if d["naive"] and max(d["naive"]) > perf.floor:
            problems.append(f"{ex} on {gpu}: naive {max(d['naive']):.3f}x in some run, above the floor {perf.floor}")
    return problems


def test_repeated_gradings_per_gpu_hold_the_distribution_rules():
    assert not _distribution_problems(_distributions(CALIBRATIONS))


def test_repeated_gradings_are_read_from_their_run_folders(tmp_path):
    """The layout tools/gpu_repeat_grading.py wrote (run-1..run-N/calibration.json in one run folder) is read
    as N gradings of one GPU, and the rules catch a slow run and a naive version above the floor."""
    perf = specs.get("int8_weight_linear").performance
    folder = tmp_path / "h200-repeat"
    meta = {"gpu": "NVIDIA H200", "driver": "x", "python": "3.12", "torch": "2.11", "triton": "3.6",
            "date": "2026-11-28T00:00:00+00:00", "method": "test"}
    # run 6 timed the workload the exercise had before its timed_since: history, not a sixth grading
    for k, (sol, naive) in enumerate([(1.2, 0.3)] * 4 + [(perf.threshold * 1.1, perf.floor + 0.01), (0.1, 0.1)],
                                     start=1):
        date = meta["date"] if k <= REPEATS else "2026-11-20T00:00:00+00:00"
        results.write_json(folder / f"run-{k}" / results.CALIBRATION_FILE,
                           {**meta, "date": date, "protocol": timing.PROTOCOL, "margin": results.MARGIN,
                            "exercises": {"int8_weight_linear": {"solution_speedup": sol, "naive_speedup": naive,
                                                                 "graded_threshold": perf.threshold,
                                                                 "graded_floor": perf.floor}}})
    results.index(folder, meta)
    runs = results.runs(tmp_path)
    calibrations = [(run, cal) for run in runs for cal in run.calibrations()]
    d = _distributions(calibrations)
    assert len(d[("NVIDIA H200", "int8_weight_linear")]["solution"]) == REPEATS
    assert perf.timed_since and "2026-11-20" < perf.timed_since < meta["date"]
    problems = _distribution_problems(d)
    assert len(problems) == 2 and "slowest of 5 gradings" in problems[0] and "above the floor" in problems[1]
    from tools import gpu_repeat_grading  # the script's own table says the same

    shown = gpu_repeat_grading.table(gpu_repeat_grading.distributions(folder), REPEATS)
    assert "int8_weight_linear" in shown and shown.rstrip().endswith("FAILS")


def test_repeated_grading_resumes_at_the_next_notebook(tmp_path, monkeypatch, capsys):
    """A call cut off mid-run loses only the notebook it was grading: kept outcomes are skipped, a folder
    left without its outcome is graded again from scratch, and --stop-after starts nothing that would not end
    in time."""
    from tools import gpu_autograde, gpu_repeat_grading

    graded = []

    def fake_autograde(argv):
        folder, assignment = pathlib.Path(argv[0]), argv[argv.index("--assignments") + 1]
        assert not (folder / "left.txt").exists()  # a cut-off grading's folder starts again empty
        graded.append((folder.parent.name, assignment))
        folder.mkdir(parents=True)
        return 0

    monkeypatch.setattr(gpu_autograde, "main", fake_autograde)
    monkeypatch.setattr(results, "outcomes", lambda folder: [results.write_json(
        folder / f"{folder.name}-solution.json", {"notebooks": {}})])
    out = tmp_path / "repeat"
    results.write_json(out / "run-1" / "02_profiling" / "02_profiling-solution.json", {"notebooks": {}})
    (out / "run-1" / "08_memory").mkdir(parents=True)
    (out / "run-1" / "08_memory" / "left.txt").write_text("cut off")
    args = [str(out), "--runs", "2", "--assignments", "02_profiling,08_memory"]
    assert gpu_repeat_grading.main([*args, "--stop-after", "0"]) == 0 and not graded
    assert "stopped after" in capsys.readouterr().out
    assert gpu_repeat_grading.main(args) == 0
    assert graded == [("run-1", "08_memory"), ("run-2", "02_profiling"), ("run-2", "08_memory")]
    assert gpu_repeat_grading.main(args) == 0 and len(graded) == 3  # everything kept
    assert json.loads((out / "repeat-summary.json").read_text())["runs"] == 2


def test_repeated_grading_on_several_gpus_grades_each_notebook_once_on_one_gpu(tmp_path, monkeypatch):
    """--gpus 2: every (run, notebook) graded once, in a process of its own that sees one GPU."""
    from tools import gpu_repeat_grading

    seen, lock = [], threading.Lock()

    def fake_run(argv, env, **_):
        folder = pathlib.Path(argv[argv.index("tools.gpu_autograde") + 1])
        with lock:
            seen.append((folder.parent.name, folder.name, env["CUDA_VISIBLE_DEVICES"]))
        return subprocess.CompletedProcess(argv, 0)

    monkeypatch.setattr(gpu_repeat_grading.subprocess, "run", fake_run)
    monkeypatch.setattr(results, "outcomes", lambda folder: [results.write_json(
        folder / f"{folder.name}-solution.json", {"notebooks": {}})])
    out = tmp_path / "repeat"
    assert gpu_repeat_grading.main([str(out), "--runs", "3", "--gpus", "2",
                                    "--assignments", "02_profiling,08_memory"]) == 0
    assert sorted((r, a) for r, a, _ in seen) == [(f"run-{k}", a) for k in (1, 2, 3)
                                                  for a in ("02_profiling", "08_memory")]
    assert {gpu for *_, gpu in seen} <= {"0", "1"}  # (the queue's run order: the one-GPU resume test above)


def test_graded_solutions_are_found():
    assert len(_graded_solutions()) >= 20  # the 2026-11-26 gradings of 05, 07 and 09 on both GPUs


# The naive versions and the baselines are both eager torch (C++ launches): their ratio does not depend on
# the protocol's clock, so every record is evidence for the floors.
@pytest.mark.parametrize("where,exercise,speedup", _recorded("naive_speedup", CALIBRATIONS))
def test_the_naive_version_gets_no_performance_credit(where, exercise, speedup):
    perf = specs.get(exercise).performance
    assert perf.floor >= speedup, f"{exercise}: the naive version's {speedup:.3f}x on {where} is above the floor"
    assert perf.floor < perf.threshold


@pytest.mark.parametrize("where,exercise,speedup", _bench_evidence())
def test_the_reference_kernel_clears_the_threshold_it_is_evidence_for(where, exercise, speedup):
    perf = specs.get(exercise).performance
    assert perf.threshold <= speedup / results.MARGIN, (
        f"{exercise}: kernels_ref's {speedup:.3f}x ({where}) clears the threshold {perf.threshold} by only "
        f"{speedup / perf.threshold:.3f}")
    assert perf.floor < perf.threshold


def test_every_bench_evidence_is_found():
    # a renamed bench case must not silently drop a threshold's evidence
    assert {p.values[1] for p in _bench_evidence()} == set(BENCH_EVIDENCE)


# --------------------------------------------------------------------------- the README's tables

@pytest.mark.parametrize("relative", sorted(results_tables.FILES))
def test_readme_tables_are_what_results_generate(relative):
    text = (ROOT / relative).read_text()
    generated = results_tables.for_file(relative, results_tables.sections())
    assert results_tables.render(text, generated) == text, \
        f"{relative} is out of date with results/: run python -m tools.results_tables --write"


def test_headline_table_shows_the_newest_calibration_of_each_gpu():
    headline = results_tables.sections()["headline"]
    newest = {results_tables.gpu_model(run): run for run, _ in CALIBRATIONS}
    header = headline.splitlines()[0]
    assert all(f"| {results_tables.column(run)} |" in header for run in newest.values())
    assert "`softmax` | torch.softmax" in headline


def test_render_replaces_only_between_markers():
    text = "a\n<!-- results:x begin -->\nold\n<!-- results:x end -->\nb\n"
    assert results_tables.render(text, {"x": "new\\1 | y"}) == \
        "a\n<!-- results:x begin -->\nnew\\1 | y\n<!-- results:x end -->\nb\n"
    with pytest.raises(ValueError, match="results:y begin"):
        results_tables.render(text, {"y": "z"})


# --------------------------------------------------------------------------- what GPU runs write

META = {"gpu": "NVIDIA H200", "driver": "580.1", "python": "3.12.3", "torch": "2.11.0+cu130", "triton": "3.6.0",
        "date": "2026-12-01T10:00:00+00:00", "method": "m"}


def test_header_round_trips_and_names_the_run():
    assert results.read_header("# title\n" + results.header(META)) == META
    assert results.read_header(results.header(META, prefix="- ")) == META
    assert results.run_name(META) == "h200-2026-12-01"
    assert results.run_name({**META, "gpu": "NVIDIA H100 80GB HBM3"}) == "h100-2026-12-01"
    assert results.run_name({**META, "gpu": None}) == "cpu-2026-12-01"


def test_stamp_and_index_write_the_layout(tmp_path):
    (tmp_path / "autograder").mkdir()
    report = tmp_path / "autograder" / "good.run1.json"
    report.write_text(json.dumps({"submission": "s", "gpu": "kept", "exercises": []}))
    stamped = results.stamp(report, META)
    assert list(stamped)[:len(results.META_KEYS)] == list(results.META_KEYS) and stamped["gpu"] == "kept"
    (tmp_path / "bench-quick.json").write_text("{}")
    (tmp_path / "bench-quick-matmul.png").write_bytes(b"")
    (tmp_path / "bench-quick.log").write_text(results.header(META) + "output\n")
    info = results.index(tmp_path, META)
    assert {f["path"]: f["kind"] for f in info["files"]} == {
        "autograder/good.run1.json": "grade", "bench-quick.json": "bench", "bench-quick-matmul.png": "plot",
        "bench-quick.log": "log"}
    assert all(f["what"] for f in info["files"]) and info["files"][0]["submission"] == "s"
    assert json.loads((tmp_path / results.RUN_FILE).read_text()) == info
    info["files"][0]["submission"] = "a correct kernel"  # what a person wrote survives a new index
    results.write_json(tmp_path / results.RUN_FILE, info)
    assert results.index(tmp_path, META)["files"][0]["submission"] == "a correct kernel"
    assert results.metadata(tmp_path / "bench-quick.log")["gpu"] == "NVIDIA H200"


def test_calibration_record_from_the_rows_gpu_autograde_writes():
    row = {"id": "vector_add", "baseline": "torch.add (eager)", "threshold": 0.75, "floor": 0.65,
           "naive": "clone + add_", "naive_ms": 0.46, "naive_baseline_ms": 0.28, "naive_speedup": 0.61,
           "solution_ms": 0.28, "solution_baseline_ms": 0.28, "solution_speedup": 0.99, "solution_passed": True,
           "solution_correct": True, "margin": 1.3, "suggested_threshold": 0.85, "ok": True}
    rec = results.calibration_record([row, {"id": "softmax", "note": "calibration needs a GPU"}], META)
    assert {k: rec[k] for k in results.META_KEYS} == META and rec["margin"] == results.MARGIN
    assert list(rec["exercises"]) == ["vector_add"]
    assert rec["exercises"]["vector_add"] == {
        "baseline": "torch.add (eager)", "naive": "clone + add_", "naive_ms": 0.46, "naive_baseline_ms": 0.28,
        "naive_speedup": 0.61, "solution_ms": 0.28, "solution_baseline_ms": 0.28, "solution_speedup": 0.99,
        "solution_correct": True, "solution_passed": True, "graded_threshold": 0.75, "graded_floor": 0.65}


def test_gpu_autograde_stamps_its_report_without_a_gpu(tmp_path):
    from tools import gpu_autograde

    assert gpu_autograde.main([str(tmp_path), "--skip-nbgrader", "--assignments", "03_triton_basics"]) == 0
    report = json.loads((tmp_path / "autograde.json").read_text())
    assert set(results.META_KEYS) <= set(report) and report["method"]
    assert all("note" in row for row in report["calibration"])  # measured only on a GPU
    assert not (tmp_path / results.CALIBRATION_FILE).exists()


def test_outcomes_keep_each_students_report_and_drop_the_scratch_course(tmp_path):
    run = {"gpu": "NVIDIA H100 80GB HBM3", "driver": "580", "python": "3.12", "torch": "2.11", "triton": "3.6",
           "date": "2026-11-26T10:00:00+00:00", "method": "m"}
    (tmp_path / "autograde.json").write_text(json.dumps(run))
    graded = tmp_path / "course" / "autograder_results" / "05_layer_norm"
    graded.mkdir(parents=True)
    # graded on a machine of several GPUs: the grading pinned to one of them (CUDA_VISIBLE_DEVICES) says which
    (graded / "solution.json").write_text(json.dumps({"visible_devices": "1", "torch": "2.11", "notebooks": {"x": 1}}))
    [kept] = results.outcomes(tmp_path)
    data = json.loads(kept.read_text())
    assert kept.name == "05_layer_norm-solution.json" and not (tmp_path / "course").exists()
    assert data["gpu"] == run["gpu"] and data["protocol"] == timing.PROTOCOL and data["notebooks"] == {"x": 1}
    assert data["visible_devices"] == "1"
    assert results.file_kind(f"grading-x/{kept.name}") == "outcome"


def test_bench_tables_show_a_repeated_suite_by_its_worst_run_and_a_single_run_as_one_run(tmp_path, monkeypatch):
    """A folder holding a single-run bench file and a repeated suite (python -m kernels_ref.bench --repeat 3):
    results/README.md's table shows the single run's goals "got" in "1 run" and the repeated suite's worst
    and median with its medians as the rates; the goals table shows each goal's worst run."""
    import sys
    import types

    import torch

    from kernels_ref import bench
    from kernels_ref.benchmarking import BenchCase, Ceilings, Goal

    def case(op):
        return BenchCase(op, "4096 float32", lambda: (torch.ones(8),), {"triton": lambda x: x * 1, "eager": lambda x: x + 0},
                         reference=lambda x: x.double(), nbytes=10**9, goals=[Goal.faster("triton", "eager", 1.5)])

    fake = types.ModuleType("fake_results_ops")
    fake.bench_cases = lambda quick: [case("fake_single"), case("fake_repeated")]
    monkeypatch.setitem(sys.modules, "fake_results_ops", fake)
    folder = tmp_path / "h200-2026-12-01"
    ceilings = Ceilings(copy_gbps=3000.0, matmul_tflops=700.0)

    def run(argv, ms):  # triton's time, then eager's (1.0 ms)
        times = iter([ms, 1.0])
        return bench.main(argv, timer=lambda fn: next(times), ceilings=ceilings, modules=("fake_results_ops",))

    assert run(["--quick", "--ops", "fake_single", "--no-progress", "--json", str(folder / "bench-quick.json")], 0.5) == 0
    triton_ms = iter([1 / 1.7, 1 / 1.4, 1 / 1.9])  # speedups over eager 1.7, 1.4, 1.9
    assert bench.main(["--quick", "--ops", "fake_repeated", "--repeat", "3", "--no-progress", "--json",
                       str(folder / "bench-repeat.json")],
                      run_once=lambda argv: run(argv, next(triton_ms))) == 0
    info = results.index(folder, META)
    kinds = {f["path"]: f["kind"] for f in info["files"]}
    assert kinds["bench-repeat.json"] == "bench" and kinds["bench-repeat-run2.json"] == "bench-run"
    runs = results.runs(tmp_path)
    shown = results_tables.bench_section(runs)
    [single] = [line for line in shown.splitlines() if line.startswith("| fake_single")]
    assert "pass (1 run): eager/triton >= 1.5 (got 2)" in single and "2000 GB/s" in single
    [repeated] = [line for line in shown.splitlines() if line.startswith("| fake_repeated")]
    assert "miss (worst of 3 runs): eager/triton >= 1.5 (worst 1.4, median 1.7)" in repeated
    assert "| 1700 GB/s | 0.567 | 1.70x |" in repeated  # the median run's rate and speedup
    assert "the summary of 3 of 3 runs" in " ".join(shown.split()) and "copy **3000 GB/s**" in shown
    goals = results_tables.goals_section(runs)
    assert goals.splitlines()[0].endswith("| goal | H200 |")
    assert "| fake_repeated fp32 | 4096 | eager/triton >= 1.5 | 1.4 MISS (worst of 3 runs, 2026-12-01) |" in goals
    assert "| fake_single fp32 | 4096 | eager/triton >= 1.5 | 2 pass (1 run, 2026-12-01) |" in goals
