"""Who chose the text that torch or Triton compile at run time (the worker's audit hook asks,
``autograder.runtime_audit``).

torch and Triton generate code and run it: FX's graph code, Triton's launch binder and interpreter, dynamo's
guards, annotations read as types. They also hold functions that evaluate whatever text their caller hands
over (``ShapeEnv.evaluate_guards_expression``, ``ShapeEnv.evaluate_symexpr``, ``Source.get_value`` of a
subclass whose name template is the caller's text): there the text is the learner's, run where no audit read
it. The package a frame lies in cannot tell the two apart; where the text came from can:

- ``handed_over(frame, text)``: the code outside the library entered it (the outermost library frame of the
  stack, the *entry*) with that text among its arguments (inside a list, a dict, a ``functools.partial``
  too), or a frame of the library's work runs a method of the learner's own subclass of a library class (its
  override chose what the library builds), or ran a function while a text runner was inside it;
- ``fx_graph_chosen_by_learner(frame)``: FX compiles the code of a graph whose nodes are not all FX's own
  (a name, a target or a keyword that is not an identifier, an argument whose ``repr`` is code of the
  learner's, a graph, graph module or code generator class of the learner's): FX writes those into its
  text as they are;
- ``type_expression(text)``: an annotation written as a string (``"torch.Tensor"``, ``"list[int] | None"``):
  names, attributes and subscripts, no call, which ``torch.library``'s schema inference evaluates.
"""
from __future__ import annotations

import ast
import collections
import enum
import functools
import os
import sys
import types

from autograder.imports import INSTALLED

_GRADER = os.path.join(os.path.dirname(os.path.realpath(__file__)), "")
# the plain values whose text FX writes with Python's own repr (quotes escaped, no code of anyone's)
_PLAIN = (type(None), bool, int, float, complex, str, bytes, type(Ellipsis))


@functools.lru_cache(maxsize=4096)
def _real(filename: str) -> str:
    return os.path.realpath(filename)


def _installed_file(filename: str | None, grader: bool = False) -> bool:
    """Whether a file is installed code (with ``grader``: the grader's own too, whose wrappers sit on
    Triton's classes: the launch counter)."""
    if not filename or filename.startswith("<"):
        return False
    real = _real(filename)
    return real.startswith(INSTALLED) and (grader or not real.startswith(_GRADER))


def _class_field(cls, name: str):
    """A class's own ``__module__``, ``__qualname__``, ``__mro__``..., read as ``type`` keeps them: no
    property of a metaclass of the learner's runs (the hook judges nothing while it runs itself)."""
    if name == "__module__":
        return type.__dict__["__dict__"].__get__(cls).get("__module__")
    return type.__dict__[name].__get__(cls)


def _own_code(value):
    """The code of a function a class holds (a method, a property's getter, a static or class method)."""
    kind = type(value)
    if issubclass(kind, (staticmethod, classmethod)):
        value = value.__func__
    elif issubclass(kind, property):
        value = value.fget
    return value.__code__ if type(value) is types.FunctionType else None


def _library_class(cls) -> bool:
    """Whether a class is defined by installed code (torch, Triton, the standard library, a builtin). Its
    ``__module__`` is only what it says: a class is known by the files of its own functions, and one that
    holds none by being what its module really holds under its name."""
    name = _class_field(cls, "__module__")
    module = sys.modules.get(name if type(name) is str else "")
    if module is None:
        return False
    if module.__name__ == "builtins":
        return True
    if not _installed_file(getattr(module, "__file__", None)):
        return False
    codes = [_own_code(v) for v in type.__dict__["__dict__"].__get__(cls).values()]
    codes = [c for c in codes if c is not None and not c.co_filename.startswith("<")]  # not a dataclass's own
    if codes:
        return all(_installed_file(c.co_filename, grader=True) for c in codes)
    held = module
    for part in _class_field(cls, "__qualname__").split("."):
        held = getattr(held, part, None) if type(held) is types.ModuleType or _library_class(type(held)) else None
    return held is cls


def _stretch(frame):
    """The frames of the library's work, from ``frame`` outward up to the first frame that is not installed
    code (the learner's, the grader's, code built at run time): the last one is the entry."""
    frames = []
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith("<frozen"):
            if not _installed_file(name):
                break
            frames.append(frame)
        frame = frame.f_back
    return frames, frame


def _arguments(frame) -> list:
    code, values = frame.f_code, frame.f_locals
    count = code.co_argcount + code.co_kwonlyargcount
    count += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)  # *args, **kwargs
    return [values[n] for n in code.co_varnames[:count] if n in values]


