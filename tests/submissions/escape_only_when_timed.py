"""A forbidden call in a branch only the timed workload takes (rows as long as the timed inputs' and more
of them than any checked case has): the checked cases run the honest kernel, the timing would run
torch.softmax (line 15). Deny by default holds at the timed shape too: one recorded call on the timed
inputs, after the timing (on a GPU; on the CPU nothing is timed, and the branch is a note)."""
import torch
import triton

from good_triton import _softmax_kernel, check_softmax_input


def softmax(x):
    check_softmax_input(x)
    m, n = x.shape
    if m * n >= 8 * 1024 * 1024:
        return torch.softmax(x, dim=-1)
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    _softmax_kernel[(m,)](x, y, x.stride(0), y.stride(0), n, BLOCK=triton.next_power_of_2(n))
    return y
