"""Everything the submission can import is the submission.

A submission's folder may hold other files (nbgrader's ``submitted/`` folders do), and a worker could reach
the repository's own folders (``tests/``, ``tools/``, ``kernels_ref/``). Two halves, one in each process:

- ``local_sources(source, folder)`` (grading process, once, when the submission is loaded): the files of the
  modules beside the submission that its source imports, and those they import in turn, with their text as
  read (UTF-8). Each text is audited like the submission (``autograder.grading.helper_violations``), so a
  helper module is judged as the learner's own code, and the worker is handed the same texts.
- ``ImportGuard`` (worker): a meta-path finder. A module whose file lies in the submission's folder runs
  exactly the text the audit read, compiled by the guard (``AuditedSource``): never a ``.pyc`` (a
  ``__pycache__`` entry is never consulted), never an extension module, never a file the audit did not read
  (one a changed ``sys.path`` or a package's ``__path__`` leads to), whoever asks for it. A module outside
  the installed packages, the course's own (``course``, ``measure``, ``autograder``) and the repository is
  refused too, whoever asks (a library's lazy import must not find a file the learner's code wrote and put
  on ``sys.path``). The repository's other folders (``tests/``, ``tools/``, ``kernels_ref/``) are refused
  to the learner's code (the submission's file, a module beside it, code it built); an import of them made
  by the grader's or a library's own code passes, except while the learner's code runs (its import and its
  calls): then every import is judged, whatever frame asks (a course function handed ``import_module``
  cannot launder one). Which code asked is read from the stack (the frame that runs the import statement).
"""
from __future__ import annotations

import ast
import codecs
import importlib.abc
import importlib.machinery
import linecache
import os
import re
import sys
import sysconfig
import threading
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
# The course's packages a learner's notebook imports (its helpers, timers and check()).
COURSE_PACKAGES = ("course", "measure", "autograder")
# The repository's folders that are never the learner's (nor importable by a worker).
NOT_LEARNERS = frozenset({"kernels_ref", "tests", "tools", "solutions", "notebooks", "results", *COURSE_PACKAGES})


def _imported_tops(source: str) -> set:
    from autograder.audit import parse

    try:
        tree = parse(source)
    except (SyntaxError, ValueError):
        return set()  # its audit says why it cannot be read
    tops = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            tops.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            tops.add(node.module.split(".")[0])
    return tops


def _module_files(folder: Path, name: str) -> list[Path]:
    # Python's order: a package (a folder with __init__.py) before a module file of the same name, and a
    # folder without one (a namespace package, PEP 420) only where no installed module has the name
    if (folder / name / "__init__.py").is_file():
        return sorted(p for p in (folder / name).rglob("*.py") if p.is_file())
    if (folder / f"{name}.py").is_file():
        return [folder / f"{name}.py"]
    if (folder / name).is_dir() and name.isidentifier() and not _installed_module(name):
        return sorted(p for p in (folder / name).rglob("*.py") if p.is_file())
    return []


def _installed_module(name: str) -> bool:
    """Whether ``name`` is a module of the standard library or the installed packages (found without the
    submission's folder, without importing it)."""
    import importlib.machinery

    if name in sys.builtin_module_names:
        return True
    paths = [p for p in sys.path if p and os.path.join(os.path.realpath(p), "").startswith(INSTALLED)]
    return importlib.machinery.PathFinder.find_spec(name, paths) is not None


def _repository_own(folder: Path, name: str) -> bool:
    """Whether ``import name`` from ``folder`` is the course's own: its packages and reference kernels
    anywhere, and the repository's own folders (tests, tools...) for a submission at the repository's root.
    A learner's helper module named like one of those folders (tools.py beside a notebook) is theirs."""
    if name in ("kernels_ref", *COURSE_PACKAGES):
        return True
    return name in NOT_LEARNERS and os.path.realpath(folder) == os.path.realpath(REPOSITORY)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None  # unreadable: its audit says so, and the worker refuses to import it


def local_sources(source: str, folder, written: dict | None = None) -> dict[str, str | None]:
    """{real path: text as read (UTF-8), None where unreadable} for every file of every module beside the
    submission that it imports, transitively: what is audited, and all the worker may import from there.
    ``written``: {file name: text} of the modules a notebook writes beside itself when it runs
    (``%%writefile``): their text, whether or not the file is on the disk, as after the notebook ran."""
    folder = Path(folder)
    written = written or {}
    names: set = set()
    found: dict[str, str | None] = {}
    todo = [source]
    while todo:
        for name in sorted(_imported_tops(todo.pop())):
            if name in names or _repository_own(folder, name):
                continue
            files = _module_files(folder, name)
            if f"{name}.py" in written and (not files or files == [folder / f"{name}.py"]):
                names.add(name)
                found[os.path.realpath(folder / f"{name}.py")] = written[f"{name}.py"]
                todo.append(written[f"{name}.py"])
                continue
            if not files:
                continue
            names.add(name)
            for path in files:
                found[os.path.realpath(path)] = text = _read(path)
                if text is not None:
                    todo.append(text)
    return found


