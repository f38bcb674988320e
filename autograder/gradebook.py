"""The nbgrader score, computed outside the learner's notebook kernel (docs/architecture.md, 8).

A hidden test cell runs in the learner's kernel, where a cell can replace ``autograder.nbgrader.grade``
with ``lambda *a: 10``: a score handed over by that cell proves nothing. So the trusted path is:

1. the grading process (never the learner's) grades each submitted notebook with
   ``grading.grade_submission`` (every exercise in its own fresh worker);
2. nbgrader's autograde still runs (in this process, as its formgrader runs it), for the autograded
   copy that feedback is made from, but in a scratch course (its own copy of the source, the submission and a gradebook holding only this
   assignment) with ``AUTOGRADER_TRUSTED_RESULT`` set, so the hidden cells only print the report that
   was already computed (``trusted_feedback``) instead of grading twice;
3. the course's gradebook gets the submission's records (as nbgrader autograde writes them) with the
   auto_score of every hidden grading cell taken from step 1, never from the kernel.

Which hidden cell grades which exercise is read from the *source* notebook (``grade("<id>", ...)`` in
the cell), not from the learner's copy. Only the process that calls ``record`` writes the course's
gradebook: SQLite wants one writer, and batch grading (autograder.batch) writes from its client.
"""
from __future__ import annotations

import ast
import contextlib
import datetime
import hashlib
import json
import math
import os
import re
import shutil
import sqlite3
import tempfile
from pathlib import Path
import sys

from autograder.audit import parse
from autograder.submission import code_lines

# nbgrader creates and migrates gradebooks with `alembic`, called by name: the tools installed beside this
# Python must be on PATH even when it was started by its full path (not through `make`).
_BIN = os.path.dirname(sys.executable)
if _BIN not in os.environ.get("PATH", "").split(os.pathsep):
    os.environ["PATH"] = os.pathsep.join([_BIN] + [p for p in os.environ.get("PATH", "").split(os.pathsep) if p])

TRUSTED_RESULT_ENV = "AUTOGRADER_TRUSTED_RESULT"


class CourseError(Exception):
    """The course directory cannot be graded as asked (one line an instructor can act on)."""


# ---------------------------------------------------------------------------------------------- course
def course_config(root):
    """The traitlets Config of the course at ``root`` (its nbgrader_config.py), root set if it is not."""
    from traitlets.config import Config
    from traitlets.config.loader import PyFileConfigLoader

    root = Path(root).resolve()
    config = Config()
    if (root / "nbgrader_config.py").exists():
        config = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    if not config.CourseDirectory.get("root"):
        config.CourseDirectory.root = str(root)
    return config


def course_directory(root):
    """nbgrader's CourseDirectory for the course at ``root``, configured by its nbgrader_config.py."""
    from nbgrader.coursedir import CourseDirectory

    return CourseDirectory(config=course_config(root))


def step_dir(coursedir, step: str, student: str, assignment: str) -> Path:
    """``root/<step>/<student>/<assignment>`` as the course's directory_structure lays it out."""
    return Path(coursedir.format_path(getattr(coursedir, f"{step}_directory"), student, assignment))


def submitted_students(coursedir, assignment: str) -> list[str]:
    base = Path(coursedir.root) / coursedir.submitted_directory
    return sorted(p.parent.name for p in base.glob(f"*/{assignment}") if p.is_dir())


def grade_cells(notebook_path) -> dict[str, str]:
    """{grade_id: exercise id} of the hidden cells of a (source) notebook that call ``grade("<id>", ...)``."""
    nb = json.loads(Path(notebook_path).read_text(encoding="utf-8"))
    cells = {}
    for cell in nb.get("cells", []):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.get("cell_type") != "code" or not meta.get("grade") or meta.get("solution"):
            continue
        src = cell.get("source", "")
        src = "".join(src) if isinstance(src, list) else src
        exercise = _graded_exercise(src)
        if exercise is not None:
            cells[meta["grade_id"]] = exercise
    return cells


def _graded_exercise(source: str) -> str | None:
    try:
        tree = parse("\n".join(code_lines(source)))
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if name == "grade" and isinstance(node.args[0].value, str):
                return node.args[0].value
    return None


