"""What the worker refuses at run time, whoever spelled it and however it was reached (PEP 578 audit hooks).

The static audit reads what the source names; a module reached as another one's attribute, a string run by
a library, a file loaded without the import system or a library that starts a process on request are seen
here instead, where they happen: CPython raises an audit event for each, and a hook added with
``sys.addaudithook`` cannot be removed by the code that runs after it. ``install(audited)`` adds the hook
once, in the worker, before the submission is imported; from then on, for the life of the process (the
submission's import, its calls, and finalizers those calls leave behind, whenever they run):

- starting a process (``os.fork``, ``forkpty``, ``posix_spawn``, ``exec*``, ``system``,
  ``subprocess.Popen``) is refused unless Triton runs its compilers and tools (ptxas, the launcher's C
  compiler, during a first launch on a GPU) at the sites that run them, for work it drives itself, or the
  course's ``ptxas_usage`` runs ptxas (``_compiler_site``: torch's helpers and Triton's test runner run
  whatever command they are handed), or an installed library asks while it is being imported (its own
  set-up, before any code of the learner's runs) or runs a command of its own choosing
  (``_library_own_command``); and the process is non-dumpable, so that no other process of the user can
  open its memory;
- running code (``exec``, ``eval``, ``compile``, a code object made or unmarshalled by the learner's code)
  is refused unless it is a file the grader audited or an installed module's file, or code torch, Triton or
  the course build for themselves (FX graphs, Triton's launch binder; the stdlib's dataclasses and
  namedtuples), or a library builds while it is imported; a file beside the submission that the audit never
  read, a string handed to ``timeit`` (torch's Timer included) but a literal the audit read as a statement,
  ``typing.get_type_hints`` or any library
  that evaluates text (sympy's ``parse_expr``, PyYAML's python tags), and the learner's own ``exec`` are
  refused;
- a write to the environment that changes it (one that leaves it as it was changes nothing);
- unpickling anything that names a global (``pickle``, ``torch.load(weights_only=False)``), loading native
  code or touching raw memory through ``ctypes`` (unless a library or the grader asks), opening a process's memory
  (``/proc/self/mem``, ``/proc/<pid>/mem``, ``pagemap``, ``/dev/mem``), importing a module the audit
  forbids (``autograder.audit.FORBIDDEN_MODULES``) from the learner's code, and adding another audit hook.

Who asks is read from the stack (as ``autograder.legality`` reads it for operators): the first frame outside
the standard library and Python's import machinery decides; installed code is what ``autograder.imports.
INSTALLED`` names. A refusal raises ``RunTimeRefused`` where the operation was asked for and is recorded:
in the operator recorder of the call that runs (``legality.judge`` turns it into a violation naming the
line), or, when no recorded call runs (the import, a finalizer), in the next recorded call; one that a
library caught and recovered from before the learner's code saw it is recorded as a note
(``charge_pending``).
"""
from __future__ import annotations

import ast
import collections
import dataclasses
import functools
import os
import re
import site
import sys
import sysconfig
import threading
import timeit
import types
import importlib.util

from autograder.imports import INSTALLED, REPOSITORY
# a refusal is recorded as one of these prefixes, a colon and what was refused
from autograder.legality import RECOVERED, REFUSED


class RunTimeRefused(PermissionError):
    """An operation graded code may not perform, refused by the worker's audit hook."""


_PROCESS = {"os.fork": "starts a process (os.fork)", "os.forkpty": "starts a process (os.forkpty)",
            "os.posix_spawn": "starts a process (os.posix_spawn)", "os.exec": "replaces the process (os.exec*)",
            "os.spawn": "starts a process (os.spawn*)", "os.system": "runs a shell command (os.system)",
            "subprocess.Popen": "starts a process (subprocess)"}
_CTYPES_WHY = "calls native code or reads raw memory through ctypes"
_WHY = {
    "process": "the grader sees only what runs in this process, under its recorder",
    "code": "code built or loaded at run time is code the grader never read: graded code runs only the "
            "source the grader audited",
    "pickle": "unpickling runs whatever the data names (code the grader never read)",
    "ctypes": "native code and raw memory are outside everything the grader can see",
    "memory": "reading the process's memory by address takes values out of torch where nothing records it",
    "import": "the audit forbids this module in graded code",
    "hook": "audit hooks are the grader's",
    "tracer": "Python calls a trace or profile function on every call, the grader's own calls too (inside its "
              "operator recorder, where torch's modes are off): graded code runs its own functions, not code "
              "the interpreter calls from everywhere",
    "descriptor": "the worker answers the grader through a descriptor it inherited: graded code opens files by "
                  "their paths, never a descriptor it did not open",
    "socket": "graded code computes and returns; the worker alone talks to the grader",
    "environment": "the grader's process runs with the environment it was given (Triton's and torch's "
                   "settings, the commands libraries run): a write that leaves it as it was is fine",
    "shadow": "torch and the grader call a tensor's methods on it (its storage, copy_, numel...), outside your "
              "code and outside every recorder: an attribute of the tensor itself named as one of its methods "
              "would run your Python there; give your own objects attributes, not torch's tensors",
    "modes": "the grader's operator recorder and memory meter are modes on torch's mode stacks, which graded "
             "code may not read, change or switch off",
    "objects": "it reaches live objects and frames, the grader's among them",
    "resolver": "a dotted name given as a string reaches any module and attribute, past the import "
                "statements the audit reads (the grader's own modules, numpy and the forbidden ones among them)",
    "dispatch": "an operator's kernel called at dispatch keys of the caller's choosing runs below the Python "
                "key, where the grader's operator recorder and memory meter sit: call operators as torch "
                "functions, tensor methods or torch.ops.aten.<name>(...)",
    "patching": "a library's module is shared with Triton, torch and the grader: graded code may not change "
                "what it holds (a Triton function a kernel calls, a torch function)",
}
# /proc/<pid or self>/(task/<tid>/)mem, pagemap, map_files: another way to read memory by address
_PROCESS_MEMORY = re.compile(r"^/proc/(?:self|thread-self|\d+)(?:/task/\d+)?/(?:mem|pagemap|map_files(?:/.*)?)$"
                             r"|^/dev/(?:k?mem|port)$")


