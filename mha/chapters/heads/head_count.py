"""The single-head-limits chapter's experiment and its deep dive (the head-count experiments): models that
differ only in their number of heads.

The task, the model and the training loop are :mod:`mha.chapters.heads.task`'s: at every position,
name the tokens ``1, 2, ..., r`` places back (``r = num_relations``, the number of relations), with one
causal attention layer of ``h`` heads.
:func:`head_count_experiment` trains one such model and tests it.

**The comparison.** With ``d_k = d_model / h`` the attention layer has ``4 d_model^2 + 4 d_model``
parameters whatever ``h`` is, and nothing else in the model depends on ``h``: the models differ only
in how the same parameters are cut into heads (:func:`mha.chapters.heads.task.make_model` checks it).

**The cached grid.** ``scripts/make_ch01_cache.py`` trains every (r, h, seed, readout) of
:func:`grid_runs` for 1,500 steps and stores the results in :data:`CACHE_PATH`; :func:`cached_run`,
:func:`grid_summary` and :func:`cached_maps` read them.

**The learning curves.** The same script trains the settings of :data:`CURVE_SETTINGS` once each,
to their largest budget, on :data:`CURVE_SEEDS`, and records training and held-out accuracy at
every budget of :data:`CURVE_STEPS` on the way (:func:`cached_curves`, :func:`curve_summary`).
**The control** (the head-count experiments: does one head fail only for want of tuning?). The grid
trains every head count at one learning rate (0.003) with one readout (128 hidden units).
``scripts/make_ch08_control.py`` trains one head on the headline task (r = 4) at every learning rate of
:data:`CONTROL_RATES` and every readout width of :data:`CONTROL_WIDTHS`, on :data:`CONTROL_SEEDS`, to
:data:`CONTROL_STEPS` steps (evaluated on the way), and stores them in :data:`CONTROL_PATH`
(:func:`control_summary`, :func:`best_control`).
Fixed before any run: a run *solves* at ``SOLVED`` = 0.99; the headline comparison is at 1,500 steps,
the best one-head configuration (highest median over seeds) against two heads at the chapter's
settings. The same file holds :func:`weight_split`: one head's average weight on each offset, r = 2.

The figures are in :mod:`mha.chapters.heads.figures`.
"""

from __future__ import annotations

import json

import torch

from ...counting import attention_params
from .. import DATA_DIR
from ..checking.answers import Report, Verdict, read_int, read_numbers, say
from .task import (
    D_MODEL,
    LEARNING_RATE,
    STEPS,
    make_model,
    make_task,
    spread,
    token_labels,
    train_and_evaluate,
)

#: The number of relations of the chapter's main setting.
DEFAULT_RELATIONS = 4
#: The grid that ``scripts/make_ch01_cache.py`` trains and caches in :data:`CACHE_PATH`.
GRID_RELATIONS = (1, 2, 3, 4, 6)
GRID_HEADS = (1, 2, 4, 8)
GRID_SEEDS = {"mlp": (0, 1, 2), "linear": (0,)}


#: Learning curves: ``(readout, r, h) -> largest budget``. Each run trains once to its budget and
#: is evaluated at every :data:`CURVE_STEPS` on the way. One and two heads get 24,000 steps (the
#: linear readout 12,000); the models with more heads, ahead from the start, get 6,000 to save compute.
CURVE_SETTINGS = {
    ("mlp", 4, 1): 24_000,
    ("mlp", 4, 2): 6_000,
    ("mlp", 6, 1): 24_000,
    ("mlp", 6, 2): 24_000,
    ("mlp", 6, 4): 6_000,
    ("mlp", 6, 8): 6_000,
    ("linear", 2, 1): 12_000,
}
CURVE_SEEDS = (0, 1, 2, 3, 4)
CURVE_STEPS = (250, 500, 1000, 1500, 3000, 6000, 12_000, 24_000)


def curve_runs() -> list[tuple[str, int, int, int, int]]:
    """Every ``(readout, num_relations, num_heads, seed, steps)`` of the cached learning curves."""
    return [(kind, r, h, s, steps) for (kind, r, h), steps in CURVE_SETTINGS.items() for s in CURVE_SEEDS]


