"""The merging-heads chapter's conversions between merges: the same function with other parameters.

:func:`to_concat` writes any summing merge as concatenation (its equivalent W^O);
:func:`fold_into_average` folds a low-rank or weighted merge into averaging (W_V,i' = h W_V,i W_down,i),
and :func:`to_lowrank` goes back, which is why the merges with fixed coefficients (average, weighted,
concat_lowrank) are one family of functions that differs only in how training finds a member (the
gated merge, whose mix changes per token, is not in it); :func:`mean_pool_kv_heads` turns a trained
multi-head layer into grouped-query attention;
:func:`numerical_rank` reads the rank of an equivalent W^O at its own precision.
"""

from __future__ import annotations

import torch

from ...modules import GroupedQueryAttention, MultiHeadAttention
from .merging import MergedMultiHeadAttention


def numerical_rank(matrix: torch.Tensor) -> int:
    """The rank of ``matrix`` as its own precision can tell it, computed in float64.

    A singular value counts when it exceeds ``max(m, n) * eps * sigma_max``, with ``eps`` the
    machine epsilon of the matrix's own dtype (``torch.linalg.matrix_rank``'s default tolerance at
    that dtype): below it, the value is the matrix's rounding. The SVD runs in float64, because a
    float32 SVD of a large product is fragile (one CPU returned NaN singular values for a 768 x 768
    one, and so a rank of 0).

    Shapes: matrix (m, n). Returns: an int between 0 and min(m, n).
    """
    if not isinstance(matrix, torch.Tensor) or not matrix.is_floating_point() or matrix.dim() != 2:
        found = f"shape {tuple(matrix.shape)}, {matrix.dtype}" if isinstance(matrix, torch.Tensor) else type(matrix)
        raise ValueError(f"matrix must be a 2-D floating-point tensor, found {found}")
    eps = torch.finfo(matrix.dtype).eps
    singular = torch.linalg.svdvals(matrix.detach().to("cpu", torch.float64))  # (min(m, n),), descending
    if singular.numel() == 0 or singular[0] == 0:
        return 0
    return int((singular > max(matrix.shape) * eps * singular[0]).sum())


def equivalent_out_proj(module: MergedMultiHeadAttention) -> torch.Tensor:
    """The W_O (in ``nn.Linear`` layout, D_out x D_in) that a *concatenating* module would need to
    compute the same output as ``module``.

    concat: its own W_O. concat_lowrank: W_up · W_down. average: [W_up, W_up, ..., W_up] / H (the
    same block for every head). weighted: [alpha_1 W_up, ..., alpha_H W_up]. gated: no fixed matrix exists
    (the mix changes per token), so it raises a ValueError. All but concat have rank at most Dh.

    Returns:
        (D, D) tensor, detached.
    """
    if not isinstance(module, MergedMultiHeadAttention):
        raise TypeError(
            f"module must be an mha.chapters.merging.merging.MergedMultiHeadAttention, found {type(module).__name__}"
        )
    layer = module.merge_layer
    if module.merge == "concat":
        return layer.out_proj.weight.detach().clone()
    if module.merge == "concat_lowrank":
        return (layer.out_proj.weight @ layer.down.weight).detach()  # (D, Dh) @ (Dh, D)
    if module.merge == "gated":
        raise ValueError("merge 'gated' has no equivalent W_O: its head weights change from token to token")
    dummy = layer.out_proj.weight.new_zeros(1, module.num_heads, 1, module.head_dim)  # (1, H, 1, Dh)
    coefficients = layer.coefficients(dummy, None)[0, 0].detach()  # (H,)
    blocks = [c * layer.out_proj.weight.detach() for c in coefficients]  # H x (D, Dh)
    return torch.cat(blocks, dim=1)  # (D, H*Dh) = (D, D)


def to_concat(module: MergedMultiHeadAttention) -> MergedMultiHeadAttention:
    """A ``merge="concat"`` module computing the same function as an average, weighted or low-rank one.

    Proof by construction that concatenation can do whatever these merges do (the converse is false).
    """
    w_o = equivalent_out_proj(module)  # (D, D)
    bias = module.q_proj.bias is not None
    new = MergedMultiHeadAttention(module.d_model, module.num_heads, "concat", bias=bias).to(w_o)
    for name in ("q_proj", "k_proj", "v_proj"):
        getattr(new, name).load_state_dict(getattr(module, name).state_dict())
    with torch.no_grad():
        new.merge_layer.out_proj.weight.copy_(w_o)
        if bias:
            new.merge_layer.out_proj.bias.copy_(module.merge_layer.out_proj.bias)
    return new


def _copy_qk_and_up(source: MergedMultiHeadAttention, merge: str) -> MergedMultiHeadAttention:
    """A fresh ``merge`` module with ``source``'s W_Q, W_K, W_V and its W_up (the merge's out_proj)."""
    bias = source.q_proj.bias is not None
    new = MergedMultiHeadAttention(source.d_model, source.num_heads, merge, bias=bias).to(source.q_proj.weight)
    for name in ("q_proj", "k_proj", "v_proj"):
        getattr(new, name).load_state_dict(getattr(source, name).state_dict())
    new.merge_layer.out_proj.load_state_dict(source.merge_layer.out_proj.state_dict())
    return new


