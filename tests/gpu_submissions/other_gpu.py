"""The slow softmax computed on a second GPU of the host, its output left there: right values.

A worker waits for its own GPU alone before it answers (torch.cuda.synchronize), so work on another GPU
would run outside the timed window and on into the shipping of the outputs, on a GPU where another learner
may be timed. A worker sees only the GPU it is graded on: here there is no second one, and the call fails.
"""
import torch

from naive_triton import softmax as slow_softmax


def softmax(x):
    if not x.is_cuda:
        return slow_softmax(x)
    other = torch.device("cuda", torch.cuda.current_device() + 1)
    with torch.cuda.device(other):
        return slow_softmax(x.to(other))
