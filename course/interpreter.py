"""What ``course`` changes in Triton's interpreter so that interpreted kernels compute what compiled ones do.

Applied (``patch_interpreter()``) when something that runs kernels is imported while ``course`` interprets
(no GPU): the autograder (every notebook imports it, every grading worker runs under it) and
``course.triton_compat`` (the reference kernels). Not at ``import course``: a script may still switch the
interpreter off after that and before it imports Triton (tests/_sm90_compile.py compiles for a GPU that way).

- ``round_interpreted_bf16()``: the interpreter's ``x.to(tl.bfloat16)`` drops the low 16 bits of a float32
  (rounds toward zero: up to 1 ulp off, and biased), where compiled kernels round to nearest even. Seen
  here (triton 3.9), it doubled the error of a bf16 transformer block against float64. Patched so the
  interpreter rounds like the GPU.
- ``compute_bf16_in_fp32()``: the interpreter keeps bfloat16 values as their uint16 bits (numpy has no
  bfloat16) and computes on those bits as integers: a bf16 ``+`` gave NaN, a 16x16 bf16 ``tl.dot`` was off
  by 2.7e10, a comparison of negative values was reversed. Honest kernels (Triton's vector-add tutorial on
  bf16 inputs, a FlashAttention with a bf16 ``P @ V``) then failed on the CPU only. Patched as a GPU
  computes: bf16 operands widened to float32 (exactly), the operation in float32, a bf16 result rounded to
  nearest even; a ``tl.dot`` of bf16 operands accumulates their exact products in float32, as tensor
  cores do.
- ``float_arguments_as_fp32()``: a Python float kernel argument reached the kernel as a Python float, so
  ``eps.to(tl.float32)``, valid on a GPU (where it is an fp32 scalar), raised. Patched to an fp32 scalar;
  a bool argument, which Triton 3.6 held in an array its own int1 type refused, to an int1 scalar.
- ``scalars_index_as_ints()``: Triton 3.6 read a scalar used as an int (``range(0, n, BLOCK)``) with
  ``int()`` of a one-element array, which NumPy 2.4 refuses; read as its one value, as Triton 3.9 does.

- ``answer_device_queries()``: with no GPU Triton has "0 active drivers", so Triton's tutorials, which ask
  ``triton.runtime.driver.active.get_active_torch_device()`` at import, failed to import on the CPU. The
  interpreter's driver answers the device (the CPU) and its index, and nothing else.
- ``libdevice_in_numpy()``: ``triton.language.extra.libdevice`` holds stubs that the compiler swaps for the
  GPU's math library; the interpreter called the stub itself, which returns None (an honest Liger-style
  GELU with ``libdevice.tanh`` failed every case on the CPU, with an error about ``None``). Patched: in an
  interpreted kernel, libdevice's functions (however imported) compute with numpy in the argument's dtype;
  one with no numpy version here raises an error that names it.

- ``builtin_wrappers_made_once()``: at every launch the interpreter listed every member of
  ``triton.language``, its tensor class and ``tl.math`` (``inspect.getmembers``: hundreds of names, sorted)
  and wrapped each builtin in a new lambda, and the libdevice patch above scanned every libdevice module:
  about 40% of the CPU time of 08's loss on small shapes (738 launches, 1.8 s). The builtins of a library
  module and their wrappers are the same at every launch, so each package's are made once, by the
  interpreter's own code, and set and restored at each launch as before.

- ``keep_kernel_modules_as_written()``: to run an interpreted kernel, the interpreter rewrites its text into
  calls of its own (``interpreter_semantic``...) and, at the kernel's first launch, copied every global of
  its own module (``np``, ``inspect``, ``time``, the interpreter's internals) into the kernel's module
  wherever that module lacked the name: the module then held names its source never bound, numpy and
  inspect among them (a kernel's module is a learner's submission). Patched: the names the rewriting
  inserted reach the rewritten kernel as closure variables, and so do the kernel's own closure variables
  (what a GPU's compiler captures with the module's globals); the kernel's module is left as written. The
  interpreter's check that a kernel's module sees ``triton.language`` (which the copy used to satisfy for a
  kernel whose ``tl`` was a closure variable) looks at the kernel's closure too.

``launch_cpu_arguments_in_place()`` is applied at ``import course``, before ``course.bounds`` wraps the same
launch (so that the bounds checks see the tensors the kernel gets): before a launch the interpreter
"copies the arguments to the host" (for CPU tensors: the same storage) and after it copies them back,
each through a nested function that calls itself, a reference cycle that held every argument's storage
until the cycle collector ran. A chunk of logits freed with ``del`` then stayed allocated (08's streamed
loss showed eager's peak on the CPU, and the grader's ``MemoryMeter`` counted every chunk). Patched:
all-CPU arguments are handed to the kernel as they are (what the copy amounted to), and nothing is held
after the launch.
"""
from __future__ import annotations

