"""Every part of Triton's internals that the course uses, in one place, with the versions it was tested on.

The course reaches below Triton's public API in a few places: the grader pins an autotuner to one config
and counts launches (``autograder.worker``, ``autograder.legality``), the interpreter is made to round and
bound-check like a GPU (``course.interpreter``, ``course.bounds``), kernels are compiled ahead of time for
an H100 without one (``course.aot``), and reference kernels launch their bound specializations directly
(``kernels_ref._launch``). Those modules take what they need from here, by name:

    Autotuner = internal("Autotuner")

Internals change between Triton releases without notice, so:

- ``TESTED`` lists the versions every use below was tested on: triton 3.6 (every GPU result in results/,
  H100 and H200) and 3.9 (development and CI, the interpreter). The first ``internal(...)`` of a process
  checks the installed version (``import course`` makes one without a GPU, for the interpreter's bounds
  checks): another version gets one ``UntestedTriton`` warning that says what may break and what to install;
- ``internal(name)`` on a version where a name is gone raises ``MissingInternal`` (an ``ImportError``, so
  the callers that degrade gracefully without it still do) naming the internal, its users and the fix;
- ``tests/test_foundation.py`` resolves every entry of ``INTERNALS`` on the installed Triton.
"""
from __future__ import annotations

import importlib
import warnings

# major.minor versions every internal below was tested on (see the module's docstring)
TESTED = ("3.6", "3.9")
INSTALL = "pip install 'triton==3.9.0' (CPU, the interpreter) or 'triton==3.6.0' (as on the GPU runners)"

# name -> (dotted path: a module, then attributes; the course's modules that use it)
INTERNALS: dict[str, tuple[str, str]] = {
    "Autotuner": ("triton.runtime.autotuner.Autotuner", "autograder.worker, autograder.legality"),
    "Autotuner._bench": ("triton.runtime.autotuner.Autotuner._bench", "autograder.worker (pinned configs)"),
    "Autotuner.prune_configs": ("triton.runtime.autotuner.Autotuner.prune_configs", "autograder.worker"),
    "CompiledKernel": ("triton.compiler.compiler.CompiledKernel", "autograder.legality (launches of a compiled kernel)"),
    "CompilationError": ("triton.compiler.errors.CompilationError",
                         "autograder.legality (a launch that never started is not counted)"),
    "driver": ("triton.runtime.driver.driver", "course.interpreter (the device query Triton's tutorials make)"),
    "Heuristics": ("triton.runtime.autotuner.Heuristics", "autograder.legality, kernels_ref._launch"),
    "OutOfResources": ("triton.runtime.errors.OutOfResources", "autograder.worker, autograder.legality"),
    "JITFunction": ("triton.runtime.jit.JITFunction", "autograder.legality, course.aot"),
    "KernelInterface": ("triton.runtime.jit.KernelInterface",
                        "course.triton_compat (what the interpreter's autotune decorates)"),
    "JITFunction._pack_args": ("triton.runtime.jit.JITFunction._pack_args", "course.aot"),
    "create_function_from_signature": ("triton.runtime.jit.create_function_from_signature", "course.aot"),
    "InterpretedFunction": ("triton.runtime.interpreter.InterpretedFunction", "autograder.legality"),
    "interpreter": ("triton.runtime.interpreter", "course.interpreter, course.bounds"),
    "InterpreterBuilder.cast_impl": ("triton.runtime.interpreter.InterpreterBuilder.cast_impl",
                                     "course.interpreter (bf16 rounding)"),
    "InterpreterBuilder.create_fadd": ("triton.runtime.interpreter.InterpreterBuilder.create_fadd",
                                       "course.interpreter (bf16 arithmetic)"),
    "InterpreterBuilder.create_dot": ("triton.runtime.interpreter.InterpreterBuilder.create_dot",
                                      "course.interpreter (bf16 tl.dot)"),
    "ReduceOps.sum": ("triton.runtime.interpreter.ReduceOps.sum", "course.interpreter (bf16 sums)"),
    "ReduceOps.min_max": ("triton.runtime.interpreter.ReduceOps.min_max", "course.interpreter (bf16 max, min)"),
    "_implicit_cvt": ("triton.runtime.interpreter._implicit_cvt", "course.interpreter (float arguments)"),
    "_patch_lang_tensor": ("triton.runtime.interpreter._patch_lang_tensor",
                           "course.interpreter (a scalar read as an int)"),
    "_patch_lang": ("triton.runtime.interpreter._patch_lang", "course.interpreter (libdevice under the interpreter)"),
    "_patch_builtin": ("triton.runtime.interpreter._patch_builtin",
                       "course.interpreter (a package's builtins wrapped once, not at every launch)"),
    "InterpreterBuilder.create_masked_load": ("triton.runtime.interpreter.InterpreterBuilder.create_masked_load",
                                              "course.bounds"),
    "GridExecutor._init_args_hst": ("triton.runtime.interpreter.GridExecutor._init_args_hst",
                                    "course.bounds, course.interpreter (arguments in place)"),
    "GridExecutor._restore_args_dev": ("triton.runtime.interpreter.GridExecutor._restore_args_dev",
                                       "course.interpreter (arguments in place)"),
    "_get_np_dtype": ("triton.runtime.interpreter._get_np_dtype", "course.bounds"),
    "GPUTarget": ("triton.backends.compiler.GPUTarget", "course.aot"),
    "ASTSource": ("triton.compiler.ASTSource", "course.aot"),
    "make_backend": ("triton.compiler.make_backend", "course.aot"),
    "get_ptxas": ("triton.backends.nvidia.compiler.get_ptxas", "course.aot"),
    "make_tensordesc_arg": ("triton.backends.nvidia.driver.make_tensordesc_arg", "probes.matmul_launch_cost"),
}


class UntestedTriton(UserWarning):
    """The installed Triton is not one the course's use of its internals was tested on."""


class MissingInternal(ImportError):
    """A Triton internal the course uses is not in the installed Triton."""


def version() -> str:
    import triton

    return triton.__version__


def is_tested(v: str | None = None) -> bool:
    v = version() if v is None else v
    return ".".join(v.split(".")[:2]) in TESTED


def untested_message(v: str) -> str:
    return (f"triton {v} is not a version the course was tested on ({', '.join(TESTED)}): the grader's "
            f"autotuner pinning and launch counting, the interpreter's bounds checks and bf16 rounding, and "
            f"ahead-of-time compilation use Triton internals that may have changed. If something fails: {INSTALL}")


_warned = False


def check_version() -> bool:
    """Whether the installed Triton was tested; warns once (``UntestedTriton``) where it was not."""
    global _warned
    v = version()
    if is_tested(v):
        return True
    if not _warned:
        _warned = True
        warnings.warn(untested_message(v), UntestedTriton, stacklevel=2)
    return False


def _resolve(path: str):
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):  # the longest importable module, then attributes
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(path)


def internal(name: str):
    """The Triton internal registered as ``name`` in INTERNALS; ``MissingInternal`` if this Triton lacks it."""
    path, users = INTERNALS[name]
    check_version()
    try:
        return _resolve(path)
    except (ImportError, AttributeError) as exc:
        raise MissingInternal(f"{path} (used by {users}) is not in triton {version()}; the course was tested "
                              f"on triton {', '.join(TESTED)}: {INSTALL}") from exc
