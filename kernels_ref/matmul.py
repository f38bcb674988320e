"""Tiled matmul and the fused ``linear_bias_gelu`` (GELU in the matmul's epilogue).

``matmul(a, b)`` = ``a @ b`` with a ``[M, K]``, b ``[K, N]``;
``linear_bias_gelu(x, weight, bias)`` = ``gelu_tanh(x @ weight.T + bias)`` with ``weight`` ``[N, K]``
(``nn.Linear`` layout) and ``x`` ``[..., K]``.

Cost of one ``[M, K] @ [K, N]``: ``2*M*N*K`` FLOPs; at least ``(M*K + K*N + M*N) * itemsize`` bytes.
At 8192^3 in bf16 that is 1.1 TFLOP against 0.4 GB: about 2700 FLOP/byte, far right of an H100's
ridge point (~700 TFLOP/s / ~3 TB/s ~ 230 FLOP/byte), so the kernel is compute-bound and everything
here serves the tensor cores:

- each program owns a ``BLOCK_M x BLOCK_N`` tile of C and walks K in ``BLOCK_K`` steps; a tile reads
  ``(BLOCK_M + BLOCK_N) * BLOCK_K`` elements per ``BLOCK_M * BLOCK_N * BLOCK_K`` multiply-adds, so
  128x256 tiles do ~85 FLOP per byte loaded from L2 (enough to keep wgmma fed);
- accumulation is float32 in registers whatever the input dtype; ``num_stages`` 3-4 software-pipelines
  the loads (cp.async on Hopper) behind the ``tl.dot`` of the previous step;
- programs are launched in *grouped* order: ``GROUP_M`` row-blocks share a band of B's columns, so
  tiles that run at the same time reuse the same A rows and B columns from L2 instead of DRAM;
- the epilogue (bias + GELU) runs on the fp32 accumulator in registers before the one store: fusing it
  costs no extra memory traffic, where eager PyTorch writes the matmul's output and reads it back twice
  (bias add, GELU): ``4*M*N*itemsize`` extra bytes.

Any M, N, K (odd ones too): rows and columns out of range are masked on load and store; the K tail is
masked only when K is not a multiple of ``BLOCK_K`` (the ``EVEN_K`` heuristic), so the hot loop of
aligned shapes carries no masks. On the GPU the tile shape is autotuned per (M, N, K, dtype); under the
interpreter one small fixed config runs (so tiny test shapes still exercise several tiles, the K tail
and the grouped ordering), with dots upcast to fp32 (``course.triton_compat.dot``).
"""
from __future__ import annotations

import math

import course  # noqa: F401  (first: sets TRITON_INTERPRET=1 without a GPU)
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from course.triton_compat import autotune, dot
from kernels_ref._triton_math import gelu_tanh

_SUPPORTED = (torch.float16, torch.bfloat16, torch.float32)


def _hopper_configs():
    """Tile shapes for Hopper (H100/H200: 228 KB shared memory per SM, wgmma on 128-row tiles).

    Shared memory per config: num_stages * (BLOCK_M + BLOCK_N) * BLOCK_K * 2 bytes (bf16);
    128x256x64 at 3 stages is 144 KB, 4 stages 192 KB: both fit. Two 4-warp warpgroups (num_warps 8)
    split a 128x256 fp32 accumulator (128 registers per thread). Smaller tiles are there for shapes
    where 128x256 leaves SMs idle (few tiles) and for the fp32 (tf32) path, which needs twice the bytes.
    """
    cfg = []
    for bm, bn, bk, warps, stages in [
        (128, 256, 64, 8, 3),
        (128, 256, 64, 8, 4),
        (256, 128, 64, 8, 3),
        (128, 128, 64, 8, 4),
        (128, 128, 64, 4, 4),
        (128, 128, 32, 4, 4),
        (128, 64, 64, 4, 4),
        (64, 128, 64, 4, 4),
        (64, 64, 64, 4, 3),
    ]:
        cfg.append(triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8},
                                 num_warps=warps, num_stages=stages))
    return cfg


