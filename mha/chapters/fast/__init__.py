"""The making-it-fast chapter: timings, memory and decoding, measured and explained.

``perf`` (the implementations and their byte counts), ``perf_results`` and ``perf_stats`` (the stored
benchmark results and their statistics), ``perf_exercises`` (the checkers) and ``figures``.

The checkers' Chinese phrasebook is ``zh_CN.json`` beside them.
"""

from .. import submodules_on_first_use

__getattr__ = submodules_on_first_use(__name__)
