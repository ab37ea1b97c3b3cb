"""Chapter 1's experiment: a task that needs several relations at once, and models that differ only
in their number of heads.

**The task** (:func:`make_task`). Each example is a sequence of ``seq_len`` tokens drawn uniformly
from a vocabulary of ``vocab_size`` symbols. At every position ``t`` the model must output, *at the
same time*, the tokens found at ``k = num_relations`` fixed offsets back: ``x[t - 1], x[t - 2], ...,
x[t - k]`` (one answer per relation, ``k`` classifiers reading the same vector). A position is scored
only when all ``k`` answers exist (``t >= k``); a prediction counts as correct only when all ``k``
answers are right. Labels are correct by construction: they are copies of the input.

**The model** (:class:`RelationModel`). Token embedding + learned position embedding (width
``d_model``), **one** attention layer with a causal mask and a residual connection, then a readout
(``"mlp"``: a hidden layer of width ``4 d_model``, then ``k x vocab_size`` logits; ``"linear"``:
one linear layer to the logits). The attention block is pluggable: any module whose forward is
``attention(x, *, mask=mask) -> (out (B, T, D), weights (B, H, T, S))``, like
:class:`mha.MultiHeadAttention`; the default is :class:`mha.FusedMultiHeadAttention`, the same
function on the fast path.

**The comparison.** With ``d_k = d_model / h`` the attention layer has ``4 d_model^2 + 4 d_model``
parameters whatever ``h`` is, and nothing else in the model depends on ``h``: the models differ only
in how the same parameters are cut into heads (:func:`make_model` checks it).

Everything trains on the CPU, with local seeds and one thread, so a run is reproducible bit for bit.
"""
from __future__ import annotations

import contextlib
import json
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..checks import check_positive_int
from ..attention import causal_mask
from ..counting import attention_params, count_params
from ..modules import FusedMultiHeadAttention
from . import DATA_DIR

#: Defaults of the chapter's experiment: one layer of width 32, a vocabulary of 16 symbols,
#: sequences of 12, 1,500 Adam steps on batches of 64 (a few seconds on one idle CPU core).
D_MODEL = 32
VOCAB_SIZE = 16
SEQ_LEN = 12
STEPS = 1500
BATCH_SIZE = 64
LEARNING_RATE = 3e-3
NUM_TRAIN = 4096
NUM_TEST = 512

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


# --------------------------------------------------------------------------------------------
# Reproducibility helpers
# --------------------------------------------------------------------------------------------

@contextlib.contextmanager
def seeded(seed: int):
    """Run a block with the global torch RNG seeded, and restore the caller's RNG state after.

    ``nn.Module`` constructors draw their initial weights from the global RNG; building a model
    inside ``with seeded(seed):`` makes its weights a function of ``seed`` alone.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


@contextlib.contextmanager
def one_thread():
    """Run a block with one CPU thread (the float sums then happen in one fixed order).

    The caller's thread count is restored afterwards.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# --------------------------------------------------------------------------------------------
# The task
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Task:
    """A synthetic copy-at-offsets task (see :func:`make_task`).

    Shapes (N examples, T = seq_len, K = len(offsets)):
        train_x, test_x: (N, T) int64 tokens.  train_y, test_y: (N, T, K) int64, -100 where unscored.
    """

    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    offsets: tuple[int, ...]
    vocab_size: int
    seq_len: int

    @property
    def num_relations(self) -> int:
        return len(self.offsets)


def relation_targets(x: torch.Tensor, offsets) -> torch.Tensor:
    """The answers for tokens ``x``: ``y[n, t, i] = x[n, t - offsets[i]]``, or -100 (ignored by the
    loss) where some offset reaches before the start of the sequence.

    Shapes:
        x (N, T) int64 -> returns (N, T, K) int64, K = len(offsets).
    """
    num_seq, seq_len = x.shape
    y = torch.full((num_seq, seq_len, len(offsets)), -100, dtype=torch.long)  # (N, T, K)
    first = max(offsets)  # the first position where every relation has an answer
    for i, offset in enumerate(offsets):
        y[:, first:, i] = x[:, first - offset: seq_len - offset]  # (N, T - first)
    return y


