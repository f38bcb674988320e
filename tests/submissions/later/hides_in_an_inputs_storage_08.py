"""Right answers, memory hidden in an input: checkpointed_mlp keeps the hidden activation h between forward
and backward, never recomputing it, in the tail of x's own storage, grown for it by resize_ on a detached
alias of x (x's values and shape stay as they were). An input's storage is known to the meter, so the
operators that grew it and wrote into it were never counted."""
import torch

from good_08 import _gelu, _gelu_grad


class KeepsHiddenInX(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w1, b1, w2, b2):
        h = x @ w1.T + b1
        grown = x.detach()  # shares x's storage
        start = grown.numel()
        grown.resize_(start + h.numel())  # grows x's storage: room for h behind x's values
        kept = grown[start:].view(h.shape)
        kept.copy_(h)  # h is [M, H]: the activation checkpointing must not keep
        ctx.kept = kept
        ctx.save_for_backward(x, w1, w2)
        return _gelu(h) @ w2.T + b2

    @staticmethod
    def backward(ctx, dy):
        x, w1, w2 = ctx.saved_tensors
        h = ctx.kept
        dh = (dy @ w2) * _gelu_grad(h)
        return dh @ w1, dh.T @ x, dh.sum(0), dy.T @ _gelu(h), dy.sum(0)


def checkpointed_mlp(x, w1, b1, w2, b2):
    return KeepsHiddenInX.apply(x, w1, b1, w2, b2)
