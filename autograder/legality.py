"""Guarantee 2: the learner wrote the kernel.

- ``OpRecorder``: a TorchDispatchMode that records every aten operator the submission calls, with the
  submission's own source line that led to it (walking the stack to the submission's file). It sees
  operators on the CPU and on the GPU alike. Operators run *inside* a Triton launch are the
  interpreter's own plumbing, not the learner's, and are not recorded.
- ``install_launch_counter``: counts Triton kernel launches (compiled, interpreted, autotuned; an
  autotuner's benchmarking runs count as the one launch they serve).
- ``KernelsRefWatch``: records any import of ``kernels_ref`` by the submission.
- ``judge``: runs in the grading process; turns what the worker recorded into violations.
"""
from __future__ import annotations

import sys
import threading
import types


from torch.utils._python_dispatch import TorchDispatchMode

from measure.memory import fresh_outputs


class _LaunchState(threading.local):
    depth = 0
    launches = 0
    null = False  # launches are counted but do nothing (the behaviour check: outputs must then change)


STATE = _LaunchState()
_INSTALLED = False


def _counting(run):
    def run_and_count(self, *args, **kwargs):
        if kwargs.get("warmup"):
            return run(self, *args, **kwargs)
        if STATE.depth == 0:
            STATE.launches += 1
            if STATE.null:
                return None
        STATE.depth += 1
        try:
            return run(self, *args, **kwargs)
        finally:
            STATE.depth -= 1
    run_and_count.__wrapped__ = run
    return run_and_count


def install_launch_counter() -> None:
    """Wrap every Triton launcher's ``run`` (class level, once per process)."""
    global _INSTALLED
    if _INSTALLED:
        return
    from course.triton_internals import internal

    for cls in (internal(name) for name in ("JITFunction", "InterpretedFunction", "Autotuner", "Heuristics")):
        if "run" in cls.__dict__:
            cls.run = _counting(cls.__dict__["run"])
    _INSTALLED = True


def disable_triton_launches() -> None:
    """From now on every Triton launch in this process does nothing (the kernels never run)."""
    install_launch_counter()
    STATE.null = True


def reset_launches() -> None:
    STATE.launches = 0
    STATE.depth = 0


def launches() -> int:
    return STATE.launches


class OpRecorder(TorchDispatchMode):
    """Records (operator, submission line) -> count for every aten op called outside Triton launches."""

    def __init__(self, source_file: str | None):
        super().__init__()
        self.source_file = source_file
        self.ops: dict = {}
        self.largest = [0, None, None]  # [elements, operator, line] of the largest tensor an op produced

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if STATE.depth == 0:
            line = self._submission_line()
            key = (func.overloadpacket.__name__, line)
            self.ops[key] = self.ops.get(key, 0) + 1
            # Memory exercises forbid materializing a large intermediate (the full logits, a dequantized
            # weight): note the largest fresh tensor any operator hands back, whatever the operator is
            # (a view or an in-place result materializes nothing).
            numel = max((t.numel() for t, _ in fresh_outputs(args, kwargs, out)), default=0)
            if numel > self.largest[0]:
                self.largest = [numel, func.overloadpacket.__name__, line]
        return out

    def _submission_line(self):
        frame = sys._getframe(2)
        while frame is not None:
            name = frame.f_code.co_filename
            if name == self.source_file or (self.source_file is None and not _is_library(name)):
                return frame.f_lineno
            frame = frame.f_back
        return None

    def records(self) -> list:
        return [[op, line, n] for (op, line), n in sorted(self.ops.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0))]


_LIBRARY_MARKERS = ("site-packages", "dist-packages", "/torch/", "/triton/", "/autograder/", "<frozen")


def _is_library(filename: str) -> bool:
    return any(m in filename for m in _LIBRARY_MARKERS)


class KernelsRefWatch:
    """A meta-path finder that notes imports of kernels_ref (and lets them proceed, to be reported)."""

    def __init__(self):
        self.seen: list[str] = []

    def find_spec(self, name, path=None, target=None):
        if name == "kernels_ref" or name.startswith("kernels_ref."):
            self.seen.append(name)
        return None

    def install(self):
        sys.meta_path.insert(0, self)
        return self

    def imported(self) -> bool:
        return bool(self.seen) or any(m == "kernels_ref" or m.startswith("kernels_ref.") for m in sys.modules)


def reaches_kernels_ref(fn) -> bool:
    """Whether ``fn`` is, or names (through its globals, transitively), something from kernels_ref: what
    ``check`` can see in the learner's own process, where the grader's import watch is not running."""
    seen, todo = set(), [fn]
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        module = obj.__name__ if isinstance(obj, types.ModuleType) else getattr(obj, "__module__", None)
        if isinstance(module, str) and (module == "kernels_ref" or module.startswith("kernels_ref.")):
            return True
        inner = getattr(obj, "fn", None) if not hasattr(obj, "__code__") else obj  # a Triton kernel's function
        code, glob = getattr(inner, "__code__", None), getattr(inner, "__globals__", {})
        if code is None:
            continue
        names, codes = set(), [code]
        while codes:
            c = codes.pop()
            names.update(c.co_names)
            codes.extend(k for k in c.co_consts if hasattr(k, "co_names"))
        todo.extend(glob[n] for n in names if n in glob)
    return False


def judge(spec, ops_records, launch_counts, used_kernels_ref: bool, where, largest=()) -> list[str]:
    """Violations (plain words) from recorded ops, launches per call, kernels_ref use and, for exercises
    with ``max_intermediate``, the largest tensor an operator produced in each call: ``largest`` holds
    ``(elements, operator, line, limit)`` per call."""
    violations = []
    over = [c for c in largest if c[3] is not None and c[0] > c[3]]
    if over:
        numel, op, line, limit = max(over, key=lambda c: c[0])
        violations.append(f"aten.{op} at {where(line)} produced a tensor of {numel:,} elements; this exercise "
                          f"must never hold more than {limit:,} at once (stream it in chunks)")
    if used_kernels_ref:
        violations.append("imports kernels_ref (the course's reference kernels): the exercise must be your own code")
    rules = spec.rules
    if rules.allowed_ops is not None:
        seen = set()
        for op, line, _count in ops_records:
            if op in rules.allowed_ops or (op, line) in seen:
                continue
            seen.add((op, line))
            why = rules.why.get(op, "it is not among the operators this exercise allows")
            violations.append(f"calls torch operator aten.{op} at {where(line)}: {why}")
    counts = [c for c in launch_counts if c is not None]
    if rules.min_launches and counts and min(counts) < rules.min_launches:
        violations.append(f"launched {min(counts)} Triton kernel(s) in a call; the exercise asks for your own "
                          f"Triton kernel (at least {rules.min_launches} launch)")
    if rules.max_launches is not None and counts and max(counts) > rules.max_launches:
        violations.append(f"launched {max(counts)} Triton kernels in one call; the exercise allows "
                          f"{rules.max_launches} (a fused kernel is one launch)")
    return violations
