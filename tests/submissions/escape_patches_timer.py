"""Patches the clocks that could time it (CUDA events, perf_counter) and the grader's credit arithmetic,
then computes with torch (forbidden) so that only the patches could earn it anything."""
import time

import torch

import autograder.timing

torch.cuda.Event.elapsed_time = lambda self, end: 1e-3
time.perf_counter = lambda: 0.0
autograder.timing.performance_credit = lambda *a, **k: 1.0


def softmax(x):
    return torch.softmax(x, -1)
