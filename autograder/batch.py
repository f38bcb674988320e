"""Grade a class: every submission of an assignment, scores from outside the learner's kernel.

    python -m autograder autograde ASSIGNMENT [--student S ...] [--force]       # here, one at a time
    python -m autograder batch ASSIGNMENT [--scheduler ADDRESS] [--workers N] [--force]   # on Dask

Both grade each ``submitted/<student>/<assignment>/`` with ``grade_task`` (autograder.gradebook says
what it trusts and why) and write the result from this process only: atomically to the results folder
(``autograder_results/<assignment>/<student>.json``), then into the gradebook. A re-run skips a
submission whose result is recorded for the same submitted files (``--force`` regrades), so a crashed
run resumes where it stopped and loses at most the submissions being graded when it died.

``batch`` runs each submission as a Dask task, one GPU per task: an embedded cluster with one worker per
visible GPU (dask-cuda's LocalCUDACluster when installed, else a LocalCluster whose workers are each
pinned to one GPU by CUDA_VISIBLE_DEVICES), or one single-threaded worker process per core without a
GPU; ``--scheduler ADDRESS`` uses a running cluster instead (workers started with ``--nthreads 1
--resources GPU=1`` on a filesystem that holds the course, e.g. by dask-jobqueue on Slurm). The run
ends with the class report (autograder.class_report).
"""
from __future__ import annotations

import json
import os
import socket
import tempfile
import time
from pathlib import Path

from autograder import gradebook
from autograder.gradebook import CourseError
from measure.files import write_json_atomic


# ------------------------------------------------------------------------------------ one submission
def grade_task(task: dict) -> dict:
    """Grade one submission wherever this runs (a Dask worker, or here); write nothing to the gradebook.

    ``task``: root, assignment, student, layout ({notebook: {grade_id: exercise}}), template_db, grader
    (``gradebook.grader_version``), run (the id of a forced run, or None), quick, timeout, jobs, execute.
    Returns the outcome that ``finish`` records, without the server's paths (it becomes feedback).
    """
    from autograder import scratch
    from autograder.grading import grade_submission
    from autograder.submission import SubmissionError

    scratch.sweep()  # what a killed task left on this machine
    coursedir = gradebook.course_directory(task["root"])
    assignment, student = task["assignment"], task["student"]
    folder = gradebook.step_dir(coursedir, "submitted", student, assignment)
    outcome = {"assignment": assignment, "student": student,
               "fingerprint": gradebook.submission_fingerprint(coursedir, assignment, student),
               "grader": task.get("grader"), "run": task.get("run"),
               "timestamp": gradebook.submitted_at(coursedir, assignment, student),
               "expected": {name: sorted(set(cells.values())) for name, cells in task["layout"].items() if cells},
               "host": socket.gethostname(), "visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
               "notebooks": {}, "seconds": {}}
    start = time.perf_counter()
    with scratch.folder("trusted") as tmp:
        for name, cells in task["layout"].items():
            path = folder / f"{name}.ipynb"
            if not path.exists() or not cells:
                continue
            try:
                result = grade_submission(path, list(dict.fromkeys(cells.values())), quick=task.get("quick"),
                                          timeout=task.get("timeout"), jobs=task.get("jobs"))
            except SubmissionError as exc:
                result = {"submission": str(path), "error": str(exc), "exercises": [], "total": 0.0,
                          "max_total": None}
            outcome["notebooks"][name] = gradebook.plain_json(result)
        outcome = gradebook.without_paths(outcome, coursedir.root)
        outcome["seconds"]["grading"] = round(time.perf_counter() - start, 2)
        start = time.perf_counter()
        result_file = tmp / "result.json"
        write_json_atomic(result_file, outcome)  # what the hidden cells print as feedback
        outcome["nbgrader"] = gradebook.run_nbgrader_autograde(
            coursedir, assignment, student, Path(task["template_db"]), result_file,
            execute=task.get("execute", True))
    outcome["seconds"]["nbgrader"] = round(time.perf_counter() - start, 2)
    return outcome


