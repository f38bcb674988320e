"""Determinism, where a notebook asks for it (05's ``layer_norm_bwd``, 07's ``flash_attention_bwd``): the
same inputs give the same bits on every call.

A float sum's value depends on its order, and atomics add in the order programs happen to finish: a
kernel whose programs ``tl.atomic_add`` into one output (or take turns through an ``atomic_cas`` lock)
gives different low bits from run to run on a GPU. Two ways to see it:
- ``source_findings``: the submission's source, on every device. An atomic in a Triton kernel the entry
  point can reach is a finding, with the notebook's reason (the interpreter runs programs one after another,
  so on the CPU the bits would never show it). A kernel the entry point cannot reach (a notebook's
  demonstration of why atomics are wrong) is not.
- ``repeat_check``: behaviour, on a GPU: the largest case called twice on the same inputs, outputs compared
  bit for bit in the grading process.
"""
from __future__ import annotations

import torch

# Atomics whose result depends on the order programs arrive in (max and min do not).
ORDERED_ATOMICS = ("atomic_add", "atomic_cas", "atomic_xchg")


def atomics(spec) -> dict:
    """{dotted path: why} of the order-dependent atomics, where the exercise asks for determinism: refused
    in its kernels like a library function doing its work (``Rules.kernel_library``), by what they are."""
    if not spec.deterministic:
        return {}
    return {f"triton.language.{name}": spec.deterministic for name in ORDERED_ATOMICS}


def source_findings(spec, source: str, where, helpers: dict | None = None) -> list[str]:
    """Violations for order-dependent atomics in the Triton kernels ``spec.entry`` can reach, however they
    are spelled (``tl.atomic_add``, ``getattr(tl, "atomic_add")``, an alias, ``ptr.atomic_add``): the
    audit resolves each call to what it is. ``helpers``: {module name: (file name, text)} of the modules
    beside the submission that it imports: a kernel of theirs that the entry point reaches (a helper
    ``accumulate`` the submission's kernel calls, and what that calls in turn) is the submission's too."""
    library = atomics(spec)
    if not library:
        return []
    out, todo, done = [], [(None, spec.entry)], set()
    while todo:
        module, entry = todo.pop()
        if (module, entry) in done:
            continue
        done.add((module, entry))
        text, at = (source, where) if module is None else (helpers[module][1], _at(helpers[module][0]))
        package = None if module is None else (module if helpers[module][0].endswith("__init__.py")
                                               else module.rpartition(".")[0])
        found, mentioned = _reached_atomics(text, entry, library, package)
        out += [f"{at(f.line)}: {f.message}" for f in found if f"{at(f.line)}: {f.message}" not in out]
        todo += [(m, name) for m, name in mentioned if m in (helpers or {})]
    return out


def _at(name: str):
    return lambda line: f"{name}, line {line}"


def _reached_atomics(text: str, entry: str, library: dict, package: str | None) -> tuple[list, list]:
    """(the atomics findings of the kernels ``entry`` reaches in ``text``, the (module, name) pairs that
    code imports from other modules); ``package``: the package a relative import in ``text`` starts from."""
    import ast

    from autograder.audit import _reachable, audit, from_imports, parse

    try:
        found = [f for f in audit(text, entry=entry, kernel_library=library) if f.rule == "kernel-library"]
        tree = parse(text)
    except (SyntaxError, ValueError):
        return [], []
    reached = _reachable(tree, entry)
    # name bound here -> (module, name there); a whole module imported: (module, None)
    imports = {bound: (module, name) for module, name, bound in from_imports(ast.walk(tree), package)}
    imports.update({a.asname or a.name: (a.name, None) for node in ast.walk(tree) if isinstance(node, ast.Import)
                    for a in node.names})
    mentioned = []
    for node in ast.walk(tree):
        if id(node) not in reached:
            continue
        if isinstance(node, ast.ImportFrom):  # a name handed on (a package's __init__: from .acc import k)
            mentioned += [imports[a.asname or a.name] for a in node.names if (a.asname or a.name) in imports]
        for inner in ast.walk(node):
            if isinstance(inner, ast.Name) and inner.id in imports and imports[inner.id][1] is not None:
                mentioned.append(imports[inner.id])
            elif (isinstance(inner, ast.Attribute) and isinstance(inner.value, ast.Name)
                  and inner.value.id in imports and imports[inner.value.id][1] is None):
                mentioned.append((imports[inner.value.id][0], inner.attr))  # helpers.accumulate
    return found, mentioned


def repeat_check(session, spec, plan) -> str | None:
    """On a GPU: the largest case's first inputs, called twice; a violation unless the outputs match bit for
    bit. None where the exercise asks for no determinism or the calls fail (the cases judged those)."""
    import course

    from autograder.runner import call_once

    plan = [p for p in plan if p.case.raises is None]
    if not spec.deterministic or not course.ON_GPU or not plan:
        return None
    largest = max(plan, key=lambda p: sum(t.numel() for t in _tensors(p.a)))
    outputs = []
    for _ in range(2):
        session.request({"op": "load", "slot": 0, "args": largest.a})
        done, shipped = call_once(session)
        if not done.ok:
            return None
        outputs.append(_tensors(shipped.output))
    differ = [i for i, (a, b) in enumerate(zip(*outputs)) if not same_bits(a, b)]
    if not differ:
        return None
    names = ", ".join(spec.output_name(i) for i in differ)
    return (f"two calls on the same inputs ({largest.case.name}) gave different bits in {names}: "
            f"{spec.deterministic}")


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    a, b = a.detach().cpu().contiguous(), b.detach().cpu().contiguous()
    if a.is_floating_point():
        width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
        return torch.equal(a.view(width), b.view(width))
    return torch.equal(a, b)


def _tensors(obj) -> list:
    from autograder.argtree import tensors

    return list(tensors(obj))
