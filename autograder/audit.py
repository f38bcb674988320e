"""Static audit of a submission's source: what it imports, calls and touches (the trust model's "legality,
read from the submission's source").

Everything in the worker's process can be patched by the learner's code (timers, CUDA events, the operator
recorder, the launch counter, the result file), so what the grade rests on is read here, from the source,
in the grading process. ``audit(source, allow=..., forbidden_calls=..., entry=...)`` returns one
``Finding(line, rule, message)`` per offending line and rule: ``line`` is a line of ``source`` (for a
notebook, ``Submission.where(line)`` says "cell 7, line 3"), ``message`` says in plain words what the code
does and why a graded exercise may not.

Rules (``RULES`` holds the list):
- grader-import, reference-import: imports of the grader (only ``from autograder import check`` is
  allowed: inside a grading worker ``check`` returns True without running anything, so its calls are
  harmless and not reported) or of ``kernels_ref``;
- forbidden-import: modules that reach into the process (gc, ctypes, inspect, importlib, builtins, ...),
  start threads or processes, open sockets, unpickle, copy files;
- process: ``os`` functions that write files or descriptors, spawn, signal or change the working folder,
  and ``sys`` internals used for patching (``sys.modules``, ``sys.settrace``, ``sys._getframe``, ...), ``sys``
  reached as another module's attribute (``logging.sys``);
- patching: assigning (also ``+=``, ``setattr``, ``del``, ``delattr``) to attributes of modules, classes
  or functions the submission did not define, through any alias (``import torch as t``, ``E =
  torch.cuda.Event``, ``sys.modules["autograder"]``, ``type(x)``); the learner's own objects are fine;
- dynamic-code: ``exec``, ``eval``, ``compile``, ``__import__``, ``globals()``/``locals()``/``vars()``
  used to write, ``getattr``/``setattr``/``delattr`` with a computed name or passed on as a value
  (``functools.partial(setattr, C)``);
- escape: dunder attributes used to reach other objects (``__subclasses__``, ``__globals__``,
  ``__code__``, ``__builtins__``, ``__dict__``, ``__class__``, ``__wrapped__``, ...), ``__torch_dispatch__``
  / ``__torch_function__``, tensor subclasses and dispatch modes, ``torch._C``;
- grader-state: reading or changing what tells a checked call from a timed one (memory poisoning,
  deterministic mode, the ``AUTOGRADER_*`` environment, the caller's stack: frame attributes such as
  ``f_back`` or ``currentframe`` under any receiver, so ``logging.currentframe()`` counts too);
- feature: torch.compile, CUDA graphs, streams, torch.jit, torch.library, unless the exercise allows the
  feature (``allow``: names from ``FEATURES``);
- file-write: ``open`` for writing, ``Path.write_text``, ``torch.save``, ``np.save``, ``savefig``, ...
  (reading files is fine);
- forbidden-call: the torch operators an exercise forbids, where the source shows them (``torch.softmax``,
  ``F.softmax``, ``x.softmax(...)``, ``nn.Softmax``, ``a @ b``...), in the code the entry point can reach
  (``entry``), outside Triton kernels. ``forbidden_calls_for(spec)`` derives them from a spec's
  ``rules`` (``allowed_ops``, ``why``).
- environment: writes to ``os.environ`` (``putenv``, ``setdefault``, ``del``...); judged where they run
  (``autograder.runtime_audit``): one that leaves the environment as the grader set it changes nothing
  (``os.environ.setdefault("TRITON_INTERPRET", "1")``, Triton's way to run on a CPU), one that changes it is
  refused.

- kernel-library: a Triton library function that does the exercise's work inside a kernel (``tl.softmax``
  where the exercise teaches the softmax), from the spec's ``Rules.kernel_library``: no operator records
  what a kernel calls, so the source decides;
- escape, inside ``@triton.jit`` functions: a call of anything Triton does not compile (a plain Python
  helper, numpy, a module-level object's method) and a value's ``.handle``: on a GPU they do not compile,
  under the interpreter they run outside the kernel, on the host's copy of the data.

The audit reads source: it cannot see code the submission builds at run time, which is why building code
at run time is itself a finding. Code in ``@triton.jit`` functions is Triton's language (``a @ b`` there
is ``tl.dot``) and is not checked for torch operators.
"""
from __future__ import annotations

import ast
import builtins
import fnmatch
import functools
import importlib
import os
import re
import threading
import textwrap
from dataclasses import dataclass
from typing import Iterable, Mapping


@dataclass(frozen=True, order=True)
class Finding:
    line: int
    rule: str
    message: str

    def describe(self, where=None) -> str:
        """'cell 7, line 3: message' with ``Submission.where``; 'line N: message' without."""
        return f"{where(self.line) if where else f'line {self.line}'}: {self.message}"


RULES = ("grader-import", "reference-import", "forbidden-import", "process", "patching", "dynamic-code",
         "escape", "grader-state", "feature", "file-write", "forbidden-call", "kept-state", "kernel-library",
         "outside-torch", "environment")

_KEPT = ("keeps results between calls: every call must compute its own answer (the grader gives each call "
         "fresh values; a cache can only hide a slow kernel or return an answer for other values)")
_MUTATORS = frozenset({"append", "extend", "insert", "update", "setdefault", "add", "__setitem__", "put"})
_CACHE_DECORATORS = ("functools.lru_cache", "functools.cache", "functools.cached_property")

# Features an exercise may allow (``allow``); each covers these torch paths (and everything below them).
FEATURES: dict[str, tuple[str, ...]] = {
    "compile": ("torch.compile", "torch.compiler", "torch._dynamo", "torch._inductor"),
    "cuda_graphs": ("torch.cuda.graph", "torch.cuda.graphs", "torch.cuda.CUDAGraph",
                    "torch.cuda.make_graphed_callables", "torch.cuda.graph_pool_handle"),
    "streams": ("torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.streams", "torch.cuda.current_stream",
                "torch.cuda.default_stream", "torch.cuda.set_stream", "torch.cuda.ExternalStream",
                "torch.cuda.StreamContext", "torch.Stream", "torch.accelerator.current_stream",
                "torch.accelerator.set_stream"),
    "jit": ("torch.jit",),
    "library": ("torch.library", "torch.ops.load_library", "torch.utils.cpp_extension", "torch._custom_ops",
                "torch._library"),
}
_FEATURE_WHY = {
    "compile": "torch.compile generates the kernels for you",
    "cuda_graphs": "CUDA graphs replay recorded work, hiding launches and time from the grader",
    "streams": "work on another stream can finish after the call has been timed",
    "jit": "TorchScript compiles the code for you",
    "library": "custom operators and C++ extensions run code the grader cannot audit",
}
_FEATURE_METHODS = {"record_stream": "streams", "wait_stream": "streams"}
# Paths under a feature's roots that keep the feature away or ask whether it runs (a launcher marked
# @torch.compiler.disable, as public kernels mark theirs): none of the exercise's work.
_FEATURE_GUARDS = frozenset({"torch.compiler.disable", "torch.compiler.is_compiling",
                             "torch.compiler.is_dynamo_compiling", "torch._dynamo.disable",
                             "torch._dynamo.is_compiling"})
# PyTorch's documented way to launch one's own Triton kernel as an operator (torch.library.triton_op, the
# launch through wrap_triton): the operator's Python is the submission's, audited here, and the operator
# recorder runs it under itself (autograder.legality), so its operators and launches are seen.
# torch.library.custom_op is the same for an operator that is not compiled through (its Python the learner's,
# run under the recorder as triton_op's is).
_OWN_OPERATOR_MAKERS = ("torch.library.triton_op", "torch.library.custom_op")
_FEATURE_GUARDS |= {*_OWN_OPERATOR_MAKERS, "torch.library.wrap_triton"}
_TORCH_NAMESPACES = frozenset({"aten", "prims", "prim", "quantized", "_quantized", "rngprims", "c10d", "torchvision"})
# What PyTorch's documentation registers for an operator made with triton_op (its fake implementation, for
# tracing; its backward): the learner's own audited Python, allowed for an operator the submission defines
# itself (named by the same string, or its own object), never for one of torch's.
_OWN_OPERATOR_REGISTRATIONS = frozenset({"torch.library.register_fake", "torch.library.register_autograd"})

# gc's switches a careful benchmark uses (timeit pauses collection while timing): they reach no object. Every
# other use of gc (get_objects, get_referrers, callbacks, garbage, the module passed on) is judged as gc.
_GC_CONTROLS = frozenset({"gc.collect", "gc.disable", "gc.enable", "gc.isenabled"})


# inspect's readers of a function's signature and an object's kind (a validating decorator's): they reach no
# frame and no object beyond the one they are handed.
_INSPECT_READS = frozenset({"inspect.signature", "inspect.Signature", "inspect.Parameter", "inspect.isclass",
                            "inspect.isfunction", "inspect.ismethod", "inspect.iscoroutinefunction"})


def _literal_texts(value) -> list | None:
    """The strings a literal is or holds as dict values ("a {x}", {"k": "b {y}"}); None for anything else."""
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return [value.value]
    if isinstance(value, ast.Dict) and value.values and all(
            isinstance(v, ast.Constant) and isinstance(v.value, str) for v in value.values):
        return [v.value for v in value.values]
    return None


def _format_field_reach(text: str) -> str | None:
    """The first field of a str.format format that reads a dunder or a frame's or a closure cell's contents
    (``{0.__closure__[0].cell_contents}``), else None; a string that is no format is None."""
    import string

    try:
        fields = [f for _, f, spec, _ in string.Formatter().parse(text) for f in (f, spec) if f]
    except (ValueError, TypeError):
        return None
    for field in fields:
        parts = re.split(r"[.\[\]]", field)
        if any(p.startswith("__") or p in _FRAME_ATTRS or p in ("cell_contents", "gi_code", "co_consts")
               for p in parts[1:]):
            return field
    return None


def _builtin_type_method(path: str) -> bool:
    """``builtins.dict.fromkeys``, ``builtins.int.bit_length``, ``builtins.str.lower``: a public method of a
    built-in type (dict, int, str, ...) is plain Python, not the builtins module reached for; dunders are not
    (``object.__setattr__``, ``type.__subclasses__`` are judged by the rules on them)."""
    import builtins

    parts = path.split(".")
    return (len(parts) == 3 and parts[0] == "builtins" and isinstance(getattr(builtins, parts[1], None), type)
            and not parts[2].startswith("_"))


def _reaches_nothing(path: str, spelled: str) -> bool:
    """Whether ``path`` (as ``spelled`` in the source) is ``import gc`` / ``import inspect`` or one of the
    parts of them that reach nothing (gc's switches, inspect's signature readers)."""
    return (path in _GC_CONTROLS or path in _INSPECT_READS or any(path.startswith(r + ".") for r in _INSPECT_READS)
            or (path in ("gc", "inspect") and spelled.startswith("import ")))


# Modules a graded exercise may not import, with the reason in plain words.
_REACHES_IN = "can reach into the running process and change the grader's own objects"
_NETWORK = "talks to the network"
_UNPICKLE = "runs arbitrary code while unpickling"
_SPAWN = "starts other programs or processes"
_THREADS = "starts threads that keep running while the grader checks and times the call"
FORBIDDEN_MODULES: dict[str, str] = {
    "gc": "finds every live object, the grader's included: it " + _REACHES_IN,
    "ctypes": "writes raw memory and calls C functions: it " + _REACHES_IN,
    "_ctypes": "writes raw memory and calls C functions: it " + _REACHES_IN,
    "cffi": "calls C functions: it " + _REACHES_IN,
    "inspect": "reads the grader's frames and source: it " + _REACHES_IN,
    "builtins": "replaces Python's built-in functions for the grader too",
    "subprocess": _SPAWN, "_posixsubprocess": _SPAWN, "pty": _SPAWN, "multiprocessing": _SPAWN,
    "concurrent": "starts threads or processes", "threading": _THREADS, "_thread": _THREADS,
    "socket": _NETWORK, "_socket": _NETWORK, "_pyio": "opens files and descriptors in pure Python (the grader's "
    "channel to the worker among them)", "socketserver": _NETWORK, "ssl": _NETWORK, "urllib": _NETWORK, "http": _NETWORK,
    "requests": _NETWORK, "ftplib": _NETWORK, "smtplib": _NETWORK, "xmlrpc": _NETWORK,
    **{m: "changes how the process handles signals (the grader's time limit among them)"
       for m in ("signal", "_signal")},
    "pickle": _UNPICKLE, "_pickle": _UNPICKLE, "dill": _UNPICKLE, "cloudpickle": _UNPICKLE,
    "shelve": _UNPICKLE, "marshal": "loads code objects", "copyreg": "changes how objects are pickled",
    "shutil": "copies, moves and deletes files", "tempfile": "creates files",
    "mmap": "maps files and memory for writing", "fcntl": "changes file descriptors",
    "atexit": "runs code when the process exits, after the grader's own code",
    "code": "runs code built at run time", "codeop": "compiles code built at run time",
    "runpy": "runs other files as code", "zipimport": "loads modules from files the audit never read",
    "pkgutil": "loads modules by computed names, which the audit cannot see",
    "imp": "loads modules from files the audit never read", "unittest": "(unittest.mock) patches other modules' objects",
    "posix": "calls the operating system directly (like os.system, os.fork)",
    "asyncio": "runs subprocesses and network connections in an event loop",
    **{m: "computes on the GPU outside torch and Triton, where the grader cannot see what runs" for m in (
        "cupy", "cupyx", "numba", "pycuda", "cuda", "jax", "jaxlib", "tensorflow", "mlx", "tinygrad", "taichi",
        "warp")},
}

# Dotted paths whose use is reported wherever they appear (an alias or a prefix counts): path -> (rule, why).
_WRITES = "writes files or file descriptors"
_SPAWNS = "starts or signals processes"
_ENV = ("changes the environment of the grading process (judged where it runs: a write that leaves the "
        "environment as the grader set it changes nothing)")
_STATE = ("reads or changes what the grader sets up around each call (memory poisoning, deterministic "
          "mode): a graded function must not tell a checked call from a timed one")
_STACK = "inspects the caller's stack: a graded function must not tell a checked call from a timed one"
_BELOW_PYTHON = ("calls operators below the Python dispatch key (dispatch keys and key sets of its own choosing, "
                 "guards that exclude keys or switch torch functions off), where the grader's operator recorder "
                 "and memory meter sit")
