"""The merging experiments (``chapter("merging_experiments")``, the training behind the merging-heads
chapter's merges): the single-head-limits chapter's task and model, trained with each way of merging
the heads.

:func:`merge_experiment` trains the one-layer model of :mod:`mha.chapters.heads.task` with
``MergedMultiHeadAttention(merge=strategy)`` (:mod:`mha.chapters.merging.merging`) and tests it; with
``checkpoints`` it records the run's learning curve (training and held-out accuracy at each budget).

**The cached sweeps** (:data:`SWEEPS`, trained by ``scripts/make_merge_results.py`` into
:data:`RESULTS_PATH`), each run trained once to its largest budget:

* ``"main"``: the four-relation task, every strategy of :data:`STRATEGIES` (the four merges and
  the bottleneck-matched control ``concat_lowrank``), 5 seeds, the default learning rate;
* ``"lr"``: the same task at two other learning rates (a small sweep, 3 seeds);
* ``"easy"``: the two-relation task, every strategy, 5 seeds, 1,500 steps.

:func:`load_merge_results` reads them; :func:`at_budget` and :func:`summarize` give the accuracy
of every run at one budget and its spread over seeds. The figures are in :mod:`mha.chapters.merging.figures`.

**What a seed shares across merges** (:func:`shared_start`). A seed fixes the data, the batch order
and the initial weights. The data and the batch order are the same for every merge; of the initial
weights, only W_Q, W_K, W_V are (drawn first). The merge layer is drawn next and each merge draws a
different number of random values, so the embeddings and the readout drawn after it start
differently per merge, except for averaging and the weighted merge (whose zero head logits draw
nothing): only those two start from the same model.

**A check behind the text**: :func:`mean_readout` (four tokens read back from the average of four
heads, on every input).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import torch

from .. import DATA_DIR
from ..heads import task as relation_task
from .merging import STRATEGIES, AverageMerge, MergedMultiHeadAttention, check_merge

#: Where ``scripts/make_merge_results.py`` stores the sweeps the chapter reads.
RESULTS_PATH = DATA_DIR / "merge_results.json"
#: The model of the experiment: the single-head-limits chapter's, with 4 heads (d_k = 8) and the linear readout.
NUM_HEADS = 4
READOUT = "linear"
#: Budgets (Adam steps) at which every run is evaluated on its way to its largest budget.
CHECKPOINTS = (250, 500, 1000, 1500, 3000, 6000, 12_000)
#: The cached sweeps: task (relations r), strategies, seeds, learning rates, largest budget.
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
    """Train the single-head-limits chapter's one-layer model with ``MergedMultiHeadAttention(merge=strategy)``;
    test it.

    The task is the single-head-limits chapter's (:func:`mha.chapters.heads.task.make_task`): at each
    position ``t >= r`` name the tokens at ``t - 1, ..., t - r`` at once (``r = num_relations``;
    vocabulary 16, 12 tokens).
    Everything but the merge is the same: d_model 32, ``num_heads`` heads, embeddings, residual,
    readout (linear by default), Adam at ``lr`` for ``steps`` steps. The seed fixes the data, the
    batch order and the initial weights; across merges, one seed shares the data, the batch order
    and W_Q, W_K, W_V, not the rest of the start (see :func:`shared_start`). ``checkpoints`` (step
    counts up to ``steps``) adds the run's learning curve.

    Returns:
        dict with ``accuracy`` (held-out, all r answers right), ``relation_accuracy`` (r floats),
        ``train_accuracy``, ``params`` (whole model), ``attention_params``, ``merge_params``,
        ``strategy``, ``seed``, ``num_relations``, ``num_heads``, ``readout``, ``steps``, ``lr`` and
        ``curve`` (a list of points, see :func:`mha.chapters.heads.task.snapshot`). Plain numbers:
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
    """The single-head-limits chapter's model for ``task`` with ``MergedMultiHeadAttention(merge=strategy)``,
    its initial weights fixed by ``seed`` (the model :func:`merge_experiment` trains).

    The draws happen in this order: W_Q, W_K, W_V, the merge layer, the embeddings, the readout. The
    merge layers draw different numbers of values, so only the first three are the same for every
    merge with one seed (:func:`shared_start`)."""
    check_merge(strategy)

    def attention(d_model, heads):
        return MergedMultiHeadAttention(d_model, heads, merge=strategy)

    return relation_task.make_model(num_heads, task, seed=seed, readout=readout, attention=attention)


def model_params(strategy: str, num_relations: int = 4, **kwargs) -> int:
    """Parameters of the whole model of the experiment with merge ``strategy`` on the task with
    ``num_relations`` relations, counted on a freshly built model (``kwargs``: see :func:`make_merge_model`)."""
    model = make_merge_model(strategy, relation_task.make_task(num_relations), **kwargs)
    return sum(p.numel() for p in model.parameters())


#: The parts of the experiment's model compared by :func:`shared_start`: name -> parameter prefixes.
INIT_PARTS = {
    "q, k, v": ("attention.q_proj.", "attention.k_proj.", "attention.v_proj."),
    "W_up": ("attention.merge_layer.out_proj.",),
    "embeddings": ("token_embedding.", "position_embedding."),
    "readout": ("readout.",),
}


