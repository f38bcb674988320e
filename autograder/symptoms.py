"""Hints chosen from the symptom of a failure, not from the name of the case that failed.

``diagnose(out, ref, dtype, tol, args)`` looks at one wrong tensor output against its float64 reference
and the inputs it came from, and names what it sees (a ``Symptom``): right values in the wrong dtype;
NaN/inf only where the input is large (an overflow); NaN/inf only in rows that hold -inf; every value NaN
(nothing written: fresh memory is NaN); wrong only in the last columns (the ragged last block) or the last
rows; every value off by one factor, and that factor N/(N-1) or its square root (a division by N - 1).
``diagnose_value`` does the same for a number (00, 02): off by a power of 1000 is a unit.

``hint(kind, case, symptom)`` turns it into advice that fits the exercise's kind (a PyTorch exercise is
never told about masks and grids): the symptom's own advice first, then the case's (``Case.hint``: what
this exercise needs for this family of inputs), then the family's for this kind (``FAMILY_HINTS``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from measure.tolerance import allowed_error, split_reference

NOT_WRITTEN_HINT = ("this exercise is not written yet: replace `raise NotImplementedError()` in its cell with "
                    "your code, run the cell, then check again")


@dataclass
class Symptom:
    name: str                                  # one of the names ``hint`` knows (see SYMPTOM_HINTS)
    numbers: dict = field(default_factory=dict)


# ------------------------------------------------------------------------------------------- diagnosis

def diagnose_error(error: str) -> Symptom:
    """A call that raised: was the exercise ever written?"""
    if "NotImplementedError" in (error or "").split(":", 1)[0]:
        return Symptom("not-written")
    if "OutOfBounds" in (error or ""):  # course.bounds: an unmasked access under the interpreter
        return Symptom("out-of-bounds")
    if "OutOfResources" in (error or ""):  # Triton: the tile needs more shared memory or registers than a SM has
        return Symptom("out-of-resources")
    kind = (error or "").split(":", 1)[0].strip().rsplit(".", 1)[-1]
    # the grader refused it: the message is the cause
    if kind in ("ThreadRefused", "ImportRefused", "CallbackRefused", "ArgumentRefused", "OutputRefused",
                "RunTimeRefused", "KernelSourceRefused"):
        return Symptom("refused")
    if kind in ("NameError", "UnboundLocalError"):  # a name never defined: no input family explains it
        return Symptom("name-error", {"error": error.strip()})
    return Symptom("raised")


def diagnose(out, ref, dtype: torch.dtype, tol, args=()) -> Symptom:
    """What is wrong with ``out`` (one output) against ``ref`` (float64, or a SlackReference), held to
    ``tol`` = (atol, rtol)."""
    ref, slack = split_reference(ref)
    slack = None if slack is None else slack.detach().cpu().to(torch.float64)
    if not isinstance(out, torch.Tensor):
        return Symptom("type", {"got": type(out).__name__})
    if tuple(out.shape) != tuple(ref.shape):
        return Symptom("shape", {"got": tuple(out.shape), "expected": tuple(ref.shape)})
    o = out.detach().cpu().to(torch.float64)
    r = ref.detach().cpu().to(torch.float64)
    if out.dtype != dtype:
        return Symptom("dtype", {"got": _name(out.dtype), "expected": _name(dtype), "values_right": _close(o, r, tol, slack)})
    if r.numel() == 0:
        return Symptom("values")
    bad = ~_elementwise_ok(o, r, tol, slack)
    nonfinite = ~torch.isfinite(o) & torch.isfinite(r)
    rows_of = lambda t: t.reshape(-1, t.shape[-1]) if t.dim() else t.reshape(1, 1)  # noqa: E731
    n_cols = r.shape[-1] if r.dim() else 1
    x = _input_like(args, out)
    if bool(nonfinite.any()):
        count = {"count": int(nonfinite.sum()), "of": nonfinite.numel()}
        if bool(torch.isnan(o).all()) and bool(torch.isfinite(r).all()):
            if n_cols == 1 and r.numel() >= 1:
                return Symptom("nan-on-one-element", {"n": n_cols, **count})
            return Symptom("all-nan", count)
        if x is not None:
            xr, nfr = rows_of(x), rows_of(nonfinite)
            rows_bad = nfr.any(1)
            if bool((xr[rows_bad] == -math.inf).any(1).all()):
                return Symptom("neg-inf", count)
            if _only_where_large(x, nonfinite) or _only_in_large_rows(xr, rows_bad):
                return Symptom("overflow", count)
    tail = _tail(rows_of(bad).any(0))
    if tail is not None:
        return Symptom("tail-columns", {"first": tail, "n": n_cols})
    if r.dim() >= 2:
        tail = _tail(rows_of(bad).any(1))
        if tail is not None:
            return Symptom("tail-rows", {"first": tail, "n": rows_of(bad).shape[0]})
    if bool(nonfinite.any()):
        return Symptom("nonfinite", {"count": int(nonfinite.sum()), "of": nonfinite.numel()})
    factor = _common_factor(o, r)
    if factor is not None:
        name = _n_minus_1(factor, n_cols)
        if name:
            return Symptom("n-minus-1", {"factor": factor, "n": n_cols, "which": name})
        return Symptom("scale", {"factor": factor})
    return Symptom("values")


def diagnose_value(out, expected) -> Symptom | None:
    """A number that is wrong: by a power of 1000 (a unit), or by a factor of 2."""
    try:
        ratio = float(out) / float(expected)
    except (TypeError, ValueError, ZeroDivisionError, OverflowError):
        return None
    if not math.isfinite(ratio) or ratio <= 0:
        return None
    k = round(math.log10(ratio) / 3)
    if k != 0 and abs(ratio / 10.0 ** (3 * k) - 1) < 0.05:
        return Symptom("units", {"ratio": ratio})
    for f in (2.0, 0.5):
        if abs(ratio / f - 1) < 1e-6:
            return Symptom("factor-two", {"ratio": ratio})
    return None


def _name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def _elementwise_ok(o, r, tol, slack=None):
    same_special = (o == r) | (torch.isnan(o) & torch.isnan(r))
    near = (o - r).abs() <= allowed_error(r, tol, slack)
    return torch.where(torch.isfinite(r), near & torch.isfinite(o), same_special)


def _close(o, r, tol, slack=None) -> bool:
    return bool(_elementwise_ok(o, r, tol, slack).all())


def _input_like(args, out):
    """The first floating-point input of the output's shape (elementwise and row-wise ops), in float64."""
    for a in args:
        if isinstance(a, torch.Tensor) and a.is_floating_point() and tuple(a.shape) == tuple(out.shape):
            return a.detach().cpu().to(torch.float64)
    return None


