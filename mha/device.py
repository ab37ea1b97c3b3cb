"""Which device the course computes on."""

from __future__ import annotations

import os

import torch

ENV_VAR = "MHA_DEVICE"


def get_device() -> torch.device:
    """The device chapters and tests compute on.

    The ``MHA_DEVICE`` environment variable wins when set (``cpu``, ``cuda``, ``cuda:1``);
    otherwise CUDA when available, else the CPU. Asking for CUDA on a machine without a
    visible GPU is an error rather than a silent fall-back, so a GPU run cannot quietly
    test the CPU.

    Returns:
        torch.device
    """
    requested = os.environ.get(ENV_VAR, "").strip()
    if not requested:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(requested)
    except RuntimeError as exc:
        raise ValueError(
            f"{ENV_VAR} must name a torch device such as 'cpu', 'cuda' or 'cuda:1', found {requested!r}"
        ) from exc
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"{ENV_VAR}={requested!r} asks for CUDA, but torch sees no GPU "
                f"(torch {torch.__version__}, built for CUDA: {torch.version.cuda})"
            )
        index = device.index or 0
        if index >= torch.cuda.device_count():
            raise ValueError(
                f"{ENV_VAR}={requested!r} asks for GPU {index}, but only {torch.cuda.device_count()} are visible"
            )
    elif device.type != "cpu":
        raise ValueError(f"{ENV_VAR} must be 'cpu' or 'cuda[:N]', found {requested!r}")
    return device
