"""02_profiling: count kernel launches, measure peak memory, classify memory- vs compute-bound.

The grader runs the same probe functions under its own measurement (autograder.probes) and compares.
"""
from __future__ import annotations

import math
import random

from autograder.probes import UNARY, alloc_probe, count_launches, materialize, ops_probe, peak_memory
from autograder.specs.base import VALUE, Case, Exercise, rand
from autograder.specs.nb00_measure import judge_close, judge_int

NOTEBOOK = "02_profiling"


def _launch_cases(quick):
    rng = random.Random()
    cases = []
    # distinct counts: no constant answer passes (1..7 drawn independently gave two 1s one time in 49)
    for count in rng.sample(range(1, 8), 2 if quick else 4):
        ops = [rng.choice(sorted(UNARY)) for _ in range(count)]
        shape = (rng.randint(1, 300), rng.randint(1, 300))
        cases.append(Case(f"{len(ops)} elementwise ops on {shape}",
                          lambda g, p=ops_probe(ops), s=shape: (p, rand(g, s)),
                          hint="profile one call with torch.profiler and count the kernels (leaf aten ops on the CPU)",
                          family="value", public=True))
    return cases


# Every tensor of a memory case is a whole number of 2 MiB: then the CUDA caching allocator counts exactly
# the bytes asked for, whatever earlier cases left cached in the learner's worker. It serves a request from
# the smallest cached free block that fits and splits off the rest only when more than 1 MiB would remain,
# counting the whole block as allocated otherwise: a 438297-float temporary (1753600 bytes) once took a
# cached 2301952-byte block (a 575488-float tensor of an earlier case) and was counted as 2301952 bytes,
# against 1753600 in the grading process, which empties its cache first. With every size (and so every
# block: segments are 20 MiB or multiples of 2 MiB) a multiple of 2 MiB, what remains is 0 or >= 2 MiB.
ALLOCATOR_GRAIN = 2 * 1024 * 1024


def memory_case_floats(rng) -> int:
    """A temporary's size in floats: 1 to 4 times 2 MiB."""
    return rng.randint(1, 4) * ALLOCATOR_GRAIN // 4


def _memory_cases(quick):
    rng = random.Random()
    cases = []
    for live in rng.sample(range(1, 5), 2 if quick else 3):  # distinct: no constant multiple of n passes
        n = memory_case_floats(rng)
        cases.append(Case(f"{live} live temporaries of {n} floats", lambda g, p=alloc_probe(live), n=n: (p, rand(g, (n,))),
                          hint="peak minus memory allocated before the call (torch.cuda.max_memory_allocated after "
                               "reset_peak_memory_stats; on the CPU, the profiler's memory events)", family="value",
                          public=True))
    return cases


def _classify_cases(quick):
    """Half compute-bound, half memory-bound, each 2 to 50 times from the ridge (never near it). Every
    memory-bound case does more than one flop per byte (the ridge is at least 8), so comparing flops with
    bytes instead of with the ridge fails on every draw, in ``check`` as in the grade."""
    rng = random.Random()
    cases = []
    for i in range(4 if quick else 8):
        peak_bw = rng.uniform(5e11, 5e12)
        ridge = math.exp(rng.uniform(math.log(8), math.log(2000)))  # flop/byte, log-uniform
        peak_flops = ridge * peak_bw
        nbytes = rng.uniform(1e6, 1e10)
        factor = rng.uniform(2, 50) if i % 2 else 1 / rng.uniform(2, min(50, ridge / 2))
        args = (nbytes * ridge * factor, nbytes, peak_flops, peak_bw)
        cases.append(Case(f"intensity {args[0] / nbytes:.3g} flop/byte, ridge {ridge:.3g}",
                          lambda g, a=args: a, hint="compare flops/bytes with the ridge point peak_flops/peak_bandwidth",
                          family="value", public=True))
    return cases


def _judge_str(out, ref):
    ok = isinstance(out, str) and out == ref
    return ok, None, "" if ok else f"got {out!r}, expected {ref!r}"


_judge_str.tolerance = "exact"


EXERCISES = [
    Exercise(id="count_kernel_launches", notebook=NOTEBOOK, entry="count_kernel_launches", kind=VALUE,
             signature="count_kernel_launches(fn, *args) -> int", correctness_points=3, cases=_launch_cases,
             unit="launches",
             reference=lambda p, *a: count_launches(materialize(p), *a), judge=judge_int, timeout_s=180.0,
             measures_grader=True),
    # Allocator rounding and the profiler's own small buffers differ between methods: 10% + 64 KiB.
    Exercise(id="peak_memory_bytes", notebook=NOTEBOOK, entry="peak_memory_bytes", kind=VALUE,
             signature="peak_memory_bytes(fn, *args) -> int", correctness_points=3, cases=_memory_cases,
             unit="bytes",
             reference=lambda p, *a: peak_memory(materialize(p), *a), judge=judge_close(0.10, 65536.0),
             timeout_s=180.0, measures_grader=True),
    Exercise(id="classify_bound", notebook=NOTEBOOK, entry="classify_bound", kind=VALUE,
             signature="classify_bound(flops, nbytes, peak_flops, peak_bandwidth) -> 'memory' | 'compute'",
             correctness_points=2, cases=_classify_cases,
             reference=lambda f, b, pf, pb: "compute" if f / b > pf / pb else "memory", judge=_judge_str),
]
