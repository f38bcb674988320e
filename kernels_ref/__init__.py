"""Reference kernels of the course: one module per operation, each with a plain PyTorch definition
(``<op>_torch``), the Triton kernel(s), the launcher named like the exercise's entry point, an
autograd.Function where there is a backward, and ``bench_cases(quick)`` for ``python -m kernels_ref.bench``.

Modules are imported on use (``from kernels_ref.softmax import softmax``) so importing the package stays
cheap; ``course`` is imported first because it sets TRITON_INTERPRET=1 before any kernel is defined.
"""
import course  # noqa: F401  (must come first: decides the device and the Triton interpreter)