def assignment_layout(coursedir, assignment: str) -> dict[str, dict[str, str]]:
    """{notebook name: {grade_id: exercise id}} for every source notebook of the assignment."""
    source = step_dir(coursedir, "source", ".", assignment)
    notebooks = sorted(source.glob("*.ipynb"))
    if not notebooks:
        raise CourseError(f"no source notebooks in {source}")
    return {nb.stem: grade_cells(nb) for nb in notebooks}


def submitted_at(coursedir, assignment: str, student: str) -> str | None:
    """The submission's time from ``nbgrader collect``'s timestamp.txt (ISO, UTC), or None: a submission
    copied by hand has none, and no late penalty can apply to it."""
    from nbgrader.utils import parse_utc

    path = step_dir(coursedir, "submitted", student, assignment) / "timestamp.txt"
    try:
        text = path.read_text(encoding="utf-8").strip()
        return parse_utc(text).isoformat() if text else None
    except (OSError, ValueError):
        return None


def submission_fingerprint(coursedir, assignment: str, student: str) -> dict[str, str]:
    """sha256 of every submitted file (notebooks and timestamp.txt): a new submission changes it."""
    folder = step_dir(coursedir, "submitted", student, assignment)
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and ".ipynb_checkpoints" not in p.parts}


# What a grade depends on besides the submission: the grading code (the grader, its references, the
# course's device set-up, the meters) and the assignment's source notebooks (hidden cells, points).
GRADER_PACKAGES = ("autograder", "kernels_ref", "course", "measure")


def grader_version(coursedir, assignment: str, code_root=None) -> str:
    """sha256 of the grading code (under ``code_root``, default: this checkout) and the assignment's
    source: a fix of either regrades the class."""
    digest = hashlib.sha256()
    code_root = Path(code_root or Path(__file__).resolve().parent.parent)
    source = step_dir(coursedir, "source", ".", assignment)
    for root, pattern in [(code_root / pkg, "*.py") for pkg in GRADER_PACKAGES] + [(source, "*")]:
        for path in sorted(p for p in root.rglob(pattern) if p.is_file() and ".ipynb_checkpoints" not in p.parts):
            digest.update(f"{path.relative_to(root.parent)}\0".encode() + path.read_bytes() + b"\0")
    return digest.hexdigest()


# ------------------------------------------------------------------------------------- trusted scores
def trusted_points(notebook_result: dict | None, exercise: str, max_points: float) -> float:
    """Points for one hidden cell from the grading process's result (0 if it was not graded)."""
    from autograder.nbgrader import clamp_points

    for ex in (notebook_result or {}).get("exercises", []):
        if ex["id"] == exercise:
            return clamp_points(ex["score"] * ex["points"], max_points)
    return 0.0


def plain_json(obj):
    """Results as strict JSON: non-finite floats (a NaN max error) become None."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): plain_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain_json(v) for v in obj]
    return obj if obj is None or isinstance(obj, (bool, int, str)) else str(obj)


def trusted_feedback(exercise_id: str, notebook_path: str, result_file: str) -> float:
    """What a hidden cell does during the trusted run: print the report graded outside this kernel.

    The number it returns is for nbgrader's log only; ``record`` overwrites it with the trusted one.
    """
    from autograder.report import render_text

    outcome = json.loads(Path(result_file).read_text(encoding="utf-8"))
    notebooks = outcome.get("notebooks", {})
    wanted = Path(notebook_path).stem
    for name in [wanted] + sorted(n for n in notebooks if n != wanted):
        result = notebooks.get(name)
        if not result:
            continue
        if result.get("error"):
            print(f"autograder: {result['error']}")
            return 0.0
        for ex in result["exercises"]:
            if ex["id"] == exercise_id:
                print("Graded outside this notebook's kernel, in fresh worker processes:\n")
                print(render_text(dict(result, exercises=[ex], total=ex["score"] * ex["points"],
                                       max_total=ex["points"])))
                return trusted_points(result, exercise_id, ex["points"])
    print(f"autograder: {exercise_id!r} was not graded for this submission")
    return 0.0


# --------------------------------------------------------------------------------- nbgrader's records
def _sqlite_path(db_url: str) -> Path:
    if not db_url.startswith("sqlite:///"):
        raise CourseError(f"the gradebook must be SQLite for trusted grading (db_url is {db_url})")
    return Path(db_url[len("sqlite:///"):])


def template_gradebook(coursedir, assignment: str, dest) -> Path:
    """A gradebook holding only ``assignment`` (its notebooks and cells, as generate_assignment saved
    them): what a scratch ``nbgrader autograde`` needs, with no other learner's grades in it."""
    from nbgrader.api import Gradebook, MissingEntry

    dest = Path(dest)
    source = _sqlite_path(coursedir.db_url)
    if not source.exists():
        raise CourseError(f"no gradebook at {source}: run `nbgrader generate_assignment {assignment}` first")
    with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
        try:
            gb.find_assignment(assignment)
        except MissingEntry:
            raise CourseError(f"the gradebook has no assignment {assignment!r}: run "
                              f"`nbgrader generate_assignment {assignment}` first") from None
    with sqlite3.connect(source) as src, sqlite3.connect(dest) as dst:
        src.backup(dst)  # a consistent copy even while another reader has the file open
    with Gradebook(f"sqlite:///{dest}", coursedir.course_id) as gb:
        for other in [a.name for a in gb.assignments if a.name != assignment]:
            gb.remove_assignment(other)
        for student in [s.id for s in gb.students]:
            gb.remove_student(student)  # with their submissions
    return dest


