"""A softmax right on its first call and slightly wrong (rows scaled by 1.01) on every later one: wrong on the
second call, but not by returning the first call's answer."""
from good_triton import softmax as _softmax

_calls = []


def softmax(x):
    _calls.append(1)
    y = _softmax(x)
    return y if len(_calls) == 1 else y * 1.01