def _only_where_large(x, bad) -> bool:
    """Every bad element has an input far above the typical magnitude."""
    mag = torch.where(torch.isfinite(x), x.abs(), torch.zeros_like(x))
    return bool(mag[bad].min() >= max(3 * float(mag.median()), 1e-6))


def _only_in_large_rows(xr, rows_bad) -> bool:
    """Every bad row has a largest |x| far above the typical row's."""
    mag = torch.where(torch.isfinite(xr), xr.abs(), torch.zeros_like(xr)).amax(1)
    if bool(rows_bad.all()):
        return False
    return bool(mag[rows_bad].min() >= max(3 * float(mag.median()), 1e-6))


def _tail(bad_cols: torch.Tensor) -> int | None:
    """k > 0 when exactly the positions k.. are bad (some row wrong in each of them, none before)."""
    idx = bad_cols.nonzero()
    if idx.numel() == 0:
        return None
    k = int(idx[0, 0])
    return k if k > 0 and bool(bad_cols[k:].all()) else None


def _common_factor(o, r) -> float | None:
    """c when out = c * ref (to 0.1%), also after removing each column's mean over rows (a bias added
    after the scaled part, as in LayerNorm's y = z * w + b); None otherwise or when c is 1."""
    candidates = [(o.flatten(), r.flatten())]
    if r.dim() >= 2 and r.reshape(-1, r.shape[-1]).shape[0] >= 2:
        o2, r2 = o.reshape(-1, o.shape[-1]), r.reshape(-1, r.shape[-1])
        candidates.append(((o2 - o2.mean(0)).flatten(), (r2 - r2.mean(0)).flatten()))
    for a, b in candidates:
        denom = float(b @ b)
        if denom <= 0 or not math.isfinite(denom):
            continue
        c = float(a @ b) / denom
        if abs(c - 1) > 1e-3 and float((a - c * b).norm()) <= 1e-3 * math.sqrt(denom):
            return c
    return None


def _n_minus_1(factor: float, n: int) -> str | None:
    if n < 2:
        return None
    for name, value in (("(N-1)/N", (n - 1) / n), ("N/(N-1)", n / (n - 1)),
                        ("sqrt((N-1)/N)", math.sqrt((n - 1) / n)), ("sqrt(N/(N-1))", math.sqrt(n / (n - 1)))):
        if abs(factor - value) < 2e-3 * value:
            return name
    return None


