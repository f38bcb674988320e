"""The autograder's performance path and its GPU faults, in one run.

    python -m tools.gpu_autograder_check [--out DIR] [--full] [--only LABEL,...] [--jobs N] [--hang-timeout S]

Every grade goes through the real CLI (``python -m autograder grade FILE --exercise ID --json ...``),
one subprocess per submission. A grading whose verdict rests on a time runs alone (the GPU is never shared
while timing); ``--jobs N`` runs the gradings that expect correctness alone (escapes, honest code) N at a time
first:

1. performance: the correct Triton ``softmax`` and ``bias_gelu`` (tests/submissions/good_triton.py) must
   pass performance, the legal but slow ones (tests/gpu_submissions/naive_triton.py) must fail it; each
   is graded twice and the run-to-run spread of time and speedup is printed;
2. escapes: the slow softmax on a side stream, deferred to the next call, cached after warm-up, or
   returning unwritten memory when not poisoned: none may pass or be timed faster than the slow one;
3. faults: a notebook (built from tests/gpu_submissions/faults.py) where softmax stores out of bounds
   (CUDA only: skipped on a CPU, with a note), online_softmax asks for 10 TB and vector_add hangs; the
   other exercise, bias_gelu, must still be graded, and each fault explained in plain words;
4. legality (docs/GUARANTEES.md, 2; ``--only legality``, about 3 minutes on an H100): operators run by a
   pre-run hook or a heuristic, torch.softmax itself as a pre-run hook, a launch from a grid callable, the
   course's measuring tools as benchmark and peak_memory_bytes, a module beside the submission, imports from
   the repository or by a computed name, a helper module that is bytecode alone, an output of the
   learner's own class that computes when walked, logits written through ``out=``, a branch only the
   timed workload takes, values taken out of torch as text or through functools, Python called from a
   kernel, tl.softmax in place of the exercise (also handed to a kernel as its constexpr argument), an
   object of the learner's class as a launch argument, a child process started through torch.os, a
   finalizer writing the answer after the call, a kernel whose function is wrapped (Triton would compile
   another function's source), a bare numpy name the source never binds, the operator recorder emptied or
   the dispatch modes switched off (reached through a lambda's parameter), inspect and importlib reached the
   same way, a Triton function replaced through a parameter, and code that waits at import in the graded
   worker alone (so that the workers sharing its cases take them all) all score 0; a public-style fused loss, a triton_op softmax,
   a libdevice GELU, a softmax with math's constants and triton.jit called as a function in its kernel,
   Triton's vector-add tutorial, a notebook written with IPython's syntax (read without IPython on the
   runner), environment reports and TRITON_INTERPRET set at import, benchmarks at import with literal
   statements, Liger-Kernel's utils beside a layer norm, kernels made by a functools.partial of triton.jit
   and in a cached factory, and notebook 10's paged launcher reading
   ``seq_lens.tolist()`` stay correct. ``--only legality-solutions`` (about 7 minutes): the solutions of every notebook with a Triton
   exercise (03-10) stay correct (and their performance is shown), with the worker's audit hook letting Triton run its
   compilers.

Prints one line per grade as it finishes, the repeat-run spread, what was expected and whether it
held, and last a table (submission, exercise, correct, perf passed, time, baseline, speedup, GB/s,
fraction of peak, message). Writes each grade's JSON and text report and summary.json under --out,
each JSON with the machine's keys (GPU, driver, versions, date, method: results/README.md). On a GPU
machine with its results collected into one tarball, `bash tools/gpu_session.sh autograder-check`.

Exit code 0 when every expectation held, 1 otherwise. On a CPU performance shows as not graded and
its expectations read "n/a". Budget on an H100: about 6 minutes (25 workers of ~5-20 s, a 30 s hang).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tools import results

ROOT = Path(__file__).resolve().parent.parent
SUBMISSIONS = ROOT / "tests" / "submissions"
GPU_SUBMISSIONS = ROOT / "tests" / "gpu_submissions"
MESSAGE_WIDTH = 60
ESCAPE_FLOOR = 0.5  # an escape timed under half the honest slow kernel's time got away with something


@dataclass
class Grade:
    """One CLI call: a submission file, the exercises graded, what each must show."""

    label: str
    path: Path
    exercises: list
    expect: dict                     # exercise id -> expectation name (see EXPECTATIONS)
    timeout: float | None = None
    cuda_only: set = field(default_factory=set)  # exercises skipped without a GPU
    repeat: int = 1
    group: str = "core"              # --only takes a group's name too (GROUPS)


# ----------------------------------------------------------------------------- rows and the table

def row_from_exercise(label: str, ex: dict, run: int = 1) -> dict:
    """One table row from an exercise of the CLI's JSON."""
    perf = ex.get("performance") or {}
    graded = bool(perf.get("graded"))
    ach = perf.get("achieved") or {}
    feedback = [f for f in ex.get("feedback") or [] if not f.startswith(("hint:", "correctness points withheld"))]
    violations = list(ex.get("violations") or [])
    # what went wrong first: a failure or a problem in plain words, then a rule broken, then the rest
    messages = (feedback + violations) if not ex["correct"] else (violations + feedback)
    return {
        "submission": label, "exercise": ex["id"], "run": run, "correct": bool(ex["correct"]),
        "perf_graded": graded, "perf_passed": bool(perf.get("passed")) if graded else None,
        "time_ms": perf.get("time_ms") if graded else None,
        "baseline_ms": perf.get("baseline_ms") if graded else None,
        "speedup": perf.get("speedup") if graded else None,
        "gbps": ach.get("value") if graded and ach.get("unit") == "GB/s" else None,
        "fraction_of_peak": perf.get("fraction_of_peak") if graded else None,
        "score": ex.get("score"), "points": ex.get("points"),
        "message": messages[0] if messages else "", "all_messages": " | ".join(messages),
    }


