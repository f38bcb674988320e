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
import re
import shutil
import subprocess
import sys
import time
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
    # %time runs its statement, as IPython does; plain asserts are not ours
    assert gradebook.grade_cells(path) == {"a": "softmax", "b": "online_softmax"}


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


@pytest.fixture(scope="session")  # kept to the end: xdist interleaves other modules, which would tear a module fixture down
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
    assert gradebook.recorded(coursedir, "hw", "mallory", layout) and not gradebook.recorded(coursedir, "hw", "bob", layout)


def test_a_submission_nbgrader_created_without_our_scores_is_not_recorded(tmp_path, _assignment_gradebook):
    """A run killed between nbgrader's commit of a new submission and the scores ``record`` writes leaves a
    submission with no scores: the next run records it again instead of skipping it as graded."""
    from nbgrader.api import Gradebook

    coursedir, layout = _course_with_assignment(tmp_path, _assignment_gradebook)
    with Gradebook(coursedir.db_url) as gb:
        gb.update_or_create_student("ben")
        gb.update_or_create_submission("hw", "ben")  # what nbgrader commits first
    assert not gradebook.recorded(coursedir, "hw", "ben", layout)
    outcome = {"assignment": "hw", "student": "ben", "nbgrader": None, "notebooks": {"hw": _result("softmax", 1.0, 10)}}
    gradebook.record(coursedir, outcome, layout)
    assert gradebook.recorded(coursedir, "hw", "ben", layout)


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


def test_record_flags_what_needs_review_and_keeps_the_time_nbgrader_collect_wrote(tmp_path, _assignment_gradebook):
    import datetime

    coursedir, layout = _course_with_assignment(tmp_path, _assignment_gradebook)
    tampered = _result("softmax", 0.0, 10, correct=False)
    tampered["exercises"][0]["violations"] = ["cell 2, line 1: import autograder.nbgrader: imports the grader"]
    gradebook.record(coursedir, {"assignment": "hw", "student": "eve", "nbgrader": None,
                                 "timestamp": "2026-01-02T03:04:05", "notebooks": {"hw": tampered}}, layout)
    grades, _ = _scores(coursedir, "eve")
    assert grades["softmax-hidden"] == (0.0, True) and grades["online-hidden"] == (0.0, False)
    broken = {"error": "hw.ipynb is not a valid notebook", "exercises": []}
    gradebook.record(coursedir, {"assignment": "hw", "student": "fay", "nbgrader": None, "timestamp": None,
                                 "notebooks": {"hw": broken}}, layout)
    assert all(flag for _, flag in _scores(coursedir, "fay")[0].values())  # every cell of an unreadable notebook
    from nbgrader.api import Gradebook

    with Gradebook(coursedir.db_url) as gb:
        assert gb.find_submission("hw", "eve").timestamp == datetime.datetime(2026, 1, 2, 3, 4, 5)
        assert gb.find_submission("hw", "fay").timestamp is None
    folder = tmp_path / "submitted" / "eve" / "hw"
    folder.mkdir(parents=True)
    assert gradebook.submitted_at(coursedir, "hw", "eve") is None  # copied by hand: no timestamp.txt
    (folder / "timestamp.txt").write_text("2026-01-02 03:04:05.000000 UTC")
    assert gradebook.submitted_at(coursedir, "hw", "eve") == "2026-01-02T03:04:05"


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
    # every exercise is in its cases before any may time: on a loaded machine a thread can start late, and
    # the first would then time before the others asked to share (sharing that waited would break this)
    all_sharing = threading.Barrier(3, timeout=5)

    def exercise(name, cases_s):
        gate.share()
        with lock:
            log.append(("cases", name))
        all_sharing.wait()
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


