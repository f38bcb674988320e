"""Honest (and slow) while the grader poisons fresh memory; otherwise returns torch.empty unwritten,
hoping the memory still holds the answer that its own previous call left there.

A checked call is made on poisoned memory (NaN in every float dtype: the allocator's free blocks filled on
a GPU, PyTorch's deterministic fill on the CPU), so an unwritten output that is all NaN says "checked".
The grader turns poisoning off while timing (a NaN fill would be timed too): this submission then does no
work at all. Every timed call gets fresh values and some are checked. Must not pass.
"""
import torch
import torch.utils.deterministic

from naive_triton import softmax as slow_softmax


def _poisoned(out):
    if not out.is_cuda and not torch.utils.deterministic.fill_uninitialized_memory:
        return False
    return out.numel() == 0 or bool(out.isnan().all())


def softmax(x):
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if _poisoned(out):
        return slow_softmax(x)
    return out
