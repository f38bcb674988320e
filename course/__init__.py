"""The one place that decides where the course runs.

Import this before any Triton kernel is defined (``kernels_ref`` and ``autograder`` import it first):
without a CUDA GPU it sets ``TRITON_INTERPRET=1`` so every ``@triton.jit`` kernel runs on the CPU under
Triton's interpreter. Everything device-dependent in notebooks, kernels and tests reads from here:

    from course import DEVICE, ON_GPU, INTERPRET, SIZE, pick
    x = torch.randn(pick(small=(64, 100), large=(16384, 4096)), device=DEVICE)

A notebook's first cell imports what it uses and calls ``course.setup_notebook()`` (one thread on a CPU,
seed 0, prints where it runs).

Under the interpreter, a load or store outside a kernel's tensors raises ``course.bounds.OutOfBounds``
(instead of corrupting the process's memory: a notebook's kernel would abort or hang).
"""
import os as _os

# torch.profiler's library (Kineto) prints two log lines to stderr for every profile ("USDT: ...
# profiler_start", "profiler_stop"): a notebook that profiles in a loop shows a hundred of them. Level 6
# is above all of Kineto's levels; set KINETO_LOG_LEVEL yourself to see them.
_os.environ.setdefault("KINETO_LOG_LEVEL", "6")

# jsonschema (imported by nbformat: by nbgrader, nbclient and the grader's gradebook) imports rfc3987_syntax
# when it is installed (jupyter-events asks for it) to check strings of the "iri" format, and that module
# builds its grammars as it is imported: 1.2-1.4 s of the 1.5 s that importing nbformat takes (2-core
# machine), in every process that reads or writes a notebook. No schema read here has such a string
# (nbformat's and nbgrader's name no format), and jsonschema leaves the check out when the module is missing.
import sys as _sys  # noqa: E402

_sys.modules.setdefault("rfc3987_syntax", None)

# No garbage collection while torch and Triton import: the tens of thousands of objects they make set off
# collections that find little garbage, 0.12 s of the 1.55 s of CPU a grading worker's imports take (2-core
# machine, 6 starts each), paid by every process that imports the course: each grading worker, notebook
# kernel and command. Collections resume as before once the imports are done (a process that had them off
# keeps them off).
import gc as _gc  # noqa: E402

_collecting = _gc.isenabled()
_gc.disable()
try:
    from course.device import (  # noqa: E402,F401
        DEVICE,
        INTERPRET,
        ON_GPU,
        SIZE,
        describe,
        pick,
        setup_notebook,
        synchronize,
    )

    if INTERPRET:
        from course import bounds as _bounds
        from course.interpreter import launch_cpu_arguments_in_place as _in_place

        _in_place()  # first: the bounds checks wrap it and see the tensors the kernel gets
        _bounds.install()
finally:
    if _collecting:
        _gc.enable()
