"""Input builders shared by the specs: families of shapes, hard rows, strided views, exercise hints."""
from __future__ import annotations

import torch

from autograder.specs.base import Case, rand
from autograder.symptoms import at_the_tail

# Exercise advice for a family (Case.hint); generic advice per family and kind is in autograder.symptoms.
HINT_ODD = at_the_tail("odd/non-power-of-two shapes: is every load and store masked (offsets < n)?")
HINT_TINY = "tiny shapes: does the grid cover at least one program, and is the block at least the row?"
HINT_LOW = "{dtype}: load, compute in float32 (`.to(tl.float32)`), and cast back when storing"
HINT_BIG = "large magnitudes: subtract the row max before exp (exp(89) overflows float32)"
HINT_NEGINF = "-inf entries: masked lanes need other=-inf and the max must ignore them; exp(-inf) = 0"
HINT_NEGINF_BLOCKS = ("leading blocks entirely -inf: while the running max is still -inf, exp(x - m) is "
                      "exp(-inf - (-inf)) = NaN; subtract a safe max (0 while m is -inf)")
HINT_STRIDE = "non-contiguous rows: step between rows with x.stride(0), not the row length"

LONG_ROW = 1024  # a row longer than this is more than one block of columns for most kernels


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def family_of(shape, dtype, rows: bool = False) -> str:
    """The family of a plain case: its dtype if 16-bit, else what its shape exercises: a dimension of 1
    ("tiny"), rows longer than a block ("long-rows", when ``rows``: the last dimension is a row that kernels
    cut into blocks of columns), or an ordinary shape ("shape": the specs pick non-powers of two)."""
    if dtype != torch.float32:
        return f"dtype:{dtype_name(dtype)}"
    if min(shape) == 1:
        return "tiny"
    if rows and shape[-1] > LONG_ROW:
        return "long-rows"
    return "shape"


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


def neg_inf_blocks(x: torch.Tensor) -> torch.Tensor:
    """Rows whose leading entries are -inf: row 0 all but its last 3 (so the first block of any block size
    below the row is all -inf), row 1 its first half, row 2 its first half at large magnitude behind it."""
    x = x.clone()
    n = x.shape[-1]
    x[0, : max(n - 3, 1)] = float("-inf")
    if x.shape[0] >= 2:
        x[1, : n // 2] = float("-inf")
    if x.shape[0] >= 3:
        x[2, : n // 2] = float("-inf")
        x[2, n // 2:] *= 100.0
    return x


def row_cases(shapes, dtypes, quick: bool, *, big=1000.0, strided=True, neg_inf_blocks_case=False):
    """Cases for row-wise ops on [M, N]: every shape x dtype, hard rows, a row-strided view; rows longer
    than one block (and, with ``neg_inf_blocks_case``, rows whose leading blocks are all -inf).

    Public (shown by check): the two smallest shapes in every dtype, and every other family once: hard
    and strided cases at the largest shape, long rows with 2 or 3 rows of the longest length."""
    cases = []

    def plain(shape, dtype):
        return lambda g: (rand(g, shape, dtype),)

    for shape in shapes:
        for dtype in dtypes:
            cases.append(Case(f"{shape[0]}x{shape[1]} {dtype_name(dtype)}", plain(shape, dtype),
                              family=family_of(shape, dtype, rows=True), public=shape in shapes[:2]))
    longest = max(s[1] for s in shapes)
    if longest > LONG_ROW and all(s[1] <= LONG_ROW for s in shapes[:2]):
        cases.append(Case(f"long rows 2x{longest} float32", plain((2, longest), torch.float32),
                          family="long-rows", public=True))
    if neg_inf_blocks_case:
        for m, public in ((3, True), (max(s[0] for s in shapes), False)):
            if m >= 3 and (public or m > 3):
                cases.append(Case(f"leading -inf blocks {m}x{longest} float32",
                                  lambda g, m=m: (neg_inf_blocks(rand(g, (m, longest))),),
                                  hint=HINT_NEGINF_BLOCKS, family="neg-inf-blocks", public=public))
    hard_shape = shapes[-1]
    for dtype in dtypes:
        scale = big if dtype == torch.float32 else min(big, 100.0)
        cases.append(Case(f"hard rows {hard_shape[0]}x{hard_shape[1]} {dtype_name(dtype)}",
                          lambda g, d=dtype, s=scale: (hard_rows(rand(g, hard_shape, d), s),),
                          hint=HINT_BIG, family="large", public=True))
    if strided:
        cases.append(Case(f"row-strided {hard_shape[0]}x{hard_shape[1]} float32",
                          lambda g: (row_strided(rand(g, hard_shape)),), family="strided", public=True))
    return cases
