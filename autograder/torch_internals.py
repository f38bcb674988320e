"""The uses of PyTorch's internals that keep a grading worker's start short (a worker starts for every
exercise graded, and torch._dynamo alone is 1.2 s of CPU, nearly as much as torch's own import).

Where this PyTorch lacks what they use, PyTorch's own behaviour stays (written against torch 2.13):
``torch._C._set_deterministic_algorithms`` (what
``torch.use_deterministic_algorithms`` calls), ``torch._C._dynamo.eval_frame.get_eval_frame_callback`` and
the ``__dynamo_disable`` attribute that ``torch._disable_dynamo``'s wrapper reads on a dispatch mode's
handler. This module is in the course's packages, whose frames the operator recorder passes over when it
asks whose work an operator is (``legality._asked_by``), as it passes over torch's own.
"""
from __future__ import annotations

import os
import sys


def deterministic_algorithms(torch) -> None:
    """``torch.use_deterministic_algorithms(True, warn_only=True)`` without importing Inductor's config, which
    imports torch._dynamo (1.2 s of CPU in a worker that never compiles): Inductor's flag is set where its
    config is loaded already, else by the variable it reads when it is loaded. In a learner's own process
    (check() where it cannot fork) torch's own switch: no variable is left behind there."""
    if os.environ.get("AUTOGRADER_WORKER") != "1" or not hasattr(torch._C, "_set_deterministic_algorithms"):
        torch.use_deterministic_algorithms(True, warn_only=True)
        return
    torch._C._set_deterministic_algorithms(True, warn_only=True)
    config = sys.modules.get("torch._inductor.config")
    if config is not None:
        config.deterministic = True
    else:
        os.environ["TORCHINDUCTOR_DETERMINISTIC"] = "1"


def dispatch_modes_without_dynamo(*modes) -> None:
    """PyTorch runs a dispatch mode's handler with torch._dynamo disabled (``torch._disable_dynamo``, which
    imports torch._dynamo at the first operator: 1.2 s of CPU). While no frame evaluator is installed (none
    is unless torch.compile or the code made one) there is nothing to disable: the handler runs as it is;
    once one is, as PyTorch runs it (and from then on)."""
    import torch

    evaluator = getattr(getattr(getattr(torch._C, "_dynamo", None), "eval_frame", None), "get_eval_frame_callback", None)
    if evaluator is None:  # a PyTorch without it: its own wrapper, as it is
        return
    for mode in modes:
        raw = getattr(mode.__dict__.get("__torch_dispatch__"), "__wrapped__", None)
        if raw is None or getattr(raw, "__dynamo_disable", None) is not None:
            continue

        def handler(*args, _raw=raw, **kwargs):
            if evaluator() is None:
                return _raw(*args, **kwargs)
            import torch._dynamo

            disabled = torch._dynamo.disable(_raw, recursive=True, wrapping=False)
            setattr(_raw, "__dynamo_disable", disabled)  # PyTorch's wrapper calls it from now on
            return disabled(*args, **kwargs)

        setattr(raw, "__dynamo_disable", handler)  # what PyTorch's wrapper calls (torch._compile._disable_dynamo)
