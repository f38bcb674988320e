"""What a kernel costs in registers, spills and shared memory: read from a GPU, or compiled for one.

``resource_usage(kernel, *args, grid=..., **meta)`` answers the same question everywhere:

- on a GPU it launches ``kernel[grid](*args, **meta)``, whose return value is the ``CompiledKernel``, and
  reads ``n_regs`` / ``n_spills`` / ``metadata.shared`` from it (what the driver loaded);
- without one (the Triton interpreter) it compiles the same kernel, with the same argument
  specialization the JIT would pick for these arguments, ahead of time for an H100 (``sm_90a``), and
  runs ``ptxas -v`` on the PTX: registers per thread, bytes spilled, shared memory. No GPU is touched.

The second path leans on Triton internals (the JIT's argument binder, ``triton.compile`` with an explicit
target) as they are in the course's pinned Triton on the CPU; a kernel it cannot compile gets a clear
error. The kernel can be what ``@triton.jit`` gave (a jitted or interpreted function) or what
``course.triton_compat.autotune`` / ``triton.heuristics`` wrapped around it (pass the meta-parameters).
"""
from __future__ import annotations

import contextlib
import os
import re
import subprocess
import tempfile
import types

import triton
import triton.language as tl

from course.device import INTERPRET
from course.triton_internals import internal

H100 = (90, 32)  # compute capability, warp size


def resource_usage(kernel, *args, grid=(1,), num_warps: int = 4, num_stages: int = 3, **meta) -> dict:
    """{"n_regs", "n_spills", "shared", "where"} for ``kernel`` specialized for ``args`` and ``meta``."""
    if not INTERPRET:
        compiled = kernel[grid](*args, num_warps=num_warps, num_stages=num_stages, **meta)
        return {"n_regs": compiled.n_regs, "n_spills": compiled.n_spills, "shared": compiled.metadata.shared,
                "where": "this GPU"}
    compiled = compile_for_hopper(kernel, *args, num_warps=num_warps, num_stages=num_stages, **meta)
    usage = ptxas_usage(compiled.asm["ptx"])
    usage["shared"] = compiled.metadata.shared
    usage["where"] = "compiled for sm_90a (an H100) without a GPU"
    return usage


def compile_for_hopper(kernel, *args, num_warps: int = 4, num_stages: int = 3, **meta):
    """``triton.compile`` of ``kernel`` for sm_90a, its arguments specialized as the JIT would do it."""
    GPUTarget, ASTSource, make_backend = internal("GPUTarget"), internal("ASTSource"), internal("make_backend")
    create_function_from_signature = internal("create_function_from_signature")

    jit = as_jit_function(kernel)
    target = GPUTarget("cuda", *H100)
    backend = make_backend(target)
    binder = create_function_from_signature(jit.signature, jit.params, backend)
    # FP fusion (fused multiply-add) named, as the GPU runners' Triton (3.6) does by default: Triton 3.9 warns
    # when it is left to its default, which 3.10 turns off; the counts must be those of the runners' code.
    kwargs = dict({"enable_fp_fusion": True}, **meta, num_warps=num_warps, num_stages=num_stages)
    bound, specialization, options = binder(*args, **kwargs)
    options, signature, constexprs, attrs = jit._pack_args(backend, kwargs, bound, specialization, options)
    with _jitted_language():
        return triton.compile(ASTSource(jit, signature, constexprs, attrs), target=target, options=options.__dict__)


