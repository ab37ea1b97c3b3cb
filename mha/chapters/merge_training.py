"""Chapter 5's experiment (shown in its deep dive, ``chapters/09_merging_experiments.md``): chapter 1's
task and model, trained with each way of merging the heads.

:func:`merge_experiment` trains the one-layer model of :mod:`mha.chapters.task` with
``MergedMultiHeadAttention(merge=strategy)`` (:mod:`mha.chapters.merging`) and tests it; with
``checkpoints`` it records the run's learning curve (training and held-out accuracy at each budget).

**The cached sweeps** (:data:`SWEEPS`, trained by ``scripts/make_merge_results.py`` into
:data:`RESULTS_PATH`), each run trained once to its largest budget:

* ``"main"``: the four-relation task, every strategy of :data:`STRATEGIES` (the four merges and
  the bottleneck-matched control ``concat_lowrank``), 5 seeds, the default learning rate;
* ``"lr"``: the same task at two other learning rates (a small sweep, 3 seeds);
* ``"easy"``: the two-relation task, every strategy, 5 seeds, 1,500 steps.

:func:`load_merge_results` reads them; :func:`at_budget` and :func:`summarize` give the accuracy
of every run at one budget and its spread over seeds. The figures are in :mod:`mha.viz.merging`.
"""

from __future__ import annotations

import json
from pathlib import Path

from . import DATA_DIR
from . import task as relation_task
from .merging import STRATEGIES, MergedMultiHeadAttention, check_merge

#: Where ``scripts/make_merge_results.py`` stores the sweeps the chapter reads.
RESULTS_PATH = DATA_DIR / "merge_results.json"
#: The model of the experiment: chapter 1's, with 4 heads (d_k = 8) and the linear readout.
NUM_HEADS = 4
READOUT = "linear"
#: Budgets (Adam steps) at which every run is evaluated on its way to its largest budget.
CHECKPOINTS = (250, 500, 1000, 1500, 3000, 6000, 12_000)
#: The cached sweeps: task (relations k), strategies, seeds, learning rates, largest budget.
SWEEPS = {
    "main": {"num_relations": 4, "seeds": (0, 1, 2, 3, 4), "lrs": (relation_task.LEARNING_RATE,), "steps": 12_000},
    "lr": {"num_relations": 4, "seeds": (0, 1, 2), "lrs": (1e-3, 1e-2), "steps": 6_000},
    "easy": {"num_relations": 2, "seeds": (0, 1, 2, 3, 4), "lrs": (relation_task.LEARNING_RATE,), "steps": 1_500},
}


def merge_experiment(
    strategy: str,
    *,
    seed: int = 0,
    num_relations: int = 4,
    steps: int = relation_task.STEPS,
    lr: float = relation_task.LEARNING_RATE,
    num_heads: int = NUM_HEADS,
    readout: str = READOUT,
    checkpoints=(),
    show_progress: bool = False,
) -> dict:
    """Train chapter 1's one-layer model with ``MergedMultiHeadAttention(merge=strategy)``; test it.

    The task is chapter 1's (:func:`mha.chapters.task.make_task`): at each position ``t >= k`` name
    the tokens at ``t - 1, ..., t - k`` at once (``k = num_relations``; vocabulary 16, 12 tokens).
    Everything but the merge is the same: d_model 32, ``num_heads`` heads, embeddings, residual,
    readout (linear by default), Adam at ``lr`` for ``steps`` steps, data and seed (the seed fixes
    the data, the initial weights and the batch order). ``checkpoints`` (step counts up to
    ``steps``) adds the run's learning curve.

    Returns:
        dict with ``accuracy`` (held-out, all k answers right), ``relation_accuracy`` (k floats),
        ``train_accuracy``, ``params`` (whole model), ``attention_params``, ``merge_params``,
        ``strategy``, ``seed``, ``num_relations``, ``num_heads``, ``readout``, ``steps``, ``lr`` and
        ``curve`` (a list of points, see :func:`mha.chapters.task.snapshot`). Plain numbers:
        JSON-ready.
    """
    check_merge(strategy)
    task = relation_task.make_task(num_relations, seed=seed)
    model = make_merge_model(strategy, task, seed=seed, num_heads=num_heads, readout=readout)
    result = relation_task.train_and_evaluate(
        model, task, steps=steps, seed=seed, lr=lr, checkpoints=checkpoints, show_progress=show_progress
    )
    keep = ("accuracy", "relation_accuracy", "train_accuracy", "params", "attention_params", "steps", "lr", "curve")
    out = {key: result[key] for key in keep}
    out.update(
        merge_params=sum(p.numel() for p in model.attention.merge_layer.parameters()),
        strategy=strategy,
        seed=seed,
        num_relations=num_relations,
        num_heads=num_heads,
        readout=readout,
    )
    return out


def make_merge_model(
    strategy: str, task: relation_task.Task, *, seed: int = 0, num_heads: int = NUM_HEADS, readout: str = READOUT
) -> relation_task.RelationModel:
    """Chapter 1's model for ``task`` with ``MergedMultiHeadAttention(merge=strategy)``, its initial
    weights fixed by ``seed`` (the model :func:`merge_experiment` trains)."""
    check_merge(strategy)

    def attention(d_model, heads):
        return MergedMultiHeadAttention(d_model, heads, merge=strategy)

    return relation_task.make_model(num_heads, task, seed=seed, readout=readout, attention=attention)