def _dirs(*paths) -> tuple[str, ...]:
    return tuple(sorted({os.path.join(os.path.realpath(p), "") for p in paths if p}))


def _package_dir(name: str) -> str:
    import importlib.util

    return os.path.join(os.path.dirname(os.path.realpath(importlib.util.find_spec(name).origin)), "")


_paths = sysconfig.get_paths()
_SITE = _dirs(*(_paths.get(k) for k in ("purelib", "platlib")), *site.getsitepackages(),
              *(p for p in sys.path if p and ("site-packages" in p or "dist-packages" in p)))
_STDLIB = _dirs(*(_paths.get(k) for k in ("stdlib", "platstdlib")))
# The standard library's class builders: the text they compile is made from identifiers they check
# (field names), never from a string the caller hands over.
_BUILDERS = frozenset(os.path.realpath(module.__file__) for module in (dataclasses, collections))
_AST = os.path.realpath(ast.__file__)  # ast.parse compiles to a tree only
_TIMEIT_FILE = os.path.realpath(timeit.__file__)
_GRADER = os.path.join(str(REPOSITORY), "autograder", "")
_TRITON = _package_dir("triton")
_COURSE = os.path.join(str(REPOSITORY), "course", "")
_COMPILERS = (_TRITON, _COURSE)
# what may run text it builds itself (FX graphs, Triton's launch binder): the compilers, and torch
_TOOLCHAINS = (_package_dir("torch"), *_COMPILERS)
# Where a process may start: the functions in which Triton runs its compilers and tools (file -> functions),
# and the course's tool that runs Triton's ptxas on a kernel (its command fixed). Not torch, whose helpers
# run whatever command they are handed (collect_env.run), nor any other function of Triton's (its test
# runner runs any command): a process is judged by the site that starts it, not by the package it lies in.
_TRITON_SITES = {os.path.join(_TRITON, *path.split("/")): frozenset(functions) for path, functions in {
    "runtime/build.py": ("_build",                                            # the launcher's C compiler
                         "platform_key"),  # platform.architecture(): `file -b python` (the cache key)
    "backends/nvidia/compiler.py": ("make_cubin", "get_ptxas_version"),       # ptxas
    "backends/nvidia/driver.py": ("libcuda_dirs",),                           # ldconfig -p, to find libcuda
    "knobs.py": ("from_path",),                                               # a CUDA tool's --version
}.items()}
_COURSE_SITES = {os.path.join(_COURSE, "aot.py"): frozenset({"ptxas_usage"})}
_BUILD = os.path.join(_TRITON, "runtime", "build.py")

LEARNER, GRADER, LIBRARY = "learner", "grader", "library"
_REAL: dict[str, str] = {}


def _real(filename: str) -> str:
    real = _REAL.get(filename)
    if real is None:
        real = _REAL[filename] = os.path.realpath(filename)
    return real


def _is_stdlib(real: str) -> bool:
    return real.startswith(_STDLIB) and not real.startswith(_SITE)


def _whose(frame) -> tuple[str | None, str | None]:
    """(who, file) for one frame: None for the standard library and the import machinery (how a thing is
    done, not who asks), but for its class builders; else the grader's own code, an installed library
    (``file`` is its real path), or anything else, the learner's (its file, a module beside it, code built at
    run time)."""
    name = frame.f_code.co_filename
    if name.startswith("<frozen"):
        return None, None
    if name.startswith("<"):
        return LEARNER, None  # code built at run time
    real = _real(name)
    if real in _BUILDERS:
        return LIBRARY, real
    if _is_stdlib(real):
        return None, real
    if real.startswith(_GRADER):
        return GRADER, real
    return (LIBRARY if real.startswith(INSTALLED) else LEARNER), real


def asker(frame) -> tuple[str, str | None]:
    """(who, file) for the code that asked for an operation, from the frame that made the call outwards: the
    first frame that is not the standard library's (``_whose``) decides."""
    while frame is not None:
        who, real = _whose(frame)
        if who is not None:
            return who, real
        frame = frame.f_back
    return GRADER, None  # nothing but the standard library: the worker's own start


def reached_learner(exc: BaseException) -> bool:
    """Whether a refusal's exception passed through the learner's code on its way out (its traceback runs
    from the frame that caught it, or the outermost it left, down to the refusal). One that the standard
    library or an installed library caught and recovered from (``platform`` asks ``uname -p`` and carries
    on without it) never reached the learner: nothing ran, and no code of the learner's saw it refused. One
    that never left the hook (the interpreter dropped it: ``sys.addaudithook``) is charged to who asked."""
    tb, caught_by_library = exc.__traceback__, False
    while tb is not None:
        who = _whose(tb.tb_frame)[0]
        if who == LEARNER:
            return True
        caught_by_library = caught_by_library or who != GRADER
        tb = tb.tb_next
    return not caught_by_library


