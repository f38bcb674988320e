"""Functions that reach the grader's own objects from inside the worker, refused to graded code at run time
whatever the spelling (``install``, from ``autograder.runtime_audit.install``):

- torch's mode stacks: the operator recorder and the memory meter are dispatch modes on them while a checked
  call runs, so what reads the stacks holds the recorder (and can empty it, or take it off the stack), and
  what switches the modes or the Python dispatch key off runs operators no mode sees (``MODE_STACK``);
- the standard library's reach into live objects and frames: ``inspect``'s frames and closures, ``gc``'s
  referrers (``OBJECTS``);
- an operator's kernel called below the Python dispatch key, where the recorder and the meter sit
  (``BELOW_PYTHON``, ``BELOW_PYTHON_METHODS`` and every operator's ``_op_dk``);
- names resolved from strings: a dotted name reaches any module and attribute past the import statements the
  audit reads (``RESOLVERS``, ``RESOLVER_METHODS``, ``LIBRARY_RESOLVERS`` once their library is loaded).

Each function is replaced, in every module that holds it (a method, on its class) (found by identity, so
``(lambda m: m._python_dispatch._get_current_dispatch_mode_stack)(torch.utils)`` reaches the guard too), by a
guard that lets it run only for code that names it: torch's, the grader's, a library's or the standard
library's own call (``called_by_name``). The learner's code is refused, and so is a library that calls a
function it was handed (``tree_map(stack, ...)``, a ``functools.partial``): then the learner chose it. A
refusal raises ``RunTimeRefused`` where the call was made and is recorded as the audit hook's refusals are
(``runtime_audit.refuse``): the checked call that ran it names the line.
"""
from __future__ import annotations

import importlib
import sys
import types

# module -> the names of its functions and guards that read, change or switch off the mode stacks or the
# dispatch keys that route operators to them
MODE_STACK = {
    "torch._C": (
        "DisableTorchFunction", "DisableTorchFunctionSubclass", "_DisableTorchDispatch", "_EnableTorchFunction",
        "ExcludeDispatchKeyGuard", "_ExcludeDispatchKeyGuard", "_SetExcludeDispatchKeyGuard", "_ForceDispatchKeyGuard",
        "_RestorePythonTLSSnapshot", "_dispatch_tls_set_dispatch_key_excluded", "_dispatch_tls_set_dispatch_key_included",
        "_get_dispatch_mode", "_set_dispatch_mode", "_unset_dispatch_mode", "_get_dispatch_stack_at",
        "_len_torch_dispatch_stack", "_pop_torch_dispatch_stack", "_push_on_torch_dispatch_stack",
        "_get_function_stack_at", "_len_torch_function_stack", "_pop_torch_function_stack",
        "_push_on_torch_function_stack", "_is_torch_function_mode_enabled", "_set_torch_function_state"),
    "torch.utils._python_dispatch": (
        "_get_current_dispatch_mode", "_get_current_dispatch_mode_stack", "_push_mode", "_pop_mode",
        "_pop_mode_temporarily", "_disable_current_modes", "_detect_infra_mode", "_disable_infra_mode",
        "_unset_infra_mode", "any_torch_dispatch_mode_on_stack", "is_in_torch_dispatch_mode",
        "is_in_any_mode_without_ignore_compile_internals"),
    "torch.overrides": (
        "_get_current_function_mode", "_get_current_function_mode_stack", "_push_mode", "_pop_mode",
        "_pop_mode_temporarily", "enable_reentrant_dispatch", "_enable_torch_function"),
    "torch.utils._mode_utils": ("no_dispatch", "all_same_mode"),
}
# module -> the names of its functions that call an operator's kernel below the Python dispatch key (where
# the operator recorder and the memory meter sit), or hand out what does: an operator's kernel for one
# dispatch key, the Python dispatcher switched off
BELOW_PYTHON = {"torch._C": ("_get_operation_overload", "_DisablePythonDispatcher")}
# class -> its methods that call an operator's kernel at a dispatch key set of the caller's choosing
# (``torch.ops.aten.mm.out.redispatch(DispatchKeySet(DispatchKey.CPU), ...)``): only the keys the set names
# run, so no mode sees the operator, nor the memory its kernel allocates
BELOW_PYTHON_METHODS = {"torch._ops.OpOverload": ("redispatch",),
                        "torch._C._DispatchOperatorHandle": ("redispatch_boxed",)}
