"""Another machine's last bits, on this machine: every inexact floating result nudged by a few ulps.

Two CPUs (or a CPU and a GPU) compute the same float32 or float64 expression with other kernels: a
matrix product summed in another order, an exponential from another library. The results agree to
within a few units in the last place (ulps), and a printed number that depends on those bits (a
round-off that is zero in exact arithmetic, a value on a rounding boundary, a tie broken by noise)
prints differently there. ``make test-portable`` emulates other instruction sets of this machine's
own libraries; it cannot emulate another vendor's code paths (an Intel MKL printed ``0e+00`` where
this AMD machine printed ``1e-16``). This mode does what any other machine might: each floating
element that an operation computes is multiplied by ``1 + r * eps`` (``eps`` the dtype's machine
epsilon), so it moves by up to about ``2 * ulps`` units in its last place.

How the nudge is chosen, so that what holds on every machine still holds under it:

* ``r``, an integer in ``[-ulps, ulps]``, is a hash of the element's own bits and the seed. A machine
  is deterministic: the same operation on the same inputs gives the same bits, two elements that
  came out equal stay equal (a tie of equal scores stays a tie), and a difference of two values that
  differ in their last bits here (``a - b = 1e-16``) comes out another way.
* A result that is a multiple of ``2**-12`` no larger than ``2**12`` (an integer, a half, a sixteenth)
  is not nudged: sums and products of such numbers are exact on every machine (the worked example's
  integer matrices, softmax's 0.5 for two equal scores).
* An element of a pointwise operation equal to the same element of its input is not nudged:
  ``x + 0`` and ``x * 1`` give ``x`` on every machine (a residual branch whose sublayer outputs
  zero). Only pointwise: in a product, an output that happens to equal an input at the same place
  says nothing, and exempting it would make two permuted computations differ.
* Operations that every machine computes exactly the same way are left alone: factories and random
  draws, views, copies and dtype casts (correctly rounded everywhere), indexing, concatenation,
  selections (``max``, ``sort``, ``where``, ``masked_fill``, ``tril``, rounding), comparisons.
* Compiled code (``torch.compile``) runs without the mode: dynamo does not compile under a Python
  dispatch mode, and the chapter that compiles checks how often it compiles.

It is a ``TorchDispatchMode``: it works below autograd (backward passes are nudged too, and no
tensor is saved for the nudge) and leaves ``torch.overrides.has_torch_function`` false, so that
``nn.MultiheadAttention`` still takes the fast path it takes without it.

Used by ``make test-portable``: ``install()`` runs in each kernel that nbval starts, through an
IPython startup file (``tests/book/last_bits_startup.py``), with ``MHA_LAST_BITS=SEED[:ULPS]``.
"""

from __future__ import annotations

import functools
import os

import torch
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

#: aten operations whose results every machine computes bit for bit alike (by overload packet name).
EXACT = frozenset(
    """
    zeros ones empty empty_like empty_strided full full_like zeros_like ones_like arange linspace logspace eye
    rand randn randint randperm normal normal_ uniform_ bernoulli bernoulli_ multinomial exponential_
    random_ lift_fresh lift_fresh_copy scalar_tensor new_zeros new_ones new_full new_empty new_empty_strided
    clone detach alias _to_copy copy_ copy _copy_from _copy_from_and_resize to contiguous _local_scalar_dense
    view _unsafe_view _reshape_alias reshape as_strided t transpose permute expand slice select unsqueeze
    squeeze unfold split split_with_sizes unbind chunk narrow diagonal view_as_real view_as_complex
    index index_select gather take masked_select cat stack repeat repeat_interleave flip roll tril triu
    masked_fill masked_fill_ where sort topk max min amax amin aminmax kthvalue median mode argmax argmin
    round floor ceil trunc frac sign abs neg clamp clamp_min clamp_max clip relu threshold
    diag diag_embed nonzero unique _unique2 unique_consecutive scatter index_put index_put_ index_fill
    index_copy fill fill_ zero_ set_ resize_ eq ne lt le gt ge isnan isinf isfinite logical_not
    logical_and logical_or bitwise_and bitwise_or bitwise_not constant_pad_nd
    """.split()
)
#: Multiples of this no larger than 1 / this are exact results on every machine (see the module).
EXACT_GRID = 2.0**-12


def _name(func) -> str:
    packet = getattr(func, "overloadpacket", None)
    return getattr(packet, "__name__", "") or str(func)


