"""Shared pytest set-up: the course device is decided (and TRITON_INTERPRET set) before any kernel import."""
import course  # noqa: F401  (must come first: sets TRITON_INTERPRET=1 without a GPU)
import pytest
import torch


def pytest_collection_modifyitems(config, items):
    if course.ON_GPU:
        return
    reason = "needs a CUDA GPU: this machine has none (runs on the GPU runner with `pytest -m gpu`)"
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(autouse=True)
def _fresh_seed(request):
    # Fresh random inputs on every run, but reproducible within one: the seed is printed on failure.
    seed = torch.seed() % 2**31
    torch.manual_seed(seed)
    request.node.user_properties.append(("seed", seed))
    yield
