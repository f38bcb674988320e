"""Class grading with scores from outside the learner's kernel (autograder.gradebook, autograder.batch).

Fast tests check the pieces: which hidden cell grades which exercise, the hidden cell's feedback-only
mode, what ``record`` writes into a gradebook, the class report. The slow one grades a small class of
notebook 03 with ``python -m autograder batch`` on a local Dask cluster into a temporary course: a
learner whose cell replaces ``autograder.nbgrader.grade`` (the kernel then claims full points) gets
none, a re-run skips, ``--force`` regrades, and nbgrader's feedback still works.
"""
from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbgrader_config
import pytest

from autograder import gradebook, specs

ROOT = Path(__file__).resolve().parent.parent


# --------------------------------------------------------------------------------------------- fast
@pytest.mark.parametrize("assignment", nbgrader_config.RELEASED)
def test_every_hidden_cell_of_the_source_maps_to_its_exercise(assignment):
    nb_path = ROOT / "solutions" / assignment / f"{assignment}.ipynb"
    cells = gradebook.grade_cells(nb_path)
    assert sorted(cells.values()) == sorted(e.id for e in specs.for_notebook(assignment))
    nb = json.loads(nb_path.read_text())
    points = {c["metadata"]["nbgrader"]["grade_id"]: c["metadata"]["nbgrader"]["points"]
              for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade")}
    for grade_id, exercise in cells.items():
        assert points[grade_id] == specs.get(exercise).points


def test_grade_cells_reads_calls_in_either_form(tmp_path):
    def cell(grade_id, src):
        return {"cell_type": "code", "source": src, "outputs": [], "execution_count": None,
                "metadata": {"nbgrader": {"grade": True, "solution": False, "grade_id": grade_id, "points": 1}}}

    nb = {"cells": [cell("a", "from autograder.nbgrader import grade\ngrade('softmax', 'x.ipynb')"),
                    cell("b", ["import autograder.nbgrader\n", "%time autograder.nbgrader.grade(\"online_softmax\", 'x')"]),
                    cell("c", "assert 1 + 1 == 2")], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "x.ipynb"
    path.write_text(json.dumps(nb))
    assert gradebook.grade_cells(path) == {"a": "softmax"}  # magics are dropped, plain asserts are not ours


def _result(exercise, score, points, correct=True):
    return {"submission": "x.ipynb", "device": "CPU", "total": score * points, "max_total": points,
            "exercises": [{"id": exercise, "score": score, "points": points, "correct": correct,
                           "performance": None, "violations": [], "feedback": ["graded outside"],
                           "cases": [{"case": "odd", "shape": "3x17", "dtype": "float32",
                                      "max_error": None, "verdict": "ok"}]}]}


def test_hidden_cell_prints_the_trusted_result_instead_of_grading(tmp_path, monkeypatch, capsys):
    from autograder.nbgrader import grade

    path = tmp_path / "trusted.json"
    path.write_text(json.dumps({"notebooks": {"04_fused_softmax": _result("softmax", 0.7, 10)}}))
    monkeypatch.setenv(gradebook.TRUSTED_RESULT_ENV, str(path))
    assert grade("softmax", "04_fused_softmax.ipynb") == pytest.approx(7.0)
    out = capsys.readouterr().out
    assert "Graded outside this notebook's kernel" in out and "[PASS] softmax: 7.00 / 10 points" in out
    assert grade("online_softmax", "04_fused_softmax.ipynb") == 0.0  # not in the result: nothing graded here
    assert "was not graded" in capsys.readouterr().out


@pytest.fixture(scope="module")
def _assignment_gradebook(tmp_path_factory):
    """A gradebook with one assignment of one notebook: two hidden grading cells and a plain test cell
    (made once: nbgrader takes seconds to create a database)."""
    from nbgrader.api import Gradebook

    path = tmp_path_factory.mktemp("gradebook") / "gradebook.db"
    with Gradebook(f"sqlite:///{path}") as gb:
        gb.add_assignment("hw")
        gb.add_notebook("hw", "hw")
        for name, points in (("softmax-hidden", 10), ("online-hidden", 10), ("plain-test", 2)):
            gb.add_grade_cell(name, "hw", "hw", max_score=points, cell_type="code")
        gb.add_solution_cell("softmax-solution", "hw", "hw")
    return path


def _course_with_assignment(tmp_path, template):
    (tmp_path / "nbgrader_config.py").write_text(f"c = get_config()\nc.CourseDirectory.root = r'{tmp_path}'\n")
    shutil.copy(template, tmp_path / "gradebook.db")
    layout = {"hw": {"softmax-hidden": "softmax", "online-hidden": "online_softmax"}}
    return gradebook.course_directory(tmp_path), layout


def _scores(coursedir, student):
    from nbgrader.api import Gradebook

    with Gradebook(coursedir.db_url) as gb:
        sub = gb.find_submission("hw", student)
        return {g.name: (g.auto_score, g.needs_manual_grade) for nb in sub.notebooks for g in nb.grades}, sub.score


def test_record_takes_hidden_cell_scores_from_the_trusted_result_not_the_kernel(tmp_path, _assignment_gradebook):
    coursedir, layout = _course_with_assignment(tmp_path, _assignment_gradebook)
    kernel_claims = {"timestamp": "2026-01-01T00:00:00", "notebooks": {"hw": {
        "grades": {"softmax-hidden": 10.0, "online-hidden": 10.0, "plain-test": 2.0},
        "comments": {"softmax-solution": None}, "late_submission_penalty": None}}}
    outcome = {"assignment": "hw", "student": "mallory", "nbgrader": kernel_claims,
               "notebooks": {"hw": _result("softmax", 0.3, 10)}}
    recorded = gradebook.record(coursedir, outcome, layout)
    assert recorded == {"softmax-hidden": 3.0, "online-hidden": 0.0, "plain-test": 2.0}
    grades, total = _scores(coursedir, "mallory")
    assert grades["softmax-hidden"] == (3.0, False) and grades["online-hidden"] == (0.0, False)
    assert total == pytest.approx(5.0)  # a cell that is not ours keeps nbgrader's own verdict
    assert gradebook.recorded(coursedir, "hw", "mallory") and not gradebook.recorded(coursedir, "hw", "bob")


def test_record_keeps_a_manual_score_and_flags_it_for_review(tmp_path, _assignment_gradebook):
    from nbgrader.api import Gradebook

    coursedir, layout = _course_with_assignment(tmp_path, _assignment_gradebook)
    outcome = {"assignment": "hw", "student": "ann", "nbgrader": None,
               "notebooks": {"hw": _result("softmax", 1.0, 10)}}
    gradebook.record(coursedir, outcome, layout)
    with Gradebook(coursedir.db_url) as gb:
        gb.find_grade("softmax-hidden", "hw", "hw", "ann").manual_score = 9.0
        gb.db.commit()
    outcome["notebooks"]["hw"] = _result("softmax", 0.5, 10)
    gradebook.record(coursedir, outcome, layout)  # regraded
    with Gradebook(coursedir.db_url) as gb:
        g = gb.find_grade("softmax-hidden", "hw", "hw", "ann")
        assert (g.auto_score, g.manual_score, g.needs_manual_grade) == (5.0, 9.0, True)
        # nbgrader failed to make its copy: a cell that is not ours waits for a person
        assert gb.find_grade("plain-test", "hw", "hw", "ann").needs_manual_grade


def test_exercise_workers_run_side_by_side_and_each_timing_alone(monkeypatch):
    import threading
    import time

    from autograder.grading import TimingGate, concurrent_workers

    chosen = specs.for_notebook("04_fused_softmax")
    monkeypatch.delenv("AUTOGRADER_JOBS", raising=False)
    assert concurrent_workers(chosen, jobs=4) == 2  # no more than there are exercises
    assert concurrent_workers(chosen, jobs=1) == 1
    assert concurrent_workers(specs.for_notebook("01_naive_ops"), jobs=None) == min(4, os.cpu_count())

    # Three exercises: each shares the machine for its cases, then times alone, never while another's
    # cases or timing run.
    gate, log, lock = TimingGate(), [], threading.Lock()

    def exercise(name, cases_s):
        gate.share()
        with lock:
            log.append(("cases", name))
        time.sleep(cases_s)
        gate.time_alone()
        with lock:
            log.append(("time", name, time.perf_counter() - t0))
        time.sleep(0.05)
        with lock:
            log.append(("done", name))
        gate.leave(True)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=exercise, args=(n, s)) for n, s in (("a", 0.01), ("b", 0.1), ("c", 0.2))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert [e[0] for e in log[:3]] == ["cases"] * 3  # all three share the start
    timing = [e for e in log if e[0] in ("time", "done")]
    assert [e[0] for e in timing] == ["time", "done"] * 3  # one timing at a time, each to its end
    assert timing[0][2] >= 0.19  # the first timing waited for the slowest cases to finish


def test_a_learners_worker_finishes_its_gpu_work_before_it_waits_for_its_timing():
    """While one exercise is timed, another's learner worker waits idle: it was made to finish every stream
    first, so a kernel it launched earlier cannot run inside the other's timed window."""
    from autograder import grading

    events = []

    class Worker:
        deadline = 100.0

        def request(self, req, reply=None):
            events.append(("worker", req["op"]))

    class Gate:
        def time_alone(self):
            events.append(("gate", "time_alone"))
            return 2.5

    worker, phase = Worker(), {"timed": False}
    grading._time_alone(Gate(), phase, worker, None, grading.Stopwatch())
    assert events == [("worker", "prepare"), ("gate", "time_alone")]
    assert phase["timed"] and worker.deadline == 102.5  # the wait does not count against its time limit


def test_class_report_writes_csv_plots_and_a_leaderboard(tmp_path):
    from autograder import class_report

    results = tmp_path / "results"
    results.mkdir()
    for student, speedup in (("<ann>", 1.4), ("bob", 0.6), ("cy", None)):
        r = _result("softmax", 1.0 if speedup else 0.0, 10, correct=speedup is not None)
        if speedup:
            r["exercises"][0]["performance"] = {"graded": True, "speedup": speedup, "time_ms": 1 / speedup,
                                                "baseline_ms": 1.0}
        (results / f"{student}.json").write_text(json.dumps({"student": student, "notebooks": {"04": r}}))
    (results / ".template-gradebook.db").write_text("not a result")
    paths = class_report.write_report(results, tmp_path / "report", "04_fused_softmax")
    rows = list(csv.DictReader(paths["csv"].open()))
    assert [(r["student"], r["speedup"]) for r in rows] == [("<ann>", "1.4"), ("bob", "0.6"), ("cy", "")]
    assert paths["scores"].stat().st_size > 1000 and paths["speedups"].stat().st_size > 1000
    page = paths["html"].read_text()
    assert "&lt;ann&gt;" in page and "<ann>" not in page  # names are escaped
    assert page.index("&lt;ann&gt;") < page.index("bob") < page.index("cy")  # ranked by speedup


def _mini_course(tmp_path, template, students):
    """A course whose assignment ``hw`` matches the fixture's gradebook, with a submission per student."""
    coursedir, layout = _course_with_assignment(tmp_path, template)

    def cell(grade_id, src):
        return {"cell_type": "code", "source": src, "outputs": [], "execution_count": None,
                "metadata": {"nbgrader": {"grade": True, "solution": False, "grade_id": grade_id, "points": 10}}}

    nb = {"cells": [cell("softmax-hidden", "grade('softmax', 'hw.ipynb')"),
                    cell("online-hidden", "grade('online_softmax', 'hw.ipynb')"), cell("plain-test", "assert True")],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    for folder in [tmp_path / "source" / "hw"] + [tmp_path / "submitted" / s / "hw" for s in students]:
        folder.mkdir(parents=True)
        (folder / "hw.ipynb").write_text(json.dumps(nb))
    return coursedir, layout


def _outcome(coursedir, student, score):
    return {"assignment": "hw", "student": student, "nbgrader": None,
            "fingerprint": gradebook.submission_fingerprint(coursedir, "hw", student),
            "grader": gradebook.grader_version(coursedir, "hw"),
            "notebooks": {"hw": _result("softmax", score, 10)}}


def test_a_result_saved_before_a_crash_is_recorded_by_the_next_run_without_grading(tmp_path, _assignment_gradebook):
    from autograder.batch import ClassRun

    coursedir, _ = _mini_course(tmp_path, _assignment_gradebook, ["ann", "bob"])
    results = tmp_path / "autograder_results" / "hw"
    results.mkdir(parents=True)
    # the run died after writing ann's result file, before her gradebook record
    (results / "ann.json").write_text(json.dumps(_outcome(coursedir, "ann", 0.4)))
    run = ClassRun(tmp_path, "hw")
    assert (run.recovered, run.todo, run.skipped) == (["ann"], ["bob"], [])
    assert _scores(coursedir, "ann")[1] == pytest.approx(4.0)
    again = ClassRun(tmp_path, "hw")
    assert (again.recovered, again.todo, again.skipped) == ([], ["bob"], ["ann"])
    assert ClassRun(tmp_path, "hw", force=True).todo == ["ann", "bob"]
    with pytest.raises(gradebook.CourseError, match="no submission of hw by cy"):
        ClassRun(tmp_path, "hw", students=["cy"])


def test_dask_tasks_are_recorded_as_they_finish_and_a_failing_one_costs_only_itself(tmp_path, _assignment_gradebook,
                                                                                    monkeypatch):
    from distributed import Client, LocalCluster

    from autograder import batch

    coursedir, _ = _mini_course(tmp_path, _assignment_gradebook, ["ann", "bob", "cy"])

    def fake_grade_task(task):  # stands in for the grading (in-process workers see this patch)
        if task["student"] == "bob":
            raise RuntimeError("worker lost")
        return _outcome(coursedir, task["student"], 0.5)

    monkeypatch.setattr(batch, "grade_task", fake_grade_task)
    run = batch.ClassRun(tmp_path, "hw")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        done, failed = batch.run_on_dask(run, run.tasks(), client, progress=False)
    assert sorted(o["student"] for o in done) == ["ann", "cy"]
    assert failed == [("bob", "RuntimeError: worker lost")]
    assert _scores(coursedir, "cy")[1] == pytest.approx(5.0)
    assert batch.ClassRun(tmp_path, "hw").todo == ["bob"]  # the next run grades only what is missing


def _visible_gpu():
    return os.environ.get("CUDA_VISIBLE_DEVICES")


def test_local_cluster_pins_one_worker_to_each_visible_gpu(monkeypatch):
    from distributed import Client

    from autograder.batch import local_cluster

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")  # no GPU here: the pinning alone is checked
    monkeypatch.setitem(sys.modules, "dask_cuda", None)  # the fallback without dask-cuda
    cluster, where = local_cluster()
    with cluster, Client(cluster) as client:
        workers = client.scheduler_info()["workers"]
        assert len(workers) == 2 and all(w["nthreads"] == 1 and w["resources"] == {"GPU": 1}
                                         for w in workers.values())
        seen = client.run(_visible_gpu)
    assert sorted(seen.values()) == ["3", "5"] and "one GPU each" in where


# --------------------------------------------------------------------------------------------- slow
def _cli(course, *args):
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    out = subprocess.run([sys.executable, "-m", "autograder", *args, "--course", str(course)], cwd=ROOT,
                         capture_output=True, text=True, env=env, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out.stdout


@pytest.mark.slow
def test_batch_grades_a_class_on_a_local_cluster_and_the_patcher_gets_nothing(tmp_path):
    from autograder.batch import ClassRun
    from tools.synthetic_class import learner_notebook, make_course, nbgrader, recorded_points, submit

    a = "03_triton_basics"
    course = make_course(tmp_path / "course", [a])
    for student in ("solution", "untouched", "patcher"):
        submit(course, a, student, learner_notebook(course, a, student))

    out = _cli(course, "batch", a, "--workers", "2", "--quick")
    assert "LocalCluster, 2" in out
    full = {e.id: e.correctness_points for e in specs.for_notebook(a)}  # no GPU: performance points are 0
    assert recorded_points(course, a) == {"solution": sum(full.values()), "untouched": 0, "patcher": 0}
    result = json.loads((course / "autograder_results" / a / "patcher.json").read_text())
    kernel_claims = result["nbgrader"]["notebooks"][a]["grades"]
    assert sum(kernel_claims.values()) == sum(e.points for e in specs.for_notebook(a))  # the patch worked in there
    autograded = (course / "autograded" / "patcher" / a / f"{a}.ipynb").read_text()
    assert "Graded outside this notebook's kernel" in autograded  # the copy shows the trusted report
    report = course / "reports" / a
    assert {p.name for p in report.iterdir()} >= {"scores.csv", "scores.png", "speedups.png", "leaderboard.html"}
    assert len(list(csv.DictReader((report / "scores.csv").open()))) == 3 * len(full)

    mtime = (course / "autograder_results" / a / "solution.json").stat().st_mtime_ns
    out = _cli(course, "batch", a, "--quick")
    assert "already graded, skipped" in out and "submissions graded" not in out
    assert (course / "autograder_results" / a / "solution.json").stat().st_mtime_ns == mtime

    # --force regrades (this time without running the notebook: no kernel at all)
    out = _cli(course, "autograde", a, "--student", "patcher", "--force", "--quick", "--no-execute")
    assert "1 submissions graded" in out and recorded_points(course, a)["patcher"] == 0
    assert (course / "autograder_results" / a / "solution.json").stat().st_mtime_ns == mtime

    nbgrader(course, "generate_feedback", a)
    nbgrader(course, "export")
    feedback = (course / "feedback" / "patcher" / a / f"{a}.html").read_text()
    assert "Graded outside this notebook" in feedback
    grades = list(csv.DictReader((course / "grades.csv").open()))
    assert {r["student_id"]: float(r["score"]) for r in grades} == recorded_points(course, a)

    # a new submission is graded again by the next run; the others stay skipped
    submit(course, a, "untouched", learner_notebook(course, a, "solution"))
    run = ClassRun(course, a)
    assert (run.todo, run.skipped) == (["untouched"], ["patcher", "solution"])
