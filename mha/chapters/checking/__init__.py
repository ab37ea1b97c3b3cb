"""What every exercise checker shares: the verdict, the rule for numbers, and the verdict's language.

``answers`` (:class:`~mha.chapters.checking.answers.Verdict`, reading an answer, the shared precision rule)
and ``verdict_i18n`` (a verdict in Chinese, from the phrasebooks ``<topic>/zh_CN.json``;
``part_labels.json`` names a verdict's parts).

Its own phrasebook, ``zh_CN.json``, translates the sentences that every checker says.
"""

from .. import submodules_on_first_use

__getattr__ = submodules_on_first_use(__name__)