def shared_start(strategy: str, reference: str = "average", *, seed: int = 0, num_relations: int = 4) -> dict:
    """Which parts of the initial model of merge ``strategy`` equal those of merge ``reference``,
    both built with the same ``seed`` (the models :func:`merge_experiment` starts from).

    Returns:
        dict: for each part of :data:`INIT_PARTS`, True (every parameter equal), False (some
        differ) or None (``reference`` has no parameter of that name and shape, e.g. concat's
        W_O against averaging's W_up); and ``"same outputs"``: True when the two fresh models give
        the same logits (to 1e-6) on the task's first 64 held-out sequences.
    """
    task = relation_task.make_task(num_relations, seed=seed)
    model = make_merge_model(strategy, task, seed=seed)
    ref = make_merge_model(reference, task, seed=seed)
    ref_params = dict(ref.named_parameters())
    out = {}
    for part, prefixes in INIT_PARTS.items():
        mine = [(n, p) for n, p in model.named_parameters() if n.startswith(prefixes)]
        if not all(n in ref_params and ref_params[n].shape == p.shape for n, p in mine):
            out[part] = None
        else:
            out[part] = all(torch.equal(p, ref_params[n]) for n, p in mine)
    with torch.no_grad():
        x = task.test_x[:64]  # (64, T)
        out["same outputs"] = torch.allclose(model(x)[0], ref(x)[0], rtol=0, atol=1e-6)
    return out


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
    """``strategy -> spread over seeds`` (:func:`mha.chapters.heads.task.spread`) of ``key`` at ``steps``,
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


# --------------------------------------------------------------------------------------------
# Checks behind the text
# --------------------------------------------------------------------------------------------


def circle_code(num_symbols: int = relation_task.VOCAB_SIZE) -> torch.Tensor:
    """``num_symbols`` points evenly spaced on the unit circle, one per symbol.

    Shapes:
        returns (V, 2) float64.
    """
    angles = torch.arange(num_symbols, dtype=torch.float64) * 2 * torch.pi / num_symbols  # (V,)
    return torch.stack([angles.cos(), angles.sin()], dim=1)  # (V, 2)


def mean_readout(head_features, *, d_model: int = relation_task.D_MODEL, seed: int = 0) -> dict:
    """Can a linear readout of an averaging merge's output name the token that each head fetched?

    Head i writes the circle point (:func:`circle_code`) of its token into the two features
    ``head_features[i]`` of its d_k-wide output (zeros elsewhere); ``AverageMerge(d_model, H)``,
    with the W_up that ``seed`` draws, averages the heads and projects to ``d_model``. The readout of
    relation i is linear: it undoes W_up (its pseudo-inverse, after the bias) and scores every
    symbol's circle point placed at head i's features. Tried on every combination of tokens.

    Args:
        head_features: H pairs of feature indices in ``range(d_model // H)``.
    Returns:
        dict with ``inputs`` (V^H combinations tried), ``accuracy`` (share with all H tokens named
        right) and ``relation_accuracy`` (H shares).
    """
    pairs = [tuple(int(f) for f in pair) for pair in head_features]
    num_heads = len(pairs)
    head_dim = d_model // max(num_heads, 1)
    in_range = all(len(p) == 2 and all(0 <= f < head_dim for f in p) for p in pairs)
    if num_heads == 0 or d_model % num_heads or not in_range:
        raise ValueError(f"head_features must be pairs of feature indices in 0..{head_dim - 1}, found {head_features}")
    code = circle_code()  # (V, 2)
    vocab_size = code.shape[0]
    tokens = torch.tensor(list(itertools.product(range(vocab_size), repeat=num_heads)))  # (N, H)
    heads = torch.zeros(tokens.shape[0], num_heads, 1, head_dim, dtype=torch.float64)  # (N, H, T=1, Dh)
    readouts = torch.zeros(num_heads, vocab_size, head_dim, dtype=torch.float64)  # (H, V, Dh)
    for i, pair in enumerate(pairs):
        heads[:, i, 0, list(pair)] = code[tokens[:, i]]  # head i writes its token's point
        readouts[i][:, list(pair)] = code  # relation i scores every symbol's point there
    with relation_task.seeded(seed):
        merge = AverageMerge(d_model, num_heads).double()
    with torch.no_grad():
        out = merge(heads, None)[:, 0]  # (N, D): W_up (mean of the heads) + b
        mean = (out - merge.out_proj.bias) @ torch.linalg.pinv(merge.out_proj.weight).T  # (N, Dh)
    logits = torch.einsum("nd,hvd->nhv", mean, readouts)  # (N, H, V)
    right = logits.argmax(dim=-1) == tokens  # (N, H)
    return {
        "inputs": int(tokens.shape[0]),
        "accuracy": right.all(dim=1).double().mean().item(),
        "relation_accuracy": right.double().mean(dim=0).tolist(),
    }
