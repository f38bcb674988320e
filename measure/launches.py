"""Which profiler events launch a kernel: one list, for notebook 02 and the grader (autograder.probes).

On a GPU every CUDA event of a profile is a kernel. On the CPU a "kernel" is an aten operator that
computes something; these operators only re-view, describe or allocate memory and run no kernel, so
counting launches skips them. ``HELPER_COPIES`` are copies an operator makes of its own arguments (``x * 2``
turns the Python number 2 into a tensor): nested inside another operator they belong to it.
"""
from __future__ import annotations

NO_KERNEL_OPS = frozenset({
    # views: a new shape or stride over the same memory
    "aten::view", "aten::_unsafe_view", "aten::reshape", "aten::_reshape_alias", "aten::as_strided",
    "aten::transpose", "aten::t", "aten::permute", "aten::numpy_T", "aten::expand", "aten::expand_as",
    "aten::unsqueeze", "aten::squeeze", "aten::select", "aten::slice", "aten::narrow", "aten::split",
    "aten::chunk", "aten::unbind", "aten::flatten", "aten::unflatten", "aten::alias", "aten::detach",
    "aten::detach_", "aten::lift_fresh", "aten::resolve_conj", "aten::resolve_neg", "aten::contiguous",
    # allocation and metadata
    "aten::empty", "aten::empty_like", "aten::empty_strided", "aten::resize_", "aten::result_type",
    "aten::is_nonzero", "aten::item", "aten::_local_scalar_dense",
})

HELPER_COPIES = frozenset({"aten::to", "aten::_to_copy", "aten::copy_"})
