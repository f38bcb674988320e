"""Outputs of the wrong shape, 1 GiB each on a GPU, from every call: wrong, and once the exercise is graded
the grading process keeps none of that memory. The outputs come back onto the grading process's GPU (one
reply up to 8 GiB, every case's held until the cases are judged); kept in its allocator's cache they would be
memory the next worker on that GPU (the next learner's, in a batch) could not have.
"""
import torch

from naive_triton import softmax as slow_softmax


def softmax(x):
    slow_softmax(x)  # the exercise's launch, its answer thrown away
    return torch.zeros((1 << 28) if x.is_cuda else 1, dtype=torch.float32, device=x.device)
