"""Right answers, wrong memory: checkpointed_mlp keeps the hidden activation h between forward and
backward (4x the bytes of x when H = 4D); int8_weight_linear dequantizes the whole weight with torch
before its (correct) Triton kernel."""
import torch

from good_08 import _gelu, _gelu_grad, _int8_linear_kernel, triton


class KeepsHidden(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w1, b1, w2, b2):
        h = x @ w1.T + b1
        ctx.save_for_backward(x, w1, h, w2)  # h is [M, H]: the activation checkpointing must not keep
        return _gelu(h) @ w2.T + b2

    @staticmethod
    def backward(ctx, dy):
        x, w1, h, w2 = ctx.saved_tensors
        dh = (dy @ w2) * _gelu_grad(h)
        return dh @ w1, dh.T @ x, dh.sum(0), dy.T @ _gelu(h), dy.sum(0)


def checkpointed_mlp(x, w1, b1, w2, b2):
    return KeepsHidden.apply(x, w1, b1, w2, b2)


def int8_weight_linear(x, w_q, w_scale, bias):
    m, k = x.shape
    n = w_q.shape[0]
    w = w_q.to(torch.float32)  # the whole weight, 4 bytes an element, before the kernel runs
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    _int8_linear_kernel[(triton.cdiv(n, 32), triton.cdiv(m, 16))](
        x, w, w_scale, bias, y, m, n, k, x.stride(0), x.stride(1), w.stride(0), w.stride(1), y.stride(0),
        BM=16, BN=32, BK=32)
    return y
