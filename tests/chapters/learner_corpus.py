"""A corpus of learner implementations for the build-it-yourself chapter, right and wrong.

Written from the chapter's stubs and the checkers' contracts only, as many different learners would
write them: a stand-in for the hidden set a reviewer tests the checkers with. Each :class:`Entry` is one
learner's answer to one step, labelled correct or wrong; a wrong one carries ``causes``, lowercase
substrings of which ANY in the checker's verdict means the verdict names the slip. The keywords were
chosen from the slip itself, before any checker was run on the corpus.

Steps (``Entry.step``) and what ``Entry.impl`` is:

* ``"attention"``: ``fn(q, k, v, mask=None) -> (output, weights)``
* ``"causal_mask"``: ``fn(T) -> (T, T) bool``
* ``"split_merge"``: a pair ``(split_heads, merge_heads)``
* ``"module"``: a class ``cls(d_model, num_heads)`` with ``q_proj``, ``k_proj``, ``v_proj``, ``out_proj``
* ``"gqa"``: ``fn(q, k, v, mask=None) -> (output, weights)``
* ``"decode"``: ``fn(q_new, k_new, v_new, k_cache, v_cache) -> (output, k_cache, v_cache)``

:func:`run_checker` runs an entry through its chapter checker; :func:`matches_reference` is this corpus's
own, independent check of its labels (PyTorch references on inputs of its own).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

STEPS = ("attention", "causal_mask", "split_merge", "module", "gqa", "decode")


@dataclass(frozen=True)
class Entry:
    name: str
    step: str
    impl: object
    correct: bool
    causes: tuple[str, ...] = ()
    slip: str = ""


CORPUS: list[Entry] = []


def _add(step, impl, *, correct, causes=(), slip="", name=None):
    name = name or impl.__name__
    assert step in STEPS, step
    assert correct == (not causes), f"{name}: a wrong entry needs causes, a correct one none"
    assert all(c == c.lower() for c in causes), name
    assert name not in {e.name for e in CORPUS}, name
    CORPUS.append(Entry(name, step, impl, correct, tuple(causes), slip))
    return impl


def right(step):
    return lambda impl: _add(step, impl, correct=True)


def wrong(step, slip, causes):
    return lambda impl: _add(step, impl, correct=False, causes=causes, slip=slip)


# --- the cause keywords, decided from each slip (not from the checkers' messages) -----------------------

SCALE_NONE = (
    "not scaled",
    "unscaled",
    "no scal",
    "not divided",
    "without scal",
    "forgot",
    "divided by 1",
    "scale 1 ",
    "factor 1",
    "missing the scal",
    "no 1/√",
)
SCALE_DH = ("by dh", "/dh", "dh instead", "by d_k", "/d_k", "without the square root", "without the √")
SCALE_S = ("√s", "sqrt(s", "number of keys", "key count", "k.shape[-2]")
SCALE_DV = ("√dv", "sqrt(dv", "value width", "v.shape[-1]", "dv instead")
SCALE_DMODEL = ("√d_model", "√d ", "√d)", "√d,", "√d.", "d_model instead", "model width", "full width", "whole width")
SCALE_MUL = ("multipl", "instead of divid", "instead of 1/√", "times √")
SCALE_AFTER = ("after the softmax", "after softmax", "sum to 1", "sums to", "don't sum", "do not sum")
SCALE_H = ("√h", "sqrt(h", "number of heads", "q.shape[1]", "size(1)")
SCALE_T_OR_H = ("√t", "√h", "sqrt(t", "q.size(1)", "shape[1]", "size(1)")
SCALE_S1 = ("√(s + 1)", "√(s+1)", "√s", "number of keys", "cache length", "sqrt(s")
SOFTMAX_QUERIES = ("query axis", "over the queries", "queries'", "dim=-2", "axis -2", "column")
SOFTMAX_AXIS1 = ("dim=1", "axis 1", "head axis", "heads axis", "over the heads", "last axis", "dim=-1")
LOG_SOFTMAX = ("log_softmax", "log-softmax", "negative", "logarithm", "log of")
NOT_SOFTMAX = ("sigmoid", "sum to 1", "sums to", "don't sum", "do not sum", "not a softmax")
MASK_INVERTED = ("invert", "~mask", "true = blocked", "true means blocked", "opposite", "reversed", "convention")
MASK_IGNORED = (
    "ignor",
    "not applied",
    "not used",
    "never applied",
    "without the mask",
    "mask is not",
    "blocked keys get",
    "blocked keys have",
    "weight on blocked",
    "weight to blocked",
)
MASK_AFTER = ("after the softmax", "after softmax", "before the softmax", "sum to 1", "sums to", "renormal")
MASK_ZERO = ("0 instead", "with 0", "to 0", "zero", "-inf", "−∞", "-∞")
MASK_ADD_BOOL = ("bool", "additive", "added", "-inf", "−∞", "-∞", "blocked keys get", "blocked keys have")
INPLACE = ("in place", "in-place", "changed", "modif", "mutat", "overwr")
K_T = ("k.t", ".t ", ".t,", "transpose(-2, -1)", "leading ax", "revers", ".mt")
LEADING = ("leading ax", "unbatched", "bmm", "3-d", "3d", "batch ax", "transpose(-2, -1)")
SWAPPED = ("swap", "order", "(output, weights)", "output first")
TUPLE = ("tuple", "pair", "(output, weights)", "two values", "2 values", "unpack")
SCORES_AS_WEIGHTS = ("scores", "before the softmax", "not normal", "sum to 1", "sums to", "do not sum", "don't sum")
TRANSPOSED_MASK = ("transpos", "mask.t", ".mt", "(s, t)")
DV = ("dv",)
KEEPDIM = ("keepdim", "broadcast", "sum over")

CAUSAL_UPPER = ("transpos", "upper", "above the diagonal", "future", "triu", "j >= i")
CAUSAL_BLOCKED = ("true = blocked", "invert", "convention", "opposite", "~", "negat", "true means blocked")
CAUSAL_DIAG = ("diagonal", "itself")
CAUSAL_AHEAD = ("diagonal", "next", "future", "ahead", "j <= i", "j > i")
DTYPE = ("bool", "dtype")
SHAPE_TT = ("(t, t)", "shape", "extra axis")

NO_TRANSPOSE_SPLIT = ("transpose", "tokens mixed", "mixes tokens", "mixed tokens", "tokens of")
INTERLEAVED = ("interleav", "strided", "features of different heads", "every h-th", "::", "consecutive")
MERGE_NO_TRANSPOSE = ("transpose", "not the inverse", "mixes", "mixed")
CONTIGUOUS = ("contiguous", "reshape")
STACKED = ("stack", "vertical", "sequence axis", "token axis", "dim=-1", "feature axis", "last axis", "along t")
MEAN = ("mean", "average", "concaten", "sum")
CHUNK_AXIS = ("chunk", "dim=-1", "feature axis", "token axis", "sequence axis", "last axis")
HEADS_ARG = ("num_heads", "number of heads", "head count")
SPLIT_AXES = ("transpose(1, 2)", "shape", "axes", "(b, h, t, dh)")

W_NOT_T = ("wᵀ", "w.t", "weight.t", "transpos", "f.linear", "x @ w")
KV_FROM_QUERY = (
    "from the query",
    "query instead",
    "from query",
    "the key and value inputs",
    "key and value arguments",
    "k_proj(query",
    "ignores key",
)
K_READS_VALUE = ("k_proj(value", "from the value", "value instead", "reads value", "reads the value", "key input")
V_READS_KEY = ("v_proj(key", "from the key", "key instead", "reads key", "reads the key", "value input")
OUT_PROJ = ("out_proj",)
OUT_PROJ_SHAPE = ("out_proj", "(d_model, d_model)")
RESIDUAL = ("residual", "+ query", "skip connection", "adds the query", "added the query", "input added")
LAYERNORM = ("layernorm", "layer norm", "layer_norm")
ALWAYS_CAUSAL = (
    "always causal",
    "causal mask when",
    "mask=none",
    "no mask",
    "without a mask",
    "mask is none",
    "own mask",
    "causal even",
)
DROPOUT = ("dropout", "random", "nondetermin", "non-determin", "differs between calls", "two calls")
HEAD_DIM_SWAP = ("head_dim", "num_heads", "(b, h, t, s)", "heads of width", "d_model // num_heads")
SEQ_FIRST = (
    "batch first",
    "batch_first",
    "sequence-first",
    "sequence first",
    "(t, b",
    "seq-first",
    "batch axis",
    "batch and sequence",
)
SIGNATURE = ("signature", "forward(query, key, value", "argument", "positional")
AVERAGED = ("average", "mean", "every head", "each head", "per head", "(b, h, t, s)")
BIAS = ("bias",)
ATTR = ("q_proj",)

TILED = ("i % g", "repeat_interleave", "tiled", "tiling", "tile")
GROUP_COUNT = ("h // g", "h/g", "g times", "group size", "h / g", "i // (h")
GQA_AXIS = ("dim=1", "head axis", "heads axis", "axis 1", "sequence axis", "dim=2", "wrong axis")
NOT_EXPANDED = ("expand", "repeat_interleave", "not expanded", "broadcast")

CAT_AXIS = ("wrong axis", "dim=2", "dim=-2", "sequence axis", "axis 2", "along s")
PREPEND = (
    "prepend",
    "at the front",
    "at the start",
    "put first",
    "before the old",
    "order",
    "appended at the end",
    "goes last",
    "at the end",
)
NOT_ITSELF = ("itself", "own key", "its own", "before appending", "before it is appended", "new key")
KEY0 = ("key 0", "first key", "only the first", "one-token query", "1-token")
CACHE_IGNORED = ("ignor", "only the new", "only its own", "weight 1", "old keys", "past keys", "without the cache")
UNCHANGED = (
    "unchanged",
    "not grown",
    "not appended",
    "old cache",
    "same cache",
    "did not grow",
    "not updated",
    "s + 1",
)
SWAPPED_CACHES = ("swap", "order", "k_cache and v_cache", "v_cache and k_cache", "the other cache")
OVERWRITE = ("overwr", "replac", "append", "in place", "changed", "s + 1", "s+1")
V_IN_K = ("v_new", "value", "k_new")
FOUR = ("three", "(output, k_cache, v_cache)", "4 values", "four", "unpack", "too many")
SQUEEZED = ("(b, h, 1, dh)", "squeeze", "shape", "query axis")


# --- a learner's own earlier steps, reused by their later steps --------------------------------------


def _attn(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def _split(x, h):
    b, t, d = x.shape
    return x.view(b, t, h, d // h).transpose(1, 2)


def _merge(x):
    b, h, t, dh = x.shape
    return x.transpose(1, 2).reshape(b, t, h * dh)


# ======================================================================================================
# Step 1: scaled dot-product attention
# ======================================================================================================


@right("attention")
def att_matmul_inf(q, k, v, mask=None):
    d_k = q.shape[-1]
    scores = torch.matmul(q, k.transpose(-1, -2)) / d_k**0.5
    if mask is not None:
        scores = scores.masked_fill(mask == 0, float("-inf"))
    weights = F.softmax(scores, dim=-1)
    return torch.matmul(weights, v), weights


@right("attention")
def att_einsum_minus_1e9(q, k, v, mask=None):
    scores = torch.einsum("...td,...sd->...ts", q, k) * (1.0 / math.sqrt(q.shape[-1]))
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), -1e9)
    attn = scores.softmax(-1)
    out = torch.einsum("...ts,...sv->...tv", attn, v)
    return out, attn


@right("attention")
def att_bmm_flattened(q, k, v, mask=None):
    *lead, t, dh = q.shape
    s, dv = k.shape[-2], v.shape[-1]
    q3, k3, v3 = q.reshape(-1, t, dh), k.reshape(-1, s, dh), v.reshape(-1, s, dv)
    scores = torch.bmm(q3, k3.transpose(1, 2)) / math.sqrt(dh)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=2)
    out = torch.bmm(weights, v3)
    return out.reshape(*lead, t, dv), weights.reshape(*lead, t, s)


@right("attention")
def att_where_finfo_min(q, k, v, mask=None):
    scores = q @ k.mT / math.sqrt(q.size(-1))
    if mask is not None:
        scores = torch.where(mask, scores, torch.finfo(scores.dtype).min)
    w = scores.softmax(dim=-1)
    return w @ v, w


@right("attention")
def att_additive_float_mask(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1)
    scores = scores / math.sqrt(k.shape[-1])
    if mask is not None:
        bias = torch.zeros(mask.shape, dtype=scores.dtype, device=scores.device)
        bias = bias.masked_fill(~mask, float("-inf"))
        scores = scores + bias
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


@right("attention")
def att_handwritten_softmax(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = scores - scores.max(dim=-1, keepdim=True).values
    e = torch.exp(scores)
    if mask is not None:
        e = e * mask  # blocked keys contribute nothing
    weights = e / e.sum(dim=-1, keepdim=True)
    return weights @ v, weights


@right("attention")
def att_sdpa_plus_weights(q, k, v, mask=None):
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return out, scores.softmax(-1)


@right("attention")
def att_scale_queries_first(q, k, v, mask=None):
    q = q * q.shape[-1] ** -0.5  # a new tensor, the caller's q untouched
    scores = q @ k.swapaxes(-1, -2)
    if mask is not None:
        scores = scores.masked_fill(~mask, -torch.inf)
    weights = nn.functional.softmax(scores, dim=-1)
    return weights @ v, weights


@right("attention")
def att_bool_index_assign(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores[..., ~mask] = float("-inf")
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


@right("attention")
def att_mask_after_softmax_renormalized(q, k, v, mask=None):
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    if mask is not None:
        weights = weights * mask
        weights = weights / weights.sum(-1, keepdim=True)
    return weights @ v, weights


@right("attention")
def att_loop_over_queries(q, k, v, mask=None):
    d = q.shape[-1]
    outs, ws = [], []
    for t in range(q.shape[-2]):
        s = (q[..., t : t + 1, :] @ k.transpose(-2, -1)) / math.sqrt(d)  # (..., 1, S)
        if mask is not None:
            s = s.masked_fill(~mask[t : t + 1], float("-inf"))
        w = s.softmax(-1)
        outs.append(w @ v)
        ws.append(w)
    return torch.cat(outs, dim=-2), torch.cat(ws, dim=-2)


@right("attention")
def att_dropout_zero(q, k, v, mask=None, dropout_p=0.0):
    scale = 1 / math.sqrt(q.size(-1))
    attn = (q @ k.transpose(-2, -1)) * scale
    if mask is not None:
        attn = attn.masked_fill(~mask.bool(), float("-inf"))
    attn = attn.softmax(dim=-1)
    attn = F.dropout(attn, p=dropout_p)
    return attn @ v, attn


@right("attention")
def att_mask_cast_to_float(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / np.sqrt(q.shape[-1])
    if mask is not None:
        m = mask.to(scores.dtype)
        scores = scores.masked_fill(m == 0, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


@wrong("attention", "no scaling at all", SCALE_NONE)
def att_no_scale(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


@wrong("attention", "divides by Dh instead of sqrt(Dh)", SCALE_DH)
def att_scale_by_dh(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / q.shape[-1]
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


@wrong("attention", "divides by sqrt(S), the number of keys", SCALE_S)
def att_scale_by_sqrt_s(q, k, v, mask=None):
    d_k = k.size(-2)  # the learner took the wrong size
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


@wrong("attention", "divides by sqrt(Dv), the value width", SCALE_DV)
def att_scale_by_sqrt_dv(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(v.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


@wrong("attention", "multiplies by sqrt(Dh) instead of dividing", SCALE_MUL)
def att_multiply_by_sqrt(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) * math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


@wrong("attention", "divides the weights by sqrt(Dh) after the softmax", SCALE_AFTER)
def att_scale_after_softmax(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1) / math.sqrt(q.shape[-1])
    return weights @ v, weights


@wrong("attention", "d_k = q.size(1): T or H on batched input, not Dh", SCALE_T_OR_H)
def att_dk_from_size1(q, k, v, mask=None):
    d_k = q.size(1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


@wrong("attention", "softmax over the queries (dim=-2)", SOFTMAX_QUERIES)
def att_softmax_dim_minus2(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = F.softmax(scores, dim=-2)
    return weights @ v, weights


@wrong("attention", "softmax(dim=1): right only for unbatched input", SOFTMAX_AXIS1)
def att_softmax_dim1(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = F.softmax(scores, dim=1)
    return weights @ v, weights


@wrong("attention", "log_softmax instead of softmax", LOG_SOFTMAX)
def att_log_softmax(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e9)
    weights = F.log_softmax(scores, dim=-1)
    return weights @ v, weights


@wrong("attention", "hand-written softmax normalised over the queries", SOFTMAX_QUERIES)
def att_handwritten_softmax_wrong_axis(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    e = scores.exp()
    weights = e / e.sum(dim=-2, keepdim=True)
    return weights @ v, weights


@wrong("attention", "hand-written softmax without keepdim (broadcasts the sums wrongly)", KEEPDIM)
def att_handwritten_softmax_no_keepdim(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    e = torch.exp(scores)
    weights = e / e.sum(-1)
    return weights @ v, weights


@wrong("attention", "sigmoid instead of softmax", NOT_SOFTMAX)
def att_sigmoid(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.sigmoid(scores)
    return weights @ v, weights


@wrong("attention", "mask inverted: masked_fill(mask, -inf) fills the allowed keys", MASK_INVERTED)
def att_mask_inverted(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


@wrong("attention", "mask accepted but never applied", MASK_IGNORED)
def att_mask_ignored(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


@wrong("attention", "mask applied after the softmax (weights zeroed, not renormalised)", MASK_AFTER)
def att_mask_after_softmax(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    weights = scores.softmax(dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)
    return weights @ v, weights


@wrong("attention", "blocked scores filled with 0 instead of -inf", MASK_ZERO)
def att_mask_fill_zero(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, 0)
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


@wrong("attention", "boolean mask added to the scores (adds 1 where allowed)", MASK_ADD_BOOL)
def att_mask_added_as_bool(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores + mask
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


@wrong("attention", "q /= sqrt(Dh) changes the caller's q in place", INPLACE)
def att_inplace_q(q, k, v, mask=None):
    q /= math.sqrt(q.shape[-1])
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


@wrong("attention", "mask.logical_not_() inverts the caller's mask in place", INPLACE)
def att_inplace_mask(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        blocked = mask.logical_not_()
        scores.masked_fill_(blocked, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


@wrong("attention", "k.T on batched input reverses every axis", K_T)
def att_k_dot_T(q, k, v, mask=None):
    scores = q @ k.T / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


@wrong("attention", "torch.bmm directly: works only with exactly one leading axis", LEADING)
def att_bmm_3d_only(q, k, v, mask=None):
    scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.bmm(weights, v), weights


@wrong("attention", "k.transpose(1, 2): the last two axes only for 3-D input", LEADING)
def att_transpose_1_2(q, k, v, mask=None):
    scores = torch.matmul(q, k.transpose(1, 2)) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.matmul(weights, v), weights


@wrong("attention", "returns (weights, output), swapped", SWAPPED)
def att_return_swapped(q, k, v, mask=None):
    out, weights = _attn(q, k, v, mask)
    return weights, out


@wrong("attention", "returns only the output", TUPLE)
def att_return_output_only(q, k, v, mask=None):
    out, _ = _attn(q, k, v, mask)
    return out


@wrong("attention", "returns the scores (before the softmax) as the weights", SCORES_AS_WEIGHTS)
def att_return_scores(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(-1) @ v, scores


@wrong("attention", "mask transposed (mask.mT): only runs when T == S", TRANSPOSED_MASK)
def att_mask_transposed(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask.mT, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


@wrong("attention", "output viewed to q's shape: only runs when Dv == Dh", DV)
def att_output_viewed_as_q(q, k, v, mask=None):
    out, weights = _attn(q, k, v, mask)
    return out.view(q.shape), weights


# ======================================================================================================
# Step 2: the causal mask
# ======================================================================================================


@right("causal_mask")
def causal_tril_ones_bool(T):
    return torch.tril(torch.ones(T, T)).bool()


@right("causal_mask")
def causal_arange_compare(T):
    i = torch.arange(T)
    return i[:, None] >= i[None, :]


@right("causal_mask")
def causal_not_triu(T):
    return ~torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)


@right("causal_mask")
def causal_loops(T):
    m = torch.zeros(T, T, dtype=torch.bool)
    for i in range(T):
        for j in range(i + 1):
            m[i, j] = True
    return m


@right("causal_mask")
def causal_numpy(T):
    return torch.from_numpy(np.tril(np.ones((T, T), dtype=bool)))


@right("causal_mask")
def causal_eq_one(T):
    return torch.ones(T, T).tril() == 1


@right("causal_mask")
def causal_triu_transposed(T):
    return torch.ones(T, T, dtype=torch.bool).triu().T  # a non-contiguous view, values of tril


@wrong("causal_mask", "upper triangle (triu): query i sees the keys after it", CAUSAL_UPPER)
def causal_triu(T):
    return torch.ones(T, T, dtype=torch.bool).triu()


@wrong("causal_mask", "the blocked convention: True above the diagonal", CAUSAL_BLOCKED)
def causal_blocked_convention(T):
    return torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)


@wrong("causal_mask", "the diagonal left out (a token cannot see itself)", CAUSAL_DIAG)
def causal_no_diagonal(T):
    return torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1)


@wrong("causal_mask", "tril(diagonal=1): each token also sees the next one", CAUSAL_AHEAD)
def causal_one_ahead(T):
    return torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=1)


@wrong("causal_mask", "an additive float mask (0 / -inf) instead of booleans", DTYPE)
def causal_additive_float(T):
    return torch.triu(torch.full((T, T), float("-inf")), diagonal=1)


@wrong("causal_mask", "float ones and zeros, not bool", DTYPE)
def causal_float_tril(T):
    return torch.tril(torch.ones(T, T))


@wrong("causal_mask", "an integer 0/1 mask, not bool", DTYPE)
def causal_int_tril(T):
    return torch.tril(torch.ones(T, T, dtype=torch.long))


@wrong("causal_mask", "an extra leading axis: (1, T, T)", SHAPE_TT)
def causal_batched(T):
    return torch.tril(torch.ones(1, T, T, dtype=torch.bool))


@wrong("causal_mask", "arange compared the wrong way (<=): the transpose", CAUSAL_UPPER)
def causal_arange_le(T):
    i = torch.arange(T)
    return i[:, None] <= i[None, :]


# ======================================================================================================
# Step 3: split and merge the heads
# ======================================================================================================


def split_reshape_permute(x, num_heads):
    B, T, D = x.shape
    return x.reshape(B, T, num_heads, D // num_heads).permute(0, 2, 1, 3)


def merge_permute_reshape(x):
    B, H, T, Dh = x.shape
    return x.permute(0, 2, 1, 3).reshape(B, T, H * Dh)


def split_unflatten(x, num_heads):
    return x.unflatten(-1, (num_heads, -1)).transpose(1, 2)


def merge_flatten(x):
    return x.transpose(1, 2).flatten(start_dim=2)


def split_chunk_stack(x, num_heads):
    return torch.stack(x.chunk(num_heads, dim=-1), dim=1)


def merge_unbind_cat(x):
    return torch.cat(x.unbind(dim=1), dim=-1)


def split_view_transpose(x, num_heads):
    b, t, d = x.size()
    return x.view(b, t, num_heads, -1).transpose(1, 2)


def merge_contiguous_view(x):
    b, h, t, dh = x.size()
    return x.transpose(1, 2).contiguous().view(b, t, h * dh)


def split_loop_slices(x, num_heads):
    dh = x.shape[-1] // num_heads
    return torch.stack([x[..., i * dh : (i + 1) * dh] for i in range(num_heads)], dim=1)


def merge_loop_cat(x):
    return torch.cat([x[:, i] for i in range(x.shape[1])], dim=-1)


def merge_reshape_minus1(x):
    return x.transpose(1, 2).reshape(x.size(0), x.size(2), -1)


def split_no_transpose(x, num_heads):
    B, T, D = x.shape
    return x.reshape(B, num_heads, T, D // num_heads)


def merge_no_transpose(x):
    B, H, T, Dh = x.shape
    return x.reshape(B, T, H * Dh)


def split_view_only(x, num_heads):
    B, T, D = x.shape
    return x.view(B, T, num_heads, D // num_heads)


def merge_view_only(x):
    B, T, H, Dh = x.shape
    return x.reshape(B, T, H * Dh)


def split_interleaved(x, num_heads):
    B, T, D = x.shape
    return x.view(B, T, D // num_heads, num_heads).permute(0, 3, 1, 2)


def merge_interleaved(x):
    B, H, T, Dh = x.shape
    return x.permute(0, 2, 3, 1).reshape(B, T, Dh * H)


def merge_view_noncontiguous(x):
    B, H, T, Dh = x.shape
    return x.transpose(1, 2).view(B, T, H * Dh)


def merge_stacked_vertically(x):
    return torch.cat(x.unbind(1), dim=1)


def merge_mean_heads(x):
    return x.mean(dim=1)


def split_chunk_tokens(x, num_heads):
    return torch.stack(x.chunk(num_heads, dim=1), dim=1)


def merge_transpose_inplace(x):
    B, H, T, Dh = x.shape
    return x.transpose_(1, 2).reshape(B, T, H * Dh)


def split_fixed_heads(x, num_heads):
    B, T, D = x.shape
    h = 4  # the learner's own test used 4 heads
    return x.view(B, T, h, D // h).transpose(1, 2)


def split_wrong_axes(x, num_heads):
    B, T, D = x.shape
    return x.view(B, T, num_heads, D // num_heads).transpose(1, 3)


def merge_wrong_axes(x):
    B, Dh, H, T = x.shape
    return x.transpose(1, 3).reshape(B, T, H * Dh)


def _pair(name, split, merge, *, correct, slip="", causes=()):
    _add("split_merge", (split, merge), correct=correct, slip=slip, causes=causes, name=name)


_pair("sm_reshape_permute", split_reshape_permute, merge_permute_reshape, correct=True)
_pair("sm_unflatten_flatten", split_unflatten, merge_flatten, correct=True)
_pair("sm_chunk_stack_unbind_cat", split_chunk_stack, merge_unbind_cat, correct=True)
_pair("sm_view_contiguous_view", split_view_transpose, merge_contiguous_view, correct=True)
_pair("sm_loop_slices", split_loop_slices, merge_loop_cat, correct=True)
_pair("sm_view_reshape_minus1", split_view_transpose, merge_reshape_minus1, correct=True)
_pair(
    "sm_split_no_transpose",
    split_no_transpose,
    merge_no_transpose,
    correct=False,
    slip="split reshapes straight to (B, H, T, Dh), no transpose: tokens mixed (merge its inverse)",
    causes=NO_TRANSPOSE_SPLIT,
)
_pair(
    "sm_split_view_only",
    split_view_only,
    merge_view_only,
    correct=False,
    slip="split stops at (B, T, H, Dh), the transpose forgotten",
    causes=NO_TRANSPOSE_SPLIT + SPLIT_AXES,
)
_pair(
    "sm_interleaved",
    split_interleaved,
    merge_interleaved,
    correct=False,
    slip="view(B, T, Dh, H): head i gets every H-th feature (merge its inverse)",
    causes=INTERLEAVED,
)
_pair(
    "sm_merge_no_transpose",
    split_view_transpose,
    merge_no_transpose,
    correct=False,
    slip="merge reshapes (B, H, T, Dh) straight to (B, T, D), no transpose",
    causes=MERGE_NO_TRANSPOSE,
)
_pair(
    "sm_merge_view_noncontiguous",
    split_view_transpose,
    merge_view_noncontiguous,
    correct=False,
    slip="merge calls .view on the transposed (non-contiguous) tensor: a RuntimeError",
    causes=CONTIGUOUS,
)
_pair(
    "sm_merge_stacked",
    split_reshape_permute,
    merge_stacked_vertically,
    correct=False,
    slip="merge concatenates the heads along the token axis: (B, H*T, Dh)",
    causes=STACKED,
)
_pair(
    "sm_merge_mean",
    split_reshape_permute,
    merge_mean_heads,
    correct=False,
    slip="merge averages the heads instead of concatenating them",
    causes=MEAN,
)
_pair(
    "sm_split_chunk_tokens",
    split_chunk_tokens,
    merge_unbind_cat,
    correct=False,
    slip="split chunks the token axis (dim=1), not the features",
    causes=CHUNK_AXIS,
)
_pair(
    "sm_merge_transpose_inplace",
    split_view_transpose,
    merge_transpose_inplace,
    correct=False,
    slip="merge uses x.transpose_(1, 2), changing the caller's tensor in place",
    causes=INPLACE,
)
_pair(
    "sm_split_fixed_heads",
    split_fixed_heads,
    merge_permute_reshape,
    correct=False,
    slip="split ignores num_heads and always makes 4 heads",
    causes=HEADS_ARG,
)
_pair(
    "sm_wrong_axes",
    split_wrong_axes,
    merge_wrong_axes,
    correct=False,
    slip="split transposes axes 1 and 3: (B, Dh, H, T) (merge its inverse)",
    causes=SPLIT_AXES,
)


# ======================================================================================================
# Step 4: the module
# ======================================================================================================


class _Base(nn.Module):
    """A learner's skeleton: the four projections; subclasses write forward."""

    def __init__(self, d_model, num_heads):
        super().__init__()
        assert d_model % num_heads == 0
        self.d_model = d_model
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)