def _library_own_command(frame) -> bool:
    """Whether an installed library starts a process of its own choosing (PyTorch's ``collect_env`` asks
    ``nvidia-smi`` and ``pip`` what is installed): the library function the learner's code called was
    handed nothing a command could be made of, only plain numbers, flags and installed functions (its
    ``run(command)`` handed the learner's command, a partial or an object holding one is the learner's
    choice)."""
    entry = None
    while frame is not None:
        who, _ = _whose(frame)
        if who == LEARNER:
            break
        if who == GRADER:
            return False
        if who == LIBRARY:
            entry = frame
        frame = frame.f_back
    if entry is None:
        return False
    from autograder import text_origin

    return all(_chooses_nothing(value) for value in text_origin._arguments(entry))


def _chooses_nothing(value) -> bool:
    """A value that cannot carry a command: None, a number or flag, an installed library's own function."""
    if value is None or type(value) in (bool, int, float):
        return True
    if type(value) in (tuple, dict) and not value:  # an empty *args or **kwargs
        return True
    from autograder import text_origin

    code = getattr(value, "__code__", None)
    return type(value).__name__ == "function" and code is not None and text_origin._installed_file(code.co_filename)


def _outside_stdlib(frame):
    """The frames outward from ``frame`` that are neither the standard library nor the import machinery."""
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith("<frozen") and (name.startswith("<") or not _is_stdlib(_real(name))):
            yield frame
        frame = frame.f_back


def _compiler_site(frame) -> bool:
    """Whether a process is started where Triton runs its compilers and tools (``_TRITON_SITES``) for work
    Triton drives itself, so that Triton chose the command and its arguments: the code outside Triton entered
    it elsewhere than at the site (a kernel's launch, ``triton.compile``, the driver's start, a tool's path
    read from ``knobs``) and elsewhere than ``triton.runtime.build``, which compiles whatever C file it is
    handed. Or the course's ``ptxas_usage``, which runs Triton's ptxas with arguments of its own."""
    frames = _outside_stdlib(frame)
    site = next(frames, None)
    if site is None or site.f_code.co_filename.startswith("<"):
        return False
    real = _real(site.f_code.co_filename)
    if site.f_code.co_name in _COURSE_SITES.get(real, ()):
        return True
    if site.f_code.co_name not in _TRITON_SITES.get(real, ()):
        return False
    entry = site
    for outer in frames:
        name = outer.f_code.co_filename
        if name.startswith("<") or not _real(name).startswith(_TRITON):
            break
        entry = outer
    return entry is not site and _real(entry.f_code.co_filename) != _BUILD


def _library_importing(frame) -> bool:
    """Whether an installed library's own import runs this (matplotlib asking fontconfig for its fonts while
    ``import matplotlib.pyplot`` runs): its module body is met before any code of the learner's."""
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith("<frozen"):
            if name.startswith("<"):
                return False
            real = _real(name)
            if not _is_stdlib(real):
                if not real.startswith(INSTALLED) or real.startswith(_GRADER):
                    return False
                if frame.f_code.co_name == "<module>":
                    return True
        frame = frame.f_back
    return False


class _Still:
    """A frame and its callers as they stood when a refusal was made: a frame that has returned since reports
    the last line it ran (a module's last line), not the line that asked."""
    __slots__ = ("f_code", "f_lineno", "f_back")

    @classmethod
    def of(cls, frame):
        head = still = None
        while frame is not None:
            link = cls()
            link.f_code, link.f_lineno, link.f_back = frame.f_code, frame.f_lineno, None
            if still is None:
                head = link
            else:
                still.f_back = link
            still, frame = link, frame.f_back
        return head