import ast
import io
import math
import tokenize

import numpy as np
import torch


def unpatched(obj):
    """The language function behind the interpreter's stand-in for it: an interpreted launch replaces Triton's
    builtins (``tl.max``, ``triton.language.core.atomic_xchg``) by lambdas that call them, and may leave a
    module's stand-ins in place after the launch; what a name IS is the function underneath."""
    while (callable(obj) and getattr(obj, "__name__", "") == "<lambda>"
           and str(getattr(obj, "__module__", "")).startswith("triton.runtime")
           and "member" in (getattr(obj, "__kwdefaults__", None) or {})):
        obj = obj.__kwdefaults__["member"]
    return obj


def patch_interpreter() -> bool:
    """Every patch below; whether all are in place (False when this Triton's interpreter is laid out
    differently: then it keeps its own behaviour)."""
    # keep_kernel_modules_as_written first: libdevice_in_numpy wraps the language patch it adjusts
    return all([keep_kernel_modules_as_written(), round_interpreted_bf16(), compute_bf16_in_fp32(),
                float_arguments_as_fp32(), scalars_index_as_ints(), libdevice_in_numpy(), answer_device_queries(),
                builtin_wrappers_made_once()])


class InterpreterDriver:
    """What ``triton.runtime.driver.active`` is under the interpreter: the device kernels run on here (the
    CPU, where their tensors live) and its index, which Triton's tutorials ask at import
    (``DEVICE = triton.runtime.driver.active.get_active_torch_device()``). What only a GPU's driver does
    (compiling, benchmarking, device properties) has no interpreter version: asking for it raises an
    ``AttributeError`` that names it."""

    def get_active_torch_device(self) -> torch.device:
        return torch.device("cpu")

    def get_current_device(self) -> int:
        return 0

    def __getattr__(self, name):
        raise AttributeError(f"triton.runtime.driver.active.{name}: the Triton interpreter (this CPU run) has no "
                             f"GPU driver; only get_active_torch_device() and get_current_device() are answered")


def answer_device_queries() -> bool:
    """Without a GPU Triton has "0 active drivers" and ``driver.active`` raises: make it the interpreter's."""
    from course.triton_internals import internal

    try:
        driver = internal("driver")
    except ImportError:  # MissingInternal
        return False
    if not isinstance(getattr(driver, "_active", None), InterpreterDriver):
        try:
            driver.active  # noqa: B018  (a real driver, where one is active, stays)
        except RuntimeError:
            driver.set_active(InterpreterDriver())
    return True


def _interpreter():
    try:
        import triton.language as tl

        from course.triton_internals import internal

        interpreter = internal("interpreter")
        for name in ("InterpreterBuilder.create_fadd", "InterpreterBuilder.create_dot", "ReduceOps.sum",
                     "ReduceOps.min_max", "_implicit_cvt"):
            internal(name)
        return tl, interpreter
    except (ImportError, AttributeError):
        return None, None


def _to_bf16_bits(fp32: np.ndarray) -> np.ndarray:
    """float32 values rounded to nearest even bfloat16, as uint16 bits (the interpreter's storage)."""
    bits = torch.from_numpy(np.ascontiguousarray(fp32, dtype=np.float32)).to(torch.bfloat16).view(torch.int16)
    return bits.numpy().view(np.uint16)