def make_task(num_relations: int = 4, *, seq_len: int = SEQ_LEN, vocab_size: int = VOCAB_SIZE,
              num_train: int = NUM_TRAIN, num_test: int = NUM_TEST, offsets=None, seed: int = 0) -> Task:
    """Draw the train and test sets of the copy-at-``k``-offsets task.

    Each token is uniform over ``vocab_size`` symbols, independently; the targets at position ``t``
    are the tokens at ``t - o`` for each offset ``o`` (default offsets ``1, 2, ..., k``). The test
    set is drawn after the train set from the same generator, so the two are independent draws.

    Returns:
        :class:`Task` with train_x (num_train, T), train_y (num_train, T, K), test_x
        (num_test, T), test_y (num_test, T, K).
    """
    num_relations = check_positive_int("num_relations", num_relations)
    offsets = tuple(range(1, num_relations + 1)) if offsets is None else tuple(int(o) for o in offsets)
    if len(offsets) != num_relations or len(set(offsets)) != num_relations or min(offsets) < 1:
        raise ValueError(f"offsets must be {num_relations} distinct ints >= 1, found {offsets}")
    if max(offsets) >= seq_len:
        raise ValueError(f"seq_len ({seq_len}) must be larger than the largest offset ({max(offsets)})")
    gen = torch.Generator().manual_seed(seed)
    train_x = torch.randint(vocab_size, (num_train, seq_len), generator=gen)  # (N, T)
    test_x = torch.randint(vocab_size, (num_test, seq_len), generator=gen)  # (N, T)
    return Task(train_x, relation_targets(train_x, offsets), test_x, relation_targets(test_x, offsets),
                offsets, vocab_size, seq_len)


# --------------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------------

class RelationModel(nn.Module):
    """Embeddings -> one causal attention layer (+ residual) -> readout to K x V logits.

    Args:
        vocab_size, seq_len: of the task (V, T).
        num_relations: K, the number of answers per position.
        d_model: D. num_heads: H (used only when ``attention`` is None).
        readout: ``"mlp"`` (hidden width 4 D, ReLU) or ``"linear"``.
        attention: a module ``attention(x, *, mask=mask) -> (out (B, T, D), weights (B, H, T, S))``
            to use instead of ``mha.FusedMultiHeadAttention(d_model, num_heads)``; ``mask`` is a bool
            (T, T) causal mask, True = may attend.

    Shapes:
        forward: tokens (B, T) int64 -> logits (B, T, K, V), weights (B, H, T, T).
    """

    def __init__(self, vocab_size: int, seq_len: int, num_relations: int, d_model: int = D_MODEL,
                 num_heads: int = 1, readout: str = "mlp", attention: nn.Module | None = None):
        super().__init__()
        if readout not in ("linear", "mlp"):
            raise ValueError(f"readout must be 'linear' or 'mlp', found {readout!r}")
        self.vocab_size, self.seq_len, self.num_relations = vocab_size, seq_len, num_relations
        self.d_model, self.readout_kind = d_model, readout
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.position_embedding = nn.Embedding(seq_len, d_model)
        self.attention = FusedMultiHeadAttention(d_model, num_heads) if attention is None else attention
        out_features = num_relations * vocab_size
        if readout == "linear":
            self.readout = nn.Linear(d_model, out_features)
        else:
            self.readout = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.ReLU(),
                                         nn.Linear(4 * d_model, out_features))
        self.register_buffer("mask", causal_mask(seq_len), persistent=False)  # (T, T), True = may attend

    def forward(self, tokens: torch.Tensor):
        batch_size, seq_len = tokens.shape
        positions = torch.arange(seq_len, device=tokens.device)
        x = self.token_embedding(tokens) + self.position_embedding(positions)  # (B, T, D)
        attended, weights = self.attention(x, mask=self.mask[:seq_len, :seq_len])  # (B, T, D), (B, H, T, T)
        logits = self.readout(x + attended)  # (B, T, K*V)
        return logits.view(batch_size, seq_len, self.num_relations, self.vocab_size), weights  # (B, T, K, V)