def test_an_exercise_whose_reference_measures_the_grader_is_graded_with_nothing_beside_it(monkeypatch):
    """02's references count the kernels and the peak memory of the grading process itself: another exercise's
    inputs made meanwhile were counted too (a correct count of 4 launches judged against 5, in 3 gradings of
    5 on an H200). Such an exercise waits for the others to leave and runs alone from its start."""
    import threading
    import time

    from autograder import grading

    by_id = {s.id: s for s in specs.for_notebook("02_profiling")}
    assert by_id["count_kernel_launches"].measures_grader and by_id["peak_memory_bytes"].measures_grader
    assert not by_id["classify_bound"].measures_grader
    running, overlaps, lock = set(), [], threading.Lock()

    def body(spec, *args, **kwargs):
        with lock:
            if running and (spec.measures_grader or any(by_id[r].measures_grader for r in running)):
                overlaps.append((spec.id, sorted(running)))
            running.add(spec.id)
        time.sleep(0.1)
        with lock:
            running.discard(spec.id)
        return {"id": spec.id}

    monkeypatch.setattr(grading, "_grade_exercise", body)
    sub = type("Sub", (), {"defined": {s.entry for s in by_id.values()}})()
    gate = grading.TimingGate()
    threads = [threading.Thread(target=grading.grade_exercise, args=(spec, sub, None, None, True, 10.0, gate))
               for spec in list(by_id.values()) * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not overlaps


def test_class_report_writes_csv_plots_and_a_leaderboard(tmp_path):
    from autograder import class_report

    results = tmp_path / "results"
    results.mkdir()
    for student, speedup in (("<ann>", 1.4), ("bob", 0.6), ("cy", None)):
        r = _result("softmax", 1.0 if speedup else 0.0, 10, correct=speedup is not None)
        if speedup:
            r["exercises"][0]["performance"] = {"graded": True, "speedup": speedup, "time_ms": 1 / speedup,
                                                "baseline_ms": 1.0}
        else:
            r["exercises"][0]["feedback"] = ["first failure: 3x17 float32: raised NotImplementedError", "hint: ..."]
        (results / f"{student}.json").write_text(json.dumps({"student": student, "notebooks": {"04": r}}))
    (results / "dee.json").write_text(json.dumps({"student": "dee", "expected": {"04": ["softmax"]}, "notebooks": {
        "04": {"error": "04.ipynb is not a valid notebook (invalid JSON)", "exercises": []}}}))
    (results / ".template-gradebook.db").write_text("not a result")
    paths = class_report.write_report(results, tmp_path / "report", "04_fused_softmax")
    rows = list(csv.DictReader(paths["csv"].open()))
    assert [(r["student"], r["speedup"]) for r in rows] == [("<ann>", "1.4"), ("bob", "0.6"), ("cy", ""), ("dee", "")]
    assert (rows[3]["status"], rows[3]["score"], rows[3]["points"]) == ("unreadable", "0.0", "10")
    # graded and wrong: the reason is its first failure; graded and right: nothing to say
    assert [(r["status"], r["reason"]) for r in rows[1:3]] == [
        ("graded", ""), ("graded", "first failure: 3x17 float32: raised NotImplementedError")]
    assert rows[3]["reason"] == "04.ipynb is not a valid notebook (invalid JSON)" and rows[3]["review"].startswith("unreadable")
    assert [r["student"] for r in csv.DictReader(paths["review"].open())] == ["dee"] and paths["flagged"] == 1
    assert paths["scores"].stat().st_size > 1000 and paths["speedups"].stat().st_size > 1000
    # every learner in the points histogram, the unreadable one too; speedups only where timed on a GPU
    assert paths["plotted"] == {"scores": {"softmax": 4}, "speedups": {"softmax": 2}}
    assert _png_description(paths["scores"]) == "learners per exercise: softmax 4"
    page = paths["html"].read_text()
    assert "&lt;ann&gt;" in page and "<ann>" not in page  # names are escaped
    assert page.index("&lt;ann&gt;", page.index("<h2>softmax")) < page.index("bob") < page.index("cy")  # ranked
    assert "4 learners: 1 unreadable, 3 graded" in page and "mean 5.00 of 10 points over 4 learners" in page


def _png_description(path):
    from PIL import Image

    with Image.open(path) as image:
        return image.text.get("Description")


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


def test_the_longest_gradings_go_first_and_notebooks_left_as_handed_out_last(tmp_path, _assignment_gradebook):
    """A class's short gradings fill its last minutes: the submissions are handed out by how many exercises
    their notebooks do more than raise NotImplementedError (the class's order among equals)."""
    from autograder.batch import ClassRun

    students = ["ann", "bob", "cy", "dee"]
    coursedir, _ = _mini_course(tmp_path, _assignment_gradebook, students)
    stub = 'def {0}(x):\n    """As handed out."""\n    raise NotImplementedError("{0}")\n'
    done = "def {0}(x):\n    return x.softmax(-1)\n"
    code = {"ann": stub.format("softmax") + stub.format("online_softmax"),
            "bob": done.format("softmax") + stub.format("online_softmax"),
            "cy": done.format("softmax") + done.format("online_softmax")}
    for student, src in code.items():
        path = tmp_path / "submitted" / student / "hw" / "hw.ipynb"
        nb = json.loads(path.read_text())
        nb["cells"].insert(0, {"cell_type": "code", "source": src, "outputs": [], "execution_count": None,
                               "metadata": {}})
        path.write_text(json.dumps(nb))
    (tmp_path / "submitted" / "dee" / "hw" / "hw.ipynb").write_text("{not json")
    run = ClassRun(tmp_path, "hw")
    assert [run.exercises_done(s) for s in students] == [0, 1, 2, 0]
    assert [t["student"] for t in run.tasks()] == ["cy", "bob", "ann", "dee"]


def test_a_notebook_the_readers_cannot_take_counts_no_work_and_the_class_is_ordered(tmp_path, _assignment_gradebook):
    """The batch reads every learner's notebook to order the class: a notebook that made the reading raise
    something other than SubmissionError (a cell that is a word, JSON nested deeper than its reader's stack,
    %%time inside %%time thousands deep) stopped the whole class's run before any grading began."""
    from autograder.batch import ClassRun

    students = ["ann", "bob", "cy", "dee"]
    coursedir, _ = _mini_course(tmp_path, _assignment_gradebook, students)
    broken = {"ann": json.dumps({"cells": ["def softmax(x):"]}),
              "bob": '{"cells": ' + "[" * 100_000 + "]" * 100_000 + "}",
              "cy": json.dumps({"cells": [{"cell_type": "code", "metadata": {}, "source": "%%time\n" * 3000}]})}
    for student, text in broken.items():
        (tmp_path / "submitted" / student / "hw" / "hw.ipynb").write_text(text)
    path = tmp_path / "submitted" / "dee" / "hw" / "hw.ipynb"
    nb = json.loads(path.read_text())
    nb["cells"].insert(0, {"cell_type": "code", "source": "def softmax(x):\n    return x.softmax(-1)\n",
                           "outputs": [], "execution_count": None, "metadata": {}})
    path.write_text(json.dumps(nb))
    run = ClassRun(tmp_path, "hw")
    assert [run.exercises_done(s) for s in students] == [0, 0, 0, 2]
    assert [t["student"] for t in run.tasks()] == ["dee", "ann", "bob", "cy"]


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


def _nap(task):
    import time

    time.sleep(task["seconds"])
    return task["student"]


def test_a_gpu_takes_the_next_submission_when_it_is_free_not_a_share_dealt_out_at_the_start():
    """Tasks restricted to a GPU were dealt out as they were submitted, one after another to each worker: a
    class in the order solution, untouched, ... gave one GPU every long grading while the other idled. Now
    no more tasks are out on the cluster than it has GPUs, so the long ones spread over both."""
    from distributed import Client, LocalCluster

    from autograder import batch

    tasks = [{"student": f"s{i}", "seconds": 0.6 if i % 2 == 0 else 0.0} for i in range(8)]
    out, most_out = [], 0

    class Counting:  # the client, counting the tasks handed to the cluster and not yet back
        def __init__(self, client):
            self.client, self.out = client, 0

        def submit(self, *args, **kwargs):
            self.out += 1
            return self.client.submit(*args, **kwargs)

        def scheduler_info(self):
            return self.client.scheduler_info()

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0",
                      resources={"GPU": 1}) as cluster, Client(cluster) as client:
        counting = Counting(client)
        t0 = time.perf_counter()
        for student, get in batch.graded_as_they_finish(counting, tasks, "hw", fn=_nap):
            counting.out -= 1  # this one is back
            most_out = max(most_out, counting.out)
            out.append(get())
        seconds = time.perf_counter() - t0
    assert sorted(out) == sorted(t["student"] for t in tasks)
    assert most_out == 2  # one per GPU
    assert seconds < 4 * 0.6  # the four long gradings on both GPUs, not one (ideally 1.2 s)


