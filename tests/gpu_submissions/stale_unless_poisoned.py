"""Honest (and slow) while the grader poisons fresh memory; otherwise returns torch.empty unwritten,
hoping the memory still holds the answer that the baseline, or its own previous call, left there.

The grader turns poisoning off while timing (a NaN fill would be timed too): this submission then does
no work at all. Every output is poisoned after its timed call, and a timed call is checked. Must not pass.
"""
import torch
import torch.utils.deterministic

from naive_triton import softmax as slow_softmax


def softmax(x):
    if torch.utils.deterministic.fill_uninitialized_memory:
        return slow_softmax(x)
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)