# module -> its functions that resolve a dotted name given as a string (importing the module it starts with,
# then reading attributes): what graded code hands them reaches any module and any attribute, the grader's
# own, numpy and the forbidden modules among them, past the import statements the audit reads
RESOLVERS = {"pydoc": ("locate",), "pkgutil": ("resolve_name",)}
RESOLVER_METHODS = {"importlib.metadata.EntryPoint": ("load",),
                    "logging.config.BaseConfigurator": ("resolve", "ext_convert"),
                    # a format field reads attributes by a dotted string ("{0.sys.modules}"); a subclass's
                    # format_field is handed what it reached
                    "string.Formatter": ("format", "vformat", "get_field", "get_value")}
# installed libraries' resolvers, guarded once their module is loaded (importing them for the guard would
# slow every worker)
LIBRARY_RESOLVERS = {"tornado.util": ("import_object",), "traitlets.utils.importstring": ("import_item",),
                     "jinja2.utils": ("import_string",), "IPython.utils.importstring": ("import_item",)}
# module -> its functions that reach live objects or frames (the grader's among them)
OBJECTS = {
    "inspect": ("currentframe", "stack", "trace", "getouterframes", "getinnerframes", "getframeinfo",
                "getclosurevars", "getmembers", "getmembers_static", "getattr_static", "getmodule", "unwrap",
                "getargvalues", "getgeneratorlocals", "getcoroutinelocals", "getasyncgenlocals"),
    "gc": ("get_objects", "get_referrers", "get_referents", "freeze", "unfreeze"),
}


class Guarded:
    """One guarded function: the original, its dotted path and every name a module holds it by."""

    def __init__(self, original, path: str):
        self.original, self.path, self.names = original, path, {path.rpartition(".")[2]}


def guard_everywhere(paths, make) -> dict:
    """Replace each function named by ``paths`` (dotted) in every loaded module that holds it (found by
    identity) by ``make(Guarded)``; a module imported later takes the guard from where it is defined.
    Returns {dotted path: guard}."""
    found: dict[int, Guarded] = {}
    for path in paths:
        module_name, _, name = path.rpartition(".")
        obj = importlib.import_module(module_name).__dict__.get(name)
        if obj is not None and id(obj) not in found:
            found[id(obj)] = Guarded(obj, path)
    holders = []
    for module in list(sys.modules.values()):
        space = getattr(module, "__dict__", None) if isinstance(module, types.ModuleType) else None
        for key, value in list(space.items()) if space is not None else ():
            one = found.get(id(value))
            if one is not None and value is one.original:
                one.names.add(key)
                holders.append((space, key, one))
    guards = {key: _named(make(one), one) for key, one in found.items()}
    for space, key, one in holders:
        space[key] = guards[id(one.original)]
    return {one.path: guards[key] for key, one in found.items()}


def _named(guard, one: Guarded):
    # no __wrapped__: the original is reachable only through the guard
    guard.__name__ = guard.__qualname__ = one.path.rpartition(".")[2]
    guard.__module__, guard.__doc__ = one.path.rpartition(".")[0], getattr(one.original, "__doc__", None)
    return guard


def install(refuse) -> dict:
    """Guard every function of ``MODE_STACK`` and ``OBJECTS`` in every loaded module that holds it;
    ``refuse(what, why, frame)`` raises (and records) a refusal, ``why`` "modes" or "objects". Returns
    {dotted path: guard} (installed once per process)."""
    global _INSTALLED
    if _INSTALLED is None:
        _INSTALLED = {}
        for table, why in ((MODE_STACK, "modes"), (OBJECTS, "objects"), (BELOW_PYTHON, "dispatch")):
            _INSTALLED.update(guard_everywhere([f"{m}.{n}" for m, names in table.items() for n in names],
                                               lambda one, why=why: _guard(one, refuse, why)))
        _INSTALLED.update(guard_everywhere([f"{m}.{n}" for m, names in RESOLVERS.items() for n in names],
                                           lambda one: _guard(one, refuse, "resolver")))
        _INSTALLED.update(_guard_methods(RESOLVER_METHODS, refuse, "resolver"))
        _INSTALLED.update(_guard_methods(BELOW_PYTHON_METHODS, refuse, "dispatch"))
        _INSTALLED.update(_guard_op_dk(refuse))
    guard_loaded_resolvers(refuse)
    return _INSTALLED