def test_dask_tasks_are_recorded_as_they_finish_and_a_failing_one_costs_only_itself(tmp_path, _assignment_gradebook,
                                                                                    monkeypatch):
    from distributed import Client, LocalCluster

    from autograder import batch

    coursedir, layout = _mini_course(tmp_path, _assignment_gradebook, ["ann", "bob", "cy"])

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
    assert not gradebook.recorded(coursedir, "hw", "bob", layout)  # a grading that failed is no grade
    from autograder import class_report

    bob = [r for r in class_report.rows(run.results_dir) if r["student"] == "bob"]
    assert [(r["exercise"], r["status"], r["reason"]) for r in bob] == [
        ("online_softmax", "not graded", "RuntimeError: worker lost"), ("softmax", "not graded", "RuntimeError: worker lost")]
    assert class_report.review_rows(run.results_dir) == [
        {"student": "bob", "notebook": "hw", "exercise": None, "reason": "not graded: RuntimeError: worker lost"}]


def test_a_forced_run_that_was_interrupted_resumes_as_forced(tmp_path, _assignment_gradebook):
    from autograder.batch import ClassRun

    coursedir, _ = _mini_course(tmp_path, _assignment_gradebook, ["ann", "bob", "cy"])
    first = ClassRun(tmp_path, "hw")
    for student in first.todo:
        first.finish(_outcome(coursedir, student, 0.5))
    first.close([])
    forced = ClassRun(tmp_path, "hw", students=["ann", "bob"], force=True)
    assert forced.todo == ["ann", "bob"] and not forced.resumed
    forced.finish(dict(_outcome(coursedir, "ann", 0.6), run=forced.forced["id"]))  # then the run dies
    resumed = ClassRun(tmp_path, "hw")  # no --force this time
    assert resumed.resumed and (resumed.todo, resumed.skipped) == (["bob"], ["ann", "cy"])
    assert resumed.forced["id"] == forced.forced["id"]
    resumed.finish(dict(_outcome(coursedir, "bob", 0.6), run=resumed.forced["id"]))
    resumed.close([])
    after = ClassRun(tmp_path, "hw")
    assert not after.resumed and after.todo == [] and _scores(coursedir, "bob")[1] == pytest.approx(6.0)


