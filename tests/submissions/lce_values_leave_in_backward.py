# An escape for linear_cross_entropy: an honest forward (a Triton kernel streams each chunk's logits), and a
# backward that takes each chunk's logits out of torch (tolist) and computes softmax - onehot in Python. The
# grader's harness calls backward; torch would run the whole of it inside Tensor.backward's handler, with the
# recorder's function half off. Graded: 0 points, each tolist named (the harness runs the autograd engine
# with the recorder on, so the backward is seen as the forward is).
import course  # noqa: F401  (TRITON_INTERPRET before the kernels are defined)
import math
import torch
import triton
import triton.language as tl


@triton.jit
def _row_loss_kernel(logits_ptr, targets_ptr, loss_ptr, lse_ptr, V, stride_l, BLOCK: tl.constexpr):
    """loss[row] = logsumexp(logits[row]) - logits[row, target[row]], streaming the row in blocks; the
    row's log-sum-exp is kept for the backward."""
    row = tl.program_id(0)
    m = tl.full((BLOCK,), float("-inf"), tl.float32)
    s = tl.zeros((BLOCK,), tl.float32)
    for v0 in range(0, V, BLOCK):
        cols = v0 + tl.arange(0, BLOCK)
        x = tl.load(logits_ptr + row * stride_l + cols, mask=cols < V, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        s = s * tl.exp(m - m_safe) + tl.exp(x - m_safe)
        m = m_new
    m_row = tl.max(m, axis=0)
    lse = m_row + tl.log(tl.sum(s * tl.exp(m - m_row), axis=0))
    target = tl.load(targets_ptr + row)
    tl.store(loss_ptr + row, lse - tl.load(logits_ptr + row * stride_l + target).to(tl.float32))
    tl.store(lse_ptr + row, lse)


@triton.jit
def _row_grad_kernel(logits_ptr, targets_ptr, lse_ptr, V, stride_l, scale, BLOCK: tl.constexpr):
    """logits[row] <- (softmax(logits[row]) - onehot(target[row])) * scale, in place."""
    row = tl.program_id(0)
    lse = tl.load(lse_ptr + row)
    target = tl.load(targets_ptr + row)
    for v0 in range(0, V, BLOCK):
        cols = v0 + tl.arange(0, BLOCK)
        z = tl.load(logits_ptr + row * stride_l + cols, mask=cols < V, other=0.0).to(tl.float32)
        g = tl.exp(z - lse) - tl.where(cols == target, 1.0, 0.0)
        tl.store(logits_ptr + row * stride_l + cols, (g * scale).to(logits_ptr.dtype.element_ty), mask=cols < V)


def _chunk(m, h, v):
    return max(1, min(m, max(16, -(-m * h // v))))  # about the size of x, at least 16 rows: never [m, v] at once


class _LinearCrossEntropy(torch.autograd.Function):
    """Keeps one float32 log-sum-exp per row; the backward recomputes each chunk's logits."""

    @staticmethod
    def forward(ctx, x, weight, targets):
        m, h = x.shape
        v = weight.shape[0]
        losses = torch.empty(m, dtype=torch.float32, device=x.device)
        lse = torch.empty(m, dtype=torch.float32, device=x.device)
        for i in range(0, m, _chunk(m, h, v)):
            logits = x[i:i + _chunk(m, h, v)] @ weight.T
            _row_loss_kernel[(logits.shape[0],)](logits, targets[i:], losses[i:], lse[i:], v, logits.stride(0),
                                                 BLOCK=1024)
            del logits
        ctx.save_for_backward(x, weight, targets, lse)
        return losses.sum() / m

    @staticmethod
    def backward(ctx, grad_loss):
        x, weight, targets, lse = ctx.saved_tensors
        m, h = x.shape
        v = weight.shape[0]
        dx, dw = torch.empty_like(x), torch.zeros_like(weight)
        scale = grad_loss.item() / m
        c = _chunk(m, h, v)
        for i in range(0, m, c):
            logits = x[i:i + c] @ weight.T
            rows = logits.tolist()
            ls = lse[i:i + c].tolist()
            ts = targets[i:i + c].tolist()
            out = [[(math.exp(z - l) - (1.0 if j == t else 0.0)) * scale for j, z in enumerate(r)]
                   for r, l, t in zip(rows, ls, ts)]
            logits.copy_(torch.tensor(out, dtype=logits.dtype))
            torch.mm(logits, weight, out=dx[i:i + c])
            dw.addmm_(logits.T, x[i:i + c])
            del logits
        return dx, dw, None


def linear_cross_entropy(x, weight, targets):
    return _LinearCrossEntropy.apply(x, weight, targets)
