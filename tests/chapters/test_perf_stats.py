"""mha.chapters.fast.perf_stats: the rule that calls one implementation faster, on synthetic timings.

Rounds are simulated as the benchmark produces them: a load factor shared by every call of a
round (a burst of another process slows the whole round), times a call's own noise.
"""

import math

import numpy as np
import pytest

from mha.chapters.fast import perf_stats as ps

#: The number of comparisons the making-it-fast chapter makes with the CPU benchmark (perf_results.comparison_family).
FAMILY = 37


def simulated_ratios(rng, effect, rounds, sims, noise=0.05, load=0.3):
    """``(sims, rounds)`` per-round ratios time(A) / time(B) with a true median ratio ``effect``:
    a lognormal load per round, shared by A and B, and lognormal noise per call."""
    shared = rng.lognormal(0.0, load, size=(sims, rounds))
    a = effect * shared * rng.lognormal(0.0, noise, size=(sims, rounds))
    b = shared * rng.lognormal(0.0, noise, size=(sims, rounds))
    return a / b


def test_interval_rank_matches_the_binomial_tail():
    # 25 rounds: P(B <= 4) = 15,276 / 2^25, so [r_(5), r_(21)] has level 1 - 2 * 0.000455
    assert ps.interval_rank(25, 0.05 / FAMILY) == 5
    assert ps.interval_rank(25, 0.05) == 8  # the uncorrected 95 % interval: [r_(8), r_(18)]
    assert ps.interval_rank(11, 0.05 / FAMILY) == 1  # [min, max]: all 11 rounds must agree
    assert ps.interval_rank(10, 0.05 / FAMILY) == 0  # 2^-9 > 0.05 / 37: no interval at all
    for n in (5, 11, 25, 60):
        for alpha in (0.05, 0.01, 0.05 / FAMILY):
            k = ps.interval_rank(n, alpha)
            tail = sum(math.comb(n, i) for i in range(k)) / 2**n
            assert k == 0 or 2 * tail <= alpha
            if k + 1 <= (n + 1) // 2:
                assert 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n > alpha  # k is the largest
    assert ps.rounds_needed(0.05 / FAMILY) == 11 and ps.rounds_needed(0.05) == 6


def test_median_interval_is_the_order_statistics():
    ratios = [1.0 + i / 100 for i in (7, 3, 9, 1, 5, 2, 8, 6, 4, 0, 10)]
    result = ps.median_interval(ratios, 0.05)
    k = ps.interval_rank(11, 0.05)
    assert result["median"] == pytest.approx(1.05) and result["rank"] == k == 2
    assert (result["low"], result["high"]) == (pytest.approx(1.01), pytest.approx(1.09))
    assert result["level"] == pytest.approx(1 - 2 * 12 / 2**11)
    assert ps.median_interval([2.0, 4.0], 0.05) == {
        "median": 3.0,
        "low": None,
        "high": None,
        "rounds": 2,
        "rank": 0,
        "level": 0.0,
    }
    with pytest.raises(ValueError, match="empty"):
        ps.median_interval([], 0.05)


def test_verdict_reads_the_interval():
    assert ps.verdict({"low": 1.01, "high": 1.3}) == "A slower"
    assert ps.verdict({"low": 0.7, "high": 0.99}) == "A faster"
    assert ps.verdict({"low": 0.9, "high": 1.1}) == "no difference called"
    assert ps.verdict({"low": None, "high": None}) == "no difference called"


def test_a_true_effect_of_1_3_is_called():
    rng = np.random.default_rng(0)
    for effect, expected in ((1.3, "A slower"), (1 / 1.3, "A faster")):
        calls = [ps.compare(r, FAMILY)["verdict"] for r in simulated_ratios(rng, effect, 25, 200)]
        assert calls.count(expected) == 200
        calls = [ps.compare(r, FAMILY)["verdict"] for r in simulated_ratios(rng, effect, 11, 200)]
        assert calls.count(expected) >= 190  # 11 rounds: all must agree, and nearly always do


