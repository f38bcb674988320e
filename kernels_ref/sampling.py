"""sample_top_p(logits, temperature, top_p, uniform): temperature, softmax and nucleus (top-p) sampling of
one token per row, in one launch, without sorting the vocabulary.

Why: a serving engine samples every sequence's next token from ``[B, V]`` logits with V ~ 128k. The usual
PyTorch path divides by the temperature, takes the softmax, **sorts** each row, takes a cumulative sum,
masks, renormalizes and draws: a dozen kernels, each reading and writing ``[B, V]`` tensors (the sort's
indices are int64: 8 bytes per token), several times the logits' own bytes. Only one number per row
decides the nucleus: the logit of its last member. This kernel finds it by bisection, so the logits are
read from memory once and the rest of the passes hit the L2 cache.

Semantics (docs/CONTRACTS.md, ``measure.reference.sample_top_p``): with ``p = softmax(logits / T)``, token i
is in the nucleus when the probability of the tokens whose logit is *strictly larger* than its own is
below ``top_p`` (ties are kept or dropped together); ``top_p >= 1`` keeps everything. The token returned
is the first, in vocabulary order, at which the running sum of the nucleus' probability exceeds
``uniform`` times the nucleus' mass.

One program per row:
1. one pass: the row's max logit and the softmax's sum (online, in float32);
2. bisection on the cutoff. The nucleus is ``{logit >= c}`` for one of the row's logits ``c``; the mass
   above a candidate threshold is a non-increasing step function of it, so ``c`` is found by bisection on
   the threshold's float32 bit pattern, made monotonic (negative floats' magnitude bits flipped): at most
   32 passes, exact, whatever the distribution (ties included: equal logits are equal keys);
3. one pass: the running sum over the nucleus in vocabulary order (``tl.cumsum`` per block and a carried
   total), the first index past ``uniform * mass``.
"""
from __future__ import annotations

import course  # noqa: F401  (TRITON_INTERPRET before the kernels below are defined)
import torch
import triton
import triton.language as tl

from course.device import INTERPRET
from kernels_ref._validate import check_tensor

_FLOATS = (torch.float32, torch.float16, torch.bfloat16)
NEG_INF_KEY = -2139095041  # the monotonic key of -inf (bits 0xFF800000 with the magnitude bits flipped)


@triton.jit
def _key(x):
    """A float32's bits as an int32 whose order is the floats' order (-0.0 taken as +0.0)."""
    bits = tl.where(x == 0.0, 0.0, x).to(tl.int32, bitcast=True)
    return bits ^ ((bits >> 31) & 0x7FFFFFFF)


@triton.jit
def _mass_above(row_ptr, V, m, inv_t, threshold, BLOCK: tl.constexpr):
    """Sum of exp((logit - m) / T) over the row's logits whose key is larger than ``threshold``."""
    offs = tl.arange(0, BLOCK)
    total = tl.zeros((), tl.float32)
    for start in range(0, V, BLOCK):
        mask = start + offs < V
        x = tl.load(row_ptr + start + offs, mask=mask, other=float("-inf")).to(tl.float32)
        kept = mask & (_key(x).to(tl.int64) > threshold)
        total += tl.sum(tl.where(kept, tl.exp((x - m) * inv_t), 0.0))
    return total


@triton.jit
def _top_p_kernel(logits_ptr, t_ptr, p_ptr, u_ptr, out_ptr, V, stride_row, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    row_ptr = logits_ptr + row.to(tl.int64) * stride_row
    inv_t = 1.0 / tl.load(t_ptr + row).to(tl.float32)
    top_p = tl.load(p_ptr + row).to(tl.float32)
    offs = tl.arange(0, BLOCK)

    # 1. max and sum, online: the sum is rescaled whenever the max grows (0 while every logit is -inf).
    m = tl.full((), float("-inf"), tl.float32)
    z = tl.zeros((), tl.float32)
    for start in range(0, V, BLOCK):
        x = tl.load(row_ptr + start + offs, mask=start + offs < V, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x))
        safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        z = z * tl.exp((m - safe) * inv_t) + tl.sum(tl.exp((x - safe) * inv_t))
        m = m_new

    # 2. the cutoff: keys in (lo, hi], mass_above(lo) >= top_p * z > mass_above(hi). lo starts below every
    # logit (its mass is z), hi at the max (mass 0). top_p >= 1 keeps every token: no search.
    lo = tl.full((), -2139095041 - 1, tl.int64)
    kept_mass = z
    hi = tl.where(top_p >= 1.0, lo + 1, _key(m).to(tl.int64))
    while hi - lo > 1:
        mid = lo + (hi - lo) // 2
        above = _mass_above(row_ptr, V, m, inv_t, mid, BLOCK)
        if above < top_p * z:
            hi = mid
        else:
            lo = mid
            kept_mass = above

    # 3. the first index, in vocabulary order, where the nucleus' running mass passes u * its mass. A token
    # past the end (rounding when u is within float32 of 1) falls back to the last kept one.
    target = tl.load(u_ptr + row).to(tl.float32) * kept_mass
    running = tl.zeros((), tl.float32)
    token = tl.full((), 2147483647, tl.int64)
    last = tl.full((), -1, tl.int64)
    for start in range(0, V, BLOCK):
        idx = start + offs
        x = tl.load(row_ptr + idx, mask=idx < V, other=float("-inf")).to(tl.float32)
        e = tl.where((idx < V) & (_key(x).to(tl.int64) > lo), tl.exp((x - m) * inv_t), 0.0)
        crossed = (running + tl.cumsum(e, 0) > target) & (e > 0.0)
        token = tl.minimum(token, tl.min(tl.where(crossed, idx, 2147483647)).to(tl.int64))
        last = tl.maximum(last, tl.max(tl.where(e > 0.0, idx, -1)).to(tl.int64))
        running += tl.sum(e)
    tl.store(out_ptr + row, tl.where(token == 2147483647, last, token))


