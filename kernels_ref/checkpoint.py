"""checkpointed_mlp(x, w1, b1, w2, b2): the MLP ``gelu_tanh(x @ w1.T + b1) @ w2.T + b2`` that keeps no
activation between forward and backward; the backward recomputes the hidden layer.

Memory, for x ``[M, D]`` and a hidden width H (= 4D in a transformer), U = M*H*s bytes (s: the dtype's size):
- eager autograd saves what each backward formula needs: the hidden pre-activation h (read by GELU's
  backward) and a = gelu(h) (read by the second matmul's backward): 2U held from forward to backward
  (F.gelu); 01's naive MLP, with GELU written out of primitives, saves ~5U (every intermediate a
  primitive needs). x and the weights are held too, but the caller holds them anyway.
- this Function saves only its inputs: 0 bytes of its own between forward and backward. The backward
  rebuilds h and a (one extra [M, D] x [D, H] matmul: 2*M*D*H FLOPs on top of the 12*M*D*H of forward +
  backward's six matmuls, 1/6 more matmul work, plus a GELU) and then needs about as much as eager's backward:
  h, a or dA = dy @ w2, and dh = dA * gelu'(h): ~3U at its peak, freed before the next layer's backward.
In a stack of L layers eager holds ~2U*L at the start of the backward; checkpointed, L*x (each layer's
input, the previous layer's output) plus one layer's ~3U: that difference is the point.
"""
from __future__ import annotations

import course  # noqa: F401
import torch
import torch.nn.functional as F

from kernels_ref._validate import check_same, check_shape, check_tensor


def mlp_torch(x, w1, b1, w2, b2):
    """The definition (float64-capable): eager autograd keeps h and gelu(h) for the backward."""
    return F.linear(F.gelu(F.linear(x, w1, b1), approximate="tanh"), w2, b2)


def _hidden(x, w1, b1):
    return torch.addmm(b1, x, w1.T)  # h = x @ w1.T + b1: [M, H]


def mlp_forward(x, w1, b1, w2, b2):
    """y; h and gelu(h) are freed as soon as the next step has read them."""
    a = F.gelu(_hidden(x, w1, b1), approximate="tanh")
    return torch.addmm(b2, a, w2.T)


def mlp_backward(dy, x, w1, b1, w2):
    """(dx, dw1, db1, dw2, db2) from the inputs alone: h and a recomputed, each freed after its last use."""
    h = _hidden(x, w1, b1)                                  # recompute: 2*M*D*H FLOPs, U bytes
    a = F.gelu(h, approximate="tanh")
    dw2, db2 = dy.T @ a, dy.sum(0)
    del a                                                   # peak so far: h, a
    dh = torch.ops.aten.gelu_backward(dy @ w2, h, approximate="tanh")  # dA * gelu'(h) in one kernel
    del h                                                   # peak: h, dA, dh
    return dh @ w1, dh.T @ x, dh.sum(0), dw2, db2


class CheckpointedMLPFunction(torch.autograd.Function):
    """Saves x and the weights (tensors the caller already holds), nothing it computed."""

    @staticmethod
    def forward(ctx, x, w1, b1, w2, b2):
        ctx.save_for_backward(x, w1, b1, w2)
        return mlp_forward(x, w1, b1, w2, b2)

    @staticmethod
    def backward(ctx, dy):
        x, w1, b1, w2 = ctx.saved_tensors
        return mlp_backward(dy.contiguous(), x, w1, b1, w2)


def checkpointed_mlp(x, w1, b1, w2, b2):
    """Differentiable MLP for x [M, D], w1 [H, D], b1 [H], w2 [D, H], b2 [D] that holds no activation
    between forward and backward."""
    check_tensor("x", x, ndim=2)
    for name, t, shape in (("w1", w1, (w1.shape[0], x.shape[1])), ("b1", b1, (w1.shape[0],)),
                           ("w2", w2, (x.shape[1], w1.shape[0])), ("b2", b2, (x.shape[1],))):
        check_tensor(name, t)
        check_same(name, t, "x", x)
        check_shape(name, t, shape)
    return CheckpointedMLPFunction.apply(x, w1, b1, w2, b2)