# attributes of torch's operators that call a kernel at dispatch keys of the caller's choosing
_BELOW_PYTHON_ATTRS = frozenset({"redispatch", "redispatch_boxed", "_op_dk"})
_PATH_RULES: dict[str, tuple[str, str]] = {
    **{f"os.{n}": ("process", _WRITES) for n in (
        "write", "writev", "pwrite", "open", "openpty", "fdopen", "dup", "dup2", "pipe", "pipe2", "mkfifo",
        "mknod", "remove", "unlink", "rmdir", "removedirs", "replace", "rename", "renames", "mkdir",
        "makedirs", "symlink", "link", "truncate", "ftruncate", "chmod", "fchmod", "chown", "fchown",
        "lchown", "utime", "sendfile", "memfd_create")},
    **{f"os.{n}": ("process", _SPAWNS) for n in (
        "system", "popen", "fork", "forkpty", "kill", "killpg", "setsid", "setpgid", "register_at_fork")},
    **{f"os.{n}": ("environment", _ENV) for n in (
        "putenv", "unsetenv", "environ.update", "environ.setdefault", "environ.pop", "environ.popitem",
        "environ.clear", "environ.__setitem__", "environ.__delitem__")},
    **{f"os.{n}": ("process", "changes the working folder of the grading process") for n in ("chdir", "fchdir")},
    "sys.modules": ("process", "reaches every loaded module (the grader's too) to patch or replace it"),
    **{f"sys.{n}": ("process", "hooks into the interpreter, under the grader's code as well") for n in (
        "settrace", "setprofile", "_getframe", "_current_frames", "meta_path", "path_hooks",
        "path_importer_cache", "addaudithook", "monitoring", "remote_exec", "set_asyncgen_hooks")},
    "torch.multiprocessing": ("process", _SPAWNS),
    "torch.distributed": ("process", "talks to other processes over the network"),
    "numpy.ctypeslib": ("escape", "reads and writes raw memory through pointers"),
    "torch._C": ("escape", "uses torch's private C bindings (dispatch keys, mode stacks, the profiler)"),
    **{f"torch.{n}": ("escape", "uses torch's private reimplementations of its operators (softmax, gelu...) "
                      "from primitives: the exercise's operator under another name") for n in (
        "_decomp", "_refs", "_prims", "_prims_common")},
    **{f"torch.{n}": ("escape", _BELOW_PYTHON) for n in (
        "DispatchKey", "DispatchKeySet", "ExcludeDispatchKeyGuard", "DisableTorchFunction",
        "DisableTorchFunctionSubclass")},
    "torch.utils._python_dispatch": ("escape", "installs dispatch modes that can hide operators from the grader"),
    "torch.utils._mode_utils": ("escape", "switches dispatch modes off (no_dispatch), the grader's among them"),
    "torch.overrides": ("escape", "intercepts torch functions (torch function modes and overrides)"),
    "torch._subclasses": ("escape", "uses tensor subclasses that can intercept every operator"),
    # torch's own tensor subclasses look each operator up in a table code may extend: an implementation added
    # there runs below a recorded operator, with the dispatch modes off (the nested jagged tensor's and the
    # masked tensor's tables; DTensor's sharding rules)
    **{p: ("escape", "extends the operator table of one of torch's tensor subclasses: an implementation "
                     "registered there runs below the operator the grader records, where nothing records it")
       for p in ("torch.nested._internal", "torch.masked.maskedtensor", "torch.masked._ops",
                 "torch.distributed.tensor._ops", "torch.sparse._triton_ops", "torch.sparse.semi_structured",
                 "torch.sparse._semi_structured_ops", "torch.sparse.SparseSemiStructuredTensor",
                 "torch.sparse.SparseSemiStructuredTensorCUTLASS", "torch.sparse.SparseSemiStructuredTensorCUSPARSELT")},
    "torch.Tensor._make_subclass": ("escape", "makes a tensor subclass that can intercept every operator"),
    "torch.utils.deterministic": ("grader-state", _STATE),
    **{f"torch.{n}": ("grader-state", _STATE) for n in (
        "use_deterministic_algorithms", "are_deterministic_algorithms_enabled", "set_deterministic_debug_mode",
        "get_deterministic_debug_mode", "is_deterministic_algorithms_warn_only_enabled")},
    **{f"traceback.{n}": ("grader-state", _STACK) for n in (
        "extract_stack", "walk_stack", "format_stack", "print_stack", "StackSummary")},
    **{f"operator.{n}": ("dynamic-code", "sets, deletes or reads attributes and items by computed names")
       for n in ("setitem", "delitem", "attrgetter", "methodcaller")},
    **{f"types.{n}": ("dynamic-code", "builds functions or code objects at run time")
       for n in ("FunctionType", "CodeType", "LambdaType")},
    **{p: ("file-write", "writes a file") for p in (
        "torch.save", "numpy.save", "numpy.savez", "numpy.savez_compressed", "numpy.savetxt",
        "numpy.ndarray.tofile", "matplotlib.pyplot.savefig", "torch.cuda.memory._dump_snapshot",
        "torch.profiler.tensorboard_trace_handler", "pathlib.Path.write_text", "pathlib.Path.write_bytes",
        "pathlib.Path.touch", "logging.FileHandler", "logging.handlers.RotatingFileHandler",
        "logging.handlers.TimedRotatingFileHandler", "logging.handlers.WatchedFileHandler")},
}
# Functions that run code given as a string or load it from a file the audit never read, wherever they live
# (a path that reaches the same object is the same function: ``canonical``).
_RUNS_STRINGS = "runs code given as a string, which the audit cannot read"
_PATH_RULES.update({
    **{p: ("grader-state", "captures what the process prints, where a kernel's device_print hands its values over "
                           "(print to see them; the grader compares what your function returns)")
       for p in ("contextlib.redirect_stdout", "contextlib.redirect_stderr",
                 # the same swap of sys.stdout, as libraries spell it (IPython's %%capture, pytest's capsys)
                 "IPython.utils.capture.capture_output", "IPython.utils.io.capture_output",
                 "_pytest.capture.SysCapture", "_pytest.capture.SysCaptureBinary", "_pytest.capture.FDCapture",
                 "_pytest.capture.FDCaptureBinary", "_pytest.capture.MultiCapture", "_pytest.capture.CaptureManager",
                 "_pytest.capture.CaptureFixture", "test.support.captured_stdout", "test.support.captured_stderr",
                 "test.support.captured_output")},
    **{p: ("dynamic-code", _RUNS_STRINGS) for p in (
        "cProfile.run", "cProfile.runctx", "profile.run", "profile.runctx", "pdb.run", "pdb.runeval", "pdb.runctx",
        "doctest.run_docstring_examples", "doctest.testmod", "doctest.testfile", "doctest.DocTestRunner",
        "trace.Trace")},
    **{p: ("dynamic-code", "evaluates annotations written as strings (eval): code the audit cannot read") for p in (
        "typing.get_type_hints", "typing.ForwardRef", "typing._eval_type")},
    **{p: ("dynamic-code", "loads and runs a module from a file, past the import statements the audit reads")
       for p in ("torch.hub._import_module", "torch.hub.load", "torch.hub._load_local", "torch.package")},
    **{p: ("dynamic-code", _RUNS_STRINGS) for p in (
        "torch.fx.graph_module._exec_with_source", "torch.fx.graph_module._forward_from_src",
        "torch.fx.graph_module._method_from_src")},
    **{p: ("process", "builds and loads native code") for p in ("triton.runtime.build",)},
})
# timeit runs its statements as code when they are strings (a function of the learner's is fine):
# path -> the positions and names of its statement arguments.
_STATEMENT_RUNNERS = {"timeit.timeit": ((0, "stmt"), (1, "setup")), "timeit.repeat": ((0, "stmt"), (1, "setup")),
                      "timeit.Timer": ((0, "stmt"), (1, "setup")),
                      # torch's Timer runs its statements through timeit's (strings only: it takes no function)
                      **{p: ((0, "stmt"), (1, "setup"), (2, "global_setup"))
                         for p in ("torch.utils.benchmark.Timer", "torch.utils.benchmark.utils.timer.Timer")}}
# Numeric libraries that compute outside torch: graded code of an exercise about tensors may use them for
# configuration only (``np.log2(N)``), never on values (``np.asarray(obj)`` over a tensor's memory).
NUMERIC_LIBRARIES = ("numpy", "scipy", "numexpr", "pandas")
_NUMERIC_WHY = ("computes outside torch, where the grader cannot see what is computed: an exercise about tensors "
                "is done with torch's allowed operators and your own Triton kernels (numpy may build "
                "configuration from sizes, not touch values)")
# The protocols through which numpy (and CuPy, Numba, JAX, a buffer) take memory or values an object hands them:
# an object of the learner's whose __array_interface__ is built from data_ptr() is a tensor's memory in numpy,
# reached through any library function that calls np.asarray on it. Graded code has no use for them.
_MEMORY_PROTOCOLS = frozenset({"__array_interface__", "__array_struct__", "__cuda_array_interface__", "__array__",
                               "__dlpack__", "__array_ufunc__", "__array_function__", "__buffer__"})
def _literal_names(namespace) -> bool:
    """Whether a mapping written in the source names only constant strings (``{"a": 1}``, ``dict(a=1)``)."""
    if isinstance(namespace, ast.Dict):
        return all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in namespace.keys)
    return (isinstance(namespace, ast.Call) and isinstance(namespace.func, ast.Name) and namespace.func.id == "dict"
            and not namespace.args and all(k.arg is not None for k in namespace.keywords))


# torch's profilers, in the graded code of an exercise about tensors: the grader profiles a checked call's
# kernels on the device, and Kineto keeps one session, which a profiler of the code's own ends or replaces.
_PROFILERS = ("torch.profiler", "torch.autograd.profiler", "torch.autograd.profiler_util",
              "torch.autograd.profiler_legacy", "torch.cuda.profiler")
_PROFILER_WHY = ("the grader times a checked call's kernels with torch's profiler, which keeps one session: a "
                 "profiler started inside the graded function ends or replaces the grader's (profile in a cell "
                 "of its own, outside the function)")
_MEMORY_WHY = ("is the protocol through which numpy and other libraries take an object's memory or values, where "
               "the grader cannot see what is computed with them: the exercise's work is done by torch's allowed "
               "operators and your own kernels")
# importlib: reading what is installed (a version check) is fine; everything else loads or reloads modules.
_IMPORTLIB_READS = ("importlib.metadata", "importlib.util.find_spec")
_IMPORTLIB_WHY = "imports and reloads modules by computed names, which the audit cannot see"
# Functions that import a module and read its attributes by a dotted name given as a string; the libraries'
# ones are patterns (a rule path is imported to be known by identity, and these libraries are slow to import).
_RESOLVES = ("imports a module and reads its attributes by a dotted name given as a string, which the audit "
             "cannot read (the grader's own modules, numpy and the forbidden modules among them)")
_PATH_RULES.update({p: ("forbidden-import", _RESOLVES) for p in (
    "pydoc.locate", "importlib.metadata.EntryPoint", "importlib.metadata.entry_points", "string.Formatter",
    "logging.config.BaseConfigurator", "logging.config.DictConfigurator")})
_PATH_PATTERNS: tuple[tuple[str, str, str], ...] = (
    *((f"os.{n}", "process", _SPAWNS) for n in ("exec*", "spawn*", "posix_spawn*")),
    *((p, "forbidden-import", _RESOLVES) for p in (
        "tornado.util.import_object", "traitlets.utils.importstring.import_item", "traitlets.import_item",
        "jinja2.utils.import_string", "IPython.utils.importstring.import_item")))
# Loaders that unpickle (run arbitrary code) unless told not to: path -> (keyword, its safe value).
# (the keyword that makes it safe, its safe value, that argument's position where it has one)
_UNPICKLERS = {"torch.load": ("weights_only", True, None), "numpy.load": ("allow_pickle", False, 2),
               "pandas.read_pickle": (None, None, None)}
# open-like functions: (path, index of the mode argument)
_OPENERS = {"builtins.open": 1, "io.open": 1, "codecs.open": 1, "os.fdopen": 1, "io.FileIO": 1, "_io.FileIO": 1,
            "_io.open": 1}

# Readers that rewrite the files they read when asked (``inplace=True``): (path, index of that argument)
_IN_PLACE = {"fileinput.input": 1, "fileinput.FileInput": 1}

# Method names that write files whatever object they are called on (``Path(...).write_text(...)``).
_WRITE_METHODS = frozenset({"write_text", "write_bytes", "touch", "mkdir", "unlink", "rmdir", "symlink_to",
                            "hardlink_to", "savefig", "tofile", "to_csv", "to_parquet", "export_chrome_trace",
                            "export_stacks", "export_memory_timeline"})
_WRITE_MODE_CHARS = set("wax+")

# Dunder attributes used to climb from any object to any other (or to patch functions in place).
_ESCAPE_DUNDERS = frozenset({
    "__subclasses__", "__globals__", "__code__", "__builtins__", "__bases__", "__base__", "__mro__",
    "__closure__", "__func__", "__self__", "__defaults__", "__kwdefaults__", "__wrapped__", "__loader__",
    "__getattribute__", "__getattr__", "__setattr__", "__delattr__", "__reduce__", "__reduce_ex__", "__torch_dispatch__",
    "__torch_function__", "__init_subclass__",
})
_ESCAPE_NAMES = frozenset({"__builtins__", "__loader__"})
# Names a module has without binding them (``__name__``, ``__file__``...), and those the grading worker gives
# a submission's module: Jupyter's display() and the stand-in for what a notebook's magics hand back
# (``autograder.submission.STAND_IN``).
_MODULE_NAMES = frozenset({*vars(type(builtins)("m")), "__file__", "__cached__", "__builtins__", "__annotations__",
                           "display", "_ipython_only"})
# Frames and what leads to them, whatever the receiver (``logging.currentframe`` is ``sys._getframe``): a frame
# reaches the grader's locals (its recorder) as well as telling a checked call from a timed one.
_FRAME_ATTRS = frozenset({
    "currentframe", "_getframe", "_current_frames", "f_back", "f_locals", "f_globals", "f_builtins", "f_code",
    "tb_frame", "tb_next", "gi_frame", "cr_frame", "ag_frame", "gi_yieldfrom", "cr_await", "getouterframes",
    "getinnerframes", "walk_stack", "walk_tb", "extract_stack", "_getframemodulename", "findCaller"})
# Modules (and the functions that load them) by the name another object holds them under, for an attribute read
# on a value the audit cannot follow (``(lambda m: m.np)(triton.runtime.interpreter)``: a parameter, a call's
# result): what such a read reaches is judged by its name, since nothing else in the source says what it is.
# name -> (rule, why). Names that are also tensor methods (``x.numpy()``, ``x.cuda()``) count only when not
# called there and then.
_MODULE_ATTRS: dict[str, tuple[str, str]] = {
    **{m: ("forbidden-import", f"{m} {FORBIDDEN_MODULES[m]}") for m in (
        "gc", "ctypes", "_ctypes", "inspect", "builtins", "subprocess", "_posixsubprocess", "multiprocessing",
        "threading", "_thread", "socket", "pickle", "_pickle", "marshal", "pkgutil", "runpy", "posix",
        "cupy", "numba", "pycuda", "jax", "tensorflow")},
    **{m: ("forbidden-import", f"importlib {_IMPORTLIB_WHY}") for m in ("importlib", "import_module", "reload")},
    **{m: ("outside-torch", f"numpy {_NUMERIC_WHY}") for m in ("np", "numpy")},
    **{m: ("outside-torch", f"{m} {_NUMERIC_WHY}") for m in ("scipy", "pandas", "numexpr")},
    "os": ("process", "the os module reached through another object: its processes, files and environment"),
    **{m: ("escape", "torch's mode stacks, private C bindings and reimplementations reached through another "
                     "object: they hide operators from the grader or do the exercise's work under another name")
       for m in ("_C", "_python_dispatch", "_mode_utils", "overrides", "_subclasses", "_decomp", "_refs", "_prims")},
    **{m: ("grader-import", "the grader's own modules (or the course's reference kernels) reached through another "
                            "object: graded code may not use them") for m in ("autograder", "kernels_ref", "probes")},
}
_TENSOR_METHOD_NAMES = frozenset({"numpy", "cuda"})
# Attribute functions called with a literal name are checked as that attribute; passed on as a value
# (``functools.partial(setattr, C)("note", f)``), they take names the audit never sees.
_ATTR_BUILTINS = frozenset({"builtins.getattr", "builtins.setattr", "builtins.delattr"})
_DYNAMIC_BUILTINS = {"exec": "runs code built at run time", "eval": "evaluates code built at run time",
                     "compile": "compiles code built at run time",
                     "__import__": "imports a module by a computed name",
                     "breakpoint": "starts a debugger"}
_TENSOR_CLASSES = ("torch.Tensor", "torch._C.TensorBase", "torch._C._TensorBase", "torch.nn.Parameter",
                   "torch.nn.parameter.Parameter", "torch.nn.parameter.Buffer")
_MODE_CLASSES = ("torch.utils._python_dispatch.TorchDispatchMode", "torch.overrides.TorchFunctionMode")
_PASSTHROUGH_CALLS = frozenset({"builtins.list", "builtins.tuple", "builtins.set", "builtins.dict",
                                "builtins.iter", "builtins.next", "builtins.reversed", "builtins.sorted",
                                "builtins.min", "builtins.max"})

