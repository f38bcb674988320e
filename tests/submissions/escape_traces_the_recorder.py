# An escape through a trace function rather than a profile one: a bdb.Bdb (the standard library's debugger
# base) whose trace_dispatch is the learner's method installs it (Bdb.set_trace calls sys.settrace, a name the
# audit would refuse in the learner's own source). Python calls it on every function call, including the
# calls inside the recorder's dispatch handler, where torch's modes are off: there its torch.softmax is
# recorded by nobody (a profile function, the recorder's watch, is silent while a trace function runs). A
# Triton copy kernel hands the answer over.
import bdb

import torch

from good_triton import copy_into  # one Triton launch copies the answer out


class _Tracer(bdb.Bdb):
    def __init__(self, x, answer):
        super().__init__()
        self.x, self.answer = x, answer

    def trace_dispatch(self, frame, event, arg):
        if event == "call" and not self.answer and "code _dispatch>" in repr(frame):
            self.answer.append(torch.softmax(self.x.float(), -1).to(self.x.dtype).contiguous())
        return None


def softmax(x):
    if x.dim() != 2 or x.shape[1] > 65536:
        raise ValueError("2-D input with rows of at most 65536")
    answer = []
    tracer = _Tracer(x, answer)
    tracer.set_trace()
    y = torch.empty(x.shape, device=x.device, dtype=x.dtype)  # an operator: the recorder's handler runs
    tracer.set_continue()
    copy_into(answer[0] if answer else x, y)
    return y
