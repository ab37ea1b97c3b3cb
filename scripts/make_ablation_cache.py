"""Recompute the pretrained-heads chapter's pruning study of all-MiniLM-L6-v2 and store it with its provenance.

Usage: python scripts/make_ablation_cache.py   (one thread, float32 on the CPU, with a progress bar:
17 minutes on a busy shared 2-core machine, the time it records in its provenance; most of it is
the two greedy searches, 2 x 2,628 runs over 24 sentences)
       python scripts/make_ablation_cache.py --only parking   (seconds: recompute only the parking
heads' comparison with unmatched random head sets, in the stored file; it first checks that the entries it
shares with the stored file agree, and records its own provenance in that section)
       python scripts/make_ablation_cache.py --only controls   (about 10 minutes: the two controls of
``mha.chapters.pretrained.pretrained_controls``, 199 fresh random orders per fold and the disjoint matched sets,
stored as the ``controls`` section after the same check)

Writes ``mha/data/minilm_head_ablation.json`` (``mha.chapters.pretrained.pretrained_pruning.ablation_study``
on the course's sentence pairs). Then it measures how far the chapter's live re-run, which computes
in float64, lands from these float32 numbers (``live_check``): the chapter asserts that tolerance.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

import numpy as np
import torch

from mha import bert
from mha.chapters.pretrained import pretrained_analysis as analysis
from mha.chapters.pretrained import pretrained_controls as controls
from mha.chapters.pretrained import pretrained_pruning as pruning
from mha.provenance import provenance


def parking_heads(model, tokenizer) -> list[int]:
    """The census's "special" heads (flat indices), computed as the pretrained-heads chapter computes them."""
    pairs = analysis.load_sentence_pairs()
    sentences = [a for a, _ in pairs] + [b for _, b in pairs]
    _, maps = analysis.attention_maps(model, tokenizer, sentences)
    labels = analysis.classify_heads(analysis.head_scores(maps))
    return [int(i) for i in np.flatnonzero(labels.ravel() == "special")]


def progress_bar(total: int):
    """A callable that advances a tqdm bar (or does nothing without tqdm / with TQDM_DISABLE)."""
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return lambda n=1: None, None
    bar = tqdm(total=total, desc="pretrained-heads pruning study", unit="pass", smoothing=0.05)
    return bar.update, bar


def update_parking(tolerance: float) -> int:
    """Recompute the stored study's ``parking`` section alone, with its own provenance."""
    start = time.perf_counter()
    study = json.loads(pruning.ABLATION_RESULTS.read_text())
    pruning.load_ablation_study()  # refuses a study computed on another sentence-pair file
    model, tokenizer = bert.load_model(), bert.load_tokenizer()
    parking = parking_heads(model.double(), tokenizer)
    model = model.float()
    if parking != study["parking"]["heads"]:
        raise SystemExit(f"the census's parking heads changed ({parking}): rebuild the whole study")
    batches = analysis.pair_batches(tokenizer, analysis.load_sentence_pairs())
    section = pruning.parking_check(model, batches, parking, study["random"]["orders"])
    old = study["parking"]
    shared = [(old["parking_removed"], section["parking_removed"])] + list(
        zip(old["random_removed"], section["random_removed"])
    )
    largest = max(abs(a["margin"] - b["margin"]) for a, b in shared)
    if largest > tolerance:
        raise SystemExit(f"recomputed parking margins differ from the stored ones by {largest:.2g}: rebuild the study")
    section["provenance"] = provenance(
        "python scripts/make_ablation_cache.py --only parking",
        seeds={"random_orders": study["seeds"]["random_orders"]},
        random_sets=pruning.NUM_RANDOM_ORDERS,
        largest_difference_from_stored=float(f"{largest:.3g}"),
        computation="CPU, float32, one thread, mha.chapters.pretrained.pretrained_pruning.parking_check",
        seconds=round(time.perf_counter() - start),
    )
    study["parking"] = section
    print(f"wrote the parking section of {pruning.write_ablation_study(study)} (stored entries agree to {largest:.1e})")
    return 0