def _module(correct, slip="", causes=()):
    def register(cls):
        return _add("module", cls, correct=correct, slip=slip, causes=causes)

    return register


@_module(True)
class MhaComposed(_Base):
    def forward(self, query, key, value, mask=None):
        q = _split(self.q_proj(query), self.num_heads)
        k = _split(self.k_proj(key), self.num_heads)
        v = _split(self.v_proj(value), self.num_heads)
        out, weights = _attn(q, k, v, mask)
        return self.out_proj(_merge(out)), weights


@_module(True)
class MhaLoopOverHeads(_Base):
    def forward(self, query, key, value, mask=None):
        q, k, v = self.q_proj(query), self.k_proj(key), self.v_proj(value)
        outs, weights = [], []
        for h in range(self.num_heads):
            sl = slice(h * self.head_dim, (h + 1) * self.head_dim)
            o, w = _attn(q[..., sl], k[..., sl], v[..., sl], mask)
            outs.append(o)
            weights.append(w)
        return self.out_proj(torch.cat(outs, dim=-1)), torch.stack(weights, dim=1)


@_module(True)
class MhaFunctionalSdpa(_Base):
    def forward(self, query, key, value, mask=None):
        B, T, _ = query.shape
        S = key.shape[1]
        q = F.linear(query, self.q_proj.weight, self.q_proj.bias).view(B, T, self.num_heads, -1).transpose(1, 2)
        k = F.linear(key, self.k_proj.weight, self.k_proj.bias).view(B, S, self.num_heads, -1).transpose(1, 2)
        v = F.linear(value, self.v_proj.weight, self.v_proj.bias).view(B, S, self.num_heads, -1).transpose(1, 2)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(-1)
        out = out.transpose(1, 2).reshape(B, T, self.d_model)
        return F.linear(out, self.out_proj.weight, self.out_proj.bias), weights