# Python spellings of the aten operators exercises forbid, and the aten ops each one dispatches to
# (on the CPU and the GPU). A spelling is forbidden when every op it can dispatch to is forbidden.
_MATMUL = ("mm", "matmul", "bmm", "dot", "mv")
SPELLINGS: dict[str, tuple] = {
    "softmax": ("_softmax", "softmax"), "Softmax": ("_softmax", "softmax"),
    "log_softmax": ("_log_softmax", "log_softmax"), "LogSoftmax": ("_log_softmax", "log_softmax"),
    "layer_norm": ("native_layer_norm",), "LayerNorm": ("native_layer_norm",),
    "gelu": ("gelu",), "GELU": ("gelu",),
    "scaled_dot_product_attention": (
        "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
        "_scaled_dot_product_attention_math", "_efficient_attention_forward", "_flash_attention_forward"),
    "matmul": _MATMUL, "@": _MATMUL, "__matmul__": _MATMUL, "__rmatmul__": _MATMUL,
    "einsum": ("bmm", "mm"), "tensordot": ("mm",), "inner": ("mm", "dot"), "dot": ("dot",), "mv": ("mv",),
    "mm": ("mm",), "bmm": ("bmm",), "baddbmm": ("baddbmm",), "addmm": ("addmm",), "addmv": ("addmv",),
    "chain_matmul": ("mm",), "multi_dot": ("mm",),
    "linear": ("addmm", "mm", "bmm"), "Linear": ("addmm", "mm", "bmm"),
    "_addmm_activation": ("_addmm_activation", "addmm"),
    "cross_entropy": ("_log_softmax", "nll_loss_forward", "nll_loss2d_forward", "cross_entropy_loss"),
    "CrossEntropyLoss": ("_log_softmax", "nll_loss_forward", "nll_loss2d_forward", "cross_entropy_loss"),
    "nll_loss": ("nll_loss_forward", "nll_loss2d_forward", "nll_loss", "nll_loss_nd"),
    "NLLLoss": ("nll_loss_forward", "nll_loss2d_forward", "nll_loss", "nll_loss_nd"),
    "logsumexp": ("logsumexp",),
}
SPELLINGS["MultiheadAttention"] = SPELLINGS["multi_head_attention_forward"] = SPELLINGS["scaled_dot_product_attention"]
# A spelling given alone also forbids its other forms (``{"softmax"}`` covers ``nn.Softmax``).
_ALSO = {"softmax": ("Softmax",), "log_softmax": ("LogSoftmax",), "layer_norm": ("LayerNorm",),
         "gelu": ("GELU",), "linear": ("Linear",), "cross_entropy": ("CrossEntropyLoss",), "nll_loss": ("NLLLoss",),
         "scaled_dot_product_attention": ("MultiheadAttention", "multi_head_attention_forward"),
         "matmul": ("@", "__matmul__", "__rmatmul__")}
# Roots whose functions compute outside torch's dispatcher (the operator recorder never sees them).
_COMPUTE_ROOTS = ("torch", "numpy", "scipy")


def forbidden_calls_for(spec) -> dict[str, str]:
    """{python spelling or aten name: reason} for an exercise spec, or its ``Rules`` (``allowed_ops``, ``why``).

    Aten names from ``why`` are matched on torch paths (``torch.sum``, ``torch.ops.aten.sum``); the
    spellings of ``SPELLINGS`` also as methods (``x.softmax``), nn classes and ``@``. Empty when the
    exercise allows every operator (``allowed_ops`` None).
    """
    rules = getattr(spec, "rules", spec)
    allowed = getattr(rules, "allowed_ops", None)
    if allowed is None:
        return {}
    hints = dict(getattr(rules, "why", None) or {})
    default = "it is not among the operators this exercise allows"
    out = {op: why for op, why in hints.items() if op not in allowed}
    for spelling, ops in SPELLINGS.items():
        if not set(ops) & set(allowed):
            out.setdefault(spelling, next((hints[o] for o in ops if o in hints), default))
    return out


def kernel_names(source: str) -> set[str]:
    """The functions of ``source`` decorated by Triton (``@triton.jit``, ``@triton.constexpr_function``...),
    and the names bound to Triton's decorator called as a function (``exp_jit = triton.jit(_exp)``)."""
    tree = parse(source)
    scopes = _Scopes(tree)
    wrapped, bound = _triton_wrapped(tree, scopes)
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and (_triton_decorated(n, scopes) or n.name in wrapped)} | bound


def _triton_wrapped(tree: ast.Module, scopes) -> tuple[set, set]:
    """Triton's decorator applied as a function (``exp_jit = triton.jit(_exp_impl)``, as valid as
    ``@triton.jit``) to a def of the module, wherever the call is (an annotated assignment, a ``try``, a
    cached factory, a dict of kernels): the names of the module-level defs it wraps, and the module-level
    names bound to the results."""
    defs = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    wrapped = {node.args[0].id for node in ast.walk(tree)
               if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name)
               and node.args[0].id in defs and _triton_callable(node.func, scopes)
               and scopes.paths(node.args[0], scopes.module) == {_OWN}}
    bound = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        value = getattr(node, "value", None)
        while isinstance(value, ast.Call) and _triton_callable(value.func, scopes) and value.args:
            if isinstance(value.args[0], ast.Name) and value.args[0].id in wrapped:
                bound.update(t.id for t in targets if isinstance(t, ast.Name))
                break
            value = value.args[0]  # triton.heuristics(...)(triton.jit(f))
    return wrapped, bound


def _triton_callable(expr, scopes) -> bool:
    """Whether ``expr`` is one of Triton's decorators: named by a path of Triton's, called for its options
    (``triton.jit(do_not_specialize=...)``), or a module-level name bound to ``functools.partial`` of one."""
    if isinstance(expr, ast.Call):
        expr = expr.func
    if any(_is_external(p) and p.startswith("triton.") for p in scopes.paths(expr, scopes.module)):
        return True
    return isinstance(expr, ast.Name) and expr.id in _triton_partials(scopes)


def _triton_partials(scopes) -> frozenset:
    """Module-level names bound to ``functools.partial(<a decorator of Triton's>, ...)``."""
    found = getattr(scopes, "triton_partials", None)
    if found is None:
        found = set()
        for node in scopes.module.node.body:
            value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            if (isinstance(value, ast.Call) and value.args
                    and scopes.paths(value.func, scopes.module) == {"functools.partial"}
                    and any(_is_external(p) and p.startswith("triton.")
                            for p in scopes.paths(value.args[0], scopes.module))):
                found.update(t.id for t in targets if isinstance(t, ast.Name))
        scopes.triton_partials = found = frozenset(found)
    return found


def course_kernels() -> frozenset:
    """The Triton functions of the course's package (``course.triton_compat.dot``), which a learner's
    kernels may call like their own: dotted names, read from the course's source."""
    global _COURSE_KERNELS
    if _COURSE_KERNELS is None:
        from pathlib import Path

        folder = Path(__file__).resolve().parents[1] / "course"
        _COURSE_KERNELS = frozenset(f"course.{path.stem}.{name}" for path in sorted(folder.glob("*.py"))
                                    for name in kernel_names(path.read_text(encoding="utf-8")))
    return _COURSE_KERNELS


_COURSE_KERNELS = None


def from_imports(nodes, package: str | None) -> list[tuple[str, str, str]]:
    """(module, name, name bound) of the ``from ... import`` statements among ``nodes``, a relative one
    resolved from ``package`` (the package a module beside the submission is in; None: none is resolved)."""
    out = []
    for node in nodes:
        if not isinstance(node, ast.ImportFrom) or (node.level and package is None):
            continue
        base = node.module or ""
        if node.level:
            parts = package.split(".") if package else []
            parts = parts[:len(parts) - (node.level - 1)] if node.level > 1 else parts
            base = ".".join([*parts, *([node.module] if node.module else [])])
        out += [(base, a.name, a.asname or a.name) for a in node.names]
    return out


def _triton_decorated(node, scopes, scope=None) -> bool:
    """Whether a def carries one of Triton's decorators, its names read in ``scope`` (the module's by default)."""
    return any(_is_external(p) and p.startswith("triton.") for d in node.decorator_list
               for p in scopes.paths(d.func if isinstance(d, ast.Call) else d, scope or scopes.module)) or any(
        isinstance(d, ast.Name) and d.id in _triton_partials(scopes) for d in node.decorator_list)


def kernel_definitions(source: str) -> dict[int, ast.FunctionDef]:
    """The defs the audit judges as Triton kernels (its kernel rules apply to their bodies), by the first
    line of each definition (its first decorator's, else the ``def``'s: the ``co_firstlineno`` of the
    function it makes). What Triton may compile or interpret is exactly these texts
    (``autograder.kernel_source``)."""
    tree = parse(source)
    scopes = _Scopes(tree)
    wrapped, _ = _triton_wrapped(tree, scopes)
    out = {}
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        enclosing = scopes.of[node].parent
        if _triton_decorated(node, scopes, enclosing) or (enclosing is scopes.module and node.name in wrapped):
            out[min([node.lineno, *(d.lineno for d in node.decorator_list)])] = node
    return out


@functools.lru_cache(maxsize=4096)
def resolve_path(path: str):
    """The object a dotted path of Triton's names (``triton.language.softmax``), imported as Python would, or
    None: what a spelling is, to compare by identity. Only Triton's own modules are imported (a path the
    submission spells never makes the grader import anything else)."""
    parts = path.split(".")
    if parts[0] != "triton":
        return None
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except Exception:  # noqa: BLE001  (not a module: an attribute of a shorter path)
            continue
        try:
            for attr in parts[i:]:
                obj = getattr(obj, attr)
        except Exception:  # noqa: BLE001
            return None
        from course.interpreter import unpatched

        return unpatched(obj)  # after an interpreted launch, core's builtins may still be its stand-ins
    return None


# What a Triton kernel may call besides Triton's own functions and the kernels of the submission: the
# Python builtins Triton's compiler implements (triton/compiler/code_generator.py, builtin_namespace).
_KERNEL_BUILTINS = frozenset(f"builtins.{n}" for n in ("len", "list", "range", "float", "int", "isinstance",
                                                       "getattr", "hasattr", "print", "min", "max"))
_KERNEL_ATTRIBUTE = ("a kernel's values have the attributes and methods of Triton's language (dtype, shape, "
                     "to, sum...); anything else, such as a value's handle (Triton's own representation of it: "
                     "under the interpreter, the host's copy of the data), is not the language")


@functools.cache
def kernel_value_attributes() -> frozenset:
    """The attributes a value inside a Triton kernel has in Triton's language, read from Triton's own classes
    (``triton.language.core``: tensors, constexprs, tuples, dtypes, descriptors) and their instances: every
    public name but ``handle``, the value's representation (an IR value; the host's array when interpreted)."""
    try:
        import triton.language as tl
        import triton.language.core as core
    except Exception:  # noqa: BLE001  (without Triton no kernel runs)
        return frozenset()
    names = set()
    bases = tuple(getattr(core, n) for n in ("base_value", "base_type", "tensor", "dtype", "constexpr") if hasattr(core, n))
    for kind in vars(core).values():
        if isinstance(kind, type) and issubclass(kind, bases):
            names.update(n for n in dir(kind) if not n.startswith("_"))
    samples = (lambda: tl.tensor(None, tl.block_type(tl.float32, [2])), lambda: tl.float32,
               lambda: tl.pointer_type(tl.float32), lambda: tl.block_type(tl.float32, [2]), lambda: tl.constexpr(1))
    for make in samples:
        try:
            names.update(n for n in vars(make()) if not n.startswith("_"))
        except Exception:  # noqa: BLE001  (another Triton's constructors)
            pass
    return frozenset(names - {"handle"})


_KERNEL_PYTHON = ("a Triton kernel may call only Triton functions (@triton.jit, triton.language), the "
                  "builtins Triton compiles (range, min, max, ...) and its values' methods: on a GPU nothing "
                  "else compiles, and under the interpreter (the CPU) other Python runs on the host's copy of "
                  "the data, outside the kernel")


# CPython 3.11 keeps the AST converter's recursion count per interpreter and resets it from the calling
# thread's stack depth, so two threads parsing at once can fail with "SystemError: AST constructor recursion
# depth mismatch" (python/cpython#106905). The grader audits exercises side by side in threads: every parse
# of the grader goes through this one lock.
_PARSE_LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    """``ast.parse``, one thread at a time. Source Python cannot read raises SyntaxError, whatever the parser
    raised: nesting deeper than its stack (``1+1+...`` two hundred thousand times: RecursionError, or
    MemoryError), a null byte (ValueError before Python 3.12). Python could not run it either; the learner
    is told why, and no grading crashes on it."""
    with _PARSE_LOCK:
        try:
            tree = ast.parse(source, filename=filename, mode=mode)
        except (RecursionError, MemoryError) as exc:
            raise SyntaxError(f"nested too deeply for Python to read ({type(exc).__name__})") from None
        except ValueError as exc:
            raise SyntaxError(str(exc)) from None
    depth, line = _depth(tree)
    if depth > MAX_DEPTH:
        error = SyntaxError(f"nested {depth} levels deep, more than the grader reads ({MAX_DEPTH}): split the "
                            "expression into named parts")
        error.lineno = line
        raise error
    return tree


# The audit walks a tree recursively, a few Python frames a level: Python's parser takes ~1000 levels of
# ``1+1+...`` (3.11), the audit's walks ran out of stack at ~250 and the grading failed with a traceback.
# Honest code nests a few dozen levels; past this the learner is told, as for source Python cannot read.
MAX_DEPTH = 150


def _depth(tree: ast.AST) -> tuple[int, int | None]:
    """(how many levels of nodes ``tree`` has, the line of its deepest node), walked without recursion."""
    deepest, line, todo = 0, None, [(tree, 1, None)]
    while todo:
        node, level, at = todo.pop()
        at = getattr(node, "lineno", at)
        if level > deepest:
            deepest, line = level, at
        todo.extend((child, level + 1, at) for child in ast.iter_child_nodes(node))
    return deepest, line


def audit(source: str, *, allow: Iterable[str] = frozenset(), forbidden_calls: Iterable[str] | Mapping = frozenset(),
          entry: str | None = None, kernels_beside: Iterable[str] = frozenset(),
          kernel_library: Mapping = {}, outside_torch: bool = False) -> list[Finding]:
    """Findings for ``source`` (which must parse: ``submission.load`` guarantees it), sorted by line.

    ``allow``: feature names from ``FEATURES`` the exercise allows. ``forbidden_calls``: python spellings
    or aten names (a mapping gives each its reason), e.g. ``forbidden_calls_for(spec)``. ``entry``: the
    exercise's entry point; forbidden calls are then reported only in code it can reach (the functions
    and classes it names, transitively), so another exercise's code in the same notebook does not count.
    ``kernels_beside``: dotted names of the Triton functions of modules beside the submission
    (``kernel_names``), which its kernels may call. ``kernel_library``: {dotted path of a Triton library
    function: why} for those that do the exercise's work inside a kernel (``Rules.kernel_library``).
    ``outside_torch``: the exercise is about tensors, so a numeric library outside torch (``NUMERIC_LIBRARIES``)
    may not work on values in graded code (rule outside-torch).
    """
    unknown = set(allow) - set(FEATURES)
    if unknown:
        raise ValueError(f"unknown feature(s) {sorted(unknown)}; known: {sorted(FEATURES)}")
    tree = parse(source)
    if not isinstance(forbidden_calls, Mapping):
        forbidden_calls = {name: "this exercise forbids it" for name in forbidden_calls}
    forbidden_calls = dict(forbidden_calls)
    for name, why in list(forbidden_calls.items()):
        for other in _ALSO.get(name, ()):
            forbidden_calls.setdefault(other, why)
    auditor = _audited(tree, allow, forbidden_calls, entry, kernels_beside, kernel_library, outside_torch)
    if auditor.statements:  # audited again with each literal statement as module code, where timeit runs it
        blocks = [ast.copy_location(ast.If(test=ast.Constant(True), body=body, orelse=[]), body[0])
                  for _, body in auditor.statements if body]
        tree = ast.Module(body=[*tree.body, *blocks], type_ignores=[])
        auditor = _audited(tree, allow, forbidden_calls, entry, kernels_beside, kernel_library, outside_torch)
    seen, out = set(), []
    for f in sorted(auditor.findings, key=lambda f: f.line):  # stable: the first report of a line wins
        if (f.line, f.rule) not in seen:
            seen.add((f.line, f.rule))
            out.append(f)
    return out


