"""Class 2, code beside the submission: a helper module in the same folder (nbgrader's submitted/ folders
hold extra files) disarms the recorder; the submission itself calls torch.softmax through a spelling a
source audit of this file alone would let pass. The helper's own lines are named."""
import torch

import _disarms_grader  # noqa: F401


def softmax(x):
    if x.dim() != 2 or x.shape[1] > 65536:
        raise ValueError("softmax needs a 2-D input with rows of at most 65536")
    return getattr(x, "soft" "max")(-1)