def run_nbgrader_autograde(coursedir, assignment: str, student: str, template_db: Path, result_file: Path,
                           execute: bool = True) -> dict:
    """``nbgrader autograde`` of one submission in a scratch course; the autograded copy (its hidden cells
    showing the trusted report) is moved into the course's autograded/ folder. Returns nbgrader's records
    for ``record`` (with ``fallback``: why the copy was made without running the notebook, if it was), or
    ``{"error": ...}`` when no copy could be made at all.

    nbgrader runs in this process, as its formgrader runs it (``NbGraderAPI.autograde``): the learner's
    code runs only in the kernel it starts, here in scratch/autograded/<student>/<assignment>, away from
    the course's gradebook and other learners' files. Right after the kernel ran, the hidden cells get
    the trusted report as their outputs (``TrustedOutputs``), so a cell that replaced the grading
    function cannot hand nbgrader its own number (one above the cell's points would fail the whole
    copy). Every learner gets a copy: when nbgrader cannot make one by running the notebook, it is made
    without running it (``execute=False``: no kernel; the hidden cells get the trusted report, the other
    cells stay without outputs), and a notebook that cannot be read at all is replaced by the assignment
    with a note that says so. nbgrader's log and Jupyter's warnings are kept, not printed.
    """
    from autograder import scratch

    fallback = None
    with scratch.folder("autograde") as tmp, _quiet() as log:
        _scratch_course(coursedir, assignment, student, tmp)
        submitted = _in_scratch(coursedir, "submitted", student, assignment, tmp)
        unreadable = _stand_in_for_unreadable(coursedir, assignment, submitted)
        if unreadable:
            execute, fallback = False, "the submitted notebook could not be read: " + unreadable
        run = _autograde(coursedir, assignment, student, tmp, template_db, result_file, execute)
        if not run["success"] and execute:
            fallback = "nbgrader could not run the notebook: " + _last_error(run)
            run = _autograde(coursedir, assignment, student, tmp, template_db, result_file, execute=False)
        produced = _in_scratch(coursedir, "autograded", student, assignment, tmp)
        if not run["success"] or not produced.exists():
            return {"error": "nbgrader autograde failed: " + _last_error(run), "log": log.text()}
        _replace_dir(produced, step_dir(coursedir, "autograded", student, assignment))
        from nbgrader.api import Gradebook

        with Gradebook(f"sqlite:///{tmp / 'gradebook.db'}", coursedir.course_id) as gb:
            records = _submission_records(gb.find_submission(assignment, student))
    return dict(records, fallback=fallback, log=log.text()[-3000:]) if fallback else records


def _in_scratch(coursedir, step: str, student: str, assignment: str, tmp: Path) -> Path:
    """Where ``step_dir`` of the course lies in the scratch course at ``tmp``."""
    return tmp / step_dir(coursedir, step, student, assignment).relative_to(Path(coursedir.root))