def _audited(tree, allow, forbidden_calls, entry, kernels_beside, kernel_library, outside_torch) -> "_Auditor":
    scopes = _Scopes(tree)
    scopes.entry = entry  # called by the grader with tensors: its parameters are never configuration
    reachable = _reachable(tree, entry) if (entry and (forbidden_calls or kernel_library)) else None
    auditor = _Auditor(scopes, frozenset(allow), forbidden_calls, reachable)
    auditor.graded = _reachable(tree, entry) if entry else None
    auditor.kernels_beside, auditor.kernel_library = frozenset(kernels_beside), dict(kernel_library)
    auditor.outside_torch = outside_torch
    auditor.visit(tree)
    return auditor


def literal_statements(source: str) -> list[str]:
    """The string literals ``source`` hands to a statement runner (``timeit.timeit("f(x)", ...)``, torch's
    ``Timer(stmt="f(x)")``): read and audited as code, the only statement text the worker lets them run."""
    return [text for text, _ in _audited(parse(source), (), {}, None, (), {}, True).statements]


def violations(findings: Iterable[Finding], where=None) -> list[str]:
    """Findings as the grader's violation strings ('cell 7, line 3: ...')."""
    return [f.describe(where) for f in findings]


# ------------------------------------------------------------------------------------------ what a path is

# Modules never imported to resolve a path: those that act when imported, and those refused anyway.
_NOT_IMPORTED = frozenset({"antigravity", "this", "idlelib", "turtle", "turtledemo", "tkinter", "__main__",
                           "__hello__", "__phello__"})
_UNRESOLVED = object()
_RESOLVE_LOCK = threading.RLock()


def _installed_module(top: str):
    """The installed module ``top`` (imported here if it is not yet), or None: a module that is not installed
    (the learner's own, one beside the submission, the repository's) is never imported by the grader."""
    import importlib
    import importlib.util
    import sys

    if top in sys.modules:
        return sys.modules[top]
    if top in _NOT_IMPORTED or top in FORBIDDEN_MODULES or not top.isidentifier():
        return None
    from autograder.imports import INSTALLED

    try:
        spec = importlib.util.find_spec(top)
        where = spec.origin if spec is not None and spec.has_location else None
        if where is None and spec is not None and spec.submodule_search_locations:
            where = next(iter(spec.submodule_search_locations))
        if where is None or not os.path.realpath(where).startswith(INSTALLED):
            return None
        return importlib.import_module(top)
    except Exception:  # noqa: BLE001  (an installed module that cannot be imported here: judged by its spelling)
        return None


def _walk(path: str):
    """(canonical path, object or _UNRESOLVED) of a dotted path: the installed module it starts from is
    imported and walked, each module met renamed by what it is (``torch.os`` is ``os``, ``torch.builtins``
    ``builtins``). The walk goes through modules and classes only; the rest is kept as spelled."""
    import importlib
    import types

    parts = path.split(".")
    obj = _installed_module(parts[0])
    if obj is None:
        return path, _UNRESOLVED
    canon = obj.__name__.split(".") if isinstance(obj, types.ModuleType) else [parts[0]]
    for i, attr in enumerate(parts[1:], start=1):
        if not isinstance(obj, (types.ModuleType, type)):
            return ".".join(canon + parts[i:]), _UNRESOLVED
        try:
            nxt = getattr(obj, attr)
        except Exception:  # noqa: BLE001
            nxt = _UNRESOLVED
            if isinstance(obj, types.ModuleType):
                try:  # a submodule not imported yet (torch.hub before anyone asked for it)
                    nxt = importlib.import_module(f"{obj.__name__}.{attr}") if _installed_module(parts[0]) else nxt
                except Exception:  # noqa: BLE001
                    pass
        if nxt is _UNRESOLVED:
            return ".".join(canon + parts[i:]), _UNRESOLVED
        canon = nxt.__name__.split(".") if isinstance(nxt, types.ModuleType) else _home(nxt) or canon + [attr]
        obj = nxt
    return ".".join(canon), obj


def _home(obj) -> list[str] | None:
    """Where a function or class re-exported by another package is defined, when that is a library the rules
    judge by name (``pylab.asarray`` is ``numpy.asarray``: matplotlib's pylab does ``from numpy import *``),
    as a dotted path's parts; None for the rest, which keep the path they were reached by."""
    try:
        module, name = getattr(obj, "__module__", None), getattr(obj, "__name__", None)
    except Exception:  # noqa: BLE001  (an object whose attributes raise: judged by its spelling)
        return None
    if not (callable(obj) and type(module) is str and type(name) is str):
        return None
    if module.partition(".")[0] in NUMERIC_LIBRARIES:
        return [*module.split("."), name]
    return None


_KNOWN: dict | None = None  # id(object) -> (the path a rule names it by, the object)
# Rule paths that name modules, left out of the table (it holds functions and classes, never a module): walking
# them imported hundreds of modules in every grading process, 1.3 s of the table's 2 s of CPU (torch.distributed's
# tensor operator tables; torch.sparse's Triton operators, which import torch._dynamo). Code that spells a path
# through them is walked as any other (tests/test_audit.py checks that each is a module and a rule's path).
_MODULES_NOT_WALKED = frozenset({"torch.distributed.tensor._ops", "torch.sparse._triton_ops"})


def _known() -> dict:
    """The objects the rules name, by identity: a path that reaches one of them is judged as its rule's path
    (``torch.serialization.load`` is ``torch.load``, ``torch.builtins.exec`` is ``builtins.exec``)."""
    global _KNOWN
    if _KNOWN is None:
        import types

        known = {}
        rule_paths = [*_PATH_RULES, *_UNPICKLERS, *_OPENERS, *_IN_PLACE, *_STATEMENT_RUNNERS, "importlib.import_module",
                      *(f"builtins.{n}" for n in _DYNAMIC_BUILTINS)]
        for path in rule_paths:
            if path in _MODULES_NOT_WALKED:
                continue
            _, obj = _walk(path)
            # functions and classes only: a bound method or a value is a new object at every lookup
            if isinstance(obj, (types.FunctionType, types.BuiltinFunctionType, type)):
                known.setdefault(id(obj), (path, obj))
        _KNOWN = known
    return _KNOWN


@functools.lru_cache(maxsize=4096)
def canonical(path: str) -> str:
    """What a dotted path IS, as a dotted path: the object it reaches in the installed packages, named as the
    rules name it (``torch.os.fork`` -> ``os.fork``, ``torch.serialization.load`` -> ``torch.load``); paths
    that reach nothing installed (the learner's own modules) are kept as spelled."""
    if path.startswith("<"):
        return path
    with _RESOLVE_LOCK:
        spelled, obj = _walk(path)
        hit = _known().get(id(obj)) if obj is not _UNRESOLVED else None
    return hit[0] if hit is not None and hit[1] is obj else spelled


# ------------------------------------------------------------------------------------------ name resolution

_OWN, _LOCAL = "<own>", "<local>"  # a def/class of the submission; a value made at run time (parameter, call)
_SCOPE_NODES = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _is_external(path: str) -> bool:
    return not path.startswith("<") or path == "<type>"


class _Scope:
    def __init__(self, node, parent):
        self.node, self.parent = node, parent
        self.bindings: dict[str, set] = {}
        self.pending: list = []            # (name, value expression) resolved by _Scopes.settle
        self.declared_global: set = set()
        self.star: list[str] = []          # modules of `from m import *`

    def bind(self, name, paths):
        self.bindings.setdefault(name, set()).update(paths)


class _Scopes:
    """Every scope's names and what each may hold: external dotted paths (through imports and aliases),
    the submission's own defs/classes, or run-time values. Names bound several ways keep every way.

    Values flow, conservatively, through assignments, containers (literals, item stores, ``append``),
    attributes (``self.t = torch`` makes every ``.t`` possibly ``torch``), class bodies and the return
    values of the submission's own functions.
    """

    def __init__(self, tree: ast.Module):
        self.filling: str | None = None  # the module-level table whose store ``_pure`` is judging (``_read_back``)
        self.judging: set = set()        # (name, scope) whose values ``_pure`` is judging: a name met again defers
        self.of: dict[ast.AST, _Scope] = {}
        self.returns: dict[str, list] = {}      # own function name -> [(returned expression, its scope node)]
        self.attr_paths: dict[str, set] = {}    # attribute name -> external paths ever stored under it
        self.pending_attrs: list = []           # (attribute name, value expression, scope)
        self.pending_items: list = []           # (container name, value expression, scope)
        self._active: set = set()
        self.module = self._collect(tree, None)
        self.settle()

    # -- collecting bindings
    def _collect(self, node, parent) -> _Scope:
        scope = _Scope(node, parent)
        self.of[node] = scope
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            for arg in a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]:
                scope.bind(arg.arg, {_LOCAL})
        body = node.body if isinstance(node.body, list) else [node.body]
        for child in body:
            self._walk_binding(child, scope)
        return scope

    def _walk_binding(self, node, scope):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            scope.bind(node.name, {_OWN})
            outer = node.decorator_list + getattr(node, "bases", []) + [k.value for k in getattr(node, "keywords", [])]
            if not isinstance(node, ast.ClassDef):
                outer += node.args.defaults + [d for d in node.args.kw_defaults if d]
                self.returns.setdefault(node.name, []).extend((r, node) for r in _returned(node))
            for expr in outer:
                self._walk_binding(expr, scope)
            self._collect(node, scope)
            return
        if isinstance(node, ast.Lambda):
            for default in node.args.defaults + [d for d in node.args.kw_defaults if d]:
                self._walk_binding(default, scope)
            self._collect(node, scope)
            return
        if isinstance(node, ast.Import):
            for a in node.names:
                top = a.name.split(".")[0]
                scope.bind(a.asname or top, {a.name if a.asname else top})
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            for a in node.names:
                if a.name == "*":
                    scope.star.append(module)
                else:
                    scope.bind(a.asname or a.name, {f"{module}.{a.name}" if node.level == 0 else _LOCAL})
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            scope.declared_global.update(node.names)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                self._bind_target(target, node.value, scope)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            self._bind_target(node.target, node.value, scope)
        elif isinstance(node, ast.NamedExpr):
            self._bind_target(node.target, node.value, scope)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            self._bind_target(node.target, ("iter", node.iter), scope)
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            self._bind_target(node.optional_vars, ("call", node.context_expr), scope)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            scope.bind(node.name, {_LOCAL})
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            scope.bind(node.name, {_LOCAL})
        elif isinstance(node, ast.MatchMapping) and node.rest:
            scope.bind(node.rest, {_LOCAL})
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _FILLERS
              and isinstance(node.func.value, ast.Name)):
            for arg in node.args + [k.value for k in node.keywords]:     # box.append(torch)
                self.pending_items.append((node.func.value.id, arg, scope))
        for child in ast.iter_child_nodes(node):
            self._walk_binding(child, scope)

    def _bind_target(self, target, value, scope):
        if isinstance(target, ast.Name):
            scope.pending.append((target.id, value))
            if isinstance(value, ast.Lambda):
                self.returns.setdefault(target.id, []).append((value.body, value))
            if isinstance(scope.node, ast.ClassDef) and not isinstance(value, tuple):
                self.pending_attrs.append((target.id, value, scope))      # class C: t = torch -> C.t
        elif isinstance(target, (ast.Tuple, ast.List)):
            values = value.elts if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts) else None
            for i, t in enumerate(target.elts):
                self._bind_target(t, values[i] if values and not isinstance(t, ast.Starred) else value, scope)
        elif isinstance(target, ast.Starred):
            self._bind_target(target.value, value, scope)
        elif isinstance(target, ast.Attribute) and not isinstance(value, tuple):
            self.pending_attrs.append((target.attr, value, scope))       # self.t = torch -> any .t
        elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and not isinstance(value, tuple):
            self.pending_items.append((target.value.id, value, scope))   # box[k] = torch -> box[...]

    # -- resolving
    def settle(self):
        """Resolve the pending bindings until nothing changes (aliases of aliases, in any order)."""
        for _ in range(10):
            before = self._size()
            for scope in self.of.values():
                for name, value in scope.pending:
                    if isinstance(value, tuple):  # ("iter", expr): its elements; ("call", expr): with ... as
                        kind, expr = value
                        paths = self.paths(expr, scope) if kind == "iter" else {_LOCAL}
                        paths = {p for p in paths if _is_external(p)} or {_LOCAL}
                    else:
                        paths = self.paths(value, scope) or {_LOCAL}
                    (self.module if name in scope.declared_global else scope).bind(name, paths)
            for attr, value, scope in self.pending_attrs:
                ext = {p for p in self.paths(value, scope) if _is_external(p)}
                if ext:
                    self.attr_paths.setdefault(attr, set()).update(ext)
            for name, value, scope in self.pending_items:
                ext = {p for p in self.paths(value, scope) if _is_external(p)}
                if ext:
                    self._home(name, scope).bind(name, ext)
            if self._size() == before:
                return

    def _size(self) -> int:
        return (sum(len(v) for s in self.of.values() for v in s.bindings.values())
                + sum(len(v) for v in self.attr_paths.values()))

    def _home(self, name, scope) -> _Scope:
        """The scope whose binding of ``name`` code in ``scope`` sees (the module when none binds it)."""
        while scope is not None:
            if name in scope.declared_global:
                return self.module
            if name in scope.bindings:
                return scope
            scope = scope.parent
        return self.module

    def values_of(self, name: str, scope: _Scope):
        """The expressions assigned to ``name`` where ``scope`` sees it; None where a parameter (or an import,
        a def) binds it, whose value nobody can read from the source."""
        while scope is not None:
            if name in scope.declared_global:
                scope = self.module
                continue
            if name in scope.bindings:
                values = [v for n, v in scope.pending if n == name]
                return values if values and len(values) == len(self._binders(name, scope)) else None
            scope = scope.parent
        return None

    def _binders(self, name, scope) -> list:
        """Every way ``scope`` binds ``name``: pending assignments, and a parameter, import or def."""
        ways = [v for n, v in scope.pending if n == name]
        node = scope.node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            if name in {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]}:
                ways.append("parameter")
        if any(p != _LOCAL for p in scope.bindings.get(name, ())) and not ways:
            ways.append("import or def")
        return ways

    def lookup(self, name: str, scope: _Scope) -> set:
        start = scope
        while scope is not None:
            if name in scope.declared_global:
                scope = self.module
                continue
            # a class body's names are not visible from the functions defined in it
            if name in scope.bindings and (scope is start or not isinstance(scope.node, ast.ClassDef)):
                return scope.bindings[name]
            scope = scope.parent
        found = {f"{m}.{name}" for m in self.module.star}
        if hasattr(builtins, name):
            found.add(f"builtins.{name}")
        return found

    def paths(self, expr, scope) -> set:
        """What ``expr`` may evaluate to: external dotted paths, or _OWN / _LOCAL."""
        if isinstance(expr, ast.Name):
            return {canonical(p) if _is_external(p) else p for p in self.lookup(expr.id, scope)}
        if isinstance(expr, ast.Attribute):
            out = set()
            for p in self.paths(expr.value, scope):
                if p == "<type>":
                    out.add(p)                      # type(x).attr: still the class
                elif _is_external(p):
                    out.add(canonical(f"{p}.{expr.attr}"))
                else:                               # an attribute of the learner's own object or a value
                    out.add(_LOCAL)
                    out.update(self.attr_paths.get(expr.attr, ()))
            return out
        if isinstance(expr, ast.Subscript):
            if "sys.modules" in self.paths(expr.value, scope) and isinstance(expr.slice, ast.Constant):
                return {str(expr.slice.value)}
            return self.paths(expr.value, scope)  # an element of a container keeps the container's paths
        if isinstance(expr, (ast.List, ast.Tuple, ast.Set)):
            return set().union(*(self.paths(e, scope) for e in expr.elts)) if expr.elts else {_LOCAL}
        if isinstance(expr, ast.Dict):
            return set().union(*(self.paths(v, scope) for v in expr.values)) if expr.values else {_LOCAL}
        if isinstance(expr, ast.IfExp):
            return self.paths(expr.body, scope) | self.paths(expr.orelse, scope)
        if isinstance(expr, ast.BoolOp):
            return set().union(*(self.paths(v, scope) for v in expr.values))
        if isinstance(expr, (ast.NamedExpr, ast.Starred, ast.Await)):
            return self.paths(expr.value, scope)
        if isinstance(expr, ast.Lambda):
            return {_OWN}
        if isinstance(expr, ast.Call):
            return self._call_paths(expr, scope)
        return {_LOCAL}

    def _call_paths(self, call, scope) -> set:
        fn = self.paths(call.func, scope)
        args = call.args
        if "builtins.getattr" in fn and len(args) >= 2:
            base = {p for p in self.paths(args[0], scope) if _is_external(p)}
            name = args[1].value if isinstance(args[1], ast.Constant) else "<dynamic>"
            return {canonical(f"{p}.{name}") for p in base} or {_LOCAL}
        if fn & {"builtins.__import__", "importlib.import_module"} and args and isinstance(args[0], ast.Constant):
            return {canonical(str(args[0].value))}
        if "builtins.type" in fn and len(args) == 1:
            return {"<type>"}
        if fn & _PASSTHROUGH_CALLS and args:
            return set().union(*(self.paths(a, scope) for a in args))
        if _OWN in fn and isinstance(call.func, ast.Name) and call.func.id not in self._active:
            self._active.add(call.func.id)           # what the learner's own function hands back
            try:
                ext = {p for expr, node in self.returns.get(call.func.id, ())
                       for p in self.paths(expr, self.of.get(node, scope)) if _is_external(p)}
            finally:
                self._active.discard(call.func.id)
            return ext | {_LOCAL}
        return {_LOCAL}


