"""The two roofs of this machine, measured: copy bandwidth (bytes read + written) and the matmul rate.

One measurement for the benchmark suite, the grader's fraction of peak and the notebooks' rooflines. On a
GPU: a 1 GiB device-to-device copy and a bf16 8192^3 matmul. On the CPU: a 256 MiB copy (far larger than
any CPU cache, so the roof is DRAM's, not a cache's) and an fp32 1024^3 matmul. ``timer(fn) -> median
ms`` is the caller's, so a ceiling is measured the way its kernels are timed; ``peaks()`` measures once per
machine and versions and caches the numbers as JSON.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import torch

GPU_COPY_BYTES, GPU_MATMUL_N = 1 << 30, 8192  # far past any L2; the tensor cores' sustained rate
CPU_COPY_BYTES, CPU_MATMUL_N = 1 << 28, 1024  # far past any CPU cache; seconds, not minutes, on a laptop
COPY_BYTES, MATMUL_N = GPU_COPY_BYTES, GPU_MATMUL_N


def measure_ceilings(timer: Callable[[Callable[[], object]], float], device="cuda") -> tuple[float, float]:
    """(copy GB/s counting bytes read + written, matmul TFLOP/s), on random data (never zeros)."""
    on_gpu = torch.device(device).type == "cuda"
    nbytes, n = (GPU_COPY_BYTES, GPU_MATMUL_N) if on_gpu else (CPU_COPY_BYTES, CPU_MATMUL_N)
    src = torch.empty(nbytes, dtype=torch.uint8, device=device).random_(0, 255)
    dst = torch.empty_like(src)
    copy_gbps = 2 * nbytes / (timer(lambda: dst.copy_(src)) * 1e-3) / 1e9
    del src, dst
    dtype = torch.bfloat16 if on_gpu else torch.float32
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    matmul_tflops = 2 * n**3 / (timer(lambda: a @ b) * 1e-3) / 1e12
    del a, b
    if on_gpu:
        torch.cuda.empty_cache()
    return copy_gbps, matmul_tflops


def cache_path() -> Path:
    return Path.home() / ".cache" / "gpu-kernels-course" / "peaks.json"


def machine_key() -> str:
    import triton

    name = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    return f"{name}|torch {torch.__version__}|triton {triton.__version__}|cuda {torch.version.cuda}"


def machine_name() -> str:
    return machine_key().split("|")[0]


def peaks(timer: Callable | None = None) -> dict:
    """This machine's roofs {copy_gbps, matmul_tflops, source}, measured once per machine and versions
    (with ``timer``, default the course's protocol on this machine's clock) and cached as JSON."""
    from measure.files import write_json_atomic
    from measure.timer import median_ms

    path, key = cache_path(), machine_key()
    try:
        cached = json.loads(path.read_text())
    except (OSError, ValueError):
        cached = {}
    if key in cached:
        return cached[key]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    timer = timer or (lambda fn: median_ms(fn, reps=20, warmup=2))
    copy_gbps, matmul_tflops = measure_ceilings(timer, device)
    found = {"copy_gbps": copy_gbps, "matmul_tflops": matmul_tflops, "source": f"measured on {machine_name()}"}
    cached[key] = found
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, cached)
    return found
