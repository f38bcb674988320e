"""Fresh values for timed calls (autograder.fresh): the Triton kernel a GPU uses gives bit-identical values
to the PyTorch formula the CPU uses, so the grading process can remake any timed call's inputs."""
from __future__ import annotations

import pytest
import torch

from autograder import fresh

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]


def _torch_formula(base, seed):
    factor = fresh.unit_noise(base.numel(), seed, base.device).mul_(0.25).add_(1.0)
    return (base.to(torch.float32) * factor.view(base.shape)).to(base.dtype)


def _bases(dtype, device):
    g = torch.Generator().manual_seed(3)
    # odd sizes (a partial last block), a transposed (non-contiguous) view, values across the dtype's range
    yield (torch.randn(3, 1000, generator=g) * 50).to(dtype).to(device)
    yield torch.randn(77, 33, generator=g).to(dtype).t().to(device)
    yield torch.tensor([0.0, -0.0, 1e-30, -65504.0, 3.0e4], dtype=torch.float32).to(dtype).to(device)


@pytest.mark.filterwarnings("ignore:overflow encountered in cast")  # float16's -65504 * 1.2: -inf on both paths
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("seed", [0, 1, 2**31 - 1, 123456789])
def test_the_kernel_matches_the_formula_bit_for_bit(dtype, seed):
    import course

    for base in _bases(dtype, course.DEVICE):
        got = fresh.jittered_by_kernel(base, seed)
        want = _torch_formula(base.cpu(), seed)
        assert got.dtype == base.dtype and got.shape == base.shape
        assert torch.equal(got.cpu(), want), (dtype, seed)


def test_values_depend_on_the_seed_and_stay_near_the_base():
    base = torch.randn(4096)
    a, b = fresh.jittered(base, 5), fresh.jittered(base, 6)
    assert not torch.equal(a, b) and torch.equal(a, fresh.jittered(base, 5))
    ratio = a / base
    assert float(ratio.min()) >= 0.75 - 1e-6 and float(ratio.max()) <= 1.25 + 1e-6


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_on_a_gpu_jittered_is_the_cpu_formula(dtype):
    """The worker (GPU, the kernel) and a reference made on the CPU agree, at a size with several waves."""
    base = torch.randn(1 << 22, 3, generator=torch.Generator().manual_seed(1)).to(dtype)
    got = fresh.jittered(base.cuda(), 987654321)
    assert torch.equal(got.cpu(), _torch_formula(base, 987654321))
