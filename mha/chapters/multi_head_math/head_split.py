"""The multi-head-math chapter's head split: which columns of the projected queries each head receives, and where
each feature of each token lands when ``(B, T, D)`` becomes ``(B, T, H, Dh)`` and then
``(B, H, T, Dh)``.

:func:`split_steps` traces an index tensor through the split's ``view`` and ``transpose`` (and through
the slip of a view without the transpose), so the explorer shows which feature of which token lands
in which head, computed by the real ops.
"""

from __future__ import annotations

import torch

from ...checks import check_positive_int

# --------------------------------------------------------------------------------------------
# Cutting d_model into heads
# --------------------------------------------------------------------------------------------


def head_blocks(d_model: int, num_heads: int) -> list[range]:
    """The columns of ``X W_Q`` each head receives from :func:`mha.split_heads`: head i (counted
    from 1) gets columns ``(i-1)·d_k .. i·d_k - 1`` (counted from 0), each a weighted sum of every
    input feature.
    """
    from ...checks import check_divisible

    d_model = check_positive_int("d_model", d_model)
    num_heads = check_positive_int("num_heads", num_heads)
    check_divisible("d_model", d_model, "num_heads", num_heads)
    head_dim = d_model // num_heads
    return [range(i * head_dim, (i + 1) * head_dim) for i in range(num_heads)]


def describe_head_split(num_heads: int = 4, d_model: int = 12, seq_len: int = 4) -> str:
    """Alt text for :func:`mha.chapters.multi_head_math.figures.render_head_split`."""
    head_dim = d_model // num_heads
    return (
        f"The {seq_len} by {d_model} projected queries X W_Q, whose columns are cut into {num_heads} "
        f"coloured blocks of {head_dim} columns, one per head."
    )


# --------------------------------------------------------------------------------------------
# The index mapping of a head split: (B, T, D) -> (B, T, H, Dh) -> (B, H, T, Dh)
# --------------------------------------------------------------------------------------------

#: The two reshapes the multi-head-math chapter's head-split explorer compares: ``mha.split_heads`` (a view that
#: cuts each token's features into heads, then a transpose that moves the head axis forward) and
#: the slip of a view straight to (B, H, T, Dh).
SPLIT_RIGHT = "view + transpose"
SPLIT_NO_TRANSPOSE = "view, no transpose"
SPLIT_RESHAPES = (SPLIT_RIGHT, SPLIT_NO_TRANSPOSE)
#: How the explorer's dropdown shows them.
SPLIT_RESHAPE_NAMES = {
    SPLIT_RIGHT: "view(B, T, H, Dh) + transpose(1, 2)",
    SPLIT_NO_TRANSPOSE: "view(B, H, T, Dh), no transpose",
}


def index_tensor(seq_len: int = 3, d_model: int = 12) -> torch.Tensor:
    """Stand-in projected queries whose entries name themselves: entry (0, t, f) holds ``t·D + f``
    (token t, feature f, both counted from 0), so wherever a reshape moves an entry, its value
    says where it came from.

    Shapes:
        returns (1, T, D) int64.
    """
    seq_len = check_positive_int("seq_len", seq_len)
    d_model = check_positive_int("d_model", d_model)
    return torch.arange(seq_len * d_model).view(1, seq_len, d_model)  # (B, T, D)


