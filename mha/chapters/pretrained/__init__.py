"""The pretrained-heads chapter: the heads of a pretrained BERT, their maps, pruning and controls.

``pretrained_analysis`` (attention maps, the head census, value norms, the paraphrase yardstick),
``pretrained_pruning`` (heads removed in order), ``pretrained_controls`` (the controls of the pruning
study), ``pretrained_twins`` (sentence twins), ``pretrained_exercises`` (the checkers) and ``figures``.

The checkers' Chinese phrasebook is ``zh_CN.json`` beside them.
"""

from .. import submodules_on_first_use

__getattr__ = submodules_on_first_use(__name__)