# ------------------------------------------------------------------------------------------- hints

TRITON, TORCH, VALUE = "triton", "torch", "value"

# Hints about the ragged last block (its masks, a grid of cdiv(n, BLOCK) programs) name the cause only where
# the output is wrong there alone (or an access went out of bounds). An output wrong from its first element
# on (a math error, masked lanes' ``other=`` values entering a sum, a missing term) has loads that are
# masked well: such a hint would send the learner to the wrong place, so none is given. Specs mark theirs
# with ``at_the_tail``.
TAIL_HINTS: set[str] = set()
LOCATED_AT_THE_TAIL = {"tail-columns", "tail-rows", "out-of-bounds"}


def at_the_tail(text: str) -> str:
    """Mark a hint as one about the last partial block (given only for a symptom located there)."""
    TAIL_HINTS.add(text)
    return text


# Advice for a family of inputs, by kind of exercise (used when neither the symptom nor the case has any).
FAMILY_HINTS = {
    TRITON: {
        "tiny": "tiny shapes: does the grid cover at least one program, and is the block at least the row?",
        "shape": at_the_tail("non-power-of-two sizes: is every load and store masked (offsets < n)?"),
        "long-rows": "rows longer than one block: loop over the row block by block (or launch a program per "
                     "block of columns); is every block masked?",
        "dtype": "{dtype}: load, compute in float32 (`.to(tl.float32)`), and cast back when storing",
        "strided": "non-contiguous rows: step between rows with x.stride(0), not the row length",
        "large": "large magnitudes: exp overflows float32 past 88; compute it stably",
        "neg-inf-blocks": "leading blocks entirely -inf: while the running max is still -inf, exp(x - m) is "
                          "exp(-inf - (-inf)) = NaN; subtract a safe max (0 while m is -inf)",
    },
    TORCH: {
        "tiny": "a dimension of 1: do the reductions and the broadcasting still work on one element?",
        "dtype": "{dtype}: compute in float32 (`x.float()`) and return the input's dtype (`.to(x.dtype)`)",
        "strided": "non-contiguous inputs: use tensor operations (or .reshape), not .view or raw storage",
        "large": "large magnitudes: exp overflows float32 past 88; subtract the row max first",
    },
    VALUE: {},
}

OVERFLOW = {TRITON: "NaN/inf only where the input is large: something overflows float32 (exp(89) = inf, and "
                    "inf/inf or inf - inf is NaN). Compute it in a form that cannot overflow (subtract the row "
                    "max before exp; for tanh use exp(-2|u|), which lies in (0, 1])",
            TORCH: "NaN/inf only where the input is large: something overflows float32 (exp(89) = inf, and "
                   "inf/inf is NaN). Subtract the row max before exp"}
NEG_INF = {TRITON: "NaN/inf only in rows that hold -inf: exp(-inf - (-inf)) is NaN. Masked lanes load "
                   "other=-inf, and a block (or a row start) of only -inf leaves the max at -inf: subtract a "
                   "safe max (0 while the max is -inf); exp(-inf) = 0 is right",
           TORCH: "NaN/inf only in rows that hold -inf: -inf - (-inf) is NaN; subtract the row max (which "
                  "ignores -inf unless the whole row is -inf); exp(-inf) = 0 is right"}


# Symptoms that only say where the output is wrong: a family that explains the input better comes first
# (a kernel that ignores the row stride is wrong from row 1 on; the hint is the stride, not the grid).
WEAK = {"tail-rows", "tail-columns", "nonfinite", "values", "all-nan", "raised", "type", "overflow"}
# Families whose own advice names the cause of a weak symptom.
EXPLAINING = {"strided", "large", "neg-inf-blocks", "mean-offset", "causal", "scale", "long-k", "edge-values",
              "long-rows", "dtype"}


def hint(kind: str, case, symptom: Symptom | None, unit: str = "") -> str | None:
    """The hint for the first failure (``case`` failed with ``symptom``) of an exercise of ``kind``."""
    s = symptom or Symptom("values")
    if s.name == "not-written":
        return NOT_WRITTEN_HINT
    if s.name == "refused":
        return None  # the refusal's own message names the cause: no input family explains it
    if getattr(case, "raises", None) is not None:
        return case.hint or None
    family = case.family.split(":")[0]
    fits = lambda text: text and (text not in TAIL_HINTS or s.name in LOCATED_AT_THE_TAIL)  # noqa: E731
    if s.name in WEAK and family in EXPLAINING:
        found = next((t for t in (case.hint, _family_hint(kind, case)) if fits(t)), None)
        if found:
            return found
    return next((t for t in (_symptom_hint(kind, s, s.numbers, unit), case.hint, _family_hint(kind, case))
                 if fits(t)), None)