def skipped_row(label: str, exercise: str, why: str) -> dict:
    return {"submission": label, "exercise": exercise, "run": 1, "correct": None, "perf_graded": False,
            "perf_passed": None, "time_ms": None, "baseline_ms": None, "speedup": None, "gbps": None,
            "fraction_of_peak": None, "score": None, "points": None, "message": f"skipped: {why}",
            "skipped": True}


def _cell(value, kind: str) -> str:
    if value is None:
        return "-"
    if kind == "bool":
        return "yes" if value else "no"
    if kind == "ms":
        return f"{value:.4g}"
    if kind == "x":
        return f"{value:.2f}"
    if kind == "gbps":
        return f"{value:.0f}"
    if kind == "pct":
        return f"{100 * value:.0f}%"
    return str(value)


COLUMNS = [("submission", "submission", "str"), ("exercise", "exercise", "str"), ("correct", "correct", "bool"),
           ("perf_passed", "perf passed", "bool"), ("time_ms", "time ms", "ms"), ("baseline_ms", "base ms", "ms"),
           ("speedup", "speedup", "x"), ("gbps", "GB/s", "gbps"), ("fraction_of_peak", "of peak", "pct"),
           ("message", "message", "str")]


def truncate(text: str, width: int = MESSAGE_WIDTH) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 3] + "..."


def format_table(rows: list) -> str:
    """A plain-text table, one line per row, columns as wide as their widest cell."""
    cells = []
    for r in rows:
        label = r["submission"] + (f" #{r['run']}" if r.get("run", 1) > 1 else "")
        line = []
        for key, _title, kind in COLUMNS:
            value = label if key == "submission" else r.get(key)
            if key == "perf_passed" and not r.get("perf_graded"):
                value = None
            text = _cell(value, kind)
            line.append(truncate(text) if key == "message" else text)
        cells.append(line)
    titles = [title for _k, title, _kind in COLUMNS]
    widths = [max([len(t)] + [len(c[i]) for c in cells]) for i, t in enumerate(titles)]
    numeric = {"ms", "x", "gbps", "pct"}

    def fmt(line):
        out = []
        for i, (text, (_k, _t, kind)) in enumerate(zip(line, COLUMNS)):
            last = i == len(COLUMNS) - 1
            out.append(text if last else (text.rjust(widths[i]) if kind in numeric else text.ljust(widths[i])))
        return "  ".join(out).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([fmt(titles), rule] + [fmt(c) for c in cells])


def spread(a, b):
    """|a - b| relative to their mean (None when either is missing)."""
    if a is None or b is None or not (a + b):
        return None
    return abs(a - b) / ((a + b) / 2)