def grid_runs() -> list[tuple[str, int, int, int]]:
    """Every ``(readout, num_relations, num_heads, seed)`` of the cached grid, main setting first."""
    runs = []
    for readout, seeds in GRID_SEEDS.items():
        relations = sorted(GRID_RELATIONS, key=lambda r: r != DEFAULT_RELATIONS)
        runs += [(readout, r, h, s) for r in relations for h in GRID_HEADS for s in seeds]
    return runs


#: How the two readouts are named in figures.
READOUT_NAMES = {"mlp": "MLP", "linear": "linear"}

CACHE_PATH = DATA_DIR / "head_count_grid.json"
#: The trained weights :func:`trained_model` loads for its default setting (num_heads, seed, r, readout).
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
    lr: float = LEARNING_RATE,
    readout_width: int | None = None,
    checkpoints=(),
    show_progress: bool = False,
    return_model: bool = False,
) -> dict:
    """Train a one-layer model with ``num_heads`` heads on the copy-at-``r``-offsets task; test it.

    The task: sequences of ``SEQ_LEN`` = 12 uniform tokens from a vocabulary of 16; at each position
    ``t >= r`` the model must name the tokens at ``t - 1, ..., t - r`` at once (``r =
    num_relations``). ``accuracy`` is the held-out fraction of positions where all ``r`` answers
    are right (chance: ``16**-r``). The model: token + position embeddings (``d_model`` = 32), one
    causal ``mha.FusedMultiHeadAttention(d_model, num_heads)`` with a residual, and an MLP (default) or
    linear readout; ``d_k = d_model / num_heads``, so the parameter count does not depend on
    ``num_heads``. ``seed`` fixes the data, the initial weights and the minibatch order. ``steps``
    Adam steps at learning rate ``lr``; ``readout_width`` sets the MLP readout's hidden units (default
    ``4 d_model`` = 128; the control of :data:`CONTROL_WIDTHS` widens it); ``checkpoints`` (step
    counts up to ``steps``) adds the learning curve of this one run (training and held-out accuracy
    at each).

    Returns:
        the dict of :func:`train_and_evaluate` (``curve`` included) plus ``num_relations``, ``seed``,
        ``readout``, ``readout_width`` (the MLP's hidden units, None for the linear readout), and
        ``model``, the trained :class:`RelationModel`, when ``return_model`` is true.
    """
    task = make_task(num_relations, seed=seed)
    model = make_model(num_heads, task, seed=seed, d_model=d_model, readout=readout, readout_width=readout_width)
    result = train_and_evaluate(
        model, task, steps=steps, seed=seed, lr=lr, checkpoints=checkpoints, show_progress=show_progress
    )
    hidden = model.readout[0].out_features if readout == "mlp" else None
    result.update(num_relations=num_relations, seed=seed, readout=readout, readout_width=hidden)
    if return_model:
        result["model"] = model
    return result


def trained_model(num_heads: int = 2, *, seed: int = 0, num_relations: int = DEFAULT_RELATIONS, readout: str = "mlp"):
    """A trained model of the single-head-limits chapter and a held-out example to look at.

    The default model (2 heads, seed 0, r = 4, MLP readout) is loaded from the package's cache
    (:data:`MODEL_PATH`, the weights :func:`head_count_experiment` trained); other settings train
    on the CPU (about 1,500 steps, a few seconds on an idle core).

    Returns:
        ``(model, tokens, labels)``: the trained :class:`RelationModel` (eval mode, on the CPU),
        ``tokens`` (T,) int64, the first held-out sequence, and ``labels``, T strings such as
        ``"3:f"`` (position 3 holds symbol f). ``model(tokens[None])`` returns logits
        (1, T, R, V) and weights (1, H, T, T).
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


def _load_cache(key: str, path, script: str) -> dict:
    """The JSON cache at ``path`` (read once, then kept under ``key``); ``script`` writes it."""
    if key not in _CACHE:
        if not path.exists():
            raise FileNotFoundError(f"{path} is missing: run {script}")
        _CACHE[key] = json.loads(path.read_text())
    return _CACHE[key]


def load_grid() -> dict:
    """The cached grid: ``{"config": ..., "runs": [...], "maps": [...]}`` (read once, then kept)."""
    return _load_cache("grid", CACHE_PATH, "scripts/make_ch01_cache.py")


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
    """Held-out accuracy over seeds for every (r, h) of the grid.

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
    """A text table: one row per r (relations), one column per h, ``mean ± half the range`` over seeds."""
    relations = sorted({r for r, _ in summary})
    heads = sorted({h for _, h in summary})
    width = 13 if spread else 6
    lines = ["r \\ h " + "".join(f"{h:>{width}}" for h in heads)]
    for r in relations:
        cells = []
        for h in heads:
            s = summary[(r, h)]
            half = (s["max"] - s["min"]) / 2
            cells.append(f"{s['mean']:.2f} ± {half:.2f}" if spread else f"{s['mean']:.2f}")
        lines.append(f"{r:>5} " + "".join(f"{c:>{width}}" for c in cells))
    return "\n".join(lines)


