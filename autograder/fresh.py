"""Fresh input values for every timed call, that the grading process can reproduce on its own side.

A timed call must get values the code under test cannot predict or have cached: ``jittered_args(bases,
seed)`` multiplies every floating-point tensor argument's base values, element by element, by ``1 + u / 4``
with ``u`` in [-1, 1) from a counter-based hash of (element index, seed). The hash uses only integer arithmetic below
2^63 and the scaling only exactly rounded float32 operations, so the same seed gives bit-identical
values on a GPU (in the worker, fast, outside the timed window) and on the CPU (in the grading process,
to compute the reference of a call it checks). No course operation is invariant to such a change
(a per-element factor changes every softmax, norm, matmul and attention output).
"""
from __future__ import annotations

import torch

_MASK32 = 0xFFFFFFFF
_MIX = 0x45D9F3B  # the 32-bit "hash prospector" multiplier: products stay below 2^59 in int64


def unit_noise(n: int, seed: int, device) -> torch.Tensor:
    """``n`` float32 values in [-1, 1), a function of (index, seed) only, identical on every device."""
    h = torch.arange(n, dtype=torch.int64, device=device)
    h = torch.bitwise_xor(h, int(seed) & 0x7FFFFFFF) & _MASK32
    for _ in range(2):
        h = (torch.bitwise_xor(h, h >> 16) * _MIX) & _MASK32
    h = torch.bitwise_xor(h, h >> 16)
    return (h.to(torch.float64) * (2.0 / 2**32) - 1.0).to(torch.float32)


def jittered(base: torch.Tensor, seed: int) -> torch.Tensor:
    """New values from a base tensor: base * (1 + u / 4) computed in float32, cast back to base's dtype.
    Always from the same base, so the values never drift however many calls are made."""
    if not (isinstance(base, torch.Tensor) and base.is_floating_point() and base.numel()):
        return base
    factor = unit_noise(base.numel(), seed, base.device).mul_(0.25).add_(1.0)
    return (base.to(torch.float32) * factor.view(base.shape)).to(base.dtype)


def arg_seed(seed: int, index: int) -> int:
    """Each argument of a call gets its own stream of values."""
    return (seed * 31 + index) & 0x7FFFFFFF


def jittered_tree(base, seed: int):
    """``jittered`` for every tensor in ``base``; each item of a dict, list or tuple gets its own stream
    (``autograder.argtree``: a dict of weights gets fresh values like a top-level tensor)."""
    if isinstance(base, dict):
        return {k: jittered_tree(v, arg_seed(seed, j)) for j, (k, v) in enumerate(base.items())}
    if isinstance(base, (list, tuple)):
        return type(base)(jittered_tree(v, arg_seed(seed, j)) for j, v in enumerate(base))
    return jittered(base, seed)


def jittered_args(bases, seed: int) -> tuple:
    return tuple(jittered_tree(b, arg_seed(seed, i)) for i, b in enumerate(bases))