def _from_bf16_bits(bits: np.ndarray) -> np.ndarray:
    """bfloat16 values (uint16 bits) widened to float32, exactly."""
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)


def round_interpreted_bf16() -> bool:
    """Make the interpreter's float32 -> bfloat16 cast round to nearest even, as compiled kernels do."""
    tl, interpreter = _interpreter()
    if interpreter is None:
        return False
    builder, handle = interpreter.InterpreterBuilder, interpreter.TensorHandle
    original = builder.cast_impl
    if getattr(original, "_rounds_bf16", False):
        return True

    def cast_impl(self, src, dst_type):
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            return handle(_to_bf16_bits(src.data), dst_type.scalar)
        return original(self, src, dst_type)

    cast_impl._rounds_bf16 = True
    builder.cast_impl = cast_impl
    return True


# Builder operations on floats: those whose result is a value of the operands' type (rounded back to bf16)
# and those whose result is a truth value or takes the accumulator's type (``tl.dot``: kept as computed).
_ROUNDED = ("create_fadd", "create_fsub", "create_fmul", "create_fdiv", "create_frem", "create_precise_divf",
            "create_approx_divf", "create_minimumf", "create_maximumf", "create_minnumf", "create_maxnumf",
            "create_fneg", "create_exp", "create_exp2", "create_log", "create_log2", "create_sqrt",
            "create_precise_sqrt", "create_rsqrt", "create_sin", "create_cos", "create_floor", "create_ceil",
            "create_erf", "create_fma", "create_clampf")
_KEPT = tuple(f"create_fcmp{c}" for c in ("OLT", "OGT", "OLE", "OGE", "OEQ", "ONE", "ULT", "UGT", "ULE", "UGE",
                                          "UEQ", "UNE")) + ("create_dot",)


def compute_bf16_in_fp32() -> bool:
    """Make the interpreter compute on bfloat16 values in float32 and round results to bfloat16."""
    tl, interpreter = _interpreter()
    if interpreter is None:
        return False
    builder, handle, reduce_ops = interpreter.InterpreterBuilder, interpreter.TensorHandle, interpreter.ReduceOps
    if getattr(builder.create_fadd, "_bf16_in_fp32", False):
        return True

    def is_bf16(x):
        return isinstance(x, handle) and x.dtype.scalar == tl.bfloat16

    def widen(x):
        return handle(_from_bf16_bits(x.data), tl.float32) if is_bf16(x) else x

    def patched(original, rounded: bool):
        def op(self, *args):
            if not any(is_bf16(a) for a in args):
                return original(self, *args)
            out = original(self, *(widen(a) for a in args))
            if rounded and isinstance(out, handle) and out.dtype.scalar == tl.float32:
                return handle(_to_bf16_bits(out.data), tl.bfloat16)
            return out

        op._bf16_in_fp32 = True
        return op

    for names, rounded in ((_ROUNDED, True), (_KEPT, False)):
        for name in names:
            if hasattr(builder, name):
                setattr(builder, name, patched(getattr(builder, name), rounded))

    # Reductions the interpreter does in numpy on the storage (sum, max, min): in float32, rounded once.
    original_sum, original_min_max = reduce_ops.sum, reduce_ops.min_max

    def bf16_tensor(x):
        return isinstance(x, tl.tensor) and x.dtype == tl.bfloat16

    def wide_tensor(x):
        return tl.tensor(handle(_from_bf16_bits(x.handle.data), tl.float32), tl.float32)

    def narrow(out):
        if isinstance(out, tl.tensor) and out.dtype == tl.float32:
            return tl.tensor(handle(_to_bf16_bits(np.asarray(out.handle.data)), tl.bfloat16), tl.bfloat16)
        return out

    def reduce_sum(self, input):
        return narrow(original_sum(self, wide_tensor(input))) if bf16_tensor(input) else original_sum(self, input)

    def min_max(self, input, val_reduce_op, idx_reduce_op=None):
        values = input[0] if isinstance(input, tuple) else input
        if not bf16_tensor(values):
            return original_min_max(self, input, val_reduce_op, idx_reduce_op)
        out = original_min_max(self, wide_tensor(values), val_reduce_op, idx_reduce_op)
        return (narrow(out[0]), out[1]) if isinstance(out, tuple) else (narrow(out) if val_reduce_op else out)

    reduce_ops.sum, reduce_ops.min_max = reduce_sum, min_max
    return True