class _Hook:
    """The worker's audit hook: see the module docstring."""

    def __init__(self, audited, tensors: bool = True):
        self.audited = frozenset(os.path.realpath(p) for p in audited)
        self.tensors = tensors  # an exercise judged on tensors (not 00's and 02's measurements)
        self.pending: list = []   # (what, frame, exception) refused: charged by charge_pending
        # the audited literal statements, (their statements' dumps, their names), read before any code of the
        # learner's runs (reading them imports what the audit resolves)
        self._literals = _literal_statements(self.audited)
        self.trees = {}  # path -> the audited file's tree, parsed before the hook judges compiling
        for path in self.audited:
            try:
                with open(path, encoding="utf-8") as fh:
                    self.trees[path] = ast.parse(fh.read())
            except (OSError, SyntaxError, ValueError, UnicodeError):
                continue
        self.busy = threading.local()
        # read once, before any code of the learner's runs (which may not choose where the grader writes)
        self.explain = os.environ.get("AUTOGRADER_EXPLAIN_REFUSALS")

    def __call__(self, event, args):
        if event not in _EVENTS or getattr(self.busy, "on", False):
            return
        self.busy.on = True  # what the judging itself does (realpath, imports) is not judged
        try:
            refused = _EVENTS[event](self, event, args, sys._getframe(1))
        finally:
            self.busy.on = False
        if refused:  # judged once it has finished its way out (``charge_pending``): who saw it refused
            if self.explain:
                _explain(self.explain, event, args, refused[0])
            refuse(*refused, sys._getframe(1))

    def charge_pending(self, recorder) -> None:
        """Record the refusals made since the last time (the import, a finalizer, an unrecorded call, the
        call that just ran) in ``recorder``. A refusal the learner's code saw (it failed the call, or the
        learner's code caught it) costs the points: the learner's code asked for it. One that a library
        caught and recovered from before any code of the learner's saw it costs nothing (``RECOVERED``, a
        note): the operation never ran, so nothing it could have done reached the grade, and the library, not
        the learner, chose to try it (``platform.platform()`` asking ``uname -p``)."""
        pending, self.pending = self.pending, []
        for what, frame, exc in pending:
            recorder.note(f"{REFUSED if reached_learner(exc) else RECOVERED}:{what}", frame)

    # -- the rules, one per kind of event: (what, why) when refused, None when allowed
    def _process(self, event, args, frame):
        who, real = asker(frame)
        if _compiler_site(frame) or (who == LIBRARY and (_library_importing(frame) or _library_own_command(frame))):
            return None
        return _PROCESS[event], "process"

    def _code(self, event, args, frame):
        if event == "exec":
            code = args[0]
            filename = getattr(code, "co_filename", None)
        else:
            filename = args[1] if len(args) > 1 else None
        if filename == "<timeit-src>":  # timeit's template: around a function, or holding a statement's text
            if _timeit_template(event, args) or self._audited_statements(event, args):
                return None
            if self.tensors:  # a measuring exercise may time a statement with torch's Timer (strings only)
                return "runs a statement given to timeit as a string (timeit or torch.utils.benchmark)", "code"
            why = _timeit_statement(frame)
            if why is None:
                return None
            return f"runs a statement given to timeit as a string that {why}", "code"
        if isinstance(filename, bytes):
            filename = os.fsdecode(filename)
        if isinstance(filename, str) and not filename.startswith("<"):
            real = _real(filename)
            if real in self.audited:
                return None
            if real.startswith(INSTALLED):  # an installed module's own code, when something imports it
                top = _module_top(real)
                if top in _forbidden() and event == "exec" and asker(frame)[0] == LEARNER:
                    return f"imports {top}", "import"
                return None
            return f"runs the file {filename}, which the grader did not audit", "code"
        # Text is run for torch, Triton and the course when they wrote it themselves (FX graphs, Triton's
        # launchers, dynamo's guards: ``_toolchain_text``) and for a library while it is imported; a library
        # that evaluates the text it is handed (sympy's parse_expr, PyYAML's python tags, torch's ShapeEnv)
        # runs it for whoever handed it over, the learner's code too when torch's tree_map does the handing.
        who, real = asker(frame)
        if who == LIBRARY and real.startswith(_TOOLCHAINS):
            why = _toolchain_text(event, args, frame)
            if why is None:
                return None
            return f"runs code built at run time from text that is not the library's own ({why})", "code"
        if who == LIBRARY and (real in _BUILDERS or _library_importing(frame)):
            return None
        return f"runs code built at run time ({'exec/eval' if event == 'exec' else 'compile'})", "code"

    def _audited_statements(self, event, args) -> bool:
        """Whether timeit compiles or runs nothing but statements the audit read as code: the string literals
        the audited files hand to a statement runner (``timeit.timeit("softmax(x)", globals=globals())``,
        torch's ``Timer(stmt="softmax(x)")``), alone or in timeit's template."""
        dumps, names = self._literals
        if not dumps:
            return False
        if event == "exec":
            return hasattr(args[0], "co_names") and _names(args[0]) <= names
        source = args[0].decode("utf-8", "replace") if isinstance(args[0], bytes) else args[0]
        try:
            body = ast.parse(source).body if isinstance(source, str) else None
        except SyntaxError:
            return False
        if body and len(body) == 1 and isinstance(body[0], ast.FunctionDef) and body[0].name == "inner":
            if ast.dump(body[0].args) != _TEMPLATE_ARGS:
                return False
            body = body[0].body
        return body is not None and _only(body, dumps)

    def _code_object(self, event, args, frame):
        """A code object made by hand (``CodeType``, ``code.replace``) or loaded from bytes (``marshal``): the
        import system's own bytecode loading excepted, whose module is then judged as the file it came from."""
        if frame is not None and frame.f_code.co_filename.startswith("<frozen importlib"):
            return None
        if asker(frame)[0] == LEARNER:
            return f"makes a code object at run time ({event})", "code"
        return None

    def _pickle(self, event, args, frame):
        module, name = (list(args) + [None, None])[:2]
        return f"unpickles data that names {module}.{name}", "pickle"

    def _ctypes(self, event, args, frame):
        if asker(frame)[0] != LEARNER:
            return None  # torch's, Triton's, the grader's own (its frames read sockets into storages)
        return f"{_CTYPES_WHY} ({event})", "ctypes"

    def _open(self, event, args, frame):
        path = args[0] if args else None
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if isinstance(path, int) and path in PROTECTED_DESCRIPTORS:
            return f"opens the descriptor {path} as a file (the worker's channel to the grader)", "descriptor"
        if not isinstance(path, str):
            return None  # a descriptor opened by a library (by a path judged then), or a standard stream
        if _PROCESS_MEMORY.match(os.path.normpath(path)) or _PROCESS_MEMORY.match(os.path.realpath(path)):
            return f"opens {path} (the process's memory)", "memory"
        return None

    def _socket(self, event, args, frame):
        if asker(frame)[0] != LEARNER:
            return None  # a library's own (Dask's, Jupyter's in the learner's kernel are not graded code)
        return f"makes or uses a socket ({event}): graded code talks to nothing, the grader's channel included", "socket"

    def _import(self, event, args, frame):
        top = str(args[0]).split(".")[0] if args else ""
        if top in _forbidden() and asker(frame)[0] == LEARNER:
            return f"imports {args[0]}", "import"
        return None

    def _environment(self, event, args, frame):
        """A learner's write to the environment that changes it (``os.environ[k] = v``, ``del``, ``putenv``);
        one that leaves a variable as it was (``setdefault`` of a set variable, the value it holds) changes
        nothing. A library's own settings (collect_env turns pip's version check off) are its business, and so
        is a debugging aid the grade does not depend on (``DEBUG_AIDS``: ``CUDA_LAUNCH_BLOCKING=1``, PyTorch's
        advice for locating a CUDA error, makes launches wait for their kernels: slower, never different)."""
        if asker(frame)[0] != LEARNER:
            return None
        key, value = (list(args) + [None, None])[:2]
        key = os.fsdecode(key) if isinstance(key, bytes) else key
        value = os.fsdecode(value) if isinstance(value, bytes) else value
        now = os.environ.get(key) if isinstance(key, str) else None
        if event == "os.putenv" and now == value or event == "os.unsetenv" and now is None:
            return None
        if event == "os.putenv" and type(key) is str and type(value) is str and value in DEBUG_AIDS.get(key, ()):
            return None
        return f"changes the environment variable {key} ({now!r} -> {value!r})", "environment"

    def _hook(self, event, args, frame):
        return ("adds an audit hook", "hook") if asker(frame)[0] != GRADER else None

    def _tracer(self, event, args, frame):
        # The learner's code (through the standard library too: bdb's set_trace, profile.Profile's runcall)
        # may not install one: it is called inside the recorder's handlers, where torch's modes are off, at the
        # very call of a handler (before anything the handler does), and a profile function, the recorder's
        # watch, is silent while a trace function runs. The grader's recorder sets its own; a library's
        # profiler (torch.profiler's stacks, a measuring exercise's) calls no code of the learner's.
        if frame.f_code.co_filename.startswith(_GRADER):
            return None  # the recorder's own (a few times an operator): known at once
        return (f"installs a {'trace' if event == 'sys.settrace' else 'profile'} function ({event})", "tracer") \
            if asker(frame)[0] == LEARNER else None


