"""Bytes each operator reads and writes (notebooks 01 and 05): the memory traffic of eager PyTorch code.

    with Traffic() as tr:
        naive_softmax(x)
    tr.report(ideal_bytes=2 * x.numel() * x.element_size())

Every aten operator run inside the block reads its tensor inputs and writes its outputs once (what a kernel
per operator does at least); views move nothing and are not counted.
"""
from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


def nbytes(tree) -> int:
    """Bytes of every tensor in a nest of arguments or results."""
    return sum(t.numel() * t.element_size() for t in tree_flatten(tree)[0] if isinstance(t, torch.Tensor))


class Traffic(TorchDispatchMode):
    """Records ``(operator, bytes read, bytes written)`` for every aten operator inside ``with Traffic() as tr:``."""

    def __init__(self):
        super().__init__()
        self.ops: list[tuple[str, int, int]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not func.is_view:
            self.ops.append((func.overloadpacket.__name__, nbytes((args, kwargs)), nbytes(out)))
        return out

    @property
    def total(self) -> int:
        return sum(r + w for _, r, w in self.ops)

    def report(self, ideal_bytes: int | None = None) -> None:
        """One line per operator, then the total against ``ideal_bytes`` (what one fused kernel moves)."""
        for name, r, w in self.ops:
            print(f"  {name:22s} reads {r / 1e6:9.3f} MB  writes {w / 1e6:9.3f} MB")
        line = f"  {len(self.ops)} ops (kernels), {self.total / 1e6:.3f} MB moved"
        if ideal_bytes:
            line += f"; the minimum is {ideal_bytes / 1e6:.3f} MB: {self.total / ideal_bytes:.1f}x more"
        print(line)
