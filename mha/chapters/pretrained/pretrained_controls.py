"""The controls of the pruning study's two claims, fixed before their data were drawn.

The stored study (:mod:`mha.chapters.pretrained.pretrained_pruning`) judged each ranking against 20 random orders
count by count, and the parking heads against random sets drawn from their own layers. Neither design
can carry a claim: no comparison against 20 orders has a p-value below 1/21, and the layer-matched sets
shared about 28 of their 40 heads with the parking set. The two controls here replace them:

* **One statistic per ranking and fold** (:func:`curve_statistic`): the mean held-out margin over the
  counts :data:`TEST_COUNTS` (6 to 66 heads removed: every count at which orders can differ). It is
  compared with :data:`NUM_TEST_ORDERS` fresh random orders (seed :data:`TEST_SEED`, drawn after the
  statistic was fixed), each judged on the same held-out half. The p-value is the share of the random
  orders and the ranking itself with a statistic at least as high (:func:`monte_carlo_p`), and the six
  p-values (three rankings, two folds) are corrected by Holm's method at :data:`FAMILY_ALPHA`
  (:func:`holm`). With 199 orders the smallest p-value is 1/200 = 0.005, below 0.05 / 6.
* **Matched sets without the parking heads** (:func:`disjoint_matched_sets`): in each stratum (a layer,
  or a layer and the sign of the heads' single removals) as many heads as both the parking heads and
  the others have there, drawn from each side. The two sets of a draw have the same profile and share
  no head; where a layer has fewer other heads than parking heads, only that many take part.

Shape legend: R random orders, K counts.
"""

from __future__ import annotations

import numpy as np

from ...bert import BertEncoder
from .pretrained_analysis import quality_with_heads
from .pretrained_pruning import head_mask_from_order, random_orders

#: The counts of removed heads the statistic averages over (0 and all 72 give the same model for any order).
TEST_COUNTS = tuple(range(6, 67, 6))
NUM_TEST_ORDERS = 199
TEST_SEED = 3
#: Familywise error rate of the six ranking-and-fold comparisons (Holm's method).
FAMILY_ALPHA = 0.05
#: How many disjoint matched pairs of sets :func:`parking_controls` draws per matching, and their seed.
NUM_MATCHED_DRAWS = 100
MATCHED_DRAW_SEED = 4


def curve_statistic(curve: dict) -> float:
    """The mean margin of a pruning curve (``removed``, ``margin``) over :data:`TEST_COUNTS`."""
    at = dict(zip(curve["removed"], curve["margin"]))
    missing = [c for c in TEST_COUNTS if c not in at]
    if missing:
        raise ValueError(f"curve must have a margin at every count of {TEST_COUNTS}, missing {missing}")
    return float(np.mean([at[c] for c in TEST_COUNTS]))


def fresh_orders(total: int) -> list[list[int]]:
    """The :data:`NUM_TEST_ORDERS` fresh random orders of the ``total`` heads (seed :data:`TEST_SEED`)."""
    return random_orders(total, NUM_TEST_ORDERS, TEST_SEED)


def random_statistics(model: BertEncoder, batches, orders, progress=None) -> list[float]:
    """:func:`curve_statistic` of each random order in ``orders``, judged on ``batches``."""
    stats = []
    for order in orders:
        margins = [
            quality_with_heads(model, batches, head_mask_from_order(model.config, order, c)).margin for c in TEST_COUNTS
        ]
        stats.append(float(np.mean(margins)))
        if progress:
            progress(1)
    return stats


def monte_carlo_p(observed: float, random_stats) -> float:
    """(1 + the number of random statistics >= ``observed``) / (1 + their number): one-sided, exact under
    the hypothesis that the ranking is one more random order."""
    random_stats = np.asarray(random_stats, dtype=float)
    return float((1 + np.sum(random_stats >= observed)) / (1 + random_stats.size))


def holm(p_values: dict, alpha: float = FAMILY_ALPHA) -> dict:
    """Holm's step-down correction: name -> whether its hypothesis is rejected at familywise ``alpha``."""
    rejected, ordered = {}, sorted(p_values, key=lambda name: p_values[name])
    still = True
    for i, name in enumerate(ordered):
        still = still and p_values[name] <= alpha / (len(ordered) - i)
        rejected[name] = still
    return rejected


def disjoint_matched_sets(strata, chosen, count: int = NUM_MATCHED_DRAWS, seed: int = MATCHED_DRAW_SEED):
    """``count`` pairs ``(from_chosen, from_others)`` of sorted flat head indices. In each stratum with
    k chosen heads and n others, both sets take min(k, n) heads, drawn without replacement from its own
    side, so that the two sets have the same profile over the strata and share no head.

    Shapes: strata, one label per head, (L·H,) or (L, H); chosen, flat head indices.
    """
    strata = np.asarray(strata).ravel()
    chosen = sorted({int(i) for i in chosen})
    if not chosen or chosen[0] < 0 or chosen[-1] >= strata.size:
        raise ValueError(f"chosen must be head indices in [0, {strata.size}), found {chosen}")
    is_chosen = np.zeros(strata.size, dtype=bool)
    is_chosen[chosen] = True
    sides = [
        (np.flatnonzero(is_chosen & (strata == s)), np.flatnonzero(~is_chosen & (strata == s)))
        for s in np.unique(strata)
    ]
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range(count):
        a, b = [], []
        for mine, others in sides:
            k = min(mine.size, others.size)
            a += rng.choice(mine, size=k, replace=False).tolist()
            b += rng.choice(others, size=k, replace=False).tolist()
        pairs.append((sorted(int(i) for i in a), sorted(int(i) for i in b)))
    return pairs


def margin_without(model: BertEncoder, batches, heads) -> float:
    """The margin on ``batches`` with the heads ``heads`` (flat indices) removed."""
    return quality_with_heads(model, batches, head_mask_from_order(model.config, list(heads), len(heads))).margin


def parking_controls(model: BertEncoder, batches, parking, single_margin, full_margin: float) -> dict:
    """:func:`disjoint_matched_sets` of the ``parking`` heads and the others, matched by layer and by layer
    and the sign of each head's single removal (``single_margin`` (L, H) against ``full_margin``); each
    set removed on ``batches``. Returns per matching the set size and the two sides' margins."""
    num_heads = np.shape(single_margin)[-1]
    layer = np.arange(np.size(single_margin)) // num_heads  # (L·H,)
    raises = np.asarray(single_margin).ravel() > full_margin  # (L·H,)
    result = {"seed": MATCHED_DRAW_SEED}
    for name, strata in (("layer", layer), ("layer_and_sign", 2 * layer + raises)):
        pairs = disjoint_matched_sets(strata, parking)
        result[name] = {
            "size": len(pairs[0][0]),
            "parking": [round(margin_without(model, batches, a), 6) for a, _ in pairs],
            "others": [round(margin_without(model, batches, b), 6) for _, b in pairs],
        }
    return result