def repeat_spreads(rows: list) -> list:
    """For every (submission, exercise) graded more than once: times, speedups and their spread."""
    groups = {}
    for r in rows:
        groups.setdefault((r["submission"], r["exercise"]), []).append(r)
    out = []
    for (label, exercise), rs in groups.items():
        if len(rs) < 2:
            continue
        a, b = rs[0], rs[1]
        out.append({"submission": label, "exercise": exercise, "time_ms": [a["time_ms"], b["time_ms"]],
                    "speedup": [a["speedup"], b["speedup"]], "time_spread": spread(a["time_ms"], b["time_ms"]),
                    "speedup_spread": spread(a["speedup"], b["speedup"]),
                    "same_verdicts": (a["correct"], a["perf_passed"]) == (b["correct"], b["perf_passed"])})
    return out


def format_spreads(spreads: list) -> str:
    lines = []
    for s in spreads:
        t = ", ".join(_cell(v, "ms") for v in s["time_ms"])
        x = ", ".join(_cell(v, "x") for v in s["speedup"])
        lines.append(f"  {s['submission']:<24} {s['exercise']:<10} time ms {t:<18} spread {_cell(s['time_spread'], 'pct'):>4}"
                     f"   speedup {x:<12} spread {_cell(s['speedup_spread'], 'pct'):>4}"
                     f"   verdicts {'agree' if s['same_verdicts'] else 'DIFFER'}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- expectations

def _min_time(rows, label, exercise):
    times = [r["time_ms"] for r in rows if r["submission"] == label and r["exercise"] == exercise
             and r["time_ms"] is not None]
    return min(times) if times else None


def judge_row(row: dict, expectation: str, rows: list, on_gpu: bool) -> tuple:
    """(True / False / None for n/a, why) for one row against its expectation."""
    if row.get("skipped"):
        return None, row["message"]
    msg = (row.get("all_messages") or row["message"]).lower()
    if expectation in ("fast", "slow"):  # correct either way; the performance verdict must be the expected one
        if not row["correct"]:
            return False, "should be correct"
        if not on_gpu:
            return None, "correct; performance n/a without a GPU"
        fast = expectation == "fast"
        if row["perf_passed"] == fast:
            return True, f"correct, {'passes' if fast else 'fails'} performance"
        return False, f"should {'pass' if fast else 'fail'} performance"
    if expectation in ("escape", "escape_wrong", "escape_wrong_on_gpu"):
        must_be_wrong = expectation == "escape_wrong" or (expectation == "escape_wrong_on_gpu" and on_gpu)
        if must_be_wrong and row["correct"]:
            return False, "should be found wrong"
        if not must_be_wrong and not row["correct"]:
            return False, "should be correct (its values are right once synchronized)"
        if not on_gpu:
            return (None, "performance n/a without a GPU")
        if row["perf_passed"]:
            return False, "escaped: passed performance"
        honest = _min_time(rows, "naive_triton", "softmax")
        if row["time_ms"] is not None and honest is not None and row["time_ms"] < ESCAPE_FLOOR * honest:
            return False, f"escaped: timed {row['time_ms']:.4g} ms, the honest slow kernel {honest:.4g} ms"
        return True, "no pass, no shorter time"
    if expectation == "correct":  # legality must not cost honest work its points; performance reported only
        if not row["correct"]:
            return False, "should be correct (honest work keeps its points)"
        return True, "correct" + (f"; performance {'passed' if row['perf_passed'] else 'not passed'}" if on_gpu else "")
    if expectation == "zero_on_gpu":  # a branch only the timed workload takes: nothing is timed on a CPU
        if not on_gpu:
            return None, "n/a without a GPU (nothing is timed; the branch is a note)"
        expectation = "zero"
    if expectation == "zero":
        if row["correct"] or (row.get("score") or 0) > 0:
            return False, "an escape must score 0"
        return (True, "scored 0: " + row["message"][:40]) if row["message"] else (False, "0 points but no reason given")
    if expectation.startswith("fault:"):
        words = expectation[len("fault:"):]
        if row["correct"]:
            return False, "a fault should cost this exercise"
        return (True, "fault explained") if words in msg else (False, f"message should say {words!r}")
    if expectation == "graded":
        if not row["correct"]:
            return False, "the fault in another exercise should not cost this one"
        if on_gpu and not row["perf_graded"]:
            return False, "should also be timed"
        return True, "graded as usual"
    raise ValueError(f"unknown expectation {expectation!r}")


# ----------------------------------------------------------------------------- the plan and the run

def notebook_from_source(source: str) -> dict:
    """An nbformat-4 notebook with one code cell per top-level block of ``source`` (blank-line separated)."""
    blocks = [b.strip("\n") for b in source.split("\n\n\n") if b.strip()]
    cells = [{"cell_type": "code", "execution_count": None, "id": f"cell-{i}", "metadata": {}, "outputs": [],
              "source": b.splitlines(keepends=True)} for i, b in enumerate(blocks)]
    return {"cells": cells, "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                                         "name": "python3"}},
            "nbformat": 4, "nbformat_minor": 5}


# Legality (docs/GUARANTEES.md, 2): the escapes of Python inside a launch (class 1), code beside the
# submission or from the repository (class 2), a size rule dodged with out= (class 6) and a branch only the
# timed workload takes must score 0 on the GPU; honest code keeps its points.
LEGALITY_ESCAPES = ("escape_hook_computes", "escape_heuristic_computes", "escape_grid_launches",
                    "escape_tells_the_graded_worker",
                    "escape_library_hook", "escape_helper_module", "escape_imports_repository",
                    "escape_unaudited_module", "escape_only_when_timed", "escape_lazy_tuple",
                    "bytecode_beside", "escape_values_leave_as_text", "escape_python_in_kernel",
                    "escape_forks_through_an_alias", "escape_finalizer_computes", "escape_object_as_launch_argument",
                    "escape_library_softmax_as_argument", "escape_wrapped_kernel_source", "escape_interpreter_names",
                    "escape_torch_evaluates_text", "escape_triton_runs_a_command", "escape_finalizer_on_output",
                    "escape_empties_the_recorder", "escape_switches_modes_off", "escape_patches_through_a_parameter",
                    "escape_patches_a_tensor_method", "escape_patches_a_tensor_property", "escape_patches_clone",
                    "escape_patches_a_storage_method", "escape_patches_the_channels_json",
                    "escape_patches_a_builtin", "escape_replaces_torchs_tensor_name",
                    "escape_uninitialized_buffer_element_size", "escape_uninitialized_buffer_partial",
                    "escape_traces_the_recorder", "escape_profiles_the_recorder",
                    "escape_class_property_in_the_function_half", "escape_hashes_in_the_recorder",
                    "escape_hashes_an_arguments_class",
                    "escape_redispatches_below_the_recorder",
                    "escape_calls_a_kernel_for_a_key", "escape_numpy_through_a_wrapper", "escape_shadows_a_tensor_method",
                    "escape_tells_timed_calls", "escape_fills_a_tensors_dict", "escape_course_tools_handed_on",
                    "escape_finalizer_in_the_recorder", "escape_finalizer_inside_an_operator",
                    "escape_hook_inside_backward", "escape_storage_dies_in_an_operator", "escape_buffer_dies_in_set",
                    "escape_grad_dies_in_a_setter", "escape_modules_through_parameters",
                    "escape_rewrites_its_source")
# escapes of exercises other than softmax: file stem -> the exercises it answers
OTHER_EXERCISES = {"escape_course_tools": ["benchmark", "peak_memory_bytes"], "escape_lazy_tuple": ["layer_norm_fwd"],
                   "escape_course_tools_handed_on": ["benchmark"],
                   "escape_modules_through_parameters": ["benchmark", "peak_memory_bytes"],
                   "escape_rewrites_its_source": ["softmax", "online_softmax"]}
TIMED_ONLY = ("escape_only_when_timed", "escape_tells_timed_calls")
def _triton_solutions() -> tuple:
    """Every notebook with an exercise graded as the learner's Triton kernel, with all its exercises (the
    registry's order): the course's solutions must keep their points wherever the worker's audit runs."""
    from autograder import specs
    from autograder.specs.base import TRITON

    notebooks = dict.fromkeys(ex.notebook for ex in specs.EXERCISES.values() if ex.kind == TRITON)
    return tuple((nb, [ex.id for ex in specs.for_notebook(nb)]) for nb in notebooks)


LEGALITY_SOLUTIONS = _triton_solutions()
GROUPS = ("core", "legality", "legality-solutions")


def bytecode_beside(out: Path) -> Path:
    """The correct softmax importing a helper package whose module is bytecode alone (``fastops/rows.pyc``,
    compiled here from a torch.softmax): the worker must refuse to run it (class 2, code beside the submission)."""
    import py_compile

    folder = out / "bytecode_beside"
    (folder / "fastops").mkdir(parents=True, exist_ok=True)
    (folder / "fastops" / "__init__.py").write_text("")
    payload = folder / "payload.py"
    payload.write_text("import torch\nrows = torch.softmax\n")
    py_compile.compile(str(payload), cfile=str(folder / "fastops" / "rows.pyc"), doraise=True)
    payload.unlink()
    sub = folder / "sub.py"
    sub.write_text("from fastops import rows  # noqa: F401\n" + (SUBMISSIONS / "good_triton.py").read_text())
    return sub


def ipython_notebook(out: Path) -> Path:
    """An honest softmax notebook written with IPython's syntax (the kernel in a %%time cell, %run and
    %%writefile helpers, %time, %timeit -o, a shell capture, help): on a runner without IPython the grader
    reads the escapes itself, and the notebook must keep its points."""
    folder = out / "ipython_notebook"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "rows.py").write_text("ROWS = 4\n")
    cells = ["%%time\n" + (SUBMISSIONS / "good_triton.py").read_text(), "%run rows.py",
             "%%writefile shapes_wf.py\nCOLS = 10\n", "from shapes_wf import COLS",
             "x = torch.randn(ROWS, COLS, device=DEVICE)\n%time y = softmax(x)\nr = %timeit -o softmax(x)\n"
             "print(r.best)\ngpu = !nvidia-smi\ntl.load?"]
    nb = notebook_from_source("\n\n\n".join(["import torch\nimport triton.language as tl\nfrom course import DEVICE"]))
    nb["cells"] += [{"cell_type": "code", "execution_count": None, "id": f"magic-{i}", "metadata": {}, "outputs": [],
                     "source": c.splitlines(keepends=True)} for i, c in enumerate(cells)]
    path = folder / "ipython_notebook.ipynb"
    path.write_text(json.dumps(nb, indent=1))
    return path


