"""01_naive_ops: MLP, stable softmax, LayerNorm and causal attention from tensor primitives."""
from __future__ import annotations

import torch

from autograder.specs._cases import dtype_name, family_of, row_cases
from autograder.specs.base import TORCH, Case, Exercise, pick_shapes, rand, torch_rules
from measure import reference

NOTEBOOK = "01_naive_ops"

# Chained matmuls in 16-bit round every intermediate (x@w1, gelu, @w2): errors add up over the chain,
# so these two exercises allow a few more ulps than a single rounding (TOLERANCES in base.py).
CHAIN_TOL = {torch.float16: (4e-3, 1e-2), torch.bfloat16: (3e-2, 4e-2)}


def _mlp_args(g, m, d, h, dtype):
    return (rand(g, (m, d), dtype), rand(g, (h, d), dtype, scale=d ** -0.5), rand(g, (h,), dtype),
            rand(g, (d, h), dtype, scale=h ** -0.5), rand(g, (d,), dtype))


def _mlp_cases(quick):
    shapes = pick_shapes(quick, [(1, 1, 1), (5, 24, 40)], [(1, 1, 1), (5, 24, 40), (17, 33, 65), (64, 128, 512)],
                         [(1, 1, 1), (5, 24, 40), (17, 33, 65), (512, 1024, 4096)])
    cases = []
    for m, d, h in shapes:
        for dtype in (torch.float32, torch.bfloat16):
            cases.append(Case(f"M={m} D={d} H={h} {dtype_name(dtype)}",
                              lambda g, s=(m, d, h), dt=dtype: _mlp_args(g, *s, dt),
                              family=family_of((m, d, h), dtype), public=True))
    return cases


def _ln_args(g, shape, dtype, offset=0.0):
    x = rand(g, shape, dtype)
    if offset:
        x = (x.float() + offset).to(dtype)  # mean far from zero: E[x^2] - E[x]^2 cancels catastrophically
    eps = float(torch.empty(()).uniform_(1e-6, 1e-5, generator=g))
    return x, rand(g, (shape[-1],), dtype), rand(g, (shape[-1],), dtype), eps


def _ln_cases(quick):
    shapes = pick_shapes(quick, [(1, 1), (3, 17)], [(1, 1), (3, 17), (37, 129), (64, 1000)],
                         [(1, 1), (3, 17), (37, 129), (4096, 1000)])
    cases = [Case(f"{s[0]}x{s[1]} {dtype_name(d)}", lambda g, s=s, d=d: _ln_args(g, s, d),
                  family=family_of(s, d), public=s in shapes[:2])
             for s in shapes for d in (torch.float32, torch.float16, torch.bfloat16)]
    last = shapes[-1]
    cases.append(Case(f"mean 300 {last[0]}x{last[1]} float32", lambda g: _ln_args(g, last, torch.float32, 300.0),
                      hint="rows with a large mean: compute the variance as mean((x - mean)^2), not E[x^2] - E[x]^2",
                      # At |x| ~ 300 the input's own float32 rounding (ulp 3e-5) puts any fp32 algorithm near
                      # 1e-4; the one-pass E[x^2] - E[x]^2 is off by ~5e-3. 1e-3 separates the two.
                      tolerances={torch.float32: (1e-3, 1e-3)}, family="mean-offset", public=True))
    return cases


def _attn_cases(quick):
    shapes = pick_shapes(quick, [(1, 1, 1, 8), (2, 3, 17, 16)], [(1, 1, 1, 8), (2, 3, 17, 16), (1, 2, 65, 64)],
                         [(1, 1, 1, 8), (2, 3, 17, 16), (1, 2, 65, 64), (4, 8, 1024, 64)])
    cases = []
    for shape in shapes:
        for dtype in (torch.float32, torch.bfloat16):
            for causal in (False, True):
                cases.append(Case(f"{'x'.join(map(str, shape))} {dtype_name(dtype)} causal={causal}",
                                  lambda g, s=shape, d=dtype, c=causal: (rand(g, s, d), rand(g, s, d), rand(g, s, d), c),
                                  hint=("causal: position i attends to keys j <= i (mask j > i with -inf "
                                        "before the softmax)") if causal else "",
                                  family="causal" if causal and dtype == torch.float32 else family_of(shape[2:], dtype),
                                  public=shape in shapes[:2]))
    return cases


NO_FUSED = {"_softmax": "write the softmax from exp, max, sum and div (the point of the exercise)",
            "gelu": "write GELU from tanh yourself (the notebook's rules: no F.gelu)",
            "native_layer_norm": "write LayerNorm from mean and variance yourself",
            "_scaled_dot_product_flash_attention_for_cpu": "scaled_dot_product_attention is the fused op; "
            "write q @ k^T, the mask, the softmax and @ v yourself",
            "_scaled_dot_product_flash_attention": "scaled_dot_product_attention is the fused op",
            "_scaled_dot_product_efficient_attention": "scaled_dot_product_attention is the fused op",
            "_scaled_dot_product_cudnn_attention": "scaled_dot_product_attention is the fused op"}
# naive_attention: "use your naive_softmax (no torch.softmax)", as the exercise says.
ATTENTION_WHY = {**NO_FUSED, "_softmax": "the exercise says to use your naive_softmax, not torch.softmax / F.softmax"}

EXERCISES = [
    Exercise(id="naive_mlp", notebook=NOTEBOOK, entry="naive_mlp", kind=TORCH, signature="naive_mlp(x, w1, b1, w2, b2)",
             correctness_points=2, cases=_mlp_cases, reference=reference.mlp, tolerances=CHAIN_TOL,
             rules=torch_rules(NO_FUSED)),
    Exercise(id="naive_softmax", notebook=NOTEBOOK, entry="naive_softmax", kind=TORCH, signature="naive_softmax(x)",
             correctness_points=2, reference=reference.softmax,
             cases=lambda quick: row_cases(pick_shapes(quick, [(1, 1), (3, 17)], [(1, 1), (3, 17), (37, 129), (64, 1000)],
                                                       [(1, 1), (3, 17), (37, 129), (4096, 1000)]),
                                           (torch.float32, torch.float16, torch.bfloat16), quick, strided=False),
             rules=torch_rules(NO_FUSED)),
    Exercise(id="naive_layer_norm", notebook=NOTEBOOK, entry="naive_layer_norm", kind=TORCH,
             signature="naive_layer_norm(x, weight, bias, eps)", correctness_points=2, cases=_ln_cases,
             reference=reference.layer_norm, rules=torch_rules(NO_FUSED),
             tolerances={torch.float16: (4e-3, 1e-2), torch.bfloat16: (3e-2, 4e-2)}),  # 16-bit intermediates
    Exercise(id="naive_attention", notebook=NOTEBOOK, entry="naive_attention", kind=TORCH,
             signature="naive_attention(q, k, v, causal)", correctness_points=3, cases=_attn_cases,
             reference=lambda q, k, v, causal: reference.attention(q, k, v, causal)[0], tolerances=CHAIN_TOL,
             rules=torch_rules(ATTENTION_WHY)),
]