def guard_loaded_resolvers(refuse) -> None:
    """Guard ``LIBRARY_RESOLVERS`` of the libraries loaded by now (at the worker's start, and before each
    recorded call for those imported since)."""
    if _INSTALLED is None:
        return
    paths = [f"{m}.{n}" for m, names in LIBRARY_RESOLVERS.items() if m in sys.modules for n in names]
    paths = [p for p in paths if p not in _INSTALLED]
    if paths:
        _INSTALLED.update(guard_everywhere(paths, lambda one: _guard(one, refuse, "resolver")))


def _guard_methods(table, refuse, why: str) -> dict:
    """Guard the methods of ``table`` (class path -> method names) on their classes."""
    guards = {}
    for path, methods in table.items():
        owner, _, name = path.rpartition(".")
        cls = getattr(importlib.import_module(owner), name, None)
        for method in methods:
            if getattr(cls, method, None) is None:
                continue  # not in this version of torch or Python
            one = Guarded(getattr(cls, method), f"{path}.{method}")
            guards[one.path] = guard = _named(_guard(one, refuse, why), one)
            setattr(cls, method, guard)
    return guards


def _guard_op_dk(refuse) -> dict:
    """Guard every operator's ``_op_dk`` (its kernel for one dispatch key, an attribute of each
    ``OpOverload``): on the operators made so far, found on ``torch.ops``'s namespaces where torch caches
    each one, and on those made from now on."""
    import torch._ops

    one = Guarded(None, "torch._ops.OpOverload._op_dk")

    def guard_op_dk(op) -> None:
        held = op.__dict__.get("_op_dk")
        if held is not None and not getattr(held, "_guards_op_dk", False):
            guard = _guard(Guarded(held, one.path), refuse, "dispatch")
            guard._guards_op_dk = True
            op.__dict__["_op_dk"] = guard

    made = torch._ops.OpOverload.__init__

    def init(op, *args, **kwargs):
        made(op, *args, **kwargs)
        guard_op_dk(op)
    torch._ops.OpOverload.__init__ = init
    for namespace in list(vars(torch.ops).values()):
        for packet in list(vars(namespace).values()) if isinstance(namespace, torch._ops._OpNamespace) else ():
            for op in list(vars(packet).values()) if isinstance(packet, torch._ops.OpOverloadPacket) else ():
                if isinstance(op, torch._ops.OpOverload):
                    guard_op_dk(op)
    return {one.path: init}


_INSTALLED: dict | None = None


# Functions that answer about their caller's frame: the guard, a frame of its own, answers about its caller.
_AT_CALLER = {
    "inspect.currentframe": lambda frame: frame,
    "inspect.stack": lambda frame, context=1: sys.modules["inspect"].getouterframes(frame, context),
}


def _guard(one: Guarded, refuse, why: str):
    original, names, path = one.original, frozenset(one.names), one.path
    at_caller = _AT_CALLER.get(path)

    def guarded(*args, **kwargs):
        frame = sys._getframe(1)
        if not called_by_name(frame, names):
            refuse(f"calls {path}", why, frame)
        if at_caller is not None:
            return at_caller(frame, *args, **kwargs)
        return original(*args, **kwargs)
    return guarded


def called_by_name(frame, names: frozenset) -> bool:
    """Whether the function was called by code other than the learner's that names it (torch's, the grader's,
    a library's or the standard library's own call by one of ``names``), walking out from ``frame`` past the
    frames that call a function they were handed (a library's ``tree_map(fn, ...)``, ``functools``): the
    learner's frame met first refuses it."""
    from autograder.runtime_audit import LEARNER, _whose

    while frame is not None:
        if _whose(frame)[0] == LEARNER:
            return False
        if not names.isdisjoint(frame.f_code.co_names):
            return True
        frame = frame.f_back
    return True  # no learner's code on the stack: the worker's own