# ------------------------------------------------------------------------------------------ configuration values

# Attributes and methods of a tensor that are numbers about its layout, not its values.
_LAYOUT_ATTRS = frozenset({"shape", "dtype", "ndim", "device", "is_cuda", "itemsize", "layout", "requires_grad"})
_LAYOUT_METHODS = frozenset({"size", "stride", "numel", "dim", "element_size", "get_device", "is_contiguous",
                             "data_ptr", "nelement"})
_PURE_BUILTINS = frozenset(f"builtins.{n}" for n in ("int", "float", "bool", "str", "min", "max", "len", "abs",
                                                      "round", "tuple", "divmod", "range", "sorted", "hash", "dict",
                                                      "list", "set", "frozenset", "zip", "enumerate", "sum"))


def _pure(scopes: "_Scopes", expr, scope, depth: int = 0) -> bool:
    """Whether ``expr`` is configuration: made from constants, shapes, strides, dtypes, module constants and
    Triton's helpers (``triton.next_power_of_2``, ``triton.Config``), never from a tensor's values. A cache
    keyed and filled with such values (launch configurations) can hold no answer."""
    if depth > 16:  # (a device property reached through a few module-level names takes a dozen steps)
        return False
    pure = lambda e: _pure(scopes, e, scope, depth + 1)  # noqa: E731
    if isinstance(expr, (ast.Constant, ast.JoinedStr)):
        return True
    if isinstance(expr, (ast.Tuple, ast.List, ast.Set)):
        return all(pure(e) for e in expr.elts)
    if isinstance(expr, ast.Dict):
        return all(pure(e) for e in expr.keys + expr.values if e is not None)
    if isinstance(expr, ast.BinOp):
        return pure(expr.left) and pure(expr.right)
    if isinstance(expr, ast.UnaryOp):
        return pure(expr.operand)
    if isinstance(expr, (ast.BoolOp, ast.Compare)):
        return all(pure(e) for e in (expr.values if isinstance(expr, ast.BoolOp) else [expr.left, *expr.comparators]))
    if isinstance(expr, ast.IfExp):
        return pure(expr.test) and pure(expr.body) and pure(expr.orelse)
    if _read_back(scopes, expr):  # table[key], table.get(key): what the table's stores put there
        return all(pure(k) for k in ([expr.slice] if isinstance(expr, ast.Subscript) else expr.args))
    if isinstance(expr, ast.Subscript):
        return pure(expr.value) and pure(expr.slice)
    if isinstance(expr, ast.Slice):
        return all(pure(e) for e in (expr.lower, expr.upper, expr.step) if e is not None)
    if isinstance(expr, ast.Attribute):
        if expr.attr in _LAYOUT_ATTRS or _compiled_ahead(scopes, expr, scope):
            return True
        if (not expr.attr.startswith("__") and scopes.paths(expr.value, scope) != {_OWN}
                and not isinstance(expr.value, ast.Attribute) and pure(expr.value)):
            return True  # DEVICE.index, a device's property of a value that is configuration itself
        paths = scopes.paths(expr, scope)
        return bool(paths) and all(_is_external(p) and p != "<type>" for p in paths)  # torch.float16, tl.int32
    if isinstance(expr, ast.Call):
        if _compiled_ahead(scopes, expr, scope):
            return True
        args = all(pure(a) for a in expr.args) and all(pure(k.value) for k in expr.keywords)
        if isinstance(expr.func, ast.Attribute) and expr.func.attr in _LAYOUT_METHODS:
            return args
        fn = scopes.paths(expr.func, scope)
        if fn and all(p in _PURE_BUILTINS or p.startswith(("triton.", "math.")) or p == _OWN
                      or p.split(".")[0] in NUMERIC_LIBRARIES for p in fn):  # np.log2(N): arithmetic on sizes
            return args
        return False
    if isinstance(expr, ast.Name):
        values = scopes.values_of(expr.id, scope)
        if values is None:
            # the submission's own def or class (a compiled kernel kept by its block size), or a parameter
            # that every call of its function fills with configuration
            return scopes.paths(expr, scope) == {_OWN} or _pure_parameter(scopes, expr.id, scope, depth)
        key = (expr.id, id(scope))
        if key in scopes.judging:  # occupancy = min(occupancy, ...): the name's other values decide
            return True
        scopes.judging.add(key)
        try:
            return all(
                (pure(v[1]) if v[0] == "iter" else False) if isinstance(v, tuple) else pure(v) for v in values)
        finally:
            scopes.judging.discard(key)
    return False


def _compiled_ahead(scopes: "_Scopes", expr, scope, depth: int = 0) -> bool:
    """``kernel.warmup(...)`` of the submission's own kernel, a name only ever bound to one, or an attribute of
    it (``compiled.n_regs``, ``compiled.metadata.shared``): compiling reads the arguments' types and shapes,
    never their values, so the compiled kernel (Triton's tutorial keeps one per block size) holds no answer."""
    if depth > 4:
        return False
    if isinstance(expr, ast.Attribute):
        return _compiled_ahead(scopes, expr.value, scope, depth + 1)
    if isinstance(expr, ast.Call):
        return (isinstance(expr.func, ast.Attribute) and expr.func.attr == "warmup"
                and scopes.paths(expr.func.value, scope) == {_OWN})
    if isinstance(expr, ast.Name):
        values = scopes.values_of(expr.id, scope)
        return bool(values) and any(_compiled_ahead(scopes, v, scope, depth + 1) for v in values) and all(
            not isinstance(v, tuple) and (_compiled_ahead(scopes, v, scope, depth + 1) or _read_back(scopes, v))
            for v in values)
    return False


def _read_back(scopes: "_Scopes", expr) -> bool:
    """``table[key]`` or ``table.get(key)`` of the module-level table a store is being judged for
    (``kernels`` while judging ``kernels[b] = (compiled, n)``): what it holds, judged by its stores."""
    table = expr.value if isinstance(expr, ast.Subscript) else (
        expr.func.value if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute)
        and expr.func.attr == "get" else None)
    return isinstance(table, ast.Name) and table.id == scopes.filling


def _call_sites(scopes: "_Scopes", name: str) -> tuple[list, bool]:
    """The calls ``name(...)`` anywhere in the source, each with the scope it runs in, and whether ``name`` is
    only ever called there (never passed on, stored or decorated, so no other code can call it)."""
    sites, only_called = [], True
    for node, scope in scopes.of.items():
        todo = list(node.body if isinstance(node.body, list) else [node.body])
        while todo:
            n = todo.pop()
            if isinstance(n, _SCOPE_NODES):
                todo.extend(getattr(n, "decorator_list", []))  # its body is its own scope's
                continue
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name:
                sites.append((n, scope))
                todo.extend(n.args + [k.value for k in n.keywords])
                continue
            if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load):
                only_called = False
            todo.extend(ast.iter_child_nodes(n))
    return sites, only_called


def _pure_parameter(scopes: "_Scopes", name: str, scope, depth: int) -> bool:
    """Whether ``name`` is a parameter of a plain function that the entry point's code alone calls, every
    time with configuration in its place (``settings(N)`` filling a table keyed by ``n``)."""
    while scope is not None and name not in scope.bindings and name not in scope.declared_global:
        scope = scope.parent
    fn = getattr(scope, "node", None)
    if (not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or name in scope.declared_global
            or isinstance(scope.parent.node, ast.ClassDef) or fn.name == getattr(scopes, "entry", None)
            or any(n == name for n, _ in scope.pending)):
        return False
    a = fn.args
    positional = [x.arg for x in a.posonlyargs + a.args]
    if name not in positional + [x.arg for x in a.kwonlyargs]:
        return False  # *args, **kwargs
    defaults = dict(zip(positional[len(positional) - len(a.defaults):], a.defaults))
    defaults.update((x.arg, d) for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None)
    sites, only_called = _call_sites(scopes, fn.name)
    if not sites or not only_called:
        return False  # called from outside the source (the grader, a hook): its arguments are unknown
    for call, where in sites:
        if any(isinstance(x, ast.Starred) for x in call.args) or any(k.arg is None for k in call.keywords):
            return False
        i = positional.index(name) if name in positional else len(call.args)
        given = call.args[i] if i < len(call.args) else next((k.value for k in call.keywords if k.arg == name), None)
        if given is None:
            if name not in defaults or not _pure(scopes, defaults[name], scope.parent, depth + 1):
                return False
        elif not _pure(scopes, given, where, depth + 1):
            return False
    return True


_FILLERS = frozenset({"append", "extend", "insert", "add", "update", "setdefault", "appendleft"})


def _returned(fn) -> list:
    """The expressions ``fn`` returns (not those of the functions nested in it)."""
    out, todo = [], list(fn.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Return) and node.value is not None:
            out.append(node.value)
        todo.extend(ast.iter_child_nodes(node))
    return out


# ------------------------------------------------------------------------------------------ reachability

def _module_bindings(tree: ast.Module) -> dict[str, list]:
    """Top-level name -> the statements that bind it (descending into if/try/with, not into defs)."""
    out: dict[str, list] = {}

    def add(name, node):
        out.setdefault(name, []).append(node)

    def walk(stmts):
        for node in stmts:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                add(node.name, node)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name):
                            add(n.id, node)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for a in node.names:
                    add((a.asname or a.name).split(".")[0], node)
            elif (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
                  and isinstance(node.value.func, ast.Attribute) and isinstance(node.value.func.value, ast.Name)):
                # kernel.add_pre_run_hook(hook): a method call on a name changes what that name does, so
                # reaching the kernel reaches the statement (and the hook it names)
                add(node.value.func.value.id, node)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                handing.append(node)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            for field in ("body", "orelse", "finalbody"):
                inner = getattr(node, field, None)
                if isinstance(inner, list):
                    walk(inner)
            for handler in getattr(node, "handlers", None) or []:
                walk(handler.body)

    handing: list = []
    walk(tree.body)
    # A definition handed to an object the submission made itself (a decorator such as @REGISTRY.append or
    # @register) is held by that object: reaching the object reaches the definition; and a function that
    # fills a registry (REGISTRY[key] = f) is reached with the registry. Imported names are left out:
    # @torch.no_grad() does not make every such function graded.
    own = {name for name, nodes in out.items()
           if not all(isinstance(n, (ast.Import, ast.ImportFrom)) for n in nodes)}
    fills = {node.name: _filled(node) for node in handing if not isinstance(node, ast.ClassDef)}
    for node in handing:
        decorators = [m.id for expr in node.decorator_list for m in ast.walk(expr) if isinstance(m, ast.Name)]
        # held by the decorator's object, by the registries the decorator fills, and by those it fills itself
        names = decorators + [n for d in decorators for n in fills.get(d, [])] + fills.get(node.name, [])
        for name in names:
            if name in own and node not in out[name]:
                out[name].append(node)
    return out


def _filled(definition) -> list[str]:
    """Names a function's body changes the contents of: a method called on them (``REGISTRY.append(f)``)
    or an item or attribute of theirs assigned (``REGISTRY[key] = f``)."""
    names = []
    for n in ast.walk(definition):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name):
            names.append(n.func.value.id)
        elif isinstance(n, (ast.Assign, ast.AugAssign)):
            for t in n.targets if isinstance(n, ast.Assign) else [n.target]:
                if isinstance(t, (ast.Subscript, ast.Attribute)) and isinstance(t.value, ast.Name):
                    names.append(t.value.id)
    return names


def _reachable(tree: ast.Module, entry: str) -> set:
    """Ids of the AST nodes the entry point can run: its binding statements and, transitively, those of
    every top-level name they mention. Code that reads the module's namespace as a whole (``globals()``,
    ``vars()``, the module imported by its own name) may call anything in it by a computed key
    (``globals()["_r" + "ows"]``): it reaches every top-level binding."""
    bindings = _module_bindings(tree)
    todo, done, names = list(bindings.get(entry, [])), set(), {entry}
    while todo:
        node = todo.pop()
        if id(node) in done:
            continue
        done.add(id(node))
        for n in ast.walk(node):
            if _reads_namespace(n, bindings):
                names.update(bindings)
                todo.extend(b for nodes in bindings.values() for b in nodes)
            if isinstance(n, ast.Name) and n.id in bindings and n.id not in names:
                names.add(n.id)
                todo.extend(bindings[n.id])
    return done


# What the grading worker names the submission's module (autograder.worker): importing it by that name reads
# the submission's namespace as a whole.
_SUBMISSION_MODULE = "submission"


def _reads_namespace(node, bindings) -> bool:
    """``globals()``, ``vars()`` or ``locals()`` (Python's own, not a binding of the submission), or an import of
    the submission's own module."""
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("globals", "vars", "locals")
            and node.func.id not in bindings):
        return True
    if isinstance(node, ast.Import):
        return any(a.name.split(".")[0] == _SUBMISSION_MODULE for a in node.names)
    return isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == _SUBMISSION_MODULE


# ------------------------------------------------------------------------------------------ the audit