def float_arguments_as_fp32() -> bool:
    """Hand a Python float kernel argument to the interpreted kernel as an fp32 scalar, and a bool as an int1
    scalar, as a GPU launch does."""
    tl, interpreter = _interpreter()
    if interpreter is None or not hasattr(interpreter, "_implicit_cvt"):
        return False
    original = interpreter._implicit_cvt
    if getattr(original, "_fp32_floats", False):
        return True

    def implicit_cvt(arg):
        if isinstance(arg, float):
            return tl.tensor(interpreter.TensorHandle(np.array([arg], dtype=np.float32), tl.float32), tl.float32)
        if isinstance(arg, bool):  # Triton 3.6 holds a bool in an int32 array that its int1 type refuses
            return tl.tensor(interpreter.TensorHandle(np.array([arg], dtype=np.bool_), tl.int1), tl.int1)
        return original(arg)

    implicit_cvt._fp32_floats = True
    interpreter._implicit_cvt = implicit_cvt
    return True


def scalars_index_as_ints() -> bool:
    """A scalar used where Python wants an int (``range(0, n, BLOCK)`` over a runtime ``n``, in a kernel or a
    Triton function it calls) is read as its one value. Triton 3.6 read it with ``int()`` of a one-element
    array, which NumPy 2.4 refuses ("only 0-dimensional arrays can be converted to Python scalars")."""
    from course.triton_internals import internal

    tl, interpreter = _interpreter()
    try:
        original = internal("_patch_lang_tensor")
    except (ImportError, AttributeError):
        return False
    if getattr(original, "_scalar_index", False):
        return True

    def patch_lang_tensor(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.squeeze()))  # as Triton 3.9

    patch_lang_tensor._scalar_index = True
    interpreter._patch_lang_tensor = patch_lang_tensor
    return True


def _on_cpu(arg) -> bool:
    """Whether a launch argument holds no tensor other than CPU tensors (tuples, TensorWrapper and
    TensorDescriptor, which keep theirs in ``.base``, looked into)."""
    if isinstance(arg, torch.Tensor):
        return arg.device.type == "cpu"
    if isinstance(arg, (tuple, list)):
        return all(_on_cpu(a) for a in arg)
    inner = getattr(arg, "base", None)
    return inner is None or _on_cpu(inner)


def launch_cpu_arguments_in_place() -> bool:
    """Hand CPU tensors to interpreted kernels without the interpreter's host round trip (module
    docstring). Returns whether the patch is in place (False for an interpreter laid out differently)."""
    _, interpreter = _interpreter()
    executor = getattr(interpreter, "GridExecutor", None)
    if executor is None or not all(hasattr(executor, n) for n in ("_init_args_hst", "_restore_args_dev")):
        return False
    if getattr(executor, "_course_in_place", False):
        return True
    to_host, from_host = executor._init_args_hst, executor._restore_args_dev

    def init_args_hst(self, args_dev, kwargs):
        if _on_cpu(tuple(args_dev)) and _on_cpu(tuple(kwargs.values())):
            return list(args_dev), dict(kwargs)
        return to_host(self, args_dev, kwargs)

    def restore_args_dev(self, args_dev, args_hst, kwargs, kwargs_hst):
        same = all(a is b for a, b in zip(args_dev, args_hst)) and all(kwargs_hst[k] is v for k, v in kwargs.items())
        if not same:  # the kernel wrote into the arguments themselves otherwise: nothing to copy back
            from_host(self, args_dev, args_hst, kwargs, kwargs_hst)

    executor._init_args_hst, executor._restore_args_dev = init_args_hst, restore_args_dev
    executor._course_in_place = True
    return True


