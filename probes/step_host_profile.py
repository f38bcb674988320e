"""Where the host's time goes in one training step of ``kernels_ref.gpt`` (the course's kernels or eager's).

    python -m probes.step_host_profile [--ops course|eager] [--size small|busy] [--top 30]

The course's training step at the busy size (L8 D1024 V50257 B8 S1024) launches ~440 kernels and needs about
as long to launch them as the GPU needs to run them: the step is bound by its host. This runs the step a few
times to warm up (compilation, autotuning), then once under cProfile with the GPU's queue free (a
synchronize before, none inside), and prints the functions with the most time of their own and the most
time in total, so that a launcher, a check or an autograd wrapper that costs too much is named. cProfile
slows Python calls by a roughly constant amount each: compare rows within one table, not its total with the
step's time (``host ms`` in ``python -m tools.capstone_gpu``'s table is that).
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

import course  # noqa: F401  (first: TRITON_INTERPRET without a GPU)
import torch

from kernels_ref import gpt

SIZES = {"small": (gpt.GPTConfig(2, 64, 2, 1001), 1, 64), "busy": (gpt.GPTConfig(8, 1024, 16, 50257), 8, 1024)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m probes.step_host_profile", description=__doc__.splitlines()[0])
    ap.add_argument("--ops", choices=("course", "eager"), default="course")
    ap.add_argument("--size", choices=tuple(SIZES), default="busy" if course.ON_GPU else "small")
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args(argv)
    cfg, B, S = SIZES[args.size]
    ops = gpt.COURSE if args.ops == "course" else gpt.EAGER
    dtype = torch.bfloat16 if course.ON_GPU else torch.float32
    params = gpt.make_gpt(cfg, dtype)
    tokens, targets = gpt.make_batch(cfg, B, S)

    def step():
        return gpt.training_step(params, tokens, targets, ops)

    for _ in range(3):
        step()
    course.synchronize()
    start = time.perf_counter()
    step()
    host_ms = (time.perf_counter() - start) * 1e3
    course.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    step()
    prof.disable()
    course.synchronize()
    print(f"{args.ops} step, {cfg.label()} B{B} S{S} {str(dtype)[6:]}: host {host_ms:.2f} ms to launch it "
          f"(unprofiled, the GPU's queue free at its start)")
    for key, title in (("tottime", "time of their own"), ("cumtime", "time in total")):
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats(key).print_stats(args.top)
        print(f"\n== the functions with the most {title} (cProfile, one step) ==")
        print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[:12000])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