@_module(True)
class MhaFusedWhenSelf(_Base):
    """Fuses the three projections into one matmul when query, key and value are one tensor."""

    def forward(self, query, key, value, mask=None):
        if query is key and key is value:
            w = torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight])
            b = torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias])
            q, k, v = F.linear(query, w, b).split(self.d_model, dim=-1)
        else:
            q, k, v = self.q_proj(query), self.k_proj(key), self.v_proj(value)
        q, k, v = (_split(t, self.num_heads) for t in (q, k, v))
        out, weights = _attn(q, k, v, mask)
        return self.out_proj(_merge(out)), weights


@_module(True)
class MhaScaleBuffer(_Base):
    def __init__(self, d_model, num_heads):
        super().__init__(d_model, num_heads)
        self.register_buffer("scale", torch.tensor(self.head_dim**-0.5), persistent=False)

    def forward(self, query, key, value, mask=None):
        q = _split(self.q_proj(query), self.num_heads)
        k = _split(self.k_proj(key), self.num_heads)
        v = _split(self.v_proj(value), self.num_heads)
        scores = torch.einsum("bhtd,bhsd->bhts", q, k) * self.scale
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(dim=-1)
        out = torch.einsum("bhts,bhsd->bhtd", weights, v)
        return self.out_proj(_merge(out)), weights


