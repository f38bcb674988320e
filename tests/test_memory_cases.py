"""02's peak_memory_bytes cases cannot flake on a GPU: every tensor of a case is a whole number of 2 MiB, so
the CUDA caching allocator counts exactly the bytes asked for, whatever earlier cases left in its cache.

Shown on a model of the allocator's large-block pool (PyTorch's CUDACachingAllocator: a request below 10 MiB
gets a 20 MiB segment, a larger one a segment rounded up to 2 MiB; a request takes the smallest cached free
block that fits, which is split only when more than 1 MiB would remain, else counted whole; freed blocks
merge with free neighbours). The old sizes (any float count from 200k to 1M) were counted 0.55 MB too high
in one grading of four on an H200, as in the model."""
from __future__ import annotations

import random

from autograder.specs import nb02_profiling

MiB = 1024 * 1024


class LargePool:
    def __init__(self):
        self.blocks = []  # [segment, offset, size, free]
        self.segments = 0
        self.allocated = self.peak = 0

    def malloc(self, nbytes: int):
        size = -(-nbytes // 512) * 512
        fits = [b for b in self.blocks if b[3] and b[2] >= size]
        if fits:
            block = min(fits, key=lambda b: (b[2], b[0], b[1]))
        else:
            seg = 20 * MiB if size < 10 * MiB else -(-size // (2 * MiB)) * 2 * MiB
            self.segments += 1
            block = [self.segments, 0, seg, True]
            self.blocks.append(block)
        if block[2] - size > MiB:  # split: the rest stays a free block of its own
            self.blocks.append([block[0], block[1] + size, block[2] - size, True])
            block[2] = size
        block[3] = False
        self.allocated += block[2]
        self.peak = max(self.peak, self.allocated)
        return block

    def free(self, block):
        block[3] = True
        self.allocated -= block[2]
        for other in sorted(self.blocks, key=lambda b: (b[0], b[1])):  # merge free neighbours
            for b in list(self.blocks):
                if b is not other and b[3] and other[3] and b[0] == other[0] and other[1] + other[2] == b[1]:
                    other[2] += b[2]
                    self.blocks.remove(b)


def _probe_peak(pool: LargePool, live: int, nbytes: int) -> int:
    """The alloc probe's allocations (autograder.probes: ``live`` temporaries, then their running sum) on
    ``pool``, with x allocated before: the peak above what was allocated before the call."""
    x = pool.malloc(nbytes)
    before, pool.peak = pool.allocated, pool.allocated
    temps = [pool.malloc(nbytes) for _ in range(live)]
    total = temps[0]
    for _ in temps[1:]:
        new = pool.malloc(nbytes)
        if total is not temps[0]:
            pool.free(total)
        total = new
    peak = pool.peak - before
    for t in temps:
        if t is not total:
            pool.free(t)
    if total not in temps:
        pool.free(total)
    pool.free(x)
    return peak


def _grading_runs(sizes_of, seeds: int) -> int:
    """How many of ``seeds`` gradings (one worker: every case's two calls in turn, as runner.run_cases) get
    a peak other than a fresh allocator's for some case."""
    flaky = 0
    for seed in range(seeds):
        rng = random.Random(seed)
        pool = LargePool()
        cases = [(live, sizes_of(rng)) for live in rng.sample(range(1, 5), 3)]
        for live, n in cases:
            for _call in range(2):
                if _probe_peak(pool, live, 4 * n) != _probe_peak(LargePool(), live, 4 * n):
                    flaky += 1
                    break
            else:
                continue
            break
    return flaky


def test_the_old_sizes_flake_in_the_model():
    assert _grading_runs(lambda rng: rng.randint(200_000, 1_000_000), 300) > 0


def test_memory_case_sizes_never_flake_over_many_seeds():
    assert _grading_runs(nb02_profiling.memory_case_floats, 2000) == 0
    for seed in range(200):
        n = nb02_profiling.memory_case_floats(random.Random(seed))
        assert (4 * n) % (2 * MiB) == 0 and 4 * n >= 2 * MiB


def test_the_cases_use_those_sizes():
    for _ in range(50):
        for case in nb02_profiling._memory_cases(quick=False):
            n = int(case.name.split(" of ")[1].split()[0])
            assert (4 * n) % (2 * MiB) == 0, case.name
