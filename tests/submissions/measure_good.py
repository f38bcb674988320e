"""Correct answers for 00_measure and 02_profiling (CPU or GPU)."""
import math
import statistics
import time

import torch
from torch.profiler import ProfilerActivity, profile


def _sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def time_floor(flops, nbytes, peak_flops, peak_bandwidth):
    if flops < 0 or nbytes < 0 or peak_flops <= 0 or peak_bandwidth <= 0:
        raise ValueError("work must be non-negative and peaks positive")
    return max(flops / peak_flops, nbytes / peak_bandwidth)


def softmax_bytes(shape, dtype):
    return 2 * math.prod(shape) * torch.empty((), dtype=dtype).element_size()


def benchmark(fn):
    for _ in range(3):
        fn()
    times = []
    for _ in range(25):
        _sync()
        t0 = time.perf_counter()
        fn()
        _sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def count_kernel_launches(fn, *args):
    fn(*args)
    on_gpu = torch.cuda.is_available()
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    with profile(activities=acts) as prof:
        fn(*args)
        _sync()
    if on_gpu:
        return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
    # CPU kernels: leaf aten ops, except leaves that only allocate or re-view memory (no kernel runs).
    no_kernel = {"aten::empty", "aten::empty_like", "aten::empty_strided", "aten::resize_", "aten::as_strided",
                 "aten::view", "aten::_unsafe_view", "aten::alias", "aten::detach"}
    return sum(1 for e in prof.events()
               if e.name.startswith("aten::") and not e.cpu_children and e.name not in no_kernel)


def peak_memory_bytes(fn, *args):
    if torch.cuda.is_available():
        _sync()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        out = fn(*args)
        _sync()
        return torch.cuda.max_memory_allocated() - before
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        out = fn(*args)
        del out
    level = peak = 0
    for e in sorted(prof.events(), key=lambda e: e.time_range.start):
        # Each event's own (self) allocations minus frees; "[memory]" events are those outside any op.
        level += e.self_cpu_memory_usage
        peak = max(peak, level)
    return peak


def classify_bound(flops, nbytes, peak_flops, peak_bandwidth):
    return "compute" if flops / nbytes > peak_flops / peak_bandwidth else "memory"
