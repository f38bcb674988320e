"""int8_weight_linear(x, w_q, w_scale, bias): ``y = x @ (w_q * w_scale[:, None]).T + bias`` with the weight
stored as int8 ``[N, K]`` and one float32 scale per output row, dequantized inside the kernel.

Why: at decode a model multiplies a handful of token rows (M = 1..16) by every weight matrix. The matmul
does 2*M*N*K FLOPs on N*K weight elements: at M = 16 that is ~16 FLOPs per bf16 weight byte, far left
of an H100's ridge point (~230 FLOP/byte), so the time is the weight's bytes over the memory bandwidth.
Storing the weight as int8 halves those bytes (N*K instead of 2*N*K), so a kernel that reads the int8
weight directly can run up to 2x faster than the bf16 matmul. Dequantizing first (w_q.to(bf16) *
scale: read N*K, write 2*N*K) and then calling the bf16 matmul (read 2*N*K) moves 5*N*K bytes and is
*slower* than keeping the weight in bf16: where the dequantization happens is the whole point.

Per-row (per output channel) scales make the dequantization cheap: y[m, n] = scale[n] * sum_k x[m, k] *
w_q[n, k] + bias[n], so the kernel multiplies int8 values converted to x's dtype (exact: |w_q| <= 127
fits bf16's 8-bit significand) on the tensor cores, accumulates in float32, and applies the scale once
per output in the epilogue, with the bias. Bytes: N*K (weight) + 4N (scales) + M*K*s + M*N*s + N*s.

Tiles: each program owns a BLOCK_M x BLOCK_N tile of y (BLOCK_M = 16, the smallest tl.dot tile, covers
decode; prefill shapes get more row tiles) and streams its BLOCK_N weight rows along K. At decode
N/BLOCK_N programs each read BLOCK_N*K weight bytes once; x (M*K*s, a few KiB) stays in L2.
"""
from __future__ import annotations

import course  # noqa: F401  (TRITON_INTERPRET before the kernels below are defined)
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from course.triton_compat import autotune, dot
from kernels_ref._launch import BoundLaunches, cdiv
from kernels_ref._validate import check_shape, check_tensor
from kernels_ref.matmul import SKINNY_TILES

_FLOATS = (torch.float32, torch.float16, torch.bfloat16)


def quantize_int8(weight: torch.Tensor):
    """(w_q int8 [N, K], w_scale float32 [N]): symmetric per-row absmax quantization, w ~ w_q * scale.

    scale = max|w[n]| / 127, w_q = round(w / scale): every row uses the full int8 range; the error per
    element is at most scale / 2 (a row of zeros gets scale 0 and zeros)."""
    w = weight.float()
    scale = w.abs().amax(dim=1) / 127.0
    w_q = torch.round(w / scale.clamp_min(torch.finfo(torch.float32).tiny)[:, None]).clamp_(-127, 127)
    return w_q.to(torch.int8), scale


def dequantize_int8(w_q: torch.Tensor, w_scale: torch.Tensor, dtype=torch.bfloat16) -> torch.Tensor:
    """The weight as ``dtype`` [N, K]: what the baseline multiplies by (materialized: 2*N*K bytes in bf16)."""
    return (w_q.float() * w_scale.float()[:, None]).to(dtype)


def int8_weight_linear_torch(x, w_q, w_scale, bias):
    """The definition (float64-capable): dequantize in x's dtype, then an ordinary linear layer."""
    return F.linear(x, dequantize_int8(w_q, w_scale, x.dtype), bias)