def paged_metadata_notebook(out: Path) -> Path:
    """The course's notebook 10 solution with its paged launcher sizing the splits by the longest sequence
    read out of torch (``max(seq_lens.tolist())``: metadata, as the grader gave it)."""
    source = (ROOT / "solutions" / "10_serving" / "10_serving.ipynb").read_text()
    line = "    capacity = block_table.shape[1] * P\\n"
    if line not in source:
        raise SystemExit("solutions/10_serving: the paged launcher's capacity line moved; update paged_metadata_notebook")
    folder = out / "paged_metadata"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "paged_metadata.ipynb"
    path.write_text(source.replace(line, "    capacity = max(max(seq_lens.tolist()), 1)\\n"))
    return path


# Submissions graded for one exercise in the legality group: (file stem, exercise, expected). Honest code
# written the way public kernels and notebooks are (math's constants and triton.jit called as a function in
# a kernel, Triton's tutorial asking its driver for the device; PyTorch's triton_op + wrap_triton and
# Liger-Kernel's libdevice.tanh, compiled on the GPU; environment reports and TRITON_INTERPRET set as Triton
# documents; benchmarks at import with literal statements; Liger's utils beside a layer norm) keeps its
# points; out= logits score 0.
LEGALITY_ONE_EXERCISE = (("honest_softmax_idioms", "softmax", "correct"),
                         ("honest_tutorial_vector_add", "vector_add", "correct"),
                         ("lce_logits_through_out", "linear_cross_entropy", "zero"),
                         ("later/lce_values_leave_in_backward", "linear_cross_entropy", "zero"),
                         ("later/dequantized_chunks_table_08", "int8_weight_linear", "zero"),
                         ("later/honest_int8_torch_plumbing_08", "int8_weight_linear", "correct"),
                         ("liger_style_lce", "linear_cross_entropy", "correct"),
                         ("honest_triton_op_softmax", "softmax", "correct"),
                         ("honest_custom_op_softmax", "softmax", "correct"),
                         ("honest_libdevice_bias_gelu", "bias_gelu", "correct"),
                         ("honest_environment_banner", "softmax", "correct"),
                         ("honest_benchmarks_at_import", "softmax", "correct"),
                         ("liger_style_layer_norm", "layer_norm_fwd", "correct"),
                         ("honest_kernels_made_by_calls", "softmax", "correct"),
                         ("honest_stub_kept_star_import", "vector_add", "correct"))