# PEP 263: a coding declaration on line 1, or on line 2 under a comment or blank line 1
_CODING = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", re.ASCII)
_BLANK_OR_COMMENT = re.compile(r"^[ \t\f]*(?:#|$)")


def declared_encoding(text: str) -> tuple[int, str] | None:
    """(line, encoding) of the source's coding declaration, or None."""
    for number, line in enumerate(text.splitlines()[:2], start=1):
        match = _CODING.match(line)
        if match:
            return number, match.group(1)
        if not _BLANK_OR_COMMENT.match(line):
            return None
    return None


def encoding_problem(text: str) -> tuple[int, str] | None:
    """(line, reason) when Python would decode this file's bytes into other text than the UTF-8 the grader
    read and audited: a coding declaration naming a codec the grader does not have (one the submission
    registers itself) or one that decodes the file differently; None otherwise."""
    declared = declared_encoding(text)
    if declared is None:
        return None
    line, name = declared
    try:
        if text.encode("utf-8").decode(name) == text:
            return None  # utf-8 itself, or an ASCII file under latin-1: the same text either way
    except (LookupError, ValueError, TypeError):
        pass
    return line, (f"declares its source encoding as {name!r}: Python would decode the file with that codec, "
                  "not as the UTF-8 text the grader read and audited (save it as UTF-8 without the coding line)")


def _installed_roots() -> tuple[str, ...]:
    """Where the standard library and the installed packages live (torch and Triton wherever they are
    installed) and the course's own packages: code there is not the learner's. Each folder as Python names
    it and as it really is, ending in a separator."""
    import importlib.util
    import site

    paths = sysconfig.get_paths()
    roots = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    roots.update(site.getsitepackages())
    roots.update(p for p in sys.path if p and ("site-packages" in p or "dist-packages" in p))
    roots.update(os.path.dirname(importlib.util.find_spec(name).origin) for name in ("torch", "triton"))
    roots.update(str(REPOSITORY / p) for p in COURSE_PACKAGES)
    return tuple(sorted({os.path.join(real(r), "") for r in roots if r
                         for real in (os.path.abspath, os.path.realpath)}))


# Computed once, when the grader starts: before a submission's folder joins sys.path.
INSTALLED = _installed_roots()


class ImportRefused(ImportError):
    """An import of a module the learner's code may not use while graded."""


class AuditedSource(importlib.abc.Loader):
    """Runs a module beside the submission from the text the grader audited: compiled here from that text
    (a ``str``: a coding declaration cannot pick the codec), never read again from the disk, never from a
    ``.pyc``. The text is what ``linecache`` (so ``inspect`` and Triton, which read a kernel's source) sees."""

    def __init__(self, path: str, text: str):
        self.path, self.text = path, text

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        code = compile(self.text, self.path, "exec", dont_inherit=True)
        exec(code, module.__dict__)  # noqa: S102  (the audited text of the learner's module, as Python would run it)

    def get_source(self, fullname: str) -> str:
        return self.text

    def spec(self, name: str, found):
        spec = importlib.machinery.ModuleSpec(name, self, origin=self.path,
                                              is_package=found.submodule_search_locations is not None)
        if found.submodule_search_locations is not None:
            spec.submodule_search_locations = list(found.submodule_search_locations)
        spec.has_location = True  # __file__ is the file the text was read from
        seen(self.path, self.text)
        return spec


def seen(path: str, text: str) -> None:
    """Make ``text`` what ``linecache`` (inspect, tracebacks, Triton's kernel source) reads for ``path``: an
    entry without a modification time is never checked against the disk."""
    linecache.cache[path] = (len(text), None, text.splitlines(True), path)


