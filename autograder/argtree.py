"""Arguments as the grader ships them: a tuple whose items are tensors, plain values, or containers of them.

Most entry points take tensors and numbers (``softmax(x)``, ``layer_norm_fwd(x, weight, bias, eps)``); the
capstone's ``transformer_block(x, params)`` takes a dict of named weights. Everything that moves, re-fills,
jitters, ships or compares arguments walks them with these helpers, so a tensor inside a dict (or a list,
or a tuple) is treated exactly like a tensor at the top: moved to the device, re-filled in place with new
values, given fresh values before every timed call, and checked to come back unmodified.

Containers are walked in a fixed order (a dict's insertion order, which survives ``torch.save``), so the
grading process and a worker derive the same values for the same positions. The walk goes by exact types
(``type(x) is``), never ``isinstance`` or a container's own methods: after a call the arguments may hold
what the learner's code put there (a dict of weights is mutable), and none of its code (a ``__class__``
property, an ``__iter__``, a key's ``__hash__``) may run outside the call.
"""
from __future__ import annotations

from typing import Callable

import torch


def tensors(obj):
    """Every tensor in ``obj``, in the walking order."""
    kind = type(obj)
    if kind is torch.Tensor:
        yield obj
    elif kind is tuple or kind is list:
        for item in obj:
            yield from tensors(item)
    elif kind is dict:
        for item in dict.values(obj):
            yield from tensors(item)


def map_tensors(fn: Callable[[torch.Tensor], object], obj):
    """``obj`` rebuilt with ``fn`` applied to every tensor in it (dicts with str keys, lists and tuples walked)."""
    kind = type(obj)
    if kind is torch.Tensor:
        return fn(obj)
    if kind is dict and all(type(k) is str for k in obj):
        return {k: map_tensors(fn, v) for k, v in dict.items(obj)}
    if kind is tuple or kind is list:
        return kind(map_tensors(fn, v) for v in obj)
    return obj


def holds_tensors(obj) -> bool:
    return next(tensors(obj), None) is not None


def to_device(args, device) -> tuple:
    return tuple(map_tensors(lambda t: t.to(device), a) for a in args)