def _family_hint(kind: str, case) -> str | None:
    text = FAMILY_HINTS.get(kind, {}).get(case.family.split(":")[0])
    return text.format(dtype=case.family.split(":", 1)[-1]) if text else None


def _symptom_hint(kind, s, n, unit) -> str | None:
    triton = kind == TRITON
    if s.name == "dtype":
        fix = ("allocate the output with the input's dtype and cast when storing (`.to(y_ptr.dtype.element_ty)`)"
               if triton else "return the result in the input's dtype (`.to(x.dtype)`)")
        values = "the values are right but " if n.get("values_right") else ""
        return f"{values}the output's dtype is {n['got']}, expected {n['expected']}: {fix}"
    if s.name == "out-of-resources":
        return ("the kernel's tiles need more shared memory (or registers) than one SM of this GPU has: smaller "
                "blocks or fewer num_stages for this case's dtype (float32 tiles take twice the bytes of 16-bit "
                "ones), or let triton.autotune skip configs that do not fit")
    if s.name == "out-of-bounds":
        return ("a load or store reached past the end of a tensor: mask every tl.load and tl.store of the "
                "last, partial block (mask=offsets < n, with other= for loads)")
    if s.name == "name-error":
        return (f"{n['error']}: a name used but never given a value (a typo, a variable of another cell or "
                "function, or a module not imported)")
    if s.name == "shape":
        return f"the output has shape {n['got']}, expected {n['expected']}: return one value per input element"
    if s.name == "nan-on-one-element":
        if kind == TORCH:
            return ("NaN on a row of one element: a division by N - 1 = 0? (the unbiased variance, torch.var's "
                    "default, divides by N - 1; LayerNorm's variance divides by N: `unbiased=False` / correction=0)")
        return ("every value NaN on a row of one element: either nothing was written (the grader fills fresh "
                "memory with NaN: is the block at least the row, and does the store run?) or "
                "NaN was computed: exp(-inf - (-inf)) where every lane seen so far is masked to -inf (subtract a "
                "safe max, 0 while the max is -inf)")
    if s.name == "all-nan":
        if triton:
            return ("every value is NaN. Either nothing was written (the grader fills fresh memory with NaN: is "
                    "the kernel launched with the output tensor, and does the store run for every element?) or "
                    "every value computed NaN: exp(-inf - (-inf)) where every lane seen so far is masked to "
                    "-inf (subtract a safe max, 0 while the max is -inf), or 0/0")
        return "every value is NaN: a 0/0 or inf - inf at the start of the computation?"
    if s.name == "overflow":
        return OVERFLOW.get(kind)
    if s.name == "neg-inf":
        return NEG_INF.get(kind)
    if s.name == "tail-columns":
        where = f"only the last {n['n'] - n['first']} of {n['n']} columns (from column {n['first']}) are wrong"
        if triton:
            return (f"{where}: the last, partial block. Is the grid cdiv(n, BLOCK) programs, and is every load "
                    "and store masked with offsets < n (not a multiple of BLOCK)?")
        return f"{where}: an off-by-one in a slice or a loop bound?"
    if s.name == "tail-rows":
        where = f"only rows {n['first']}..{n['n'] - 1} of {n['n']} are wrong"
        if triton:
            return f"{where}: does the grid launch a program for every row (or block of rows), masked at the end?"
        return f"{where}: an off-by-one in a slice or a loop bound?"
    if s.name == "n-minus-1":
        return (f"every value is off by the factor {n['factor']:.4f} = {n['which']} for N = {n['n']}: a division "
                "by N - 1 where N belongs (the unbiased variance, torch.var's default; LayerNorm divides by N)")
    if s.name == "scale":
        return (f"every value is off by the same factor {n['factor']:.4g}: a scale or a normalization is wrong "
                "(what is divided by, or multiplied with?)")
    if s.name == "units":
        unit = unit or "the unit the exercise states"
        return f"off by a factor of {n['ratio']:.3g}: a unit? (the answer is in {unit}; seconds vs milliseconds?)"
    if s.name == "factor-two":
        return f"off by a factor of {n['ratio']:g}: something counted twice, or once where twice is due?"
    return None
