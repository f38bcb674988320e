"""The two roofs of this GPU, measured: device-to-device copy bandwidth and the bf16 matmul rate.

One measurement for the benchmark suite (kernels_ref.bench) and the autograder's fraction of peak; each
passes its own timer (``timer(fn) -> median ms``) so a ceiling is measured the way its kernels are timed.
"""
from __future__ import annotations

from typing import Callable

import torch

COPY_BYTES = 1 << 30  # 1 GiB each way: far past any L2
MATMUL_N = 8192       # bf16 8192^3: large enough to reach the tensor cores' sustained rate


def measure_ceilings(timer: Callable[[Callable[[], object]], float], device="cuda") -> tuple[float, float]:
    """(copy GB/s counting bytes read + written, bf16 matmul TFLOP/s), random data (never zeros)."""
    src = torch.empty(COPY_BYTES, dtype=torch.uint8, device=device).random_(0, 255)
    dst = torch.empty_like(src)
    copy_gbps = 2 * COPY_BYTES / (timer(lambda: dst.copy_(src)) * 1e-3) / 1e9
    del src, dst
    n = MATMUL_N
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    matmul_tflops = 2 * n**3 / (timer(lambda: a @ b) * 1e-3) / 1e12
    del a, b
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return copy_gbps, matmul_tflops
