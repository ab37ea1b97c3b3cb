"""The multi-head math chapter: why scores are scaled, and how the model dimension splits into heads.

``scaling`` (the variance of a score, the temperature of the softmax, its checker), ``head_split`` (the
split and merge of heads as tensor operations), ``figures`` (the chapter's figures and explorers) and
``layer_diagram`` (the drawn layer, an SVG that ``scripts/make_figures.py`` writes).

The checkers' Chinese phrasebook is ``zh_CN.json`` beside them.
"""

from .. import submodules_on_first_use

__getattr__ = submodules_on_first_use(__name__)
