"""The trust model, one class of escape at a time (docs/GUARANTEES.md): a submission that tries to get points
for work it did not do scores 0, with a message that names what was found; the honest solutions keep
their marks (tests/test_autograder_nbgrader.py, tests/test_autograder_guarantees.py). CPU, quick cases.

The GPU-only escapes (a clock patched inside the timed process, a cache that answers the timed calls)
are in tests/test_autograder_gpu.py; here the same submissions are graded on the CPU, where their source
and their behaviour already give them away.
"""
from __future__ import annotations

import contextlib
import os
import re

import pytest

from _autograder_helpers import SUBMISSIONS, graded, text

_LAUNCH_CALLBACKS = str(__import__("pathlib").Path(__file__).with_name("_launch_callbacks.py"))


def escape(name: str) -> dict:
    return graded(f"escape_{name}.py", ("softmax",))["softmax"]


def test_forged_replies_at_import_score_zero_and_the_writes_are_named():
    ex = escape("forges_result")
    assert ex["score"] == 0 and not ex["correct"]
    assert any("os.write" in v for v in ex["violations"])       # writing into the grader's descriptors
    assert "ended the process" in text(ex) or "sent something" in text(ex)  # the forgery itself went nowhere


def test_patching_the_clocks_and_the_grader_scores_zero_and_names_each_patch():
    ex = escape("patches_timer")
    assert ex["score"] == 0 and not ex["correct"]
    found = "\n".join(ex["violations"])
    assert "torch.cuda.Event.elapsed_time" in found and "time.perf_counter" in found
    assert "imports the grader" in found and "autograder.timing.performance_credit" in found


def test_a_content_keyed_cache_scores_zero_and_is_named():
    ex = escape("content_cache")
    assert ex["score"] == 0 and not ex["correct"]
    assert any("keeps results between calls" in v and "_answers" in v for v in ex["violations"])


def test_telling_a_checked_call_from_a_timed_one_scores_zero_and_the_fallback_is_named():
    ex = escape("detects_phase")
    assert ex["score"] == 0 and not ex["correct"]
    found = "\n".join(ex["violations"])
    assert "_get_current_dispatch_mode" in found and "fill_uninitialized_memory" in found
    # the shortcut it takes when it thinks it is only timed: shown; costs the points where a graded call runs it
    assert "torch.softmax" in text(ex)


def test_outputs_that_another_library_computed_score_zero_and_the_line_is_named():
    ex = escape("hides_torch")
    assert ex["score"] == 0 and not ex["correct"]
    assert all(c["verdict"] == "ok" for c in ex["cases"])  # right answers, computed outside any kernel ...
    # ... by numpy, on values handed over by Tensor.numpy: deny by default counts that call itself
    assert any("calls Tensor.numpy at line 21" in v for v in ex["violations"]), ex["violations"]


@pytest.mark.parametrize("name", ["forges_result", "patches_timer", "content_cache", "detects_phase", "hides_torch"])
def test_every_escape_says_why_points_were_withheld(name):
    ex = escape(name)
    assert ex["violations"] or ex["feedback"], name


# --------------------------------------------------------------------- Python that runs inside a launch

@pytest.mark.parametrize("name, line", [("hook_computes", 13), ("heuristic_computes", 13)])
def test_operators_run_inside_a_launch_are_seen_and_cost_the_points(name, line):
    # a pre-run hook and a heuristic run while Triton launches the kernel: deny by default sees them there
    ex = escape(name)
    assert ex["score"] == 0 and not ex["correct"]
    assert any(f"at line {line}:" in v and "calls torch operator aten." in v for v in ex["violations"]), ex["violations"]


def test_a_library_function_as_a_launch_callback_is_refused_and_the_line_is_named():
    # torch.softmax as a pre-run hook runs with no line of the submission on the stack: refused at the launch
    ex = escape("library_hook")
    assert ex["score"] == 0 and not ex["correct"]
    assert any(v.startswith("gives Triton a pre-run hook torch.softmax at line 22:") for v in ex["violations"]), \
        ex["violations"]
    assert not any(f.startswith("hint:") for f in ex["feedback"]), ex["feedback"]  # the refusal is the cause


class _Library:
    """Stands for a library's object: its method is not the learner's code (this file is not the learner's)."""

    def method(self, *args, **kwargs):
        return (1,)


def _callbacks():
    """(the learner's own callables, others'): decided from what each is, whatever it is named."""
    import torch
    import triton

    from _launch_callbacks import OwnCallable, own_function, partial_of_own

    own = [own_function, OwnCallable.a_lambda, OwnCallable().method, partial_of_own, OwnCallable()]
    others = [torch.softmax, __import__("functools").partial(torch.add, alpha=1), _Library().method, _Library,
              triton.cdiv, print]
    return own, others


def test_own_code_is_decided_from_what_the_callable_is():
    from autograder.legality import OpRecorder, own_code

    is_learners = OpRecorder(_LAUNCH_CALLBACKS).is_learners
    own, others = _callbacks()
    assert [own_code(f, is_learners) for f in own] == [True] * len(own)
    assert [own_code(f, is_learners) for f in others] == [False] * len(others)


@pytest.mark.parametrize("role", ["grid", "pre_run_hook", "heuristic", "autotune pre_hook", "config pre_hook",
                                  "prune_configs_by", "course autotune config pre_hook", "hook that adds another"])
def test_every_launch_callback_must_be_the_learners_own_code(role):
    import torch

    from _launch_callbacks import OwnCallable, launch
    from autograder.legality import (LAUNCH_CALLBACK, CallbackRefused, LaunchCallbacks, OpRecorder, ThreadGuard,
                                     install_launch_counter)

    install_launch_counter()
    x = torch.arange(8.0)
    saved = LaunchCallbacks.owner
    try:
        LaunchCallbacks.arm(OpRecorder(_LAUNCH_CALLBACKS))
        rec = OpRecorder(_LAUNCH_CALLBACKS)
        with ThreadGuard.armed_for(rec):
            assert torch.equal(launch(role, x, OwnCallable().method), x + 1)   # the learner's own callbacks run
            with pytest.raises(CallbackRefused, match="Triton was given"):
                launch(role, x, _Library().method)
        assert [op.split(":")[0] for op, _line, _n in rec.records()] == [LAUNCH_CALLBACK], rec.records()
        assert torch.equal(launch(role, x, _Library().method), x + 1)     # outside learner code: not judged
    finally:
        LaunchCallbacks.owner = saved


def test_a_launch_made_from_a_grid_callable_is_counted():
    ex = escape("grid_launches")
    assert ex["score"] == 0 and not ex["correct"]
    assert any("launched 2 Triton kernels in one call" in v for v in ex["violations"]), ex["violations"]


