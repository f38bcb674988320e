"""Every way out of a process: sys.exit, os._exit, a segfault, out of memory; vector_add is correct."""
import faulthandler
import os
import sys

import torch

from good_triton import vector_add  # noqa: F401


def softmax(x):
    sys.exit(3)


def online_softmax(x):
    os._exit(0)


def naive_softmax(x):
    faulthandler._sigsegv()  # a segmentation fault (SIGSEGV), as a bad memory access gives


def bias_gelu(x, bias):
    return torch.empty(1 << 50, dtype=torch.uint8)  # a petabyte
