"""Fail at once, with a clear message, when `make test-gpu` has no usable GPU.

Checks that torch sees a CUDA device and that ``mha.get_device()`` (which reads MHA_DEVICE)
returns it, so that the GPU run cannot quietly test the CPU.
"""

from __future__ import annotations

import os
import sys

import torch


def main() -> int:
    requested = os.environ.get("MHA_DEVICE", "")
    if not requested.startswith("cuda"):
        print(f"check_gpu: MHA_DEVICE={requested!r}; run `MHA_DEVICE=cuda make test-gpu`", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print(
            f"check_gpu: no GPU visible to torch {torch.__version__} (built for CUDA: {torch.version.cuda}); "
            "`make test-gpu` needs a CUDA GPU and a CUDA build of torch. Use `make test` on a CPU machine.",
            file=sys.stderr,
        )
        return 1
    import mha

    device = mha.get_device()
    if device.type != "cuda":
        print(f"check_gpu: mha.get_device() returned {device}, expected a CUDA device", file=sys.stderr)
        return 1
    print(
        f"check_gpu: chapters and tests will compute on {device} ({torch.cuda.get_device_name(device)}), "
        f"torch {torch.__version__}, CUDA {torch.version.cuda}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