@_module(True)
class MhaDropoutModule(_Base):
    """nn.Dropout on the weights: active in training only, so the module is right in eval mode."""

    def __init__(self, d_model, num_heads, dropout=0.1):
        super().__init__(d_model, num_heads)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None):
        q = _split(self.q_proj(query), self.num_heads)
        k = _split(self.k_proj(key), self.num_heads)
        v = _split(self.v_proj(value), self.num_heads)
        _, weights = _attn(q, k, v, mask)
        out = self.dropout(weights) @ v
        return self.out_proj(_merge(out)), weights


@_module(True)
class MhaHelperMethods(nn.Module):
    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        self.h = num_heads
        self.d_k = d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def _shape(self, x):
        bsz, seq, _ = x.size()
        return x.contiguous().view(bsz, seq, self.h, self.d_k).transpose(1, 2)

    def _unshape(self, x):
        bsz, _, seq, _ = x.size()
        return x.transpose(1, 2).contiguous().view(bsz, seq, self.h * self.d_k)

    def _additive(self, mask, dtype):
        return torch.zeros(mask.shape, dtype=dtype).masked_fill(~mask, -1e9)[None, None]

    def forward(self, query, key, value, mask=None):
        q, k, v = self._shape(self.q_proj(query)), self._shape(self.k_proj(key)), self._shape(self.v_proj(value))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)
        if mask is not None:
            scores = scores + self._additive(mask, scores.dtype)
        attn = torch.softmax(scores, dim=-1)
        return self.out_proj(self._unshape(attn @ v)), attn


@_module(True)
class MhaBatchLoop(_Base):
    def forward(self, query, key, value, mask=None):
        outs, ws = [], []
        for b in range(query.shape[0]):
            q = self.q_proj(query[b]).unflatten(-1, (self.num_heads, self.head_dim)).transpose(0, 1)
            k = self.k_proj(key[b]).unflatten(-1, (self.num_heads, self.head_dim)).transpose(0, 1)
            v = self.v_proj(value[b]).unflatten(-1, (self.num_heads, self.head_dim)).transpose(0, 1)
            o, w = _attn(q, k, v, mask)  # (H, T, Dh), (H, T, S)
            outs.append(self.out_proj(o.transpose(0, 1).flatten(1)))
            ws.append(w)
        return torch.stack(outs), torch.stack(ws)


@_module(True)
class MhaSdpaScaleKwarg(_Base):
    """Extra keyword argument (need_weights), a -1e4 additive mask, and F.sdpa's scale argument."""

    def forward(self, query, key, value, mask=None, need_weights=True):
        q = _split(self.q_proj(query), self.num_heads)
        k = _split(self.k_proj(key), self.num_heads)
        v = _split(self.v_proj(value), self.num_heads)
        bias = None
        if mask is not None:
            bias = torch.zeros(mask.shape, dtype=q.dtype, device=q.device).masked_fill(~mask, -1e4)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=1 / math.sqrt(self.head_dim))
        weights = None
        if need_weights:
            scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
            if bias is not None:
                scores = scores + bias
            weights = scores.softmax(-1)
        return self.out_proj(_merge(out)), weights


