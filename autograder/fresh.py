"""Fresh input values for every timed call, that the grading process can reproduce on its own side.

A timed call must get values the code under test cannot predict or have cached: ``jittered_args(bases,
seed)`` multiplies every floating-point tensor argument's base values, element by element, by ``1 + u / 4``
with ``u`` in [-1, 1) from a counter-based hash of (element index, seed). The hash uses only integer arithmetic below
2^63 and the scaling only exactly rounded float32 operations, so the same seed gives bit-identical
values on a GPU (in the worker, fast, outside the timed window) and on the CPU (in the grading process,
to compute the reference of a call it checks). No course operation is invariant to such a change
(a per-element factor changes every softmax, norm, matmul and attention output).

On a GPU the values are made by one Triton kernel (``_jitter_kernel``: read the base, write the result)
instead of the ~20 passes of int64 tensor work that ``unit_noise`` takes in PyTorch: the timing loop makes
fresh values for every argument of every timed call, and in PyTorch that was most of each repetition's
time (a 16384x4096 tensor: ~20 GB of memory traffic). Both paths compute the same integers and the same
float32 roundings, so their values are bit-identical (tests/test_fresh.py, on the CPU under the
interpreter and on a GPU).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

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
    if base.is_cuda:
        return jittered_by_kernel(base, seed)
    factor = unit_noise(base.numel(), seed, base.device).mul_(0.25).add_(1.0)
    return (base.to(torch.float32) * factor.view(base.shape)).to(base.dtype)


@triton.jit
def _jitter_kernel(base_ptr, out_ptr, n, seed, BLOCK: tl.constexpr):
    """out[i] = base[i] * (1 + u(i, seed) / 4): ``unit_noise`` and ``jittered`` in one pass, step by step
    (4 bytes moved per bfloat16 element instead of ~300)."""
    idx = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < n
    h = (idx ^ seed) & 0xFFFFFFFF
    for _ in tl.static_range(2):
        h = ((h ^ (h >> 16)) * 0x45D9F3B) & 0xFFFFFFFF
    h = h ^ (h >> 16)
    # h * 2^-31 - 1 is exact in float64 (32 significant bits): one rounding, to float32, as in unit_noise;
    # u / 4 is exact too, so a fused multiply-add rounds 1 + u / 4 exactly once as well.
    u = (h.to(tl.float64) * (2.0 / 4294967296.0) - 1.0).to(tl.float32)
    factor = u * 0.25 + 1.0
    x = tl.load(base_ptr + idx, mask=mask).to(tl.float32)
    tl.store(out_ptr + idx, (x * factor).to(out_ptr.dtype.element_ty), mask=mask)


def jittered_by_kernel(base: torch.Tensor, seed: int) -> torch.Tensor:
    """``jittered`` in one Triton launch (a contiguous result: the values are what matter)."""
    base = base.contiguous()
    out = torch.empty_like(base)
    n, block = base.numel(), 1024
    _jitter_kernel[(triton.cdiv(n, block),)](base, out, n, int(seed) & 0x7FFFFFFF, BLOCK=block)
    return out


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