def update_controls(tolerance: float) -> int:
    """Compute the stored study's ``controls`` section (``mha.chapters.pretrained.pretrained_controls``)."""
    start = time.perf_counter()
    study = pruning.load_ablation_study()  # refuses a study computed on another sentence-pair file
    model, tokenizer = bert.load_model().float(), bert.load_tokenizer()
    pairs = analysis.load_sentence_pairs()
    total = model.config.num_layers * model.config.num_heads
    orders = controls.fresh_orders(total)
    advance, bar = progress_bar(2 * len(orders))
    folds, largest = [], 0.0
    for fold in study["splits"]:
        held = analysis.pair_batches(tokenizer, [pairs[i] for i in fold["eval_pairs"]])
        stored = dict(zip(fold["held_out"]["ablation"]["removed"], fold["random_held_out"]["margin"][0]))
        again = controls.random_statistics(model, held, [study["random"]["orders"][0]])[0]
        largest = max(
            largest, abs(again - controls.curve_statistic({"removed": list(stored), "margin": list(stored.values())}))
        )
        folds.append(controls.random_statistics(model, held, orders, advance))
    if bar is not None:
        bar.close()
    if largest > tolerance:
        raise SystemExit(f"a recomputed stored curve differs by {largest:.2g}: rebuild the study")
    batches = analysis.pair_batches(tokenizer, pairs)
    section = {
        "random_statistics": [[round(x, 6) for x in f] for f in folds],
        "parking": controls.parking_controls(
            model, batches, study["parking"]["heads"], study["single_head"]["margin"], study["full"]["margin"]
        ),
    }
    section["provenance"] = provenance(
        "python scripts/make_ablation_cache.py --only controls",
        seeds={"test_orders": controls.TEST_SEED, "matched_draws": controls.MATCHED_DRAW_SEED},
        test_orders=controls.NUM_TEST_ORDERS,
        test_counts=list(controls.TEST_COUNTS),
        matched_draws=controls.NUM_MATCHED_DRAWS,
        largest_difference_from_stored=float(f"{largest:.3g}"),
        computation="CPU, float32, one thread, mha.chapters.pretrained.pretrained_controls",
        seconds=round(time.perf_counter() - start),
    )
    raw = json.loads(pruning.ABLATION_RESULTS.read_text())
    raw["controls"] = section
    print(f"wrote the controls section of {pruning.write_ablation_study(raw)} (stored entries agree to {largest:.1e})")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["parking", "controls"], help="recompute one section of the stored study")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # the machine is shared; one thread is also what the timings assume
    if args.only:
        tolerance = json.loads(pruning.ABLATION_RESULTS.read_text())["live_check"]["tolerance"]
        return (update_parking if args.only == "parking" else update_controls)(tolerance)
    start = time.perf_counter()
    model, tokenizer = bert.load_model(), bert.load_tokenizer()
    parking = parking_heads(model.double(), tokenizer)  # labels as the chapter computes them (float64)
    model = model.float()
    advance, bar = progress_bar(pruning.study_work(model.config))
    study = pruning.ablation_study(model, tokenizer, parking, progress=advance)
    if bar is not None:
        bar.close()
    seconds = time.perf_counter() - start

    # The chapter recomputes a few entries in float64: measure how far they land from float32.
    subset = pruning.live_subset(bert.load_model().double(), tokenizer, study)
    largest = pruning.largest_difference(subset)
    study["live_check"] = {
        "entries": list(subset),
        "largest_difference": float(f"{largest:.3g}"),
        # ten times the measured difference, rounded up to a power of ten
        "tolerance": 10.0 ** math.ceil(math.log10(10 * max(largest, 1e-9))),
    }
    study["provenance"] = provenance(
        "python scripts/make_ablation_cache.py",
        seeds=study["seeds"],
        pruning_counts=list(pruning.pruning_counts(model.config)),
        random_orders=pruning.NUM_RANDOM_ORDERS,
        computation="CPU, float32, one thread, mha.chapters.pretrained.pretrained_pruning.ablation_study",
        seconds=round(seconds),
    )
    print(f"wrote {pruning.write_ablation_study(study)} in {seconds / 60:.1f} min")
    tolerance = study["live_check"]["tolerance"]
    print(f"live check: largest float64 - float32 difference {largest:.2e}, tolerance {tolerance:g}")
    return update_controls(tolerance)


if __name__ == "__main__":
    sys.exit(main())
