"""The synthetic task and the one-layer model of the single-head-limits chapter and the head-count
experiments (heads), and of the merging experiments (merges).

**The task** (:func:`make_task`). Each example is a sequence of ``seq_len`` tokens drawn uniformly
from a vocabulary of ``vocab_size`` symbols. At every position ``t`` the model must output, *at the
same time*, the tokens found at ``r = num_relations`` fixed offsets back: ``x[t - 1], x[t - 2], ...,
x[t - r]`` (one answer per relation, ``r`` classifiers reading the same vector). A position is scored
only when all ``r`` answers exist (``t >= r``); a prediction counts as correct only when all ``r``
answers are right. Labels are correct by construction: they are copies of the input.

**The model** (:class:`RelationModel`). Token embedding + learned position embedding (width
``d_model``), **one** attention layer with a causal mask and a residual connection, then a readout
(``"mlp"``: a hidden layer of width ``4 d_model`` by default, then ``r x vocab_size`` logits;
``"linear"``: one linear layer to the logits). The attention block is pluggable: any module whose forward is
``attention(x, *, mask=mask) -> (out (B, T, D), weights (B, H, T, S))``, like
:class:`mha.MultiHeadAttention`; the default is :class:`mha.FusedMultiHeadAttention`, the same
function on the fast path.

**Training** (:func:`train_and_evaluate`): Adam on minibatches, then held-out accuracy.
Everything trains on the CPU, with local seeds and one thread, so a run is reproducible bit for bit.
A run can also record a **learning curve**: training and held-out accuracy at ``checkpoints``
(step counts). Evaluating draws no random numbers and changes no weight, so the point at step ``s``
of a long run is exactly what a run of ``s`` steps returns: one run gives every budget.

The experiments built on it: :mod:`mha.chapters.heads.head_count` (the single-head-limits chapter and
the head-count experiments) and :mod:`mha.chapters.merging.merge_training` (the merging experiments).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ...attention import causal_mask
from ...checks import check_positive_int
from ...counting import attention_params, count_params
from ...modules import FusedMultiHeadAttention

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

    Shapes (N examples, T = seq_len, R = len(offsets)):
        train_x, test_x: (N, T) int64 tokens.  train_y, test_y: (N, T, R) int64, -100 where unscored.
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
        x (N, T) int64 -> returns (N, T, R) int64, R = len(offsets).
    """
    num_seq, seq_len = x.shape
    y = torch.full((num_seq, seq_len, len(offsets)), -100, dtype=torch.long)  # (N, T, R)
    first = max(offsets)  # the first position where every relation has an answer
    for i, offset in enumerate(offsets):
        y[:, first:, i] = x[:, first - offset : seq_len - offset]  # (N, T - first)
    return y


