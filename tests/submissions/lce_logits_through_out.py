"""Class 6, a size rule dodged with out=: torch.mm writes the full [M, V] logits into a tensor that starts
empty (line 32), so no operator hands back a fresh tensor of that size; a Triton kernel then takes each
row's log-sum-exp and target logit from them. The result written through out= counts as what mm made."""
import course  # noqa: F401
import torch
import triton
import triton.language as tl


@triton.jit
def _row_loss(logits_ptr, targets_ptr, loss_ptr, V, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m = tl.full((BLOCK,), float("-inf"), tl.float32)
    s = tl.zeros((BLOCK,), tl.float32)
    for v0 in range(0, V, BLOCK):
        cols = v0 + tl.arange(0, BLOCK)
        z = tl.load(logits_ptr + row * stride + cols, mask=cols < V, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, z)
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        s = s * tl.exp(m - m_safe) + tl.exp(z - m_safe)
        m = m_new
    top = tl.max(m, axis=0)
    lse = top + tl.log(tl.sum(s * tl.exp(m - top), axis=0))
    target = tl.load(targets_ptr + row)
    tl.store(loss_ptr + row, lse - tl.load(logits_ptr + row * stride + target).to(tl.float32))


def linear_cross_entropy(x, weight, targets):
    m, v = x.shape[0], weight.shape[0]
    logits = torch.empty(0, dtype=x.dtype, device=x.device)
    losses = torch.empty(m, dtype=torch.float32, device=x.device)
    torch.mm(x, weight.t(), out=logits)
    _row_loss[(m,)](logits, targets, losses, v, logits.stride(0), BLOCK=128)
    return losses.sum() / m
