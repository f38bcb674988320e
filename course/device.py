"""Course device, interpreter switch and problem-size switch.

Rules (one place, so notebooks, kernels, grader and tests agree):
- a CUDA GPU present            -> DEVICE = cuda, kernels compiled by Triton (TRITON_INTERPRET=0 unless
                                   set), SIZE = "large";
- no GPU                        -> DEVICE = cpu, TRITON_INTERPRET=1 (set here, before any kernel is
                                   defined), SIZE = "small" (the interpreter is slow: ~0.7 s for a
                                   512x1000 softmax).
- COURSE_SIZE=small|large overrides the size; COURSE_DEVICE=cpu forces the CPU path on a GPU machine.
"""
from __future__ import annotations

import os

import torch


def _want_gpu() -> bool:
    if os.environ.get("COURSE_DEVICE", "").lower() == "cpu":
        return False
    return torch.cuda.is_available()


ON_GPU: bool = _want_gpu()

if not ON_GPU:
    # Must happen before triton.jit runs on any kernel: a kernel defined earlier would be compiled for
    # a GPU that is not there. kernels_ref, autograder and the notebooks import course first.
    os.environ["TRITON_INTERPRET"] = "1"
else:
    # Said outright: a learner's os.environ.setdefault("TRITON_INTERPRET", "1") (Triton's way to run on a
    # CPU) then finds it set and leaves the GPU's kernels compiled (the grader refuses changes to its
    # environment, and a write that leaves it as it was changes nothing).
    os.environ.setdefault("TRITON_INTERPRET", "0")

INTERPRET: bool = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
DEVICE: torch.device = torch.device("cuda" if ON_GPU else "cpu")

_size = os.environ.get("COURSE_SIZE", "").lower() or ("large" if ON_GPU else "small")
if _size not in ("small", "large"):
    raise ValueError(f"COURSE_SIZE must be 'small' or 'large', not {_size!r}")
SIZE: str = _size


def pick(small, large):
    """The problem size for this machine: ``small`` on the CPU/interpreter, ``large`` on a GPU."""
    return large if SIZE == "large" else small


def synchronize() -> None:
    """Wait for all queued device work (a no-op on the CPU)."""
    if ON_GPU:
        torch.cuda.synchronize()


def describe() -> str:
    """One line naming the device and versions, for notebook headers and result files."""
    import triton

    if ON_GPU:
        where = torch.cuda.get_device_name()
    else:
        where = "CPU (Triton interpreter)" if INTERPRET else "CPU"
    return f"{where}; torch {torch.__version__}; triton {triton.__version__}; sizes: {SIZE}"


def setup_notebook(seed: int = 0) -> None:
    """A notebook's first cell, in one call: steady CPU timings, a fixed seed, and where it runs printed.

    On a CPU shared with other processes, torch's worker threads stall for milliseconds waiting for a core,
    which swamps the timings: one thread keeps CPU measurements steady (COURSE_THREADS to change)."""
    if not ON_GPU:
        torch.set_num_threads(int(os.environ.get("COURSE_THREADS", "1")))
    torch.manual_seed(seed)
    print(describe())
