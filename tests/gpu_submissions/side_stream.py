"""The slow softmax launched on a side stream and returned without making the caller wait for it.

Its values are right once every stream is synchronized; a timer that records its end event on the
caller's stream alone would see almost nothing. Must be timed like naive_triton.softmax, and fail.
"""
import torch

from naive_triton import softmax as slow_softmax

_SIDE = []


def softmax(x):
    if not x.is_cuda:
        return slow_softmax(x)
    if not _SIDE:
        _SIDE.append(torch.cuda.Stream())
    side = _SIDE[0]
    side.wait_stream(torch.cuda.current_stream())  # the input is ready ...
    with torch.cuda.stream(side):
        y = slow_softmax(x)
    y.record_stream(torch.cuda.current_stream())
    return y  # ... but nobody waits for the result
