"""softmax never returns; bias_gelu is correct (and must still be graded)."""
from good_triton import bias_gelu  # noqa: F401


def softmax(x):
    while True:
        pass
