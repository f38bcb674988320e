# An escape: a backward of the learner's own making in graded code. Tensor.backward is a torch function, so the
# recorder's function half would be off while the autograd engine runs, and a tensor hook the engine calls there
# would take the values out of torch (tolist) unnoticed and compute the answer in Python. A Triton copy kernel
# hands it over. Graded: 0 points, the tolist named (the recorder runs the engine itself, with its modes on).
import math

import torch

from good_triton import copy_into  # one Triton launch copies the answer out


def softmax(x):
    if x.dim() != 2 or x.shape[1] > 65536:
        raise ValueError("2-D input with rows of at most 65536")
    answer = []

    def hook(g):
        out = []
        for row in x.tolist():
            top = max(row)
            e = [math.exp(v - top) for v in row]
            out.append([v / sum(e) for v in e])
        answer.append(out)
        return g

    with torch.enable_grad():
        a = x.new_zeros(1, dtype=torch.float32).requires_grad_()
        b = a.clone()
        b.register_hook(hook)
        b.backward(torch.ones_like(b))
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    copy_into(torch.tensor(answer[0], dtype=x.dtype, device=x.device), y)
    return y