def cached_curves(num_heads: int, *, num_relations: int = DEFAULT_RELATIONS, readout: str = "mlp") -> list[dict]:
    """The cached learning curves of one setting, one dict per seed: ``seed``, ``steps`` (the run's
    budget) and ``curve`` (a list of points: ``steps``, ``accuracy``, ``train_accuracy``, ``loss``,
    ``train_loss``, ``relation_accuracy``, rounded to 4 decimals). Raises KeyError for a setting
    without curves."""
    runs = [
        c
        for c in load_grid().get("curves", [])
        if (c["readout"], c["num_relations"], c["num_heads"]) == (readout, num_relations, num_heads)
    ]
    if not runs:
        raise KeyError(
            f"no cached curves for num_heads={num_heads}, num_relations={num_relations}, readout={readout!r}; "
            f"cached: {sorted(CURVE_SETTINGS)}"
        )
    return sorted(runs, key=lambda c: c["seed"])


def curve_summary(
    num_heads: int, *, num_relations: int = DEFAULT_RELATIONS, readout: str = "mlp", key: str = "accuracy"
) -> dict:
    """Over seeds, at every budget of one setting's curves: ``steps -> {"median", "min", "max",
    "values", "solved"}`` (``solved``: seeds at ``key`` >= :data:`mha.chapters.heads.task.SOLVED`)."""
    by_steps: dict = {}
    for run in cached_curves(num_heads, num_relations=num_relations, readout=readout):
        for point in run["curve"]:
            by_steps.setdefault(point["steps"], []).append(point[key])
    return {steps: spread(values) for steps, values in sorted(by_steps.items())}


def format_curves(settings, *, budgets=(1500, 6000, 24_000)) -> str:
    """A text table, one row per setting ``(readout, r, h)`` and budget: held-out median [min, max]
    over seeds, seeds solved, and the median training accuracy (budgets past a run's end are left out)."""
    lines = [
        f"{'readout':7s} {'r':>2s} {'h':>2s} {'steps':>7s}   {'held-out [min, max]':19s}  {'solved':>6s}  {'train':>5s}"
    ]
    for readout, r, h in settings:
        test = curve_summary(h, num_relations=r, readout=readout)
        train = curve_summary(h, num_relations=r, readout=readout, key="train_accuracy")
        for b in budgets:
            if b in test:
                t = test[b]
                cells = f"{t['median']:.2f} [{t['min']:.2f}, {t['max']:.2f}]  {t['solved']:>4d}/{len(t['values'])}"
                lines.append(f"{readout:7s} {r:2d} {h:2d} {b:7,d}   {cells}  {train[b]['median']:5.2f}")
    return "\n".join(lines)


