"""Recompute chapter 7's head ablation of all-MiniLM-L6-v2 and store it with its provenance.

Usage: python scripts/make_ablation_cache.py   (about a hundred forward passes: a minute or two on a CPU)

Writes ``mha/data/minilm_head_ablation.json`` (``mha.chapters.pretrained_analysis.ablation_study`` on the course's
sentence pairs, float32 on the CPU). Chapter 7 reads it and recomputes the full model's margin live.
"""

from __future__ import annotations

import sys

from mha import bert
from mha.chapters import pretrained_analysis as pretrained
from mha.provenance import provenance


def main() -> int:
    model, tokenizer = bert.load_model(), bert.load_tokenizer()
    study = pretrained.ablation_study(model, tokenizer)
    study["provenance"] = provenance(
        "python scripts/make_ablation_cache.py",
        seed=study["seed"],
        pruning_counts=list(pretrained.pruning_counts(model.config)),
        computation="CPU, float32, mha.chapters.pretrained_analysis.ablation_study",
    )
    print(f"wrote {pretrained.write_ablation_study(study)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