def make_model(num_heads: int, task: Task, *, seed: int = 0, d_model: int = D_MODEL, readout: str = "mlp",
               attention=None) -> RelationModel:
    """A :class:`RelationModel` for ``task`` whose initial weights depend on ``seed`` only.

    ``attention`` may be a callable ``attention(d_model, num_heads) -> module`` (built inside the
    seeded block, so its weights are reproducible too) or None for ``mha.FusedMultiHeadAttention``.
    For the default attention, checks that the layer has ``attention_params(d_model, num_heads)``
    parameters: the same for every ``num_heads`` dividing ``d_model``.
    """
    num_heads = check_positive_int("num_heads", num_heads)
    with seeded(seed):
        module = None if attention is None else attention(d_model, num_heads)
        model = RelationModel(task.vocab_size, task.seq_len, task.num_relations, d_model, num_heads,
                              readout=readout, attention=module)
    if attention is None:
        expected = attention_params(d_model, num_heads)
        found = count_params(model.attention)
        if found != expected:  # pragma: no cover - guards the claim the chapter relies on
            raise RuntimeError(f"attention layer has {found} parameters, expected {expected}")
    return model


# --------------------------------------------------------------------------------------------
# Training and evaluation
# --------------------------------------------------------------------------------------------

def _progress(total: int, show: bool):
    """A tqdm bar when ``show`` is true and tqdm is installed, else None (prints nothing)."""
    if not show:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover
        return None
    return tqdm(total=total, desc="training", leave=False)


def evaluate(model: RelationModel, x: torch.Tensor, y: torch.Tensor) -> dict:
    """Accuracy of ``model`` on tokens ``x`` (N, T) with targets ``y`` (N, T, K).

    Returns:
        dict: ``accuracy`` (all K answers right, over scored positions), ``relation_accuracy``
        (list of K per-relation accuracies), ``loss`` (mean cross-entropy).
    """
    was_training = model.training
    model.eval()
    with torch.no_grad():
        logits, _ = model(x)  # (N, T, K, V)
    model.train(was_training)
    scored = (y >= 0).all(dim=-1)  # (N, T)
    correct = logits.argmax(dim=-1) == y  # (N, T, K)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), ignore_index=-100)
    return {
        "accuracy": correct.all(dim=-1)[scored].double().mean().item(),
        "relation_accuracy": correct[scored].double().mean(dim=0).tolist(),
        "loss": loss.item(),
    }


def attention_maps(model: RelationModel, tokens: torch.Tensor) -> torch.Tensor:
    """Every head's attention weights on one sequence.

    Shapes:
        tokens (T,) int64 -> returns (H, T, T) float64 on the CPU.
    """
    model.eval()
    with torch.no_grad():
        _, weights = model(tokens[None])  # (1, H, T, T)
    return weights[0].to("cpu", torch.float64)


def token_labels(tokens) -> list[str]:
    """Readable labels for a token sequence, e.g. ``['0:c', '1:n', ...]`` (position:symbol)."""
    return [f"{t}:{chr(ord('a') + int(v))}" for t, v in enumerate(tokens)]


