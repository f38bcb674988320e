"""Arguments as the grader ships them: a tuple whose items are tensors, plain values, or containers of them.

Most entry points take tensors and numbers (``softmax(x)``, ``layer_norm_fwd(x, weight, bias, eps)``); the
capstone's ``transformer_block(x, params)`` takes a dict of named weights. Everything that moves, re-fills,
jitters, ships or compares arguments walks them with these helpers, so a tensor inside a dict (or a list,
or a tuple) is treated exactly like a tensor at the top: moved to the device, re-filled in place with new
values, given fresh values before every timed call, and checked to come back unmodified.

Containers are walked in a fixed order (a dict's insertion order, which survives ``torch.save``), so the
grading process and a worker derive the same values for the same positions.
"""
from __future__ import annotations

from typing import Callable

import torch

# tensors(obj): every tensor in obj, in the walking order (the one walker, shared with measure.memory)
from measure.memory import tensors_in as tensors


def map_tensors(fn: Callable[[torch.Tensor], object], obj):
    """``obj`` rebuilt with ``fn`` applied to every tensor in it (dicts, lists and tuples walked)."""
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, dict):
        return {k: map_tensors(fn, v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(map_tensors(fn, v) for v in obj)
    return obj


def holds_tensors(obj) -> bool:
    return next(tensors(obj), None) is not None


def to_device(args, device) -> tuple:
    return tuple(map_tensors(lambda t: t.to(device), a) for a in args)
