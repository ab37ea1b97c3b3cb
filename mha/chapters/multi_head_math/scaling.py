"""The multi-head-math chapter's experiments: why the scores are scaled by 1/√d_k, and how d_model is cut into heads.

**Why 1/√d_k.** Draw a query ``q`` and keys ``k_j`` with independent unit-variance entries. Each
score ``q·k_j`` is a sum of ``d_k`` products of variance 1, so its variance is ``d_k``
(:func:`dot_product_variance`). Unscaled, the scores of a 512-wide head spread over tens of units;
the softmax then puts almost all its weight on the largest one (it *saturates*) and its Jacobian
``diag(p) - p pᵀ`` tends to zero, so almost no gradient reaches ``W_Q`` and ``W_K``
(:func:`softmax_stats`). Multiplying by ``1/√d_k`` keeps the variance at 1 for every ``d_k``.

**Heads.** :func:`head_blocks` gives the columns :func:`mha.split_heads` hands to each head: the
``d_model`` columns of the projected queries ``X W_Q`` (each one a weighted sum of *all* input
features) cut into ``h`` blocks of ``d_k = d_model / h``: see :mod:`mha.chapters.multi_head_math.head_split`.
:func:`count_operations` counts the matrix products and softmaxes of one forward pass.

The figures and explorer frames are in :mod:`mha.chapters.multi_head_math.figures`.

Shape legend: N samples (queries), S keys, Dk = d_k, T tokens, H heads.
"""

from __future__ import annotations

import copy
import math
import textwrap
from collections import Counter

import torch
from torch.overrides import TorchFunctionMode

from ...attention import entropy_bits
from ...checks import check_positive_int
from ...counting import attention_params
from ..checking.answers import (
    Message,
    Verdict,
    close_verdict,
    compare_number,
    fit_to_page,
    malformed,
    named_slip,
    read_number,
    right,
    say,
    wrong,
)

#: Head widths of the sweep: 1, 2, 4, ..., 1024.
DEFAULT_D_KS = tuple(2**i for i in range(11))
#: The scale factors the explorer offers, by name: none, the Transformer's, and too much.
SCALES = {
    "1 (no scaling)": lambda d_k: 1.0,
    "1/√d_k": lambda d_k: 1.0 / math.sqrt(d_k),
    "1/d_k": lambda d_k: 1.0 / d_k,
}
#: Explorer grid: head widths, and the scale factor names.
EXPLORER_D_KS = [4, 16, 64, 256, 1024]
NUM_KEYS = 16


def scale_value(d_k: int, scale) -> float:
    """The numeric factor for ``scale``: a name from :data:`SCALES` or a positive number."""
    d_k = check_positive_int("d_k", d_k)
    if isinstance(scale, str):
        if scale not in SCALES:
            raise ValueError(f"scale must be one of {list(SCALES)} or a positive number, found {scale!r}")
        return SCALES[scale](d_k)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not scale > 0:
        raise ValueError(f"scale must be one of {list(SCALES)} or a positive number, found {scale!r}")
    return float(scale)


def dot_product_variance(d_k: int, *, scale=1.0, num_samples: int = 2000, seed: int = 0) -> float:
    """Empirical variance of ``scale · q·k`` for ``q, k`` with i.i.d. N(0, 1) entries.

    In theory ``scale² · d_k``: ``d_k`` for the raw dot product, 1 with ``scale = 1/√d_k``.
    """
    num_samples = check_positive_int("num_samples", num_samples)
    factor = scale_value(d_k, scale)
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(num_samples, d_k, generator=gen, dtype=torch.float64)  # (N, Dk)
    k = torch.randn(num_samples, d_k, generator=gen, dtype=torch.float64)  # (N, Dk)
    scores = (q * k).sum(dim=-1) * factor  # (N,)
    return scores.var().item()


def sample_scores(d_k: int, scale, *, num_queries: int = 500, num_keys: int = NUM_KEYS, seed: int = 0):
    """Scaled scores of random queries against random keys (unit-variance entries).

    The keys are shared by all queries; each query row is one draw of "a softmax over S keys".

    Shapes:
        returns scores (N, S), keys (S, Dk), the scale factor (float).
    """
    num_queries = check_positive_int("num_queries", num_queries)
    num_keys = check_positive_int("num_keys", num_keys)
    factor = scale_value(d_k, scale)
    gen = torch.Generator().manual_seed(seed)
    keys = torch.randn(num_keys, d_k, generator=gen, dtype=torch.float64)  # (S, Dk)
    queries = torch.randn(num_queries, d_k, generator=gen, dtype=torch.float64)  # (N, Dk)
    return queries @ keys.T * factor, keys, factor  # (N, S)