def _timeit_statement(frame) -> str | None:
    """In a measuring exercise: what in the statements ``timeit.Timer`` compiles goes beyond calling what its
    globals hold (``autograder.text_origin.statement_problem``), or None."""
    from autograder import text_origin
    from autograder.imports import NOT_LEARNERS

    if frame is None or frame.f_code.co_name != "__init__" or _real(frame.f_code.co_filename) != _TIMEIT_FILE:
        return "is not compiled by timeit.Timer"
    local = frame.f_locals
    refused = {*_forbidden(), *NOT_LEARNERS}
    namespace = local.get("globals")
    for text in (local.get("stmt"), local.get("setup")):
        if type(text) is str:
            text = text.replace("\n" + " " * 8, "\n")  # as handed over: timeit indents its lines into the template
        why = text_origin.statement_problem(text, namespace if type(namespace) is dict else None, refused)
        if why is not None:
            return why
    return None


def _explain(target: str, event, args, what) -> None:
    """For the course's developers, where a refusal is not understood (a library's new version, a GPU-only
    path): AUTOGRADER_EXPLAIN_REFUSALS=FILE, set when the worker starts, appends each refused event, its
    arguments and the stack to FILE (the sandbox must let the worker write there, e.g.
    AUTOGRADER_SANDBOX=off). Never set when grading."""
    import traceback

    with open(target, "a") as out:
        out.write(f"=== {event}: {what}\n{repr(args)[:3000]}\n{''.join(traceback.format_stack(sys._getframe(2)))}\n")


def _toolchain_text(event, args, frame) -> str | None:
    """Why text that torch, Triton or the course compile or run is not their own (``autograder.text_origin``),
    or None: an annotation read as a type, and ``ast.parse`` (a tree, never run), are nobody's code."""
    from autograder import text_origin

    source = args[0] if event == "compile" and args else None
    if frame is not None and frame.f_code.co_name == "parse" and _real(frame.f_code.co_filename) == _AST:
        return None
    if isinstance(source, ast.AST):
        source = ast.unparse(source)
    elif isinstance(source, bytes):
        source = source.decode("utf-8", "replace")
    if isinstance(source, str) and text_origin.type_expression(source):
        return None
    return text_origin.chosen_by_learner(frame, source if isinstance(source, str) else None)


def _forbidden() -> dict:
    from autograder.audit import FORBIDDEN_MODULES

    return FORBIDDEN_MODULES


def _module_top(real: str) -> str:
    """The top-level module an installed file belongs to (``.../python3.11/pickle.py`` -> ``pickle``)."""
    for root in sorted(_SITE + _STDLIB, key=len, reverse=True):
        if real.startswith(root):
            first = real[len(root):].split(os.sep)[0]
            return first.split(".")[0]
    return ""


def _names(code) -> set:
    names, todo = set(), [code]
    while todo:
        c = todo.pop()
        names.update(c.co_names, c.co_varnames)
        todo.extend(k for k in c.co_consts if hasattr(k, "co_names"))
    return names


_TIMEIT: tuple | None = None
_TEMPLATE_ARGS = "arguments(posonlyargs=[], args=[arg(arg='_it'), arg(arg='_timer')], kwonlyargs=[], kw_defaults=[], defaults=[])"
# timeit's own lines around the statements (its loop is looked into)
_TEMPLATE_LINES = frozenset(ast.dump(s) for s in ast.parse("_t0 = _timer()\npass\n_t1 = _timer()\nreturn _t1 - _t0").body)


def _only(body, dumps) -> bool:
    """Whether every statement of ``body`` is one of the audited ones or timeit's own (its loop looked into)."""
    for s in body:
        if isinstance(s, ast.For) and ast.dump(s.target) == ast.dump(ast.Name("_i", ast.Store())) \
                and ast.dump(s.iter) == ast.dump(ast.Name("_it", ast.Load())) and not s.orelse:
            if not _only(s.body, dumps):
                return False
        elif ast.dump(s) not in dumps and ast.dump(s) not in _TEMPLATE_LINES:
            return False
    return True


