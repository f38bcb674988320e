"""Input checks shared by the launchers: one clear error per broken promise, raised before any launch."""
from __future__ import annotations

import functools

import torch

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def check_tensor(name: str, t, *, ndim: int | None = None, dtypes=FLOAT_DTYPES, device=None) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, not {type(t).__name__}")
    if ndim is not None and t.dim() != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {tuple(t.shape)}")
    if dtypes is not None and t.dtype not in dtypes:
        names = ", ".join(str(d).replace("torch.", "") for d in dtypes)
        raise TypeError(f"{name} has dtype {t.dtype}; supported: {names}")
    if device is not None and t.device != device:
        raise ValueError(f"{name} is on {t.device} but the other inputs are on {device}")


def check_same(name: str, t: torch.Tensor, ref_name: str, ref: torch.Tensor, *, dtype: bool = True) -> None:
    if t.device != ref.device:
        raise ValueError(f"{name} is on {t.device} but {ref_name} is on {ref.device}")
    if dtype and t.dtype != ref.dtype:
        raise TypeError(f"{name} has dtype {t.dtype} but {ref_name} has {ref.dtype}; they must match")


def check_shape(name: str, t: torch.Tensor, shape: tuple) -> None:
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {tuple(t.shape)}")


def rows_contiguous(t: torch.Tensor) -> torch.Tensor:
    """The kernels index rows by a row stride and assume unit stride along a row: copy only if needed."""
    if t.dim() == 2:  # the launchers' case, read with one stride() call (each ~0.3 us on a launch's path)
        row_stride, col_stride = t.stride()
        if col_stride == 1 and (row_stride >= t.shape[1] or t.shape[0] <= 1):
            return t
        return t.contiguous()
    if t.dim() >= 1 and t.stride(-1) != 1:
        return t.contiguous()
    return t


@functools.lru_cache(maxsize=None)
def _cuda_facts(index: int) -> tuple[int, int]:
    """(compute capability major, SM count) of CUDA device ``index``: asked once, then kept (each
    torch.cuda query costs a launcher microseconds, on every call)."""
    props = torch.cuda.get_device_properties(index)
    return props.major, props.multi_processor_count


def _index(device: torch.device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()


def cuda_sm_count(device: torch.device) -> int:
    if device.type == "cuda":
        return _cuda_facts(_index(device))[1]
    return 4  # the interpreter: a few programs are enough to exercise the multi-program code paths


def cuda_capability_major(device: torch.device) -> int:
    """The compute capability's major number of a CUDA device (9 for Hopper); 0 for any other device."""
    return _cuda_facts(_index(device))[0] if device.type == "cuda" else 0