def softmax_stats(d_k: int, scale="1/√d_k", *, num_queries: int = 500, num_keys: int = NUM_KEYS, seed: int = 0) -> dict:
    """How peaked the softmax of random scaled scores is, and how much gradient passes through it.

    With ``p = softmax(s)``, ``s_j = scale · q·k_j``, the Jacobian is ``J = ∂p/∂s = diag(p) - p pᵀ``;
    it vanishes when ``p`` is one-hot. The gradient that reaches the query is
    ``∂p/∂q = scale · J K``. Gradient norms are Frobenius norms, and their **median** over the
    queries (the typical query): the mean is dominated by the rare queries whose two largest
    scores happen to tie.

    Returns:
        dict with ``d_k``, ``scale`` (the factor), ``variance`` (of the scaled scores),
        ``max_weight`` (mean largest weight: 1/S for uniform, 1 for one-hot), ``saturated``
        (fraction of queries whose largest weight exceeds 0.99), ``entropy_bits`` (mean entropy:
        log2 S for uniform, 0 for one-hot), ``jacobian_norm`` (median ‖∂p/∂s‖_F) and
        ``grad_q_norm`` (median ‖∂p/∂q‖_F).
    """
    scores, keys, factor = sample_scores(d_k, scale, num_queries=num_queries, num_keys=num_keys, seed=seed)
    return score_stats(scores, keys, factor)


def score_stats(scores: torch.Tensor, keys: torch.Tensor, factor: float) -> dict:
    """The statistics of :func:`softmax_stats` for given scores and keys (scaled by ``factor``).

    Shapes: scores (N, S), keys (S, Dk).
    """
    p = torch.softmax(scores, dim=-1)  # (N, S)
    jac = torch.diag_embed(p) - p[:, :, None] * p[:, None, :]  # (N, S, S), symmetric
    gram = keys @ keys.T  # (S, S)
    # ‖J K‖_F² = trace(J K Kᵀ Jᵀ) = sum((J G) ⊙ J) with G = K Kᵀ, without forming (N, S, Dk)
    grad_q_sq = ((jac @ gram) * jac).sum(dim=(-2, -1)).clamp_min(0.0)  # (N,)
    largest = p.max(dim=-1).values  # (N,)
    return {
        "d_k": keys.shape[1],
        "scale": factor,
        "variance": scores.var().item(),
        "max_weight": largest.mean().item(),
        "saturated": (largest > 0.99).double().mean().item(),
        "entropy_bits": entropy_bits(p).mean().item(),
        "jacobian_norm": jac.flatten(1).norm(dim=-1).median().item(),
        "grad_q_norm": (factor * grad_q_sq.sqrt()).median().item(),
    }


def mean_squared_key_norm(d_k: int, *, num_keys: int = NUM_KEYS, seed: int = 0) -> float:
    """(1/S) Σ_j ‖k_j‖² for the keys :func:`sample_scores` draws.

    All queries share these S keys, and for a fixed key Var(q·k_j) = ‖k_j‖², so the variance of
    the sampled scores (unscaled) estimates this mean, not d_k itself: with S = 16 keys of d_k = 4
    it is a mean of only 16 chi-square draws with 4 degrees of freedom (standard deviation
    √(2·4/16) ≈ 0.7 around 4).
    """
    _, keys, _ = sample_scores(d_k, 1.0, num_queries=1, num_keys=num_keys, seed=seed)
    return keys.pow(2).sum(dim=-1).mean().item()


def scaling_sweep(
    d_ks=DEFAULT_D_KS,
    scales=("1 (no scaling)", "1/√d_k"),
    *,
    num_queries: int = 500,
    num_keys: int = NUM_KEYS,
    seed: int = 0,
) -> dict:
    """:func:`softmax_stats` for every head width and scale.

    Returns:
        dict: ``d_k`` (list) and, for each scale name, a dict of lists (one value per d_k) with the
        keys of :func:`softmax_stats`.
    """
    d_ks = [check_positive_int("d_k", d) for d in d_ks]
    sweep = {"d_k": d_ks}
    for scale in scales:
        rows = [softmax_stats(d, scale, num_queries=num_queries, num_keys=num_keys, seed=seed) for d in d_ks]
        sweep[scale] = {key: [row[key] for row in rows] for key in rows[0]}
    return sweep


