# An escape: the learner's object is a tensor's memory, not an attribute: a bytearray subclass whose __del__ is a
# functools.partial (called from C), handed to torch.frombuffer. set_() frees the storage, and with it the
# buffer, inside the recorded operator, where torch's modes are off. Graded: 0 points: set_ lets go of the old
# storage only under the recorder, so the partial's torch.softmax is recorded, named at the set_ line.
import functools

import torch

from good_triton import copy_into  # one Triton launch copies the answer out


def softmax(x):
    if x.dim() != 2 or x.shape[1] > 65536:
        raise ValueError("2-D input with rows of at most 65536")
    results = []

    class Buffer(bytearray):
        __del__ = functools.partial(results.extend, map(torch.softmax, [x.float()], [-1]))

    t = torch.frombuffer(Buffer(8), dtype=torch.uint8)
    t.set_()  # the storage (and with it the buffer) is freed inside the recorded set_
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    copy_into((results[0] if results else x).to(x.dtype), y)
    return y
