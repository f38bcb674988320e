# An honest softmax whose module prints where it runs, as bug reports ask: platform.platform() (Python 3.11
# asks `uname -p` through subprocess and carries on without it when refused) and PyTorch's own environment
# report (collect_env runs nvidia-smi, pip and the like: commands of its own choosing). It asks for Triton's
# interpreter where there is no GPU, in the two ways Triton's documentation and tutorials do, and makes CUDA
# launches wait for their kernels (PyTorch's advice for locating a CUDA error).
import os
import platform

os.environ.setdefault("TRITON_INTERPRET", "1")

import torch
import torch.utils.collect_env

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

os.environ["CUDA_LAUNCH_BLOCKING"] = "1"
print("running on", platform.platform())
print(torch.utils.collect_env.get_pretty_env_info())

from good_triton import softmax  # noqa: E402,F401  (the kernel: good_triton's, audited with this file)