def fold_into_average(module: MergedMultiHeadAttention) -> MergedMultiHeadAttention:
    """An ``"average"`` module computing exactly what a low-rank concat or a weighted module computes.

    Head i's output is H_i = A_i (X W_V_i + b_V_i), so anything that multiplies H_i by a fixed
    Dh x Dh matrix M_i before the sum can multiply W_V_i and b_V_i instead: A_i is untouched.
    concat_lowrank multiplies head i by its block W_down_i (rows i·Dh to (i+1)·Dh of W_down), the
    weighted merge by alpha_i·I, the average by I / H. So the average module gets
    W_V_i' = H · W_V_i · M_i (formula layout; bias likewise) and keeps W_Q, W_K and W_up with its
    bias. concat (rank up to D) and gated (a mix that changes per token) have no such folding:
    ValueError.
    """
    if not isinstance(module, MergedMultiHeadAttention):
        raise TypeError(
            f"module must be an mha.chapters.merging.merging.MergedMultiHeadAttention, found {type(module).__name__}"
        )
    if module.merge not in ("concat_lowrank", "average", "weighted"):
        raise ValueError(
            f"merge {module.merge!r} cannot be folded into an average: only 'concat_lowrank', 'average' "
            "and 'weighted' apply one fixed d_k x d_k matrix per head"
        )
    num_heads, head_dim, layer = module.num_heads, module.head_dim, module.merge_layer
    if module.merge == "concat_lowrank":
        # down.weight is W_down in nn.Linear layout (Dh, H*Dh): column block i is W_down_i^T
        per_head = layer.down.weight.detach().view(head_dim, num_heads, head_dim).transpose(0, 1)  # (H, Dh, Dh)
    else:
        dummy = layer.out_proj.weight.new_zeros(1, num_heads, 1, head_dim)  # (1, H, 1, Dh)
        coefficients = layer.coefficients(dummy, None)[0, 0].detach()  # (H,)
        eye = torch.eye(head_dim, dtype=dummy.dtype, device=dummy.device)
        per_head = coefficients[:, None, None] * eye  # (H, Dh, Dh): alpha_i I
    new = _copy_qk_and_up(module, "average")
    with torch.no_grad():
        weight = module.v_proj.weight.view(num_heads, head_dim, module.d_model)  # (H, Dh, D): W_V_i^T
        new.v_proj.weight.copy_((num_heads * per_head @ weight).reshape(module.d_model, module.d_model))
        if module.v_proj.bias is not None:
            bias = module.v_proj.bias.view(num_heads, head_dim, 1)  # (H, Dh, 1)
            new.v_proj.bias.copy_((num_heads * per_head @ bias).reshape(-1))  # (D,)
    return new


def to_lowrank(module: MergedMultiHeadAttention) -> MergedMultiHeadAttention:
    """A ``"concat_lowrank"`` module computing exactly what an average or weighted module computes:
    W_down's block for head i is that head's coefficient times the identity (I / H for the average).
    With :func:`fold_into_average`, the proof that the three merges compute the same functions."""
    if not isinstance(module, MergedMultiHeadAttention):
        raise TypeError(
            f"module must be an mha.chapters.merging.merging.MergedMultiHeadAttention, found {type(module).__name__}"
        )
    if module.merge not in ("average", "weighted"):
        raise ValueError(f"to_lowrank takes an 'average' or 'weighted' module, found merge {module.merge!r}")
    layer, head_dim = module.merge_layer, module.head_dim
    dummy = layer.out_proj.weight.new_zeros(1, module.num_heads, 1, head_dim)  # (1, H, 1, Dh)
    coefficients = layer.coefficients(dummy, None)[0, 0].detach()  # (H,)
    eye = torch.eye(head_dim, dtype=dummy.dtype, device=dummy.device)
    new = _copy_qk_and_up(module, "concat_lowrank")
    with torch.no_grad():
        new.merge_layer.down.weight.copy_(torch.cat([c * eye for c in coefficients], dim=1))  # (Dh, H*Dh)
    return new


def mean_pool_kv_heads(m: MultiHeadAttention, num_kv_heads: int) -> GroupedQueryAttention:
    """Convert multi-head attention to grouped-query attention the way Ainslie et al. (2023) do:
    the key and value projections of the H / G heads in each group are averaged into one.

    W_Q, W_O (and their biases) are copied; the rows of W_K and W_V (and their biases) that belong
    to the heads of one group are mean-pooled. Averaging acts on *parameters* here, before
    attention; the heads' outputs are still concatenated and projected by W_O. When the heads of
    a group already share K and V, the converted module computes the same function.
    """
    if not isinstance(m, MultiHeadAttention):
        raise TypeError(f"m must be an mha.MultiHeadAttention, found {type(m).__name__}")
    bias = m.q_proj.bias is not None
    gqa = GroupedQueryAttention(m.d_model, m.num_heads, num_kv_heads, bias=bias).to(m.q_proj.weight)
    group, head_dim = m.num_heads // num_kv_heads, m.head_dim
    with torch.no_grad():
        gqa.q_proj.load_state_dict(m.q_proj.state_dict())
        gqa.out_proj.load_state_dict(m.out_proj.state_dict())
        for name in ("k_proj", "v_proj"):
            source, target = getattr(m, name), getattr(gqa, name)
            weight = source.weight.view(num_kv_heads, group, head_dim, m.d_model)  # (G, H/G, Dh, D)
            target.weight.copy_(weight.mean(dim=1).reshape(num_kv_heads * head_dim, m.d_model))  # (G*Dh, D)
            if bias:
                target.bias.copy_(source.bias.view(num_kv_heads, group, head_dim).mean(dim=1).reshape(-1))  # (G*Dh,)
    return gqa