# --------------------------------------------------------------------- the course's own tools as answers

def test_the_course_measuring_tools_given_as_the_answer_score_zero_and_are_named():
    # benchmark by measure.timer.median_ms, peak_memory_bytes = measure.memory.peak_bytes: right values, not
    # the learner's measurement (the notebooks' own solutions keep their points: test_solutions_graded.py)
    result = graded("escape_course_tools.py", ("benchmark", "peak_memory_bytes"))
    for ex_id, found in (("benchmark", "runs measure.timer.median_ms at line 15:"),
                         ("peak_memory_bytes", "runs measure.memory.peak_bytes at the entry point itself:")):
        ex = result[ex_id]
        assert ex["score"] == 0 and not ex["correct"], text(ex)
        assert any(v.startswith(found) for v in ex["violations"]), ex["violations"]


def test_the_course_measuring_tools_handed_to_another_measure_function_score_zero_and_are_named():
    # measure.ceilings times with the timer it is handed (median_ms around the learner's function), under the
    # profiler that replaces any profile function: every module of measure is watched where it is defined
    ex = graded("escape_course_tools_handed_on.py", ("benchmark",))["benchmark"]
    assert ex["score"] == 0 and not ex["correct"], text(ex)
    assert any(v.startswith("runs measure.ceilings.measure_ceilings at line 19:") for v in ex["violations"]), ex["violations"]


def test_check_refuses_the_course_measuring_tools_as_the_grade_does(monkeypatch, capsys):
    # a PASSED check predicts the grade: the notebook's check watches the same tools
    from autograder import check
    from measure.memory import peak_bytes

    monkeypatch.delenv("AUTOGRADER_WORKER", raising=False)
    assert check("peak_memory_bytes", lambda fn, *args: peak_bytes(fn, *args), quick=True) is False
    assert "runs measure.memory.peak_bytes" in capsys.readouterr().out


def test_the_course_tools_a_measurement_may_use_are_its_own_rule():
    from autograder.specs import get

    assert get("benchmark").course_tools == {"measure.timer.l2_flush_buffer", "measure.timer.cpu_flush_buffer",
                                             "measure.timer.cpu_cache_bytes"}  # the cache flush it hands out
    assert get("peak_memory_bytes").course_tools == frozenset()   # a measurement: none by default
    assert get("softmax").course_tools is None                    # the operator rules judge the rest


# --------------------------------------------------------------------- work on another thread

def test_work_started_on_another_thread_is_refused_and_the_line_is_named():
    # the recorder and the memory meter are per-thread: graded code may not start a thread at all
    ex = escape("computes_on_a_thread")
    assert ex["score"] == 0 and not ex["correct"]
    assert any(v.startswith("starts a thread at line 20:") for v in ex["violations"]), ex["violations"]
    assert not any(f.startswith("hint:") for f in ex["feedback"]), ex["feedback"]  # the refusal is the cause


def test_threads_are_refused_only_on_the_graded_thread_and_only_while_armed():
    import threading

    from autograder.legality import THREAD_START, OpRecorder, ThreadGuard, ThreadRefused

    def start() -> bool:
        thread = threading.Thread(target=lambda: None)
        thread.start()
        thread.join()
        return True

    others, go = [], threading.Event()

    def other_thread():  # a notebook kernel's own thread, started before the graded call
        go.wait()
        others.append(start())

    helper = threading.Thread(target=other_thread)
    helper.start()
    rec = OpRecorder(__file__)
    with ThreadGuard.armed_for(rec):
        with pytest.raises(ThreadRefused):
            start()
        go.set()
        helper.join()
    assert others == [True]
    assert [op for op, _line, _n in rec.records()] == [THREAD_START]
    assert start()  # the grader's own threads, outside the learner's import and calls


@pytest.mark.parametrize("name, found", [
    ("reads_frames", ["line 11: uses logging.currentframe", "line 13: uses frame.f_locals", "line 16: uses frame.f_back"]),
    ("patches_through_alias", ["line 10: uses logging.sys", "line 11: passes setattr on as a value"])])
def test_reaching_the_grader_through_frames_or_module_aliases_scores_zero_and_is_named(name, found):
    # logging.currentframe is sys._getframe, logging.sys is sys: the audit judges the attribute, not the spelling
    ex = escape(name)
    assert ex["score"] == 0 and not ex["correct"]
    for part in found:
        assert any(v.startswith(part) for v in ex["violations"]), (part, ex["violations"])


@pytest.mark.parametrize("name, found", [
    ("empties_the_recorder", "calls torch.utils._python_dispatch._get_current_dispatch_mode_stack at line 15"),
    ("switches_modes_off", "calls torch._C._DisableTorchDispatch at line 15")])
def test_reaching_the_recorder_on_the_mode_stack_by_any_spelling_scores_zero_and_is_named(name, found):
    # the stack is read (or the modes switched off) through a lambda's parameter: no name in the source says
    # so; the worker refuses the call itself, whatever reached it
    ex = escape(name)
    assert ex["score"] == 0 and not ex["correct"]
    assert any(v.startswith(found) and "mode stacks" in v for v in ex["violations"]), ex["violations"]


@pytest.mark.parametrize("name, found", [
    ("redispatches_below_the_recorder", "calls torch._ops.OpOverload.redispatch at line 14"),
    ("calls_a_kernel_for_a_key", "calls torch._ops.OpOverload._op_dk at line 12")])
def test_operators_called_below_the_python_key_score_zero_and_are_named(name, found):
    # the operator's kernel is called at the backend's dispatch key: no mode sees it; the worker refuses the
    # call where it runs, and the audit names the dispatch keys in the source
    ex = escape(name)
    assert ex["score"] == 0 and not ex["correct"]
    assert any(v.startswith(found) and "calling operators below it" in v for v in ex["violations"]), ex["violations"]
    assert "below the Python key" in text(ex)
    assert any("DispatchKey" in v and "below the Python dispatch key" in v for v in ex["violations"]), ex["violations"]


def test_modules_reached_through_a_parameter_score_zero_and_both_layers_name_the_lines():
    # inspect and importlib read as a Triton module's attributes through a lambda's parameter: the audit judges
    # the read by its name; the worker refuses what runs (the probe's closure read, the grader's module
    # imported by a computed name although it is already loaded)
    found = graded("escape_modules_through_parameters.py", ("benchmark", "peak_memory_bytes"))
    for exercise, line, runs in (("benchmark", 13, "calls inspect.getclosurevars"),
                                 ("peak_memory_bytes", 17, "imports autograder.probes")):
        ex = found[exercise]
        assert ex["score"] == 0 and not ex["correct"], exercise
        said = "\n".join(ex["violations"])
        assert "line 8: uses m.inspect" in said and "line 9: uses m.importlib.import_module" in said, said
        assert f"{runs}" in said and f"at line {line}: refused" in said, said


