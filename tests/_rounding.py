"""How a GPU kernel's dots read their operands, emulated on the CPU in float32: the tests that check a
tolerance against what an honest kernel computes (FlashAttention's, the fused cross-entropy's) share it."""
from __future__ import annotations

import torch


def tf32(t: torch.Tensor) -> torch.Tensor:
    """A float32 dot operand as the tensor cores read it: TF32 keeps 10 of float32's 23 mantissa bits (the
    low 13 are dropped, the worst case of truncation); 16-bit operands (already upcast) are exact."""
    return (t.contiguous().view(torch.int32) & ~0x1FFF).view(torch.float32)


def operand(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """What a dot of a kernel with ``dtype`` inputs multiplies: ``t`` rounded to the input dtype, or TF32."""
    return tf32(t.float()) if dtype == torch.float32 else t.to(dtype).float()
