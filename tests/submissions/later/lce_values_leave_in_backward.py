# An escape for linear_cross_entropy: the honest forward of good_05_08 (a Triton kernel streams each chunk's
# logits), and a backward that takes each chunk's logits out of torch (tolist) and computes softmax - onehot in
# Python. The grader's harness calls backward; torch would run the whole of it inside Tensor.backward's
# handler, with the recorder's function half off. Graded: 0 points, each tolist named (the harness runs the
# autograd engine with the recorder on, so the backward is seen as the forward is).
import math

import torch

from good_05_08 import _LinearCrossEntropy as _Honest
from good_05_08 import _chunk


class _LinearCrossEntropy(_Honest):
    @staticmethod
    def backward(ctx, grad_loss):
        x, weight, targets, lse = ctx.saved_tensors
        m, h = x.shape
        dx, dw = torch.empty_like(x), torch.zeros_like(weight)
        scale = grad_loss.item() / m
        c = _chunk(m, h, weight.shape[0])
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
        return dx, dw, None


def linear_cross_entropy(x, weight, targets):
    return _LinearCrossEntropy.apply(x, weight, targets)