def test_a_library_patched_through_a_parameter_scores_zero_and_the_line_is_named():
    # triton.language handed to a helper that sets tl.sigmoid: the worker finds the library function
    # replaced, puts Triton's back and names the line that writes it
    ex = escape("patches_through_a_parameter")
    assert ex["score"] == 0 and not ex["correct"]
    assert any(v.startswith("replaces triton.language.sigmoid at line 19: refused") for v in ex["violations"]), text(ex)


def test_a_tensor_method_replaced_scores_zero():
    # torch.Tensor.detach replaced at import (functools.update_wrapper on the class): the worker ships the
    # outputs with it outside any recorded call; it finds the method replaced and puts torch's back first
    ex = escape("patches_a_tensor_method")
    assert ex["score"] == 0 and not ex["correct"]
    assert any(v.startswith("replaces torch.Tensor.detach") for v in ex["violations"]), text(ex)


# --------------------------------------------------------------------- code beside the submission

def test_an_import_laundered_through_a_course_function_is_refused_while_learner_code_runs(tmp_path):
    # a course function handed import_module makes a course frame the nearest asker: while the learner's
    # code runs every import is judged anyway; outside that span the grader's own imports pass as before
    import functools

    from autograder.imports import ImportGuard, ImportRefused
    from autograder.legality import ThreadGuard
    from measure.timer import wall_clock

    source = tmp_path / "submission.py"
    source.write_text("")
    guard = ImportGuard(str(source), str(tmp_path))
    laundered = functools.partial(guard.find_spec, "kernels_ref")
    assert wall_clock(laundered)[1] is not None                # the grader's own: found, not refused
    with ThreadGuard.armed_for(), pytest.raises(ImportRefused, match="course's repository"):
        wall_clock(laundered)
    with ThreadGuard.armed_for():
        assert wall_clock(functools.partial(guard.find_spec, "measure.timer"))[1] is not None  # the course's own



def test_a_module_beside_the_submission_is_audited_as_the_submission():
    ex = escape("helper_module")
    assert ex["score"] == 0 and not ex["correct"]
    found = "\n".join(ex["violations"])
    assert "_disarms_grader.py, line 5:" in found and "_disarms_grader.py, line 6:" in found, found


@pytest.mark.parametrize("name, why", [("imports_repository", "part of the course's repository"),
                                       ("unaudited_module", "the grader did not audit")])
def test_imports_from_outside_the_installed_packages_are_refused(name, why):
    ex = escape(name)
    assert ex["score"] == 0 and not ex["correct"]
    assert why in text(ex) and "(at line 10)" in text(ex), text(ex)


def _write(folder, files: dict) -> None:
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _compiled(folder, name: str, text: str, to: str, unchecked: bool = False) -> None:
    """Bytecode of ``text`` (a scratch file ``name``) written to ``to``, as a learner could ship it."""
    import py_compile

    scratch = folder / name
    scratch.write_text(text)
    mode = py_compile.PycInvalidationMode.UNCHECKED_HASH if unchecked else None
    py_compile.compile(str(scratch), cfile=str(folder / to), doraise=True, invalidation_mode=mode)
    scratch.unlink()


@contextlib.contextmanager
def _guarded_imports(folder, submission: str):
    """The worker's import guard over ``folder`` (the submission's), handed what the grader audited there."""
    import importlib
    import sys

    from autograder.imports import ImportGuard, local_sources

    (folder / "submission.py").write_text(submission)
    audited = local_sources(submission, folder)
    guard = ImportGuard(str(folder / "submission.py"), str(folder), audited).install()
    saved_path, before = list(sys.path), set(sys.modules)
    sys.path.insert(0, str(folder))
    importlib.invalidate_caches()
    try:
        yield guard
    finally:
        sys.meta_path.remove(guard)
        sys.path[:] = saved_path
        for name in set(sys.modules) - before:
            del sys.modules[name]


def test_a_helper_named_tools_and_a_namespace_package_beside_the_submission_are_the_learners(tmp_path, monkeypatch):
    """Decided from where a module is, not its name: tools.py beside a notebook is the learner's (only at the
    repository's root is ``tools`` the course's own), and a folder without __init__.py is a namespace package
    (PEP 420) whose modules are audited and run as read."""
    import importlib
    import sys

    from autograder.imports import local_sources

    _write(tmp_path, {"tools.py": "def settings(n):\n    return 'tools'\n",
                      "rowkern/settings.py": "def settings(n):\n    return 'namespace'\n"})
    source = "from tools import settings\nfrom rowkern.settings import settings as ns\n"
    found = {os.path.relpath(p, tmp_path) for p in local_sources(source, tmp_path)}
    assert found == {"tools.py", os.path.join("rowkern", "settings.py")}, found
    for name in ("tools", "rowkern", "rowkern.settings"):
        monkeypatch.delitem(sys.modules, name, raising=False)  # the repository's own tools, if a test loaded it
    with _guarded_imports(tmp_path, source):
        assert importlib.import_module("tools").settings(1) == "tools"
        assert importlib.import_module("rowkern.settings").settings(1) == "namespace"
    from autograder.imports import REPOSITORY

    assert local_sources("import tools\n", REPOSITORY) == {}  # the course's own tools, at its root


def test_a_module_beside_the_submission_runs_the_text_the_audit_read(tmp_path):
    # its __pycache__ holds bytecode of other source that Python would never check (UNCHECKED_HASH), and the
    # file changes after the audit: the module runs the audited text, which is also what inspect reads
    import importlib
    import inspect

    _write(tmp_path, {"fasthelp/__init__.py": "", "fasthelp/rows.py": "def value():\n    return 'audited'\n"})
    _compiled(tmp_path, "other.py", "def value():\n    return 'bytecode'\n",
              "fasthelp/__pycache__/" + importlib.util.cache_from_source("rows.py").split("/")[-1], unchecked=True)
    with _guarded_imports(tmp_path, "from fasthelp import rows\n"):
        (tmp_path / "fasthelp" / "rows.py").write_text("def value():\n    return 'rewritten'\n")
        rows = importlib.import_module("fasthelp.rows")
        assert rows.value() == "audited"
        assert "'audited'" in inspect.getsource(rows.value)  # what Triton reads a kernel's source from
        assert rows.__file__ == str((tmp_path / "fasthelp" / "rows.py").resolve())


