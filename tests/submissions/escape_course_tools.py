"""Class 2, the course's own measuring tools as the answer: the grader measures with measure.timer and
measure.memory, so an entry point that hands the work to them measures nothing itself. However the tool is
reached (through functools.partial, inside torch's profiler with stacks, which replaces any Python profile
function while it records, or as the entry point itself), it runs during the graded call and is named
(line 15, and the entry point itself)."""
import functools

import torch
from measure import memory
from measure.timer import median_ms


def benchmark(fn):
    with torch.profiler.profile(with_stack=True):
        return functools.partial(median_ms, fn)()


peak_memory_bytes = memory.peak_bytes
