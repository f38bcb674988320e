"""Everything the submission can import is the submission.

A submission's folder may hold other files (nbgrader's ``submitted/`` folders do), and a worker could reach
the repository's own folders (``tests/``, ``tools/``, ``kernels_ref/``). Two halves, one in each process:

- ``local_modules(source, folder)`` (grading process): the modules beside the submission that its source
  imports, and those they import in turn, as ``{name: [files]}``. Each file is audited like the submission
  (``autograder.grading.static_violations``), so a helper module is judged as the learner's own code.
- ``ImportGuard`` (worker): a meta-path finder that refuses every import the learner's code asks for
  (the submission's file, a module beside it, code it built) of a module outside the installed packages
  and the course's own (``course``, ``measure``, ``autograder``), unless it is one of the audited modules
  beside the submission. An import made by the grader's or a library's own code is not the learner's and
  passes, except while the learner's code runs (its import and its calls): then every import is judged,
  whatever frame asks (a course function handed ``import_module`` cannot launder one). Which code asked is
  read from the stack (the frame that runs the import statement).
"""
from __future__ import annotations

import ast
import os
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

    tops = set()
    for node in ast.walk(parse(source)):
        if isinstance(node, ast.Import):
            tops.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            tops.add(node.module.split(".")[0])
    return tops


def _module_files(folder: Path, name: str) -> list[Path]:
    if (folder / f"{name}.py").is_file():
        return [folder / f"{name}.py"]
    if (folder / name / "__init__.py").is_file():
        return sorted(p for p in (folder / name).rglob("*.py") if p.is_file())
    return []


def local_modules(source: str, folder) -> dict[str, list[Path]]:
    """{module name: its files} for every module beside the submission that it imports, transitively."""
    folder = Path(folder)
    found: dict[str, list[Path]] = {}
    todo = [source]
    while todo:
        for name in sorted(_imported_tops(todo.pop())):
            if name in found or name in NOT_LEARNERS:
                continue
            files = _module_files(folder, name)
            if not files:
                continue
            found[name] = files
            for f in files:
                try:
                    todo.append(f.read_text(encoding="utf-8"))
                except (OSError, UnicodeDecodeError):
                    pass  # unreadable: its audit says so
    return found


def _library_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    roots.update(p for p in sys.path if p and ("site-packages" in p or "dist-packages" in p))
    roots.update(str(REPOSITORY / p) for p in COURSE_PACKAGES)
    return tuple(os.path.realpath(r) + os.sep for r in roots if r)


class ImportRefused(ImportError):
    """An import of a module the learner's code may not use while graded."""


class ImportGuard:
    """The worker's meta-path finder: see the module docstring."""

    def __init__(self, source_file: str, submission_dir: str, allowed_local=()):
        self.source_file = os.path.realpath(source_file)
        self.folder = os.path.realpath(submission_dir) + os.sep
        self.allowed_local = frozenset(allowed_local)
        self.libraries = _library_roots()
        paths = sysconfig.get_paths()
        self.stdlib = tuple(os.path.realpath(paths[k]) + os.sep for k in ("stdlib", "platstdlib") if k in paths)
        self.grader = tuple(str(REPOSITORY / p) + os.sep for p in COURSE_PACKAGES)
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
        if not (self._learner_code_runs() or self._asked_by_learner()):
            return None
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
        reason = self._why_not(name, [os.path.realpath(w) for w in where])
        if reason is None:
            return spec
        self.refused.append(name)
        raise ImportRefused(f"import {name}: {reason}")

    def _why_not(self, name: str, places: list[str]) -> str | None:
        top = name.split(".")[0]
        if all(p.startswith(self.folder) for p in places):
            if top in self.allowed_local:
                return None
            return (f"{top} is a file beside the submission that the grader did not audit (only modules the "
                    "submission imports by name, with an import statement, are audited and may be imported)")
        if all(p.startswith(self.libraries) for p in places):
            return None
        if all(p.startswith(str(REPOSITORY) + os.sep) for p in places):
            return (f"{top} is part of the course's repository (its tests, tools or reference kernels), not an "
                    "installed package: graded code is your own")
        return f"{top} is not an installed package (found at {places[0]}): graded code may import installed packages only"