def _literal_statements(paths) -> tuple[frozenset, frozenset]:
    """(dumps of each statement, every name they use) of the literal statements the audited files hand to
    a statement runner (``autograder.audit.literal_statements``)."""
    from autograder.audit import literal_statements

    import textwrap

    dumps, names = set(), set()
    for path in paths:
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
            # a statement runner is named in the source (timeit, torch's Timer): else there is none to read
            texts = literal_statements(text) if "timeit" in text or "Timer" in text else []
        except (OSError, UnicodeError, SyntaxError, ValueError):
            continue
        for text in texts:
            body = ast.parse(textwrap.dedent(text).strip("\n")).body
            dumps.update(ast.dump(s) for s in body)
            names |= _names(compile(ast.Module(body=body, type_ignores=[]), "<statement>", "exec"))
    if dumps:
        names |= _TIMEIT_NAMES()
    return frozenset(dumps), frozenset(names)


def _TIMEIT_NAMES() -> frozenset:
    _timeit_template("compile", ("pass",))  # fills _TIMEIT
    return _TIMEIT[1] | _names(compile(timeit_template_with("pass"), "<timeit-src>", "exec"))


def timeit_template_with(stmt: str) -> str:
    import timeit

    return timeit.template.format(stmt=stmt, setup="pass", init="")


def _timeit_template(event, args) -> bool:
    """Whether timeit compiles or runs its own template around functions (``timeit.timeit(lambda: f(x))``),
    holding no text of the caller's: built from identifiers timeit chooses, like a dataclass's methods."""
    global _TIMEIT
    if _TIMEIT is None:
        import timeit

        sources = {"pass", *(timeit.template.format(stmt="_stmt()", setup=setup, init=init + ", _stmt=_stmt")
                             for setup, init in (("pass", ""), ("_setup()", ", _setup=_setup")))}
        _TIMEIT = (frozenset(sources), frozenset().union(*(_names(compile(s, "<timeit-src>", "exec")) for s in sources)))
    sources, names = _TIMEIT
    if event == "exec":
        return hasattr(args[0], "co_names") and _names(args[0]) <= names
    source = args[0]
    if isinstance(source, bytes):
        source = source.decode("utf-8", "replace")
    return source in sources


_EVENTS = {**{e: _Hook._process for e in _PROCESS},
           "exec": _Hook._code, "compile": _Hook._code,
           **{e: _Hook._code_object for e in ("code.__new__", "marshal.loads", "marshal.load")},
           "pickle.find_class": _Hook._pickle,
           **{e: _Hook._ctypes for e in ("ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle", "ctypes.cdata",
                                         "ctypes.cdata/buffer", "ctypes.string_at", "ctypes.wstring_at",
                                         "ctypes.addressof", "ctypes.call_function", "ctypes.set_errno",
                                         "ctypes.get_errno")},
           "open": _Hook._open, "import": _Hook._import, "sys.addaudithook": _Hook._hook,
           **{e: _Hook._tracer for e in ("sys.settrace", "sys.setprofile")},
           **{e: _Hook._socket for e in ("socket.__new__", "socket.bind", "socket.connect", "socket.sendto",
                                         "socket.sendmsg")},
           "os.putenv": _Hook._environment, "os.unsetenv": _Hook._environment}

HOOK: _Hook | None = None
# The worker's own descriptors (its channel to the grading process): never opened as a file by anyone else.
PROTECTED_DESCRIPTORS: set[int] = set()


def install(audited=(), tensors: bool = True) -> _Hook:
    """Add the worker's audit hook (once per process); ``audited``: the files the grader read and audited
    (the submission's and the modules beside it), which may be compiled and run; ``tensors``: the exercise is
    judged on tensors (a measuring exercise of 00 or 02 may time a statement given as text to torch's Timer,
    which takes no function). The process is made non-dumpable too (``undumpable``)."""
    global HOOK
    if HOOK is None:
        undumpable()
        HOOK = _Hook(audited, tensors)
        from autograder import reaching

        reaching.install(refuse)
        sys.addaudithook(HOOK)
        _guard_loaded_modules()
        guard_tensor_attributes()
        watch_modules()
    return HOOK


# Library modules whose functions graded code may not replace: those a kernel runs, where no operator
# recorder sees what they compute (a Triton function a kernel calls; numpy, which the CPU interpreter computes
# with): their callables as the worker loaded them, before the submission was imported. (A torch function
# replaced runs the learner's Python, under the recorder; torch also wraps some of its own later.)
_LIBRARY_MODULES = ("triton.language", "numpy")
_LIBRARY_FUNCTIONS: dict = {}
# torch's tensor and storage classes, whose methods the worker itself calls on the learner's outputs outside
# any recorded call (shipping them: ``Tensor.detach``, ``clone``, ``data_ptr``...; framing them: a storage's
# ``nbytes`` and ``data_ptr``): a method replaced (through ``functools.update_wrapper``, ``setattr`` on the
# class) would run the learner's Python there, unseen.
_LIBRARY_CLASSES = ("torch.Tensor", "torch._C.TensorBase", "torch.UntypedStorage", "torch.storage._StorageBase")
_CLASS_ATTRIBUTES: dict = {}


def guard_tensor_attributes() -> None:
    """Refuse an attribute set on a tensor (``t.copy_ = f``, ``setattr(t, "untyped_storage", f)``) that would
    hide one of its class's methods: the grader and torch call those methods on tensors the learner's code
    touched (refilling an input, keying a storage, inside the recorder's own dispatch), where the learner's
    function would run unseen. Data descriptors (``grad``, ``data``, ``requires_grad``) and attributes of the
    learner's own naming pass. Kept in place by ``watch_modules`` (a replaced ``__setattr__`` is put back)."""
    import torch

    from autograder.legality import hidden_methods
    from measure.memory import is_plain

    def tensor_setattr(self, name, value):
        if is_plain(self) and name in hidden_methods(type(self)):
            refuse(f"sets {name} on a tensor, hiding Tensor.{name}", "shadow", sys._getframe(1))
        object.__setattr__(self, name, value)

    torch.Tensor.__setattr__ = tensor_setattr


