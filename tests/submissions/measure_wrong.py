"""Plausible mistakes: a mean over outliers, the other branch of the max, a wrong byte count and label."""
import time

import torch


def time_floor(flops, nbytes, peak_flops, peak_bandwidth):
    return flops / peak_flops  # forgets the memory side


def softmax_bytes(shape, dtype):
    n = 1
    for s in shape:
        n *= s
    return n * torch.empty((), dtype=dtype).element_size()  # read only, no write


def benchmark(fn):
    fn()
    t0 = time.perf_counter()
    for _ in range(20):
        fn()
    return (time.perf_counter() - t0) * 1e3 / 20  # a mean: dragged by the rare slow calls


def count_kernel_launches(fn, *args):
    return 1


def peak_memory_bytes(fn, *args):
    return 0


def classify_bound(flops, nbytes, peak_flops, peak_bandwidth):
    return "compute" if flops > nbytes else "memory"  # ignores the machine's ridge point
