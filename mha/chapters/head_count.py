"""Chapter 1's experiment: models that differ only in their number of heads.

The task, the model and the training loop are :mod:`mha.chapters.task`'s: at every position,
name the tokens ``1, 2, ..., k`` places back, with one causal attention layer of ``h`` heads.
:func:`head_count_experiment` trains one such model and tests it.

**The comparison.** With ``d_k = d_model / h`` the attention layer has ``4 d_model^2 + 4 d_model``
parameters whatever ``h`` is, and nothing else in the model depends on ``h``: the models differ only
in how the same parameters are cut into heads (:func:`mha.chapters.task.make_model` checks it).

**The cached grid.** ``scripts/make_ch01_cache.py`` trains every (k, h, seed, readout) of
:func:`grid_runs` and stores the results in :data:`CACHE_PATH`; :func:`cached_run`,
:func:`grid_summary` and :func:`cached_maps` read them. The figures are in :mod:`mha.viz.head_count`.
"""

from __future__ import annotations

import json

import torch

from . import DATA_DIR
from .task import D_MODEL, STEPS, make_model, make_task, token_labels, train_and_evaluate

#: The number of relations of the chapter's main setting.
DEFAULT_RELATIONS = 4
#: The grid that ``scripts/make_ch01_cache.py`` trains and caches in :data:`CACHE_PATH`.
GRID_RELATIONS = (1, 2, 3, 4, 6)
GRID_HEADS = (1, 2, 4, 8)
GRID_SEEDS = {"mlp": (0, 1, 2), "linear": (0,)}


def grid_runs() -> list[tuple[str, int, int, int]]:
    """Every ``(readout, num_relations, num_heads, seed)`` of the cached grid, main setting first."""
    runs = []
    for readout, seeds in GRID_SEEDS.items():
        relations = sorted(GRID_RELATIONS, key=lambda k: k != DEFAULT_RELATIONS)
        runs += [(readout, k, h, s) for k in relations for h in GRID_HEADS for s in seeds]
    return runs


#: How the two readouts are named in figures.
READOUT_NAMES = {"mlp": "MLP", "linear": "linear"}

CACHE_PATH = DATA_DIR / "head_count_grid.json"
#: The trained weights :func:`trained_model` loads for its default setting (num_heads, seed, k, readout).
MODEL_PATH = DATA_DIR / "relation_model_h2_seed0.pt"
CACHED_MODEL = (2, 0, DEFAULT_RELATIONS, "mlp")


def head_count_experiment(
    num_heads: int,
    *,
    seed: int = 0,
    num_relations: int = DEFAULT_RELATIONS,
    steps: int = STEPS,
    readout: str = "mlp",
    d_model: int = D_MODEL,
    show_progress: bool = False,
    return_model: bool = False,
) -> dict:
    """Train a one-layer model with ``num_heads`` heads on the copy-at-``k``-offsets task; test it.

    The task: sequences of ``SEQ_LEN`` = 12 uniform tokens from a vocabulary of 16; at each position
    ``t >= k`` the model must name the tokens at ``t - 1, ..., t - k`` at once (``k =
    num_relations``). ``accuracy`` is the held-out fraction of positions where all ``k`` answers
    are right (chance: ``16**-k``). The model: token + position embeddings (``d_model`` = 32), one
    causal ``mha.FusedMultiHeadAttention(d_model, num_heads)`` with a residual, and an MLP (default) or
    linear readout; ``d_k = d_model / num_heads``, so the parameter count does not depend on
    ``num_heads``. ``seed`` fixes the data, the initial weights and the minibatch order.

    Returns:
        the dict of :func:`train_and_evaluate` plus ``num_relations``, ``seed``, ``readout`` (and
        ``model``, the trained :class:`RelationModel`, when ``return_model`` is true).
    """
    task = make_task(num_relations, seed=seed)
    model = make_model(num_heads, task, seed=seed, d_model=d_model, readout=readout)
    result = train_and_evaluate(model, task, steps=steps, seed=seed, show_progress=show_progress)
    result.update(num_relations=num_relations, seed=seed, readout=readout)
    if return_model:
        result["model"] = model
    return result


def trained_model(num_heads: int = 2, *, seed: int = 0, num_relations: int = DEFAULT_RELATIONS, readout: str = "mlp"):
    """A trained chapter-1 model and a held-out example to look at.

    The default model (2 heads, seed 0, k = 4, MLP readout) is loaded from the package's cache
    (:data:`MODEL_PATH`, the weights :func:`head_count_experiment` trained); other settings train
    on the CPU (about 1,500 steps, a few seconds on an idle core).

    Returns:
        ``(model, tokens, labels)``: the trained :class:`RelationModel` (eval mode, on the CPU),
        ``tokens`` (T,) int64, the first held-out sequence, and ``labels``, T strings such as
        ``"3:f"`` (position 3 holds symbol f). ``model(tokens[None])`` returns logits
        (1, T, K, V) and weights (1, H, T, T).
    """
    task = make_task(num_relations, seed=seed)
    key = (num_heads, seed, num_relations, readout)
    if key == CACHED_MODEL and MODEL_PATH.exists():
        model = make_model(num_heads, task, seed=seed, readout=readout)
        model.load_state_dict(torch.load(MODEL_PATH, weights_only=True))
    else:
        result = head_count_experiment(
            num_heads, seed=seed, num_relations=num_relations, readout=readout, return_model=True
        )
        model = result["model"]
    example = task.test_x[0]
    return model.eval(), example, token_labels(example)