# Under the interpreter: small tiles so that a 37x45x29 problem still spans several tiles in M and N,
# a K loop with a masked tail, and a GROUP_M smaller than the grid (the grouped ordering is exercised).
_INTERPRET_CONFIG = triton.Config({"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 16, "GROUP_M": 2},
                                  num_warps=4, num_stages=1)


@autotune(configs=_hopper_configs(), key=["M", "N", "K", "HAS_BIAS", "GELU"], fallback=_INTERPRET_CONFIG)
@triton.heuristics({"EVEN_K": lambda args: args["K"] % args["BLOCK_K"] == 0})
@triton.jit
def _matmul_kernel(
    a_ptr, b_ptr, c_ptr, bias_ptr,
    M, N, K,
    stride_am, stride_ak,
    stride_bk, stride_bn,
    stride_cm, stride_cn,
    HAS_BIAS: tl.constexpr, GELU: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr, EVEN_K: tl.constexpr,
):
    # --- grouped ordering: walk tiles column-band by column-band, GROUP_M rows of tiles at a time ---
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    tiles_per_group = GROUP_M * num_pid_n
    group = pid // tiles_per_group
    first_pid_m = group * GROUP_M
    group_rows = min(num_pid_m - first_pid_m, GROUP_M)  # the last group may be shorter
    pid_m = first_pid_m + (pid % tiles_per_group) % group_rows
    pid_n = (pid % tiles_per_group) // group_rows

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    # Rows/columns past the edge are clamped to a valid index (modulo) for the *loads*, so the hot loop
    # needs no M/N masks; their results land in rows/columns that the masked store drops.
    rows = (offs_m % M).to(tl.int64)
    cols = (offs_n % N).to(tl.int64)
    a_ptrs = a_ptr + rows[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + cols[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            k_left = K - k * BLOCK_K
            a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    # --- epilogue, on the fp32 accumulator while it is still in registers ---
    if HAS_BIAS:
        bias = tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0)
        acc += bias.to(tl.float32)[None, :]
    if GELU:
        acc = gelu_tanh(acc)

    c_ptrs = c_ptr + offs_m.to(tl.int64)[:, None] * stride_cm + offs_n[None, :] * stride_cn
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)


def _check_operand(name: str, t: torch.Tensor, dims: int) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() != dims:
        raise ValueError(f"{name} must be {dims}-D, got shape {tuple(t.shape)}")
    if t.dtype not in _SUPPORTED:
        raise TypeError(f"{name} has dtype {t.dtype}; supported: float16, bfloat16, float32")


def _launch(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None, gelu: bool) -> torch.Tensor:
    """C = epilogue(a @ b) for 2-D a [M, K], b [K, N] of any strides; C is a fresh contiguous [M, N]."""
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    if M == 0 or N == 0:
        return c
    if K == 0:  # an empty sum: the epilogue of zero
        acc = torch.zeros((M, N), device=a.device, dtype=torch.float32)
        if bias is not None:
            acc += bias.float()
        return (F.gelu(acc, approximate="tanh") if gelu else acc).to(a.dtype)

    def grid(meta):
        return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)

    _matmul_kernel[grid](
        a, b, c, bias if bias is not None else c,
        M, N, K,
        a.stride(0), a.stride(1),
        b.stride(0), b.stride(1),
        c.stride(0), c.stride(1),
        HAS_BIAS=bias is not None, GELU=gelu,
    )
    return c


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` for a ``[M, K]``, b ``[K, N]`` (same dtype and device, any strides), fp32 accumulation."""
    _check_operand("a", a, 2)
    _check_operand("b", b, 2)
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"inner dimensions differ: a is {tuple(a.shape)}, b is {tuple(b.shape)}")
    if a.dtype != b.dtype or a.device != b.device:
        raise ValueError(f"a and b must share dtype and device, got {a.dtype}/{a.device} and {b.dtype}/{b.device}")
    return _launch(a, b, None, gelu=False)


def linear_bias_gelu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``gelu_tanh(x @ weight.T + bias)``; x ``[..., K]``, weight ``[N, K]``, bias ``[N]``; one launch.

    ``weight.T`` is passed as a strided view (no copy): the kernel reads B tiles along K, which is
    weight's contiguous dimension.
    """
    if not isinstance(x, torch.Tensor) or x.dim() < 1:
        raise ValueError("x must be a tensor with at least one dimension [..., in_features]")
    _check_operand("weight", weight, 2)
    _check_operand("bias", bias, 1)
    N, K = weight.shape
    if x.shape[-1] != K:
        raise ValueError(f"x has {x.shape[-1]} features but weight is {tuple(weight.shape)} ([out, in])")
    if bias.shape[0] != N:
        raise ValueError(f"bias has {bias.shape[0]} entries, weight has {N} output features")
    if not (x.dtype == weight.dtype == bias.dtype):
        raise ValueError(f"x, weight and bias must share a dtype, got {x.dtype}, {weight.dtype}, {bias.dtype}")
    if x.dtype not in _SUPPORTED:
        raise TypeError(f"x has dtype {x.dtype}; supported: float16, bfloat16, float32")
    if not (x.device == weight.device == bias.device):
        raise ValueError("x, weight and bias must be on the same device")
    rows = math.prod(x.shape[:-1])
    x2 = x.reshape(rows, K)  # a view when it can be; strides are passed to the kernel either way
    y = _launch(x2, weight.t(), bias, gelu=True)
    return y.reshape(*x.shape[:-1], N)


# --------------------------------------------------------------------------------------------------
# References (the readable definitions) and benchmark cases
# --------------------------------------------------------------------------------------------------

def matmul_torch(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a @ b


def linear_bias_gelu_torch(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return F.gelu(F.linear(x, weight, bias), approximate="tanh")


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def matmul_case(n: int, dtype=torch.bfloat16, compiled=None, goals: bool = True):
    """One square ``n^3`` matmul case: triton vs cuBLAS (eager) and torch.compile (when given)."""
    from course import DEVICE
    from kernels_ref.benchmarking import BenchCase, Goal

    def make():
        return torch.randn(n, n, device=DEVICE, dtype=dtype), torch.randn(n, n, device=DEVICE, dtype=dtype)

    candidates = {"triton": matmul, "eager": torch.matmul}
    if compiled is not None:
        candidates["compiled"] = compiled
    return BenchCase(
        op="matmul", label=f"{n}x{n}x{n} {_dtype_name(dtype)}", make_inputs=make, candidates=candidates,
        reference=lambda a, b: a.double() @ b.double(),
        flops=2 * n**3, sweep="N", sweep_value=n,
        goals=[Goal.faster("triton", "eager", 0.95)] if goals else [],
    )


def linear_bias_gelu_cases(M: int, N: int, K: int, dtype=torch.bfloat16, compiled=None):
    """Two cases on one shape: the fused op checked against float64 and timed against eager (F.linear +
    F.gelu) and torch.compile; then the same kernel against cuBLAS doing the *bare* matmul, the goal's
    baseline. The bare matmul's output is not the fused op's, so that case has no reference check."""
    from course import DEVICE
    from kernels_ref.benchmarking import BenchCase, Goal

    def make():
        x = torch.randn(M, K, device=DEVICE, dtype=dtype)
        w = torch.randn(N, K, device=DEVICE, dtype=dtype) / K**0.5  # unit-scale pre-activations
        b = torch.randn(N, device=DEVICE, dtype=dtype)
        return x, w, b

    label = f"{M}x{N}x{K} {_dtype_name(dtype)}"
    flops = 2 * M * N * K
    candidates = {"triton": linear_bias_gelu, "eager": linear_bias_gelu_torch}
    if compiled is not None:
        candidates["compiled"] = compiled
    return [
        BenchCase(
            op="linear_bias_gelu", label=label, make_inputs=make, candidates=candidates,
            reference=lambda x, w, b: linear_bias_gelu_torch(x.double(), w.double(), b.double()),
            flops=flops, goals=[Goal.faster("triton", "eager")],
        ),
        BenchCase(
            op="linear_bias_gelu", label=f"{label} vs bare matmul", make_inputs=make,
            candidates={"triton": linear_bias_gelu, "cublas_matmul_only": lambda x, w, b: x @ w.t()},
            reference=None,  # different outputs by design; correctness is checked in the case above
            flops=flops, goals=[Goal.faster("triton", "cublas_matmul_only", 0.95)],
        ),
    ]


def bench_cases(quick: bool = False):
    """matmul at 8192^3 (plus a square sweep 1024..8192), linear_bias_gelu at transformer MLP shapes:
    (tokens, out, in) = 16384 x 4096 x 4096 (a 4096-wide model) and 16384 x 11008 x 4096 (LLaMA-7B's
    up-projection), all bf16."""
    compiled_matmul = torch.compile(matmul_torch)
    compiled_lbg = torch.compile(linear_bias_gelu_torch)
    cases = [matmul_case(n, compiled=compiled_matmul, goals=n == 8192)
             for n in ([8192] if quick else [1024, 2048, 4096, 8192])]
    for M, N, K in [(16384, 4096, 4096)] + ([] if quick else [(16384, 11008, 4096)]):
        cases += linear_bias_gelu_cases(M, N, K, compiled=compiled_lbg)
    return cases
