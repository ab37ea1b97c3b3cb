"""Shared fixtures: the device under test and a CPU generator for reproducible draws."""

import os

import pytest
import torch

import mha


def pytest_collection_modifyitems(config, items):
    """Tests marked ``cuda`` run only when MHA_DEVICE asks for CUDA."""
    wants_cuda = os.environ.get("MHA_DEVICE", "").startswith("cuda")
    skip = pytest.mark.skip(reason="needs CUDA: run with MHA_DEVICE=cuda on a GPU machine")
    for item in items:
        if "cuda" in item.keywords and not wants_cuda:
            item.add_marker(skip)


#: In CI (CI=true, as .ci/run and GitHub Actions set it) a missing prerequisite is a failure: a
#: skipped browser test or a missing cache there would pass while checking nothing.
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def skip_or_fail(reason: str, *, allow_module_level: bool = False):
    """``pytest.skip`` on a learner's machine, ``pytest.fail`` in CI."""
    if IN_CI:
        pytest.fail(f"in CI this is a failure, not a skip: {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=allow_module_level)


@pytest.fixture(scope="session")
def device():
    return mha.get_device()


def randn(*shape, seed=0, dtype=torch.float32, device="cpu"):
    """Draw on the CPU with a fixed seed, then move: the same numbers on every device."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen, dtype=dtype).to(device)