def test_a_coding_line_cannot_decode_a_module_beside_the_submission_into_other_code(tmp_path):
    # the submission's own codec would turn "#@ " comments into code: the worker compiles the UTF-8 text
    # the audit read, and the audit refuses the declaration, naming the file and line
    import codecs
    import importlib

    from autograder.grading import helper_violations
    from autograder.specs import get
    from autograder.submission import load

    def search(name):
        if name != "l3hide":
            return None
        return codecs.CodecInfo(lambda t, e="strict": (t.encode(), len(t)),
                                lambda b, e="strict": (bytes(b).decode().replace("#@ ", ""), len(b)), name="l3hide")

    helper = "# -*- coding: l3hide -*-\nVALUE = 'audited'\n#@ VALUE = 'decoded'\n"
    _write(tmp_path, {"rowhelp.py": helper, "plain.py": "# -*- coding: latin-1 -*-\nVALUE = 1\n"})
    codecs.register(search)
    try:
        with _guarded_imports(tmp_path, "import rowhelp\nimport plain\n"):
            assert importlib.import_module("rowhelp").VALUE == "audited"
    finally:
        codecs.unregister(search)
    found = helper_violations(get("softmax"), load(tmp_path / "submission.py"))
    assert len(found) == 1 and found[0].startswith("rowhelp.py, line 1: declares its source encoding as 'l3hide'"), found
    # the submission's own file alike (Triton would read its kernels through the codec); UTF-8 declared is fine
    from autograder.grading import static_violations

    for cookie, bad in (("#!/usr/bin/env python\n# vim: set fileencoding=l3hide :\n", True), ("# coding: utf-8\n", False)):
        (tmp_path / "own.py").write_text(cookie + "def softmax(x):\n    return x\n")
        own = static_violations(get("softmax"), load(tmp_path / "own.py")).violations
        assert any(v.startswith("line 2: declares its source encoding as 'l3hide'") for v in own) == bad, own


@pytest.mark.parametrize("kind", ["sourceless bytecode", "extension module", "sys.path", "package __path__"])
def test_code_beside_the_submission_the_audit_never_read_is_refused_whoever_imports_it(tmp_path, kind):
    # refused by what the file is, and also when a library (here a course function) asks for it: a lazy
    # import outside the learner's call must not run an unaudited file either
    import functools
    import importlib

    from autograder.imports import ImportRefused
    from measure.timer import wall_clock

    submission, wanted, why = {
        "sourceless bytecode": ("from fastops import rows\n", "fastops.rows", "fastops/rows.pyc is compiled bytecode"),
        "extension module": ("from fastext import rows\n", "fastext.rows",
                             "fastext/rows" + importlib.machinery.EXTENSION_SUFFIXES[0] + " is a compiled extension"),
        "sys.path": ("import rowops\n", "rowops", "vendor/rowops.py is a file beside the submission that the grader did not audit"),
        "package __path__": ("import pkg\n", "pkg.rowops", "vendor/rowops.py is a file beside the submission that the grader did not audit"),
    }[kind]
    _write(tmp_path, {"fastops/__init__.py": "", "fastext/__init__.py": "", "rowops.py": "VALUE = 1\n",
                      "vendor/rowops.py": "VALUE = 2\n", "pkg/__init__.py": ""})
    _compiled(tmp_path, "payload.py", "VALUE = 3\n", "fastops/rows.pyc")
    (tmp_path / "fastext" / ("rows" + importlib.machinery.EXTENSION_SUFFIXES[0])).write_bytes(b"\x7fELF not loaded")
    with _guarded_imports(tmp_path, submission):
        if kind == "sys.path":
            import sys

            sys.path.insert(0, str(tmp_path / "vendor"))
        if kind == "package __path__":
            importlib.import_module("pkg").__path__.insert(0, str(tmp_path / "vendor"))
        with pytest.raises(ImportRefused, match=re.escape(why)):
            wall_clock(functools.partial(importlib.import_module, wanted))


def test_a_module_the_learner_wrote_elsewhere_is_refused_even_to_a_library(tmp_path):
    # a file written to a scratch folder and put first on sys.path, found by a library's (here a course
    # function's) lazy import after the call: it is no installed package, whoever asks
    import functools
    import importlib
    import sys

    from autograder.imports import ImportRefused
    from measure.timer import wall_clock

    (tmp_path / "sub").mkdir()
    _write(tmp_path, {"scratch/l3_lazy_dependency.py": "VALUE = 1\n"})
    with _guarded_imports(tmp_path / "sub", "import torch\n"):
        sys.path.insert(0, str(tmp_path / "scratch"))
        with pytest.raises(ImportRefused, match="l3_lazy_dependency is not an installed package"):
            wall_clock(functools.partial(importlib.import_module, "l3_lazy_dependency"))


def test_bytecode_beside_the_submission_costs_the_points_and_the_message_names_the_file(tmp_path):
    from autograder.grading import grade_submission

    good = (SUBMISSIONS / "good_triton.py").read_text()
    _write(tmp_path, {"fastops/__init__.py": "", "sub.py": "from fastops import rows  # noqa: F401\n" + good})
    _compiled(tmp_path, "payload.py", "import torch\nrows = torch.softmax\n", "fastops/rows.pyc")
    ex = grade_submission(tmp_path / "sub.py", ["softmax"], quick=True, timeout=120.0)["exercises"][0]
    assert ex["score"] == 0 and not ex["correct"]
    assert "fastops/rows.pyc is compiled bytecode" in text(ex) and "(at line 1)" in text(ex), text(ex)


# --------------------------------------------------------------------- work done after the call

def test_an_output_of_the_learners_own_class_is_refused_before_it_can_compute():
    # a tuple subclass whose __iter__ computes the answer when the grader walks it (after the recorded call)
    ex = graded("escape_lazy_tuple.py", ("layer_norm_fwd",))["layer_norm_fwd"]
    assert ex["score"] == 0 and not ex["correct"]
    assert "OutputRefused: returned a _Later where the exercise returns plain tensors" in text(ex), text(ex)


