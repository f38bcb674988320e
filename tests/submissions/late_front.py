"""The honest-looking front of the escapes that fill softmax's output after the call: one launch of a
one-store Triton kernel sets the call's flag (so nulling the kernel still changes the output), and the call
returns an empty output, left pending. Each escape's own replacement of something the worker runs while it
ships the output takes the pending call and writes the answer there."""
import torch
import triton
import triton.language as tl

from good_triton import check_softmax_input


@triton.jit
def _flag(f_ptr):
    tl.store(f_ptr, 1.0)


def set_flag(x):
    """softmax's input checked; a flag that one launch of ``_flag`` sets to 1."""
    check_softmax_input(x)
    flag = torch.zeros(1, device=x.device)
    _flag[(1,)](flag)
    return flag


class _Pending:
    call = None  # (input, output, flag) of the last call, until a replacement takes it


def deferred_softmax(x):
    """An empty output for ``x``, pending until a replacement takes it (``take_pending``)."""
    flag = set_flag(x)
    y = torch.empty_like(x)
    _Pending.call = (x, y, flag)
    return y


def take_pending(fits):
    """(input, output) of the pending call, no longer pending, once the kernel has set its flag and
    ``fits(output)`` holds; None otherwise."""
    call = _Pending.call
    if call is None or not fits(call[1]) or float(call[2][0]) != 1.0:
        return None
    _Pending.call = None
    return call[0], call[1]
