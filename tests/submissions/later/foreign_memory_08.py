"""Right answers, memory no operator allocates: checkpointed_mlp keeps the hidden activation h between
forward and backward in a tensor over a Python bytearray (torch.frombuffer: no operator allocates it, copy_
writes into it), never recomputing; int8_weight_linear dequantizes the whole weight into such a tensor
with copy_ before its (correct) Triton kernel. Both hold what the exercise forbids: the grader counts a
storage no operator allocated once an operator writes into it."""
import torch

from good_08 import _gelu, _gelu_grad, int8_weight_linear as linear_on


def _outside_torch(like: torch.Tensor) -> torch.Tensor:
    """A float32 tensor shaped like ``like`` on memory that no torch operator allocated."""
    return torch.frombuffer(bytearray(like.numel() * 4), dtype=torch.float32).view(like.shape)


class KeepsHiddenOutside(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w1, b1, w2, b2):
        h = x.float() @ w1.float().T + b1.float()
        ctx.kept = _outside_torch(h)
        ctx.kept.copy_(h)  # h is [M, H]: the activation checkpointing must not keep
        ctx.save_for_backward(x, w1, w2)
        return (_gelu(h) @ w2.float().T + b2.float()).to(x.dtype)

    @staticmethod
    def backward(ctx, dy):
        x, w1, w2 = ctx.saved_tensors
        h, dy = ctx.kept, dy.float()
        dh = (dy @ w2.float()) * _gelu_grad(h)
        return ((dh @ w1.float()).to(x.dtype), (dh.T @ x.float()).to(w1.dtype), dh.sum(0).to(w1.dtype),
                (dy.T @ _gelu(h)).to(w2.dtype), dy.sum(0).to(w2.dtype))


def checkpointed_mlp(x, w1, b1, w2, b2):
    return KeepsHiddenOutside.apply(x, w1, b1, w2, b2)


def int8_weight_linear(x, w_q, w_scale, bias):
    k = x.shape[1]
    n = w_q.shape[0]
    w = _outside_torch(w_q)
    w.copy_(w_q)  # the whole weight, 4 bytes an element, before the kernel runs
    return linear_on(x, w, w_scale, bias)  # good_08's kernel, reading the float weight
