"""An honest softmax from a notebook that sets torch's default device at its top, as PyTorch's tutorials do
(``torch.set_default_device``): every tensor made without a device is made there, the grader's own buffers
too unless they name theirs. Right values: it must keep every correctness point, on the CPU as on a GPU, where
its inputs arrive and its outputs leave through host buffers of the grader's.
"""
import torch

from course import DEVICE
from naive_triton import softmax

torch.set_default_device(DEVICE)

__all__ = ["softmax"]