def _strings(values, budget: int = 4096) -> list[str]:
    """The strings reachable from ``values`` through containers, partials and bound methods, and the fields
    of the arguments themselves (a library's object built around the text, ``AttrSource(base, text)``),
    breadth first: the arguments before what they hold."""
    found, seen = [], set()
    todo = collections.deque((v, True) for v in values)
    while todo and budget > 0:
        value, argument = todo.popleft()
        budget -= 1
        if id(value) in seen:
            continue
        seen.add(id(value))
        kind = type(value)
        if kind is str or kind is bytes:
            found.append(value if kind is str else value.decode("utf-8", "replace"))
        elif kind in (tuple, list, set, frozenset):
            todo.extend((v, False) for v in value)
        elif kind is dict:
            todo.extend((v, False) for v in (*value.keys(), *value.values()))
        elif kind is functools.partial:
            todo.extend((v, False) for v in (value.func, *value.args, *value.keywords.values()))
        elif kind is types.MethodType:
            todo.append((value.__self__, argument))
        elif argument and not issubclass(kind, (types.ModuleType, type, types.FunctionType)) and _library_class(kind):
            fields = getattr(value, "__dict__", None)  # a library's own object: reading it runs no code of yours
            if type(fields) is dict:
                todo.extend((v, False) for v in fields.values())
    return found


def _learners_subclass(value) -> bool:
    """An object of the learner's own class derived from a library class (whose methods the library calls
    while it builds text), torch's modules excepted: their methods run as the learner's own frames."""
    cls = type(value)
    if _library_class(cls) or not any(_library_class(base) for base in _class_field(cls, "__mro__")[1:-1]):
        return False
    module = sys.modules.get("torch.nn")
    return not (module is not None and issubclass(cls, module.Module))


def _is_code(piece: str) -> bool:
    """Text that does something when run: more than names, dotted names and numbers (with the commas and
    spaces of a list of them, as a kernel's signature spreads its parameters over lines: Triton writes those
    names into its launch binder, which must not make the kernel's own source lines the learner's text)."""
    return any(not (c.isalnum() or c in "_.," or c.isspace()) for c in piece.strip())


def handed_piece(values, text: str) -> str | None:
    """A string reachable from ``values`` (``_strings``) that is code and is in ``text`` (or holds it)."""
    for piece in _strings(values):
        if _is_code(piece) and (piece.strip() in text or (_is_code(text) and text.strip() in piece)):
            return piece
    return None


def handed_over(frame, text: str | None) -> str | None:
    """Why the text compiled at ``frame`` is the caller's rather than the library's own, or None."""
    frames, _outside = _stretch(frame)
    if not frames:
        return None
    for f in frames:
        if _learners_subclass(f.f_locals.get("self")):
            return (f"{type(f.f_locals['self']).__name__}, a class of yours, builds it inside "
                    f"{f.f_code.co_name}")
    if text is None:
        return None
    entry = frames[-1]
    if handed_piece(_arguments(entry), text) is not None:
        return f"it was handed to {entry.f_code.co_name}"
    for value in _arguments(entry):  # an object of the learner's class may be what builds the text
        if _learners_subclass(value):
            return f"{type(value).__name__}, a class of yours, was handed to {entry.f_code.co_name}"
    return None


def type_expression(text) -> bool:
    """Whether ``text`` is an annotation: names, attributes, subscripts, constants, ``|``; no call."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not isinstance(text, str) or len(text) > 500:
        return False
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError):
        return False
    allowed = (ast.Expression, ast.Name, ast.Attribute, ast.Subscript, ast.Constant, ast.Tuple, ast.List,
               ast.Load, ast.BinOp, ast.BitOr)
    return all(isinstance(node, allowed) for node in ast.walk(tree)) and not any(
        isinstance(node, ast.Attribute) and node.attr.startswith("__") for node in ast.walk(tree))


# -- FX
def _identifiers(target: str) -> bool:
    return all(part.isidentifier() or part.isdigit() for part in target.split("."))


def _fx_plain(value, depth: int = 0) -> bool:
    """Whether FX writes ``value`` into its code as text of no one's choosing."""
    import torch

    kind = type(value)  # judged by type alone: isinstance would ask a learner's object its __class__
    if kind in _PLAIN or kind is torch.fx.Node or depth > 8:
        return kind in _PLAIN or kind is torch.fx.Node
    if kind in (torch.dtype, torch.device, torch.layout, torch.memory_format) or kind is torch.Tensor:
        return True
    if issubclass(kind, (torch._ops.OpOverload, torch._ops.OpOverloadPacket, torch._ops.HigherOrderOperator)):
        return _library_class(kind)
    if kind is slice:
        return all(_fx_plain(v, depth + 1) for v in (value.start, value.stop, value.step))
    if issubclass(kind, enum.Enum):
        return _library_class(kind) and value.name.isidentifier()
    if not _library_class(kind):  # a container of the learner's class may write itself any way it likes
        return False
    if issubclass(kind, (tuple, list)):  # FX's immutable_list too; a named tuple of a library's
        return all(_fx_plain(v, depth + 1) for v in value)
    if issubclass(kind, dict):
        return all(type(k) is str and _fx_plain(v, depth + 1) for k, v in value.items())
    return False


