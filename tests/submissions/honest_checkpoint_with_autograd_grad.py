# Honest: the classic recompute-in-backward recipe for checkpointed_mlp: the forward (under no_grad) saves only the
# inputs, the backward recomputes with grad enabled and calls torch.autograd.grad, whose engine runs the learner's
# own GELU autograd.Function. Keeps every point (the engine runs with the recorder on, its backward seen).
import math

import torch

C = math.sqrt(2.0 / math.pi)


class _Gelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h):
        ctx.save_for_backward(h)
        return 0.5 * h * (1.0 + torch.tanh(C * (h + 0.044715 * h * h * h)))

    @staticmethod
    def backward(ctx, g):
        (h,) = ctx.saved_tensors
        t = torch.tanh(C * (h + 0.044715 * h * h * h))
        return g * (0.5 * (1.0 + t) + 0.5 * h * (1.0 - t * t) * C * (1.0 + 3 * 0.044715 * h * h))


def _mlp(x, w1, b1, w2, b2):
    return torch.addmm(b2, _Gelu.apply(torch.addmm(b1, x, w1.t())), w2.t())


class _CheckpointedMLP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w1, b1, w2, b2):
        ctx.save_for_backward(x, w1, b1, w2, b2)
        with torch.no_grad():
            return _mlp(x, w1, b1, w2, b2)

    @staticmethod
    def backward(ctx, dy):
        inputs = [t.detach().requires_grad_() for t in ctx.saved_tensors]
        with torch.enable_grad():
            y = _mlp(*inputs)
        return torch.autograd.grad(y, inputs, dy)


def checkpointed_mlp(x, w1, b1, w2, b2):
    return _CheckpointedMLP.apply(x, w1, b1, w2, b2)
