# An escape with no function of the learner's below the recorder's function half: an object whose __del__ is a
# functools.partial (CPython calls it from C) rides in a plain tensor's own __dict__ (an attribute that hides
# no Tensor method); the tensor is a parameter's .grad, and setting .grad to None lets go of it inside the
# torch function Tensor.grad.__set__, where torch has taken the recorder's function mode off. The partial's
# Tensor.tolist hands the input's values to Python unrecorded; Python computes the softmax and a Triton copy
# kernel hands the answer over. Graded: 0 points.
import functools

import torch

from good_triton import check_softmax_input, copy_into  # one Triton launch copies the answer out
from softmax_in_python import rows_softmax


def softmax(x):
    check_softmax_input(x)
    values = []

    class Carrier:
        __del__ = functools.partial(values.extend, map(torch.Tensor.tolist, [x.float()]))

    w = torch.zeros(1, device=x.device, requires_grad=True)
    g = torch.zeros(1, device=x.device)
    g.keep = Carrier()
    w.grad = g
    del g
    w.grad = None  # the gradient dies inside the recorded setter
    rows = values[0] if values else x.float().tolist()
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    copy_into(torch.tensor(rows_softmax(rows), dtype=torch.float32, device=x.device).to(x.dtype), y)
    return y