def split_steps(num_heads: int, reshape: str = SPLIT_RIGHT, seq_len: int = 3, d_model: int = 12) -> dict:
    """The head split of :func:`index_tensor`, step by step, with real torch ops.

    Returns:
        dict with ``x`` (1, T, D); ``view`` (1, T, H, Dh) after ``x.view(1, T, H, Dh)``, or None for
        the slip, which has no such step; ``heads`` (1, H, T, Dh): ``view(...).transpose(1, 2)``,
        or for the slip ``x.view(1, H, T, Dh)``; ``right``: whether ``heads`` equals what
        :func:`mha.split_heads` gives (always for view + transpose; for the slip only when h = 1
        or T = 1). Every value is ``t·D + f``: :func:`token_feature` reads it back.
    """
    from ...attention import split_heads
    from ...checks import check_divisible

    if reshape not in SPLIT_RESHAPES:
        raise ValueError(f"reshape must be one of {list(SPLIT_RESHAPES)}, found {reshape!r}")
    num_heads = check_positive_int("num_heads", num_heads)
    x = index_tensor(seq_len, d_model)  # (B, T, D)
    check_divisible("d_model", d_model, "num_heads", num_heads)
    head_dim = d_model // num_heads
    if reshape == SPLIT_RIGHT:
        view = x.view(1, seq_len, num_heads, head_dim)  # (B, T, H, Dh)
        heads = view.transpose(1, 2)  # (B, H, T, Dh)
    else:
        view = None
        # the slip: a view fills (B, H, T, Dh) in memory order, token after token
        heads = x.view(1, num_heads, seq_len, head_dim)  # (B, H, T, Dh)
    expected = split_heads(x.double(), num_heads).long()  # (B, H, T, Dh)
    return {"x": x, "view": view, "heads": heads, "right": torch.equal(heads, expected)}


def token_feature(value: int, d_model: int = 12) -> tuple[int, int]:
    """``(token, feature)``, both counted from 1, of an entry of :func:`index_tensor`."""
    return int(value) // d_model + 1, int(value) % d_model + 1


def cell_label(value: int, d_model: int = 12) -> str:
    """The label of an entry in the explorer: ``"t·f"``, token t and feature f counted from 1."""
    token, feature = token_feature(value, d_model)
    return f"{token}·{feature}"


def describe_row(values, d_model: int = 12) -> str:
    """One row of a head in words, e.g. ``"token 2 features 5-8"`` (runs of one token's features)."""
    runs: list[list[int]] = []  # [token, first feature, last feature]
    for value in values:
        token, feature = token_feature(value, d_model)
        if runs and runs[-1][0] == token and runs[-1][2] + 1 == feature:
            runs[-1][2] = feature
        else:
            runs.append([token, feature, feature])
    return " + ".join(f"token {t} feature {a}" if a == b else f"token {t} features {a}-{b}" for t, a, b in runs)


def describe_head_index(num_heads: int = 3, reshape: str = SPLIT_RIGHT, d_model: int = 12, seq_len: int = 3) -> str:
    """Alt text for :func:`mha.chapters.multi_head_math.figures.render_head_index`: the mapping from the ops' result."""
    steps = split_steps(num_heads, reshape, seq_len, d_model)
    heads = steps["heads"][0]  # (H, T, Dh)
    head_dim = d_model // num_heads
    start = f"The projected queries (B, T, D) = (1, {seq_len}, {d_model}), each cell labelled token·feature"
    if reshape == SPLIT_RIGHT:
        shapes = (
            f"view(1, {seq_len}, {num_heads}, {head_dim}) cuts each token's {d_model} features into "
            f"{num_heads} heads of {head_dim}, then transpose(1, 2) gives (B, H, T, Dh) = "
            f"(1, {num_heads}, {seq_len}, {head_dim})"
        )
        verdict = f"Right: head i holds features {head_dim}(i-1)+1 to {head_dim}i of every token, position t is token t"
        shown = heads[: min(num_heads, 2)]
        back = steps["heads"].contiguous().transpose(1, 2)  # (B, T, H, Dh), memory in head order
        try:
            back.view(1, seq_len, d_model)  # (B, T, D)
            why = "here a view would work too (one head, one feature per head or one token)"
        except RuntimeError:
            why = "a view of the transposed tensor raises an error"
        merge = f" To merge the heads back, transpose(1, 2) then reshape (or contiguous().view): {why}."
    else:
        shapes = (
            f"view(1, {num_heads}, {seq_len}, {head_dim}) without transpose fills (B, H, T, Dh) in "
            "memory order, token 1's features, then token 2's"
        )
        verdict = (
            "The same as view + transpose, because h = 1 or T = 1"
            if steps["right"]
            else "Wrong: a head's positions are not the tokens"
        )
        shown, merge = heads, ""
    rows = "; ".join(
        f"head {i + 1}: " + ", ".join(describe_row(row.tolist(), d_model) for row in head)
        for i, head in enumerate(shown)
    )
    more = "" if len(shown) == num_heads else "; and so on"
    return f"{start}: {shapes}. {verdict}: {rows}{more}.{merge}"