# ------------------------------------------------------------------------------------------ the class
class ClassRun:
    """What to grade and where its results go; ``finish`` records one outcome (only from this process).

    A submission is graded again when its files changed, when the grader changed (its code or the
    assignment's source: ``gradebook.grader_version``), when its last grading failed, and with ``force``.
    A forced run leaves a note in the results folder until it ends: a run started after it was
    interrupted resumes it as forced (the learners it had not regraded yet), whatever its own options.
    """

    FORCED = ".forced-run.json"

    def __init__(self, root, assignment: str, students=None, force: bool = False, results_dir=None):
        from autograder import scratch

        scratch.sweep()  # what a killed run left on this machine
        self.coursedir = gradebook.course_directory(root)
        self.root = Path(self.coursedir.root)
        self.assignment = assignment
        self.layout = gradebook.assignment_layout(self.coursedir, assignment)
        self.grader = gradebook.grader_version(self.coursedir, assignment)
        submitted = gradebook.submitted_students(self.coursedir, assignment)
        missing = sorted(set(students or []) - set(submitted))
        if missing:
            raise CourseError(f"no submission of {assignment} by {', '.join(missing)} under "
                              f"{self.root / self.coursedir.submitted_directory}")
        self.students = sorted(students) if students else submitted
        self.results_dir = Path(results_dir) if results_dir else self.root / "autograder_results" / assignment
        self.results_dir.mkdir(parents=True, exist_ok=True)
        self.forced, self.resumed = self._forced_run(force)
        self.todo, self.skipped, self.recovered = [], [], []
        for student in self.students:
            state = self._state(student)
            if state == "done":
                self.skipped.append(student)
            elif state == "unrecorded":  # graded, but the run died before the gradebook write
                self._record(self.load(student))
                self.recovered.append(student)
            else:
                self.todo.append(student)

    def _forced_run(self, force: bool) -> tuple[dict | None, bool]:
        """The forced run this one is (a new one, or one interrupted before), and whether it resumes."""
        note = self.results_dir / self.FORCED
        if force:
            forced = {"id": os.urandom(8).hex(), "students": self.students}
            write_json_atomic(note, forced)
            return forced, False
        try:
            forced = json.loads(note.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return None, False
        return forced, True

    def untimed(self) -> list[str]:
        """The run's learners whose submission has no time (no timestamp.txt: copied by hand)."""
        return [s for s in self.students if gradebook.submitted_at(self.coursedir, self.assignment, s) is None]

    def result_path(self, student: str) -> Path:
        return self.results_dir / f"{student}.json"

    def load(self, student: str) -> dict:
        return json.loads(self.result_path(student).read_text(encoding="utf-8"))

    def _state(self, student: str) -> str:
        path = self.result_path(student)
        if not path.exists():
            return "todo"
        try:
            saved = self.load(student)
        except (OSError, json.JSONDecodeError):
            return "todo"
        if self.forced and student in self.forced["students"] and saved.get("run") != self.forced["id"]:
            return "todo"  # the forced run has not regraded it yet
        if saved.get("not_graded") or saved.get("grader") != self.grader:
            return "todo"  # its grading failed, or the grader changed since
        if saved.get("fingerprint") != gradebook.submission_fingerprint(self.coursedir, self.assignment, student):
            return "todo"  # submitted again since
        return "done" if gradebook.recorded(self.coursedir, self.assignment, student, self.layout) else "unrecorded"

    def tasks(self, quick=None, timeout=None, jobs=None, execute=True) -> list[dict]:
        """One task per submission to grade, the most work first (``exercises_done``): the short gradings
        (notebooks left as handed out) fill the last minutes, when a GPU that finishes early would otherwise
        wait for another's long one."""
        if not self.todo:
            return []
        template = gradebook.template_gradebook(self.coursedir, self.assignment,
                                                self.results_dir / ".template-gradebook.db")
        return [{"root": str(self.root), "assignment": self.assignment, "student": s, "layout": self.layout,
                 "template_db": str(template), "grader": self.grader,
                 "run": self.forced["id"] if self.forced else None, "quick": quick, "timeout": timeout,
                 "jobs": jobs, "execute": execute}
                for s in sorted(self.todo, key=lambda s: -self.exercises_done(s))]

    def exercises_done(self, student: str) -> int:
        """How many of the assignment's exercises the learner's notebooks do not leave as handed out: a
        guess at the grading's length, read from the source (an unreadable notebook counts none)."""
        from autograder import specs
        from autograder.submission import left_as_handed_out, load

        done = 0
        for name, cells in self.layout.items():
            try:
                source = load(gradebook.step_dir(self.coursedir, "submitted", student, self.assignment)
                              / f"{name}.ipynb").source
                done += sum(ex in specs.EXERCISES and not left_as_handed_out(source, specs.get(ex).entry)
                            for ex in set(cells.values()))
            # a learner's file, read in the class's process: only an order rests on it, and whatever breaks
            # the reading is that learner's grading's to report, not the class's run's
            except Exception:  # noqa: BLE001
                continue
        return done

    def finish(self, outcome: dict) -> dict:
        """The result file first (atomically: nothing half-written survives a crash; readable by the course's
        group, teaching assistants, as the umask allows), then the gradebook."""
        write_json_atomic(self.result_path(outcome["student"]), outcome)
        return self._record(outcome)

    def fail(self, student: str, why: str) -> dict:
        """A grading that never came back: in the class outputs as "not graded", graded again next run,
        never written into the gradebook (a grade there is a grade)."""
        outcome = {"assignment": self.assignment, "student": student, "grader": self.grader, "not_graded": why,
                   "run": self.forced["id"] if self.forced else None,
                   "notebooks": {name: {"not_graded": why, "exercises": []} for name, cells in self.layout.items() if cells},
                   "expected": {name: sorted(set(cells.values())) for name, cells in self.layout.items() if cells}}
        write_json_atomic(self.result_path(student), outcome)
        return outcome

    def close(self, failed) -> None:
        """A forced run that graded every learner it was given is over: the next run is a plain one."""
        if self.forced and not failed:
            (self.results_dir / self.FORCED).unlink(missing_ok=True)

    def _record(self, outcome: dict) -> dict:
        outcome["recorded"] = gradebook.record(self.coursedir, outcome, self.layout)
        return outcome


def summary_line(outcome: dict) -> str:
    """One line per learner, as their grading finishes: points recorded, each notebook's status and its
    reason, the exercises' points, what to review, and how their feedback copy was made."""
    from autograder import review

    earned = sum(v or 0.0 for v in outcome.get("recorded", {}).values())
    exercises = [f"{ex['id']} {ex['score'] * ex['points']:.1f}/{ex['points']:g}"
                 for nb in outcome["notebooks"].values() for ex in nb.get("exercises", [])]
    states = [review.status(outcome["notebooks"].get(name)) for name in outcome.get("expected", outcome["notebooks"])]
    bad = [f"{word}: {why}" for word, why in states if word != "graded"]
    flags = list(dict.fromkeys(f["reason"] for f in review.flags(outcome)))  # once, not once per exercise
    nbg = outcome.get("nbgrader") or {}
    secs = outcome.get("seconds", {})
    return (f"{outcome['student']:<20} {earned:6.2f}  {', '.join(exercises) or '-'}"
            f"  ({secs.get('grading', 0):.0f} s grading + {secs.get('nbgrader', 0):.0f} s nbgrader)"
            + (f"  [{'; '.join(bad)}]" if bad else "")
            + (f"  [REVIEW: {'; '.join(flags)}]" if flags else "")
            + (f"  [feedback made without running the notebook: {nbg['fallback']}]" if nbg.get("fallback") else "")
            + (f"  [NO FEEDBACK COPY: {nbg['error']}]" if nbg.get("error") else ""))


def _progress(total: int, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="grading", unit="submission", disable=not enabled or total == 0, leave=False)


def _collect(run: ClassRun, pending, total: int, progress: bool) -> tuple[list, list]:
    """Record each submission as it comes back (``pending`` yields (student, a call that returns its
    outcome or raises)); one line per learner above the progress bar as each finishes."""
    from tqdm.auto import tqdm

    done, failed = [], []
    with _progress(total, progress) as bar:
        for student, get in pending:
            try:
                outcome = run.finish(get())
                done.append(outcome)
                line = summary_line(outcome)
            except Exception as exc:  # noqa: BLE001  (one broken submission must not stop the class)
                why = f"{type(exc).__name__}: {exc}"
                failed.append((student, why))
                run.fail(student, why)
                line = f"{student:<20} NOT GRADED (graded again by the next run): {why}"
            tqdm.write(line)
            bar.update()
    return done, failed


def run_here(run: ClassRun, tasks: list[dict], progress: bool = True) -> tuple[list, list]:
    """Grade one submission after another in this process (``python -m autograder autograde``)."""
    return _collect(run, ((t["student"], lambda t=t: grade_task(t)) for t in tasks), len(tasks), progress)


def run_on_dask(run: ClassRun, tasks: list[dict], client, progress: bool = True) -> tuple[list, list]:
    """Grade every submission on the Dask cluster; record each result here as soon as it comes back.

    A worker lost mid-run (killed, its node gone) costs only its tasks: the scheduler runs them again
    on another worker (up to ``distributed.scheduler.allowed-failures`` times, then the submission is
    reported not graded and the next run grades it)."""
    return _collect(run, graded_as_they_finish(client, tasks, run.assignment), len(tasks), progress)


def _slots(client, resources) -> int:
    """How many gradings the cluster runs at once now: its GPUs, else its worker threads (at least one, so
    that a cluster between workers still holds the next task for the first that joins)."""
    workers = client.scheduler_info()["workers"].values()
    if resources:
        return max(1, sum(int(w.get("resources", {}).get("GPU", 0)) for w in workers))
    return max(1, sum(int(w.get("nthreads", 1)) for w in workers))


def graded_as_they_finish(client, tasks: list[dict], assignment: str, fn=None):
    """Yield (student, a call returning the outcome or raising) as each grading finishes, handing a task to
    the cluster only when a grading slot is free. Submitted all at once, the tasks would be dealt out on
    arrival, a few per worker (a task restricted to a GPU is never queued at the scheduler), before their
    lengths are known: one GPU got a class's four solutions in a row while another, done with its four
    untouched notebooks, stood idle (a 4-GPU run 64 s for 41 s of work per GPU). Fed one at a time, a GPU
    takes the next submission the moment it is free."""
    from distributed import as_completed

    fn = fn or grade_task
    workers = client.scheduler_info()["workers"].values()
    # One GPU per task: workers that declare a GPU resource get one task per GPU; otherwise each worker's
    # single thread is the limit (one worker per GPU, as the embedded clusters are built).
    resources = {"GPU": 1} if any("GPU" in w.get("resources", {}) for w in workers) else None
    waiting = list(reversed(tasks))  # popped from the end: the class's order
    running: dict = {}
    finished = as_completed()

    def feed():
        for _ in range(min(len(waiting), _slots(client, resources) - len(running))):
            task = waiting.pop()
            future = client.submit(fn, task, key=f"grade-{assignment}-{task['student']}-{os.urandom(4).hex()}",
                                   resources=resources, pure=False)
            running[future] = task["student"]
            finished.add(future)

    feed()
    for future in finished:
        student = running.pop(future)
        feed()  # the freed slot is refilled before this result is recorded
        yield student, future.result
        future.release()


def grade_class(root, assignment: str, client=None, students=None, force: bool = False, results_dir=None,
                progress: bool = True, **options) -> tuple[ClassRun, list, list]:
    """Grade (and record) the submissions of ``assignment`` that are not graded yet: on ``client``'s Dask
    cluster, or here one after another without one. ``options``: quick, timeout, jobs, execute.
    Returns the run, the outcomes recorded and the (student, reason) that could not be graded."""
    run = ClassRun(root, assignment, students, force, results_dir)
    tasks = run.tasks(**options)
    done, failed = run_on_dask(run, tasks, client, progress) if client is not None and tasks \
        else run_here(run, tasks, progress)
    run.close(failed)
    return run, done, failed


# --------------------------------------------------------------------------------------- the cluster
def visible_gpus() -> list[str]:
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [d.strip() for d in env.split(",") if d.strip() and d.strip() != "-1"]
    try:
        import torch

        return [str(i) for i in range(torch.cuda.device_count())]
    except Exception:  # noqa: BLE001
        return []


def local_cluster(n_workers: int | None = None):
    """One worker per visible GPU (at most ``n_workers``), or ``n_workers`` (default: one per core)
    single-threaded worker processes without a GPU. Returns (cluster, description)."""
    import logging

    from distributed import LocalCluster, Nanny, Scheduler, SpecCluster

    quiet = {"dashboard_address": ":0", "silence_logs": logging.ERROR}
    gpus = visible_gpus()[:n_workers] if n_workers else visible_gpus()
    if gpus:
        try:
            from dask_cuda import LocalCUDACluster

            return (LocalCUDACluster(CUDA_VISIBLE_DEVICES=",".join(gpus), threads_per_worker=1, **quiet),
                    f"LocalCUDACluster, {len(gpus)} GPU workers ({','.join(gpus)})")
        except ImportError:
            pass
        workers = {f"gpu{g}": {"cls": Nanny, "options": {"nthreads": 1, "env": {"CUDA_VISIBLE_DEVICES": g},
                                                         "resources": {"GPU": 1}, "silence_logs": logging.ERROR}}
                   for g in gpus}
        scheduler = {"cls": Scheduler, "options": {"dashboard_address": ":0"}}
        return (SpecCluster(workers=workers, scheduler=scheduler, silence_logs=logging.ERROR),
                f"LocalCluster, {len(gpus)} workers, one GPU each ({','.join(gpus)})")
    n = n_workers or os.cpu_count() or 1
    return (LocalCluster(n_workers=n, threads_per_worker=1, processes=True, **quiet),
            f"LocalCluster, {n} CPU worker processes (no GPU)")


# ---------------------------------------------------------------------------------------------- CLI
def add_commands(sub) -> None:
    def common(p):
        p.add_argument("assignment")
        p.add_argument("--student", action="append", metavar="S", help="grade only this student (repeatable)")
        p.add_argument("--force", action="store_true", help="regrade submissions already graded")
        p.add_argument("--course", default=".", metavar="DIR", help="the nbgrader course directory (default: .)")
        p.add_argument("--results", metavar="DIR", help="results folder (default: COURSE/autograder_results/ASSIGNMENT)")
        p.add_argument("--quick", action="store_true", help="fewer, smaller cases (for tests)")
        p.add_argument("--timeout", type=float, help="seconds per exercise (default: the exercise's own)")
        p.add_argument("--no-execute", dest="execute", action="store_false",
                       help="make the autograded copy without running the notebook (feedback shows the graded "
                            "report but no other outputs; much faster)")

    a = sub.add_parser("autograde", help="grade submissions in fresh workers and record them in the gradebook")
    common(a)
    b = sub.add_parser("batch", help="grade every submission of an assignment as Dask tasks, then a class report")
    common(b)
    b.add_argument("--scheduler", metavar="ADDRESS", help="a running Dask scheduler (default: a local cluster)")
    b.add_argument("--workers", type=int, metavar="N", help="local workers (default: one per GPU, else per core)")
    b.add_argument("--report", metavar="DIR", help="class report folder (default: COURSE/reports/ASSIGNMENT)")


def main(args) -> int:
    import sys

    from autograder import scratch

    scratch.exit_on_signals()  # a scheduler's SIGTERM unwinds like Ctrl-C: scratch folders go with it
    try:
        run = ClassRun(args.course, args.assignment, args.student, args.force, args.results)
    except CourseError as exc:
        print(f"autograder: {exc}", file=sys.stderr)
        return 2
    if run.resumed:
        print(f"resuming an interrupted --force run: {len(run.todo)} submissions left to regrade")
    if run.skipped:
        print(f"already graded, skipped (--force regrades): {', '.join(run.skipped)}")
    if run.recovered:
        print(f"recorded from the results of an interrupted run: {', '.join(run.recovered)}")
    quick = True if args.quick else None
    start = time.perf_counter()
    try:
        if args.command == "autograde":
            tasks = run.tasks(quick=quick, timeout=args.timeout, execute=args.execute)
            done, failed = run_here(run, tasks)
            where = "this machine"
        else:
            done, failed, where = _batch(run, args, quick)
    except CourseError as exc:
        print(f"autograder: {exc}", file=sys.stderr)
        return 2
    run.close(failed)
    elapsed = time.perf_counter() - start
    if done:
        print(f"{len(done)} submissions graded in {elapsed:.0f} s on {where} "
              f"({60 * len(done) / elapsed:.1f} per minute); results in {run.results_dir}")
    for line in run_notes(done, failed, run.untimed()):
        print(line)
    if args.command == "batch":
        from autograder import class_report

        report_dir = Path(args.report) if args.report else run.root / "reports" / run.assignment
        everyone = gradebook.submitted_students(run.coursedir, run.assignment)  # the class, not just this run
        paths = class_report.write_report(run.results_dir, report_dir, run.assignment, students=everyone)
        print(f"class report: {paths['html']} ({paths['csv'].name}, plots); "
              f"{paths['flagged']} of {len(everyone)} learners to review: {paths['review']}")
    return 1 if failed else 0


def run_notes(done: list, failed: list, untimed: list[str]) -> list[str]:
    """What the run's summary must say beyond the points: learners not graded, feedback made without
    running the notebook (or not at all), the run's submissions without nbgrader collect's timestamp
    (``untimed``: graded now or before, so that one recorded from an interrupted run is named too)."""
    def names(outcomes):
        return ", ".join(o["student"] for o in outcomes)

    notes = []
    if failed:
        notes.append(f"NOT GRADED ({len(failed)}; the next run grades them): {', '.join(s for s, _ in failed)}")
    fallback = [o for o in done if (o.get("nbgrader") or {}).get("fallback")]
    if fallback:
        notes.append(f"feedback made without running the notebook ({len(fallback)}; reasons above): {names(fallback)}")
    lost = [o for o in done if (o.get("nbgrader") or {}).get("error")]
    if lost:
        notes.append(f"NO FEEDBACK COPY ({len(lost)}; nbgrader's errors above): {names(lost)}")
    if untimed:
        notes.append(f"no timestamp.txt from nbgrader collect ({len(untimed)}; copied by hand?): no submission "
                     f"time recorded, so no late penalty can apply: {', '.join(untimed)}")
    return notes


def _batch(run: ClassRun, args, quick):
    from distributed import Client

    if not run.todo:
        return [], [], "no cluster (nothing to grade)"
    options = {"quick": quick, "timeout": args.timeout, "execute": args.execute}
    if args.scheduler:
        with Client(args.scheduler) as client:
            n = len(client.scheduler_info()["workers"])
            done, failed = run_on_dask(run, run.tasks(jobs=1, **options), client)
            return done, failed, f"the Dask cluster at {args.scheduler} ({n} workers)"
    cluster, where = local_cluster(args.workers)
    with cluster, Client(cluster) as client:
        # the cores left over by the workers go to each task's exercise workers (when nothing is timed)
        jobs = max(1, (os.cpu_count() or 1) // max(1, len(cluster.workers)))
        done, failed = run_on_dask(run, run.tasks(jobs=jobs, **options), client)
        return done, failed, where
