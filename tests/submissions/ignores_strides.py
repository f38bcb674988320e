"""A softmax that assumes contiguous rows (row step = n_cols): wrong on row-strided inputs."""
import torch
import triton

from good_triton import _softmax_kernel, check_softmax_input


def softmax(x):
    check_softmax_input(x)  # the exercise's rule (2-D, rows that fit one block)
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    _softmax_kernel[(m,)](x, y, n, n, n, BLOCK=triton.next_power_of_2(n))
    return y
