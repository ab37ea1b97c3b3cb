"""The worked example chapter: five tokens, two heads, every number by hand.

``worked`` (the example and the checkers of its rows), ``worked_diagnosis`` (which slip reproduces a
wrong row), ``worked_edit`` (the reader's own sentence) and ``figures`` (the heatmaps and explorers).

The checkers' Chinese phrasebook is ``zh_CN.json`` beside them.
"""

from .. import submodules_on_first_use

__getattr__ = submodules_on_first_use(__name__)
