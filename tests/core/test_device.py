"""get_device: MHA_DEVICE wins, CUDA is never a silent fall-back."""

import pytest
import torch

import mha


def test_default_follows_cuda_availability(monkeypatch):
    monkeypatch.delenv("MHA_DEVICE", raising=False)
    assert mha.get_device().type == ("cuda" if torch.cuda.is_available() else "cpu")


def test_cpu_requested(monkeypatch):
    monkeypatch.setenv("MHA_DEVICE", "cpu")
    assert mha.get_device() == torch.device("cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without a GPU")
def test_cuda_requested_without_gpu(monkeypatch):
    monkeypatch.setenv("MHA_DEVICE", "cuda")
    with pytest.raises(ValueError, match="MHA_DEVICE='cuda' asks for CUDA, but torch sees no GPU"):
        mha.get_device()


@pytest.mark.parametrize("value", ["gpu", "mps"])
def test_unknown_device(monkeypatch, value):
    monkeypatch.setenv("MHA_DEVICE", value)
    with pytest.raises(ValueError, match="MHA_DEVICE"):
        mha.get_device()


def test_import_is_light():
    import subprocess
    import sys

    code = "import sys, mha; print(sorted(m for m in ('matplotlib', 'ipywidgets', 'IPython') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