def train_and_evaluate(model: RelationModel, task: Task, *, steps: int = STEPS, seed: int = 0,
                       batch_size: int = BATCH_SIZE, lr: float = LEARNING_RATE,
                       show_progress: bool = False) -> dict:
    """Train ``model`` on ``task.train_*`` with Adam (on the CPU, one thread) and test it.

    Minibatches are drawn with a local generator seeded by ``seed``; the same model, task and seed
    give the same numbers bit for bit. The model is trained in place.

    Returns:
        dict with ``accuracy`` (held-out, all K answers right), ``relation_accuracy`` (K floats),
        ``loss`` (held-out), ``train_accuracy``, ``params`` (whole model), ``attention_params``,
        ``num_heads``, ``example_tokens`` (T,) int64 (the first test sequence), ``example_labels``
        (T strings) and ``example_weights`` (H, T, T) float64: each head's map on that sequence.
    """
    steps = check_positive_int("steps", steps)
    gen = torch.Generator().manual_seed(seed)
    bar = _progress(steps, show_progress)
    with one_thread():
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        model.train()
        for _ in range(steps):
            idx = torch.randint(task.train_x.shape[0], (batch_size,), generator=gen)  # (B,)
            logits, _ = model(task.train_x[idx])  # (B, T, K, V)
            loss = F.cross_entropy(logits.reshape(-1, task.vocab_size), task.train_y[idx].reshape(-1),
                                   ignore_index=-100)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if bar is not None:
                bar.update()
        if bar is not None:
            bar.close()
        result = evaluate(model, task.test_x, task.test_y)
        result["train_accuracy"] = evaluate(model, task.train_x[:NUM_TEST], task.train_y[:NUM_TEST])["accuracy"]
        example = task.test_x[0]
        weights = attention_maps(model, example)
    result.update(
        params=count_params(model),
        attention_params=count_params(model.attention),
        num_heads=int(weights.shape[0]),
        example_tokens=example.clone(),
        example_labels=token_labels(example),
        example_weights=weights,
    )
    return result


def head_count_experiment(num_heads: int, *, seed: int = 0, num_relations: int = DEFAULT_RELATIONS, steps: int = STEPS,
                          readout: str = "mlp", d_model: int = D_MODEL, show_progress: bool = False,
                          return_model: bool = False) -> dict:
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


def trained_model(num_heads: int = 2, *, seed: int = 0, num_relations: int = DEFAULT_RELATIONS,
                  readout: str = "mlp"):
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
        result = head_count_experiment(num_heads, seed=seed, num_relations=num_relations, readout=readout,
                                       return_model=True)
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


def cached_run(num_heads: int, *, seed: int = 0, num_relations: int = DEFAULT_RELATIONS,
               readout: str = "mlp") -> dict:
    """The cached result of ``head_count_experiment(num_heads, seed=..., ...)`` (accuracies rounded to
    4 decimals). Raises KeyError for a setting the grid does not hold."""
    for run in load_grid()["runs"]:
        if (run["num_heads"], run["seed"], run["num_relations"], run["readout"]) == (
                num_heads, seed, num_relations, readout):
            return run
    raise KeyError(f"no cached run for num_heads={num_heads}, seed={seed}, "
                   f"num_relations={num_relations}, readout={readout!r}")


def grid_summary(readout: str = "mlp") -> dict:
    """Held-out accuracy over seeds for every (k, h) of the grid.

    Returns:
        dict ``(num_relations, num_heads) -> {"mean", "min", "max", "seeds"}`` (floats, count).
    """
    groups: dict = {}
    for run in load_grid()["runs"]:
        if run["readout"] == readout:
            groups.setdefault((run["num_relations"], run["num_heads"]), []).append(run["accuracy"])
    return {key: {"mean": sum(a) / len(a), "min": min(a), "max": max(a), "seeds": len(a)}
            for key, a in sorted(groups.items())}


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