def legality_plan(built: Path) -> list:
    return [
        *[Grade(stem.rsplit("/", 1)[-1], SUBMISSIONS / f"{stem}.py", [exercise], {exercise: expected}, group="legality")
          for stem, exercise, expected in LEGALITY_ONE_EXERCISE],
        # IPython's syntax in a notebook; notebook 10's launcher reading its metadata out of torch
        Grade("ipython_notebook", ipython_notebook(built), ["softmax"], {"softmax": "correct"}, group="legality"),
        Grade("paged_metadata", paged_metadata_notebook(built), ["paged_decode_attention"],
              {"paged_decode_attention": "correct"}, group="legality"),
        *[Grade(stem, SUBMISSIONS / f"{stem}.py", exercises, {e: "zero" for e in exercises}, group="legality")
          for stem, exercises in OTHER_EXERCISES.items()],
        Grade("bytecode_beside", bytecode_beside(built), ["softmax"], {"softmax": "zero"}, group="legality"),
        *[Grade(f"solution_{nb}", ROOT / "solutions" / nb / f"{nb}.ipynb", exercises,
                {e: "correct" for e in exercises}, group="legality-solutions")
          for nb, exercises in LEGALITY_SOLUTIONS],
    ]


def plan(out: Path, hang_timeout: float, built: Path | None = None) -> list:
    """Every grading of the check; the submissions it writes itself go under ``built`` (default ``out``; the
    command line keeps them out of its reports folder, which a results/ run keeps), the faults notebook in ``out``."""
    nb = out / "faults_notebook.ipynb"
    nb.write_text(json.dumps(notebook_from_source((GPU_SUBMISSIONS / "faults.py").read_text()), indent=1))
    return [
        Grade("good_triton", SUBMISSIONS / "good_triton.py", ["softmax", "bias_gelu"],
              {"softmax": "fast", "bias_gelu": "fast"}, repeat=2),
        Grade("naive_triton", GPU_SUBMISSIONS / "naive_triton.py", ["softmax", "bias_gelu"],
              {"softmax": "slow", "bias_gelu": "slow"}, repeat=2),
        Grade("side_stream", GPU_SUBMISSIONS / "side_stream.py", ["softmax"], {"softmax": "zero"}),
        Grade("deferred", GPU_SUBMISSIONS / "deferred.py", ["softmax"], {"softmax": "escape_wrong"}),
        Grade("cache_after_warmup", GPU_SUBMISSIONS / "cache_after_warmup.py", ["softmax"], {"softmax": "zero"}),
        Grade("stale_unless_poisoned", GPU_SUBMISSIONS / "stale_unless_poisoned.py", ["softmax"],
              {"softmax": "zero"}),
        *[Grade(p.stem, p, ["softmax"], {"softmax": "zero_on_gpu" if p.stem in TIMED_ONLY else "zero"},
                group="legality" if p.stem in LEGALITY_ESCAPES else "core")
          for p in sorted(SUBMISSIONS.glob("escape_*.py")) if p.stem not in OTHER_EXERCISES],
        *legality_plan(built or out),
        *[Grade(f"solution_{nb}", ROOT / "solutions" / nb / f"{nb}.ipynb", exercises,
                {e: "fast" for e in exercises})
          for nb, exercises in (("03_triton_basics", ["vector_add", "bias_gelu"]),
                                ("04_fused_softmax", ["softmax", "online_softmax"]))],
        Grade("faults_notebook", nb, ["bias_gelu", "softmax", "online_softmax", "vector_add"],
              {"bias_gelu": "graded", "softmax": "fault:memory it does not own",
               "online_softmax": "fault:out of memory", "vector_add": "fault:time limit"},
              timeout=hang_timeout, cuda_only={"softmax"}),
    ]


