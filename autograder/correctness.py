"""Guarantees 1 and 4 on the grading side: compare outputs in float64, check inputs came back unmodified.

Rules: the output's type, shape and dtype must match; positions where the reference is NaN or +-inf
must hold the same value, every other position must be finite (NaN never passes); then
|out - ref| <= atol + rtol * |ref| elementwise, with (atol, rtol) of the output dtype (measure.tolerance).
"""
from __future__ import annotations

import math

import torch

from autograder.argtree import holds_tensors
from measure.tolerance import compare_tensor


def expected_dtypes(args, ref, spec) -> list:
    if spec.out_dtypes is not None:
        return list(spec.out_dtypes(args))
    first = next(a for a in args if isinstance(a, torch.Tensor))
    return [first.dtype] * (len(ref) if isinstance(ref, (tuple, list)) else 1)


def compare_outputs(out, ref, dtypes, spec, case=None) -> tuple[bool, float | None, str]:
    """Compare one call's output(s) with the reference (a tensor or a tuple of tensors)."""
    if isinstance(ref, (tuple, list)):
        if not isinstance(out, (tuple, list)) or len(out) != len(ref):
            return False, None, f"expected a tuple of {len(ref)} tensors, got {type(out).__name__}"
        worst, msgs, ok = 0.0, [], True
        for i, (o, r, d) in enumerate(zip(out, ref, dtypes)):
            good, err, msg = compare_tensor(o, r, d, spec.tolerance(d, case))
            ok &= good
            worst = max(worst, err if err is not None else math.inf)
            if not good:
                msgs.append(f"output {i}: {msg}")
        return ok, worst, "; ".join(msgs)
    return compare_tensor(out, ref, dtypes[0], spec.tolerance(dtypes[0], case))


def same_values(before, after) -> bool:
    """True when ``after`` holds exactly ``before``'s values (NaN where NaN): the input was not modified.
    Containers that hold tensors (a dict of weights, a list) are compared item by item; other values (a
    number, a probe the worker turned into a function) are not inputs a call could modify."""
    if isinstance(before, dict) and holds_tensors(before):
        return (isinstance(after, dict) and list(after) == list(before)
                and all(same_values(before[k], after[k]) for k in before))
    if isinstance(before, (list, tuple)) and holds_tensors(before):
        return (isinstance(after, (list, tuple)) and len(after) == len(before)
                and all(same_values(b, a) for b, a in zip(before, after)))
    if isinstance(before, torch.Tensor):
        if not isinstance(after, torch.Tensor) or after.shape != before.shape or after.dtype != before.dtype:
            return False
        a, b = before.detach().cpu(), after.detach().cpu()
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b)) if a.is_floating_point() else (a == b)).all())
    return True


def describe_tensor_args(args) -> tuple[str, str]:
    """(shape, dtype) columns for the report: the first tensor argument's."""
    for a in args:
        if isinstance(a, torch.Tensor):
            return "x".join(map(str, a.shape)) or "scalar", str(a.dtype).replace("torch.", "")
    return "-", "-"


NOT_WRITTEN_HINT = ("this exercise is not written yet: replace `raise NotImplementedError()` in its cell with "
                    "your code, run the cell, then check again")


def hint_for(case, message: str) -> str | None:
    """The hint shown under the first failure: the case's own, unless the exercise was never written."""
    if message and "NotImplementedError" in message.split(":", 1)[0]:
        return NOT_WRITTEN_HINT
    return case.hint
