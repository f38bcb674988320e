"""05_layer_norm: fused LayerNorm forward (y, mean, rstd) and backward (dx, and dweight/dbias from partial sums),
and LayerNorm + GELU in one launch.

Semantics (docs/CONTRACTS.md): x ``[M, N]``, weight and bias ``[N]``; LayerNorm over the last dim with the
biased variance; ``mean`` and ``rstd = 1/sqrt(var + eps)`` are ``[M]`` float32 whatever x's dtype; y and dx
have x's dtype, dweight and dbias weight's dtype. The backward gets the forward's mean and rstd.
``layer_norm_gelu(x, weight, bias, eps) = gelu_tanh(layer_norm(x))`` in x's dtype, one launch.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from measure import reference
from measure.tolerance import GRAD_TOLERANCES
from autograder.specs._cases import HINT_STRIDE, LONG_ROW, dtype_name, family_of, row_strided
from autograder.specs.base import (TRITON, Case, Exercise, triton_rules, Performance, as64, float_dtypes,
                                   pick_shapes, rand)

NOTEBOOK = "05_layer_norm"

# Gradients of weights are sums over all M rows: measure.tolerance.GRAD_TOLERANCES says why they get more.

HINT_CONST = "constant rows: var = 0, so rstd = 1/sqrt(eps); compute var as mean((x - mean)^2), never negative"
HINT_MEAN = "rows with a large mean: compute the variance as mean((x - mean)^2), not E[x^2] - E[x]^2"
# At |x| ~ 300 a float32 x - mean is only good to ~3e-5 (the ulp of 300), so any fp32 kernel lands near
# 1e-4; the one-pass E[x^2] - E[x]^2 is off by ~5e-3. 1e-3 separates the two (as in 01_naive_ops).
MEAN300_TOL = {torch.float32: (1e-3, 1e-3)}


def _eps(g) -> float:
    return float(torch.empty(()).uniform_(1e-6, 1e-5, generator=g))


def _hard(x: torch.Tensor, big: float) -> torch.Tensor:
    """Row 0 at large magnitude, row 1 constant (variance exactly 0)."""
    x = x.clone()
    x[0] = x[0] * big
    if x.shape[0] >= 2:
        x[1] = 3.0
    return x


def _offset(x: torch.Tensor, offset: float) -> torch.Tensor:
    return (x.float() + offset).to(x.dtype)


# ------------------------------------------------------------------------------------------- forward

def _fwd_args(g, shape, dtype, transform=None):
    x = rand(g, shape, dtype)
    if transform is not None:
        x = transform(x)
    return x, rand(g, (shape[1],), dtype), rand(g, (shape[1],), dtype), _eps(g)


_stats64 = reference.layer_norm_stats


def fwd_reference(x, weight, bias, eps):
    mean, rstd = _stats64(x, eps)
    return reference.layer_norm(x, weight, bias, eps), mean, rstd


def _shapes(quick):
    return pick_shapes(quick, [(1, 1), (3, 17)], [(1, 1), (3, 17), (37, 129), (64, 1000)],
                       [(1, 1), (3, 17), (37, 129), (4096, 1000), (1000, 4099)])


def _long_rows(shapes, args):
    """A public case of 2 rows of the longest length, when some shapes have rows longer than a block."""
    longest = max(s[1] for s in shapes)
    if longest <= LONG_ROW:
        return []
    return [Case(f"long rows 2x{longest} float32", lambda g: args(g, (2, longest), torch.float32),
                 family="long-rows", public=True)]


def _row_cases(quick, make_args, hint_hard: str) -> tuple[list, tuple[int, int]]:
    """The cases forward and backward share: every shape and dtype, the long rows, large and constant rows
    (hint ``hint_hard``); and the last shape, for the cases each adds."""
    shapes = _shapes(quick)
    cases = [Case(f"{s[0]}x{s[1]} {dtype_name(d)}", lambda g, s=s, d=d: make_args(g, s, d),
                  family=family_of(s, d, rows=True), public=s in shapes[:2])
             for s in shapes for d in float_dtypes()]
    cases += _long_rows(shapes, make_args)
    last = shapes[-1] if shapes[-1][0] >= 2 else (3, 17)
    for d in float_dtypes():
        big = 1000.0 if d == torch.float32 else 100.0
        cases.append(Case(f"large and constant rows {last[0]}x{last[1]} {dtype_name(d)}",
                          lambda g, d=d, b=big: make_args(g, last, d, lambda x: _hard(x, b)), hint=hint_hard,
                          family="large", public=True))
    return cases, last


def _fwd_cases(quick):
    cases, last = _row_cases(quick, _fwd_args, HINT_CONST)
    cases.append(Case(f"mean 300 {last[0]}x{last[1]} float32",
                      lambda g: _fwd_args(g, last, torch.float32, lambda x: _offset(x, 300.0)),
                      hint=HINT_MEAN, tolerances=MEAN300_TOL, family="mean-offset", public=True))
    cases.append(Case(f"row-strided {last[0]}x{last[1]} float32",
                      lambda g: _fwd_args(g, last, torch.float32, row_strided), hint=HINT_STRIDE,
                      family="strided", public=True))
    return cases


def _fwd_cases_and_rules(quick):
    """The forward's cases, and the inputs its exercise says to reject with a ValueError: a non-2-D x,
    weight and bias that do not match the rows (longer, so that a kernel that never checks stays inside
    them), rows longer than one block (MAX_N = 65536)."""
    def invalid(x_shape, n_wb):
        return lambda g: (rand(g, x_shape), rand(g, (n_wb,)), rand(g, (n_wb,)), _eps(g))

    rules = [("3-D x 2x3x5", invalid((2, 3, 5), 5)), ("weight and bias of 20 for rows of 17", invalid((3, 17), 20)),
             ("row of 65537", invalid((1, 65537), 65537))]
    return _fwd_cases(quick) + [
        Case(f"{name}: ValueError", build, raises=ValueError, family="invalid", public=True,
             hint="the exercise asks for a ValueError for a non-2-D x, mismatched shapes, or rows longer than MAX_N")
        for name, build in rules]


def eager_layer_norm(x, weight, bias, eps):
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)


def _fwd_perf_inputs(g, dev):
    m, n = 16384, 4096
    return (rand(g, (m, n), torch.bfloat16, device=dev), rand(g, (n,), torch.bfloat16, device=dev),
            rand(g, (n,), torch.bfloat16, device=dev), 1e-5)


def naive_layer_norm_fwd(x, weight, bias, eps):
    """What a learner writes before the course (01's naive_layer_norm, with its statistics): ~7 kernels."""
    xf = x.float()
    mean = xf.mean(-1, keepdim=True)
    xc = xf - mean
    rstd = torch.rsqrt((xc * xc).mean(-1, keepdim=True) + eps)
    return (xc * rstd * weight.float() + bias.float()).to(x.dtype), mean[:, 0], rstd[:, 0]


def _fwd_bytes(args) -> int:
    x = args[0]
    m, n = x.shape
    return 2 * m * n * x.element_size() + 2 * n * x.element_size() + 8 * m  # x in, y out, w, b, mean+rstd


# ------------------------------------------------------------------------------------------- backward

def _bwd_args(g, shape, dtype, transform=None, strided=False):
    x = rand(g, shape, dtype)
    if transform is not None:
        x = transform(x)
    mean, rstd = _stats64(x, _eps(g))
    dy = rand(g, shape, dtype)
    if strided:
        x, dy = row_strided(x), row_strided(dy)
    return dy, x, rand(g, (shape[1],), dtype), mean.float(), rstd.float()


def bwd_reference(dy, x, weight, mean, rstd):
    dy, x, w = as64(dy), as64(x), as64(weight)
    mean, rstd = as64(mean)[:, None], as64(rstd)[:, None]
    xhat = (x - mean) * rstd
    wdy = w * dy
    dx = (wdy - xhat * (xhat * wdy).mean(-1, keepdim=True) - wdy.mean(-1, keepdim=True)) * rstd
    return dx, (dy * xhat).sum(0), dy.sum(0)


def _bwd_cases(quick):
    cases, last = _row_cases(quick, _bwd_args,
                             "constant rows: rstd = 1/sqrt(eps) is large and xhat = 0; keep every sum in float32")
    cases.append(Case(f"row-strided dy and x {last[0]}x{last[1]} float32",
                      lambda g: _bwd_args(g, last, torch.float32, strided=True), hint=HINT_STRIDE,
                      family="strided", public=True))
    return cases


def eager_layer_norm_bwd(dy, x, weight, mean, rstd):
    # The one kernel pair eager autograd runs for LayerNorm's backward (bias only gives dbias its dtype).
    return torch.ops.aten.native_layer_norm_backward(dy, x, [x.shape[-1]], mean[:, None], rstd[:, None],
                                                     weight, weight, [True, True, True])


def _bwd_perf_inputs(g, dev):
    m, n = 16384, 4096
    x = rand(g, (m, n), torch.bfloat16, device=dev)
    xf = x.float()
    mean = xf.mean(-1)
    rstd = torch.rsqrt(((xf - mean[:, None]) ** 2).mean(-1) + 1e-5)
    del xf
    return rand(g, (m, n), torch.bfloat16, device=dev), x, rand(g, (n,), torch.bfloat16, device=dev), mean, rstd


def naive_layer_norm_bwd(dy, x, weight, mean, rstd):
    """The closed form from tensor primitives (one kernel per operator, float32 intermediates)."""
    xhat = (x.float() - mean[:, None]) * rstd[:, None]
    g = dy.float() * weight.float()
    dx = rstd[:, None] * (g - xhat * (g * xhat).mean(-1, keepdim=True) - g.mean(-1, keepdim=True))
    return dx.to(x.dtype), (dy.float() * xhat).sum(0).to(weight.dtype), dy.float().sum(0).to(weight.dtype)


def _bwd_bytes(args) -> int:
    x = args[1]
    m, n = x.shape
    # dy, x in and dx out; weight in, dweight and dbias out; mean and rstd in. The [G, N] fp32 partials
    # are extra traffic a good kernel keeps small (G ~ number of SMs), so they are not counted.
    return 3 * m * n * x.element_size() + 3 * n * x.element_size() + 8 * m


# ------------------------------------------------------------------------------------------- LayerNorm + GELU

def gelu_reference(x, weight, bias, eps):
    return reference.gelu_tanh(reference.layer_norm(x, weight, bias, eps))


def _gelu_cases(quick):
    """The forward's inputs (odd shapes, every dtype, large and constant rows, mean 300, strided rows), plus
    weights and biases large enough that GELU's tanh saturates."""
    last = _shapes(quick)[-1] if _shapes(quick)[-1][0] >= 2 else (3, 17)

    def saturating(g):
        x, w, b, eps = _fwd_args(g, last, torch.float32)
        return x, w * 30.0, b * 30.0, eps

    return _fwd_cases(quick) + [Case(
        f"GELU saturates {last[0]}x{last[1]} float32", saturating, public=True, family="large",
        hint="|LayerNorm output| ~ 100: tanh must saturate to +-1 (exp(2u) overflows float32: use a stable form)")]


def eager_layer_norm_gelu(x, weight, bias, eps):
    return F.gelu(F.layer_norm(x, (x.shape[-1],), weight, bias, eps), approximate="tanh")


def naive_layer_norm_gelu(x, weight, bias, eps):
    """01's naive LayerNorm, then GELU's tanh formula written out: every intermediate through memory."""
    y = naive_layer_norm_fwd(x, weight, bias, eps)[0].float()
    return (0.5 * y * (1.0 + torch.tanh(0.7978845608028654 * (y + 0.044715 * y * y * y)))).to(x.dtype)


def _gelu_bytes(args) -> int:
    x = args[0]
    m, n = x.shape
    return 2 * m * n * x.element_size() + 2 * n * x.element_size()  # x in, y out, w and b once


WHY = {"native_layer_norm": "F.layer_norm computes the whole forward for you: write it in your kernel",
       "native_layer_norm_backward": "this is eager LayerNorm's backward: write it in your kernels",
       "sum": "reduce in your Triton kernels (the partial sums are the exercise), not with torch.sum",
       "mean": "reduce in your Triton kernel, not with torch.mean",
       "var": "compute the variance in your kernel", "var_mean": "compute mean and variance in your kernel",
       "mul": "compute in your Triton kernel, not with torch's *", "sub": "compute in your kernel",
       "add": "compute in your kernel", "rsqrt": "compute rstd in your kernel"}

WHY_GELU = {**WHY,
            "gelu": "F.gelu is the second launch this exercise fuses away: apply GELU to y in your kernel",
            "tanh": "compute GELU's tanh in your kernel", "div": "compute in your kernel",
            "native_layer_norm": "F.layer_norm is the first of the two launches to fuse: normalize in your kernel"}

EXERCISES = [
    Exercise(
        id="layer_norm_fwd", notebook=NOTEBOOK, entry="layer_norm_fwd",
        signature="layer_norm_fwd(x, weight, bias, eps) -> (y, mean, rstd)",
        correctness_points=7, performance_points=3, cases=_fwd_cases_and_rules, reference=fwd_reference,
        out_dtypes=lambda a: (a[0].dtype, torch.float32, torch.float32),
        kind=TRITON, rules=triton_rules(WHY),
        performance=Performance(
            inputs=_fwd_perf_inputs, baseline=eager_layer_norm, baseline_name="F.layer_norm (eager)",
            nbytes=_fwd_bytes,
            # Calibrated (results/h100-2026-11-23 and results/h200-2026-11-23, calibration.json; tests/test_results.py
            # holds the 15% rule and the floor): the solution's one-row-per-program kernel ran at
            # 0.86-0.91x eager on an H100 and 0.93x on an H200 (eager's own kernel is near copy bandwidth),
            # so full credit from 0.7; the naive eager version (mean, sub, square, mean, rsqrt, mul, add:
            # ~7 passes) measured 0.13x. kernels_ref's tuned kernel reaches 1.26x (the bench). Over repeated
            # gradings on an H200 (results/h200-2026-11-27/repeat-23h10, results/h200-2026-11-28/repeat-03h24) the
            # solution read 0.73-1.02x: the slowest clears 0.6 by 15%, so full credit from 0.6. On a slower H200 host
            # (results/h200-2026-11-29/grading-time-final-01h57, every lap of that run longer) it read 0.687x, which
            # clears 0.6 by only 14.5% (its Python launcher's cost weighs on a ~70 us kernel): full credit from
            # 0.55, still four times the naive version's speedup.
            threshold=0.55, floor=0.4, naive=naive_layer_norm_fwd),
    ),
    Exercise(
        id="layer_norm_bwd", notebook=NOTEBOOK, entry="layer_norm_bwd",
        signature="layer_norm_bwd(dy, x, weight, mean, rstd) -> (dx, dweight, dbias)",
        correctness_points=7, performance_points=3, cases=_bwd_cases, reference=bwd_reference,
        out_dtypes=lambda a: (a[1].dtype, a[2].dtype, a[2].dtype), tolerances=GRAD_TOLERANCES,
        # Two launches: dx and per-program partial sums of dweight/dbias, then a reduction of the partials.
        kind=TRITON, rules=triton_rules(WHY, max_launches=2),
        deterministic=("notebook 05 asks for a deterministic backward: atomics add the programs' shares of "
                       "dweight and dbias in the order they finish, so the bits change from run to run; write "
                       "per-program partial sums and reduce them in a second kernel"),
        performance=Performance(
            inputs=_bwd_perf_inputs, baseline=eager_layer_norm_bwd,
            baseline_name="aten.native_layer_norm_backward (eager)", nbytes=_bwd_bytes,
            # Calibrated (results/h100-2026-11-23 and results/h200-2026-11-23, calibration.json; tests/test_results.py
            # holds the 15% rule and the floor): the solution ran at 1.07-1.11x eager on an H100
            # and 0.92x on an H200: full credit from 0.75; the naive autograd-through-primitives version
            # measured 0.11x. kernels_ref reached 1.32x (the bench). Repeated gradings on an H200 read 0.83-0.94x
            # (results/h200-2026-11-2{7,8}/repeat-*): the slowest clears 0.7 by 15%, so full credit from 0.7.
            threshold=0.7, floor=0.4, naive=naive_layer_norm_bwd),
    ),
    Exercise(
        id="layer_norm_gelu", notebook=NOTEBOOK, entry="layer_norm_gelu",
        signature="layer_norm_gelu(x, weight, bias, eps) -> gelu_tanh(layer_norm(x))",
        correctness_points=7, performance_points=3, cases=_gelu_cases, reference=gelu_reference,
        kind=TRITON, rules=triton_rules(WHY_GELU),
        performance=Performance(
            inputs=_fwd_perf_inputs, baseline=eager_layer_norm_gelu,
            baseline_name="F.gelu(F.layer_norm(x)) (eager, 2 kernels)", nbytes=_gelu_bytes,
            naive=naive_layer_norm_gelu,
            # Calibrated (results/h100-2026-11-23 and results/h200-2026-11-23, calibration.json; tests/test_results.py
            # holds the 15% rule and the floor): the solution's single pass ran at 1.32-1.35x the
            # two eager kernels on an H100 and at 1.15-1.33x on an H200 (the lower when the notebook was
            # executed before grading; first principles had promised ~2.6x from bytes alone: the
            # one-row-per-program kernel does not stream at copy bandwidth), so full credit from 0.95;
            # the naive chain measured 0.08x.
            threshold=0.95, floor=0.5),
    ),
]