def test_a_change_of_the_grader_or_the_assignment_regrades(tmp_path, _assignment_gradebook):
    from autograder.batch import ClassRun

    coursedir, _ = _mini_course(tmp_path, _assignment_gradebook, ["ann"])
    ClassRun(tmp_path, "hw").finish(_outcome(coursedir, "ann", 0.5))
    assert ClassRun(tmp_path, "hw").skipped == ["ann"]
    source = tmp_path / "source" / "hw" / "hw.ipynb"
    source.write_text(source.read_text().replace("assert True", "assert 1 == 1"))  # the hidden tests changed
    assert ClassRun(tmp_path, "hw").todo == ["ann"]

    code = tmp_path / "code"
    (code / "autograder").mkdir(parents=True)
    (code / "autograder" / "grading.py").write_text("POINTS = 1\n")
    before = gradebook.grader_version(coursedir, "hw", code_root=code)
    (code / "autograder" / "grading.py").write_text("POINTS = 2\n")  # a fix in the grader's code
    assert gradebook.grader_version(coursedir, "hw", code_root=code) != before


def test_scratch_goes_on_every_exit_a_process_can_catch_and_a_killed_ones_is_swept(tmp_path):
    import signal

    from autograder import scratch

    # the module alone, read from its file: it needs only the standard library, and the package would import
    # torch (2-3 s of CPU a process) in processes that only make a folder and wait for a signal
    code = ("import importlib.util, sys, time\nspec = importlib.util.spec_from_file_location('scratch', sys.argv[2])\n"
            "scratch = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(scratch)\nscratch.exit_on_signals()\n"
            "with scratch.folder('test', base=sys.argv[1]) as f:\n    print(f, flush=True)\n    time.sleep(120)\n")
    left = {}
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGKILL):
        proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path), scratch.__file__], cwd=ROOT,
                                stdout=subprocess.PIPE, text=True)
        folder = Path(proc.stdout.readline().strip())
        assert folder.is_dir()
        proc.send_signal(sig)
        proc.wait(60)
        left[sig] = folder.exists()
    assert left == {signal.SIGTERM: False, signal.SIGINT: False, signal.SIGHUP: False, signal.SIGKILL: True}
    dead = next(tmp_path.glob(scratch.PREFIX + "*")).name.split("@")[0]  # the killed process's id
    alive = tmp_path / f"{scratch.PREFIX}{os.getppid()}@{scratch._host()}-live-x"  # a process still running
    elsewhere = tmp_path / f"{dead}@another-machine-test-x"  # the same id on another machine
    alive.mkdir()
    elsewhere.mkdir()
    swept = scratch.sweep(tmp_path)
    assert len(swept) == 1 and not swept[0].exists() and alive.exists() and elsewhere.exists()


def test_the_autograded_copy_replaces_the_old_one_and_what_a_killed_replacement_left(tmp_path):
    new, dest = tmp_path / "scratch" / "hw", tmp_path / "autograded" / "ann" / "hw"
    for folder, text in ((new, "new"), (dest, "old"), (dest.parent / ".hw.killed", "half-copied")):
        folder.mkdir(parents=True)
        (folder / "hw.ipynb").write_text(text)
    gradebook._replace_dir(new, dest)
    assert (dest / "hw.ipynb").read_text() == "new" and sorted(p.name for p in dest.parent.iterdir()) == ["hw"]


def test_results_and_feedback_lose_the_servers_paths(tmp_path):
    from autograder import scratch

    with scratch.folder("grading") as work:
        said = {"submission": str(tmp_path / "submitted" / "ann" / "hw" / "hw.ipynb"),
                "feedback": [f'File "{work}/submission.py", line 3', f"{ROOT}/measure/timer.py:215", 7]}
        assert gradebook.without_paths(said, tmp_path) == {
            "submission": "submitted/ann/hw/hw.ipynb", "feedback": ['File "submission.py", line 3', "measure/timer.py:215", 7]}


def _exercise(**fields):
    return {"id": "softmax", "score": 0.0, "points": 10, "correct": False, "performance": None, "violations": [],
            "feedback": [], **fields}