def test_identical_distributions_are_not_called_at_the_corrected_level():
    """A family of 37 comparisons with no true difference: in at least 95 % of simulated benchmark
    runs the rule calls none of them (Bonferroni bounds the rate of any call by 5 %)."""
    rng = np.random.default_rng(1)
    sims = 2000
    ratios = simulated_ratios(rng, 1.0, 25, sims * FAMILY, noise=0.03).reshape(sims, FAMILY, 25)
    any_call = [any(ps.compare(r, FAMILY)["verdict"] != "no difference called" for r in run) for run in ratios]
    assert np.mean(any_call) <= 0.05
    # the old rule (third quartile of 11 rounds below 1, no correction) calls something in most runs
    old = np.percentile(ratios[:, :, :11], [25, 75], axis=-1)
    old_any = ((old[1] < 1) | (old[0] > 1)).any(axis=-1)
    assert old_any.mean() > 0.5


def test_the_correction_uses_the_number_of_comparisons():
    assert ps.corrected_alpha(0.05, FAMILY) == pytest.approx(0.05 / FAMILY)
    # 20 of 25 rounds below 1: called alone (level 0.95), not in a family of 37
    ratios = [0.97] * 20 + [1.02] * 5
    alone, in_family = ps.compare(ratios, 1), ps.compare(ratios, FAMILY)
    assert alone["verdict"] == "A faster" and in_family["verdict"] == "no difference called"
    assert in_family["comparisons"] == FAMILY and in_family["level"] >= 1 - 0.05 / FAMILY > alone["level"]
    assert alone["high"] == 0.97 and in_family["high"] == 1.02
    assert ps.rounds_to_call(25, FAMILY) == 21 and ps.rounds_to_call(25, 1) == 18
    assert ps.rounds_to_call(10, FAMILY) is None
    with pytest.raises(ValueError, match="comparisons must be an int >= 1"):
        ps.compare(ratios, 0)
    with pytest.raises(ValueError, match="alpha must be in"):
        ps.corrected_alpha(1.5, 3)


def test_simulated_ratios_have_the_effect_they_are_given():
    ratios = ps.simulated_ratios(401, 1.3, seed=2)
    assert ratios == ps.simulated_ratios(401, 1.3, seed=2) and len(ratios) == 401
    assert abs(ps.median_interval(ratios, 0.05)["median"] / 1.3 - 1) < 0.02
    # the shared load cancels in the ratio: its spread is the calls' noise, not the load's
    assert ps.simulated_ratios(5, 1.0, noise=0.0, load=1.0, seed=3) == pytest.approx([1.0] * 5)


def test_resampled_power_follows_the_rounds_noise():
    """A quiet run calls a 1.3-fold difference nearly always, a noisy one seldom; the shift's sign is kept."""
    quiet = ps.simulated_ratios(25, 1.0, noise=0.03, seed=1)
    noisy = ps.simulated_ratios(25, 1.0, noise=0.25, seed=1)
    assert ps.resampled_power(quiet, 1.3, FAMILY, draws=300) > 0.95
    assert ps.resampled_power(noisy, 1.3, FAMILY, draws=300) < 0.6
    assert ps.resampled_power(quiet, 1 / 1.3, FAMILY, draws=300) > 0.95  # faster, called as faster
    assert ps.resampled_power(quiet, 1.3, FAMILY, draws=50, seed=3) == ps.resampled_power(
        quiet, 1.3, FAMILY, draws=50, seed=3
    )
    with pytest.raises(ValueError, match="effect must be a positive ratio other than 1"):
        ps.resampled_power(quiet, 1.0, FAMILY)


def test_the_simulated_load_cancels_in_the_ratio():
    """Why the simulation checks the rule's arithmetic, not its power: A and B share each round's load."""
    a = ps.simulated_ratios(25, 1.0, load=0.0, seed=3)
    b = ps.simulated_ratios(25, 1.0, load=3.0, seed=3)
    assert max(abs(x - y) / x for x, y in zip(a, b)) < 1e-12