def run_cli(grade: Grade, exercises: list, out: Path, run: int, quick: bool, meta: dict | None = None) -> tuple:
    """Grade through ``python -m autograder grade``; (exercise dicts of its JSON, seconds, exit code)."""
    stem = f"{grade.label}.run{run}"
    json_path, text_path = out / f"{stem}.json", out / f"{stem}.txt"
    cmd = [sys.executable, "-m", "autograder", "grade", str(grade.path), "--json", str(json_path)]
    for e in exercises:
        cmd += ["--exercise", e]
    if quick:
        cmd.append("--quick")
    if grade.timeout:
        cmd += ["--timeout", str(grade.timeout)]
    env = dict(os.environ)
    # good_triton (tests/submissions) and naive_triton (tests/gpu_submissions) import each other's kernels
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(SUBMISSIONS), str(GPU_SUBMISSIONS)]
                                        + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          stdin=subprocess.DEVNULL)
    seconds = time.monotonic() - start
    text_path.write_bytes(results.header({**(meta or {}), "method": " ".join(cmd[1:])}).encode() + proc.stdout)
    if proc.returncode != 0 or not json_path.exists():
        return None, seconds, proc.returncode
    report = results.stamp(json_path, {**(meta or {}), "method": GRADE_METHOD})
    return report["exercises"], seconds, proc.returncode


