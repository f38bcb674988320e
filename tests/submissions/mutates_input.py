"""A correct softmax that also overwrites its input (the caller's tensor comes back changed)."""
from good_triton import softmax as _softmax


def softmax(x):
    y = _softmax(x)
    x[0].fill_(0.0)
    return y
