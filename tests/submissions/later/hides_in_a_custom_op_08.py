"""Right answers, memory hidden inside an operator of its own: checkpointed_mlp computes the hidden
activation h inside a torch.library.custom_op (PyTorch's documented custom-operator API) that keeps it for
the backward and returns nothing of it; the backward never recomputes h. The memory meter sits above the
recorder, which runs the operator's Python under itself: the operators inside were counted by nobody."""
import torch

from good_08 import _gelu, _gelu_grad


class _Kept:
    h = None


@torch.library.custom_op("course_attack08::hidden", mutates_args=())
def hidden(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor, b2: torch.Tensor) -> torch.Tensor:
    h = x @ w1.T + b1
    _Kept.h = h  # h is [M, H]: the activation checkpointing must not keep
    return _gelu(h) @ w2.T + b2


@hidden.register_fake
def _(x, w1, b1, w2, b2):
    return x.new_empty(x.shape[0], w2.shape[0])


class KeepsHiddenInAnOperator(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w1, b1, w2, b2):
        ctx.save_for_backward(x, w1, w2)
        return hidden(x, w1, b1, w2, b2)

    @staticmethod
    def backward(ctx, dy):
        x, w1, w2 = ctx.saved_tensors
        h, _Kept.h = _Kept.h, None
        dh = (dy @ w2) * _gelu_grad(h)
        return dh @ w1, dh.T @ x, dh.sum(0), dy.T @ _gelu(h), dy.sum(0)


def checkpointed_mlp(x, w1, b1, w2, b2):
    return KeepsHiddenInAnOperator.apply(x, w1, b1, w2, b2)
