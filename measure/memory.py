"""Peak memory of one call: the CUDA allocator's statistics on a GPU, the profiler's memory events on the CPU."""
from __future__ import annotations

import torch


def peak_bytes(fn, *args) -> int:
    """Peak bytes allocated during one call of ``fn(*args)`` above what was allocated before it."""
    on_gpu = any(isinstance(a, torch.Tensor) and a.is_cuda for a in args) or (not args and torch.cuda.is_available())
    if on_gpu:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()  # blocks cached from earlier calls must not hide this call's allocations
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        out = fn(*args)
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - before
        del out
        return int(peak)
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        out = fn(*args)
        del out
    level = peak = 0
    for e in sorted(prof.events(), key=lambda e: e.time_range.start):
        # Each event's own (self) allocations minus frees; "[memory]" events are those outside any op.
        level += e.self_cpu_memory_usage
        peak = max(peak, level)
    return int(peak)
