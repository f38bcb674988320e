"""08_memory: the LM-head loss without materializing the [rows, vocab] logits.

Semantics (docs/CONTRACTS.md): ``linear_cross_entropy(x, weight, targets)`` with x ``[M, H]``, weight
``[V, H]`` (nn.Linear layout), targets ``[M]`` int64 in ``[0, V)``: the mean over rows of
``cross_entropy(x @ weight.T, targets)`` as a 0-d float32 tensor.

What is allowed: torch matmuls (mm / addmm) on chunks of rows, Triton kernels for the log-sum-exp and the
target logit, and torch sum/div/add to combine per-row or per-chunk losses. What is not: torch's softmax
family (log_softmax, cross_entropy, nll_loss, logsumexp), which is where eager materializes [M, V] tensors.

Never materializing the logits is judged too: the legality recorder notes the largest tensor any torch
operator hands back in a call, and ``max_intermediate`` bounds it (a full-logits ``x @ weight.T`` is a
violation that names the operator and line). Tensors a Triton kernel allocates inside itself are not
torch operators; the peak memory of the performance run on a GPU is not bounded yet.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from autograder.specs._cases import HINT_ODD, HINT_TINY, dtype_name
from autograder.specs.base import (TOLERANCES, TRITON, Case, Exercise, triton_rules, Performance, as64, float_dtypes,
                                   pick_shapes, rand)

NOTEBOOK = "08_memory"

# The loss is float32 whatever the inputs are, but its accuracy is the inputs': the chunk logits come out
# of a matmul in x's dtype (one rounding each, as in every fused LM-head loss), so a case is judged with
# the tolerance of its input dtype (base.TOLERANCES). float32 logits from a Triton dot may be TF32
# (~5e-4 per logit, averaged over rows): atol 1e-3 for float32 inputs. A wrong loss (no max subtraction,
# an off-by-one target, a sum instead of a mean, a chunk of rows left out) is off by far more.
LOSS_TOLERANCES = {torch.float32: (1e-3, 1e-4), torch.float16: TOLERANCES[torch.float16],
                   torch.bfloat16: TOLERANCES[torch.bfloat16]}
# Logits ~ +-100 (exp overflows float32 beyond 88): a TF32 logit is then off by ~0.05; relative 1e-3 of a
# loss near 100 covers it, and a kernel without the max subtraction returns inf/NaN.
LARGE_TOLERANCES = {torch.float32: (1e-3, 1e-3)}

HINT_BIG = "large logits: subtract the row max before exp (an online max/sum over vocabulary blocks)"
HINT_TARGET = "the target logit: load logits[row, target[row]] (targets are int64), every row"
HINT_MEAN = "the loss is the mean over rows, as a 0-d float32 tensor"


def _args(g, m, h, v, dtype, scale=1.0, edge_targets=False):
    x = rand(g, (m, h), dtype)
    weight = rand(g, (v, h), dtype, scale=scale * h ** -0.5)  # logits ~ N(0, scale^2)
    targets = torch.randint(0, v, (m,), generator=g)
    if edge_targets and m >= 2:
        targets[0], targets[1] = 0, v - 1
    return x, weight, targets.to(x.device)


def reference(x, weight, targets, chunk_rows: int = 1024):
    """float64 mean cross-entropy, chunked so the float64 logits of one chunk stay small at any vocabulary."""
    x64, w64 = as64(x), as64(weight)
    total = torch.zeros((), dtype=torch.float64, device=x.device)
    for i in range(0, x.shape[0], chunk_rows):
        logits = x64[i:i + chunk_rows] @ w64.T
        t = targets[i:i + chunk_rows]
        total += (torch.logsumexp(logits, -1) - logits.gather(1, t[:, None])[:, 0]).sum()
    return total / x.shape[0]


def _shapes(quick):
    # The last CPU shapes have more rows than hidden units (M > H), so the full [M, V] logits are larger
    # than any input and max_intermediate catches a submission that materializes them.
    return pick_shapes(quick, [(1, 16, 1), (5, 16, 97), (40, 8, 300)],
                       [(1, 16, 1), (5, 16, 97), (33, 64, 1000), (64, 128, 5003), (300, 16, 2000)],
                       [(1, 16, 1), (5, 16, 97), (33, 64, 1000), (1024, 512, 32000), (4096, 1024, 50257)])


def _hint(m, h, v, dtype):
    if min(m, v) < 4:
        return HINT_TINY + " (V = 1: every loss is exactly 0)"
    if dtype != torch.float32:
        return f"{dtype_name(dtype)}: load the logits with .to(tl.float32) and keep the running max/sum in float32"
    return HINT_ODD


def _cases(quick):
    shapes = _shapes(quick)
    cases = [Case(f"M={m} H={h} V={v} {dtype_name(d)}", lambda g, s=(m, h, v), d=d: _args(g, *s, d),
                  hint=_hint(m, h, v, d), tolerances={torch.float32: LOSS_TOLERANCES[d]},
                  public=(m, h, v) in shapes[:2])
             for m, h, v in shapes for d in float_dtypes()]
    m, h, v = shapes[-1]
    cases.append(Case(f"large logits M={m} H={h} V={v} float32",
                      lambda g: _args(g, m, h, v, torch.float32, scale=100.0), hint=HINT_BIG,
                      tolerances=LARGE_TOLERANCES, public=True))
    cases.append(Case(f"targets 0 and V-1 M={m} H={h} V={v} float32",
                      lambda g: _args(g, m, h, v, torch.float32, edge_targets=True), hint=HINT_TARGET,
                      tolerances={torch.float32: LOSS_TOLERANCES[torch.float32]}, public=True))
    return cases


def max_intermediate(args) -> int:
    """The most elements one torch operator may produce: half the full logits, or 16 rows of them, or a
    copy of the largest input, whichever is more. A chunk of logits the size of x passes; [M, V] does not
    (once M*V is larger than the inputs, which every shape with M > H ensures)."""
    x, weight, targets = args
    m, v = x.shape[0], weight.shape[0]
    return max(m * v // 2, 16 * v, x.numel(), weight.numel(), targets.numel())


def eager_linear_cross_entropy(x, weight, targets):
    return F.cross_entropy(x @ weight.T, targets)


def _perf_inputs(g, dev):
    m, h, v = 8192, 2048, 65536  # 8K tokens, a 2048-wide model, a 64K vocabulary: 1 GiB of bf16 logits
    x = rand(g, (m, h), torch.bfloat16, device=dev)
    w = rand(g, (v, h), torch.bfloat16, scale=h ** -0.5, device=dev)
    return x, w, torch.randint(0, v, (m,), generator=g).to(dev)


def _flops(args) -> int:
    (m, h), v = args[0].shape, args[1].shape[0]
    return 2 * m * v * h


def _bytes(args) -> int:
    x, w, t = args
    return x.numel() * x.element_size() + w.numel() * w.element_size() + t.numel() * t.element_size()


_NO_SOFTMAX = ("torch's softmax/cross-entropy family works on the full [rows, vocab] logits: compute the "
               "log-sum-exp and the target logit in your Triton kernel, chunk by chunk")
WHY = {op: _NO_SOFTMAX for op in ("_log_softmax", "log_softmax", "_softmax", "softmax", "nll_loss_forward",
                                  "nll_loss", "nll_loss_nd", "nll_loss2d_forward", "cross_entropy_loss",
                                  "logsumexp", "exp", "log", "amax", "max")}
WHY["gather"] = "load the target logit in your kernel (logits[row, target[row]])"

EXERCISES = [
    Exercise(
        id="linear_cross_entropy", notebook=NOTEBOOK, entry="linear_cross_entropy",
        signature="linear_cross_entropy(x, weight, targets) -> mean loss (0-d float32)",
        correctness_points=7, performance_points=3, cases=_cases, reference=reference,
        out_dtypes=lambda a: (torch.float32,),
        kind=TRITON, timeout_s=300.0,
        rules=triton_rules(WHY, max_launches=None, extra_ops={"mm", "addmm", "sum", "div", "add", "add_", "mean"},
                           max_intermediate=max_intermediate),
        performance=Performance(
            inputs=_perf_inputs, baseline=eager_linear_cross_entropy,
            baseline_name="F.cross_entropy(x @ weight.T, targets) (eager, full logits)",
            nbytes=_bytes, flops=_flops,
            # Awaits GPU calibration. First principles: both do the same 2*M*V*H matmul FLOPs (the bulk of
            # the time); eager then writes and re-reads [M, V] logits and log-probabilities (~3 GiB at this
            # size) while chunks of logits sized like x stay in L2, so a chunked kernel is no slower: 0.9x
            # leaves room for chunk-size effects on the matmul; tiny chunks (a row at a time) fall below 0.4x.
            threshold=0.9, floor=0.4),
    ),
]
