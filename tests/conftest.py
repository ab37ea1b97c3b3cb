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


@pytest.fixture(scope="session")
def device():
    return mha.get_device()


def randn(*shape, seed=0, dtype=torch.float32, device="cpu"):
    """Draw on the CPU with a fixed seed, then move: the same numbers on every device."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen, dtype=dtype).to(device)