def sorted_weight_profile(d_k: int, scale, *, num_queries: int = 500, num_keys: int = NUM_KEYS, seed: int = 0):
    """The mean over all queries of each query's largest, second largest, ... softmax weight.

    A statistic of every query, not one noisy draw: uniform weights give 1/S at every rank,
    a saturated softmax gives about 1 at rank 1 and 0 elsewhere. Entry 0 is the mean largest
    weight of :func:`softmax_stats`.

    Shapes: returns (S,).
    """
    scores, _, _ = sample_scores(d_k, scale, num_queries=num_queries, num_keys=num_keys, seed=seed)
    weights = torch.softmax(scores, dim=-1)  # (N, S)
    return weights.sort(dim=-1, descending=True).values.mean(dim=0)  # (S,)


def describe_scaling(d_k: int = 64, scale: str = "1/√d_k") -> str:
    """Alt text for an explorer frame."""
    s = softmax_stats(d_k, scale)
    return (
        f"With d_k = {d_k} and scale {scale}, the scores have variance {s['variance']:.3g}; over all "
        f"queries the mean largest weight is {s['max_weight']:.2f}, and {100 * s['saturated']:.0f}% of the "
        "queries put more than 0.99 of their weight on one key."
    )


#: Torch functions that multiply matrices, and the exponential at the heart of mha's softmax.
MATRIX_PRODUCTS = {"linear", "matmul", "__matmul__", "bmm", "mm", "addmm", "baddbmm", "einsum"}


