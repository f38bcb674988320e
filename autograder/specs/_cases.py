"""Input builders shared by the specs: hard rows, strided views, hints that name what went wrong."""
from __future__ import annotations

import torch

from autograder.specs.base import Case, rand

HINT_ODD = "odd/non-power-of-two shapes: is every load and store masked (offsets < n)?"
HINT_TINY = "tiny shapes: does the grid cover at least one program, and is the block at least the row?"
HINT_LOW = "{dtype}: load, compute in float32 (`.to(tl.float32)`), and cast back when storing"
HINT_BIG = "large magnitudes: subtract the row max before exp (exp(89) overflows float32)"
HINT_NEGINF = "-inf entries: masked lanes need other=-inf and the max must ignore them; exp(-inf) = 0"
HINT_STRIDE = "non-contiguous rows: step between rows with x.stride(0), not the row length"


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def row_strided(x: torch.Tensor, pad: int = 7) -> torch.Tensor:
    """``x`` as rows of a wider buffer (stride(0) > n_cols); the padding holds NaN, so reading it shows."""
    buf = torch.full(x.shape[:-1] + (x.shape[-1] + pad,), float("nan"), dtype=x.dtype, device=x.device)
    view = buf[..., : x.shape[-1]]
    view.copy_(x)
    return view


def hard_rows(x: torch.Tensor, big: float) -> torch.Tensor:
    """Row 0 at large magnitude, row 1 with -inf in every other entry (never a whole row), row 2 constant."""
    x = x.clone()
    if x.shape[0] >= 1:
        x[0] = x[0] * big
    if x.shape[0] >= 2 and x.shape[-1] >= 2:
        x[1, ::2] = float("-inf")
    if x.shape[0] >= 3:
        x[2] = 3.0
    return x


def hint_for(shape, dtype, extra: str = "") -> str:
    if extra:
        return extra
    if dtype in (torch.float16, torch.bfloat16):
        return HINT_LOW.format(dtype=dtype_name(dtype))
    if any(s < 4 for s in shape):
        return HINT_TINY
    if any(s & (s - 1) for s in shape):
        return HINT_ODD
    return ""


def row_cases(shapes, dtypes, quick: bool, *, big=1000.0, strided=True):
    """Cases for row-wise ops on [M, N]: every shape x dtype, plus hard rows and a row-strided view.

    Public (shown by check): the two smallest shapes in every dtype, and every hard case."""
    cases = []

    def plain(shape, dtype):
        return lambda g: (rand(g, shape, dtype),)

    for shape in shapes:
        for dtype in dtypes:
            cases.append(Case(f"{shape[0]}x{shape[1]} {dtype_name(dtype)}", plain(shape, dtype),
                              hint=hint_for(shape, dtype), public=shape in shapes[:2]))
    hard_shape = shapes[-1]
    for dtype in dtypes:
        scale = big if dtype == torch.float32 else min(big, 100.0)
        cases.append(Case(f"hard rows {hard_shape[0]}x{hard_shape[1]} {dtype_name(dtype)}",
                          lambda g, d=dtype, s=scale: (hard_rows(rand(g, hard_shape, d), s),),
                          hint=f"{HINT_BIG}; {HINT_NEGINF}", public=True))
    if strided:
        cases.append(Case(f"row-strided {hard_shape[0]}x{hard_shape[1]} float32",
                          lambda g: (row_strided(rand(g, hard_shape)),), hint=HINT_STRIDE, public=True))
    return cases
