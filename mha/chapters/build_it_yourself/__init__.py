"""The build-it-yourself chapter: a learner writes multi-head attention, step by step, against checkers.

``build`` (the checkers of the whole module), ``build_steps`` (one checker per step),
``build_diagnosis`` (which slip a wrong output is) and ``build_reference`` (the reference the learner's
code is compared with). The chapter draws no figure.

The checkers' Chinese phrasebook is ``zh_CN.json`` beside them.
"""

from .. import submodules_on_first_use

__getattr__ = submodules_on_first_use(__name__)