# libdevice's functions computed with numpy (rounding modes other than to nearest are not emulated: the
# ``_rn`` spellings only). Each takes and returns values of the first floating argument's dtype.
_NP_UNARY = {
    "abs": np.abs, "fabs": np.abs, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "rint": np.rint,
    "nearbyint": np.rint, "round": lambda x: np.trunc(x + np.copysign(x.dtype.type(0.5), x)),
    "exp": np.exp, "exp2": np.exp2, "exp10": lambda x: np.power(x.dtype.type(10), x), "expm1": np.expm1,
    "fast_expf": np.exp, "fast_exp10f": lambda x: np.power(x.dtype.type(10), x),
    "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p, "fast_logf": np.log,
    "fast_log2f": np.log2, "fast_log10f": np.log10,
    "sqrt": np.sqrt, "sqrt_rn": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "cbrt": np.cbrt,
    "rcbrt": lambda x: 1 / np.cbrt(x), "rcp_rn": lambda x: 1 / x,
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "fast_sinf": np.sin, "fast_cosf": np.cos, "fast_tanf": np.tan,
    "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh,
    "tanh": np.tanh, "fast_tanhf": np.tanh, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
    "sinpi": lambda x: np.sin(np.pi * x), "cospi": lambda x: np.cos(np.pi * x),
    "erf": np.vectorize(math.erf, otypes=[np.float64]), "erfc": np.vectorize(math.erfc, otypes=[np.float64]),
    "lgamma": np.vectorize(math.lgamma, otypes=[np.float64]), "tgamma": np.vectorize(math.gamma, otypes=[np.float64]),
    "saturatef": lambda x: np.clip(x, 0, 1),
}
_NP_BINARY = {
    "pow": np.power, "powf": np.power, "fast_powf": np.power, "fmax": np.fmax, "fmin": np.fmin,
    "fmod": np.fmod, "remainder": np.remainder, "atan2": np.arctan2, "hypot": np.hypot,
    "copysign": np.copysign, "fdim": lambda x, y: np.maximum(x - y, 0), "add_rn": np.add,
    "sub_rn": np.subtract, "mul_rn": np.multiply, "div_rn": np.divide, "fast_dividef": np.divide,
}
_NP_PREDICATES = {"isnan": np.isnan, "isinf": np.isinf, "isfinited": np.isfinite, "finitef": np.isfinite,
                  "signbit": np.signbit}
_LIBDEVICE_MODULES = ("triton.language.extra.libdevice", "triton.language.extra.cuda.libdevice",
                      "triton.language.extra.hip.libdevice")


class LibdeviceUnavailable(NotImplementedError):
    """A libdevice function with no numpy version under the interpreter."""


def _libdevice_function(tl, interpreter, name):
    """libdevice's ``name`` for interpreted kernels: numpy on the arguments' values, in their dtype."""
    handle = interpreter.TensorHandle

    def values(arg, like):
        if isinstance(arg, tl.tensor):
            if arg.dtype == tl.bfloat16:
                return _from_bf16_bits(arg.handle.data)
            return arg.handle.data
        dtype = like.handle.data.dtype if like is not None and like.dtype != tl.bfloat16 else np.float32
        return np.asarray(arg, dtype=dtype)

    def wrap(data, like):
        if like is None:
            return tl.tensor(handle(np.asarray(data, np.float32).reshape(-1), tl.float32), tl.float32)
        if like.dtype == tl.bfloat16:
            return tl.tensor(handle(_to_bf16_bits(np.asarray(data, np.float32)), tl.bfloat16), like.type)
        return tl.tensor(handle(np.asarray(data).astype(like.handle.data.dtype), like.dtype), like.type)

    def fn(*args, **_kwargs):
        like = next((a for a in args if isinstance(a, tl.tensor) and a.dtype.is_floating()), None)
        arrays = [values(a, like) for a in args]
        with np.errstate(all="ignore"):
            if name in _NP_PREDICATES:
                out = _NP_PREDICATES[name](arrays[0])
                return tl.tensor(handle(out, tl.int1), tl.block_type(tl.int1, list(out.shape)) if out.ndim else tl.int1)
            if name in _NP_UNARY and len(arrays) == 1:
                return wrap(_NP_UNARY[name](arrays[0]), like)
            if name in _NP_BINARY and len(arrays) == 2:
                return wrap(_NP_BINARY[name](*arrays), like)
            if name == "fma" and len(arrays) == 3:
                return wrap(arrays[0] * arrays[1] + arrays[2], like)
        known = ", ".join(sorted({*_NP_UNARY, *_NP_BINARY, *_NP_PREDICATES, "fma"}))
        raise LibdeviceUnavailable(
            f"libdevice.{name} has no version under the Triton interpreter (this CPU run): the course computes "
            f"these libdevice functions with numpy here: {known}. On a GPU it compiles; on the CPU use one of "
            f"these or a tl function")

    fn.__name__ = fn.__qualname__ = name
    fn._course_libdevice = True
    return fn


