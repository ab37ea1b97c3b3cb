"""The build-it-yourself chapter's references: PyTorch's attention, head split and module computed in
float64 with one usual slip built in at a time, so that a checker can name the slip whose result the
learner's code reproduces exactly (each slip's sentence says what is wrong and what to change).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..checking.answers import Message, say
from .build_diagnosis import run_learner

# ------------------------------------------------------------------------------------------------
# Step 1: scaled dot-product attention
# ------------------------------------------------------------------------------------------------

ATTENTION_SLIPS = {
    "no_scale": say("the scores are not scaled: divide q kᵀ by √Dh (Dh = q.shape[-1]) before the softmax"),
    "scale_by_d": say("the scores are divided by Dh: the scale is 1/√Dh, so that q·k has variance about 1"),
    "wrong_axis": say(
        "the softmax runs over the queries: use dim=-1, so that each query's weights over the keys sum to 1"
    ),
    "mask_inverted": say("the mask is inverted: True means *may attend*, so block where the mask is False"),
    "mask_ignored": say(
        "the mask is not applied: set the scores of blocked keys (mask False) to -inf before the softmax"
    ),
}


def attention_with_slip(q, k, v, mask=None, slip: str | None = None):
    """softmax(q kᵀ/√Dh + mask) v with one slip built in. Shapes: q (..., T, Dh), k (..., S, Dh), v (..., S, Dv)."""
    scale = {"no_scale": 1.0, "scale_by_d": 1.0 / q.shape[-1]}.get(slip, q.shape[-1] ** -0.5)
    scores = q @ k.transpose(-2, -1) * scale  # (..., T, S)
    if mask is not None and slip != "mask_ignored":
        blocked = mask if slip == "mask_inverted" else ~mask
        scores = scores.masked_fill(blocked, float("-inf"))
    weights = scores.softmax(dim=-2 if slip == "wrong_axis" else -1)  # (..., T, S)
    return weights @ v, weights  # (..., T, Dv), (..., T, S)


# ------------------------------------------------------------------------------------------------
# Step 3: split and merge the heads
# ------------------------------------------------------------------------------------------------

SPLIT_SLIPS = {
    "no_transpose": say(
        "tokens are mixed: a reshape straight to (B, H, T, Dh) cuts across tokens; "
        "view as (B, T, H, Dh), then transpose(1, 2)"
    ),
    "interleaved": say(
        "features of different heads are mixed: head i (counting from 0) holds features "
        "i·Dh … (i+1)·Dh − 1, so view as (B, T, H, Dh), not (B, T, Dh, H)"
    ),
}


def split_with_slip(x, num_heads, slip=None):
    b, t, d = x.shape
    if slip == "no_transpose":
        return x.reshape(b, num_heads, t, d // num_heads)
    if slip == "interleaved":
        return x.view(b, t, d // num_heads, num_heads).permute(0, 3, 1, 2)
    return x.view(b, t, num_heads, d // num_heads).transpose(1, 2)  # (B, H, T, Dh)


# ------------------------------------------------------------------------------------------------
# Step 4: the module
# ------------------------------------------------------------------------------------------------

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "out_proj")
MHA_SLIPS = {
    "no_out_proj": say("out_proj is not applied: the concatenated heads go through out_proj last"),
    "kv_from_query": say(
        "keys and values come from the query: k_proj reads key and v_proj reads value "
        "(in cross-attention they are another sequence)"
    ),
    "kv_swapped": say("keys and values are swapped: k_proj reads key and v_proj reads value"),
    "values_through_k_proj": say("the values go through k_proj: project them with v_proj"),
    "weight_not_transposed": say(
        "x @ W is not what nn.Linear computes: it is x @ W.T + b (the weight is "
        "stored (out, in)); call the layer, self.q_proj(x)"
    ),
    "weight_not_transposed_qkv": say(
        "x @ W is not what nn.Linear computes: it is x @ W.T + b (the weight is "
        "stored (out, in)); call the layers, self.q_proj(x)"
    ),
    "residual": say(
        "the module adds its input to its output (a residual): return out_proj(...) alone; "
        "the residual belongs to the block around the layer"
    ),
    "always_causal": say("the module applies a causal mask when none is given: mask only with the mask argument"),
    "causal_for_any_mask": say(
        "the module applies a causal mask whenever a mask is given, not the mask it is "
        "given: block exactly where mask is False"
    ),
    "key_from_value": say("the keys are projected from the value input: k = k_proj(key), not k_proj(value)"),
    "value_from_key": say("the values are projected from the key input: v = v_proj(value), not v_proj(key)"),
    "scale_by_d_model": say("the scores are divided by √d_model: the scale is 1/√head_dim, the width of one head"),
    "merge_no_transpose": say(
        "tokens are mixed when the heads are merged: transpose(1, 2) back to (B, T, H, Dh) "
        "before the reshape to (B, T, D)"
    ),
    **SPLIT_SLIPS,
    **{s: h for s, h in ATTENTION_SLIPS.items() if s != "wrong_axis"},
    "wrong_axis": ATTENTION_SLIPS["wrong_axis"],
}


def mha_with_slip(params: dict, query, key, value, mask=None, slip: str | None = None):
    """Multi-head attention from ``params`` (``q_proj.weight``, ...), with one slip built in.

    Shapes: query (B, T, D), key and value (B, S, D), mask (T, S) -> (B, T, D), weights (B, H, T, S).
    """
    batch_size, seq_len, d_model = query.shape
    num_heads = params["num_heads"]
    if slip == "kv_from_query":
        key = value = query
    if slip == "kv_swapped":
        key, value = value, key
    if slip in ("key_from_value", "value_from_key"):
        key = value = value if slip == "key_from_value" else key
    if slip == "always_causal" and mask is None or slip == "causal_for_any_mask" and mask is not None:
        mask = torch.ones(seq_len, key.shape[1], dtype=torch.bool).tril()  # (T, S)

    def linear(x, name):
        weight, bias = params[f"{name}.weight"], params[f"{name}.bias"]
        plain = slip == "weight_not_transposed" or (slip == "weight_not_transposed_qkv" and name != "out_proj")
        return x @ weight + bias if plain else F.linear(x, weight, bias)

    split_slip = slip if slip in SPLIT_SLIPS else None
    v_name = "k_proj" if slip == "values_through_k_proj" else "v_proj"
    q, k, v = (
        split_with_slip(linear(x, n), num_heads, split_slip)  # (B, H, *, Dh)
        for x, n in ((query, "q_proj"), (key, "k_proj"), (value, v_name))
    )
    if slip == "scale_by_d_model":  # 1/√d_model = 1/√(H·Dh): the same as queries divided by √H more
        q = q / num_heads**0.5
    out, weights = attention_with_slip(q, k, v, mask, slip if slip in ATTENTION_SLIPS else None)  # (B, H, T, Dh)
    if split_slip == "no_transpose" or slip == "merge_no_transpose":  # the same slip on the way back
        merged = out.reshape(batch_size, seq_len, d_model)
    elif split_slip == "interleaved":
        merged = out.permute(0, 2, 3, 1).reshape(batch_size, seq_len, d_model)
    else:
        merged = out.transpose(1, 2).reshape(batch_size, seq_len, d_model)  # (B, T, D)
    if slip != "no_out_proj":
        merged = linear(merged, "out_proj")
    if slip == "residual":
        merged = merged + query
    return merged, weights


def reference_module(d_model: int = 12, num_heads: int = 3, seed: int = 0) -> nn.MultiheadAttention:
    """A seeded float64 ``nn.MultiheadAttention`` (batch first, biases random), the global RNG untouched."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        ref = nn.MultiheadAttention(d_model, num_heads, batch_first=True, dtype=torch.float64)
        nn.init.normal_(ref.in_proj_bias, std=0.5)
        nn.init.normal_(ref.out_proj.bias, std=0.5)
    return ref.eval()


