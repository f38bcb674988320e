# Honest: a launcher that checks what its kernel made before returning it (a left-in debugging assert, and a
# validating decorator that reads the function's signature once, at import). Each check answers a bit of the
# values, never a value; inspect.signature reaches no frame.
import inspect

import torch

from good_triton import softmax as _softmax


def takes_one_tensor(fn):
    assert list(inspect.signature(fn).parameters) == ["x"], "softmax(x)"
    return fn


@takes_one_tensor
def softmax(x):
    y = _softmax(x)
    assert not torch.isnan(y).any()
    return y