def render_head_maps(num_heads: int = 2, seed: int = 0):
    """Figure: each head's attention map on a held-out sequence (cached, k = 4, MLP readout)."""
    import matplotlib.pyplot as plt

    from ..viz.plotting import plot_heads

    weights, labels = cached_maps(num_heads, seed)
    cols = min(num_heads, 4)
    rows = math.ceil(num_heads / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.0 * cols + 0.6, 3.0 * rows + 0.5), squeeze=False)
    accuracy = cached_run(num_heads, seed=seed)["accuracy"]
    plot_heads(weights, labels, axes=list(axes.flat), annotate=False,
               title=f"{num_heads} head{'s' if num_heads > 1 else ''}, seed {seed}: "
                     f"held-out accuracy {accuracy:.2f}")
    for ax in axes.flat:
        ax.tick_params(labelsize=7)
        ax.set_xlabel("key", fontsize=8)
        ax.set_ylabel("query", fontsize=8)
    return fig


def head_maps_alt(num_heads: int = 2, seed: int = 0) -> str:
    """Alt text of :func:`render_head_maps`: which offsets each head mostly looks at."""
    weights, _ = cached_maps(num_heads, seed)
    profile = offset_profile(weights)
    parts = []
    for h, row in enumerate(profile):
        top = [str(o) for o in range(row.shape[0]) if row[o] >= 0.2]
        where = " and ".join(top) + " places back" if top else "no single offset"
        parts.append(f"head {h + 1} attends mostly to the tokens {where}")
    plural = "s" if num_heads > 1 else ""
    return f"{num_heads} head{plural}, seed {seed}: " + "; ".join(parts) + "."


def plot_accuracy_vs_heads(num_relations: int = DEFAULT_RELATIONS, *, ax=None):
    """Held-out accuracy against the number of heads (mean over seeds, bars = min to max)."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 3.5))
    for i, readout in enumerate(GRID_SEEDS):
        summary = grid_summary(readout)
        heads = [h for h in GRID_HEADS if (num_relations, h) in summary]
        stats = [summary[(num_relations, h)] for h in heads]
        mean = [s["mean"] for s in stats]
        err = [[s["mean"] - s["min"] for s in stats], [s["max"] - s["mean"] for s in stats]]
        seeds = stats[0]["seeds"]
        ax.errorbar(heads, mean, yerr=err, marker="o", capsize=4,
                    label=f"{READOUT_NAMES[readout]} readout ({seeds} seed{'s' if seeds > 1 else ''})", color=f"C{i}")
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(GRID_HEADS), [str(h) for h in GRID_HEADS])
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("number of heads h (same d_model, same parameters)")
    ax.set_ylabel("held-out accuracy (all k answers right)")
    ax.set_title(f"Copying k = {num_relations} tokens at once")
    ax.legend(loc="lower right")
    return ax.figure


def plot_grid(readout: str = "mlp", *, ax=None):
    """Heatmap of mean held-out accuracy, rows = relations k, columns = heads h."""
    import matplotlib.pyplot as plt

    summary = grid_summary(readout)
    relations = sorted({k for k, _ in summary})
    heads = sorted({h for _, h in summary})
    grid = [[summary[(k, h)]["mean"] for h in heads] for k in relations]
    if ax is None:
        _, ax = plt.subplots(figsize=(4.2, 3.6))
    ax.imshow(grid, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    for i, row in enumerate(grid):
        for j, value in enumerate(row):
            ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=8,
                    color="black" if value > 0.6 else "white")
    ax.set_xticks(range(len(heads)), [str(h) for h in heads])
    ax.set_yticks(range(len(relations)), [str(k) for k in relations])
    ax.set_xlabel("heads h")
    ax.set_ylabel("relations k")
    ax.set_title(f"mean accuracy, {READOUT_NAMES[readout]} readout")
    return ax.figure


def merge_experiment(strategy: str, *, seed: int = 0, **kwargs) -> dict:
    """Chapter 5's experiment: this task and model with another way of merging the heads.

    ``strategy``: ``"concat"``, ``"average"``, ``"weighted"`` or ``"gated"``; other keyword
    arguments as :func:`mha.merging.merge_experiment`. Returns a dict with at least ``accuracy``
    (held-out) and ``params``.
    """
    from .merging import merge_experiment as run  # imported here: mha.merging imports this module

    return run(strategy, seed=seed, **kwargs)
