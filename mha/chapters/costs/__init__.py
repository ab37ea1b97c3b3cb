"""What attention costs: the parameter-analysis chapter and the where-next chapter's published models.

``configs`` (parameters, FLOPs and the KV cache, by configuration), ``config_exercises`` (their
checkers), ``models`` (BERT, GPT-2 and Llama 2 as data, also used by the making-it-fast chapter),
``tables`` (plain-text tables, used by other chapters too) and ``figures``.

The checkers' Chinese phrasebook is ``zh_CN.json`` beside them.
"""

from .. import submodules_on_first_use

__getattr__ = submodules_on_first_use(__name__)