def make_task(
    num_relations: int = 4,
    *,
    seq_len: int = SEQ_LEN,
    vocab_size: int = VOCAB_SIZE,
    num_train: int = NUM_TRAIN,
    num_test: int = NUM_TEST,
    offsets=None,
    seed: int = 0,
) -> Task:
    """Draw the train and test sets of the copy-at-``r``-offsets task.

    Each token is uniform over ``vocab_size`` symbols, independently; the targets at position ``t``
    are the tokens at ``t - o`` for each offset ``o`` (default offsets ``1, 2, ..., r``). The test
    set is drawn after the train set from the same generator, so the two are independent draws.

    Returns:
        :class:`Task` with train_x (num_train, T), train_y (num_train, T, R), test_x
        (num_test, T), test_y (num_test, T, R).
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
    return Task(
        train_x,
        relation_targets(train_x, offsets),
        test_x,
        relation_targets(test_x, offsets),
        offsets,
        vocab_size,
        seq_len,
    )


# --------------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------------


class RelationModel(nn.Module):
    """Embeddings -> one causal attention layer (+ residual) -> readout to R x V logits.

    Args:
        vocab_size, seq_len: of the task (V, T).
        num_relations: R, the number of relations r (answers per position).
        d_model: D. num_heads: H (used only when ``attention`` is None).
        readout: ``"mlp"`` (one hidden layer, ReLU) or ``"linear"``.
        readout_width: the MLP's hidden units (default 4 D); only for ``readout="mlp"``.
        attention: a module ``attention(x, *, mask=mask) -> (out (B, T, D), weights (B, H, T, S))``
            to use instead of ``mha.FusedMultiHeadAttention(d_model, num_heads)``; ``mask`` is a bool
            (T, T) causal mask, True = may attend.

    Shapes:
        forward: tokens (B, T) int64 -> logits (B, T, R, V), weights (B, H, T, T).
    """

    def __init__(
        self,
        vocab_size: int,
        seq_len: int,
        num_relations: int,
        d_model: int = D_MODEL,
        num_heads: int = 1,
        readout: str = "mlp",
        attention: nn.Module | None = None,
        readout_width: int | None = None,
    ):
        super().__init__()
        if readout not in ("linear", "mlp"):
            raise ValueError(f"readout must be 'linear' or 'mlp', found {readout!r}")
        if readout_width is not None:
            readout_width = check_positive_int("readout_width", readout_width)
            if readout == "linear":
                raise ValueError(f"readout_width ({readout_width}) applies to the MLP readout, found readout='linear'")
        hidden = 4 * d_model if readout_width is None else readout_width
        self.vocab_size, self.seq_len, self.num_relations = vocab_size, seq_len, num_relations
        self.d_model, self.readout_kind = d_model, readout
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.position_embedding = nn.Embedding(seq_len, d_model)
        self.attention = FusedMultiHeadAttention(d_model, num_heads) if attention is None else attention
        out_features = num_relations * vocab_size
        if readout == "linear":
            self.readout = nn.Linear(d_model, out_features)
        else:
            self.readout = nn.Sequential(nn.Linear(d_model, hidden), nn.ReLU(), nn.Linear(hidden, out_features))
        self.register_buffer("mask", causal_mask(seq_len), persistent=False)  # (T, T), True = may attend

    def forward(self, tokens: torch.Tensor):
        batch_size, seq_len = tokens.shape
        positions = torch.arange(seq_len, device=tokens.device)
        x = self.token_embedding(tokens)  # (B, T, D)
        x = x + self.position_embedding(positions)  # (B, T, D)
        mask = self.mask[:seq_len, :seq_len]  # (T, T)
        # attended (B, T, D), weights (B, H, T, T)
        attended, weights = self.attention(x, mask=mask)
        logits = self.readout(x + attended)  # (B, T, R*V)
        shape = (batch_size, seq_len, self.num_relations, self.vocab_size)
        return logits.view(shape), weights  # (B, T, R, V)


def make_model(
    num_heads: int,
    task: Task,
    *,
    seed: int = 0,
    d_model: int = D_MODEL,
    readout: str = "mlp",
    attention=None,
    readout_width: int | None = None,
) -> RelationModel:
    """A :class:`RelationModel` for ``task`` whose initial weights depend on ``seed`` only.

    ``attention`` may be a callable ``attention(d_model, num_heads) -> module`` (built inside the
    seeded block, so its weights are reproducible too) or None for ``mha.FusedMultiHeadAttention``.
    For the default attention, checks that the layer has ``attention_params(d_model, num_heads)``
    parameters: the same for every ``num_heads`` dividing ``d_model``. ``readout_width``: the MLP
    readout's hidden units (default ``4 d_model``).
    """
    num_heads = check_positive_int("num_heads", num_heads)
    with seeded(seed):
        module = None if attention is None else attention(d_model, num_heads)
        model = RelationModel(
            task.vocab_size,
            task.seq_len,
            task.num_relations,
            d_model,
            num_heads,
            readout=readout,
            attention=module,
            readout_width=readout_width,
        )
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
    """Accuracy of ``model`` on tokens ``x`` (N, T) with targets ``y`` (N, T, R).

    Returns:
        dict: ``accuracy`` (all R answers right, over scored positions), ``relation_accuracy``
        (list of R per-relation accuracies), ``loss`` (mean cross-entropy).
    """
    was_training = model.training
    model.eval()
    with torch.no_grad():
        logits, _ = model(x)  # (N, T, R, V)
    model.train(was_training)
    scored = (y >= 0).all(dim=-1)  # (N, T)
    correct = logits.argmax(dim=-1) == y  # (N, T, R)
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


def check_checkpoints(checkpoints, steps: int) -> tuple[int, ...]:
    """Return ``checkpoints`` as sorted distinct ints in ``1..steps``, else raise naming them."""
    try:
        points = tuple(sorted({check_positive_int("checkpoint", c) for c in checkpoints}))
    except TypeError as exc:
        raise TypeError(f"checkpoints must be step counts (positive ints), found {checkpoints!r}: {exc}") from None
    if points and points[-1] > steps:
        raise ValueError(f"checkpoints must not exceed steps ({steps}), found {points[-1]}")
    return points


def snapshot(model: RelationModel, task: Task, step: int) -> dict:
    """One point of a learning curve: the model's accuracy after ``step`` steps.

    Returns:
        dict with ``steps``, ``accuracy`` and ``loss`` (held-out), ``relation_accuracy`` (held-out,
        R floats), ``train_accuracy`` and ``train_loss`` (on the first ``NUM_TEST`` training sequences).
    """
    test = evaluate(model, task.test_x, task.test_y)
    train = evaluate(model, task.train_x[:NUM_TEST], task.train_y[:NUM_TEST])
    return {
        "steps": step,
        "accuracy": test["accuracy"],
        "loss": test["loss"],
        "relation_accuracy": test["relation_accuracy"],
        "train_accuracy": train["accuracy"],
        "train_loss": train["loss"],
    }


def train_and_evaluate(
    model: RelationModel,
    task: Task,
    *,
    steps: int = STEPS,
    seed: int = 0,
    batch_size: int = BATCH_SIZE,
    lr: float = LEARNING_RATE,
    checkpoints=(),
    show_progress: bool = False,
) -> dict:
    """Train ``model`` on ``task.train_*`` with Adam (on the CPU, one thread) and test it.

    Minibatches are drawn with a local generator seeded by ``seed``; the same model, task and seed
    give the same numbers bit for bit. The model is trained in place. ``checkpoints`` (step counts
    up to ``steps``) adds a learning curve: the point at step ``s`` equals the result of training
    for ``s`` steps (evaluation neither draws random numbers nor changes the weights).

    Returns:
        dict with ``accuracy`` (held-out, all R answers right), ``relation_accuracy`` (R floats),
        ``loss`` (held-out), ``train_accuracy``, ``params`` (whole model), ``attention_params``,
        ``num_heads``, ``steps``, ``lr``, ``curve`` (one :func:`snapshot` dict per checkpoint, in
        order), ``example_tokens`` (T,) int64 (the first test sequence), ``example_labels``
        (T strings) and ``example_weights`` (H, T, T) float64: each head's map on that sequence.
    """
    steps = check_positive_int("steps", steps)
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not 0 < lr < 1:
        raise ValueError(f"lr must be a number in (0, 1), found {lr!r}")
    points = set(check_checkpoints(checkpoints, steps))
    gen = torch.Generator().manual_seed(seed)
    bar = _progress(steps, show_progress)
    curve = []
    with one_thread():
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        model.train()
        for step in range(1, steps + 1):
            idx = torch.randint(task.train_x.shape[0], (batch_size,), generator=gen)  # (B,)
            logits, _ = model(task.train_x[idx])  # (B, T, R, V)
            loss = F.cross_entropy(
                logits.reshape(-1, task.vocab_size), task.train_y[idx].reshape(-1), ignore_index=-100
            )
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step in points:
                curve.append(snapshot(model, task, step))
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
        steps=steps,
        lr=float(lr),
        curve=curve,
        example_tokens=example.clone(),
        example_labels=token_labels(example),
        example_weights=weights,
    )
    return result


# --------------------------------------------------------------------------------------------
# Over seeds
# --------------------------------------------------------------------------------------------

#: A run counts as having solved the task when at least this fraction of positions is right.
SOLVED = 0.99


def spread(values) -> dict:
    """Over seeds: ``median``, ``min``, ``max``, ``values`` (as given) and ``solved`` (how many reach
    :data:`SOLVED`)."""
    ordered = sorted(float(v) for v in values)
    n = len(ordered)
    median = ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2
    return {
        "median": median,
        "min": ordered[0],
        "max": ordered[-1],
        "values": [float(v) for v in values],
        "solved": sum(v >= SOLVED for v in ordered),
    }
