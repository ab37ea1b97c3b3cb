"""One head's limits and how many heads a task needs: the single-head-limits chapter and the head-count experiments.

``single_head`` (one head splitting its attention between two relations), ``softmax_demo`` (one query's
lookup and the temperature), ``head_count`` and ``readout`` (the trained grid, its controls and checkers),
``task`` (the synthetic relation task the experiments train on, also used by the merging experiments)
and ``figures`` (every figure and explorer of both chapters).

The checkers' Chinese phrasebook is ``zh_CN.json`` beside them.
"""

from .. import submodules_on_first_use

__getattr__ = submodules_on_first_use(__name__)