def model_params(strategy: str, num_relations: int = 4, **kwargs) -> int:
    """Parameters of the whole model of the experiment with merge ``strategy`` on the task with
    ``num_relations`` relations, counted on a freshly built model (``kwargs``: see :func:`make_merge_model`)."""
    model = make_merge_model(strategy, relation_task.make_task(num_relations), **kwargs)
    return sum(p.numel() for p in model.parameters())


def sweep_runs(sweeps: dict = SWEEPS) -> list[dict]:
    """Every run of ``sweeps``: dicts with ``sweep``, ``strategy``, ``seed``, ``num_relations``,
    ``lr`` and ``steps`` (its largest budget), in the order the script trains them."""
    runs = []
    for name, sweep in sweeps.items():
        for lr in sweep["lrs"]:
            for strategy in STRATEGIES:
                for seed in sweep["seeds"]:
                    runs.append(
                        {
                            "sweep": name,
                            "strategy": strategy,
                            "seed": seed,
                            "num_relations": sweep["num_relations"],
                            "lr": lr,
                            "steps": sweep["steps"],
                        }
                    )
    return runs


def run_key(run: dict) -> tuple:
    """What identifies a run of the sweeps: ``(sweep, strategy, seed, lr)``."""
    return (run["sweep"], run["strategy"], run["seed"], float(run["lr"]))


# --------------------------------------------------------------------------------------------
# Reading the cached sweeps
# --------------------------------------------------------------------------------------------


def load_merge_results(path: Path | str = RESULTS_PATH) -> list[dict]:
    """The cached runs written by ``scripts/make_merge_results.py`` (a list of run dicts, each
    with its ``sweep`` and its ``curve``)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run scripts/make_merge_results.py")
    return json.loads(path.read_text())["runs"]


def select(runs: list[dict], sweep: str = "main", *, strategy=None, lr=None) -> list[dict]:
    """The runs of one sweep (optionally one strategy, one learning rate), ordered by seed."""
    chosen = [
        r
        for r in runs
        if r["sweep"] == sweep
        and (strategy is None or r["strategy"] == strategy)
        and (lr is None or abs(r["lr"] - lr) < 1e-12)
    ]
    return sorted(chosen, key=lambda r: (STRATEGIES.index(r["strategy"]), r["lr"], r["seed"]))


def point_at(run: dict, steps: int) -> dict:
    """The point of ``run``'s curve at ``steps`` (KeyError naming the budgets it has otherwise)."""
    for point in run["curve"]:
        if point["steps"] == steps:
            return point
    budgets = [p["steps"] for p in run["curve"]]
    raise KeyError(f"run {run_key(run)} has no point at {steps} steps; it has {budgets}")


def at_budget(runs: list[dict], steps: int, sweep: str = "main", *, strategy=None, lr=None) -> list[dict]:
    """Every selected run's point at ``steps``, with the run's ``strategy``, ``seed``, ``lr``,
    ``params`` and ``merge_params`` added."""
    rows = []
    for run in select(runs, sweep, strategy=strategy, lr=lr):
        point = dict(point_at(run, steps))
        point.update({key: run[key] for key in ("strategy", "seed", "lr", "params", "merge_params")})
        rows.append(point)
    return rows


def summarize(runs: list[dict], steps: int, sweep: str = "main", *, lr=None, key: str = "accuracy") -> dict:
    """``strategy -> spread over seeds`` (:func:`mha.chapters.task.spread`) of ``key`` at ``steps``,
    in :data:`STRATEGIES` order; each also carries ``params`` and ``merge_params``."""
    out = {}
    for strategy in STRATEGIES:
        rows = at_budget(runs, steps, sweep, strategy=strategy, lr=lr)
        if rows:
            out[strategy] = relation_task.spread([r[key] for r in rows])
            out[strategy].update(params=rows[0]["params"], merge_params=rows[0]["merge_params"])
    return out


def format_table(runs: list[dict], budgets, sweep: str = "main", *, lr=None) -> str:
    """A text table, one row per (strategy, budget): parameters, held-out median [min, max] over
    seeds, seeds solved, and the median training accuracy."""
    lines = [f"{'merge':15s}{'params':>7s}{'steps':>8s}   {'held-out [min, max]':19s}  {'solved':>6s}  {'train':>5s}"]
    for b in budgets:
        test = summarize(runs, b, sweep, lr=lr)
        train = summarize(runs, b, sweep, lr=lr, key="train_accuracy")
        for strategy, t in test.items():
            cells = f"{t['median']:.2f} [{t['min']:.2f}, {t['max']:.2f}]  {t['solved']:>4d}/{len(t['values'])}"
            lines.append(f"{strategy:15s}{t['params']:7,d}{b:8,d}   {cells}  {train[strategy]['median']:5.2f}")
    return "\n".join(lines)