def watch_modules() -> None:
    """Keep the callables of the library modules (``_LIBRARY_MODULES``, ``triton.language``'s submodules) as
    loaded, before any code of the learner's runs. Python raises no audit event for an attribute write, and
    a module whose class answered writes itself would no longer be a module to Triton (it keeps a kernel's
    modules out of its cache key by ``type(m) is ModuleType``): the worker compares instead
    (``check_modules``)."""
    for name, module in list(sys.modules.items()):
        if (name in _LIBRARY_MODULES or name.startswith("triton.language.")) and isinstance(module, types.ModuleType):
            _LIBRARY_FUNCTIONS.setdefault(name, {k: v for k, v in vars(module).items() if callable(v)})
    import torch

    for path in _LIBRARY_CLASSES:
        cls = functools.reduce(getattr, path.split(".")[1:], torch)
        _CLASS_ATTRIBUTES.setdefault(path, (cls, dict(type.__dict__["__dict__"].__get__(cls))))


def _interpreter_wrapper(value) -> bool:
    """Whether ``value`` is the Triton interpreter's own stand-in for a builtin of ``triton.language`` (a
    launch patches them in, and leaves some there): a function of its file, a ``functools.partial`` of one,
    or ``print`` for ``static_print``."""
    import builtins
    import functools

    if value is builtins.print:
        return True
    if type(value) is functools.partial:
        value = value.func
    code = getattr(value, "__code__", None) if type(value) is types.FunctionType else None
    return code is not None and _real(code.co_filename) == _INTERPRETER_FILE


_INTERPRETER_FILE = os.path.join(_TRITON, "runtime", "interpreter.py")


def check_modules() -> None:
    """Refuse (record) each library function the learner's code replaced or deleted since ``watch_modules``
    (``def give(m, f): m.sigmoid = f`` called with ``triton.language``), and put the library's own back: the
    calls that follow run the library as it was. Called after the submission's import and after each call."""
    for name, functions in _LIBRARY_FUNCTIONS.items():
        space = vars(sys.modules[name]) if isinstance(sys.modules.get(name), types.ModuleType) else None
        for key, original in functions.items() if space is not None else ():
            now = space.get(key)
            if now is not original and not _interpreter_wrapper(now):
                space[key] = original
                _refuse_replaced(f"{name}.{key}", key)
    for path, (cls, attributes) in _CLASS_ATTRIBUTES.items():
        space = type.__dict__["__dict__"].__get__(cls)
        for key, original in attributes.items():
            if space.get(key) is not original:
                type.__setattr__(cls, key, original)
                _refuse_replaced(f"{path}.{key}", key)
        # a name new to the class that hides one it inherits (torch.Tensor.clone, .to, .is_cuda live on
        # torch._C.TensorBase): torch.Tensor.clone(t), the worker's own shipping, would find the new one
        for key in [k for k in space if k not in attributes and _inherited(cls, k)]:
            type.__delattr__(cls, key)
            _refuse_replaced(f"{path}.{key}", key)


def _inherited(cls, key: str) -> bool:
    """Whether a base of ``cls`` (not ``cls`` itself) has an attribute ``key`` in its own dict."""
    bases = type.__dict__["__mro__"].__get__(cls)[1:]
    return any(key in type.__dict__["__dict__"].__get__(base) for base in bases)


def _refuse_replaced(what: str, key: str) -> None:
    """Record a library's attribute ``key`` replaced (already put back: nothing is raised)."""
    _record_refusal(f"replaces {what}", "patching", _written_at(key))


def _written_at(name: str):
    """Where an audited file writes or deletes an attribute ``name`` (``m.sigmoid = f``, ``setattr(m,
    "sigmoid", f)``, ``del m.sigmoid``), as a frame-like place the recorder reads a line from; None when
    no line of theirs says so."""
    for path, tree in sorted(HOOK.trees.items() if HOOK is not None else ()):
        for node in ast.walk(tree):
            named = (isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del))
                     and node.attr == name) or (
                isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr")
                and len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and node.args[1].value == name)
            if named:
                place = _Still()
                place.f_code, place.f_lineno, place.f_back = types.SimpleNamespace(co_filename=path), node.lineno, None
                return place
    return None


def refuse(what: str, why: str, frame) -> None:
    """Refuse an operation asked for at ``frame`` (raise ``RunTimeRefused`` there), recorded as the audit
    hook's refusals are (``charge_pending``): ``why`` is a key of ``_WHY``."""
    raise _record_refusal(what, why, _Still.of(frame))


def _record_refusal(what: str, why: str, place) -> RunTimeRefused:
    """The refusal of ``what`` (``why``: a key of ``_WHY``), pending in the hook with its place to be
    charged (``charge_pending``)."""
    exc = RunTimeRefused(f"graded code may not do this: it {what} ({_WHY[why]})")
    if HOOK is not None:
        HOOK.pending.append((what, place, exc))
    return exc


