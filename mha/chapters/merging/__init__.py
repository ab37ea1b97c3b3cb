"""Merging heads: concatenation, averaging and the other merges, in the merging chapter and its experiments.

``merging`` (the merges as modules), ``merge_folding`` (what a merge folds into one matrix),
``merge_training`` (the cached training runs), ``role_heads`` (two heads set by hand), ``merge_exercises``
(the checkers) and ``figures``.

The checkers' Chinese phrasebook is ``zh_CN.json`` beside them.
"""

from .. import submodules_on_first_use

__getattr__ = submodules_on_first_use(__name__)