def _configs():
    """Decode tiles (BLOCK_M 16) for Hopper: enough programs to cover 132 SMs (N / BLOCK_N) and enough
    weight bytes in flight per SM (num_stages * BLOCK_N * BLOCK_K: 32-128 KiB) to keep HBM busy; larger
    row tiles for prefill-sized M. Shared memory per config ~ (num_stages - 1) * (BLOCK_N + 2*BLOCK_M) *
    BLOCK_K bytes: at most 160 KiB (32 x 512 at 6 stages), within Hopper's 227 KiB."""
    cfg = [triton.Config({"BLOCK_M": 16, "BLOCK_N": bn, "BLOCK_K": bk}, num_warps=w, num_stages=s)
           for bn, bk, w, s in SKINNY_TILES]
    cfg += [triton.Config({"BLOCK_M": bm, "BLOCK_N": 128, "BLOCK_K": 64}, num_warps=8, num_stages=4)
            for bm in (64, 128)]
    return cfg


_INTERPRET_CONFIG = triton.Config({"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 32}, num_warps=4)


@autotune(configs=_configs(), key=["M", "N", "K", "HAS_BIAS"], fallback=_INTERPRET_CONFIG)
@triton.heuristics({"EVEN_K": lambda args: args["K"] % args["BLOCK_K"] == 0})
@triton.jit
def _int8_linear_kernel(x_ptr, wq_ptr, scale_ptr, bias_ptr, y_ptr, M, N, K,
                        stride_xm, stride_xk, stride_wn, stride_wk, stride_ym,
                        HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                        BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr):
    pid_n = tl.program_id(0)  # consecutive programs take consecutive weight rows: one sweep over w_q
    pid_m = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    rows = (offs_m % M).to(tl.int64)   # clamped for the loads; the masked store drops the extra rows
    cols = (offs_n % N).to(tl.int64)
    x_ptrs = x_ptr + rows[:, None] * stride_xm + offs_k[None, :] * stride_xk
    w_ptrs = wq_ptr + cols[None, :] * stride_wn + offs_k[:, None] * stride_wk   # [BLOCK_K, BLOCK_N] of w_q.T

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            xt = tl.load(x_ptrs)
            wt = tl.load(w_ptrs, eviction_policy="evict_first")  # read once: keep L2 for x
        else:
            k_left = K - k * BLOCK_K
            xt = tl.load(x_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
            wt = tl.load(w_ptrs, mask=offs_k[:, None] < k_left, other=0, eviction_policy="evict_first")
        # int8 -> x's dtype is exact (|w_q| <= 127); the scale waits for the epilogue. Through float32:
        # the interpreter turns a direct int8 -> bfloat16 cast into garbage (compiled, both are cvts).
        acc = dot(xt, wt.to(tl.float32).to(xt.dtype), acc)
        x_ptrs += BLOCK_K * stride_xk
        w_ptrs += BLOCK_K * stride_wk

    # Epilogue: dequantize the sums (one multiply per output, not per weight), add the bias.
    n_ok = offs_n < N
    acc *= tl.load(scale_ptr + offs_n, mask=n_ok, other=0.0).to(tl.float32)[None, :]
    if HAS_BIAS:
        acc += tl.load(bias_ptr + offs_n, mask=n_ok, other=0.0).to(tl.float32)[None, :]
    y_ptrs = y_ptr + offs_m.to(tl.int64)[:, None] * stride_ym + offs_n[None, :]
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & n_ok[None, :])


# Launched directly after each specialization's first call (kernels_ref._launch): through the autotuner,
# the heuristics and the JIT a launch costs the CPU ~100 us, longer than the whole kernel at decode sizes.
_INT8_LINEAR = BoundLaunches(_int8_linear_kernel)


def int8_weight_linear(x, w_q, w_scale, bias=None):
    """x [M, K] (float32/16, bfloat16, any strides) times the int8 weight w_q [N, K] scaled per row by
    w_scale [N] (float), plus bias [N] (x's dtype) or None: y [M, N] in x's dtype, one launch."""
    check_tensor("x", x, ndim=2)
    check_tensor("w_q", w_q, ndim=2, dtypes=(torch.int8,), device=x.device)
    check_tensor("w_scale", w_scale, ndim=1, dtypes=_FLOATS, device=x.device)
    M, K = x.shape
    N = w_q.shape[0]
    if w_q.shape[1] != K:
        raise ValueError(f"w_q must be [N, {K}] ([out, in], like nn.Linear), got {tuple(w_q.shape)}")
    check_shape("w_scale", w_scale, (N,))
    if bias is not None:
        check_tensor("bias", bias, ndim=1, dtypes=(x.dtype,), device=x.device)
        check_shape("bias", bias, (N,))
    y = torch.empty((M, N), device=x.device, dtype=x.dtype)
    if M == 0 or N == 0:
        return y
    if K == 0:  # an empty sum: y is the bias
        return y.copy_(bias.expand(M, N) if bias is not None else torch.zeros_like(y))

    def grid(meta):
        return (cdiv(N, meta["BLOCK_N"]), cdiv(M, meta["BLOCK_M"]))

    _INT8_LINEAR[grid](x, w_q, w_scale, bias if bias is not None else w_scale, y, M, N, K,
                       x.stride(0), x.stride(1), w_q.stride(0), w_q.stride(1), y.stride(0),
                       HAS_BIAS=bias is not None)
    return y


# --------------------------------------------------------------------------------------------------
# Benchmark cases: decode shapes, against the bf16 matmul of the already dequantized weight
# --------------------------------------------------------------------------------------------------

def decode_bytes(M: int, N: int, K: int, act_size: int = 2) -> int:
    """Fewest bytes of one int8_weight_linear: the int8 weight, the scales, x, y and the bias."""
    return N * K + 4 * N + (M * K + M * N + N) * act_size


def decode_case(M: int, N: int, K: int, compiled=None, goal: float | None = 1.5):
    from course import DEVICE
    from kernels_ref.benchmarking import BenchCase, Goal

    def make():
        w = torch.randn(N, K, device=DEVICE) / K**0.5
        w_q, w_scale = quantize_int8(w)
        x = torch.randn(M, K, device=DEVICE, dtype=torch.bfloat16)
        bias = torch.randn(N, device=DEVICE, dtype=torch.bfloat16)
        # The baseline's bf16 weight is prepared here, outside every timed call.
        return x, w_q, w_scale, bias, dequantize_int8(w_q, w_scale)

    candidates = {
        "triton": lambda x, w_q, s, b, w: int8_weight_linear(x, w_q, s, b),
        "bf16_matmul": lambda x, w_q, s, b, w: F.linear(x, w, b),          # 2*N*K bytes of weight
        "dequant_then_matmul": lambda x, w_q, s, b, w: int8_weight_linear_torch(x, w_q, s, b),
    }
    if compiled is not None:
        candidates["compiled"] = lambda x, w_q, s, b, w: compiled(x, w_q, s, b)
    return BenchCase(
        op="int8_weight_linear", label=f"M{M} K{K} N{N} bf16 x int8", make_inputs=make, candidates=candidates,
        reference=lambda x, w_q, s, b, w: int8_weight_linear_torch(x.double(), w_q, s.double(), b.double()),
        nbytes=decode_bytes(M, N, K), sweep="M", sweep_value=M,
        # Half the weight bytes: up to 2x at decode; 1.5x leaves room for the tile's dot overhead.
        goals=[Goal.faster("triton", "bf16_matmul", goal)] if goal else [],
    )


def bench_cases(quick: bool = False):
    """Decode (M = 1, 16) of a 4096-wide model's MLP up-projection (K 4096, N 16384); the full suite
    sweeps M up to prefill-like 256, where the matmul stops being bandwidth-bound and the advantage
    fades, and adds LLaMA-70B's up-projection (K 8192, N 28672)."""
    compiled = torch.compile(int8_weight_linear_torch)
    if quick:
        return [decode_case(16, 16384, 4096, compiled)]
    cases = [decode_case(m, 16384, 4096, compiled, goal=1.5 if m <= 16 else None) for m in (1, 4, 16, 64, 256)]
    cases.append(decode_case(16, 28672, 8192, compiled))
    return cases