def forward_backward(mlp, layers: int = 1):
    """fn(x, w1, b1, w2, b2, dy) -> (y, dx, dw1, db1, dw2, db2): ``layers`` MLPs in a row sharing the
    weights (a stack of layers in miniature: each layer's input is the previous layer's output)."""
    def run(x, w1, b1, w2, b2, dy):
        leaves = [t.detach().requires_grad_() for t in (x, w1, b1, w2, b2)]
        y = leaves[0]
        for _ in range(layers):
            y = mlp(y, *leaves[1:])
        y.backward(dy)
        return (y.detach(), *(t.grad for t in leaves))
    return run


def mlp_inputs(M, D, H, dtype=torch.bfloat16, device=None):
    """Unit-scale activations: x ~ N(0, 1), weights ~ N(0, 1/fan_in), biases ~ N(0, 1), and dy ~ N(0, 1/M)
    (a mean loss's gradient), so the weight gradients, sums over the M rows, stay O(1) at any M."""
    from course import DEVICE

    dev = device or DEVICE

    def r(*shape, scale=1.0):
        return (torch.randn(*shape, device=dev) * scale).to(dtype)

    return r(M, D), r(H, D, scale=D**-0.5), r(H), r(D, H, scale=H**-0.5), r(D), r(M, D, scale=M**-0.5)


# Gradients pass through two matmuls, GELU and its derivative: 16-bit inputs round every intermediate, so
# the check allows a few more ulps than one rounding (autograder/specs/nb08_memory.py: MLP_TOLERANCES).
TOLERANCES = {torch.float32: (1e-4, 1e-3), torch.float16: (4e-3, 1e-2), torch.bfloat16: (3e-2, 4e-2)}


def mlp_cases(M: int, D: int, H: int, stacks=(8,), dtype=torch.bfloat16):
    """One layer's forward + backward timed and checked against float64 (what recomputation costs), and the
    peak memory of stacks of layers (what it saves)."""
    from kernels_ref.benchmarking import BenchCase, Goal

    def make():
        return mlp_inputs(M, D, H, dtype)

    reference = forward_backward(mlp_torch)

    def reference64(*args):
        return reference(*(t.double() for t in args))

    label = f"M{M} D{D} H{H} {str(dtype).replace('torch.', '')}"
    return [
        BenchCase(
            op="checkpointed_mlp", label=f"{label} fwd+bwd", make_inputs=make,
            candidates={"checkpointed": forward_backward(checkpointed_mlp), "eager": forward_backward(mlp_torch)},
            reference=reference64, flops=6 * 2 * M * D * H, tolerances=TOLERANCES,
            # One recomputed matmul of six (plus GELU): ~0.85x of eager's speed; 0.75x leaves the rest.
            goals=[Goal.faster("checkpointed", "eager", 0.75)],
        ),
    ] + [
        BenchCase(
            op="checkpointed_mlp", label=f"{label} {n} layers peak", make_inputs=make,
            candidates={"checkpointed": forward_backward(checkpointed_mlp, n), "eager": forward_backward(mlp_torch, n)},
            reference=None,  # the same functions as above, checked there
            flops=n * 6 * 2 * M * D * H, metric="peak_memory", sweep="layers", sweep_value=n,
            # Eager: ~2U per layer held (U = M*H*2 bytes) + one layer's backward; checkpointed: one layer's
            # ~3U + x per layer: at 8 layers of H = 4D, ~2.3 GiB against ~0.7 GiB for the shape below.
            goals=[Goal.faster("checkpointed", "eager", 2.0)] if n == 8 else [],
        )
        for n in stacks
    ]


def bench_cases(quick: bool = False):
    """16K tokens of a 1024-wide model (H = 4096), bf16: one layer timed, stacks of layers' peak memory."""
    return mlp_cases(16384, 1024, 4096, stacks=(8,) if quick else (4, 8, 16))
