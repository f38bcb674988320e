# An honest softmax whose module prints where it runs, as bug reports ask: platform.platform() (Python 3.11
# asks `uname -p` through subprocess and carries on without it when refused) and PyTorch's own environment
# report (collect_env runs nvidia-smi, pip and the like: commands of its own choosing). It asks for Triton's
# interpreter where there is no GPU, in the two ways Triton's documentation and tutorials do.
import os
import platform

os.environ.setdefault("TRITON_INTERPRET", "1")

import torch
import torch.utils.collect_env
import triton
import triton.language as tl

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

print("running on", platform.platform())
print(torch.utils.collect_env.get_pretty_env_info())


@triton.jit
def _rows(x_ptr, y_ptr, x_stride, y_stride, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + tl.program_id(0) * x_stride + offs, mask=mask, other=-float("inf")).to(tl.float32)
    num = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + tl.program_id(0) * y_stride + offs, (num / tl.sum(num, axis=0)).to(y_ptr.dtype.element_ty),
             mask=mask)


def softmax(x):
    if x.dim() != 2 or x.shape[1] > 65536:
        raise ValueError(f"softmax needs a 2-D input with rows of at most 65536, got {tuple(x.shape)}")
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    _rows[(m,)](x, y, x.stride(0), y.stride(0), n, BLOCK=triton.next_power_of_2(n))
    return y