@contextlib.contextmanager
def _jitted_language():
    """``triton.language`` as a compiling process sees it, for the duration of one compile.

    Under the interpreter, Triton's library functions written in Triton (``tl.cdiv``, ``tl.sigmoid``, ...)
    are interpreted functions: jitted versions stand in for them. And an interpreted kernel that called
    one of them leaves builtins of ``tl.core`` wrapped for the interpreter (the interpreter restores what
    a launch patched, not what a nested library call did): the originals stand in for those wrappers.
    """
    import triton.language as language

    holders = [language, language.core, language.math, language.core.tensor,
               language.core.tensor_descriptor_base]
    holders += [m for m in vars(language).values() if isinstance(m, types.ModuleType)]
    saved = []
    for holder in dict.fromkeys(holders):
        for name, value in list(vars(holder).items()):
            if type(value).__name__ == "InterpretedFunction":
                replacement = as_jit_function(value)
            elif callable(value) and "_patch_attr" in getattr(value, "__qualname__", ""):
                replacement = (value.__kwdefaults__ or {}).get("member")
            else:
                continue
            if replacement is not None:
                saved.append((holder, name, value))
                setattr(holder, name, replacement)
    try:
        yield
    finally:
        for holder, name, value in saved:
            setattr(holder, name, value)


def as_jit_function(kernel, _done=None):
    """A compilable ``JITFunction`` for ``kernel``: wrappers peeled off, interpreted callees made jitted.

    Under the interpreter ``@triton.jit`` returns an ``InterpretedFunction``; its Python function is
    re-jitted with a copy of its globals in which every interpreted helper it calls is re-jitted too, and
    the interpreter-only switch of ``course.triton_compat.dot`` (upcast bf16 operands) is off, as in a
    compiled kernel.
    """
    done = {} if _done is None else _done
    fn = kernel
    while not isinstance(fn, types.FunctionType):
        if isinstance(fn, internal("JITFunction")) and not INTERPRET:
            return fn
        inner = getattr(fn, "fn", None)
        if inner is None:
            raise TypeError(f"{kernel!r} is not a Triton kernel (no jitted function inside)")
        fn = inner
    if fn in done:
        return done[fn]
    scope = dict(fn.__globals__)
    fresh = types.FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__, fn.__closure__)
    fresh.__qualname__, fresh.__module__, fresh.__doc__ = fn.__qualname__, fn.__module__, fn.__doc__
    fresh.__wrapped__ = fn  # inspect.getsource follows it to the original source
    jitted = internal("JITFunction")(fresh)
    done[fn] = jitted
    for name, value in fn.__globals__.items():
        if _is_triton_callable(value) and name in fn.__code__.co_names:
            scope[name] = as_jit_function(value, done)
    if "_UPCAST_DOTS" in scope:
        scope["_UPCAST_DOTS"] = tl.constexpr(False)
    return jitted


def _is_triton_callable(value) -> bool:
    kinds = ("InterpretedFunction", "JITFunction")
    return type(value).__name__ in kinds


_REGS = re.compile(r"Used (\d+) registers")
_SPILLS = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
_STACK = re.compile(r"(\d+) bytes stack frame")


def constexpr_defaults(fn) -> dict:
    """The ``tl.constexpr`` parameters of a ``JITFunction`` that have a default (e.g. a flag off unless asked
    for), with their defaults: what a compile that names only some constexprs should take for the rest."""
    import inspect

    return {name: p.default for name, p in inspect.signature(fn.fn).parameters.items()
            if p.default is not inspect.Parameter.empty and "constexpr" in str(p.annotation)}


def ptxas_usage(ptx: str, arch: str = "sm_90a") -> dict:
    """Registers per thread, bytes spilled (stores; and ``spill_loads``) and the stack frame, from
    ``ptxas -v`` on the PTX (Triton's own ptxas)."""
    get_ptxas = internal("get_ptxas")
    ptxas = get_ptxas(int(arch[3:5])).path
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "kernel.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        run = subprocess.run([ptxas, "-v", "--regAllocOptLevel=2", f"--gpu-name={arch}", src,
                              "-o", os.path.join(tmp, "kernel.o")], capture_output=True, text=True)
    log = run.stdout + run.stderr
    if run.returncode != 0:
        raise RuntimeError(f"ptxas failed:\n{log[-2000:]}")
    regs, spills, stack = _REGS.search(log), _SPILLS.search(log), _STACK.search(log)
    return {"n_regs": int(regs.group(1)) if regs else None, "n_spills": int(spills.group(1)) if spills else 0,
            "spill_loads": int(spills.group(2)) if spills else 0, "stack": int(stack.group(1)) if stack else 0}