# Expectations about correctness alone: such gradings may share the GPU (--jobs), their times being reported only
UNTIMED_EXPECTATIONS = frozenset({"zero", "zero_on_gpu", "correct"})


def grade_once(grade: Grade, run: int, out: Path, quick: bool, env: dict, on_gpu: bool) -> tuple:
    """One CLI call of ``grade``: (its rows, its call record, the line that reports it)."""
    exercises = [e for e in grade.exercises if on_gpu or e not in grade.cuda_only]
    exs, seconds, rc = run_cli(grade, exercises, out, run, quick=quick, meta=env)
    call = {"label": grade.label, "run": run, "seconds": round(seconds, 1), "exit_code": rc}
    if exs is None:
        rows = [dict(skipped_row(grade.label, e, f"the CLI failed (exit code {rc}), see {grade.label}.run{run}.txt"),
                     run=run, skipped=False, correct=False, cli_failed=True) for e in exercises]
        return rows, call, f"  {grade.label} run {run}: CLI FAILED (exit {rc}) after {seconds:.0f} s"
    verdicts = ", ".join(f"{ex['id']} {'ok' if ex['correct'] else 'wrong'}" for ex in exs)
    return [row_from_exercise(grade.label, ex, run) for ex in exs], call, f"  {grade.label} run {run}: {verdicts} ({seconds:.0f} s)"


def graded_in_order(calls: list, jobs: int, out: Path, quick: bool, env: dict, on_gpu: bool):
    """Each (grade, run) graded, its result yielded. With ``jobs`` > 1 the gradings that expect correctness
    alone (UNTIMED_EXPECTATIONS: escapes, honest code) run that many at a time, the GPU shared:
    their verdicts do not depend on a time. Gradings whose expectations rest on a time (fast, slow, a
    time limit) run alone after them (each group in plan order), on a GPU nothing else uses."""
    untimed = [jobs > 1 and set(grade.expect.values()) <= UNTIMED_EXPECTATIONS for grade, _ in calls]
    shared = [c for c, u in zip(calls, untimed) if u]
    alone = [c for c, u in zip(calls, untimed) if not u]
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        futures = [pool.submit(grade_once, grade, run, out, quick, env, on_gpu) for grade, run in shared]
        for future in futures:
            yield future.result()
    for grade, run in alone:
        yield grade_once(grade, run, out, quick, env, on_gpu)


GRADE_METHOD = ("python -m autograder grade --json: each exercise in a fresh worker; on a GPU the submission "
                "and its baseline timed interleaved there (autograder/timing.py), median; speedup = baseline_ms / ms")


