"""The tolerance table, stated once, and the float64 comparison that applies it.

A computed output passes when, elementwise, |out - ref| <= atol + rtol * |ref|, with ``ref`` computed in
float64 and (atol, rtol) taken from the output's dtype; positions where the reference is NaN or +-inf must
hold the same value, every other position must be finite (NaN never passes). The grader, the reference
kernels' tests and the benchmark suite's pre-timing check all use it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

# (atol, rtol) per output dtype. float32: a kernel computing in fp32 lands within a few ulp (1.2e-7) of
# the exact value; 1e-5/1e-4 leaves room for a different reduction order. fp16/bf16: the output's own
# rounding is 2^-11 / 2^-8 relative, so the tolerance is a few of those ulps; nothing looser, or a wrong
# kernel could pass. A check that needs more (chained roundings, TF32, long accumulations) overrides it
# with its reason beside it.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-10, 1e-8),
    torch.float32: (1e-5, 1e-4),
    torch.float16: (1e-3, 4e-3),
    torch.bfloat16: (8e-3, 1.6e-2),
}

# Sums over many rows (the gradient of a weight: LayerNorm's dweight over all M rows, attention's dq/dk/dv
# over S): a float32 accumulation of M terms of size ~1 drifts by ~sqrt(M)..M ulps of the running sum
# (M = 4096: 1e-5 typical, 2.4e-4 worst order) whichever order the partial sums take, and cancellation
# leaves results far smaller than the terms, so float32 gets atol 1e-4 / rtol 1e-3 instead of 1e-5 / 1e-4.
# 16-bit outputs keep TOLERANCES: their own rounding (>= 2^-11) dominates. A wrong gradient (a missing
# mean term, a skipped row block, the wrong stride) is off by O(0.1) or more.
GRAD_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {torch.float32: (1e-4, 1e-3)}


# Unit roundoff (half an ulp at 1) of the dtypes a kernel may round an intermediate to.
UNIT_ROUNDOFF: dict[torch.dtype, float] = {torch.float64: 2.0 ** -53, torch.float32: 2.0 ** -24,
                                           torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8}

# The relative error of one operand of a dot, as a tensor core reads it, per operand dtype. float32: tl.dot's
# default reads it as TF32, 10 of float32's 23 mantissa bits; Triton hands the MMA the float32 bits as they
# are, so the low 13 may be dropped rather than rounded: up to 2^-10 (2^-11 if rounded). 16-bit operands are
# read exactly (their products are exact in the float32 accumulator).
DOT_OPERAND_ERROR: dict[torch.dtype, float] = {torch.float64: 0.0, torch.float32: 2.0 ** -10,
                                               torch.float16: 0.0, torch.bfloat16: 0.0}


@dataclass(frozen=True)
class SlackReference:
    """A float64 reference output with ``slack``: an absolute error each element may have on top of its
    dtype's tolerance, for roundings that the exercise's own definition makes.

    linear_cross_entropy's gradients are the example: its logits are x @ weight.T in x's dtype (eager's,
    and every fused kernel's), and its dlogits are stored in that dtype. In bf16 that moves each dlogit by
    up to 2^-8 of its magnitude and of its logit's, and dweight, a sum over rows whose terms cancel, can
    end up many ulps of its own value off: no relative tolerance of the value is fair there. With float32
    inputs a Triton dot reads its operands as TF32 (DOT_OPERAND_ERROR): a logit near 100 moves by ~0.05,
    which splits a near tie's softmax differently. The slack is that error bound, worked out by the
    reference from the exact values."""
    value: torch.Tensor
    slack: torch.Tensor


def split_reference(ref):
    """(value, slack or None) of one reference output."""
    return (ref.value, ref.slack) if isinstance(ref, SlackReference) else (ref, None)


def reference_values(ref):
    """``ref`` with every SlackReference replaced by its value (a tensor, or a tuple of them)."""
    if isinstance(ref, (tuple, list)):
        return type(ref)(reference_values(r) for r in ref)
    return split_reference(ref)[0]


def allowed_error(ref: torch.Tensor, tol, slack: torch.Tensor | None = None) -> torch.Tensor:
    """The largest |out - ref| each element may have: atol + rtol * |ref|, plus a SlackReference's slack."""
    atol, rtol = tol
    bound = atol + rtol * ref.abs()
    return bound if slack is None else bound + slack.to(ref.device, torch.float64)


def share_of_allowed(out: torch.Tensor, ref, tol) -> float:
    """max |out - ref| / allowed_error over the elements: how much of what is allowed an output uses (below
    1 passes); ``ref`` a float64 tensor or a SlackReference."""
    value, slack = split_reference(ref)
    return float(((out.detach().double() - value).abs() / allowed_error(value, tol, slack)).max())


def compare_tensor(out, ref, dtype: torch.dtype, tol) -> tuple[bool, float | None, str]:
    """(ok, max abs error, message) of one output against its float64 reference (a tensor or a
    SlackReference)."""
    ref, slack = split_reference(ref)
    if not isinstance(out, torch.Tensor):
        return False, None, f"returned {type(out).__name__}, expected a torch.Tensor"
    if tuple(out.shape) != tuple(ref.shape):
        return False, None, f"shape {tuple(out.shape)}, expected {tuple(ref.shape)}"
    if out.dtype != dtype:
        return False, None, f"dtype {out.dtype}, expected {dtype}"
    if ref.numel() == 0:
        return True, 0.0, ""
    o = out.detach().to(device=ref.device, dtype=torch.float64)
    r = ref.detach().to(torch.float64)
    special = ~torch.isfinite(r)
    if bool(special.any()):
        same = (o[special] == r[special]) | (torch.isnan(o[special]) & torch.isnan(r[special]))
        if not bool(same.all()):
            return False, math.inf, "wrong where the exact answer is NaN or infinite"
    regular = ~special
    o_reg, r_reg = o[regular], r[regular]
    if not bool(torch.isfinite(o_reg).all()):
        n_bad = int((~torch.isfinite(o_reg)).sum())
        return False, math.inf, f"{n_bad} NaN/inf value(s) where the answer is finite"
    if o_reg.numel() == 0:
        return True, 0.0, ""
    err = (o_reg - r_reg).abs()
    atol, rtol = tol
    bad = err > allowed_error(r_reg, tol, None if slack is None else slack.to(r.device)[regular])
    max_err = float(err.max())
    if bool(bad.any()):
        idx = int(bad.nonzero()[0, 0]) if bad.dim() else 0
        return False, max_err, (f"{int(bad.sum())} of {bad.numel()} values off (max error {max_err:.3g}; "
                                f"e.g. got {float(o_reg.flatten()[idx]):.6g}, expected {float(r_reg.flatten()[idx]):.6g}; "
                                f"allowed {atol:g} + {rtol:g}*|expected|{'' if slack is None else ' + the rounding slack'})")
    return True, max_err, ""


def tolerance_for(dtype: torch.dtype, overrides: dict | None = None) -> tuple[float, float]:
    overrides = overrides or {}
    return overrides[dtype] if dtype in overrides else TOLERANCES[dtype]  # an integer output has only its own


def compare(out, ref, overrides: dict | None = None, dtypes=None) -> tuple[bool, float | None, str]:
    """Compare one output or a tuple of outputs with the reference(s); each output is held to the
    tolerance of its expected dtype (``dtypes``, default: the output's own)."""
    outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    refs = tuple(ref) if isinstance(ref, (tuple, list)) else (ref,)
    if len(outs) != len(refs):
        return False, None, f"expected {len(refs)} output(s), got {len(outs)}"
    dtypes = dtypes or [getattr(o, "dtype", torch.float32) for o in outs]
    worst, ok, msgs = 0.0, True, []
    for i, (o, r, d) in enumerate(zip(outs, refs, dtypes)):
        good, err, msg = compare_tensor(o, r, d, tolerance_for(d, overrides))
        ok &= good
        worst = max(worst, err if err is not None else math.inf)
        if not good:
            msgs.append(f"output {i}: {msg}" if len(outs) > 1 else msg)
    return ok, worst, "; ".join(msgs)