def _is_libdevice(obj) -> bool:
    return getattr(obj, "__module__", None) in _LIBDEVICE_MODULES and callable(obj) and not isinstance(obj, type)


def libdevice_in_numpy() -> bool:
    """Interpreted kernels call libdevice's functions (module docstring): at every kernel's entry, the
    libdevice functions its globals name (``from ...libdevice import tanh``) and those of the libdevice
    modules (``libdevice.tanh``, ``tl.extra.libdevice.tanh``) are swapped for numpy ones, and restored
    with the rest of the interpreter's patches."""
    import importlib

    tl, interpreter = _interpreter()
    patch_lang = getattr(interpreter, "_patch_lang", None)
    if patch_lang is None:
        return False
    if getattr(patch_lang, "_course_libdevice", False):
        return True
    modules = []
    for name in _LIBDEVICE_MODULES:
        try:
            modules.append(importlib.import_module(name))
        except ImportError:
            pass
    table = {}

    def numpy_version(obj):
        return table.setdefault(obj.__name__, _libdevice_function(tl, interpreter, obj.__name__))

    class _Globals:
        """A module's globals as attributes, so the interpreter's patch scope restores them too."""

        def __init__(self, namespace):
            object.__setattr__(self, "namespace", namespace)

        def __getattr__(self, name):
            try:
                return self.namespace[name]
            except KeyError:
                raise AttributeError(name) from None

        def __setattr__(self, name, value):
            self.namespace[name] = value

        def __delattr__(self, name):
            del self.namespace[name]

    # each libdevice module's functions, listed once: a library's module is the same at every launch
    in_modules = [(module, [(name, numpy_version(value)) for name, value in list(vars(module).items())
                            if _is_libdevice(value)]) for module in modules]
    in_modules = [(module, swaps) for module, swaps in in_modules if swaps]

    def patched(fn):
        scope = patch_lang(fn)
        namespace = _Globals(fn.__globals__)
        for name, value in list(fn.__globals__.items()):
            if _is_libdevice(value):
                scope.set_attr(namespace, name, numpy_version(value))
        for module, swaps in in_modules:
            name, replacement = swaps[0]
            if vars(module).get(name) is replacement:  # in place: a kernel's helper, inside the kernel's launch
                continue
            for name, replacement in swaps:
                scope.set_attr(module, name, replacement)
        return scope

    patched._course_libdevice = True
    interpreter._patch_lang = patched
    return True


class _KeptPatches:
    """Stands in for the interpreter's patch scope: keeps what would be set, sets nothing."""

    def __init__(self):
        self.sets = []

    def set_attr(self, obj, name, value):
        self.sets.append((name, value))


def builtin_wrappers_made_once() -> bool:
    """The interpreter's per-launch wrapping of a package's builtins, made once per package (module docstring)."""
    import inspect

    from course.triton_internals import internal

    try:
        interpreter, original = internal("interpreter"), internal("_patch_builtin")
    except ImportError:  # MissingInternal
        return False
    if getattr(original, "_course_once", False):
        return True
    if list(inspect.signature(original).parameters) != ["pkg", "builder", "scope"]:
        return False
    made = {}

    def patch_builtin(pkg, builder, scope):
        wrappers = made.get((pkg, id(builder)))
        if wrappers is None:
            kept = _KeptPatches()
            original(pkg, builder, kept)
            wrappers = made[(pkg, id(builder))] = kept.sets
        for name, wrapper in wrappers:
            if getattr(pkg, name, None) is not wrapper:  # set already: a kernel's helper, inside the kernel's launch
                scope.set_attr(pkg, name, wrapper)

    patch_builtin._course_once = True
    interpreter._patch_builtin = patch_builtin
    return True