def environment() -> dict:
    import course
    import torch

    return {**results.this_machine(), "method": "python -m tools.gpu_autograder_check; " + GRADE_METHOD,
            "device": course.describe(), "cuda": torch.version.cuda}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.gpu_autograder_check", description=__doc__.split("\n")[0])
    p.add_argument("--out", default="gpu_autograder_check_out", help="folder for the JSON and text reports")
    p.add_argument("--full", action="store_true", help="the specs' full correctness cases (default: --quick)")
    p.add_argument("--only", metavar="LABEL,...", default=None,
                   help="run only these submissions or groups (e.g. faults_notebook,stale_unless_poisoned: the "
                        "parts the 2026-11-22 H100 run did not reach; legality: the escapes of "
                        "docs/GUARANTEES.md 2 and a public-style loss; legality-solutions: the solutions of every notebook with a Triton exercise)")
    p.add_argument("--jobs", type=int, default=1,
                   help="gradings that expect correctness alone (escapes, honest code) run this many at a time")
    p.add_argument("--hang-timeout", type=float, default=None,
                   help="seconds per exercise in the faults notebook (default 30 on a GPU, 90 on a CPU)")
    args = p.parse_args(argv)
    import course
    from autograder.report import write_json_atomic

    on_gpu = course.ON_GPU
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    hang_timeout = args.hang_timeout or (30.0 if on_gpu else 90.0)
    env = environment()
    print(f"autograder GPU check on {env['device']} (cuda {env['cuda']}); reports under {out}", flush=True)
    started = time.monotonic()
    rows, calls, notes = [], [], []
    built = Path(tempfile.mkdtemp(prefix="gpu-check-submissions-"))
    grades = plan(out, hang_timeout, built)
    if args.only:
        wanted = {w.strip() for w in args.only.split(",") if w.strip()}
        unknown = wanted - {g.label for g in grades} - set(GROUPS)
        if unknown:
            p.error(f"--only: unknown submission(s) {sorted(unknown)}; known: {[g.label for g in grades]} "
                    f"and the groups {list(GROUPS)}")
        grades = [g for g in grades if g.label in wanted or g.group in wanted]
    for grade in grades:
        for e in grade.exercises:
            if not (on_gpu or e not in grade.cuda_only):
                why = "a CUDA-only fault (an out-of-bounds store under the CPU interpreter hits the grader's own memory)"
                rows.append(skipped_row(grade.label, e, why))
                notes.append(f"{grade.label}/{e} {why}")
    calls_to_make = [(grade, run) for grade in grades for run in range(1, grade.repeat + 1)]
    for grade_rows, call, line in graded_in_order(calls_to_make, args.jobs, out, not args.full, env, on_gpu):
        rows.extend(grade_rows)
        calls.append(call)
        print(line, flush=True)
    expectations = []
    expect = {g.label: g.expect for g in grades}
    for r in rows:
        expectation = expect[r["submission"]][r["exercise"]]
        ok, why = (False, r["message"]) if r.get("cli_failed") else judge_row(r, expectation, rows, on_gpu)
        r["expectation"], r["expectation_met"], r["expectation_note"] = expectation, ok, why
        expectations.append({"submission": r["submission"], "exercise": r["exercise"], "run": r["run"],
                             "expectation": expectation, "met": ok, "note": why})
    spreads = repeat_spreads([r for r in rows if not r.get("skipped")])
    seconds = time.monotonic() - started
    summary = dict(env, seconds=round(seconds, 1), quick=not args.full, calls=calls, rows=rows,
                   repeats=spreads, expectations=expectations, notes=notes)
    write_json_atomic(out / "summary.json", summary)

    failed = [x for x in expectations if x["met"] is False]
    print("\nrepeat runs (time and speedup, run 1 vs run 2):")
    print(format_spreads(spreads) or "  (none)")
    print("\nexpectations:")
    for x in expectations:
        mark = {True: "ok  ", False: "FAIL", None: "n/a "}[x["met"]]
        print(f"  {mark} {x['submission']}/{x['exercise']} #{x['run']} ({x['expectation']}): {truncate(x['note'], 100)}")
    for n in notes:
        print(f"  note: {n}")
    met = sum(1 for x in expectations if x["met"])
    na = sum(1 for x in expectations if x["met"] is None)
    print(f"\n{met} met, {len(failed)} failed, {na} n/a; {seconds:.0f} s; {env['device']}; "
          f"JSON under {out}\n")
    print(format_table(rows))
    shutil.rmtree(built, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
