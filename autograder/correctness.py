"""Guarantees 1 and 4 on the grading side: compare outputs in float64, check inputs came back unmodified.

Rules: the output's type, shape and dtype must match; positions where the reference is NaN or +-inf
must hold the same value, every other position must be finite (NaN never passes); then
|out - ref| <= atol + rtol * |ref| elementwise, with (atol, rtol) of the output dtype (measure.tolerance),
plus, for a reference that carries one, the slack of roundings the exercise's definition makes
(measure.tolerance.SlackReference).
"""
from __future__ import annotations

import math

import torch

from autograder.argtree import holds_tensors
from autograder.symptoms import NOT_WRITTEN_HINT  # noqa: F401  (the hint for an unwritten exercise)
from measure.tolerance import SlackReference, compare_tensor


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
                msgs.append(f"{spec.output_name(i)}: {msg}")
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
        a, b = before.detach(), after.detach().to(before.device)  # where the grader's copy is (the GPU's)
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b)) if a.is_floating_point() else (a == b)).all())
    return True


def describe_tensor_args(args) -> tuple[str, str]:
    """(shape, dtype) columns for the report: the first tensor argument's."""
    for a in args:
        if isinstance(a, torch.Tensor):
            return "x".join(map(str, a.shape)) or "scalar", str(a.dtype).replace("torch.", "")
    return "-", "-"


def judge_raises(case, done) -> tuple[bool, str]:
    """A case whose input the exercise says to reject: the call must raise ``case.raises`` (by name: the
    worker reports 'ValueError: message [line N]')."""
    want = case.raises.__name__
    if done.ok:
        return False, f"returned a result; the exercise asks for a {want} on this input"
    got = (done.error or "").split(":", 1)[0].strip()
    if got == want:
        return True, ""
    return False, f"raised {done.error}; the exercise asks for a {want} on this input"


def symptom_of(out, ref, dtypes, spec, case, args):
    """The symptom of the first wrong output (autograder.symptoms.diagnose)."""
    from autograder.symptoms import diagnose

    outs = out if isinstance(ref, (tuple, list)) else (out,)
    refs = ref if isinstance(ref, (tuple, list)) else (ref,)
    if not isinstance(outs, (tuple, list)) or len(outs) != len(refs):
        from autograder.symptoms import Symptom

        return Symptom("type", {"got": type(out).__name__})
    for o, r, d in zip(outs, refs, dtypes):
        tol = spec.tolerance(d, case)
        if not compare_tensor(o, r, d, tol)[0]:
            return diagnose(o, r, d, tol, args)
    return None


def describe_tolerance(spec, planned, ok: bool) -> str:
    """The tolerance a case is judged with, in words, for the check table."""
    case = planned.case
    if case.raises is not None:
        return f"raises {case.raises.__name__}"
    if not spec.judged_on_tensors:
        tol = getattr(spec.judge, "tolerance", "")
        return f"{tol} {spec.unit}" if spec.unit and tol[-1:].isdigit() else tol
    ref = planned.ref_a[0] if isinstance(planned.ref_a, (tuple, list)) else planned.ref_a
    if not isinstance(ref, (torch.Tensor, SlackReference)):
        return ""
    dtype = expected_dtypes(planned.a, planned.ref_a, spec)[0]
    atol, rtol = spec.tolerance(dtype, case)
    if not dtype.is_floating_point and atol == rtol == 0:
        return "exact"
    return f"{_short(atol)} + {_short(rtol)}|ref|{' + slack' if isinstance(ref, SlackReference) else ''}"


def _short(x: float) -> str:
    """1e-05, 1.6e-02: a tolerance as short as it can be written exactly enough."""
    return f"{x:.1e}".replace(".0e", "e")


def case_table(rows: list, indent: str = "  ") -> list[str]:
    """The table of case verdicts: case, shape, dtype, max error, tolerance, verdict for tensor outputs;
    case, got, expected, tolerance, verdict for numbers and for inputs that must raise. Case names are
    never cut: the column is as wide as the longest."""
    def cell(x, unit=""):
        if x is None:
            return "-"
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            return str(x)
        text = f"{x:.4g}" if isinstance(x, float) else str(x)
        return f"{text} {unit}" if unit else text

    width = max([len("case")] + [len(r["case"]) for r in rows])
    scalar = [r for r in rows if "got" in r]
    tensor = [r for r in rows if "got" not in r]
    lines = []
    if tensor:
        shape_w = max([5] + [len(r["shape"]) for r in tensor])
        tol_w = max([9] + [len(r.get("tolerance", "")) for r in tensor])
        lines.append(f"{indent}{'case':<{width}}  {'shape':>{shape_w}} {'dtype':>9} {'max error':>10} "
                     f"{'tolerance':>{tol_w}}  verdict")
        for r in tensor:
            lines.append(f"{indent}{r['case']:<{width}}  {r['shape']:>{shape_w}} {r['dtype']:>9} "
                         f"{cell(r['max_error']):>10} {r.get('tolerance', ''):>{tol_w}}  {r['verdict']}")
    if scalar:
        got_w = max([3] + [len(cell(r["got"], r.get("unit", ""))) for r in scalar])
        exp_w = max([8] + [len(cell(r["expected"], r.get("unit", ""))) for r in scalar])
        tol_w = max([9] + [len(r.get("tolerance", "")) for r in scalar])
        lines.append(f"{indent}{'case':<{width}}  {'got':>{got_w}} {'expected':>{exp_w}} {'tolerance':>{tol_w}}  verdict")
        for r in scalar:
            unit = r.get("unit", "")
            lines.append(f"{indent}{r['case']:<{width}}  {cell(r['got'], unit):>{got_w}} "
                         f"{cell(r['expected'], unit):>{exp_w}} {r.get('tolerance', ''):>{tol_w}}  {r['verdict']}")
    return lines
