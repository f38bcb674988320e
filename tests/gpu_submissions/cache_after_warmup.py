"""The slow softmax with a cache keyed by (pointer, shape, dtype) that only answers from the third call
on the same tensor: the correctness checks call each input twice, the timer calls it dozens of times.

Once warmed up it returns the remembered output without any work. The grader re-fills the timed
inputs in place and checks a timed call: the cached answer is wrong there. Must not pass.
"""
from naive_triton import softmax as slow_softmax

_SEEN = {}
_CACHE = {}


def softmax(x):
    key = (x.data_ptr(), tuple(x.shape), x.dtype)
    _SEEN[key] = _SEEN.get(key, 0) + 1
    if _SEEN[key] >= 3 and key in _CACHE:
        return _CACHE[key]
    y = slow_softmax(x)
    _CACHE[key] = y
    return y
