"""Right loss and gradients, wrong memory: linear_cross_entropy streams each chunk of logits through its
Triton kernels but keeps every chunk for the backward (all [M, V] logits held between forward and backward,
which the chunks were meant to avoid)."""
import torch

from good_05_08 import _chunk, _row_grad_kernel, _row_loss_kernel


class KeepsLogits(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, targets):
        m, h = x.shape
        v = weight.shape[0]
        losses = torch.empty(m, dtype=torch.float32, device=x.device)
        lse = torch.empty(m, dtype=torch.float32, device=x.device)
        c = _chunk(m, h, v)
        ctx.chunks = []
        for i in range(0, m, c):
            logits = x[i:i + c] @ weight.T
            _row_loss_kernel[(logits.shape[0],)](logits, targets[i:], losses[i:], lse[i:], v, logits.stride(0),
                                                 BLOCK=1024)
            ctx.chunks.append(logits)  # kept: no recomputation in backward, all the logits held
        ctx.save_for_backward(x, weight, targets, lse)
        return losses.sum() / m

    @staticmethod
    def backward(ctx, grad_loss):
        x, weight, targets, lse = ctx.saved_tensors
        m, h = x.shape
        v = weight.shape[0]
        dx, dw = torch.empty_like(x), torch.zeros_like(weight)
        c = _chunk(m, h, v)
        for n, i in enumerate(range(0, m, c)):
            logits = ctx.chunks[n]
            _row_grad_kernel[(logits.shape[0],)](logits, targets[i:], lse[i:], v, logits.stride(0),
                                                 grad_loss.item() / m, BLOCK=1024)
            torch.mm(logits, weight, out=dx[i:i + c])
            dw.addmm_(logits.T, x[i:i + c])
        return dx, dw, None


def linear_cross_entropy(x, weight, targets):
    return KeepsLogits.apply(x, weight, targets)