class _Auditor(ast.NodeVisitor):
    def __init__(self, scopes: _Scopes, allow: frozenset, forbidden: dict, reachable: set | None):
        self.scopes, self.allow, self.forbidden, self.reachable = scopes, allow, forbidden, reachable
        self.findings: list[Finding] = []
        self.stack: list[_Scope] = [scopes.module]
        self.kernel_depth = 0        # inside @triton.jit functions
        self.reach_depth = 0         # inside a statement the entry point can reach
        self.graded = None           # ids of the nodes the entry point can run (None: all of the source)
        self.graded_depth = 0        # inside one of them
        self.annotation_depth = 0    # inside a variable's annotation (never evaluated in a function)
        self.parents: dict[int, ast.AST] = {}
        methods = [f for c in ast.walk(scopes.module.node) if isinstance(c, ast.ClassDef)
                   for f in c.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
        self.own_methods = {f.name for f in methods}
        self.method_nodes = {id(f) for f in methods}
        self.jit_wrapped, bound = _triton_wrapped(scopes.module.node, scopes)
        self.kernels = {n.name for n in ast.walk(scopes.module.node) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                        and (_triton_decorated(n, scopes) or n.name in self.jit_wrapped)} | bound
        self.kernels_beside: frozenset = frozenset()
        self.kernel_library: dict = {}
        self.outside_torch = False
        self.statements: list = []  # (text, its statements) handed to a statement runner as a literal
        # names (of any scope) only ever bound to string literals, or to dicts whose values all are: the
        # formats ``msg.format(...)`` and ``MESSAGES["shape"].format(...)`` read are formats the audit sees
        self.literal_strings: dict = {}
        unknown = set()
        for stmt in ast.walk(scopes.module.node):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else (
                [stmt.target] if isinstance(stmt, (ast.AnnAssign, ast.AugAssign, ast.For, ast.NamedExpr)) else [])
            value = getattr(stmt, "value", None) if not isinstance(stmt, (ast.AugAssign, ast.For)) else None
            for t in targets:
                if not isinstance(t, ast.Name):
                    continue
                texts = _literal_texts(value)
                if texts is None:
                    unknown.add(t.id)
                else:
                    self.literal_strings.setdefault(t.id, []).extend(texts)
        for name in unknown:
            self.literal_strings.pop(name, None)

    # -- helpers
    def _pure(self, expr) -> bool:
        return _pure(self.scopes, expr, self.stack[-1])

    def _configuration_cache(self, name: str) -> bool:
        """Whether every call of the cached function ``name`` passes configuration only (shapes, dtypes,
        constants): then its cache maps configurations to configurations (a launch-config helper)."""
        sites, _ = _call_sites(self.scopes, name)
        return all(_pure(self.scopes, a, scope) for call, scope in sites
                   for a in call.args + [k.value for k in call.keywords])

    def report(self, node, rule, message):
        self.findings.append(Finding(getattr(node, "lineno", 0) or 0, rule, message))

    def paths(self, expr) -> set:
        return self.scopes.paths(expr, self.stack[-1])

    def external(self, expr) -> set:
        return {p for p in self.paths(expr) if _is_external(p)}

    @staticmethod
    def text(node, limit=60) -> str:
        s = ast.unparse(node)
        return s if len(s) <= limit else s[: limit - 3] + "..."

    def checking_ops(self) -> bool:
        return bool(self.forbidden) and self.kernel_depth == 0 and (self.reachable is None or self.reach_depth > 0)

    def visit(self, node):
        for child in ast.iter_child_nodes(node):
            self.parents[id(child)] = node
        reach = self.reachable is not None and id(node) in self.reachable
        graded = self.graded is not None and id(node) in self.graded
        self.reach_depth += reach
        self.graded_depth += graded
        try:
            return super().visit(node)
        finally:
            self.reach_depth -= reach
            self.graded_depth -= graded

    # -- scopes
    def _in_scope(self, node, kernel=False):
        """Decorators, defaults and bases in the enclosing scope; the body in the node's own."""
        outer = list(getattr(node, "decorator_list", [])) + list(getattr(node, "bases", []))
        outer += [k.value for k in getattr(node, "keywords", [])]
        if not isinstance(node, ast.ClassDef):
            outer += node.args.defaults + [d for d in node.args.kw_defaults if d]
        for expr in outer:
            self.visit(expr)
        self.stack.append(self.scopes.of[node])
        self.kernel_depth += kernel
        try:
            for child in node.body if isinstance(node.body, list) else [node.body]:
                self.visit(child)
        finally:
            self.kernel_depth -= kernel
            self.stack.pop()

    def visit_FunctionDef(self, node):
        if node.name in ("__torch_dispatch__", "__torch_function__"):
            self.report(node, "escape", f"defines {node.name}, which intercepts torch operators (the grader's too)")
        if node.name in _MEMORY_PROTOCOLS:
            self._memory_protocol(node, f"defines {node.name}", node.name)
        kernel = _triton_decorated(node, self.scopes, self.stack[-1])  # as kernel_definitions judges it
        kernel = kernel or (len(self.stack) == 1 and node.name in self.jit_wrapped)
        if self.reachable is not None and self.reach_depth > 0:
            for d in node.decorator_list:
                if (self.external(d.func if isinstance(d, ast.Call) else d) & set(_CACHE_DECORATORS)
                        and not self._configuration_cache(node.name)):
                    self.report(d, "kept-state", f"decorates {node.name} with {self.text(d)}: {_KEPT}")
        self._in_scope(node, kernel)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node):
        self._in_scope(node)

    def visit_ClassDef(self, node):
        for base in node.bases:
            ext = self.external(base)
            if any(p == t or p.startswith(t + ".") for p in ext for t in _TENSOR_CLASSES):
                self.report(node, "escape", f"subclasses {self.text(base)}: a tensor subclass can intercept every "
                            "operator and hide work from the grader")
            elif any(p in _MODE_CLASSES or p.endswith((".TorchDispatchMode", ".TorchFunctionMode")) for p in ext):
                self.report(node, "escape", f"subclasses {self.text(base)}, a mode that intercepts torch operators")
            elif any(p.startswith(("triton.runtime", "triton.compiler", "autograder", "kernels_ref")) for p in ext):
                self.report(node, "patching", f"subclasses {self.text(base)}, part of the machinery that launches "
                            "and counts kernels")
        self._in_scope(node)

    # -- imports
    def visit_Import(self, node):
        for a in node.names:
            self._check_module(node, a.name, f"import {a.name}")
            self._check_path(node, a.name, f"import {a.name}")
        self.generic_visit(node)

    def visit_ImportFrom(self, node):
        if node.level == 0 and node.module:
            module = node.module
            for a in node.names:
                if module == "autograder" and a.name == "check":
                    continue  # the notebook's feedback call: returns True in a grading worker
                self._check_module(node, f"{module}.{a.name}" if a.name != "*" else module,
                                   f"from {module} import {a.name}")
                if a.name != "*":
                    self._check_path(node, f"{module}.{a.name}", f"from {module} import {a.name}")
        self.generic_visit(node)

    def _check_module(self, node, name, spelled):
        top = name.split(".")[0]
        if top not in FORBIDDEN_MODULES and canonical(name).split(".")[0] in FORBIDDEN_MODULES:
            top = canonical(name).split(".")[0]  # from torch import inspect: the module it IS
        if top == "autograder":
            self.report(node, "grader-import", f"{spelled}: imports the grader; graded code may only use "
                        "`from autograder import check`")
        elif top == "kernels_ref":
            self.report(node, "reference-import", f"{spelled}: imports kernels_ref (the course's reference "
                        "kernels); the exercise must be your own code")
        elif top in FORBIDDEN_MODULES and not _reaches_nothing(name, spelled):
            self.report(node, "forbidden-import", f"{spelled}: {top} {FORBIDDEN_MODULES[top]}")
        elif name.startswith("unittest.mock") or top == "mock":
            self.report(node, "forbidden-import", f"{spelled}: mock patches other modules' objects")

    # -- references to dotted paths
    def _memory_protocol(self, node, spelled: str, name: str) -> None:
        if self.outside_torch:  # an exercise about tensors (a measuring exercise computes numbers as it likes)
            self.report(node, "outside-torch", f"{spelled}: {name} {_MEMORY_WHY}")

    def visit_keyword(self, node):  # SimpleNamespace(__array_interface__=...), dict(...), type(..., ...)
        if node.arg in _MEMORY_PROTOCOLS:
            self._memory_protocol(node, f"passes {node.arg}=", node.arg)
        elif node.arg in _ESCAPE_DUNDERS:  # type("S", (torch.Tensor,), dict(__torch_dispatch__=f))
            self.report(node, "escape", f"passes {node.arg}=: {node.arg} reaches objects the grader relies on")
        self.generic_visit(node)

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Store) and node.id in _MEMORY_PROTOCOLS:  # a class attribute of that name
            self._memory_protocol(node, f"binds {node.id}", node.id)
        if node.id in _ESCAPE_NAMES:
            self.report(node, "escape", f"uses {node.id}, which reaches Python's internals")
        parent = self.parents.get(id(node))
        if (isinstance(node.ctx, ast.Load) and not (isinstance(parent, ast.Call) and parent.func is node)
                and self.paths(node) & _ATTR_BUILTINS):
            self.report(node, "dynamic-code", f"passes {node.id} on as a value: it then sets or reads attributes "
                        "by names the audit cannot see")
        if isinstance(node.ctx, ast.Load):
            for p in sorted(self.paths(node)):
                if _is_external(p) and p != "<type>" and self._check_path(node, p, node.id):
                    break
            self._check_unbound(node)

    def _check_unbound(self, node):
        """Deny by default: graded code reads only names its source binds (or Python's builtins, or the
        module's own attributes). Any other name holds whatever something else put in the module at run
        time (the Triton interpreter used to copy numpy and inspect there), which the audit cannot judge."""
        if (self.annotation_depth or (self.graded is not None and self.graded_depth == 0)
                or node.id in _MODULE_NAMES or self.scopes.lookup(node.id, self.stack[-1])):
            return
        self.report(node, "escape", f"reads {node.id}, a name the submission never binds (no import, assignment "
                    "or def of it): whatever the process put there at run time is not code the audit can judge")

    def visit_Attribute(self, node):
        self._check_dunder(node)
        parent = self.parents.get(id(node))
        if isinstance(node.ctx, ast.Load) and not (isinstance(parent, ast.Attribute) and isinstance(parent.ctx, ast.Load)):
            # the outermost attribute of a chain: check the whole dotted path once (and its prefixes)
            for p in sorted(self.external(node), key=len) if not self._sets_own_instance(node) else ():
                if p != "<type>" and self._check_path(node, p, self.text(node)):
                    break
            if (self.checking_ops() and node.attr in self.forbidden and node.attr in SPELLINGS
                    and node.attr not in self.own_methods):  # self.linear(...): the learner's own method
                call = self.parents.get(id(node))
                if isinstance(call, ast.Call) and call.func is node and self._method_receiver_ok(node.value):
                    self._forbidden(node, node.attr, f"calls .{node.attr}(...)")
            base = node
            while isinstance(base, ast.Attribute):
                self._check_dunder(base)
                base = base.value
            if not isinstance(base, ast.Name):
                self.visit(base)
            elif base.id in _ESCAPE_NAMES:
                self.visit_Name(base)
            else:
                self._check_unbound(base)
            return
        self.generic_visit(node)

    def _sets_own_instance(self, node) -> bool:
        """``object.__setattr__(self, "block", n)`` in a method of the submission's own class (a frozen
        dataclass's __post_init__, as the dataclasses documentation writes it): the learner's own instance."""
        call, scope = self.parents.get(id(node)), self.stack[-1]
        fn = getattr(scope, "node", None)
        return (node.attr in ("__setattr__", "__delattr__") and isinstance(node.value, ast.Name)
                and node.value.id == "object" and "builtins.object" in self.external(node.value)
                and isinstance(call, ast.Call) and call.func is node and call.args
                and isinstance(call.args[0], ast.Name) and id(fn) in self.method_nodes
                and fn.args.args and call.args[0].id == fn.args.args[0].arg)

    def _check_dunder(self, node):
        attr = node.attr
        if self._sets_own_instance(node):
            return
        if (self.kernel_depth > 0 and attr not in kernel_value_attributes()
                and self.paths(node.value) & {_LOCAL, _OWN}):
            self.report(node, "escape", f"uses {self.text(node)} in the Triton kernel {self.stack[-1].node.name}: "
                        f"{attr!r} is not an attribute of Triton's values ({_KERNEL_ATTRIBUTE})")
        if isinstance(node.ctx, ast.Load):
            self._check_method(node)
        parent = self.parents.get(id(node))
        if attr in _ESCAPE_DUNDERS:
            self.report(node, "escape", f"uses {self.text(node)}: {attr} reaches objects the grader relies on")
        elif attr in _MEMORY_PROTOCOLS:
            self._memory_protocol(node, f"uses {self.text(node)}", attr)
        elif attr in _FRAME_ATTRS:
            self.report(node, "grader-state", f"uses {self.text(node)}: {attr} reaches stack frames, the grader's "
                        "own variables among them (a graded function must not inspect its caller)")
        elif attr == "sys" and not (isinstance(node.value, ast.Name) and node.value.id == "self"):
            self.report(node, "process", f"uses {self.text(node)}: the sys module reached through another module "
                        "(its modules, hooks and frames reach the grader's code)")
        elif attr in _MODULE_ATTRS and isinstance(node.ctx, ast.Load) and self._untyped_module_read(node, parent):
            rule, why = _MODULE_ATTRS[attr]
            self.report(node, rule, f"uses {self.text(node)}: reads {attr} from a value the audit cannot follow "
                        f"(a parameter, a call's result), so it is judged by its name: {why}")
        elif attr in _BELOW_PYTHON_ATTRS and not (isinstance(node.value, ast.Name) and node.value.id == "self"):
            self.report(node, "escape", f"uses {self.text(node)}: it {_BELOW_PYTHON}")
        elif attr == "__class__" and not (isinstance(parent, ast.Attribute) and parent.attr in ("__name__", "__qualname__")):
            self.report(node, "escape", f"uses {self.text(node)}: __class__ reaches (and can swap) an object's class")
        elif attr == "__dict__" and not (isinstance(node.value, ast.Name) and node.value.id == "self"):
            self.report(node, "escape", f"uses {self.text(node)}: an object's __dict__ can patch it behind the audit")

    def _untyped_module_read(self, node, parent) -> bool:
        """Whether ``node`` (``value.attr``) reads from a value the audit cannot follow: not ``self``, no path
        the audit resolved (those are judged by what they are), not a tensor's method called there and then."""
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            return False
        if node.attr in _TENSOR_METHOD_NAMES and isinstance(parent, ast.Call) and parent.func is node:
            return False
        return not self.external(node.value)

    def _check_path(self, node, path, spelled) -> bool:
        """Report ``path`` if a rule covers it (or a prefix of it), judged by what it is (``canonical``);
        True when reported."""
        path = canonical(path)
        parts = path.split(".")
        if (parts[0] in FORBIDDEN_MODULES and not spelled.startswith(("import ", "from "))
                and not (parts[0] == "builtins" and "." not in spelled) and not _reaches_nothing(path, spelled)
                and not _builtin_type_method(path)):
            # a forbidden module reached as another module's attribute (torch.inspect, torch.builtins.exec);
            # a built-in function named as such (len, open) is not reaching for the builtins module
            self.report(node, "forbidden-import", f"uses {spelled}" + (f" ({path})" if path != spelled else "")
                        + f": {parts[0]} {FORBIDDEN_MODULES[parts[0]]}")
            return True
        if path.startswith(_PROFILERS) and self._in_graded_code():
            self.report(node, "grader-state", f"uses {spelled}" + (f" ({path})" if path != spelled else "")
                        + f" in graded code: {_PROFILER_WHY}")
            return True
        if parts[0] in NUMERIC_LIBRARIES and self._numeric_use(node, path):
            self.report(node, "outside-torch", f"uses {spelled}" + (f" ({path})" if path != spelled else "")
                        + f" in graded code: {parts[0]} {_NUMERIC_WHY}")
            return True
        prefixes = [".".join(parts[:i]) for i in range(len(parts), 0, -1)]
        if path in _FEATURE_GUARDS:
            return False
        if path in _OWN_OPERATOR_REGISTRATIONS and (isinstance(node, (ast.Import, ast.ImportFrom))  # judged where called
                                                    or self._registers_own_operator(node)):
            return False
        for prefix in prefixes:
            for feature, roots in FEATURES.items():
                if prefix in roots:
                    if feature not in self.allow:
                        said = spelled if spelled.startswith(("import ", "from ")) else f"uses {spelled}"
                        self.report(node, "feature", f"{said} ({feature}): {_FEATURE_WHY[feature]}; this "
                                    "exercise does not allow it")
                        return True
                    return False
            hit = _PATH_RULES.get(prefix) or next(((r, w) for pat, r, w in _PATH_PATTERNS
                                                   if fnmatch.fnmatchcase(prefix, pat)), None)
            if (hit is None and prefix == path and prefix.startswith("importlib.") and not
                    any(prefix == r or prefix.startswith(r + ".") or r.startswith(prefix + ".") for r in _IMPORTLIB_READS)
                    and not self._names_its_module(node, path)):
                hit = ("forbidden-import", f"importlib {_IMPORTLIB_WHY}")
            if hit:
                rule, why = hit
                said = spelled if spelled.startswith(("import ", "from ")) else f"uses {spelled}"
                self.report(node, rule, said + (f" ({prefix})" if not spelled.endswith(prefix) else "") + f": {why}")
                return True
        if path in ("builtins.exec", "builtins.eval", "builtins.compile", "builtins.__import__", "builtins.breakpoint"):
            name = path.split(".")[1]
            self.report(node, "dynamic-code", f"uses {name}(): it {_DYNAMIC_BUILTINS[name]}, which the audit cannot see")
            return True
        if self.checking_ops() and path.split(".")[0] in _COMPUTE_ROOTS:
            last = [p for p in parts[1:] if p not in ("default", "int", "Tensor", "self", "out")]
            name = last[-1] if last else ""
            if name in self.forbidden and (name in SPELLINGS or parts[0] == "torch"):
                self._forbidden(node, name, f"uses {spelled}" + (f" ({path})" if path != spelled else ""))
                return True
        return False

    def _names_its_module(self, node, path) -> bool:
        """importlib used where no module is named by a computed name: ``importlib.reload(helper)`` of a module
        beside the submission that the source imports by name (picking up edits to a helper, which the audit
        reads as it is now; a library reloaded would shed what the grader set up in it), and
        ``importlib.import_module(package)`` whose module only tells its version (Liger-Kernel's
        ``compare_version``): the module never reaches any other code."""
        call = self.parents.get(id(node))
        if not (isinstance(call, ast.Call) and call.func is node and len(call.args) == 1 and not call.keywords):
            return False
        if path == "importlib.reload":
            arg = call.args[0]
            found = self.paths(arg) if isinstance(arg, (ast.Name, ast.Attribute)) else set()
            return bool(found) and all(_is_external(p) and not p.startswith("<") and not _installed_module(p.split(".")[0])
                                       for p in found)  # the submission's own module, not a library's
        return path == "importlib.import_module" and self._only_its_version(call)

    def _only_its_version(self, call) -> bool:
        """Whether what ``call`` returns is used for its ``__version__`` alone: read at once, or bound to a
        name of the function it is in that nothing else reads."""
        parent = self.parents.get(id(call))
        if isinstance(parent, ast.Attribute) and parent.attr == "__version__":
            return True
        if not (isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name)):
            return False
        name, function = parent.targets[0].id, self.parents.get(id(parent))
        while function is not None and not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = self.parents.get(id(function))
        if function is None or any(isinstance(n, (ast.Global, ast.Nonlocal)) and name in n.names
                                   for n in ast.walk(function)):
            return False
        above = {id(child): n for n in ast.walk(function) for child in ast.iter_child_nodes(n)}  # not all visited yet
        uses = [n for n in ast.walk(function) if isinstance(n, ast.Name) and n.id == name and n is not parent.targets[0]]
        return all(isinstance(n.ctx, ast.Load) and isinstance(above.get(id(n)), ast.Attribute)
                   and above[id(n)].attr == "__version__" for n in uses)

    def _in_graded_code(self) -> bool:
        """Whether the node being visited is code a graded call of an exercise about tensors runs: the entry
        point and what it reaches, not the module's level (nor a source without the entry point)."""
        return self.outside_torch and self.reachable is not None and self.reach_depth > 0

    def _numeric_use(self, node, path) -> bool:
        """Whether a numeric library's ``path`` is used on values in graded code: anywhere in code the entry
        point runs (in a helper module: inside its functions) of an exercise about tensors, but for a
        constant (``np.pi``), a type named as a dtype (``dtype=np.float32``) and a call on configuration
        alone (``np.log2(N)``, ``np.prod(x.shape)``)."""
        if not self.outside_torch or self.kernel_depth > 0:
            return False
        if self.reachable is None and len(self.stack) < 2:
            return False  # a helper's module level: it runs at import, not in a graded call
        if self.reachable is not None and self.reach_depth == 0:
            return False
        _, obj = _walk(path)
        parent = self.parents.get(id(node))
        if isinstance(parent, ast.Call) and parent.func is node:
            return not all(self._pure(a) for a in [*parent.args, *(k.value for k in parent.keywords)])
        if obj is not _UNRESOLVED and (not callable(obj) or isinstance(obj, type)):
            return False
        return True

    def _registers_own_operator(self, node) -> bool:
        """Whether ``node`` (``torch.library.register_fake``) is called for an operator the submission made
        with ``triton_op`` or ``custom_op``: its name as a string constant, or the operator object itself."""
        call = self.parents.get(id(node))
        if not (isinstance(call, ast.Call) and call.func is node and call.args):
            return False
        target = call.args[0]
        own = {}
        for n in ast.walk(self.scopes.module.node):
            for made in ([n] if isinstance(n, ast.Call) else getattr(n, "decorator_list", [])):
                if (isinstance(made, ast.Call) and made.args and isinstance(made.args[0], ast.Constant)
                        and self.scopes.paths(made.func, self.scopes.module) & set(_OWN_OPERATOR_MAKERS)):
                    own[made.args[0].value] = own.get(made.args[0].value) or getattr(n, "name", None)
        if isinstance(target, ast.Constant):
            return target.value in own
        return isinstance(target, ast.Name) and target.id in set(own.values()) - {None}

    def _method_receiver_ok(self, receiver) -> bool:
        """Whether ``receiver.softmax(...)`` may be a tensor method: not the submission's own def/class and
        not a module outside torch (``tl.softmax`` in Triton is the learner's kernel)."""
        paths = self.paths(receiver)
        if paths and paths <= {_OWN}:
            return False
        ext = {p for p in paths if _is_external(p)}
        return not ext or any(p.split(".")[0] in _COMPUTE_ROOTS for p in ext)

    def _forbidden(self, node, name, what):
        self.report(node, "forbidden-call", f"{what}: {self.forbidden[name]}")

    # -- writes to other objects
    def _owner_paths(self, expr) -> set:
        """External paths of the object an attribute/item store changes (empty: the learner's own)."""
        while True:
            if isinstance(expr, (ast.Attribute, ast.Subscript)):
                inner = expr.value
                ext = self.external(inner)
                if ext:
                    return ext
                expr = inner
            elif isinstance(expr, ast.Call):
                return self.external(expr)
            else:
                return self.external(expr)

    def _check_store(self, target, verb):
        if isinstance(target, ast.Attribute):
            base = target.value
            while isinstance(base, (ast.Attribute, ast.Subscript)):
                base = base.value
            if isinstance(base, ast.Name) and base.id in self.kernels and _OWN in self.paths(base):
                self.report(target, "patching", f"{verb} {self.text(target)}: changing a Triton kernel object's "
                            "attributes can replace its launcher (and hide launches from the grader)")
                return
            if isinstance(base, ast.Call) and not self.external(base):
                self.report(target, "patching", f"{verb} {self.text(target)}, an attribute of an object a call "
                            "returned: the audit cannot tell whose object it is (assign to your own objects)")
                return
            owners = self._owner_paths(target)
            if owners:
                owner = sorted(owners, key=len)[0]
                owner = "the class of an object (type(...))" if owner == "<type>" else owner
                self.report(target, "patching", f"{verb} {self.text(target)} (an attribute of {owner}): changing "
                            "modules, classes or functions you did not define changes the grader's tools too")
        elif isinstance(target, ast.Subscript):
            owners = self.external(target.value)
            if any(p.startswith("os.environ") for p in owners):
                self.report(target, "environment", f"{verb} {self.text(target)}: {_ENV}")
            elif any(p.startswith("sys.modules") for p in owners):
                pass  # reported as a use of sys.modules
            elif owners - {"<type>"}:
                self.report(target, "patching", f"{verb} {self.text(target)}: changes an object you did not define")
            self._check_namespace_write(target.value, target)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                self._check_store(t, verb)
        elif isinstance(target, ast.Starred):
            self._check_store(target.value, verb)

    def visit_Assign(self, node):
        for t in node.targets:
            self._check_store(t, "assigns")
            self._check_kept_state(t, node.value)
        self.generic_visit(node)

    # -- state kept between calls (only in code the entry point runs, outside kernels)
    def _in_reached_function(self) -> bool:
        return (self.kernel_depth == 0 and self.reachable is not None and self.reach_depth > 0
                and len(self.stack) > 1 and isinstance(self.stack[-1].node, (ast.FunctionDef, ast.AsyncFunctionDef)))

    def _module_level(self, name: str) -> bool:
        scope = self.stack[-1]
        if name in scope.declared_global:
            return True
        return name not in scope.bindings and name in self.scopes.module.bindings

    def _kept_root(self, expr):
        """The module-level name a container expression hangs from (``_T`` of ``_T["k"]`` or ``_T.k[0]``), when
        it is the submission's own (not an imported module); else None."""
        while isinstance(expr, (ast.Subscript, ast.Attribute)):
            expr = expr.value
        if isinstance(expr, ast.Name) and self._module_level(expr.id) and not self.external(expr):
            return expr.id
        return None

    def _check_kept_state(self, target, value=None):
        if not self._in_reached_function():
            return
        root = self._kept_root(target.value) if isinstance(target, ast.Subscript) else None
        if root is not None:
            self.scopes.filling = root  # what the table already holds counts as what it may hold
            try:
                configuration = value is not None and self._pure(target.slice) and self._pure(value)
            finally:
                self.scopes.filling = None
            if configuration:
                return  # a configuration table (block sizes by shape): it can hold no answer
            self.report(target, "kept-state", f"stores into {self.text(target.value)}[...], defined outside the "
                        f"function: {_KEPT}")
        elif isinstance(target, ast.Name) and target.id in self.stack[-1].declared_global:
            if value is not None and self._pure(value):
                return  # a flag or a configuration (a warn-once flag, a block size): it can hold no answer
            self.report(target, "kept-state", f"assigns the global {target.id}: {_KEPT}")

    def visit_AugAssign(self, node):
        self._check_store(node.target, "changes")
        if isinstance(node.op, ast.MatMult):
            self._check_matmul(node)
        self.generic_visit(node)

    def visit_AnnAssign(self, node):
        if node.value is not None:
            self._check_store(node.target, "assigns")
        self.visit(node.target)
        self.annotation_depth += 1
        try:
            self.visit(node.annotation)
        finally:
            self.annotation_depth -= 1
        if node.value is not None:
            self.visit(node.value)

    def visit_Delete(self, node):
        for t in node.targets:
            self._check_store(t, "deletes")
        self.generic_visit(node)

    def visit_BinOp(self, node):
        if isinstance(node.op, ast.MatMult):
            self._check_matmul(node)
        self.generic_visit(node)

    def _check_matmul(self, node):
        if self.checking_ops() and "@" in self.forbidden:
            self._forbidden(node, "@", "multiplies with @ (a torch matmul)")

    # -- calls
    def _check_kept_call(self, node):
        f = node.func
        # a container inside one (``_T["k"].append(out)``) is kept as long as the module-level table is
        if (self._in_reached_function() and isinstance(f, ast.Attribute) and f.attr in _MUTATORS
                and self._kept_root(f.value) is not None
                and not all(self._pure(a) for a in node.args + [k.value for k in node.keywords])):
            self.report(node, "kept-state", f"calls {self.text(f.value)}.{f.attr}(...), defined outside the function: "
                        f"{_KEPT}")

    def visit_Call(self, node):
        self._check_kept_call(node)
        self._check_format_call(node)
        if self.kernel_depth > 0:
            self._check_kernel_call(node)
        self._check_kernel_arguments(node)
        fn = self.paths(node.func)
        args = node.args
        if fn & {"builtins.getattr", "builtins.__import__", "importlib.import_module"}:
            for p in sorted(self.external(node)):   # getattr(torch, "softmax") is torch.softmax
                if p != "<type>" and self._check_path(node, p, self.text(node)):
                    break
        name_arg = args[1] if len(args) >= 2 else None
        dynamic_name = name_arg is not None and not (isinstance(name_arg, ast.Constant) and isinstance(name_arg.value, str))
        if "builtins.getattr" in fn and not dynamic_name and name_arg is not None and name_arg.value in _FRAME_ATTRS:
            self.report(node, "grader-state", f"{self.text(node)}: {name_arg.value} reaches stack frames, the "
                        "grader's own variables among them")
        if "builtins.getattr" in fn and dynamic_name:
            self.report(node, "dynamic-code", f"{self.text(node)}: getattr with a computed name reaches attributes "
                        "the audit cannot see")
        if fn & set(_OWN_OPERATOR_MAKERS) and not (
                args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str)
                and args[0].value.split("::")[0] not in _TORCH_NAMESPACES):
            self.report(node, "escape", f"{self.text(node)}: an operator of your own is named by a string constant "
                        "in a namespace of your own (mylib::name), not torch's (aten::softmax.mine would be taken "
                        "for torch's softmax)")
        if "builtins.type" in fn and len(args) == 3 and isinstance(args[1], (ast.Tuple, ast.List)) and any(
                p == t or p.startswith(t + ".") for b in args[1].elts for p in self.external(b) for t in _TENSOR_CLASSES):
            self.report(node, "escape", f"{self.text(node)}: a tensor subclass can intercept every operator and hide "
                        "work from the grader")
        if "builtins.type" in fn and len(args) == 3 and not _literal_names(args[2]):
            self.report(node, "dynamic-code", f"{self.text(node)}: a class built from a namespace of computed names "
                        "has attributes the audit cannot see (write a class statement)")
        for k in node.keywords:
            if k.arg is None and isinstance(k.value, ast.Dict) and not _literal_names(k.value):
                self.report(node, "dynamic-code", f"{self.text(node)}: keywords of computed names (**{{...}}) set "
                            "attributes the audit cannot see (name the keywords)")
        if fn & {"builtins.setattr", "builtins.delattr"} and args:
            verb = "sets" if "builtins.setattr" in fn else "deletes"
            if dynamic_name:
                self.report(node, "dynamic-code", f"{self.text(node)}: {verb} an attribute by a computed name")
            elif name_arg is not None:
                self._check_store(ast.copy_location(ast.Attribute(value=args[0], attr=name_arg.value, ctx=ast.Store()),
                                                    node), verb)
        if fn & {"builtins.globals", "builtins.locals", "builtins.vars"}:
            self._check_namespace_call(node)
        for p in fn & set(_UNPICKLERS):
            key, safe, index = _UNPICKLERS[p]
            given = self._argument(node, key, index) if key else None
            if key is None or (given is not None and not (isinstance(given, ast.Constant) and given.value is safe)):
                self.report(node, "dynamic-code", f"{self.text(node)}: unpickling runs arbitrary code the audit "
                            "cannot see" + (f" (leave {key}={safe})" if key else ""))
        for p in sorted(fn & set(_STATEMENT_RUNNERS)):
            if p.startswith("torch.") and not self.outside_torch:
                continue  # torch's Timer takes statements as text only: a measuring exercise may time with it
            self._check_statements(node, p)
        for p in sorted(fn & set(_IN_PLACE)):
            given = self._argument(node, "inplace", _IN_PLACE[p])
            if given is not None and not (isinstance(given, ast.Constant) and not given.value):
                self.report(node, "file-write", f"{self.text(node)}: {p} with inplace rewrites the files it reads: "
                            "graded code may read files but not write them")
        opener = next((_OPENERS[p] for p in fn if p in _OPENERS), None)
        if opener is not None:
            self._check_open(node, opener)
        elif isinstance(node.func, ast.Attribute) and node.func.attr == "open" and not self.external(node.func.value):
            self._check_open(node, 0)                       # Path(...).open("w")
        self.generic_visit(node)

    def _check_statements(self, node, path):
        """``timeit.timeit(stmt, setup)``: a statement that is not a function (a string, or anything that may
        hold one) is compiled and run as code the audit cannot read; a string literal is source the audit
        reads: it is audited as code at the call's line (its names are the module's, as ``globals=`` hands
        them), and the worker lets exactly those statements run (``autograder.runtime_audit``)."""
        for index, name in _STATEMENT_RUNNERS[path]:
            given = node.args[index] if len(node.args) > index else next(
                (k.value for k in node.keywords if k.arg == name), None)
            if given is None or isinstance(given, ast.Lambda):
                continue
            if isinstance(given, ast.Constant) and isinstance(given.value, str):
                self._audit_statement(node, given)
                continue
            literals = self._loop_literals(node, given)
            if literals:  # for stmt in ("f(x)", "g(x)"): Timer(stmt=stmt): each literal, audited as written
                for literal in literals:
                    self._audit_statement(node, literal)
                continue
            paths = self.paths(given)
            if paths and _LOCAL not in paths:
                continue  # a function of the learner's or a library's
            self.report(node, "dynamic-code", f"{self.text(node)}: {path} compiles and runs {name} as code when it "
                        "is a string, which the audit cannot read (pass a function: timeit.timeit(lambda: f(x)))")
            return

    def _runs_literals(self, call) -> bool:
        """Whether ``call`` hands a statement runner only literal statements (audited) and functions."""
        runners = self.paths(call.func) & set(_STATEMENT_RUNNERS) if isinstance(call, ast.Call) else set()
        if not runners:
            return False
        for index, name in _STATEMENT_RUNNERS[sorted(runners)[0]]:
            given = call.args[index] if len(call.args) > index else next(
                (k.value for k in call.keywords if k.arg == name), None)
            if not (given is None or isinstance(given, ast.Lambda) or
                    isinstance(given, ast.Constant) and isinstance(given.value, str)
                    or self._loop_literals(call, given)):
                return False
        return True

    def _loop_literals(self, node, given) -> list:
        """The string literals a name takes when it is the target of a ``for`` around ``node`` over a literal
        tuple or list (``for label, stmt in (("mine", "f(x)"), ("torch", "g(x)")):``); [] otherwise (or when
        the loop's body rebinds it)."""
        if not isinstance(given, ast.Name):
            return []
        loop = self.parents.get(id(node))
        while loop is not None and not (isinstance(loop, ast.For) and given.id in
                                        {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}):
            loop = self.parents.get(id(loop))
        if loop is None or not isinstance(loop.iter, (ast.Tuple, ast.List)) or any(
                isinstance(n, ast.Name) and n.id == given.id and isinstance(n.ctx, ast.Store)
                for statement in loop.body for n in ast.walk(statement)):
            return []
        if isinstance(loop.target, ast.Name):
            items = list(loop.iter.elts)
        elif isinstance(loop.target, ast.Tuple) and all(isinstance(t, ast.Name) for t in loop.target.elts):
            at = [t.id for t in loop.target.elts].index(given.id)
            items = [e.elts[at] if isinstance(e, (ast.Tuple, ast.List)) and len(e.elts) == len(loop.target.elts)
                     else None for e in loop.iter.elts]
        else:
            return []
        if not items or not all(isinstance(i, ast.Constant) and isinstance(i.value, str) for i in items):
            return []
        return items

    def _audit_statement(self, node, given):
        try:
            tree = ast.parse(textwrap.dedent(given.value).strip("\n"))
        except SyntaxError:
            self.report(node, "dynamic-code", f"{self.text(node)}: the statement {given.value!r} is not Python")
            return
        # the runner's namespace given as a dict literal (Timer(stmt, globals={"x": data})): its names are
        # bound there to the values written beside them, which are judged as the statement's own
        space = next((k.value for k in getattr(node, "keywords", ()) if k.arg == "globals"), None)
        if isinstance(space, ast.Dict) and _literal_names(space):
            tree.body[:0] = [ast.Assign(targets=[ast.Name(id=key.value, ctx=ast.Store())], value=value)
                             for key, value in zip(space.keys, space.values)]
        for part in ast.walk(tree):  # named by the call's line
            if "lineno" in part._attributes:
                ast.copy_location(part, given)
        self.statements.append((given.value, tree.body))

    # -- what a Triton kernel calls
    def _check_kernel_call(self, node):
        """A call in a Triton kernel: a Triton library function that does the exercise's work is refused,
        and so is anything Triton does not compile (a plain Python helper, numpy, a method of a module-level
        object): deny by default."""
        func, kernel = node.func, self.stack[-1].node.name
        paths = self.paths(func)
        library = sorted({key for p in paths for key in [self._library_entry(p)] if key is not None})
        if (not library and isinstance(func, ast.Attribute) and self._kernel_value(func.value)
                and any(p.rsplit(".", 1)[1] == func.attr for p in self.kernel_library)):
            library = [next(p for p in self.kernel_library if p.rsplit(".", 1)[1] == func.attr)]  # x.softmax()
        if library and (self.reachable is None or self.reach_depth > 0):  # a kernel the entry point can reach
            self.report(node, "kernel-library", f"calls {self.text(func)} in the Triton kernel {kernel}: "
                        f"{self.kernel_library[library[0]]}")
            return
        if paths & {"builtins.getattr", "builtins.hasattr"} and not self._kernel_getattr_ok(node):
            return
        if self._kernel_value(func) or all(self._compiled(p, func) for p in paths):
            return
        if (paths and all(_is_external(p) for p in paths)
                and all(self._constant(a) for a in [*node.args, *(k.value for k in node.keywords)])):
            return  # math.log2(math.e): arithmetic on constants, done when the kernel compiles
        self.report(node, "escape", f"calls {self.text(func)} in the Triton kernel {kernel}: {_KERNEL_PYTHON}")

    def _library_entry(self, path: str):
        """The entry of ``kernel_library`` that ``path`` is: the same spelling, or the same object reached by
        another (``getattr(tl, "atomic_add")``, ``triton.language.core.atomic_add``)."""
        if path in self.kernel_library:
            return path
        obj = resolve_path(path) if path.startswith("triton.") else None
        if obj is None:
            return None
        owner = resolve_path(path.rsplit(".", 1)[0])
        if isinstance(owner, type) and owner.__module__.startswith("triton.language"):
            # tl.tensor.softmax(x): a method of Triton's tensor class is the library function of its name
            name = path.rsplit(".", 1)[1]
            return next((key for key in self.kernel_library if key.rsplit(".", 1)[1] == name), None)
        return next((key for key in self.kernel_library if resolve_path(key) is obj), None)

    def _kernel_getattr_ok(self, node) -> bool:
        """``getattr(v, "name")`` in a kernel is ``v.name``: a constant name of Triton's language (reported
        otherwise, and False)."""
        kernel, args = self.stack[-1].node.name, node.args
        name = args[1] if len(args) >= 2 else None
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
            self.report(node, "escape", f"calls {self.text(node)} in the Triton kernel {kernel}: an attribute "
                        f"by a computed name is not Triton's language ({_KERNEL_ATTRIBUTE})")
            return False
        if self.paths(args[0]) & {_LOCAL, _OWN} and name.value not in kernel_value_attributes():
            self.report(node, "escape", f"uses {self.text(node)} in the Triton kernel {kernel}: {name.value!r} "
                        f"is not an attribute of Triton's values ({_KERNEL_ATTRIBUTE})")
            return False
        return True

    def _constant(self, expr) -> bool:
        """A constant the kernel's compilation folds: literals, math's constants (``math.e``), arithmetic
        on them and math's functions of them."""
        if isinstance(expr, ast.Constant):
            return True
        if isinstance(expr, ast.UnaryOp):
            return self._constant(expr.operand)
        if isinstance(expr, ast.BinOp):
            return self._constant(expr.left) and self._constant(expr.right)
        if isinstance(expr, ast.Attribute):
            paths = self.paths(expr)
            return bool(paths) and all(p.startswith("math.") for p in paths)
        if isinstance(expr, ast.Call):
            paths = self.paths(expr.func)
            return (bool(paths) and all(p.startswith("math.") for p in paths) and not expr.keywords
                    and all(self._constant(a) for a in expr.args))
        return False

    def _check_kernel_arguments(self, node):
        """``kernel[grid](..., FN=helper)``: a plain Python function (or lambda) of the submission handed to
        its Triton kernel, which would call it like one of its own (a constexpr argument)."""
        func = node.func
        if not (isinstance(func, ast.Subscript) and isinstance(func.value, ast.Name) and func.value.id in self.kernels
                and _OWN in self.paths(func.value)):
            return
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            plain = isinstance(arg, ast.Lambda) or (isinstance(arg, ast.Name) and arg.id not in self.kernels
                                                    and self.paths(arg) == {_OWN})
            if plain:
                self.report(arg, "escape", f"passes {self.text(arg)} to the Triton kernel {func.value.id}: "
                            f"{_KERNEL_PYTHON}")

    def _kernel_value(self, expr) -> bool:
        """Whether ``expr`` is reached from a value of the kernel (a parameter, a local, a call's result):
        its methods are the value's (``x.to(...)``, ``ptr.dtype.element_ty``), a constexpr parameter is a
        kernel passed in. Not through ``.handle``, the value's representation under the interpreter."""
        while isinstance(expr, (ast.Attribute, ast.Subscript)):
            if isinstance(expr, ast.Attribute) and expr.attr not in kernel_value_attributes():
                return False
            expr = expr.value
        if isinstance(expr, ast.Name):
            return expr.id in self.stack[-1].bindings
        return True  # what an expression computes (a call's result, itself checked; e / s; a literal)

    def _compiled(self, path: str, func) -> bool:
        if (path.startswith("triton.") or path in _KERNEL_BUILTINS or path in self.kernels_beside
                or path in course_kernels()):
            return True
        return (path in (_OWN, _LOCAL) and isinstance(func, ast.Name) and func.id in self.kernels
                and func.id not in self.stack[-1].bindings)  # the module's kernel, not a local of that name

    def _check_method(self, node):
        """Methods that write files or use streams, on whatever object (``Path(p).write_text``)."""
        attr = node.attr
        if attr in _WRITE_METHODS and not self._is_own(node.value):
            self.report(node, "file-write", f"uses .{attr}(...), which writes files: graded code may read "
                        "files but not write them")
        feature = _FEATURE_METHODS.get(attr)
        if feature and feature not in self.allow:
            self.report(node, "feature", f"uses .{attr}(...) ({feature}): {_FEATURE_WHY[feature]}; this "
                        "exercise does not allow it")

    def _is_own(self, expr) -> bool:
        paths = self.paths(expr)
        return bool(paths) and paths <= {_OWN}

    @staticmethod
    def _argument(node, name: str, index: int | None):
        """The expression a call passes as its parameter ``name`` (at position ``index``, where it may be passed
        by position): a keyword, a position, an entry of a literal ``**{...}``; else the ``*args`` or
        ``**kwargs`` the audit cannot read that may carry it; None where nothing passes it."""
        for k in node.keywords:
            if k.arg == name:
                return k.value
        for position, arg in enumerate(node.args if index is not None else ()):
            if isinstance(arg, ast.Starred):
                return arg  # the positions from here on are not known
            if position == index:
                return arg
        for k in node.keywords:
            if k.arg is not None:
                continue
            if not (isinstance(k.value, ast.Dict) and all(isinstance(key, ast.Constant) for key in k.value.keys)):
                return k.value  # f(**options): what it holds is not read here
            for key, value in zip(k.value.keys, k.value.values):
                if key.value == name:
                    return value
        return None

    def _check_open(self, node, index):
        mode = self._argument(node, "mode", index)
        if mode is None:
            return
        if isinstance(mode, ast.Constant) and isinstance(mode.value, str):
            if _WRITE_MODE_CHARS & set(mode.value):
                self.report(node, "file-write", f"opens a file for writing (mode {mode.value!r}): graded code may "
                            "read files but not write them")
        else:
            self.report(node, "file-write", f"opens a file with a computed mode ({self.text(mode)}): graded code "
                        "may only open files for reading, with a constant mode")

    _NS_READS = frozenset({"get", "keys", "values", "items", "copy", "__contains__", "__getitem__"})
    _NS_READERS = frozenset({"builtins.len", "builtins.sorted", "builtins.list", "builtins.dict", "builtins.set",
                             "builtins.tuple", "builtins.print", "builtins.repr", "builtins.str", "builtins.iter"})

    def _check_namespace_call(self, call):
        """globals()/locals()/vars(x) may be read in place; writing or letting them escape is reported."""
        parent = self.parents.get(id(call))
        if isinstance(parent, ast.Subscript) and parent.value is call:
            if call.args and self.external(call.args[0]):
                self.report(call, "dynamic-code", f"{self.text(parent)}: reaches a module's functions by name through "
                            "its namespace, which the audit cannot follow")
                return
            if isinstance(parent.ctx, ast.Load):
                return
        elif isinstance(parent, ast.Attribute) and parent.attr in self._NS_READS:
            return
        elif isinstance(parent, ast.Compare) and call in parent.comparators:
            return
        elif isinstance(parent, (ast.For, ast.comprehension)) and parent.iter is call:
            return
        elif isinstance(parent, ast.Call) and call in parent.args and self.paths(parent.func) & self._NS_READERS:
            return
        elif isinstance(parent, ast.keyword) and parent.arg == "globals" and self._runs_literals(self.parents.get(id(parent))):
            return  # timeit.timeit("f(x)", globals=globals()): the audited statement runs in the module's names
        self.report(call, "dynamic-code", f"{self.text(call)} used to write or passed on: changing namespaces "
                    "through globals()/vars() is invisible to the audit")

    def _check_namespace_write(self, value, target):
        if isinstance(value, ast.Call) and self.paths(value.func) & {"builtins.globals", "builtins.locals", "builtins.vars"}:
            self.report(target, "dynamic-code", f"writes {self.text(target)}: changing namespaces through "
                        "globals()/vars() is invisible to the audit")

    def _check_format_call(self, node) -> None:
        """``text.format(...)`` / ``format_map`` / ``string.Formatter``: a format the audit cannot read (text
        computed at run time) may reach any attribute of the arguments, as a written one would."""
        func = node.func
        if self.paths(func) & {"string.Formatter", "string.Formatter.vformat", "string.Formatter.format"}:
            self.report(node, "dynamic-code", f"{self.text(node)}: string.Formatter reads attributes of its "
                        "arguments through format fields the audit cannot see")
            return
        if not (isinstance(func, ast.Attribute) and func.attr in ("format", "format_map")):
            return
        receiver = func.value
        if self.external(receiver) & {"builtins.str", "<type>"} and node.args:  # str.format(text, ...), type("").format
            receiver = node.args[0]                                              # (text, ...): text is the format
        if isinstance(receiver, ast.Constant) and isinstance(receiver.value, str):
            return  # read by visit_Constant
        named = receiver.value if isinstance(receiver, ast.Subscript) else receiver  # MESSAGES["shape"]
        if isinstance(named, ast.Name) and named.id in self.literal_strings:
            reached = next((r for r in map(_format_field_reach, self.literal_strings[named.id]) if r), None)
            if reached:
                self.report(node, "escape", f"{self.text(node)}: the format's field {reached!r} reaches an attribute "
                            "the grader relies on")
            return
        if self.graded is None or self.graded_depth == 0:
            return  # a table a notebook's cell prints (not graded code)
        if any(not p.startswith(("builtins.", "<")) for p in self.external(receiver)):
            return  # a module's own format function (string.Template's, logging's), not a string's
        self.report(node, "dynamic-code", f"{self.text(node)}: a format made at run time reaches attributes of "
                    "its arguments through fields the audit cannot read (write the format as a string literal)")

    def visit_Constant(self, node):
        if isinstance(node.value, str) and "{" in node.value:
            reached = _format_field_reach(node.value)
            if reached:
                self.report(node, "escape", f"a format string's field {reached!r} reaches an attribute the grader "
                            "relies on (str.format reads attributes and items of its arguments, dunders too)")
        if node.value in _MEMORY_PROTOCOLS:
            self._memory_protocol(node, f"names {node.value!r} as a string", node.value)
        if node.value in _ESCAPE_DUNDERS or node.value in ("__dict__", "__class__", "__builtins__"):
            self.report(node, "escape", f"names {node.value!r} as a string (getattr(x, {node.value!r})): it reaches "
                        "objects the grader relies on")
        text = node.value.upper() if isinstance(node.value, str) else ""
        if ("AUTOGRADER_" in text or text.startswith("AUTOGRADER")) and not isinstance(self.parents.get(id(node)), ast.Expr):
            # (a docstring may mention the grader; a string the code uses names its settings or modules)
            self.report(node, "grader-state", f"mentions {node.value[:40]!r}: reading the grader's settings or "
                        "modules lets code behave differently while graded")