def cached_maps(num_heads: int, seed: int = 0) -> tuple[torch.Tensor, list[str]]:
    """Every head's cached attention map on the first held-out sequence (r = 4, MLP readout).

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
    """Alt text of :func:`mha.chapters.heads.figures.render_head_maps`: which offsets each head mostly looks at."""
    weights, _ = cached_maps(num_heads, seed)
    profile = offset_profile(weights)
    parts = []
    for h, row in enumerate(profile):
        top = [str(o) for o in range(row.shape[0]) if row[o] >= 0.2]
        where = " and ".join(top) + " places back" if top else "no single offset"
        parts.append(f"head {h + 1} attends mostly to the tokens {where}")
    plural = "s" if num_heads > 1 else ""
    return f"{num_heads} head{plural}, seed {seed}: " + "; ".join(parts) + "."


def check_head_params(num_heads, attention_layer=None, head_dim=None, *, d_model: int = D_MODEL) -> Verdict:
    """Check the single-head-limits chapter's exercise 3: the attention layer's parameters and d_k for
    ``num_heads`` heads.

    Args:
        num_heads: h (a divisor of ``d_model``).
        attention_layer: your count of the attention layer's parameters (biases included).
        head_dim: your d_k, the number of values in each head's query vector.

    Returns:
        :class:`mha.chapters.checking.answers.Verdict`; malformed input gives a message, never an exception.
    """
    report = Report(
        say("attention layer with d_model = {d_model}, h = {num_heads!r}", d_model=d_model, num_heads=num_heads)
    )
    h, problem = read_int("num_heads", num_heads)
    if problem or h < 1 or d_model % h:
        report.wrong(
            "num_heads",
            problem or say("must divide d_model = {d_model}, found {h}", d_model=d_model, h=h),
            say("pick h in 1, 2, 4, 8"),
        )
        return report.done()
    expected = attention_params(d_model, h)
    if attention_layer is None:
        report.skipped("attention_layer")
    else:
        mine, problem = read_numbers("attention_layer", attention_layer, ())
        slips = {
            4 * d_model**2: say("that is W_Q, W_K, W_V and W_O without their biases (4 x d_model more)"),
            3 * d_model**2 + 3 * d_model: say("W_O is part of the layer too (d_model^2 + d_model)"),
            4 * h * d_model**2 + 4 * h * d_model: say(
                "each head has d_model x d_k blocks, not d_model x d_model matrices"
            ),
        }
        if problem:
            report.wrong("attention_layer", problem, say("give one whole number"))
        elif int(mine) == expected and float(mine) == expected:
            report.right("attention_layer")
        else:
            hint = slips.get(
                int(mine), say("4 matrices of d_model x d_model, plus 4 bias vectors of d_model: for every h")
            )
            report.wrong("attention_layer", say("{value:,.0f} is not it", value=float(mine)), hint)
    if head_dim is None:
        report.skipped("head_dim")
    else:
        mine, problem = read_numbers("head_dim", head_dim, ())
        if problem:
            report.wrong("head_dim", problem, say("give one whole number"))
        elif float(mine) == d_model // h:
            report.right("head_dim")
        elif float(mine) in (d_model, d_model * h):
            report.wrong(
                "head_dim",
                say("{value:g} is not it", value=float(mine)),
                say("the heads split d_model between them: d_k = d_model / h"),
            )
        else:
            report.wrong("head_dim", say("{value:g} is not it", value=float(mine)), say("d_k = d_model / h"))
    return report.done()


# --------------------------------------------------------------------------------------------
# The control: one head with a tuned rate and a wider readout (scripts/make_ch08_control.py)
# --------------------------------------------------------------------------------------------

#: One head on the headline task, r = 4: every learning rate x readout width x seed, trained once
#: to :data:`CONTROL_STEPS` and evaluated at every :data:`CONTROL_CHECKPOINTS` on the way.
CONTROL_HEADS = 1
CONTROL_RELATIONS = DEFAULT_RELATIONS
CONTROL_RATES = (0.001, 0.003, 0.01)
CONTROL_WIDTHS = (128, 512)
CONTROL_SEEDS = (0, 1, 2)
CONTROL_STEPS = 6000
CONTROL_CHECKPOINTS = tuple(s for s in CURVE_STEPS if s <= CONTROL_STEPS)
#: The weight split: one head, r = 2, MLP readout, the grid's seeds and budget.
SPLIT_RELATIONS = 2
SPLIT_SEEDS = GRID_SEEDS["mlp"]
CONTROL_PATH = DATA_DIR / "head_count_control.json"


def control_runs() -> list[tuple[float, int, int]]:
    """Every ``(lr, readout_width, seed)`` of the control, the chapter's own setting first."""
    configs = sorted(
        ((lr, w) for lr in CONTROL_RATES for w in CONTROL_WIDTHS), key=lambda c: c != (LEARNING_RATE, 4 * D_MODEL)
    )
    return [(lr, w, s) for lr, w in configs for s in CONTROL_SEEDS]