def _guard_loaded_modules() -> None:
    """CPython raises the ``import`` event only for a module not yet in ``sys.modules``: ``import inspect``
    (or ``__import__("gc")``, ``import autograder.probes``) of a module torch or the worker already loaded
    raises none. ``__import__`` itself judges those, as the hook judges the others: a module the audit forbids,
    or the grader's own (``from autograder import check`` excepted), imported by code of the learner's that
    no audit read (text some library ran for it, FX code that calls ``__import__``), not by a library's code
    it called; the audited files' own import statements are the static audit's findings. The grader's own
    modules are refused to the learner's code also through the standard library (``pydoc.locate``). And
    importlib's loaders (``import_module``, ``reload``, ``importlib.__import__``), which take computed names
    the audit cannot read and never call ``__import__`` for a loaded module, judge their module alike for the
    learner's code, audited or not (``importlib.import_module("auto" + "grader.probes")``)."""
    import builtins

    from autograder import reaching
    from autograder.imports import NOT_LEARNERS

    original = builtins.__import__
    forbidden = frozenset(_forbidden())
    graders = tuple(os.path.join(str(REPOSITORY), folder, "") for folder in NOT_LEARNERS - {"course", "measure"})

    def graders_module(top: str) -> bool:  # loaded from the repository's own folders (not a helper named alike)
        module = sys.modules.get(top)
        where = getattr(module, "__file__", None) or next(iter(getattr(module, "__path__", None) or ()), None)
        return isinstance(where, str) and _real(where).startswith(graders)

    def refused_top(name, fromlist) -> str:
        """The top-level name of an import of a forbidden or grader module, else "" (read with str's own
        methods: a str of the learner's class could answer another name than it imports)."""
        top = str.partition(name, ".")[0] if isinstance(name, str) else ""
        if str.__eq__(name, "autograder") and type(fromlist) in (tuple, list) and list(fromlist) == ["check"]:
            return ""
        return top if top in forbidden or graders_module(top) else ""

    def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
        top = refused_top(name, fromlist) if not level else ""
        if top:
            frame = sys._getframe(1)  # the frame that runs the import: a library's own imports are its own,
            # and the grader's modules are no library's (a standard library function that imports by a computed
            # name imports them for the learner's code that called it)
            who = asker(frame)[0] if top not in forbidden else _whose(frame)[0]
            if who == LEARNER and _real(frame.f_code.co_filename) not in HOOK.audited:
                # and those of the files the grader audited are the static audit's findings, named there
                refuse(f"imports {name}", "import", frame)
            entry = _handed_module(frame, top) if who != GRADER else None
            if entry:  # a library imports it by a name the learner's code handed over
                refuse(f"imports {name} (by its name, handed to {entry})", "import", frame)
        return original(name, globals, locals, fromlist, level)

    builtins.__import__ = guarded_import

    def loader(one):
        def guarded(name, *args, **kwargs):
            module = name if isinstance(name, types.ModuleType) else None  # reload(module)
            if module is not None:
                name = types.ModuleType.__getattribute__(module, "__name__")
            package = kwargs.get("package", args[0] if args and one.path.endswith(("import_module", "_gcd_import")) else None)
            if isinstance(name, str) and str.startswith(name, ".") and isinstance(package, str):
                name = importlib.util.resolve_name(name, package)
            frame = sys._getframe(1)
            if refused_top(name, None) and asker(frame)[0] == LEARNER:
                refuse(f"imports {name} ({one.path})", "import", frame)
            return one.original(module if module is not None else name, *args, **kwargs)
        return guarded

    reaching.guard_everywhere(("importlib.import_module", "importlib.reload", "importlib.__import__",
                               "importlib._bootstrap._gcd_import"), loader)


def _handed_module(frame, top: str) -> str | None:
    """The library function that imports the module ``top`` at ``frame`` because the learner's code named it:
    the entry of the library's work, called by the learner's code, was handed a dotted string that starts with
    that module (``tornado.util.import_object("autograder.legality")``, an entry point's "numpy:asarray").
    A library's imports of its own choosing are its own."""
    from autograder import text_origin

    entry = None
    while frame is not None and _whose(frame)[0] in (None, LIBRARY):
        if not frame.f_code.co_filename.startswith("<frozen"):
            entry = frame
        frame = frame.f_back
    if entry is None or frame is None or _whose(frame)[0] != LEARNER:
        return None
    for piece in text_origin._strings(text_origin._arguments(entry)):
        if re.split(r"[.:]", piece.strip(), maxsplit=1)[0] == top:
            return entry.f_code.co_name
    return None


# Environment variables graded code may set, and the values: debugging aids that change how fast a program
# runs, never what it computes or what the grader sees.
DEBUG_AIDS = {"CUDA_LAUNCH_BLOCKING": frozenset({"0", "1"})}

_PR_SET_DUMPABLE, _PR_GET_DUMPABLE = 4, 3


def _prctl(*args) -> int | None:
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl(*args, 0, 0, 0)
    except (OSError, AttributeError):
        return None


def undumpable() -> None:
    """Defence in depth behind the process rule: a non-dumpable process's memory (``/proc/<pid>/mem``) can be
    opened by no other process of the same user (only by one allowed to trace any process), so a process
    started past the hook could not read or write the worker's tensors. Its own ``/proc/self`` stays readable,
    and the processes it starts (Triton's ptxas, the launcher's C compiler) are dumpable again once they run
    their own program."""
    _prctl(_PR_SET_DUMPABLE, 0)


def dumpable() -> bool | None:
    """Whether this process is dumpable (None where that cannot be asked)."""
    answer = _prctl(_PR_GET_DUMPABLE)
    return None if answer is None or answer < 0 else bool(answer)


def charge_pending(recorder) -> None:
    if HOOK is not None:
        HOOK.charge_pending(recorder)
        from autograder import reaching

        reaching.guard_loaded_resolvers(refuse)  # those of the libraries imported since, before the next call