def keep_kernel_modules_as_written() -> bool:
    """Run a rewritten kernel without adding the interpreter's globals to its module (module docstring)."""
    _, interpreter = _interpreter()
    rewriter = getattr(interpreter, "FunctionRewriter", None)
    if rewriter is None or not all(hasattr(rewriter, n) for n in ("_transform_ast", "_compile_and_exec")):
        return False
    if getattr(rewriter._compile_and_exec, "_course_closed", False):
        return True
    transform = rewriter._transform_ast

    def transform_ast(self, src):
        self._course_source = src  # the kernel's own text: names in it are the kernel's, never inserted
        return transform(self, src)

    def compile_and_exec(self, transformed_ast):
        own = _names(getattr(self, "_course_source", ""))
        fn_globals, helpers = self.fn.__globals__, vars(interpreter)
        inserted = {n.id for n in ast.walk(transformed_ast) if isinstance(n, ast.Name)} - own - set(fn_globals)
        values = {**{n: helpers[n] for n in inserted if n in helpers}, **_closure_values(self.fn)}
        bind = _closure(transformed_ast, sorted(values), self.fn.__name__)
        namespace = {**self.kwargs}
        exec(compile(bind, filename=self.filename, mode="exec"), fn_globals, namespace)  # noqa: S102
        return namespace[_BIND](*(values[n] for n in sorted(values)))

    patch_lang = interpreter._patch_lang

    def patch_lang_seeing_closures(fn):
        return patch_lang(fn if _sees_language(fn.__globals__) else _WithClosure(fn))

    transform_ast._course_closed = compile_and_exec._course_closed = True
    rewriter._transform_ast, rewriter._compile_and_exec = transform_ast, compile_and_exec
    interpreter._patch_lang = patch_lang_seeing_closures
    return True


def _closure_values(fn) -> dict:
    """A function's closure variables that hold a value, by name."""
    cells = zip(fn.__code__.co_freevars, fn.__closure__ or ())
    out = {}
    for name, cell in cells:
        try:
            out[name] = cell.cell_contents
        except ValueError:  # a cell not filled yet
            pass
    return out


def _sees_language(namespace: dict) -> bool:
    import triton.language as tl

    return any(value is tl or value is tl.core for value in namespace.values())


class _WithClosure:
    """A kernel function as the interpreter's language check sees it: its globals and its closure."""

    def __init__(self, fn):
        self.__globals__ = {**fn.__globals__, **_closure_values(fn)}


_BIND = "_course_interpreter_bind"


def _names(src: str) -> set:
    """The identifiers a text spells (read with tokenize: nothing is compiled)."""
    try:
        return {t.string for t in tokenize.generate_tokens(io.StringIO(src).readline) if t.type == tokenize.NAME}
    except (tokenize.TokenError, SyntaxError):
        return set()


def _closure(module: ast.Module, names: list, name: str) -> ast.Module:
    """``def _course_interpreter_bind(<names>): <module's statements>; return <name>``: the statements'
    functions see ``names`` as closure variables and every other name in their module's globals."""
    extra = {"type_params": []} if "type_params" in ast.FunctionDef._fields else {}
    first = module.body[0] if module.body else None
    outer = ast.FunctionDef(
        name=_BIND, args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=n) for n in names], kwonlyargs=[],
                                       kw_defaults=[], defaults=[]),
        body=[*module.body, ast.Return(value=ast.Name(id=name, ctx=ast.Load()))], decorator_list=[], returns=None,
        **extra)
    if first is not None:
        ast.copy_location(outer, first)
    return ast.fix_missing_locations(ast.Module(body=[outer], type_ignores=[]))
