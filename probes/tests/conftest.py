"""The probes' tests share the course's test set-up (the device decided before any kernel is defined, GPU
tests skipped with a reason, fresh seeds)."""
from tests.conftest import _fresh_seed, pytest_collection_modifyitems  # noqa: F401