def test_review_flags_tampering_violations_crashes_and_speedups_too_large_to_believe():
    from autograder import review

    patcher = _exercise(violations=["cell 3, line 2: import autograder.nbgrader: imports the grader"])
    assert review.exercise_flags(patcher) == ["tampering: cell 3, line 2: import autograder.nbgrader: imports the grader"]
    assert review.exercise_flags(_exercise(violations=["cell 1, line 1: import gc: ..."]))[0].startswith("violations: ")
    crash = _exercise(ended="crashed", feedback=["crashed with a segmentation fault", "last output: ..."])
    assert review.exercise_flags(crash) == ["crashed: crashed with a segmentation fault"]
    assert review.exercise_status(crash) == ("crashed", "crashed with a segmentation fault")
    slow = _exercise(ended="timed out", feedback=["did not finish within the time limit"])
    assert review.exercise_status(slow) == ("timed out", "did not finish within the time limit")
    assert review.exercise_flags(slow) == []  # a timeout is the learner's own, not a case for review
    fast = {"graded": True, "speedup": 5.0, "threshold": 1.0, "fraction_of_peak": None}
    assert review.exercise_flags(_exercise(performance=fast))[0].startswith("suspiciously fast: 5.00x")
    assert review.exercise_flags(_exercise(performance=dict(fast, speedup=1.6))) == []
    above_roofline = {"graded": True, "speedup": None, "threshold": 0.75, "fraction_of_peak": 1.4}
    assert review.exercise_flags(_exercise(performance=above_roofline))[0].startswith("suspiciously fast: 1.40")
    assert review.exercise_flags(_exercise(performance=dict(fast, graded=False))) == []
    assert review.status(None)[0] == "not submitted"
    assert review.status({"error": "x.ipynb is not a valid notebook", "exercises": []}) == (
        "unreadable", "x.ipynb is not a valid notebook")
    assert review.status({"exercises": [_exercise(), slow, patcher]})[0] == "violations"  # the worst


def test_the_documented_scores_csv_columns_are_the_written_ones():
    from autograder import class_report

    guide = (ROOT / "docs" / "instructor.md").read_text()
    documented = re.search(r"`scores\.csv`[^`]*columns `([^`]+)`", guide)
    assert documented, "docs/instructor.md names the columns of scores.csv"
    assert tuple(c.strip() for c in documented.group(1).split(",")) == class_report.FIELDS


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
# One class of six kinds of learner, graded the way an instructor would on a CPU: a batch killed with
# SIGKILL, resumed while one of its Dask workers is killed mid-task, the patcher's notebook run in its
# kernel, feedback for everyone. The tests below each check one promise against that shared run.
ASSIGNMENT = "03_triton_basics"
LEARNERS = {"ann": "solution", "ben": "solution", "cy": "untouched", "dee": "partial", "eve": "patcher",
            "fay": "broken"}
COPIED_BY_HAND = "ben"  # no timestamp.txt


def _env(tmpdir=None):
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    return dict(env, TMPDIR=str(tmpdir)) if tmpdir else env


def _cli(course, *args, tmpdir=None):
    out = subprocess.run([sys.executable, "-m", "autograder", *args, "--course", str(course)], cwd=ROOT,
                         capture_output=True, text=True, env=_env(tmpdir), timeout=1800,
                         preexec_fn=lambda: os.umask(0o002))  # a course group's usual umask
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out


def _scratch_left(tmpdir):
    return sorted(p.name for p in Path(tmpdir).glob("autograder-scratch-*"))


def _results(course):
    return sorted(p.stem for p in (course / "autograder_results" / ASSIGNMENT).glob("*.json"))


