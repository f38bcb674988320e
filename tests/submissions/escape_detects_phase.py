"""Behaves when it thinks it is watched and takes a torch shortcut when it thinks it is only timed: it looks
for the operator recorder (a dispatch mode on the stack) and for poisoned memory."""
import torch
import triton
from torch.utils._python_dispatch import _get_current_dispatch_mode

from good_triton import _softmax_kernel


def _watched():
    return _get_current_dispatch_mode() is not None or torch.utils.deterministic.fill_uninitialized_memory


def softmax(x):
    if not _watched():
        return torch.softmax(x, -1)
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    _softmax_kernel[(m,)](x, y, x.stride(0), y.stride(0), n, BLOCK=triton.next_power_of_2(n))
    return y