def module_params(ref: nn.MultiheadAttention) -> dict:
    """The reference's weights under the learner's names."""
    q_w, k_w, v_w = ref.in_proj_weight.detach().chunk(3)
    q_b, k_b, v_b = ref.in_proj_bias.detach().chunk(3)
    out = ref.out_proj
    return {
        "num_heads": ref.num_heads,
        **{"q_proj.weight": q_w, "k_proj.weight": k_w, "v_proj.weight": v_w},
        **{"q_proj.bias": q_b, "k_proj.bias": k_b, "v_proj.bias": v_b},
        **{"out_proj.weight": out.weight.detach(), "out_proj.bias": out.bias.detach()},
    }


def build_module(cls, ref: nn.MultiheadAttention, d_model: int):
    """The learner's module with the reference's weights, float64, eval mode, the reference's params
    and the projections built without a bias; or a problem (and the part).

    A projection without a bias is not refused here: the reference's bias there is set to 0, so that
    the computation is judged on the learner's own layout, and the missing bias is named afterwards
    (with what else is wrong, if anything)."""
    module, problem = run_learner(cls, d_model, ref.num_heads)
    if problem:
        name = cls.__name__ if hasattr(cls, "__name__") else cls
        called = say(
            "{cls}({d_model}, {num_heads}): {problem}",
            cls=name,
            d_model=d_model,
            num_heads=ref.num_heads,
            problem=problem,
        )
        return None, None, ("module", called), []
    if not isinstance(module, nn.Module):
        found = say("the class must build an nn.Module, found {type}", type=type(module).__name__)
        return None, None, ("module", found), []
    fused = fused_projection(module)
    for name in (fused, "out_proj") if fused else PROJECTIONS:
        layer = getattr(module, name, None)
        width = 3 * d_model if name == fused else d_model
        if not isinstance(layer, nn.Linear) or (layer.in_features, layer.out_features) != (d_model, width):
            wanted = "3 * d_model" if name == fused else "d_model"
            sizes = {"name": name, "wanted": wanted, "d_model": d_model, "width": width}
            if layer is None and name == "out_proj":
                problem = say(
                    "out_proj is forgotten: self.{name} must be nn.Linear(d_model, {wanted}) = "
                    "nn.Linear({d_model}, {width}), found nothing",
                    **sizes,
                )
            elif layer is None:
                problem = say(
                    "self.{name} must be nn.Linear(d_model, {wanted}) = nn.Linear({d_model}, {width}), found nothing",
                    **sizes,
                )
            else:
                found = type(layer).__name__
                if isinstance(layer, nn.Linear):
                    found = f"nn.Linear({layer.in_features}, {layer.out_features})"
                problem = say(
                    "self.{name} must be nn.Linear(d_model, {wanted}) = nn.Linear({d_model}, {width}), found {found}",
                    **sizes,
                    found=found,
                )
            return None, None, (name, problem), []
    layers = (fused, "out_proj") if fused else PROJECTIONS
    missing = [name for name in layers if getattr(module, name).bias is None]
    with torch.no_grad():  # the reference of the learner's layout: no bias where theirs has none
        for name in missing:
            if name == "out_proj":
                ref.out_proj.bias.zero_()
            elif name == fused:
                ref.in_proj_bias.zero_()
            else:
                i = PROJECTIONS.index(name)
                ref.in_proj_bias[i * d_model : (i + 1) * d_model] = 0
    params = {**module_params(ref), "fused": fused}
    try:
        module = module.to(torch.float64).eval()
        with torch.no_grad():
            if fused:  # nn.MultiheadAttention's own layout: the rows of q, then k, then v
                getattr(module, fused).weight.copy_(ref.in_proj_weight)
                if fused not in missing:
                    getattr(module, fused).bias.copy_(ref.in_proj_bias)
            for name in layers:
                if name != fused:
                    getattr(module, name).weight.copy_(params[f"{name}.weight"])
                    if name not in missing:
                        getattr(module, name).bias.copy_(params[f"{name}.bias"])
    except Exception as error:  # the learner's module: report it
        problem = say(
            "copying nn.MultiheadAttention's weights in failed: {name}: “{error}”",
            name=type(error).__name__,
            error=str(error),
        )
        return None, None, ("module", problem), []
    return module, params, None, missing


