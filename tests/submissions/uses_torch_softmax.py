"""Calls the operator being taught (torch.softmax) instead of writing the kernel."""
import torch
import torch.nn.functional as F

from good_triton import check_softmax_input


def softmax(x):
    check_softmax_input(x)  # the exercise's rule (2-D, rows that fit one block)
    return torch.softmax(x, dim=-1)


def bias_gelu(x, bias):
    return F.gelu(x + bias, approximate="tanh")


def naive_softmax(x):
    return F.softmax(x, dim=-1)