def load_control() -> dict:
    """The cached control: ``{"runs": [...], "splits": [...], "provenance": ...}`` (read once, then kept)."""
    return _load_cache("control", CONTROL_PATH, "scripts/make_ch08_control.py")


def control_summary(steps: int = STEPS, *, key: str = "accuracy") -> dict:
    """Over seeds, for every ``(lr, readout_width)`` of the control after ``steps`` steps: the
    :func:`mha.chapters.heads.task.spread` of ``key`` (``median``, ``min``, ``max``, ``values``, ``solved``).
    Raises KeyError for a budget the control did not evaluate."""
    if steps not in CONTROL_CHECKPOINTS:
        raise KeyError(f"the control was evaluated at {CONTROL_CHECKPOINTS} steps, not {steps!r}")
    groups: dict = {}
    for run in load_control()["runs"]:
        point = next(p for p in run["curve"] if p["steps"] == steps)
        groups.setdefault((run["lr"], run["readout_width"]), []).append(point[key])
    return {config: spread(values) for config, values in sorted(groups.items())}


def best_control(steps: int = STEPS) -> tuple[tuple[float, int], dict]:
    """The control's best configuration after ``steps`` steps: the highest median held-out accuracy
    over seeds (ties: the higher minimum). Returns ``((lr, readout_width), spread)``."""
    summary = control_summary(steps)
    config = max(summary, key=lambda c: (summary[c]["median"], summary[c]["min"]))
    return config, summary[config]


def held_out_profile(model, task, max_offset: int) -> torch.Tensor:
    """Each head's average weight on the key ``o`` places back (o = 0..max_offset), over every
    held-out sequence and every query that has all those keys, and (last column) the weight left over
    for the keys further back.

    Shapes:
        returns (H, max_offset + 2) float64; each row sums to 1.
    """
    model.eval()
    with torch.no_grad():
        _, weights = model(task.test_x)  # (N, H, T, T)
    maps = weights.to("cpu", torch.float64).mean(dim=0)  # (H, T, T)
    profile = offset_profile(maps, max_offset)  # (H, max_offset + 1)
    return torch.cat([profile, 1 - profile.sum(dim=-1, keepdim=True)], dim=-1)


def weight_split(seed: int = 0) -> dict:
    """The cached weight split of one head on r = 2 (MLP readout, 1,500 steps): ``seed``,
    ``accuracy`` (held-out), ``profile`` (the weight on the tokens 0, 1, 2 places back and on the rest,
    as :func:`held_out_profile`). Raises KeyError for a seed the cache does not hold."""
    for entry in load_control()["splits"]:
        if entry["seed"] == seed:
            return entry
    raise KeyError(f"no cached weight split for seed={seed}; cached: {SPLIT_SEEDS}")


def format_control(budgets=(1500, 6000)) -> str:
    """A text table of the control: one row per (learning rate, readout width), with the whole model's
    parameters and, per budget, the held-out median [min, max] over seeds and the seeds solved
    (``2/3``: two of three seeds)."""
    summaries = {b: control_summary(b) for b in budgets}
    params = {(r["lr"], r["readout_width"]): r["params"] for r in load_control()["runs"]}
    # 68 characters for two budgets: the table fits the book's code column (74) without scrolling
    head = f"{'lr':>6s} {'width':>5s} {'params':>7s}" + "".join(f"   {f'{b:,} steps, solved':>21s}" for b in budgets)
    lines = [head]
    for config in sorted(summaries[budgets[0]]):
        cells = ""
        for b in budgets:
            s = summaries[b][config]
            cells += f"   {s['median']:.2f} [{s['min']:.2f}, {s['max']:.2f}] {s['solved']}/{len(s['values'])}"
        lines.append(f"{config[0]:6.3f} {config[1]:5d} {params[config]:7,d}{cells}")
    return "\n".join(lines)