# --------------------------------------------------------------------------------------------
# The cached grid (written by scripts/make_ch01_cache.py)
# --------------------------------------------------------------------------------------------

_CACHE: dict = {}


def load_grid() -> dict:
    """The cached grid: ``{"config": ..., "runs": [...], "maps": [...]}`` (read once, then kept)."""
    if "grid" not in _CACHE:
        if not CACHE_PATH.exists():
            raise FileNotFoundError(f"{CACHE_PATH} is missing: run scripts/make_ch01_cache.py")
        _CACHE["grid"] = json.loads(CACHE_PATH.read_text())
    return _CACHE["grid"]


def cached_run(num_heads: int, *, seed: int = 0, num_relations: int = DEFAULT_RELATIONS, readout: str = "mlp") -> dict:
    """The cached result of ``head_count_experiment(num_heads, seed=..., ...)`` (accuracies rounded to
    4 decimals). Raises KeyError for a setting the grid does not hold."""
    for run in load_grid()["runs"]:
        if (run["num_heads"], run["seed"], run["num_relations"], run["readout"]) == (
            num_heads,
            seed,
            num_relations,
            readout,
        ):
            return run
    raise KeyError(
        f"no cached run for num_heads={num_heads}, seed={seed}, num_relations={num_relations}, readout={readout!r}"
    )


def grid_summary(readout: str = "mlp") -> dict:
    """Held-out accuracy over seeds for every (k, h) of the grid.

    Returns:
        dict ``(num_relations, num_heads) -> {"mean", "min", "max", "seeds"}`` (floats, count).
    """
    groups: dict = {}
    for run in load_grid()["runs"]:
        if run["readout"] == readout:
            groups.setdefault((run["num_relations"], run["num_heads"]), []).append(run["accuracy"])
    return {
        key: {"mean": sum(a) / len(a), "min": min(a), "max": max(a), "seeds": len(a)}
        for key, a in sorted(groups.items())
    }


def format_grid(summary: dict, *, spread: bool = True) -> str:
    """A text table: one row per k, one column per h, ``mean ± half the range`` over seeds."""
    relations = sorted({k for k, _ in summary})
    heads = sorted({h for _, h in summary})
    width = 13 if spread else 6
    lines = ["k \\ h " + "".join(f"{h:>{width}}" for h in heads)]
    for k in relations:
        cells = []
        for h in heads:
            s = summary[(k, h)]
            half = (s["max"] - s["min"]) / 2
            cells.append(f"{s['mean']:.2f} ± {half:.2f}" if spread else f"{s['mean']:.2f}")
        lines.append(f"{k:>5} " + "".join(f"{c:>{width}}" for c in cells))
    return "\n".join(lines)


def cached_maps(num_heads: int, seed: int = 0) -> tuple[torch.Tensor, list[str]]:
    """Every head's cached attention map on the first held-out sequence (k = 4, MLP readout).

    Returns:
        weights (H, T, T) float64 (rounded to 3 decimals) and the T token labels.
    """
    for entry in load_grid()["maps"]:
        if (entry["num_heads"], entry["seed"]) == (num_heads, seed):
            return torch.tensor(entry["weights"], dtype=torch.float64), token_labels(entry["tokens"])
    raise KeyError(f"no cached attention maps for num_heads={num_heads}, seed={seed}")


def offset_profile(weights: torch.Tensor, max_offset: int = DEFAULT_RELATIONS) -> torch.Tensor:
    """Average weight each head puts on the key ``o`` positions back, for o = 0..max_offset,
    over the queries where all those keys exist.

    Shapes:
        weights (H, T, T) -> returns (H, max_offset + 1).
    """
    seq_len = weights.shape[-1]
    rows = torch.arange(max_offset, seq_len)  # queries with every offset available
    return torch.stack([weights[:, rows, rows - o].mean(dim=-1) for o in range(max_offset + 1)], dim=-1)


def head_maps_alt(num_heads: int = 2, seed: int = 0) -> str:
    """Alt text of :func:`mha.viz.head_count.render_head_maps`: which offsets each head mostly looks at."""
    weights, _ = cached_maps(num_heads, seed)
    profile = offset_profile(weights)
    parts = []
    for h, row in enumerate(profile):
        top = [str(o) for o in range(row.shape[0]) if row[o] >= 0.2]
        where = " and ".join(top) + " places back" if top else "no single offset"
        parts.append(f"head {h + 1} attends mostly to the tokens {where}")
    plural = "s" if num_heads > 1 else ""
    return f"{num_heads} head{plural}, seed {seed}: " + "; ".join(parts) + "."
