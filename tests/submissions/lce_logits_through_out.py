"""Class 6, a size rule dodged with out=: torch.mm writes the full [M, V] logits into a tensor that starts
empty (line 14), so no operator hands back a fresh tensor of that size; a Triton kernel then takes each
row's log-sum-exp and target logit from them (the kernel of liger_style_lce.py, beside it). The result
written through out= counts as what mm made."""
import torch

from liger_style_lce import _row_ce_kernel


def linear_cross_entropy(x, weight, targets):
    m, v = x.shape[0], weight.shape[0]
    logits = torch.empty(0, dtype=x.dtype, device=x.device)
    losses = torch.empty(m, dtype=torch.float32, device=x.device)
    torch.mm(x, weight.t(), out=logits)
    _row_ce_kernel[(m,)](logits, logits.stride(0), targets, losses, v, -100, BLOCK=128)
    return losses.sum() / m
