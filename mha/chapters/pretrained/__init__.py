"""The pretrained-heads chapter: the heads of a pretrained BERT, their maps, pruning and controls.

``pretrained_analysis`` (attention maps and the head checkers), ``pretrained_pruning`` (heads removed
in order), ``pretrained_controls`` (the random and shuffled controls), ``pretrained_twins`` (sentence
twins) and ``figures``.

The checkers' Chinese phrasebook is ``zh_CN.json`` beside them.
"""

from .. import submodules_on_first_use

__getattr__ = submodules_on_first_use(__name__)