def _fx_node_problem(node) -> str | None:
    if not node.name.isidentifier():
        return f"a node named {node.name!r}"
    if type(node.target) is str and not _identifiers(node.target.lstrip("*")):
        return f"a node whose target is {node.target!r}"
    if not all(k.isidentifier() for k in node.kwargs):
        return f"a keyword of node {node.name} that is not a name"
    if not all(_fx_plain(a) for a in (*node.args, *node.kwargs.values())):
        return f"an argument of node {node.name} that FX writes as its own repr"
    custom = node.meta.get("custom") if isinstance(node.meta, dict) else None
    if custom and not _fx_plain(custom):
        return f"an annotation of node {node.name} that FX writes as its own repr"
    return None


def _fx_module_class(cls) -> bool:
    """FX gives each graph module a class of its own (``GraphModule.__new__``), named after what was traced
    and holding the code FX compiled for it."""
    if _library_class(cls):
        return True
    codes = [_own_code(v) for v in type.__dict__["__dict__"].__get__(cls).values()]
    return all(_library_class(base) for base in _class_field(cls, "__bases__")) and all(
        c is None or _installed_file(c.co_filename) or c.co_filename.startswith("<eval_with_key>") for c in codes)


def _recompiling(frame):
    """The frame of ``GraphModule.recompile`` that FX's compile at ``frame`` runs for, or None."""
    for f in _stretch(frame)[0]:
        if f.f_code.co_name == "recompile" and f.f_code.co_filename.endswith(os.path.join("fx", "graph_module.py")):
            return f
    return None


def chosen_by_learner(frame, text: str | None) -> str | None:
    """Why the text torch or Triton compile at ``frame`` is the learner's, or None: a graph module's code
    is judged by its graph (FX writes it from the graph alone), any other text by where it came from."""
    recompiling = _recompiling(frame)
    if recompiling is not None:
        return fx_graph_chosen_by_learner(recompiling)
    return handed_over(frame, text)


def fx_graph_chosen_by_learner(frame) -> str | None:
    """For FX's compile of a graph module's code (``frame``: ``GraphModule.recompile``): what in the graph
    FX would write into the code as the learner chose it, or None when it is all FX's own."""
    module = frame.f_locals.get("self")
    if not _fx_module_class(type(module)):
        return f"a {_class_field(type(module), '__qualname__')} of yours writes the code"
    graph = getattr(module, "_graph", None)
    for obj in (graph, getattr(graph, "_codegen", None)):
        if obj is None or not _library_class(type(obj)):
            return f"a {_class_field(type(obj), '__qualname__')} of yours writes the code"
    for node in graph.nodes:
        problem = _fx_node_problem(node)
        if problem is not None:
            return problem
    return None


# -- timeit's statements (a measuring exercise times with torch's Timer, which takes statements as text only)
_STATEMENT_NODES = (ast.Module, ast.Expr, ast.Assign, ast.Call, ast.keyword, ast.Name, ast.Attribute, ast.Constant,
                    ast.Tuple, ast.List, ast.Subscript, ast.Slice, ast.Load, ast.Store, ast.BinOp, ast.UnaryOp,
                    ast.operator, ast.unaryop, ast.Pass)


def _reaches(root, chain: list[str], refused) -> str | None:
    """The module a chain of attributes reaches through modules (``torch.inspect`` is ``inspect``) that the
    learner's code may not use, or None."""
    obj = root
    for name in [None, *chain]:
        module = issubclass(type(obj), types.ModuleType)
        fields = object.__getattribute__(obj, "__dict__") if module else None
        if module and str(fields.get("__name__", "")).split(".")[0] in refused:
            return fields["__name__"]
        if name is None:
            continue
        if not module:
            return None
        obj = fields.get(name)
    return None


def statement_problem(text, namespace: dict | None, refused) -> str | None:
    """What in a statement handed to timeit as text goes beyond calling what its namespace holds: a name the
    namespace does not give (``__import__``, any builtin), a private or special attribute, a module the
    learner's code may not use (``refused``: top-level names) reached through another, anything but
    expressions and assignments. None when it is plain."""
    if type(text) is not str:
        return None  # a function: timeit calls it, code the audit read
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return "is not Python"
    namespace = namespace or {}
    stored = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    for node in ast.walk(tree):
        if not isinstance(node, _STATEMENT_NODES):
            return f"holds {type(node).__name__}"
        if isinstance(node, ast.Name) and (node.id.startswith("_") or node.id not in namespace and
                                           node.id not in stored):
            return f"uses {node.id}, which its globals do not give"
        if isinstance(node, ast.Attribute):
            if node.attr.startswith("_"):
                return f"reads the attribute {node.attr}"
            chain, base = [], node
            while isinstance(base, ast.Attribute):
                chain.insert(0, base.attr)
                base = base.value
            if isinstance(base, ast.Name) and base.id in namespace:
                module = _reaches(namespace[base.id], chain, refused)
                if module is not None:
                    return f"reaches the module {module}"
    return None
