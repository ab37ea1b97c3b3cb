"""Argument checks shared by the package: clear messages for a learner's mistakes.

Every check raises ``TypeError`` (wrong kind of value) or ``ValueError`` (right kind,
wrong value) with a message that names the argument, what was expected and what was found.
"""

from __future__ import annotations

import numbers

import torch


def check_positive_int(name: str, value) -> int:
    """Return ``value`` if it is an int > 0, else raise naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be a positive int, found {type(value).__name__} ({value!r})")
    if value <= 0:
        raise ValueError(f"{name} must be a positive int, found {value}")
    return int(value)


def check_divisible(name: str, value: int, divisor_name: str, divisor: int) -> None:
    if value % divisor != 0:
        raise ValueError(f"{name} ({value}) must be divisible by {divisor_name} ({divisor})")


def check_float_tensor(name: str, x, min_rank: int = 1) -> None:
    """A floating-point tensor of at least ``min_rank`` dimensions."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, found {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor (e.g. torch.float32), found {x.dtype}")
    if x.dim() < min_rank:
        raise ValueError(f"{name} must have at least {min_rank} dimensions, found shape {tuple(x.shape)}")


def check_rank(name: str, x: torch.Tensor, rank: int, legend: str) -> None:
    if x.dim() != rank:
        raise ValueError(f"{name} must have shape {legend} ({rank} dimensions), found shape {tuple(x.shape)}")


def check_last_dim(name: str, x: torch.Tensor, expected: int, what: str) -> None:
    if x.shape[-1] != expected:
        raise ValueError(
            f"{name} must have last dimension {expected} ({what}), found {x.shape[-1]} (shape {tuple(x.shape)})"
        )


def check_mask(name: str, mask, target_shape: tuple[int, ...], legend: str) -> None:
    """A boolean or floating mask that broadcasts to ``target_shape``, with no NaN."""
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, found {type(mask).__name__}")
    if mask.dtype != torch.bool and not mask.is_floating_point():
        raise TypeError(
            f"{name} must be a bool tensor (True = may attend) or a floating additive mask, found {mask.dtype}"
        )
    try:
        shape = torch.broadcast_shapes(mask.shape, target_shape)
    except RuntimeError:
        shape = None
    if shape != tuple(target_shape):
        raise ValueError(f"{name} must broadcast to {legend} = {tuple(target_shape)}, found shape {tuple(mask.shape)}")
    if mask.is_floating_point() and torch.isnan(mask).any():
        raise ValueError(f"{name} must not contain NaN (use -inf to block a position)")


def check_dropout(name: str, value) -> float:
    """A dropout probability in [0, 1): return it as a float, else raise naming ``name``."""
    if not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be a float in [0, 1), found {value!r}")
    return float(value)