def test_the_worker_reads_outputs_and_arguments_by_exact_type_running_none_of_their_code():
    # what the worker walks after a call (outputs to ship, an argument dict the learner's code could fill)
    import numpy as np
    import torch

    from autograder.argtree import map_tensors, tensors
    from autograder.worker import not_plain, ship

    def ran(*_a, **_k):
        raise AssertionError("learner code ran")

    class Trap(tuple):
        __iter__ = __len__ = __getitem__ = __eq__ = __hash__ = __bool__ = ran

    class Sneaky:
        __class__ = property(ran)  # what isinstance() reads

    t = torch.arange(3.0)
    t.detach = t.to = ran  # instance attributes win over methods: an unbound call reads past them
    assert not_plain([t, (1, 2.0, "s", None, True), np.float64(0.5)]) is None
    assert not_plain((t, Trap((t,)))) == "Trap" and not_plain(Sneaky()) == "Sneaky"
    assert not_plain(torch.nn.Parameter(t.clone())) == "Parameter"
    args = {"w": t, "trap": Trap((t,)), "sneaky": Sneaky(), "n": np.int64(4)}
    shipped = ship(args)
    assert torch.equal(shipped["w"], t) and shipped["n"] == 4 and type(shipped["n"]) is int
    assert shipped["trap"] == {"__unsupported__": "Trap"} and shipped["sneaky"] == {"__unsupported__": "Sneaky"}
    assert [id(x) for x in tensors(args)] == [id(t)]
    assert map_tensors(lambda x: 1, args)["sneaky"] is args["sneaky"]


# --------------------------------------------------------------------- size rules and what runs

def test_logits_written_through_out_count_against_the_size_rule():
    ex = graded("lce_logits_through_out.py", ("linear_cross_entropy",), 300.0)["linear_cross_entropy"]
    assert ex["score"] == 0 and not ex["correct"]
    assert any("aten.mm at line 14 produced a tensor of" in v for v in ex["violations"]), ex["violations"]


@pytest.mark.parametrize("name, entered", [
    # a storage freed inside set_ runs its finalizer: refused where the storage is handed over
    ("finalizer_inside_an_operator", "hands an operator a storage that carries an attribute or a weak reference"),
    # the engine runs a tensor hook inside Tensor.backward: the engine runs with the recorder on, so the
    # values the hook takes out of torch are named as anywhere else
    ("hook_inside_backward", "calls Tensor.tolist at line 19"),
    # a gradient carrying a C finalizer (a partial as __del__) let go of inside the grad setter, where the
    # function half is off: what a torch function lets go of is let go of under the recorder
    ("grad_dies_in_a_setter", "calls Tensor.tolist at line 27")])
def test_code_started_inside_the_recorders_handlers_scores_zero_and_is_named(name, entered):
    # torch takes the recorder's modes off while it runs an operator or a torch function: code of the
    # learner's that would start there is refused
    ex = escape(name)
    assert ex["score"] == 0 and not ex["correct"]
    assert any(v.startswith(entered) for v in ex["violations"]), ex["violations"]


def test_a_function_of_the_learners_that_an_operator_runs_is_named_where_it_is_entered():
    """Below the recorder's dispatch handler torch runs C++ kernels; a Python kernel registered for an
    operator of one's own (torch.library.Library, not custom_op) runs there with the recorder off: the watch
    names it where it is entered."""
    import torch

    from autograder import legality
    from autograder.legality import OpRecorder

    lib = torch.library.Library("watchtest", "DEF")
    lib.define("double(Tensor x) -> Tensor")

    def double(x):  # this file stands for the learner's source
        return x * 2

    lib.impl("double", double, "CPU")
    rec = OpRecorder(__file__)
    with rec:
        torch.ops.watchtest.double(torch.ones(3))
    entered = [op for op, line in rec.ops if op.startswith(legality.UNSEEN + ":")]
    assert entered == [legality.UNSEEN + ":double"], rec.ops
    assert ("mul", None) not in rec.ops and not any(op == "mul" for op, _ in rec.ops)  # (unseen: hence the rule)


def test_what_a_torch_function_lets_go_of_dies_under_the_recorder():
    """A finalizer with no Python frame of its own (a functools.partial as __del__, weakref.finalize's
    callback) freed inside a torch function runs while torch has the recorder's function half off: the graph
    detach_ frees (a saved tensor's attribute), a setter's old value (.grad, ._backward_hooks) are let go of
    under the recorder, so the values they take out of torch are named at the line."""
    import functools
    import weakref

    import torch

    from autograder.legality import OpRecorder

    x, taken = torch.randn(4, 5), []

    def carrier():
        class Carrier:
            __del__ = functools.partial(taken.extend, map(torch.Tensor.tolist, [x]))

        return Carrier()

    class Holder:
        pass

    def graded():
        w, t = torch.ones(5, requires_grad=True), torch.ones(5)
        t.keep = carrier()
        z = t * w
        del t
        z.detach_()  # the graph, and the tensor it saved, die inside detach_
        g = torch.ones(5)
        g.keep = carrier()
        w.grad = g
        del g
        w.grad = None  # the old gradient dies inside the setter
        h = Holder()
        weakref.finalize(h, functools.partial(taken.extend, map(torch.Tensor.tolist, [x])))
        w._backward_hooks = {0: h}
        del h
        w._backward_hooks = None  # the hooks' dict dies inside the setter
        b = torch.frombuffer(buffer(), dtype=torch.uint8)
        b.data = torch.zeros(8, dtype=torch.uint8)  # the old storage, and its Python buffer, die inside the setter

    def buffer():
        class Buffer(bytearray):
            __del__ = functools.partial(taken.extend, map(torch.Tensor.tolist, [x]))

        return Buffer(8)

    rec = OpRecorder(__file__)
    with rec:
        graded()
    first = graded.__code__.co_firstlineno
    lines = sorted(line - first for op, line, _ in rec.records() if op == "leaves_torch:Tensor.tolist")
    assert len(taken) == 4 and lines == [5, 10, 15, 17], rec.records()


def test_a_storage_that_carries_code_of_its_own_is_refused_before_an_operator_can_free_it():
    # no function of the learner's runs below the recorder (a partial called from C): the storage it rides
    # in is refused where it is handed to an operator, before torch can free it there
    ex = escape("storage_dies_in_an_operator")
    assert ex["score"] == 0 and not ex["correct"]
    assert any(v.startswith("hands an operator a storage that carries an attribute or a weak reference of its own")
               and "at line 23" in v for v in ex["violations"]), ex["violations"]


def test_what_dies_with_a_storage_set__lets_go_of_runs_under_the_recorder():
    # the storage's memory is a Python buffer of the learner's class: set_ lets go of it under the recorder,
    # so what its __del__ runs is recorded at the set_ line
    ex = escape("buffer_dies_in_set")
    assert ex["score"] == 0 and not ex["correct"]
    assert any(v.startswith("calls torch operator aten.softmax at line 21") for v in ex["violations"]), ex["violations"]