def check_sampling_args(logits, temperature, top_p, uniform) -> None:
    check_tensor("logits", logits, ndim=2, dtypes=_FLOATS)
    B = logits.shape[0]
    for name, t in (("temperature", temperature), ("top_p", top_p), ("uniform", uniform)):
        check_tensor(name, t, ndim=1, dtypes=(torch.float32,), device=logits.device)
        if t.shape[0] != B:
            raise ValueError(f"{name} must have one value per row ([{B}]), got shape {tuple(t.shape)}")


def sample_top_p(logits, temperature, top_p, uniform, block: int | None = None) -> torch.Tensor:
    """tokens ``[B]`` int64 for logits ``[B, V]`` (float32/16, bfloat16; rows may be strided) and per-row
    float32 temperature (> 0), top_p (in (0, 1]; >= 1 keeps every token) and uniform (in [0, 1))."""
    check_sampling_args(logits, temperature, top_p, uniform)
    if logits.stride(1) != 1:
        logits = logits.contiguous()
    B, V = logits.shape
    out = torch.empty(B, dtype=torch.int64, device=logits.device)
    if B == 0:
        return out
    block = block or (256 if INTERPRET else 4096)
    _top_p_kernel[(B,)](logits, temperature, top_p, uniform, out, V, logits.stride(0), BLOCK=block,
                        **({} if INTERPRET else {"num_warps": 16}))
    return out


def sample_top_p_torch(logits, temperature, top_p, uniform) -> torch.Tensor:
    """The same tokens by the sort + cumsum path of eager PyTorch (what a serving stack without a fused
    sampler runs): softmax, sort each row, the cumulative mass before each sorted token, the cutoff logit
    (ties with it kept), then the running sum of the kept probabilities in vocabulary order and a search."""
    x = logits.float()
    p = torch.softmax(x / temperature[:, None], dim=-1)
    sorted_x, order = torch.sort(x, dim=-1, descending=True)
    sorted_p = p.gather(1, order)
    before = sorted_p.cumsum(-1) - sorted_p
    n_keep = (before < top_p[:, None]).sum(-1, keepdim=True).clamp_min(1)
    cutoff = torch.where(top_p[:, None] >= 1, torch.full_like(n_keep, x.shape[1]), n_keep)
    cut_logit = sorted_x.gather(1, cutoff - 1)
    kept = torch.where((x >= cut_logit) & (p > 0), p, 0.0)
    cdf = kept.cumsum(-1)
    token = torch.searchsorted(cdf, uniform[:, None] * cdf[:, -1:], right=True)[:, 0]
    return torch.minimum(token, (cdf < cdf[:, -1:]).sum(-1))


# --------------------------------------------------------------------------------------------------
# Benchmark cases: a batch of rows of a 128k vocabulary
# --------------------------------------------------------------------------------------------------

def sampling_bytes(B: int, V: int, itemsize: int) -> int:
    """Fewest bytes: the logits once, the three per-row numbers and the tokens."""
    return B * V * itemsize + B * (3 * 4 + 8)


def sampling_case(B: int, V: int = 128256, dtype=torch.float32, goal: float | None = 1.0):
    from course import DEVICE
    from kernels_ref.benchmarking import BenchCase, Goal
    from measure import reference

    def make():
        logits = (3.0 * torch.randn(B, V, device=DEVICE)).to(dtype)
        temperature = torch.empty(B, device=DEVICE).uniform_(0.6, 1.2)
        top_p = torch.empty(B, device=DEVICE).uniform_(0.5, 0.95)
        # where float32 rounding cannot decide (the grader's rule): the exact check then holds every time
        top_p, uniform = reference.decisive_top_p_uniform(logits, temperature, top_p, torch.rand(B, device=DEVICE))
        return logits, temperature, top_p, uniform

    return BenchCase(
        op="sample_top_p", label=f"B{B} V{V} {str(dtype)[6:]}", make_inputs=make,
        candidates={"triton": sample_top_p, "eager_sort": sample_top_p_torch},
        reference=reference.sample_top_p, nbytes=sampling_bytes(B, V, torch.tensor([], dtype=dtype).element_size()),
        tolerances={torch.int64: (0.0, 0.0)}, sweep="B", sweep_value=B,
        goals=[Goal.faster("triton", "eager_sort", goal)] if goal else [])


def bench_cases(quick: bool = False):
    """Serving batches (B 1..128) of Llama 3's vocabulary (128256), float32 logits as samplers take them."""
    if quick:
        return [sampling_case(64)]
    return [sampling_case(b) for b in (1, 8, 64, 128)] + [sampling_case(64, dtype=torch.bfloat16)]
