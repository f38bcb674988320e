"""Class 6, a size rule dodged with out=: torch.mm writes the full [M, V] logits into a tensor that starts
empty (line 14), so no operator hands back a fresh tensor of that size; a Triton kernel then takes each
row's log-sum-exp and target logit from them (the kernel of liger_style_lce.py, beside it). The result
written through out= counts as what mm made."""
import torch

from liger_style_lce import _row_ce_grad_kernel, _row_ce_kernel


def _loss(x, weight, targets):
    m, v = x.shape[0], weight.shape[0]
    logits = torch.empty(0, dtype=x.dtype, device=x.device)
    losses = torch.empty(m, dtype=torch.float32, device=x.device)
    torch.mm(x, weight.t(), out=logits)
    _row_ce_kernel[(m,)](logits, logits.stride(0), targets, losses, v, -100, BLOCK=1024)
    return losses.sum() / m


class _Loss(torch.autograd.Function):  # the backward does the same with the logits' gradient
    @staticmethod
    def forward(ctx, x, weight, targets):
        ctx.save_for_backward(x, weight, targets)
        return _loss(x, weight, targets)

    @staticmethod
    def backward(ctx, grad_loss):
        x, weight, targets = ctx.saved_tensors
        m, v = x.shape[0], weight.shape[0]
        logits = torch.empty(0, dtype=x.dtype, device=x.device)
        torch.mm(x, weight.t(), out=logits)
        _row_ce_grad_kernel[(m,)](logits, logits.stride(0), targets, v, grad_loss.item() / m, BLOCK=1024)
        return logits @ weight, logits.t() @ x, None


def linear_cross_entropy(x, weight, targets):
    return _Loss.apply(x, weight, targets)
