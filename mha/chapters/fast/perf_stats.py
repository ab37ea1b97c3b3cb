"""When does a benchmark call one implementation faster than another? (the making-it-fast chapter)

The benchmark times two implementations A and B in the same rounds, so each round gives one ratio
r = time(A) / time(B). This module turns the rounds' ratios into a verdict with one rule, fixed
before any run:

* an **exact, distribution-free interval** for the median per-round ratio: the order statistics
  ``[r_(k), r_(n+1-k)]`` of n rounds cover the median with probability
  ``1 - 2 * P(Binomial(n, 1/2) <= k - 1)``, for any continuous distribution of independent rounds
  (:func:`median_interval`);
* a **Bonferroni correction** for the number of comparisons m a chapter makes: each interval is
  drawn at level ``1 - alpha / m``, so all m intervals cover their medians together with
  probability at least ``1 - alpha`` (:func:`corrected_alpha`);
* a difference is **called** only when the interval excludes 1 (:func:`verdict`). An interval
  above 1 means A is slower, below 1 faster; otherwise no difference is called, which is not
  evidence that there is none.

The rule needs enough rounds: with n rounds the widest interval, ``[min, max]``, has level
``1 - 2^(1 - n)``; below the corrected level no interval exists and nothing can be called
(:func:`rounds_needed`).
"""

from __future__ import annotations

import math
import random
from functools import lru_cache

#: The family-wise error rate the chapter's verdicts are held to.
ALPHA = 0.05

FASTER, SLOWER, NO_CALL = "A faster", "A slower", "no difference called"


def corrected_alpha(alpha: float, comparisons: int) -> float:
    """Bonferroni: the error rate each of ``comparisons`` intervals may have, ``alpha / comparisons``."""
    if isinstance(comparisons, bool) or not isinstance(comparisons, int) or comparisons < 1:
        raise ValueError(f"comparisons must be an int >= 1, found {comparisons!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), found {alpha!r}")
    return alpha / comparisons


def _below(k: int, n: int) -> float:
    """P(Binomial(n, 1/2) <= k - 1): the chance that fewer than k of n rounds fall below the median."""
    return sum(math.comb(n, i) for i in range(k)) / 2**n


@lru_cache(maxsize=256)
def interval_rank(n: int, alpha: float) -> int:
    """The largest k with ``2 * P(Binomial(n, 1/2) <= k - 1) <= alpha``: the interval
    ``[r_(k), r_(n+1-k)]`` then has level at least ``1 - alpha``. 0 when even ``[min, max]``
    (k = 1) falls short, that is when ``2^(1 - n) > alpha``."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an int >= 1 (the number of rounds), found {n!r}")
    k = 0
    while k + 1 <= (n + 1) // 2 and 2 * _below(k + 1, n) <= alpha:
        k += 1
    return k


def rounds_needed(alpha: float) -> int:
    """The fewest rounds for which an interval at level ``1 - alpha`` exists (``2^(1 - n) <= alpha``)."""
    n = 1
    while interval_rank(n, alpha) == 0:
        n += 1
    return n


def median_interval(ratios, alpha: float) -> dict:
    """The median of ``ratios`` and its exact distribution-free interval at level ``1 - alpha``.

    Returns:
        dict ``median``, ``low``, ``high`` (None when ``len(ratios)`` rounds cannot reach the
        level), ``rounds``, ``rank`` (k of :func:`interval_rank`) and ``level`` (the interval's
        exact coverage, at least ``1 - alpha``; 0 when there is no interval).
    """
    values = sorted(float(r) for r in ratios)
    n = len(values)
    if n == 0:
        raise ValueError("median_interval of an empty list of ratios")
    half = n // 2
    median = values[half] if n % 2 else (values[half - 1] + values[half]) / 2
    k = interval_rank(n, alpha)
    low, high = (values[k - 1], values[n - k]) if k else (None, None)
    level = 1 - 2 * _below(k, n) if k else 0.0
    return {"median": median, "low": low, "high": high, "rounds": n, "rank": k, "level": level}


def verdict(interval: dict) -> str:
    """``"A slower"`` when the interval of time(A) / time(B) lies above 1, ``"A faster"`` when it
    lies below, else ``"no difference called"`` (also when there is no interval)."""
    if interval["low"] is not None and interval["low"] > 1:
        return SLOWER
    if interval["high"] is not None and interval["high"] < 1:
        return FASTER
    return NO_CALL


def compare(ratios, comparisons: int, alpha: float = ALPHA) -> dict:
    """One comparison of a family of ``comparisons``: :func:`median_interval` at the Bonferroni
    level ``1 - alpha / comparisons``, with its :func:`verdict` and the numbers it used."""
    interval = median_interval(ratios, corrected_alpha(alpha, comparisons))
    return {**interval, "alpha": alpha, "comparisons": comparisons, "verdict": verdict(interval)}


def rounds_to_call(rounds: int, comparisons: int, alpha: float = ALPHA) -> int | None:
    """How many of ``rounds`` rounds must fall on one side of 1 for a call (``n + 1 - k``), or
    None when no number of them is enough."""
    k = interval_rank(rounds, corrected_alpha(alpha, comparisons))
    return rounds + 1 - k if k else None


def resampled_power(ratios, effect: float, comparisons: int, *, draws: int = 2000, seed: int = 0) -> float:
    """How often the rule calls a true ``effect``-fold difference at the noise of these rounds.

    The rounds' own log ratios, centred on their median and shifted by ``log(effect)``, are drawn
    with replacement, as many as there are rounds, ``draws`` times; each draw is judged by
    :func:`compare` among ``comparisons``. Returns the fraction of draws called in the effect's
    direction: the rule's power for that difference on a run as noisy as this one (a benchmark's
    noise is its rounds', not a model's: the stored run's spread of log ratios runs from 0.06 to
    0.33, where :func:`simulated_ratios` draws 0.07).
    """
    if not effect > 0 or effect == 1:
        raise ValueError(f"effect must be a positive ratio other than 1, found {effect!r}")
    logs = sorted(math.log(float(r)) for r in ratios)
    n = len(logs)
    centre = logs[n // 2] if n % 2 else (logs[n // 2 - 1] + logs[n // 2]) / 2
    shifted = [x - centre + math.log(effect) for x in logs]
    rng = random.Random(seed)
    want = SLOWER if effect > 1 else FASTER
    called = sum(
        compare([math.exp(rng.choice(shifted)) for _ in range(n)], comparisons)["verdict"] == want for _ in range(draws)
    )
    return called / draws


def simulated_ratios(rounds: int, effect: float = 1.0, *, noise: float = 0.05, load: float = 0.3, seed: int = 0):
    """Per-round ratios time(A) / time(B) of a simulated benchmark whose true median ratio is ``effect``.

    Each round draws one load factor that slows A and B alike (lognormal, ``load``; another
    process's burst) and each call its own noise (lognormal, ``noise``), as in the benchmark's
    rounds. The load cancels in the ratio, so only ``noise`` matters (its log ratio has spread
    ``noise * sqrt(2)``): this checks the rule's arithmetic (:func:`compare`) where the truth is
    known, not its power on a real run, which :func:`resampled_power` measures at the run's own noise.
    """
    rng = random.Random(seed)
    ratios = []
    for _ in range(rounds):
        shared = rng.lognormvariate(0.0, load)
        a = effect * shared * rng.lognormvariate(0.0, noise)
        ratios.append(a / (shared * rng.lognormvariate(0.0, noise)))
    return ratios