@_module(False, "x @ W + b without .T (nn.Linear stores W as (out, in))", W_NOT_T)
class MhaWeightNotTransposed(_Base):
    def forward(self, query, key, value, mask=None):
        q = _split(query @ self.q_proj.weight + self.q_proj.bias, self.num_heads)
        k = _split(key @ self.k_proj.weight + self.k_proj.bias, self.num_heads)
        v = _split(value @ self.v_proj.weight + self.v_proj.bias, self.num_heads)
        out, weights = _attn(q, k, v, mask)
        return _merge(out) @ self.out_proj.weight + self.out_proj.bias, weights


@_module(False, "keys and values projected from the query (self-attention only)", KV_FROM_QUERY)
class MhaKvFromQuery(_Base):
    def forward(self, query, key, value, mask=None):
        q = _split(self.q_proj(query), self.num_heads)
        k = _split(self.k_proj(query), self.num_heads)
        v = _split(self.v_proj(query), self.num_heads)
        out, weights = _attn(q, k, v, mask)
        return self.out_proj(_merge(out)), weights


@_module(False, "k_proj applied to value instead of key", K_READS_VALUE)
class MhaKeyFromValue(_Base):
    def forward(self, query, key, value, mask=None):
        q = _split(self.q_proj(query), self.num_heads)
        k = _split(self.k_proj(value), self.num_heads)
        v = _split(self.v_proj(value), self.num_heads)
        out, weights = _attn(q, k, v, mask)
        return self.out_proj(_merge(out)), weights


@_module(False, "v_proj applied to key instead of value", V_READS_KEY)
class MhaValueFromKey(_Base):
    def forward(self, query, key, value, mask=None):
        q = _split(self.q_proj(query), self.num_heads)
        k = _split(self.k_proj(key), self.num_heads)
        v = _split(self.v_proj(key), self.num_heads)
        out, weights = _attn(q, k, v, mask)
        return self.out_proj(_merge(out)), weights


@_module(False, "out_proj defined but never applied", OUT_PROJ)
class MhaNoOutProj(_Base):
    def forward(self, query, key, value, mask=None):
        q = _split(self.q_proj(query), self.num_heads)
        k = _split(self.k_proj(key), self.num_heads)
        v = _split(self.v_proj(value), self.num_heads)
        out, weights = _attn(q, k, v, mask)
        return _merge(out), weights


@_module(False, "out_proj = nn.Linear(head_dim, d_model), applied per head and summed", OUT_PROJ_SHAPE)
class MhaOutProjPerHead(_Base):
    def __init__(self, d_model, num_heads):
        super().__init__(d_model, num_heads)
        self.out_proj = nn.Linear(self.head_dim, d_model)

    def forward(self, query, key, value, mask=None):
        q = _split(self.q_proj(query), self.num_heads)
        k = _split(self.k_proj(key), self.num_heads)
        v = _split(self.v_proj(value), self.num_heads)
        out, weights = _attn(q, k, v, mask)
        return self.out_proj(out).sum(dim=1), weights


@_module(False, "adds a residual connection (output + query)", RESIDUAL)
class MhaResidual(_Base):
    def forward(self, query, key, value, mask=None):
        q = _split(self.q_proj(query), self.num_heads)
        k = _split(self.k_proj(key), self.num_heads)
        v = _split(self.v_proj(value), self.num_heads)
        out, weights = _attn(q, k, v, mask)
        return query + self.out_proj(_merge(out)), weights


@_module(False, "a LayerNorm on the output", LAYERNORM)
class MhaLayerNorm(_Base):
    def __init__(self, d_model, num_heads):
        super().__init__(d_model, num_heads)
        self.norm = nn.LayerNorm(d_model)

    def forward(self, query, key, value, mask=None):
        q = _split(self.q_proj(query), self.num_heads)
        k = _split(self.k_proj(key), self.num_heads)
        v = _split(self.v_proj(value), self.num_heads)
        out, weights = _attn(q, k, v, mask)
        return self.norm(self.out_proj(_merge(out))), weights


@_module(False, "always causal: builds a causal mask when none is given", ALWAYS_CAUSAL)
class MhaAlwaysCausal(_Base):
    def forward(self, query, key, value, mask=None):
        T, S = query.shape[1], key.shape[1]
        if mask is None:
            mask = torch.ones(T, S, dtype=torch.bool, device=query.device).tril()
        q = _split(self.q_proj(query), self.num_heads)
        k = _split(self.k_proj(key), self.num_heads)
        v = _split(self.v_proj(value), self.num_heads)
        out, weights = _attn(q, k, v, mask)
        return self.out_proj(_merge(out)), weights


@_module(False, "F.dropout(p=0.1) without training=self.training: active in eval mode too", DROPOUT)
class MhaDropoutAlwaysOn(_Base):
    def forward(self, query, key, value, mask=None):
        q = _split(self.q_proj(query), self.num_heads)
        k = _split(self.k_proj(key), self.num_heads)
        v = _split(self.v_proj(value), self.num_heads)
        _, weights = _attn(q, k, v, mask)
        weights = F.dropout(weights, p=0.1)
        return self.out_proj(_merge(weights @ v)), weights


@_module(False, "view(B, T, head_dim, num_heads): heads interleaved (merge consistent)", INTERLEAVED)
class MhaInterleavedHeads(_Base):
    def forward(self, query, key, value, mask=None):
        B, T, _ = query.shape
        S = key.shape[1]
        q = self.q_proj(query).view(B, T, self.head_dim, self.num_heads).permute(0, 3, 1, 2)
        k = self.k_proj(key).view(B, S, self.head_dim, self.num_heads).permute(0, 3, 1, 2)
        v = self.v_proj(value).view(B, S, self.head_dim, self.num_heads).permute(0, 3, 1, 2)
        out, weights = _attn(q, k, v, mask)
        out = out.permute(0, 2, 3, 1).reshape(B, T, self.d_model)
        return self.out_proj(out), weights


@_module(False, "num_heads used as the head width: D/H heads of width H", HEAD_DIM_SWAP)
class MhaHeadDimIsNumHeads(_Base):
    def forward(self, query, key, value, mask=None):
        B, T, _ = query.shape
        S = key.shape[1]
        q = self.q_proj(query).view(B, T, -1, self.num_heads).transpose(1, 2)
        k = self.k_proj(key).view(B, S, -1, self.num_heads).transpose(1, 2)
        v = self.v_proj(value).view(B, S, -1, self.num_heads).transpose(1, 2)
        out, weights = _attn(q, k, v, mask)
        return self.out_proj(out.transpose(1, 2).reshape(B, T, self.d_model)), weights


@_module(False, "sequence-first layout (T, B, D), as nn.MultiheadAttention's default", SEQ_FIRST)
class MhaSequenceFirst(_Base):
    def forward(self, query, key, value, mask=None):
        tgt_len, bsz, _ = query.shape
        src_len = key.shape[0]
        H, Dh = self.num_heads, self.head_dim
        q = self.q_proj(query).reshape(tgt_len, bsz * H, Dh).transpose(0, 1)
        k = self.k_proj(key).reshape(src_len, bsz * H, Dh).transpose(0, 1)
        v = self.v_proj(value).reshape(src_len, bsz * H, Dh).transpose(0, 1)
        out, weights = _attn(q, k, v, mask)  # (B*H, T, Dh)
        out = out.transpose(0, 1).reshape(tgt_len, bsz, self.d_model)
        return self.out_proj(out), weights.view(bsz, H, tgt_len, src_len)


@_module(False, "forward(self, x, mask=None): self-attention only, wrong signature", SIGNATURE)
class MhaSelfOnlySignature(_Base):
    def forward(self, x, mask=None):
        q = _split(self.q_proj(x), self.num_heads)
        k = _split(self.k_proj(x), self.num_heads)
        v = _split(self.v_proj(x), self.num_heads)
        out, weights = _attn(q, k, v, mask)
        return self.out_proj(_merge(out)), weights


@_module(False, "weights averaged over the heads (B, T, S)", AVERAGED)
class MhaWeightsAveraged(_Base):
    def forward(self, query, key, value, mask=None):
        q = _split(self.q_proj(query), self.num_heads)
        k = _split(self.k_proj(key), self.num_heads)
        v = _split(self.v_proj(value), self.num_heads)
        out, weights = _attn(q, k, v, mask)
        return self.out_proj(_merge(out)), weights.mean(dim=1)


@_module(False, "returns only the output", TUPLE)
class MhaOutputOnly(_Base):
    def forward(self, query, key, value, mask=None):
        q = _split(self.q_proj(query), self.num_heads)
        k = _split(self.k_proj(key), self.num_heads)
        v = _split(self.v_proj(value), self.num_heads)
        out, _ = _attn(q, k, v, mask)
        return self.out_proj(_merge(out))


