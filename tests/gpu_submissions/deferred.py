"""Work deferred to a later call: each call returns a fresh buffer and fills the previous call's one.

Every call does one softmax's work, so timing gains nothing; the buffer a call returns is still empty
when it is read. Must fail correctness (the empty buffer holds the grader's poison).
"""
import torch

from naive_triton import softmax_into

_PENDING = []


def softmax(x):
    if _PENDING:
        px, py = _PENDING.pop()
        softmax_into(px, py)
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    _PENDING.append((x, y))
    return y