#: Names a module may give one projection of the input to q, k and v together (``nn.Linear(D, 3·D)``):
#: nn.MultiheadAttention's, and the usual ones of public implementations (GPT-2's ``c_attn``).
FUSED_NAMES = ("in_proj", "qkv_proj", "qkv", "c_attn", "W_qkv")


def fused_projection(module) -> str | None:
    """The name of the module's one input projection (an ``nn.Linear`` under :data:`FUSED_NAMES`) when it
    has no separate q_proj, k_proj and v_proj; None otherwise."""
    if any(isinstance(getattr(module, name, None), nn.Linear) for name in PROJECTIONS[:3]):
        return None
    return next((name for name in FUSED_NAMES if isinstance(getattr(module, name, None), nn.Linear)), None)


def bias_note(missing: list[str]) -> Message:
    """What a verdict adds when projections were built without their bias."""
    return say("self.{name} needs its bias (bias=True), as in nn.MultiheadAttention", name=missing[0])


def random_mask(t: int, s: int, gen: torch.Generator) -> torch.Tensor:
    """A (T, S) boolean mask, True = may attend, about half True, never causal, and at least one key
    kept in every row (a fully blocked row has no right answer to compare with)."""
    mask = torch.rand(t, s, generator=gen) < 0.5  # (T, S)
    mask[torch.arange(t), torch.randint(0, s, (t,), generator=gen)] = True  # one key per row
    mask[0, -1] = True  # query 1 sees the last key: no causal mask does
    return mask