class ImportGuard:
    """The worker's meta-path finder: see the module docstring."""

    def __init__(self, source_file: str, submission_dir: str, audited=None):
        self.source_file = os.path.realpath(source_file)
        self.folder = os.path.realpath(submission_dir) + os.sep
        # {real path: text}: the files beside the submission the grader audited (``local_sources``)
        self.audited = {os.path.realpath(p): t for p, t in (audited or {}).items() if t is not None}
        self.libraries = INSTALLED
        paths = sysconfig.get_paths()
        self.stdlib = tuple(os.path.realpath(paths[k]) + os.sep for k in ("stdlib", "platstdlib") if k in paths)
        self.grader = tuple(str(REPOSITORY / p) + os.sep for p in COURSE_PACKAGES)
        # the repository's own folders, unless the submission lies inside one (tests/submissions/)
        self.repository = tuple(d for d in (str(REPOSITORY / p) + os.sep for p in sorted(NOT_LEARNERS))
                                if not self.folder.startswith(d))
        self.refused: list[str] = []

    def install(self, position: int = 0):
        sys.meta_path.insert(position, self)
        return self

    def _asked_by_learner(self) -> bool:
        """Whether the import comes from anything but the grader's own code: the nearest frame outside the
        standard library's import machinery (importlib.import_module, pkgutil) is not in the course's
        packages (the submission's file, a module beside it, code it built, a library it called)."""
        frame = sys._getframe(1)
        while frame is not None:
            name = frame.f_code.co_filename
            if not (name.startswith("<frozen") or name == __file__ or os.path.realpath(name).startswith(self.stdlib)):
                break
            frame = frame.f_back
        if frame is None:
            return False
        real = os.path.realpath(frame.f_code.co_filename)
        if real == self.source_file or real.startswith(self.folder):
            return True
        return not real.startswith(self.grader)

    @staticmethod
    def _learner_code_runs() -> bool:
        """Whether this thread is inside the submission's import or one of its calls (the span the worker
        arms ``legality.ThreadGuard`` for; the grader's own imports happen before or outside it)."""
        legality = sys.modules.get("autograder.legality")
        return legality is not None and legality.ThreadGuard.armed == threading.get_ident()

    def find_spec(self, name, path=None, target=None):
        written = os.path.join(self.folder, f"{name}.py")
        if "." not in name and written in self.audited and not os.path.exists(written):
            # a module the notebook writes beside itself when it runs (%%writefile): found there first
            return AuditedSource(written, self.audited[written]).spec(
                name, importlib.machinery.ModuleSpec(name, None, origin=written))
        spec = None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        if spec is None:
            return None  # not found anywhere: the usual ModuleNotFoundError follows
        where = [spec.origin] if spec.origin and spec.has_location else list(spec.submodule_search_locations or [])
        if not where:
            return spec  # built-in or frozen
        places = [os.path.realpath(w) for w in where]
        if places[0] in self.audited and spec.origin and spec.has_location:
            return AuditedSource(places[0], self.audited[places[0]]).spec(name, spec)
        if spec.origin is None and all(any(a.startswith(p + os.sep) for a in self.audited) for p in places):
            return spec  # a namespace package of audited modules (holds no code: each module is judged itself)
        reason = self._why_not(name, places)
        if reason is None:
            return spec
        self.refused.append(name)
        raise ImportRefused(f"import {name}: {reason}")

    def _why_not(self, name: str, places: list[str]) -> str | None:
        """Why the module at ``places`` (not an audited file) may not be imported here, or None."""
        top = name.split(".")[0]
        if all(p.startswith(self.libraries) for p in places):
            return None
        beside = [p for p in places if p.startswith(self.folder) and not p.startswith(self.repository)]
        if beside:  # whoever asks: a library's lazy import must not run an unaudited file of the learner's
            return self._not_audited(beside[0])
        learners = self._learner_code_runs() or self._asked_by_learner()
        if all(p.startswith(str(REPOSITORY) + os.sep) for p in places):
            if not learners:
                return None  # the grader's own import of its repository
            return (f"{top} is part of the course's repository (its tests, tools or reference kernels), not an "
                    "installed package: graded code is your own")
        return f"{top} is not an installed package (found at {places[0]}): graded code may import installed packages only"

    def _not_audited(self, place: str) -> str:
        """The reason a file in the submission's folder that the audit did not read is refused, by what it is."""
        where = os.path.relpath(place, self.folder)
        if place.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)):
            return (f"{where} is a compiled extension module: graded code runs only Python source the grader "
                    "has read and audited")
        if place.endswith(tuple(importlib.machinery.BYTECODE_SUFFIXES)):
            return (f"{where} is compiled bytecode (.pyc): graded code runs only Python source the grader has "
                    "read and audited (submit the .py it was compiled from)")
        if os.path.isdir(place):
            return (f"{where} is a folder without an __init__.py: the grader audits packages (folders with an "
                    "__init__.py) and modules beside the submission that it imports by name")
        return (f"{where} is a file beside the submission that the grader did not audit (only modules the "
                "submission imports by name, with an import statement, from its own folder, are audited and may "
                "be imported; an import that sys.path or a package's __path__ sends elsewhere is refused)")
