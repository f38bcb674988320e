"""Helpers written the way Liger-Kernel writes its utils: a version check that imports the package it is
given, launch settings from a row's length, and a decorator that makes tensor arguments contiguous."""
import functools
import importlib
from typing import Callable

import torch
import triton


def ensure_contiguous(fn):
    @functools.wraps(fn)
    def wrapper(ctx, *args, **kwargs):
        def contiguous(x):
            return x.contiguous() if isinstance(x, torch.Tensor) else x

        return fn(ctx, *[contiguous(a) for a in args], **{k: contiguous(v) for k, v in kwargs.items()})

    return wrapper


def calculate_settings(n):
    block = triton.next_power_of_2(n)
    if block > 65536:
        raise RuntimeError(f"a row of {n} is longer than one block allows")
    warps = 32 if block >= 32768 else 16 if block >= 8192 else 8 if block >= 2048 else 4
    return block, warps


def _release(text: str) -> tuple:
    return tuple(int(p) for p in text.split("+")[0].split(".")[:2])


def compare_version(package: str, operator: Callable, target: str) -> bool:
    try:
        pkg = importlib.import_module(package)
    except ImportError:
        return False
    return operator(_release(pkg.__version__), _release(target))