def _bits(x: torch.Tensor) -> torch.Tensor:
    """Each element's bit pattern as int64."""
    width = {8: torch.int64, 4: torch.int32, 2: torch.int16}[x.element_size()]
    return x.contiguous().view(width).to(torch.int64)


class LastBits(TorchDispatchMode):
    """Multiplies each inexact floating element an operation computes by ``1 + r * eps``."""

    def __init__(self, seed: int = 0, ulps: int = 4):
        super().__init__()
        if not 1 <= ulps <= 64:
            raise ValueError(f"ulps must be between 1 and 64, found {ulps}")
        self.seed, self.ulps = int(seed), int(ulps)
        self.nudged = 0  # tensors changed, for the report

    def factors(self, out: torch.Tensor, inputs=()) -> torch.Tensor:
        """``1 + r * eps`` for each element of ``out`` (1 where it is left alone), in ``out``'s dtype.

        ``inputs``: a pointwise operation's, whose element i gives element i of ``out``."""
        h = _bits(out) * 0x9E3779B1 + self.seed * 0x85EBCA77 + 0x165667B1  # int64, wrapping
        h = (h ^ (h >> 29)) * 0xBF58476D
        h = h ^ (h >> 32)
        r = torch.remainder(h, 2 * self.ulps + 1) - self.ulps  # in [-ulps, ulps]
        grid = out / EXACT_GRID
        exact = (grid == torch.round(grid)) & (out.abs() <= 1 / EXACT_GRID)
        for x in inputs:  # an element passed through unchanged (x + 0, x * 1) is exact everywhere
            if x.shape == out.shape and x.dtype == out.dtype and x.device == out.device:
                exact = exact | (x == out)
        r = torch.where(exact | ~torch.isfinite(out), torch.zeros_like(r), r)
        return (1 + r.to(torch.float64) * torch.finfo(out.dtype).eps).to(out.dtype)

    def _nudge(self, out, inputs, in_place: bool, pointwise: bool = False):
        if not isinstance(out, torch.Tensor) or not out.is_floating_point() or out.numel() == 0:
            return out
        if out.is_complex() or out.dtype not in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
            return out
        self.nudged += 1
        if in_place:  # the operation wrote into one of its inputs: nudge it there
            return out.mul_(self.factors(out))
        return out * self.factors(out, inputs if pointwise else ())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = _name(func)
        if name in EXACT or name.rstrip("_") in EXACT:
            return out
        inputs = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
        in_place = name.endswith("_") or "out" in kwargs
        pointwise = torch.Tag.pointwise in getattr(func, "tags", ())
        if isinstance(out, torch.Tensor):
            if not in_place and any(out is x for x in inputs):
                return out
            return self._nudge(out, inputs, in_place, pointwise)
        if isinstance(out, tuple | list):
            nudged = [self._nudge(o, inputs, in_place) for o in out]
            return type(out)(nudged)
        return out


def parse(setting: str) -> tuple[int, int]:
    """``"SEED"`` or ``"SEED:ULPS"`` -> (seed, ulps)."""
    seed, _, ulps = setting.partition(":")
    try:
        return int(seed), int(ulps or 4)
    except ValueError:
        raise ValueError(f"MHA_LAST_BITS must be SEED or SEED:ULPS (integers), found {setting!r}") from None


def _compile_without_the_mode(compile_):
    """``torch.compile``, whose compiled module or function runs with the dispatch modes suspended."""

    @functools.wraps(compile_)
    def compile_outside(model=None, **kwargs):
        if model is None:  # used as @torch.compile(...)
            return lambda m: compile_outside(m, **kwargs)
        compiled = compile_(model, **kwargs)
        if isinstance(compiled, torch.nn.Module):
            base = type(compiled)

            class Outside(base):
                def __call__(self, *args, **kw):
                    with _disable_current_modes():
                        return base.__call__(self, *args, **kw)

            compiled.__class__ = Outside
            return compiled

        @functools.wraps(compiled)
        def run(*args, **kw):
            with _disable_current_modes():
                return compiled(*args, **kw)

        return run

    return compile_outside


def install(setting: str | None = None) -> LastBits | None:
    """Enters the mode for the rest of the process when ``MHA_LAST_BITS`` (or ``setting``) is set."""
    setting = setting if setting is not None else os.environ.get("MHA_LAST_BITS", "")
    if not setting:
        return None
    seed, ulps = parse(setting)
    mode = LastBits(seed, ulps)
    torch.compile = _compile_without_the_mode(torch.compile)
    mode.__enter__()
    return mode