def _kill_batch_after_first_result(course, tmpdir):
    """Start a batch; SIGKILL it and every process it started as soon as one learner's result is saved."""
    import signal
    import time

    proc = subprocess.Popen([sys.executable, "-m", "autograder", "batch", ASSIGNMENT, "--course", str(course),
                             "--workers", "2", "--quick", "--no-execute"], cwd=ROOT, env=_env(tmpdir),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 900
    while not _results(course) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return _results(course), _scratch_left(tmpdir)


def _results_summary(course):
    """Each saved result's exercises, scores and feedback: what a failing class test prints."""
    lines = []
    for path in sorted((course / "autograder_results" / ASSIGNMENT).glob("*.json")):
        for nb in json.loads(path.read_text()).get("notebooks", {}).values():
            for ex in nb.get("exercises", []):
                lines.append(f"{path.stem} {ex['id']}: {ex['score']} {ex.get('feedback', [])[:3]}")
    return "\n".join(lines)


def _grading(proc) -> bool:
    try:
        argv = proc.cmdline()
    except Exception:  # noqa: BLE001  (gone meanwhile)
        return False
    return "autograder.worker" in argv or (bool(argv) and os.path.basename(argv[0]) == "bwrap")


def _kill_a_busy_worker(batch_pid, killed):
    """Watch a batch's process tree; SIGKILL one Dask worker process while it grades (its exercise
    workers are running), once."""
    import signal
    import time

    import psutil

    deadline = time.monotonic() + 900
    while time.monotonic() < deadline and not killed:
        try:
            batch = psutil.Process(batch_pid)
            workers = [p for p in batch.children() if "spawn_main" in " ".join(p.cmdline())]
            # grading: an exercise worker (or the sandbox around one) under it; not a helper process
            # Python starts with the worker (its resource tracker), which a loaded machine may show first
            busy = [w for w in workers if any(_grading(c) for c in w.children(recursive=True))]
        except psutil.Error:
            return
        if busy:
            os.kill(busy[0].pid, signal.SIGKILL)
            killed.append(busy[0].pid)
        time.sleep(0.2)


def _mtimes(course):
    return {p.stem: p.stat().st_mtime_ns for p in (course / "autograder_results" / ASSIGNMENT).glob("*.json")}


def _saved(course, name, field):
    """A field of a file in the results folder (None while there is none)."""
    try:
        return json.loads((course / "autograder_results" / ASSIGNMENT / name).read_text()).get(field)
    except (OSError, json.JSONDecodeError):
        return None


def _kill_forced_run_once_saved(course, tmpdir, students):
    """``autograde --force`` of ``students`` (graded in that order), SIGKILLed as soon as the first one's
    regrade is saved. Returns the forced run's id and the students it had regraded."""
    import signal
    import time

    args = [a for s in students for a in ("--student", s)]
    proc = subprocess.Popen([sys.executable, "-m", "autograder", "autograde", ASSIGNMENT, *args, "--force", "--quick",
                             "--no-execute", "--course", str(course)], cwd=ROOT, env=_env(tmpdir),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline, forced = time.monotonic() + 900, None
    while proc.poll() is None and time.monotonic() < deadline:
        forced = forced or _saved(course, ".forced-run.json", "id")
        if forced and _saved(course, f"{students[0]}.json", "run") == forced:
            break
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return forced, [s for s in students if _saved(course, f"{s}.json", "run") == forced]


def _regraded_after_a_change_of_the_source(course, copy):
    """What a run would grade in a copy of the course, as it is and after a change of the assignment's
    source (a hidden test fixed, say): nothing, then everyone."""
    from autograder.batch import ClassRun

    shutil.copytree(course, copy)
    (copy / "nbgrader_config.py").write_text((course / "nbgrader_config.py").read_text().replace(str(course), str(copy)))
    unchanged = ClassRun(copy, ASSIGNMENT).todo
    source = copy / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    source.write_text(source.read_text() + "\n")
    return unchanged, ClassRun(copy, ASSIGNMENT).todo


@pytest.fixture(scope="session")  # kept to the end: xdist interleaves other modules, which would tear a module fixture down
def graded_class(tmp_path_factory):
    """The course after: a killed batch, its resumption (one worker killed mid-task), a plain re-run,
    the patcher's notebook autograded by running it, and nbgrader's feedback and export."""
    import threading
    import time
    from types import SimpleNamespace

    from tools.synthetic_class import learner_notebook, make_course, nbgrader, submit

    base = tmp_path_factory.mktemp("instructor")
    tmpdir = base / "tmp"
    tmpdir.mkdir()
    course = make_course(base / "course", [ASSIGNMENT])
    for student, kind in LEARNERS.items():
        submit(course, ASSIGNMENT, student, learner_notebook(course, ASSIGNMENT, kind),
               timestamp=None if student == COPIED_BY_HAND else "2026-01-01 00:00:00.000000 UTC")
    run = SimpleNamespace(course=course, tmpdir=tmpdir)
    run.saved_before_kill, run.scratch_after_kill = _kill_batch_after_first_result(course, tmpdir)

    proc = subprocess.Popen([sys.executable, "-m", "autograder", "batch", ASSIGNMENT, "--course", str(course),
                             "--workers", "2", "--quick", "--no-execute"], cwd=ROOT, env=_env(tmpdir), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=lambda: os.umask(0o002))
    run.killed_workers, err = [], []
    threading.Thread(target=_kill_a_busy_worker, args=(proc.pid, run.killed_workers), daemon=True).start()
    reader = threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True)
    reader.start()
    run.line_times = [(time.monotonic(), line) for line in proc.stdout]  # when each line came
    run.ended = time.monotonic()
    proc.wait(timeout=60)
    reader.join(60)
    run.resumed_out, run.resumed_err = "".join(line for _, line in run.line_times), err[0]
    assert proc.returncode == 0, run.resumed_out[-3000:] + run.resumed_err[-3000:]
    run.scratch_after_resume = _scratch_left(tmpdir)
    run.mtimes = _mtimes(course)
    run.again_out = _cli(course, "batch", ASSIGNMENT, "--quick", tmpdir=tmpdir).stdout
    run.mtimes_again = _mtimes(course)
    run.unchanged_copy, run.changed_copy = _regraded_after_a_change_of_the_source(course, base / "copy")
    # A forced regrade of ann then eve, killed once ann's regrade is saved; the next run, without --force,
    # resumes it as forced: eve's notebook is run in its kernel, where her cell hands nbgrader 100x the points.
    run.forced = _kill_forced_run_once_saved(course, tmpdir, ["ann", "eve"])
    run.patcher_out = _cli(course, "autograde", ASSIGNMENT, "--quick", tmpdir=tmpdir).stdout
    run.scratch_at_end = _scratch_left(tmpdir)
    nbgrader(course, "generate_feedback", ASSIGNMENT)
    nbgrader(course, "export")
    return run


def _report(run, name):
    return run.course / "reports" / ASSIGNMENT / name


def _gradebook(course):
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return {s.student.id: {"score": s.score, "timestamp": s.timestamp,
                               "review": {g.name: g.needs_manual_grade for nb in s.notebooks for g in nb.grades}}
                for s in gb.assignment_submissions(ASSIGNMENT)}


@pytest.mark.slow
def test_a_killed_batch_resumes_and_a_killed_worker_costs_only_its_task(graded_class):
    run = graded_class
    assert run.saved_before_kill and len(run.saved_before_kill) < len(LEARNERS)
    assert run.scratch_after_kill, "the kill left no scratch folder: nothing to sweep"
    assert run.killed_workers, "no Dask worker was seen grading"
    out = run.resumed_out
    # what was saved before the kill is not graded again: skipped, or recorded from its saved result
    # when the kill came between the result file and the gradebook
    before = [line for line in out.splitlines() if line.startswith(("already graded", "recorded from the results"))]
    assert all(any(s in line for line in before) for s in run.saved_before_kill), out
    assert "NOT GRADED" not in out and f"{len(LEARNERS) - len(run.saved_before_kill)} submissions graded" in out
    full = sum(e.correctness_points for e in specs.for_notebook(ASSIGNMENT))  # no GPU: performance is 0
    partial = sum(e.correctness_points for e in specs.for_notebook(ASSIGNMENT)[:-1])
    expected = {"ann": full, "ben": full, "cy": 0, "dee": partial, "eve": 0, "fay": 0}
    scores = {s: g["score"] for s, g in _gradebook(run.course).items()}
    assert scores == expected, out + _results_summary(run.course)
    import sqlite3

    with sqlite3.connect(run.course / "gradebook.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert run.scratch_after_resume == []  # swept: the killed batch's and the killed worker's
    assert run.scratch_at_end == []  # and the killed forced run's


@pytest.mark.slow
def test_one_line_per_learner_as_each_finishes_and_a_quiet_progress_bar(graded_class):
    out, err = graded_class.resumed_out, graded_class.resumed_err
    graded = [s for s in LEARNERS if s not in graded_class.saved_before_kill]
    lines = [line for line in out.splitlines() if line.split(" ", 1)[0] in LEARNERS]
    assert sorted(line.split()[0] for line in lines) == sorted(graded)  # once each
    first = min(t for t, line in graded_class.line_times if line.split(" ", 1)[0] in LEARNERS)
    assert graded_class.ended - first > 10  # the first learner's line came when they finished, not at the end
    lines = [line for line in err.replace("\r", "\n").splitlines() if line.strip()]
    # Python's own note at exit about the worker the fixture killed (the warning's line, then its source)
    python = {i + k for i, line in enumerate(lines) if "resource_tracker" in line for k in (0, 1)}
    noise = [line for i, line in enumerate(lines) if i not in python and not line.lstrip().startswith("grading")]
    assert noise == []  # nbgrader's log and Jupyter's warnings stay out of the terminal
    assert "feedback made without running the notebook (1; reasons above): fay" in out
    # Every run names its learners without a submission time, also one whose result the killed run had
    # saved (which ones those are is a matter of timing: it is recorded, not graded, by the resumed run).
    untimed = f"copied by hand?): no submission time recorded, so no late penalty can apply: {COPIED_BY_HAND}\n"
    assert untimed in out and untimed in graded_class.again_out


@pytest.mark.slow
def test_every_learner_is_in_every_class_output_with_a_status_and_reason(graded_class):
    run = graded_class
    rows = list(csv.DictReader(_report(run, "scores.csv").open()))
    n = len(specs.for_notebook(ASSIGNMENT))
    assert sorted({r["student"] for r in rows}) == sorted(LEARNERS) and len(rows) == n * len(LEARNERS)
    status = {r["student"]: {x["status"] for x in rows if x["student"] == r["student"]} for r in rows}
    assert status["fay"] == {"unreadable"} and status["ann"] == status["cy"] == {"graded"}
    assert "violations" in status["eve"]
    fay = next(r for r in rows if r["student"] == "fay")
    assert "not a valid notebook" in fay["reason"] and fay["score"] == "0.0" and fay["points"]
    page = _report(run, "leaderboard.html").read_text()
    assert "6 learners:" in page and all(f"<td>{s}</td>" in page for s in LEARNERS)
    assert f"over {len(LEARNERS)} learners" in page  # means over the whole class
    tables = page[page.index("<img"):]  # each exercise's table, after the review list and the plots
    assert len(re.findall(r"<td>fay</td>", tables)) == n
    plotted = _png_description(_report(run, "scores.png")).split(": ", 1)[1].split(", ")
    assert sorted(plotted) == sorted(f"{e.id} {len(LEARNERS)}" for e in specs.for_notebook(ASSIGNMENT))  # fay too
    cy = [r for r in rows if r["student"] == "cy"]  # untouched: graded, and its reason says why it scored 0
    assert all(r["reason"].startswith("first failure") and "NotImplementedError" in r["reason"] for r in cy)


@pytest.mark.slow
def test_a_review_list_flags_tampering_and_unreadable_files_in_every_place(graded_class):
    run = graded_class
    review = list(csv.DictReader(_report(run, "review.csv").open()))
    why = {(r["student"], r["reason"].split(":")[0]) for r in review}
    assert ("eve", "tampering") in why and ("fay", "unreadable") in why
    assert not {s for s, _ in why} & {"ann", "ben", "cy"}
    page = _report(run, "leaderboard.html").read_text()
    assert "To review" in page and "tampering: " in page[page.index("<img"):]  # the list and each table's column
    rows = list(csv.DictReader(_report(run, "scores.csv").open()))
    assert all(r["review"].startswith("tampering") for r in rows if r["student"] == "eve")
    book = _gradebook(run.course)
    assert all(book["eve"]["review"].values()) and all(book["fay"]["review"].values())  # needs_manual_grade
    assert not any(book["ann"]["review"].values())


@pytest.mark.slow
def test_every_learner_gets_feedback_without_server_paths(graded_class):
    run = graded_class
    for student in LEARNERS:
        page = (run.course / "feedback" / student / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
        assert "Graded outside this notebook" in page or "could not be read" in page, student
        for server in (str(run.course), str(ROOT), str(run.tmpdir), sys.prefix, "autograder-scratch-"):
            assert server not in page, (student, server)
    broken = (run.course / "feedback" / "fay" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    assert "could not be read" in broken and "is not a valid notebook (invalid JSON" in broken  # and why
    # the patcher's kernel handed nbgrader 100x the points; its copy was still made by running it
    assert "feedback made without running" not in run.patcher_out and "NO FEEDBACK COPY" not in run.patcher_out
    result = json.loads((run.course / "autograder_results" / ASSIGNMENT / "eve.json").read_text())
    assert result["nbgrader"].get("fallback") is None
    eve = (run.course / "feedback" / "eve" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    assert "Graded outside this notebook" in eve and _gradebook(run.course)["eve"]["score"] == 0


@pytest.mark.slow
def test_results_are_keyed_on_the_grader_and_a_killed_forced_run_resumes_forced(graded_class):
    run = graded_class
    grader = gradebook.grader_version(gradebook.course_directory(run.course), ASSIGNMENT)
    assert {s: _saved(run.course, f"{s}.json", "grader") for s in LEARNERS} == dict.fromkeys(LEARNERS, grader)
    # a copy of the course: nothing to grade as it is; everyone once the assignment's source changed
    assert run.unchanged_copy == [] and run.changed_copy == sorted(LEARNERS)
    forced, regraded = run.forced
    assert forced and regraded == ["ann"], "the forced run was not killed between its two learners"
    out = run.patcher_out  # the next run, without --force
    assert "resuming an interrupted --force run: 1 submissions left to regrade" in out, out
    assert [line.split()[0] for line in out.splitlines() if line.split(" ", 1)[0] in LEARNERS] == ["eve"]
    assert _saved(run.course, "eve.json", "run") == forced  # regraded by the resumed forced run
    assert _saved(run.course, ".forced-run.json", "id") is None  # over: the next run is a plain one
    assert {s: t for s, t in _mtimes(run.course).items() if s not in ("ann", "eve")} == \
        {s: t for s, t in run.mtimes.items() if s not in ("ann", "eve")}  # the others were not regraded


@pytest.mark.slow
def test_timestamps_from_nbgrader_collect_in_every_path(graded_class):
    import datetime

    book = _gradebook(graded_class.course)
    when = datetime.datetime(2026, 1, 1)
    assert {s: g["timestamp"] for s, g in book.items()} == {s: None if s == COPIED_BY_HAND else when
                                                             for s in LEARNERS}
    grades = list(csv.DictReader((graded_class.course / "grades.csv").open()))
    assert {r["student_id"]: float(r["score"]) for r in grades} == {s: g["score"] for s, g in book.items()}


@pytest.mark.slow
def test_results_are_readable_by_the_course_group_and_reruns_skip(graded_class):
    run = graded_class
    results = run.course / "autograder_results" / ASSIGNMENT
    for path in [*results.glob("*.json"), run.course / "autograded" / "eve" / ASSIGNMENT,
                 *(run.course / "autograded" / "eve" / ASSIGNMENT).iterdir()]:
        assert path.stat().st_mode & 0o040, path  # group-readable (the run's umask was 002)
    assert "already graded, skipped" in run.again_out and "submissions graded" not in run.again_out
    assert run.mtimes_again == run.mtimes  # nothing graded again, nothing rewritten

    from autograder.batch import ClassRun
    from tools.synthetic_class import learner_notebook, submit

    submit(run.course, ASSIGNMENT, "cy", learner_notebook(run.course, ASSIGNMENT, "solution"))
    again = ClassRun(run.course, ASSIGNMENT)
    assert again.todo == ["cy"]  # a new submission is graded again; the others stay skipped