class _OperationCounter(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.calls = Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.calls[getattr(func, "__name__", str(func))] += 1
        return func(*args, **(kwargs or {}))


def count_operations(module, *args, **kwargs) -> dict:
    """What one call ``module(*args, **kwargs)`` does, counted as it runs (``TorchFunctionMode``).

    Counts the torch functions the module's Python code calls; a function that does everything
    inside (``F.multi_head_attention_forward``) counts once, under its own name.

    Returns:
        dict: ``matrix_products`` (every ``linear``, ``matmul``, ``bmm``, ... call: one nn.Linear
        is one product), ``softmaxes`` (``softmax`` calls, or ``exp`` calls of mha's own
        :func:`mha.masked_softmax`) and ``calls``, the full Counter of function names.
    """
    with torch.no_grad(), _OperationCounter() as counter:
        module(*args, **kwargs)
    calls = counter.calls
    products = sum(n for name, n in calls.items() if name in MATRIX_PRODUCTS)
    softmaxes = calls["softmax"] + calls["_softmax"] + calls["exp"]
    return {"matrix_products": products, "softmaxes": softmaxes, "calls": calls}


# --------------------------------------------------------------------------------------------
# Exercises
# --------------------------------------------------------------------------------------------


def fully_masked_row_paths(module: torch.nn.MultiheadAttention, x: torch.Tensor, mask: torch.Tensor, row: int) -> dict:
    """What each path of ``nn.MultiheadAttention`` returns for query ``row``, which ``mask`` blocks entirely.

    Runs a CPU float64 copy of ``module`` (self-attention, ``batch_first``) on ``x`` with
    ``attn_mask=~mask`` (the module's boolean convention is True = blocked), in eval and training
    mode, with ``need_weights`` True and False, with autograd on and off (``torch.no_grad``). The
    paths differ: with ``need_weights=True`` the module computes the softmax itself; with
    ``need_weights=False`` it calls ``F.scaled_dot_product_attention``, except on its inference
    fast path (eval mode, autograd off, ``query is key is value``, biases, and the other
    conditions its documentation lists), a fused kernel of its own.

    Shapes: x (1, T, D); mask (T, S) boolean, True = may attend.

    Returns:
        dict ``(training, need_weights, autograd) -> "NaN"`` (every entry of the row is NaN),
        ``"0"`` (the attention output is exactly 0: the module returns ``out_proj``'s bias) or
        ``"other"``.
    """
    reference = copy.deepcopy(module).to("cpu", torch.float64)
    x = x.detach().to("cpu", torch.float64)
    blocked = ~mask.cpu()  # nn.MultiheadAttention: True = blocked
    bias = reference.out_proj.bias
    zero_row = torch.zeros(x.shape[-1], dtype=torch.float64) if bias is None else bias.detach()  # out_proj(0)
    found = {}
    for training in (False, True):
        reference.train(training)
        for need_weights in (True, False):
            for autograd in (True, False):
                with torch.set_grad_enabled(autograd):
                    out, _ = reference(x, x, x, attn_mask=blocked, need_weights=need_weights)
                got = out[0, row].detach()  # (D,)
                found[training, need_weights, autograd] = (
                    "NaN" if torch.isnan(got).all() else "0" if torch.equal(got, zero_row) else "other"
                )
    return found


def _fold(hint: str) -> str:
    """``hint`` folded to the book's code column (74 characters; ``"  hint: "`` takes 8)."""
    return textwrap.fill(hint, width=74, initial_indent=" " * 8, subsequent_indent=" " * 8)[8:]


def _wrong_folded(title: Message, step: str, hint: Message) -> Verdict:
    """:func:`wrong` with ``hint`` folded to the code column; a translation starts from the unfolded lines
    (``source``), so the folded English line is layout only and is never translated."""
    lines = (title, say("  {step}: wrong", step=step))
    folded = say("  hint: {hint}", hint=_fold(hint))
    return Verdict(False, step, (*lines, folded), source=(*lines, say("  hint: {hint}", hint=hint)))


def _at(shape: tuple, num_heads: int, hint: Message) -> Message:
    """``hint`` for the input ``x`` of ``shape`` split into ``num_heads`` heads."""
    return say("for x of shape {shape}, H = {num_heads}: {hint}", shape=shape, num_heads=num_heads, hint=hint)


def check_merge_heads(fn) -> Verdict:
    """Exercise 1: does ``fn(x)`` undo :func:`mha.split_heads` for several shapes?

    Returns a :class:`~mha.chapters.checking.answers.Verdict`: which shape failed and how, with a hint for
    the usual slips (a vertical stack of heads, a reshape without the transpose). A function that
    raises, returns no tensor or returns NaN gets a message, not a traceback.
    """
    from ...attention import split_heads

    title = say("{name}", name="merge_heads")
    if not callable(fn):
        return malformed(title, say("give a function x -> merged x, found {type}", type=type(fn).__name__))
    for batch_size, seq_len, d_model, num_heads in [(2, 5, 8, 2), (1, 3, 12, 3), (3, 1, 6, 6), (2, 4, 8, 1)]:
        gen = torch.Generator().manual_seed(batch_size * 100 + d_model)
        x = torch.randn(batch_size, seq_len, d_model, generator=gen)  # (B, T, D)
        heads = split_heads(x, num_heads)  # (B, H, T, Dh)
        shape = (batch_size, seq_len, d_model)
        where = say("for x of shape {shape}, H = {num_heads}", shape=shape, num_heads=num_heads)
        try:
            # a fresh contiguous (B, H, T, Dh) tensor, as attention's output (weights @ v) is: a
            # .view of its transpose raises there, so the check must not hand over split_heads' strides
            got = fn(heads.clone(memory_format=torch.contiguous_format))
        except Exception as error:  # the reader's code: report, do not propagate
            kind = type(error).__name__
            if "view" in str(error) and num_heads > 1 and seq_len > 1:
                problem = say(
                    "{where}, your function raised {type}: {error}: {hint}",
                    where=where,
                    type=kind,
                    error=str(error),
                    hint=say(
                        "after transpose(1, 2) the tensor is not contiguous, so .view cannot merge it; "
                        "use .reshape(B, T, D) or .contiguous().view(B, T, D)"
                    ),
                )
            else:
                problem = say("{where}, your function raised {type}: {error}", where=where, type=kind, error=str(error))
            return fit_to_page(malformed(title, problem))
        if not isinstance(got, torch.Tensor):
            return malformed(
                title, say("{where}, your function returned {type}, not a tensor", where=where, type=type(got).__name__)
            )
        if tuple(got.shape) != shape:
            found = tuple(got.shape)
            if found == (batch_size, num_heads * seq_len, d_model // num_heads):
                hint = say(
                    "expected shape {expected}, found {found}: that is a vertical stack, one row per (head, token); "
                    "concatenate along the features",
                    expected=shape,
                    found=found,
                )
            else:
                hint = say("expected shape {expected}, found {found}", expected=shape, found=found)
            return _wrong_folded(title, "shape", _at(shape, num_heads, hint))
        if not torch.isfinite(got).all():
            return wrong(title, "values", _at(shape, num_heads, say("the result holds NaN or infinity")))
        if not torch.equal(got, x):
            hint = say("merge(split(x)) != x: are the heads concatenated along the feature axis, in order?")
            if num_heads > 1 and seq_len > 1 and torch.equal(got, heads.reshape(shape)):
                hint = say("a reshape without moving the head axis back mixes tokens: transpose(1, 2) first")
            return _wrong_folded(title, "values", _at(shape, num_heads, hint))
    return right(title, say("correct: merge_heads(split_heads(x)) == x for every shape tried"))


#: The precision exercise 2 asks for the variance: 2 significant figures.
VARIANCE_SIG_FIGS = 2


def check_score_variance(answer, d_k: int = 64, scale: str = "1/d_k") -> Verdict:
    """Exercise 2: the variance of ``scale · q·k`` for q, k with independent unit-variance entries.

    The answer is scale² · d_k, to ``VARIANCE_SIG_FIGS`` = 2 significant figures (more digits are
    fine; one figure fewer, or one unit off in the second, is "close", not a wrong method).
    Recognises: the unscaled d_k, the scale applied once instead of squared, 1 (the 1/√d_k answer
    for another scale).
    """
    shown = say("1 (no scaling)") if isinstance(scale, str) and scale == "1 (no scaling)" else scale  # in words
    title = say("Var(q·k) with scale {scale}, d_k = {d_k}", scale=shown, d_k=d_k)
    value, problem = read_number("answer", answer)
    if problem:
        return malformed(title, problem)
    factor = scale_value(d_k, scale)
    target = factor**2 * d_k
    verdict = compare_number(value, target, sig_figs=VARIANCE_SIG_FIGS)
    if verdict.right:
        return right(title, say("correct: {target:.4g}", target=target))
    slips = [
        (d_k, say("that is the variance before scaling; a factor c multiplies a variance by c²")),
        (factor * d_k, say("a factor c multiplies a variance by c², not by c")),
        (1.0, say("1 is the variance with 1/√d_k; this scale is different")),
        (factor, say("Var(q·k) is d_k before scaling, not 1")),
    ]
    hint = named_slip(value, target, slips, sig_figs=VARIANCE_SIG_FIGS)
    if hint is not None:
        return wrong(title, "variance", hint)
    if verdict.status == "close":
        return close_verdict(title, "variance", verdict.message)
    return wrong(
        title, "variance", say("Var(q·k) = d_k (a sum of d_k products of variance 1); then multiply by scale²")
    )


def check_layer_params(answer, d_model: int = 768, num_heads: int = 12, d_ff: int = 3072) -> Verdict:
    """Exercise 3: the parameters of ``EncoderLayer(d_model, num_heads, d_ff)``, everything included.

    Recognises: biases left out, LayerNorms left out or counted once, attention or the
    feed-forward block alone, one head's projections plus W_O (≈737K, a count some tutorials give).
    """
    title = say(
        "parameters of EncoderLayer({d_model}, {num_heads}, {d_ff})", d_model=d_model, num_heads=num_heads, d_ff=d_ff
    )
    value, problem = read_number("answer", answer)
    if problem:
        return malformed(title, problem)
    attention = attention_params(d_model, num_heads)
    feed_forward = 2 * d_model * d_ff + d_ff + d_model
    norms = 2 * 2 * d_model  # two LayerNorms, a gain and a bias each
    target = attention + feed_forward + norms
    if value == target:
        return right(title, say("correct: {target:,}", target=target))
    head_dim = d_model // num_heads
    slips = [
        (
            attention_params(d_model, num_heads, bias=False) + 2 * d_model * d_ff,
            say("the biases are missing (and the norms?)"),
        ),
        (target - norms, say("the two LayerNorms have a gain and a bias of d_model each")),
        (target - norms // 2, say("there are two LayerNorms, one after each sub-layer")),
        (target - 4 * d_model - d_ff - d_model, say("every linear layer has a bias: 4 in attention, 2 in the MLP")),
        (attention, say("that is the attention alone; add the feed-forward block and the LayerNorms")),
        (feed_forward, say("that is the feed-forward block alone; add the attention and the LayerNorms")),
        (3 * d_model * head_dim + d_model * d_model, say("one head's W_Q, W_K, W_V plus W_O counts no real layer")),
    ]
    for slip, hint in slips:
        if value == slip:
            return wrong(title, "count", hint)
    return wrong(
        title, "count", say("add attention (4·d² + 4·d), the MLP (2·d·d_ff + d_ff + d) and two LayerNorms (4·d)")
    )
