"""A correct softmax that prints 30 MB on every call."""
import sys

from good_triton import softmax as _softmax

_LINE = "x" * 1023 + "\n"


def softmax(x):
    sys.stdout.write(_LINE * 30_000)
    return _softmax(x)