def test_the_learners_backward_runs_seen_as_the_forward_does():
    # the grader's harness runs the autograd engine with the recorder on: values taken out of torch in the
    # backward of the learner's autograd.Function are named as in its forward
    ex = graded("later/lce_values_leave_in_backward.py", ("linear_cross_entropy",), 300.0)["linear_cross_entropy"]
    assert ex["score"] == 0 and not ex["correct"]
    for line in (24, 25, 26):
        assert any(v.startswith(f"calls Tensor.tolist at line {line}") for v in ex["violations"]), ex["violations"]


def test_a_forbidden_call_no_graded_call_runs_is_a_note_and_costs_nothing():
    # on the CPU nothing is timed, so the branch for the timed workload never runs (on a GPU the recorded
    # call on the timed inputs runs it: tools/gpu_autograder_check.py)
    ex = escape("only_when_timed")
    assert ex["correct"] and not ex["violations"], text(ex)
    assert any(f.startswith("note: line 15: uses torch.softmax") and "no graded call ran it" in f
               for f in ex["feedback"]), ex["feedback"]


def test_a_public_style_fused_loss_keeps_every_correctness_point():
    # own method names, a rows' mask (aten.ne), importlib in a version check, torch.softmax / torch.gather /
    # F.cross_entropy in branches its arguments never take, a debug path
    ex = graded("liger_style_lce.py", ("linear_cross_entropy",), 300.0)["linear_cross_entropy"]
    assert ex["correct"] and not ex["violations"], text(ex)
    assert ex["score"] * ex["points"] == pytest.approx(10.0)  # and the memory points: a chunk at a time
    notes = [f for f in ex["feedback"] if f.startswith("note:")]
    lines = (SUBMISSIONS / "liger_style_lce.py").read_text().splitlines()
    never_run = {f"line {i}" for i, line in enumerate(lines, 1)
                 if any(call in line for call in ("torch.softmax(", "torch.gather(", ".cross_entropy("))}
    assert len(never_run) == 3 and {n.split(":")[1].strip() for n in notes} == never_run, notes


@pytest.mark.parametrize("name, exercise", [("honest_softmax_idioms.py", "softmax"),
                                            ("honest_attention_idioms.py", "naive_attention"),
                                            ("honest_triton_op_softmax.py", "softmax"),
                                            ("honest_custom_op_softmax.py", "softmax"),
                                            ("honest_checks_its_output.py", "softmax"),
                                            ("honest_libdevice_bias_gelu.py", "bias_gelu"),
                                            ("honest_tutorial_vector_add.py", "vector_add"),
                                            ("liger_style_layer_norm.py", "layer_norm_fwd"),
                                            ("honest_kernels_made_by_calls.py", "softmax"),
                                            ("honest_checkpoint_with_autograd_grad.py", "checkpointed_mlp")])
def test_honest_idioms_keep_every_correctness_point(name, exercise):
    # a table of compiled kernels, a configuration table filled in a helper, x.new_zeros, math.log2(math.e)
    # in a kernel, triton.jit called as a function, a warn-once global, a ValueError that shows x (softmax);
    # scores.new_full, ~mask and exp2 (naive attention): the way public and tutorial code is written;
    # PyTorch's torch.library.triton_op + wrap_triton, and custom_op with register_fake; Liger-Kernel's libdevice.tanh (on the CPU too);
    # Triton's vector-add tutorial, which asks Triton's driver for the device at import (the CPU here);
    # Liger-Kernel's utils beside a layer norm (compare_version imports the package it is given); a
    # functools.partial of triton.jit as a decorator and triton.jit called in a cached factory
    ex = graded(name, (exercise,))[exercise]
    assert ex["correct"] and not ex["violations"], text(ex)


def test_values_that_leave_torch_as_text_or_through_the_standard_library_score_zero_and_are_named():
    # str(x) at full precision (no operator runs: torch formats with the dispatch modes off) on odd row
    # counts, functools.singledispatch(Tensor.tolist) (a standard-library frame calls torch) on the others
    ex = escape("values_leave_as_text")
    assert ex["score"] == 0 and not ex["correct"]
    found = "\n".join(ex["violations"])
    assert "calls Tensor.__repr__ at line 35" in found and "calls Tensor.tolist at line 44" in found, found


def test_python_in_a_kernel_and_a_library_softmax_in_its_place_score_zero_and_are_named():
    # a @triton.jit body that calls a plain Python helper (numpy on the interpreter's host array: it would
    # not compile on a GPU), and tl.softmax where the exercise asks for the max, exp and sum
    ex = escape("python_in_kernel")
    assert ex["score"] == 0 and not ex["correct"]
    found = "\n".join(ex["violations"])
    assert "line 23: calls _rows in the Triton kernel _kernel" in found, found
    assert "line 25: calls tl.softmax in the Triton kernel _kernel" in found and "Triton's library softmax" in found