@_module(False, "mask read with nn.MultiheadAttention's convention (True = blocked)", MASK_INVERTED)
class MhaMaskInverted(_Base):
    def forward(self, query, key, value, mask=None):
        q = _split(self.q_proj(query), self.num_heads)
        k = _split(self.k_proj(key), self.num_heads)
        v = _split(self.v_proj(value), self.num_heads)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        weights = scores.softmax(-1)
        return self.out_proj(_merge(weights @ v)), weights


@_module(False, "mask accepted but not passed on to the attention", MASK_IGNORED)
class MhaMaskIgnored(_Base):
    def forward(self, query, key, value, mask=None):
        q = _split(self.q_proj(query), self.num_heads)
        k = _split(self.k_proj(key), self.num_heads)
        v = _split(self.v_proj(value), self.num_heads)
        out, weights = _attn(q, k, v)
        return self.out_proj(_merge(out)), weights


@_module(False, "scores divided by sqrt(d_model) instead of sqrt(head_dim)", SCALE_DMODEL)
class MhaScaleDModel(_Base):
    def forward(self, query, key, value, mask=None):
        q = _split(self.q_proj(query), self.num_heads)
        k = _split(self.k_proj(key), self.num_heads)
        v = _split(self.v_proj(value), self.num_heads)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_model)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(-1)
        return self.out_proj(_merge(weights @ v)), weights


@_module(False, "no scaling of the scores", SCALE_NONE)
class MhaNoScale(_Base):
    def forward(self, query, key, value, mask=None):
        q = _split(self.q_proj(query), self.num_heads)
        k = _split(self.k_proj(key), self.num_heads)
        v = _split(self.v_proj(value), self.num_heads)
        scores = q @ k.transpose(-2, -1)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(-1)
        return self.out_proj(_merge(weights @ v)), weights


@_module(False, "heads split by reshape to (B, H, T, Dh) without the transpose", NO_TRANSPOSE_SPLIT)
class MhaSplitNoTranspose(_Base):
    def forward(self, query, key, value, mask=None):
        B, T, D = query.shape
        S = key.shape[1]
        q = self.q_proj(query).reshape(B, self.num_heads, T, self.head_dim)
        k = self.k_proj(key).reshape(B, self.num_heads, S, self.head_dim)
        v = self.v_proj(value).reshape(B, self.num_heads, S, self.head_dim)
        out, weights = _attn(q, k, v, mask)
        return self.out_proj(out.reshape(B, T, D)), weights


@_module(False, "heads merged by reshape to (B, T, D) without the transpose", MERGE_NO_TRANSPOSE)
class MhaMergeNoTranspose(_Base):
    def forward(self, query, key, value, mask=None):
        B, T, D = query.shape
        q = _split(self.q_proj(query), self.num_heads)
        k = _split(self.k_proj(key), self.num_heads)
        v = _split(self.v_proj(value), self.num_heads)
        out, weights = _attn(q, k, v, mask)
        return self.out_proj(out.reshape(B, T, D)), weights


@_module(False, "softmax over the queries (dim=-2)", SOFTMAX_QUERIES)
class MhaSoftmaxQueries(_Base):
    def forward(self, query, key, value, mask=None):
        q = _split(self.q_proj(query), self.num_heads)
        k = _split(self.k_proj(key), self.num_heads)
        v = _split(self.v_proj(value), self.num_heads)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(dim=-2)
        return self.out_proj(_merge(weights @ v)), weights


@_module(False, "nn.Linear(..., bias=False): the projections have no bias", BIAS)
class MhaNoBias(_Base):
    def __init__(self, d_model, num_heads):
        super().__init__(d_model, num_heads)
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, d_model, bias=False)
        self.v_proj = nn.Linear(d_model, d_model, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)

    def forward(self, query, key, value, mask=None):
        q = _split(self.q_proj(query), self.num_heads)
        k = _split(self.k_proj(key), self.num_heads)
        v = _split(self.v_proj(value), self.num_heads)
        out, weights = _attn(q, k, v, mask)
        return self.out_proj(_merge(out)), weights


@_module(False, "projections named W_q, W_k, W_v, W_o instead of q_proj, ...", ATTR)
class MhaOtherNames(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, query, key, value, mask=None):
        q = _split(self.W_q(query), self.num_heads)
        k = _split(self.W_k(key), self.num_heads)
        v = _split(self.W_v(value), self.num_heads)
        out, weights = _attn(q, k, v, mask)
        return self.W_o(_merge(out)), weights


@_module(False, "mask.unsqueeze_(0) changes the caller's mask in place", INPLACE)
class MhaMaskUnsqueezeInplace(_Base):
    def forward(self, query, key, value, mask=None):
        q = _split(self.q_proj(query), self.num_heads)
        k = _split(self.k_proj(key), self.num_heads)
        v = _split(self.v_proj(value), self.num_heads)
        if mask is not None:
            mask.unsqueeze_(0).unsqueeze_(0)  # (1, 1, T, S)
        out, weights = _attn(q, k, v, mask)
        return self.out_proj(_merge(out)), weights


# ======================================================================================================
# Step 5: grouped-query attention
# ======================================================================================================


@right("gqa")
def gqa_repeat_interleave_fn(q, k, v, mask=None):
    n_rep = q.size(1) // k.size(1)
    k = torch.repeat_interleave(k, n_rep, dim=-3)
    v = torch.repeat_interleave(v, n_rep, dim=-3)
    return _attn(q, k, v, mask)


@right("gqa")
def gqa_expand_reshape(q, k, v, mask=None):
    B, H, T, Dh = q.shape
    G, S = k.shape[1], k.shape[2]
    r = H // G
    k = k[:, :, None].expand(B, G, r, S, Dh).reshape(B, H, S, Dh)
    v = v[:, :, None].expand(B, G, r, S, v.shape[-1]).reshape(B, H, S, v.shape[-1])
    return _attn(q, k, v, mask)


