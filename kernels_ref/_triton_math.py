"""Device-side math shared by the reference kernels (one definition each).

``LOG2E`` is a ``tl.constexpr`` so kernels can use it as a global: GPUs compute ``exp2`` natively, and
``exp(x) == exp2(x * LOG2E)``; the same number as ``measure.reference.LOG2E`` (the float64 side).
"""
import triton
import triton.language as tl

from measure.reference import LOG2E as _LOG2E

LOG2E = tl.constexpr(_LOG2E)


@triton.jit
def gelu_tanh(z):
    """GELU, tanh approximation, on fp32 values, as z * sigmoid(2u) with u = sqrt(2/pi) (z + 0.044715 z^3).

    (1 + tanh(u)) / 2 == sigmoid(2u) exactly: one exp2 and one division. It never produces NaN: for very
    negative z the exp2 overflows to inf and z / inf = -0, for very positive z it underflows to 0 and the
    result is z, which is what the tanh form gives. The kernels load in their dtype and call this in fp32.
    """
    u = 0.7978845608028654 * (z + 0.044715 * z * z * z)
    return z / (1.0 + tl.exp2(u * (-2.0 * LOG2E)))  # tensor first: constexpr * tensor is wrong when interpreted