def test_a_folder_beside_the_submission_named_like_a_library_is_still_the_learners(tmp_path):
    """Frames belong to torch, Triton or an installed library by where those really are, not by a path
    that contains "/torch/", "site-packages" or "triton/runtime/interpreter.py": a learner can name their
    own folders so (mylib/torch/work.py), and an operator asked for there must be charged to them."""
    import importlib.util
    import sys

    from autograder import legality

    for rel in ("mylib/torch/work.py", "site-packages/work.py", "triton/runtime/interpreter.py"):
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("import sys\n\ndef here():\n    return sys._getframe()\n")
        spec = importlib.util.spec_from_file_location(f"beside_{len(rel)}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        frame = module.here()
        assert legality._asked_by(frame) == legality.LEARNER, rel
        assert not legality._is_library(str(path)), rel
        assert not legality.interpreter_plumbing(frame), rel
    torch_frame = sys.modules["torch"].__file__
    assert legality._is_library(torch_frame) and legality._is_library(legality._INTERPRETER)


# --------------------------------------------------------------------- what a launch may be handed

@contextlib.contextmanager
def _armed(kernel_library=None):
    """The worker's state while learner code runs: launches judged against the learner's file (the helper
    module stands for it), refusals recorded."""
    from autograder.legality import LaunchCallbacks, OpRecorder, ThreadGuard, install_launch_counter

    install_launch_counter()
    saved = LaunchCallbacks.owner, LaunchCallbacks.refused
    rec = OpRecorder(_LAUNCH_CALLBACKS)
    try:
        LaunchCallbacks.arm(OpRecorder(_LAUNCH_CALLBACKS), kernel_library)
        with ThreadGuard.armed_for(rec):
            yield rec
    finally:
        LaunchCallbacks.owner, LaunchCallbacks.refused = saved


def _refused_arguments():
    import functools

    import torch

    from _launch_callbacks import HasDataPtr, OwnCallable, own_exp, own_function

    partial = functools.partial(torch.ops.aten._softmax.default, torch.zeros(2), -1, False)
    return {  # name -> (extra, fn): a learner's object wherever a launch may run its methods
        "object with untyped_storage": (OwnCallable(), own_exp),  # the course's bounds check read its storage
        "object with data_ptr": (HasDataPtr(partial), own_exp),   # Triton's interpreter called data_ptr()
        "functools.partial as a constexpr function": (None, functools.partial(own_function)),
        "plain function as a constexpr function": (None, own_function),
        "object inside a tuple": ((1, OwnCallable()), own_exp),
        "bound method": (OwnCallable().method, own_exp),
    }


@pytest.mark.parametrize("name", sorted(_refused_arguments()))
def test_a_launch_is_refused_anything_but_what_a_kernel_takes(name):
    """Deny by default, from what each argument is: a learner's object handed to a launch has its methods
    called by Triton's launch or the interpreter, outside the kernel (no learner frame on the stack)."""
    import torch

    from _launch_callbacks import apply
    from autograder.legality import LAUNCH_ARGUMENT, ArgumentRefused, judge, launches, reset_launches
    from autograder.specs import get

    extra, fn = _refused_arguments()[name]
    with _armed() as rec:
        reset_launches()
        with pytest.raises(ArgumentRefused, match="a Triton kernel takes tensors"):
            apply(torch.arange(8.0), fn, extra)
        assert launches() == 0  # refused before it started
    assert [op.split(":")[0] for op, _line, _n in rec.records()] == [LAUNCH_ARGUMENT], rec.records()
    found = judge(get("softmax"), rec.records(), [1], False, "line {}".format)
    assert len(found) == 1 and found[0].startswith("launches _apply with "), found
    from _launch_callbacks import own_exp

    assert torch.allclose(apply(torch.arange(8.0), own_exp, None), torch.arange(8.0).exp())  # not armed: not judged


def test_launches_are_judged_in_checked_calls_and_left_to_the_clock_in_timed_ones(monkeypatch):
    """A timed call (learner code armed without a recorder, as the worker's call_many runs it) is judged by
    its outputs and the clock: the launch checks' Python (~80-110 us a launch on an H100's host) must not be
    charged to the kernel. The checked calls, which every correctness point rests on, judge every launch."""
    import torch

    from _launch_callbacks import OwnCallable, apply, own_exp
    from autograder.legality import ArgumentRefused, LaunchCallbacks, ThreadGuard

    with _armed():
        assert LaunchCallbacks.judging()
        with pytest.raises(ArgumentRefused):
            apply(torch.arange(8.0), own_exp, OwnCallable())
        with ThreadGuard.armed_for():  # the timed span
            assert not LaunchCallbacks.judging()
            monkeypatch.setattr(LaunchCallbacks, "_argument_problem", classmethod(lambda *a: pytest.fail("judged")))
            assert torch.allclose(apply(torch.arange(8.0), own_exp, None), torch.arange(8.0).exp())


def test_a_launch_takes_tensors_numbers_dtypes_and_triton_functions():
    import numpy as np
    import torch
    import triton.language as tl

    from _launch_callbacks import apply, own_exp
    from autograder.legality import LaunchCallbacks

    x = torch.arange(8.0)
    with _armed() as rec:
        for extra in (x, 3, 2.5, True, None, "gelu", torch.float16, tl.float16, tl.constexpr(4), np.int64(3),
                      (1, x), [2, 3], x.shape):
            assert torch.allclose(apply(x, own_exp, extra), x.exp()), extra
        assert torch.allclose(apply(x, tl.softmax), torch.softmax(x, 0))  # no exercise here refuses it
        for fn in (tl.exp, tl.maximum, tl.sigmoid):  # Triton's builtins (a GPU compiles them as constexprs)
            assert LaunchCallbacks._argument_problem(fn) is None, fn
    assert rec.records() == [], rec.records()


@pytest.mark.parametrize("exercise, name", [("softmax", "softmax"), ("layer_norm_bwd", "atomic_add")])
def test_a_triton_function_the_exercise_refuses_is_refused_as_a_launch_argument(exercise, name):
    """tl.softmax handed to a kernel as a constexpr (the kernel calls FN(x)), an atomic where the notebook
    asks for determinism: refused by what they are, whatever the kernel's source calls them."""
    import torch
    import triton.language as tl

    from _launch_callbacks import apply, own_exp
    from autograder.determinism import atomics
    from autograder.legality import ArgumentRefused
    from autograder.specs import get

    spec = get(exercise)
    library = {**spec.rules.kernel_library, **atomics(spec)}
    with _armed(library):
        with pytest.raises(ArgumentRefused, match=f"triton.language.{name}"):
            apply(torch.arange(8.0), getattr(tl, name))
        assert apply(torch.arange(8.0), own_exp).shape == (8,)  # the learner's own Triton function is fine


def test_a_launch_that_fails_after_it_started_is_counted():
    """A launch that raised after programs ran (their stores done) was made: counting only the launches that
    returned let a launcher hide a kernel (two where one is allowed). One that never started (does not
    compile, does not fit) is not counted."""
    import torch

    from _launch_callbacks import fails_after_storing
    from autograder.legality import _counted, launches, reset_launches

    with _armed():
        reset_launches()
        y = fails_after_storing(torch.arange(8.0))
        assert torch.equal(y[:4], torch.arange(4.0))  # the first program stored its part before the failure
        assert launches() == 1
    from triton.runtime.errors import OutOfResources

    reset_launches()
    with pytest.raises(OutOfResources):
        with _counted():
            raise OutOfResources(1, 0, "shared memory")
    assert launches() == 0


def test_a_learners_object_handed_to_a_launch_scores_zero_and_the_line_is_named():
    # the object's untyped_storage, a functools.partial of aten's softmax, was called by the course's bounds
    # check (a frame the recorder took for the interpreter's plumbing): refused at the launch, by what it is
    ex = escape("object_as_launch_argument")
    assert ex["score"] == 0 and not ex["correct"]
    assert any(v.startswith("launches _touch with an object of type submission._Arg as its argument EXTRA at "
                            "line 28:") for v in ex["violations"]), ex["violations"]
    assert not any(f.startswith("hint:") for f in ex["feedback"]), ex["feedback"]  # the refusal is the cause


def test_a_library_softmax_handed_to_the_kernel_as_an_argument_scores_zero_and_is_named():
    # the kernel calls FN(x); the launch hands it tl.softmax: judged by what the argument is
    ex = escape("library_softmax_as_argument")
    assert ex["score"] == 0 and not ex["correct"]
    assert any(v.startswith("launches _rows with triton.language.softmax as its argument FN at line 22:")
               and "Triton's library softmax" in v for v in ex["violations"]), ex["violations"]


@pytest.mark.parametrize("name, found", [
    ("escape_wrapped_kernel_source.py", "_shown is wrapped (it has __wrapped__): Triton would read the source of _real"),
    ("interpreter_last_def.py", "the text Triton reads for _rows is not the def the grader audited")])
def test_a_kernel_triton_reads_other_than_the_audited_one_scores_zero_and_is_named(name, found):
    # functools.wraps points Triton at another function's source; a string holding a def line makes the
    # interpreter run from there (a GPU's compiler takes the first def, the one the audit read): either way
    # Triton would run text the audit never judged as the kernel
    ex = graded(name, ("softmax",))["softmax"]
    assert ex["score"] == 0 and not ex["correct"]
    assert any(found in v and "at line " in v for v in ex["violations"]), ex["violations"]


def test_a_name_the_interpreter_left_in_the_module_is_neither_there_nor_readable():
    # the Triton interpreter used to copy numpy into the module of a kernel it launched: a bare `np` then
    # computed the softmax. The module now keeps what its source binds, and the audit names the reads
    ex = escape("interpreter_names")
    assert ex["score"] == 0 and not ex["correct"]
    found = "\n".join(ex["violations"])
    assert "line 29: reads np, a name the submission never binds" in found, found
    assert "NameError" in text(ex)


def test_a_grid_is_a_tuple_of_ints_or_an_own_function_answering_one():
    """Triton reads a grid's length and numbers (under the interpreter, outside any learner frame): an
    object of the learner's class there, given or answered by a grid callable, is refused; plain grids
    launch as before."""
    import numpy as np
    import torch

    from _launch_callbacks import OwnGrid, grid_answering_own_grid, launch, own_function
    from autograder.legality import LAUNCH_ARGUMENT, ArgumentRefused, judge
    from autograder.specs import get

    x = torch.arange(8.0)
    for grid, role in ((OwnGrid((1,)), "as its grid"), (grid_answering_own_grid, "as the answer of its grid callable"),
                       ((1, OwnGrid((1,))), "as its grid")):
        with _armed() as rec:
            with pytest.raises(ArgumentRefused, match="a grid is a tuple"):
                launch("grid", x, grid)
        assert [op.split(":")[0] for op, _line, _n in rec.records()] == [LAUNCH_ARGUMENT], rec.records()
        found = judge(get("softmax"), rec.records(), [1], False, "line {}".format)
        assert len(found) == 1 and role in found[0] and "_add_one" in found[0], found
    with _armed() as rec:
        for grid in ((1,), (np.int64(1), 1), torch.Size([1]), own_function):
            assert torch.equal(launch("grid", x, grid), x + 1), grid
    assert rec.records() == [], rec.records()


def test_a_tensor_argument_whose_own_attribute_hides_a_tensor_method_is_refused():
    import functools

    import torch

    from _launch_callbacks import apply, own_exp
    from autograder.legality import ArgumentRefused, LaunchCallbacks

    x = torch.arange(8.0)
    shadowed = torch.zeros(1)
    shadowed.data_ptr = functools.partial(torch.ops.aten._softmax.default, x, -1, False)
    with _armed() as rec:
        with pytest.raises(ArgumentRefused, match="own attribute data_ptr hides Tensor.data_ptr"):
            apply(x, own_exp, shadowed)
        tagged = torch.zeros(1)
        tagged.course_tag = "mine"  # an attribute of its own that Tensor has not: nothing of Triton's reads it
        assert torch.allclose(apply(x, own_exp, tagged), x.exp())
    assert len(rec.records()) == 1
    assert LaunchCallbacks._argument_problem(torch.nn.Parameter(torch.zeros(1))) is None


def test_a_helper_package_that_hands_its_kernels_on_is_the_learners(tmp_path):
    """A learner's own helper package whose __init__ hands on the kernels of its modules (from .impl import
    load_row): its kernel is callable from the submission's kernels like one imported from the module."""
    from autograder import grading, specs
    from autograder.submission import load

    (tmp_path / "rows").mkdir()
    (tmp_path / "rows" / "__init__.py").write_text("from .impl import load_row\n")
    (tmp_path / "rows" / "impl.py").write_text("import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
                                               "def load_row(p, n, BLOCK: tl.constexpr):\n"
                                               "    return tl.load(p + tl.arange(0, BLOCK), mask=tl.arange(0, BLOCK) < n)\n")
    (tmp_path / "sub.py").write_text("import triton\nimport triton.language as tl\nfrom rows import load_row\n\n\n"
                                     "@triton.jit\ndef kernel(p, n, BLOCK: tl.constexpr):\n"
                                     "    tl.store(p + tl.arange(0, BLOCK), load_row(p, n, BLOCK) * 2, "
                                     "mask=tl.arange(0, BLOCK) < n)\n\n\n"
                                     "def softmax(x):\n    kernel[(1,)](x, x.numel(), BLOCK=16)\n    return x\n")
    sub = load(tmp_path / "sub.py")
    assert {"rows.impl.load_row", "rows.load_row"} <= grading.kernels_beside(sub)
    assert grading.static_violations(specs.get("softmax"), sub).violations == []


def test_the_recorders_own_bookkeeping_runs_unwatched_and_the_operator_watched(monkeypatch):
    """The watch for code of the learner's that starts inside an operator (a finalizer, a hook) covers the
    operator, not the recorder's own Python around it: over the bookkeeping it saw thousands of profile events
    an operator (the recorder then cost a torch operator ~0.3 ms on a 2-core CPU, ~0.14 ms without)."""
    import torch

    from autograder.legality import OpRecorder

    events = []
    watch = OpRecorder._unseen
    monkeypatch.setattr(OpRecorder, "_unseen", lambda self, frame, event, arg: (events.append(event),
                                                                                 watch(self, frame, event, arg)))
    x, w = torch.randn(8, 8), torch.randn(16, 8)
    with OpRecorder(__file__, inputs=(x, w)) as rec:
        x @ w.T  # first: whatever torch imports lazily
        events.clear()
        for _ in range(10):
            torch.addmm(torch.zeros(8, 16), x, w.T)
    # ~200 an iteration are left (the function half's watch around torch's own Python); ~1,700 with the bookkeeping
    assert len(events) < 10 * 500, len(events)
    assert any(op == "addmm" and n == 10 for op, _, n in rec.records()), rec.records()
