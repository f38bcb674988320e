# An honest benchmark (notebook 00) written the careful way: warm-up, garbage collection paused while timing
# (as timeit does: gc.collect, gc.disable, then gc.enable if it was on), the median of many runs. gc's
# switches reach no object: full marks.
import gc
import statistics
import time

import torch


def benchmark(fn, warmup=5, reps=25):
    for _ in range(warmup):
        fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        times = []
        for _ in range(reps):
            start = time.perf_counter()
            fn()
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            times.append((time.perf_counter() - start) * 1e3)
    finally:
        if was_enabled:
            gc.enable()
    return statistics.median(times)