@right("gqa")
def gqa_grouped_queries(q, k, v, mask=None):
    B, H, T, Dh = q.shape
    G = k.shape[1]
    qg = q.view(B, G, H // G, T, Dh)  # heads j*r ... (j+1)*r - 1 share K/V head j
    scores = qg @ k.unsqueeze(2).transpose(-2, -1) / math.sqrt(Dh)  # (B, G, r, T, S)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = scores.softmax(-1)
    out = w @ v.unsqueeze(2)
    return out.reshape(B, H, T, -1), w.reshape(B, H, T, -1)


@right("gqa")
def gqa_index_select(q, k, v, mask=None):
    H, G = q.shape[1], k.shape[1]
    idx = torch.arange(H, device=q.device) // (H // G)
    return _attn(q, k.index_select(1, idx), v.index_select(1, idx), mask)


@right("gqa")
def gqa_loop_heads(q, k, v, mask=None):
    H, G = q.shape[1], k.shape[1]
    per = H // G
    outs, ws = [], []
    for i in range(H):
        o, w = _attn(q[:, i], k[:, i // per], v[:, i // per], mask)
        outs.append(o)
        ws.append(w)
    return torch.stack(outs, 1), torch.stack(ws, 1)


@right("gqa")
def gqa_sdpa_enable_gqa(q, k, v, mask=None):
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    r = q.shape[1] // k.shape[1]
    _, w = _attn(q, k.repeat_interleave(r, 1), v.repeat_interleave(r, 1), mask)
    return out, w


@wrong("gqa", "k.repeat tiles the K/V heads: head i reads i % G", TILED)
def gqa_repeat_tiles(q, k, v, mask=None):
    r = q.shape[1] // k.shape[1]
    return _attn(q, k.repeat(1, r, 1, 1), v.repeat(1, r, 1, 1), mask)


@wrong("gqa", "unsqueeze(1).expand(B, r, G, ...): tiles, head i reads i % G", TILED)
def gqa_expand_new_axis_first(q, k, v, mask=None):
    B, H, T, Dh = q.shape
    G, S = k.shape[1], k.shape[2]
    r = H // G
    k = k.unsqueeze(1).expand(B, r, G, S, Dh).reshape(B, H, S, Dh)
    v = v.unsqueeze(1).expand(B, r, G, S, Dh).reshape(B, H, S, Dh)
    return _attn(q, k, v, mask)


@wrong("gqa", "index arange(H) % G: head i reads i % G", TILED)
def gqa_index_modulo(q, k, v, mask=None):
    H, G = q.shape[1], k.shape[1]
    idx = torch.arange(H) % G
    return _attn(q, k[:, idx], v[:, idx], mask)


@wrong("gqa", "q viewed as (B, r, G, T, Dh): groups of strided heads", TILED)
def gqa_grouped_view_wrong_order(q, k, v, mask=None):
    B, H, T, Dh = q.shape
    G = k.shape[1]
    qg = q.view(B, H // G, G, T, Dh)
    scores = qg @ k.unsqueeze(1).transpose(-2, -1) / math.sqrt(Dh)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = scores.softmax(-1)
    return (w @ v.unsqueeze(1)).reshape(B, H, T, Dh), w.reshape(B, H, T, -1)


@wrong("gqa", "repeat_interleave(G) instead of H // G", GROUP_COUNT)
def gqa_repeat_by_g(q, k, v, mask=None):
    G = k.shape[1]
    return _attn(q, k.repeat_interleave(G, dim=1), v.repeat_interleave(G, dim=1), mask)


@wrong("gqa", "repeat_interleave along the sequence axis (dim=2)", GQA_AXIS)
def gqa_repeat_wrong_axis(q, k, v, mask=None):
    r = q.shape[1] // k.shape[1]
    return _attn(q, k.repeat_interleave(r, dim=2), v.repeat_interleave(r, dim=2), mask)


@wrong("gqa", "K/V not expanded: relies on broadcasting (works for G = 1 or G = H only)", NOT_EXPANDED)
def gqa_not_expanded(q, k, v, mask=None):
    return _attn(q, k, v, mask)


@wrong("gqa", "scale by sqrt(q.shape[1]) = sqrt(H), not sqrt(Dh)", SCALE_H)
def gqa_scale_by_heads(q, k, v, mask=None):
    r = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(r, 1), v.repeat_interleave(r, 1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = scores.softmax(-1)
    return w @ v, w


@wrong("gqa", "no scaling", SCALE_NONE)
def gqa_no_scale(q, k, v, mask=None):
    r = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(r, 1), v.repeat_interleave(r, 1)
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = scores.softmax(-1)
    return w @ v, w


@wrong("gqa", "mask ignored", MASK_IGNORED)
def gqa_mask_ignored(q, k, v, mask=None):
    r = q.shape[1] // k.shape[1]
    return _attn(q, k.repeat_interleave(r, 1), v.repeat_interleave(r, 1))


@wrong("gqa", "weights averaged over each group: (B, G, T, S)", AVERAGED + ("each query head", "every query head"))
def gqa_weights_per_group(q, k, v, mask=None):
    B, H, T, Dh = q.shape
    G = k.shape[1]
    r = H // G
    out, w = _attn(q, k.repeat_interleave(r, 1), v.repeat_interleave(r, 1), mask)
    return out, w.view(B, G, r, T, -1).mean(2)


@wrong("gqa", "q.mul_(scale) changes the caller's q in place", INPLACE)
def gqa_inplace_q(q, k, v, mask=None):
    r = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(r, 1), v.repeat_interleave(r, 1)
    q = q.mul_(q.shape[-1] ** -0.5)
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = scores.softmax(-1)
    return w @ v, w


@wrong("gqa", "softmax over the queries (dim=-2)", SOFTMAX_QUERIES)
def gqa_softmax_queries(q, k, v, mask=None):
    r = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(r, 1), v.repeat_interleave(r, 1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = scores.softmax(-2)
    return w @ v, w


@wrong("gqa", "mask inverted", MASK_INVERTED)
def gqa_mask_inverted(q, k, v, mask=None):
    r = q.shape[1] // k.shape[1]
    if mask is not None:
        mask = ~mask
    return _attn(q, k.repeat_interleave(r, 1), v.repeat_interleave(r, 1), mask)


# ======================================================================================================
# Step 6: one decoding step with a KV cache
# ======================================================================================================


@right("decode")
def dec_cat_minus2(q_new, k_new, v_new, k_cache, v_cache):
    k_all = torch.cat((k_cache, k_new), dim=-2)
    v_all = torch.cat((v_cache, v_new), dim=-2)
    scores = q_new @ k_all.transpose(-2, -1) / math.sqrt(q_new.shape[-1])
    out = scores.softmax(dim=-1) @ v_all
    return out, k_all, v_all


@right("decode")
def dec_sdpa(q_new, k_new, v_new, k_cache, v_cache):
    k_cache = torch.concat([k_cache, k_new], dim=2)
    v_cache = torch.concat([v_cache, v_new], dim=2)
    out = F.scaled_dot_product_attention(q_new, k_cache, v_cache)
    return out, k_cache, v_cache


@right("decode")
def dec_preallocate_copy(q_new, k_new, v_new, k_cache, v_cache):
    B, H, S, Dh = k_cache.shape
    k = k_cache.new_empty(B, H, S + 1, Dh)
    v = v_cache.new_empty(B, H, S + 1, v_cache.shape[-1])
    k[:, :, :S] = k_cache
    k[:, :, S:] = k_new
    v[:, :, :S] = v_cache
    v[:, :, S:] = v_new
    out, _ = _attn(q_new, k, v)
    return out, k, v


@right("decode")
def dec_einsum(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat([k_cache, k_new], 2)
    v = torch.cat([v_cache, v_new], 2)
    s = torch.einsum("bhqd,bhkd->bhqk", q_new, k) / q_new.shape[-1] ** 0.5
    out = torch.einsum("bhqk,bhkd->bhqd", s.softmax(-1), v)
    return out, k, v


@right("decode")
def dec_last_row_of_causal(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat([k_cache, k_new], dim=2)
    v = torch.cat([v_cache, v_new], dim=2)
    n = k.shape[2]
    mask = torch.ones(n, n, dtype=torch.bool).tril()[-1:]  # the new token is the last row
    out, _ = _attn(q_new, k, v, mask)
    return out, k, v


@right("decode")
def dec_tuple_return_list_cat(q_new, k_new, v_new, k_cache, v_cache):
    new_k = torch.cat([k_cache, k_new], dim=2)
    new_v = torch.cat([v_cache, v_new], dim=2)
    weights = torch.softmax((q_new @ new_k.mT) * q_new.size(-1) ** -0.5, dim=-1)
    return (weights @ new_v, new_k, new_v)


@wrong("decode", "cache grown on the feature axis (dim=-1)", CAT_AXIS)
def dec_cat_last_axis(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat([k_cache, k_new], dim=-1)
    v = torch.cat([v_cache, v_new], dim=-1)
    out, _ = _attn(q_new, k, v)
    return out, k, v


@wrong("decode", "cache grown on the heads axis (dim=1)", CAT_AXIS)
def dec_cat_heads_axis(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat([k_cache, k_new], dim=1)
    v = torch.cat([v_cache, v_new], dim=1)
    out, _ = _attn(q_new, k, v)
    return out, k, v


@wrong("decode", "new token put first in the caches (prepended)", PREPEND)
def dec_prepend(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat([k_new, k_cache], dim=2)
    v = torch.cat([v_new, v_cache], dim=2)
    out, _ = _attn(q_new, k, v)
    return out, k, v


@wrong("decode", "attends over the old cache before appending: not to itself", NOT_ITSELF)
def dec_not_itself(q_new, k_new, v_new, k_cache, v_cache):
    out, _ = _attn(q_new, k_cache, v_cache)
    k_cache = torch.cat([k_cache, k_new], dim=2)
    v_cache = torch.cat([v_cache, v_new], dim=2)
    return out, k_cache, v_cache


@wrong("decode", "first row of a causal mask on the one-token query: only key 0", KEY0)
def dec_causal_first_row(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat([k_cache, k_new], dim=2)
    v = torch.cat([v_cache, v_new], dim=2)
    n = k.shape[2]
    mask = torch.tril(torch.ones(n, n, dtype=torch.bool))[:1]
    out, _ = _attn(q_new, k, v, mask)
    return out, k, v


@wrong("decode", "F.scaled_dot_product_attention(is_causal=True) on one query: only key 0", KEY0)
def dec_sdpa_is_causal(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat([k_cache, k_new], dim=2)
    v = torch.cat([v_cache, v_new], dim=2)
    out = F.scaled_dot_product_attention(q_new, k, v, is_causal=True)
    return out, k, v


@wrong("decode", "cache ignored: the new token attends only to itself", CACHE_IGNORED)
def dec_cache_ignored(q_new, k_new, v_new, k_cache, v_cache):
    out, _ = _attn(q_new, k_new, v_new)
    return out, torch.cat([k_cache, k_new], dim=2), torch.cat([v_cache, v_new], dim=2)


@wrong("decode", "attention right, but the old caches returned unchanged", UNCHANGED)
def dec_caches_unchanged(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat([k_cache, k_new], dim=2)
    v = torch.cat([v_cache, v_new], dim=2)
    out, _ = _attn(q_new, k, v)
    return out, k_cache, v_cache


@wrong("decode", "returns (output, v_cache, k_cache): caches swapped", SWAPPED_CACHES)
def dec_caches_swapped(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat([k_cache, k_new], dim=2)
    v = torch.cat([v_cache, v_new], dim=2)
    out, _ = _attn(q_new, k, v)
    return out, v, k


@wrong("decode", "writes the new K/V over the last cache row instead of appending", OVERWRITE)
def dec_overwrite_last(q_new, k_new, v_new, k_cache, v_cache):
    k, v = k_cache.clone(), v_cache.clone()
    k[:, :, -1:] = k_new
    v[:, :, -1:] = v_new
    out, _ = _attn(q_new, k, v)
    return out, k, v


@wrong("decode", "q_new appended to the key cache instead of k_new", ("q_new", "query instead", "the query"))
def dec_q_into_k(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat([k_cache, q_new], dim=2)
    v = torch.cat([v_cache, v_new], dim=2)
    out, _ = _attn(q_new, k, v)
    return out, k, v


@wrong("decode", "no scaling", SCALE_NONE)
def dec_no_scale(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat([k_cache, k_new], dim=2)
    v = torch.cat([v_cache, v_new], dim=2)
    w = (q_new @ k.transpose(-2, -1)).softmax(-1)
    return w @ v, k, v


@wrong("decode", "scale by sqrt(S + 1), the cache length", SCALE_S1)
def dec_scale_by_length(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat([k_cache, k_new], dim=2)
    v = torch.cat([v_cache, v_new], dim=2)
    w = (q_new @ k.transpose(-2, -1) / math.sqrt(k.shape[2])).softmax(-1)
    return w @ v, k, v


@wrong("decode", "softmax over the (single) query axis: every weight 1", SOFTMAX_QUERIES)
def dec_softmax_queries(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat([k_cache, k_new], dim=2)
    v = torch.cat([v_cache, v_new], dim=2)
    w = (q_new @ k.transpose(-2, -1) / math.sqrt(q_new.shape[-1])).softmax(-2)
    return w @ v, k, v


@wrong("decode", "v_new appended to the key cache (typo)", V_IN_K)
def dec_v_into_k(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat([k_cache, v_new], dim=2)
    v = torch.cat([v_cache, v_new], dim=2)
    out, _ = _attn(q_new, k, v)
    return out, k, v


@wrong("decode", "returns four values (output, weights, k_cache, v_cache)", FOUR)
def dec_returns_weights_too(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat([k_cache, k_new], dim=2)
    v = torch.cat([v_cache, v_new], dim=2)
    out, w = _attn(q_new, k, v)
    return out, w, k, v


@wrong("decode", "output squeezed to (B, H, Dh)", SQUEEZED)
def dec_output_squeezed(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat([k_cache, k_new], dim=2)
    v = torch.cat([v_cache, v_new], dim=2)
    out, _ = _attn(q_new, k, v)
    return out.squeeze(2), k, v


@wrong("decode", "q_new /= sqrt(Dh) changes the caller's query in place", INPLACE)
def dec_inplace_q(q_new, k_new, v_new, k_cache, v_cache):
    q_new /= math.sqrt(q_new.shape[-1])
    k = torch.cat([k_cache, k_new], dim=2)
    v = torch.cat([v_cache, v_new], dim=2)
    w = (q_new @ k.transpose(-2, -1)).softmax(-1)
    return w @ v, k, v


# ======================================================================================================
# Running the chapter's checkers, and this corpus's own check of its labels
# ======================================================================================================


def run_checker(entry: Entry):
    """The chapter checker's Verdict for ``entry``."""
    from mha.chapters.build_it_yourself import build, build_steps

    impl = entry.impl
    if entry.step == "attention":
        return build.check_attention(impl)
    if entry.step == "causal_mask":
        return build.check_causal_mask(impl)
    if entry.step == "split_merge":
        return build.check_split_merge(*impl)
    if entry.step == "module":
        return build.check_multi_head_attention(impl)
    if entry.step == "gqa":
        return build_steps.check_gqa_attention(impl)
    return build_steps.check_decode_step(impl)


def names_cause(entry: Entry, text: str) -> bool:
    """True when one of the entry's cause keywords is in the verdict (lines unwrapped, lower case)."""
    low = " ".join(text.split()).lower()
    return any(c in low for c in entry.causes)


def _rand(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _ref_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = scores.softmax(-1)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return out, w


def _close(a, b):
    return isinstance(a, torch.Tensor) and a.shape == b.shape and torch.allclose(a.double(), b, atol=1e-6)


def _row_mask(t, s, seed):
    m = torch.rand(t, s, generator=torch.Generator().manual_seed(seed)) > 0.4
    m[:, seed % s] = True  # never a whole row blocked
    return m


def _same_call(fn, args, expected):
    """Run ``fn(*args)``; True when every returned tensor matches ``expected`` and no input changed."""
    originals = [a.clone() for a in args]
    try:
        got = fn(*args)
    except Exception:
        return False
    if not isinstance(got, tuple) or len(got) != len(expected):
        return False
    if any(a.shape != o.shape or not torch.equal(a, o) for a, o in zip(args, originals)):
        return False
    return all(_close(g, e) for g, e in zip(got, expected))


def _check_attention_own(fn):
    ok = True
    for lead, seed in (((2, 3), 1), ((4,), 2), ((), 3)):
        q, k, v = _rand(*lead, 5, 4, seed=seed), _rand(*lead, 7, 4, seed=seed + 10), _rand(*lead, 7, 6, seed=seed + 20)
        for mask in (None, _row_mask(5, 7, seed)):
            args = (q, k, v) if mask is None else (q, k, v, mask)
            ok &= _same_call(fn, args, _ref_attention(q, k, v, mask))
    return ok


def _check_causal_own(fn):
    for t in (1, 3, 6):
        try:
            m = fn(t)
        except Exception:
            return False
        if not isinstance(m, torch.Tensor) or m.dtype != torch.bool or m.shape != (t, t):
            return False
        if not torch.equal(m, torch.ones(t, t, dtype=torch.bool).tril()):
            return False
    return True


def _check_split_merge_own(split, merge):
    x = _rand(2, 5, 12, seed=4)
    ref = x.view(2, 5, 3, 4).transpose(1, 2)
    ok = _same_call(lambda a: (split(a, 3),), (x,), (ref,))
    heads = _rand(2, 3, 5, 4, seed=5)
    ok &= _same_call(lambda a: (merge(a),), (heads,), (heads.transpose(1, 2).reshape(2, 5, 12),))
    return ok


def _check_module_own(cls):
    d, h = 12, 3
    ref = nn.MultiheadAttention(d, h, batch_first=True, dtype=torch.float64).eval()
    with torch.no_grad():
        for p in ref.parameters():
            p.copy_(_rand(*p.shape, seed=p.numel()))
    try:
        mod = cls(d, h).double().eval()
        wq, wk, wv = ref.in_proj_weight.detach().chunk(3)
        bq, bk, bv = ref.in_proj_bias.detach().chunk(3)
        with torch.no_grad():
            for lin, w, b in (
                (mod.q_proj, wq, bq),
                (mod.k_proj, wk, bk),
                (mod.v_proj, wv, bv),
                (mod.out_proj, ref.out_proj.weight, ref.out_proj.bias),
            ):
                lin.weight.copy_(w)
                lin.bias.copy_(b)
    except Exception:
        return False
    x, mem_k, mem_v = _rand(2, 5, d, seed=6), _rand(2, 7, d, seed=7), _rand(2, 7, d, seed=8)
    ok = True
    for query, key, value, mask in (
        (x, x, x, None),
        (x, mem_k, mem_v, None),
        (x, mem_k, mem_v, _row_mask(5, 7, 2)),
        (x, x, x, torch.ones(5, 5, dtype=torch.bool).tril()),
    ):
        blocked = None if mask is None else ~mask
        with torch.no_grad():
            expected = ref(query, key, value, attn_mask=blocked, average_attn_weights=False)
            args = (query, key, value) if mask is None else (query, key, value, mask)
            ok &= _same_call(mod, args, expected)
    return ok


def _check_gqa_own(fn):
    ok = True
    for h, g, seed in ((6, 2, 1), (6, 3, 2), (4, 1, 3), (4, 4, 4)):
        q, k, v = _rand(2, h, 5, 4, seed=seed), _rand(2, g, 7, 4, seed=seed + 10), _rand(2, g, 7, 4, seed=seed + 20)
        for mask in (None, _row_mask(5, 7, seed)):
            r = h // g
            expected = _ref_attention(q, k.repeat_interleave(r, 1), v.repeat_interleave(r, 1), mask)
            args = (q, k, v) if mask is None else (q, k, v, mask)
            ok &= _same_call(fn, args, expected)
    return ok


def _check_decode_own(fn):
    ok = True
    for b, h, s, seed in ((2, 3, 6, 1), (1, 2, 1, 2)):
        q, kc, vc = _rand(b, h, 1, 4, seed=seed), _rand(b, h, s, 4, seed=seed + 10), _rand(b, h, s, 4, seed=seed + 20)
        kn, vn = _rand(b, h, 1, 4, seed=seed + 30), _rand(b, h, 1, 4, seed=seed + 40)
        k_all, v_all = torch.cat([kc, kn], 2), torch.cat([vc, vn], 2)
        expected = (_ref_attention(q, k_all, v_all)[0], k_all, v_all)
        ok &= _same_call(fn, (q, kn, vn, kc, vc), expected)
    return ok


def matches_reference(entry: Entry) -> bool:
    """This corpus's own check, independent of the chapter's checkers: does ``entry`` match PyTorch?"""
    step, impl = entry.step, entry.impl
    if step == "attention":
        return _check_attention_own(impl)
    if step == "causal_mask":
        return _check_causal_own(impl)
    if step == "split_merge":
        return _check_split_merge_own(*impl)
    if step == "module":
        return _check_module_own(impl)
    if step == "gqa":
        return _check_gqa_own(impl)
    return _check_decode_own(impl)