def _scratch_course(coursedir, assignment: str, student: str, tmp: Path) -> None:
    """The scratch course: the assignment's source and this learner's submission, nothing else."""
    for step, who in (("source", "."), ("submitted", student)):
        shutil.copytree(step_dir(coursedir, step, who, assignment), _in_scratch(coursedir, step, who, assignment, tmp),
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints"))


def _autograde(coursedir, assignment: str, student: str, tmp: Path, template_db: Path, result_file: Path,
               execute: bool) -> dict:
    """One ``nbgrader autograde`` in the scratch course at ``tmp``, on a fresh copy of the template."""
    from nbgrader.apps import NbGraderAPI

    shutil.copy(template_db, tmp / "gradebook.db")
    config = course_config(coursedir.root)
    config.CourseDirectory.root = str(tmp)
    config.CourseDirectory.db_url = f"sqlite:///{tmp / 'gradebook.db'}"
    config.NbGraderAPI.log_level = "WARN"
    config.Autograde.autograde_preprocessors = EXECUTE_PREPROCESSORS if execute else NO_EXECUTE_PREPROCESSORS
    with _environ(**{TRUSTED_RESULT_ENV: str(result_file)}):  # the kernel inherits it
        return NbGraderAPI(config=config).autograde(assignment, student, force=True, create=True)


def _last_error(run: dict) -> str:
    """The cause nbgrader gives, not its closing 'see the log above': the log's last error, else the
    traceback's last line."""
    lines = (run.get("log") or "").splitlines()
    errors = [i for i, line in enumerate(lines) if line.startswith(("[ERROR]", "[CRITICAL]"))]
    cause = [line for line in lines[errors[0]:] if line.strip()] if errors else []
    cause = [line for line in cause if "Please see the error log" not in line]
    tail = [line for line in (run.get("error") or "").splitlines() if line.strip()][-1:]
    return " | ".join(cause[-6:] or tail)[-1500:] or "no reason given"


@contextlib.contextmanager
def _environ(**values):
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# nbgrader's own list of autograde preprocessors, with the trusted report given to the hidden cells right
# after the kernel ran (before SaveAutoGrades reads their values); without a kernel, instead of running it.
_AFTER_EXECUTE = [
    "autograder.gradebook.TrustedOutputs", "nbgrader.preprocessors.IgnorePattern",
    "nbconvert.preprocessors.ClearMetadataPreprocessor", "nbgrader.preprocessors.LimitOutput",
    "nbgrader.preprocessors.SaveAutoGrades", "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata",
]
EXECUTE_PREPROCESSORS = ["nbgrader.preprocessors.Execute"] + _AFTER_EXECUTE
NO_EXECUTE_PREPROCESSORS = _AFTER_EXECUTE


def trusted_outputs(cell, notebook_name: str, result_file) -> bool:
    """Give a hidden grading cell the trusted report as its outputs (whatever the kernel printed there,
    the feedback shows what was graded outside it). Returns whether the cell is one."""
    import io

    from nbformat.v4 import new_output

    meta = cell.get("metadata", {}).get("nbgrader", {})
    if cell.get("cell_type") != "code" or not meta.get("grade") or meta.get("solution"):
        return False
    exercise = _graded_exercise(cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"]))
    if exercise is None:
        return False
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        points = trusted_feedback(exercise, notebook_name, str(result_file))
    cell["outputs"] = [new_output("stream", name="stdout", text=text.getvalue()),
                       new_output("execute_result", data={"text/plain": repr(points)},
                                  execution_count=cell.get("execution_count"))]
    return True


# A scratch folder's path, wherever it lies (autograder.scratch names them).
_SCRATCH_PATH = re.compile(r"(?:/[^\s'\"<>]*?/)?autograder-scratch-\d+@[^/\s'\"<>]+/")


def without_paths(obj, *roots):
    """``obj`` (strings, lists, dicts) with the server's paths out of every string: scratch folders
    disappear, and so do the course's root, the course code's checkout and the Python installation
    (``roots`` besides): feedback names the learner's file and the course's modules, not the server's."""
    prefixes = [str(Path(r)).rstrip("/") + "/" for r in (*roots, Path(__file__).resolve().parent.parent,
                                                         sys.prefix, sys.base_prefix) if r]
    prefixes = sorted(set(prefixes), key=len, reverse=True)

    def short(x):
        if isinstance(x, str):
            x = _SCRATCH_PATH.sub("", x)
            for prefix in prefixes:
                x = x.replace(prefix, "")
            return x
        if isinstance(x, dict):
            return {k: short(v) for k, v in x.items()}
        if isinstance(x, list):
            return [short(v) for v in x]
        return x

    return short(obj)


def _trusted_outputs_class():
    from nbconvert.preprocessors import Preprocessor
    from nbformat import from_dict
    from traitlets import Bool

    class TrustedOutputs(Preprocessor):
        """After nbgrader's Execute, or instead of it (``--no-execute``: no kernel, the other cells get
        no outputs): the hidden grading cells get the trusted report as their outputs; the other cells'
        outputs (tracebacks) lose the server's paths."""

        enabled = Bool(True)

        def preprocess_cell(self, cell, resources, index):
            if not trusted_outputs(cell, resources["nbgrader"]["notebook"], os.environ[TRUSTED_RESULT_ENV]):
                cell["outputs"] = [from_dict(without_paths(out)) for out in cell.get("outputs", [])]
            return cell, resources

    return TrustedOutputs


def __getattr__(name):  # nbgrader imports the preprocessor by name; nbconvert stays a lazy import
    if name == "TrustedOutputs":
        return _trusted_outputs_class()
    raise AttributeError(name)


def _stand_in_for_unreadable(coursedir, assignment: str, folder: Path) -> str:
    """Replace each submitted notebook that cannot be read (not JSON, not a notebook) by the assignment's
    source notebook with its solutions removed and a note on top, so that nbgrader can still make the
    feedback copy; return why, or "" when every notebook could be read."""
    import nbformat

    reasons = []
    for source in sorted(step_dir(coursedir, "source", ".", assignment).glob("*.ipynb")):
        path = folder / source.name
        if not path.exists():
            continue  # nbgrader records a missing notebook itself
        try:
            nbformat.read(str(path), as_version=4)
            continue
        except Exception as exc:  # noqa: BLE001  (whatever makes it unreadable: say what it was)
            reason = f"{source.name}: {type(exc).__name__}: {_first_line(exc)}"
        nb = nbformat.read(str(source), as_version=4)
        for cell in nb.cells:
            if cell.get("metadata", {}).get("nbgrader", {}).get("solution"):
                cell.source = "# (the submitted file could not be read)"
        nb.cells.insert(0, nbformat.v4.new_markdown_cell(
            f"**Your submitted `{source.name}` could not be read** ({reason}). This is the assignment as "
            "handed out, with the grader's report under each graded cell: your work scored nothing because "
            "the file is broken. Ask your instructor before submitting a repaired copy."))
        nbformat.write(nb, str(path))
        reasons.append(reason)
    return "; ".join(reasons)


def _first_line(text) -> str:
    return next((line.strip() for line in str(text).splitlines() if line.strip()), "")[:300]


class _Captured:
    """What this process wrote to its stdout and stderr (file descriptors 1 and 2) inside ``_quiet``."""

    def __init__(self):
        self.file = tempfile.TemporaryFile()  # unnamed: gone with the process whatever kills it
        self.kept = None

    def text(self) -> str:
        if self.kept is not None:
            return self.kept
        sys.stdout.flush()
        sys.stderr.flush()
        self.file.seek(0)
        return self.file.read().decode("utf-8", errors="replace")


@contextlib.contextmanager
def _quiet():
    """nbgrader's log, Jupyter's warnings and the kernel's own messages go to a file, not to the terminal
    (where a batch shows its progress bar): at the file descriptors, since loggers and the kernel's
    process keep the streams they were given."""
    import warnings

    captured = _Captured()
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    os.dup2(captured.file.fileno(), 1)
    os.dup2(captured.file.fileno(), 2)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always")  # shown in the captured log, once each call
            yield captured
    finally:
        captured.kept = captured.text()
        for fd, keep in zip((1, 2), saved):
            os.dup2(keep, fd)
            os.close(keep)
        captured.file.close()


def ordinary_modes(path: Path) -> None:
    """The permissions a plain ``open``/``mkdir`` would give (0o666/0o777 less the umask), for ``path``
    and everything under it: files made through temporary ones (0600, 0700) become readable by the
    course's group as the instructor's umask allows."""
    from measure.files import umask

    mask = umask()
    for p in [path, *(path.rglob("*") if path.is_dir() else [])]:
        os.chmod(p, (0o777 if p.is_dir() else 0o666) & ~mask)


def _replace_dir(src: Path, dest: Path):
    """Move ``src`` over ``dest``: the old copy is removed only once the new one is in place beside it.
    A staging folder that a killed process left beside ``dest`` goes first (one writer per learner)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    for stale in dest.parent.glob(f".{dest.name}.*"):
        shutil.rmtree(stale, ignore_errors=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    shutil.copytree(src, staging / "new")
    ordinary_modes(staging / "new")
    old = None
    if dest.exists():
        old = staging / "old"
        os.replace(dest, old)
    os.replace(staging / "new", dest)
    shutil.rmtree(staging, ignore_errors=True)


def _submission_records(submission) -> dict:
    ts = submission.timestamp
    return {"timestamp": ts.isoformat() if ts else None, "notebooks": {
        nb.name: {"grades": {g.name: g.auto_score for g in nb.grades},
                  "comments": {c.name: c.auto_comment for c in nb.comments},
                  "late_submission_penalty": nb.late_submission_penalty}
        for nb in submission.notebooks}}


def record(coursedir, outcome: dict, layout: dict[str, dict[str, str]]) -> dict[str, float]:
    """Write one graded submission into the course's gradebook; return {grade_id: points} recorded.

    Records as nbgrader autograde keeps them (student, submission, notebooks, a grade per grade cell, a
    comment per solution cell, late penalty), except that the auto_score of every hidden grading cell
    is the trusted one. The submission's time is ``nbgrader collect``'s timestamp.txt (read by
    ``grade_task`` whatever nbgrader made of the notebook). Manual scores already given stay (and flag
    the cell for review, as nbgrader does); so does every cell ``autograder.review`` flags (tampering,
    violations, a crash, a suspicious speedup; every cell of an unreadable notebook). The scores go in one
    commit; nbgrader commits a new submission before it, with no scores, which ``recorded`` does not count.
    """
    import warnings

    from nbgrader.api import Gradebook
    from sqlalchemy.exc import SAWarning

    from autograder.review import flags

    assignment, student = outcome["assignment"], outcome["student"]
    nbrec = outcome.get("nbgrader") or {}
    flagged = {(f["notebook"], f["exercise"]) for f in flags(outcome)}
    when = outcome.get("timestamp") or nbrec.get("timestamp")
    scores = {}
    # nbgrader's add_submission warns (SQLAlchemy 2) about its own relationship handling; harmless
    with warnings.catch_warnings(), Gradebook(coursedir.db_url, coursedir.course_id) as gb:
        warnings.simplefilter("ignore", SAWarning)
        gb.update_or_create_student(student)
        extra = {"timestamp": datetime.datetime.fromisoformat(when)} if when else {}
        submission = gb.update_or_create_submission(assignment, student, **extra)
        for nb in submission.notebooks:
            result = outcome["notebooks"].get(nb.name)
            kept = (nbrec.get("notebooks") or {}).get(nb.name)
            for grade in nb.grades:
                exercise = layout.get(nb.name, {}).get(grade.name)
                if exercise is not None:
                    grade.auto_score = trusted_points(result, exercise, grade.max_score)
                elif result is None:
                    grade.auto_score = 0.0  # notebook not submitted
                else:
                    grade.auto_score = (kept or {}).get("grades", {}).get(grade.name)
                review = (nb.name, None) in flagged or (nb.name, exercise) in flagged
                grade.needs_manual_grade = grade.manual_score is not None or grade.auto_score is None or review
                scores[grade.name] = grade.auto_score
            if kept:
                for comment in nb.comments:
                    comment.auto_comment = kept["comments"].get(comment.name)
                nb.late_submission_penalty = kept["late_submission_penalty"]
        gb.db.commit()
    return scores


def recorded(coursedir, assignment: str, student: str, layout: dict[str, dict[str, str]]) -> bool:
    """Whether the gradebook holds a submission of ``assignment`` by ``student`` whose every hidden grading
    cell of ``layout`` has its score. (nbgrader commits a new submission, with no scores, before ``record``
    writes them: a process killed in between leaves a submission that is not a grade, and the next run must
    record it again.)"""
    from nbgrader.api import Gradebook, MissingEntry

    if coursedir.db_url.startswith("sqlite:///") and not _sqlite_path(coursedir.db_url).exists():
        return False
    with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
        try:
            submission = gb.find_submission(assignment, student)
        except MissingEntry:
            return False
        return all(grade.auto_score is not None for nb in submission.notebooks for grade in nb.grades
                   if grade.name in layout.get(nb.name, {}))
