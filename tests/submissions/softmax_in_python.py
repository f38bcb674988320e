"""softmax of rows of Python floats: what the escapes that take the input's values out of torch (as lists)
compute with them before a Triton kernel hands the answer back."""
import math


def rows_softmax(rows):
    """Each row's softmax; a row of only -inf gives NaNs, as torch.softmax does."""
    out = []
    for row in rows:
        top = max(row)
        if top == -math.inf:
            out.append([math.nan] * len(row))
            continue
        e = [math.exp(v - top) for v in row]
        s = sum(e)
        out.append([v / s for v in e])
    return out
