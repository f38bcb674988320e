"""An honest softmax whose output is a strided view: the left half of a buffer twice as wide (row stride
2N), written by its own kernel through that stride. Right values: it must keep every correctness point, on
the CPU as on a GPU, where the output crosses as a copy on the GPU (a raw frame).
"""
import torch

from naive_triton import softmax_into


def softmax(x):
    if x.dim() != 2 or x.shape[1] > 65536:  # the exercise's rule: longer rows are online_softmax's job
        raise ValueError(f"softmax needs a 2-D input with rows of at most 65536, got {tuple(x.shape)}")
    m, n = x.shape
    wide = torch.empty((m, 2 * n), dtype=x.dtype, device=x.device)
    return softmax_into(x, wide[:, :n])
