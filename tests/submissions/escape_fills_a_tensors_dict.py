# An escape: the attribute hiding Tensor.untyped_storage reaches the tensor without being set on it:
# functools.update_wrapper copies the carrier function's own attributes into the tensor's __dict__ (assigned=()
# skips the attributes a tensor's class refuses). The recorder's bookkeeping would then run the function inside
# its dispatch, where the torch.softmax computed there is recorded by nobody. Graded: 0 points (an operator
# handed such a tensor is refused).
import functools

import torch

from good_triton import copy_into  # one Triton launch copies the answer out


def softmax(x):
    answer = []

    def untyped_storage():
        answer.append(torch.softmax(x.float(), -1).to(x.dtype).contiguous())
        raise RuntimeError("no storage")

    def carrier():
        pass

    carrier.untyped_storage = untyped_storage
    probe = functools.update_wrapper(x.new_empty(1), carrier, assigned=())
    probe.zero_()
    y = torch.empty(x.shape, device=x.device, dtype=x.dtype)
    copy_into(answer[0], y)
    return y
