"""Stands for a learner's file in the launch-callback tests (tests/test_autograder_escapes.py): what is defined
here is the learner's own code; ``launch`` hands a given callable to Triton in one role of a launch."""
import functools

import triton
import triton.language as tl


def own_function(*args, **kwargs):
    return (1,)


class OwnCallable:
    a_lambda = staticmethod(lambda *args, **kwargs: (1,))

    def method(self, *args, **kwargs):
        return (1,)

    def __call__(self, *args, **kwargs):
        return (1,)


@triton.jit
def _add_one(x_ptr, y_ptr, n, UNUSED, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)


def launch(role: str, x, callback):
    """y = x + 1 (x of at most 8 elements) by one launch that hands ``callback`` to Triton as ``role``."""
    y = x.new_empty(x.shape)
    args, grid = (x, y, x.numel()), (1,)
    if role == "grid":
        grid = callback
    if role == "heuristic":
        kernel = triton.heuristics({"UNUSED": callback})(_add_one)
        kernel[grid](*args, BLOCK=8)
        return y
    if role == "course autotune config pre_hook":  # course.triton_compat.autotune: one fixed config when interpreting
        from course.triton_compat import autotune

        kernel = autotune([triton.Config({"BLOCK": 8}, pre_hook=callback)], key=[])(_add_one)
        kernel[grid](*args, 0)
        return y
    if role == "hook that adds another":  # its own hook runs, then appends the callback to the hooks still to run
        kernel = triton.jit(_add_one.fn)
        kernel.add_pre_run_hook(lambda *a, **k: kernel.pre_run_hooks.append(callback))
    elif role == "pre_run_hook":
        kernel = triton.jit(_add_one.fn)
        kernel.add_pre_run_hook(callback)
    elif role in ("autotune pre_hook", "config pre_hook", "prune_configs_by"):
        config = triton.Config({"BLOCK": 8}, pre_hook=callback if role == "config pre_hook" else None)
        kernel = triton.autotune([config], key=[], pre_hook=callback if role == "autotune pre_hook" else None,
                                 prune_configs_by={"early_config_prune": callback} if role == "prune_configs_by"
                                 else None)(_add_one)
        kernel[grid](*args, 0)
        return y
    else:
        kernel = _add_one
    kernel[grid](*args, 0, BLOCK=8)
    return y


partial_of_own = functools.partial(own_function, 1)


@triton.jit
def _apply(x_ptr, y_ptr, n, EXTRA, FN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, FN(tl.load(x_ptr + offs, mask=offs < n)), mask=offs < n)


@triton.jit
def own_exp(x):
    return tl.exp(x)


def apply(x, fn, extra=None):
    """y = fn(x) by one launch (x of at most 8 elements), ``extra`` handed to the kernel as an argument."""
    y = x.new_empty(x.shape)
    _apply[(1,)](x, y, x.numel(), extra, FN=fn, BLOCK=8)
    return y


@triton.jit
def _fails_in_its_last_program(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
    if pid == tl.num_programs(0) - 1:
        tl.load(x_ptr + n + offs)  # unmasked, past the end: the course's bounds check stops the launch here


def fails_after_storing(x):
    """Copies x into y in programs of 4, then the last program reads past the end of x (and raises)."""
    y = x.new_zeros(x.shape)
    try:
        _fails_in_its_last_program[(triton.cdiv(x.numel(), 4),)](x, y, x.numel(), BLOCK=4)
    except Exception:  # noqa: BLE001  (caught, as a launcher hiding a failed launch would)
        pass
    return y


class HasDataPtr:
    """An object of the learner's own class that looks like a tensor to Triton's interpreter."""

    dtype = None

    def __init__(self, fn):
        self.data_ptr = fn


class OwnGrid(tuple):
    """A grid of the learner's class: its ``__len__`` is the learner's Python, which Triton would run."""

    def __len__(self):
        return 1


def grid_answering_own_grid(meta):
    return OwnGrid((1,))
