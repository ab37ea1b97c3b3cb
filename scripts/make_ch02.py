"""Write the source of chapter 2, book/02_multi_head_math.ipynb (cells without outputs).

Usage: python scripts/make_ch02.py && python scripts/execute_notebooks.py book/02_multi_head_math.ipynb
"""
from __future__ import annotations

from pathlib import Path

from notebook_source import NotebookSource

SOURCE = NotebookSource(Path(__file__).resolve().parents[1] / "book" / "02_multi_head_math.ipynb", "ch02")
md, code = SOURCE.md, SOURCE.code


# ---------------------------------------------------------------------------------------------
md(r"""
(ch02-multi-head-math)=
# The multi-head math, from equations to a module that matches PyTorch

Multi-head attention is four matrix products, a softmax and two reshapes. This chapter takes the
equations of {cite}`vaswani2017attention` one at a time, shows the lines of `mha` that implement
each, and then proves that the result computes exactly what PyTorch's own modules compute. On the
way it answers three questions that the source tutorials leave vague: *why* the scores are divided
by $\sqrt{d_k}$, *how* $h$ heads fit in the width of one, and *which* way round a boolean mask goes.

The symbols are those of the {ref}`notation` page: $n$ tokens, $d_{\text{model}}$ features per
token, $h$ heads of width $d_k = d_{\text{model}} / h$.
""")

code(r"""
import copy
import functools
import inspect
import math

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

import mha
from mha import scaling
from mha.encoder import EncoderLayer
from mha.widgets import explorer

mha.plotting.use_style()
device = mha.get_device()
torch.set_printoptions(precision=4, sci_mode=False)
""")

# ---------------------------------------------------------------------------------------------
md(r"""
(ch02-sdpa)=
## Scaled dot-product attention

One head compares every query with every key, turns each row of scores into weights with a
softmax, and averages the values with those weights:

$$
\operatorname{Attention}(Q, K, V) = \operatorname{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}}\right) V,
\qquad Q \in \mathbb{R}^{n \times d_k},\; K \in \mathbb{R}^{m \times d_k},\; V \in \mathbb{R}^{m \times d_v}.
$$

The scores $Q K^\top$ are $n \times m$: row $i$ says how well query $i$ matches each key. The
softmax runs along each row, so every row of weights is a probability distribution over the keys,
and the output $n \times d_v$ gives each query a weighted average of the value rows.

A small example to check by hand: three tokens, $d_k = 4$, values of width 2. Query 1
is built to match key 1, query 2 to match key 2, and query 3 matches both halves.
""")

code(r"""
Q = torch.tensor([[2.0, 0.0, 2.0, 0.0],
                  [0.0, 2.0, 0.0, 2.0],
                  [1.0, 1.0, 1.0, 1.0]], dtype=torch.float64)
K = torch.tensor([[1.0, 0.0, 1.0, 0.0],
                  [0.0, 1.0, 0.0, 1.0],
                  [0.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
V = torch.tensor([[1.0, 0.0],
                  [0.0, 1.0],
                  [0.5, 0.5]], dtype=torch.float64)

scores = Q @ K.T / math.sqrt(4)  # (n, m) = (3, 3)
print("scores = Q Kᵀ / √d_k:")
print(scores)
weights = torch.softmax(scores, dim=-1)  # each row sums to 1
print("weights = softmax(scores) (row by row):")
print(weights)
output = weights @ V  # (n, d_v) = (3, 2)
print("output = weights V:")
print(output)
""")

md(r"""
Query 1 scores 2 against key 1 and 0 against the others, so it puts $e^2 / (e^2 + 2) = 0.79$ of its
weight on key 1 and its output leans towards value 1. Query 3 scores 1 against keys 1 and 2 and 0
against key 3, so keys 1 and 2 share most of its weight equally, 0.42 each.
`mha.scaled_dot_product_attention` computes the same thing, and returns the weights as well as the output:
""")

code(r"""
out_mha, weights_mha = mha.scaled_dot_product_attention(Q.to(device), K.to(device), V.to(device))
assert torch.allclose(out_mha.cpu(), output) and torch.allclose(weights_mha.cpu(), weights)
assert round(weights[0, 0].item(), 2) == round(math.exp(2) / (math.exp(2) + 2), 2) == 0.79
assert torch.allclose(weights.sum(-1), torch.ones(3, dtype=torch.float64))
assert weights[2, 0] == weights[2, 1] > weights[2, 2] and round(weights[2, 0].item(), 2) == 0.42
print(inspect.getsource(mha.scaled_dot_product_attention))
""")

# ---------------------------------------------------------------------------------------------
md(r"""
(ch02-why-sqrt)=
## Why divide by $\sqrt{d_k}$?

Source 001 says the scaling keeps "gradient descent from being too slow". That is true but
vague; here is the precise mechanism, and an experiment that shows each step.

**Step 1: the variance of a dot product grows with $d_k$.** Take a query $q$ and a key $k$ whose
$d_k$ entries are independent, with mean 0 and variance 1 (roughly what a well-initialised
projection produces). Each product $q_i k_i$ has mean 0 and variance 1, and the $d_k$ products are
independent, so

$$
\operatorname{Var}(q \cdot k) = \sum_{i=1}^{d_k} \operatorname{Var}(q_i k_i) = d_k,
\qquad
\operatorname{Var}\!\left(\frac{q \cdot k}{\sqrt{d_k}}\right) = 1 .
$$

`scaling.dot_product_variance` measures it on 2,000 random pairs:
""")

code(r"""
lines = []
for d_k in [4, 64, 512]:
    raw = scaling.dot_product_variance(d_k)
    scaled = scaling.dot_product_variance(d_k, scale="1/√d_k")
    lines.append(f"d_k = {d_k:3d}:  Var(q·k) = {raw:6.1f}   Var(q·k / √d_k) = {scaled:.2f}")
    assert abs(raw / d_k - 1) < 0.1 and abs(scaled - 1) < 0.1
print("\n".join(lines))
""")

md(r"""
**Step 2: large scores saturate the softmax.** With $d_k = 512$ unscaled scores have a standard
deviation of about 22, so the largest score of a row usually beats the second by several units;
$e^{\text{gap}}$ then makes the softmax nearly one-hot.

**Step 3: a saturated softmax passes almost no gradient.** For $p = \operatorname{softmax}(s)$ the
Jacobian is

$$
\frac{\partial p}{\partial s} = \operatorname{diag}(p) - p\,p^\top ,
$$

which is exactly zero when $p$ is one-hot (try $p = (1, 0, \dots, 0)$). The gradient that reaches
the query, and through it $W^Q$, is $\frac{\partial p}{\partial q} = \text{scale} \cdot
\frac{\partial p}{\partial s} K$, so it vanishes too. A head whose softmax is saturated at
initialisation barely learns: that is what "too slow" means.

`scaling.softmax_stats` measures all three on 500 random queries, each with a softmax over 16 random
keys: the mean largest weight, the fraction of queries whose largest weight exceeds 0.99
(saturated), and the median norm of both gradients. The median describes a typical query; the mean
would be dominated by the rare queries whose two best keys happen to tie.
""")

code(r"""
sweep = scaling.scaling_sweep()
print("d_k   scale     Var(s)  max weight  saturated  |∂p/∂s|   |∂p/∂q|")
for scale in ["1 (no scaling)", "1/√d_k"]:
    for i, d_k in enumerate(sweep["d_k"]):
        if d_k in (4, 64, 512):
            row = {key: values[i] for key, values in sweep[scale].items()}
            print(f"{d_k:4d}  {scale.split()[0]:6s} {row['variance']:8.1f}  {row['max_weight']:10.2f}  "
                  f"{row['saturated']:9.2f}  {row['jacobian_norm']:7.1e}  {row['grad_q_norm']:7.1e}")
""")

md(r"""
Unscaled, at $d_k = 512$ the mean largest weight is 0.95 and more than half of the queries are
saturated. For a typical query the softmax Jacobian is more than 500 times smaller than with the
scale, and the gradient that reaches the query more than 20 times smaller. Scaled by
$1/\sqrt{d_k}$, every row of the table looks the same whatever $d_k$ is: the
variance stays near 1, the largest weight near 0.25, no query saturates, and the gradient keeps the
same size (about 0.3).
""")

code(r"""
raw = {key: values[sweep["d_k"].index(512)] for key, values in sweep["1 (no scaling)"].items()}
scaled = [{key: values[i] for key, values in sweep["1/√d_k"].items()} for i in range(len(sweep["d_k"]))
          if sweep["d_k"][i] >= 4]  # with only 16 keys, d_k = 1 and 2 give noisy variance estimates
assert round(raw["max_weight"], 2) == 0.95 and raw["saturated"] > 0.5
assert scaled[-2]["d_k"] == 512 and raw["jacobian_norm"] * 500 < scaled[-2]["jacobian_norm"]
assert raw["grad_q_norm"] * 20 < scaled[-2]["grad_q_norm"]
assert all(abs(row["variance"] - 1) < 0.3 and row["saturated"] == 0 for row in scaled)
assert all(0.2 < row["max_weight"] < 0.3 and 0.25 < row["jacobian_norm"] < 0.35 for row in scaled)
""")

md(r"""
The whole sweep, from $d_k = 1$ to $1024$, as a figure (note the logarithmic axes). One detail
the table hides: for small $d_k$ the unscaled gradient to the query first *grows*, because it is
the Jacobian times the keys, whose norm grows like $\sqrt{d_k}$. Past $d_k \approx 32$ the
saturation wins, and both gradients fall by orders of magnitude.
""")

code(r"""
scaling.plot_scaling_sweep(sweep)
plt.show()
""")

md(r"""
Dividing by $\sqrt{d_k}$ is a softmax temperature $\tau = \sqrt{d_k}$ (the first explorer of
{ref}`softmax-temperature`), chosen so that the temperature grows exactly as fast as the spread of
the scores. Dividing by more, e.g. by $d_k$, over-corrects: the variance becomes $1/d_k$, every
score is close to 0, and the weights are nearly uniform, so the head cannot focus at all.
""")

code(r"""
over = scaling.softmax_stats(512, "1/d_k")
print(f"scale 1/d_k, d_k = 512: Var(s) = {over['variance']:.4f}, mean largest weight = {over['max_weight']:.3f}, "
      f"entropy = {over['entropy_bits']:.2f} bits (uniform over 16 keys: 4 bits)")
assert over["variance"] < 0.01 and over["max_weight"] < 0.07 and over["entropy_bits"] > 3.99
""")

md(r"""
Explore it: pick the head width and the scale. The left panel shows every score, the right panel
the weights one query gives its 16 keys. Without scaling, watch the histogram widen and the bars
collapse onto one key as $d_k$ grows; with $1/d_k$, watch them flatten.
""")

code(r"""
# NBVAL_IGNORE_OUTPUT
explorer(
    scaling.render_scaling,
    {"d_k": scaling.EXPLORER_D_KS, "scale": list(scaling.SCALES)},
    title="Why divide by √d_k",
    caption="Scores of 500 random queries against 16 random keys, and one query's softmax weights.",
    alt=scaling.describe_scaling,
)
""")

# ---------------------------------------------------------------------------------------------
md(r"""
(ch02-heads)=
## From one head to $h$ heads

Multi-head attention runs $h$ heads side by side. Head $i$ has its own projections
$W_i^Q, W_i^K, W_i^V \in \mathbb{R}^{d_{\text{model}} \times d_k}$, so it compares tokens in its own
$d_k$-dimensional space. The head outputs, each $n \times d_k$, are **concatenated along the feature
axis** into one $n \times h d_k = n \times d_{\text{model}}$ matrix, and $W^O \in
\mathbb{R}^{d_{\text{model}} \times d_{\text{model}}}$ mixes them:

$$
\operatorname{MultiHead}(X) = \left[\operatorname{head}_1, \dots, \operatorname{head}_h\right] W^O,
\qquad \operatorname{head}_i = \operatorname{Attention}(X W_i^Q, X W_i^K, X W_i^V).
$$

Source 001 writes the concatenation as a vertical stack $[\operatorname{head}_1;
\operatorname{head}_2]$. Stacking rows would give an $h n \times d_k$ matrix: one row per (head,
token) pair, which $W^O$ cannot multiply and which no longer has one row per token. The shapes say
it at once:
""")

code(r"""
n, d_k, h = 5, 4, 2
heads = [torch.zeros(n, d_k), torch.zeros(n, d_k)]
print("concatenate along features, torch.cat(dim=-1):", tuple(torch.cat(heads, dim=-1).shape), "= (n, h·d_k)")
print("vertical stack, torch.cat(dim=0):             ", tuple(torch.cat(heads, dim=0).shape), "= (h·n, d_k)")
""")

md(r"""
The most literal implementation is a Python loop over heads, `mha.LoopedMultiHeadAttention`. Each
head is an `mha.AttentionHead` holding its three $d_{\text{model}} \times d_k$ projections:
""")

code(r"""
print(inspect.getsource(mha.LoopedMultiHeadAttention.forward))
""")

md(r"""
The dimensions of source 001's worked example, made consistent: 5 tokens, 2 heads of $d_k = 4$,
so $d_{\text{model}} = h d_k = 8$.
""")

code(r"""
torch.manual_seed(0)
looped = mha.LoopedMultiHeadAttention(d_model=8, num_heads=2).double().to(device)
x = torch.randn(1, 5, 8, generator=torch.Generator().manual_seed(1), dtype=torch.float64).to(device)
out_looped, weights_looped = looped(x)
for i, head in enumerate(looped.heads):
    context, _ = head(x, x, x)
    print(f"head {i + 1}: W_Q {tuple(head.q_proj.weight.T.shape)}, output {tuple(context.shape)}")
print("output after concatenation and W_O:", tuple(out_looped.shape), " weights:", tuple(weights_looped.shape))
""")

md(r"""
A loop over heads is slow on a GPU: $h$ small matrix products instead of one large one. The
batched `mha.MultiHeadAttention` uses the fact that the $h$ projections $W_i^Q$, placed **side by
side**, form one $d_{\text{model}} \times d_{\text{model}}$ matrix

$$
W^Q = \left[W_1^Q, W_2^Q, \dots, W_h^Q\right], \qquad X W^Q = \left[X W_1^Q, \dots, X W_h^Q\right],
$$

so one product computes every head's queries at once, and head $i$'s queries are columns
$i d_k, \dots, (i+1) d_k - 1$ of the result. `mha.split_heads` cuts those columns apart with a
`view` (no copy) and moves the head axis forward, so that the attention products run on all heads
in one batched `matmul`:
""")

code(r"""
print(inspect.getsource(mha.split_heads))
""")

md(r"""
The picture for $d_{\text{model}} = 12$ and $h = 3$: each token's 12 features are cut into three
blocks of $d_k = 4$, one per head.
""")

code(r"""
scaling.render_head_split(num_heads=3)
plt.show()
""")

md(r"""
Change the number of heads: the same 12 features, cut into more and thinner heads. Only the divisors
of $d_{\text{model}}$ are allowed, and $W^Q$ stays $12 \times 12$ whatever $h$ is.
""")

code(r"""
# NBVAL_IGNORE_OUTPUT
explorer(
    scaling.render_head_split,
    {"num_heads": [1, 2, 3, 4, 6, 12]},
    title="How split_heads cuts d_model",
    caption="Each colour is one head's d_k features, for d_model = 12.",
    alt=scaling.describe_head_split,
)
""")

md(r"""
Now the proof that the two forms are the same computation. `LoopedMultiHeadAttention.from_multi_head`
gives head $i$ rows $i d_k, \dots, (i+1) d_k - 1$ of each batched projection (PyTorch stores
`nn.Linear` weights transposed, as $d_{\text{out}} \times d_{\text{in}}$), and both modules then
return the same output and the same weights:
""")

code(r"""
torch.manual_seed(0)
batched = mha.MultiHeadAttention(d_model=8, num_heads=2).double().to(device)
looped = mha.LoopedMultiHeadAttention.from_multi_head(batched)
out_b, w_b = batched(x)
out_l, w_l = looped(x)
same = (out_b - out_l).abs().max().item() < 1e-12 and (w_b - w_l).abs().max().item() < 1e-12
print("looped == batched (max |diff| < 1e-12):", same)
assert same
""")

# ---------------------------------------------------------------------------------------------
md(r"""
(ch02-shapes)=
## The shapes, step by step

Every multi-head attention is this sequence of shapes, with `B` sequences of `T` tokens, `H`
heads of width `Dh` and `S` keys (here $S = T$):

$$
(B, T, D) \xrightarrow{\;W^Q,\ \texttt{split\_heads}\;} (B, H, T, D_h)
\xrightarrow{\;Q K^\top\;} (B, H, T, S) \xrightarrow{\;\cdot V,\ \texttt{merge\_heads},\ W^O\;} (B, T, D).
$$

The next cell runs the module's own layers one by one on a batch of 2 sequences of 5 tokens and
prints each shape, then checks that the steps reproduce the module's output.
""")

code(r"""
torch.manual_seed(0)
attn = mha.MultiHeadAttention(d_model=8, num_heads=2).double().to(device)
x = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(2), dtype=torch.float64).to(device)

steps = [("x", x)]
q = mha.split_heads(attn.q_proj(x), attn.num_heads); steps.append(("q = split_heads(q_proj(x))", q))
k = mha.split_heads(attn.k_proj(x), attn.num_heads); steps.append(("k = split_heads(k_proj(x))", k))
v = mha.split_heads(attn.v_proj(x), attn.num_heads); steps.append(("v = split_heads(v_proj(x))", v))
scores = q @ k.transpose(-2, -1) / math.sqrt(attn.head_dim); steps.append(("scores = q kᵀ / √Dh", scores))
weights = torch.softmax(scores, dim=-1); steps.append(("weights = softmax(scores)", weights))
context = weights @ v; steps.append(("context = weights v", context))
merged = mha.merge_heads(context); steps.append(("merged = merge_heads(context)", merged))
out = attn.out_proj(merged); steps.append(("out = out_proj(merged)", out))
for name, tensor in steps:
    print(f"{name:32s} {str(tuple(tensor.shape)):15s}")

out_module, weights_module = attn(x)
assert torch.allclose(out, out_module, atol=1e-12) and torch.allclose(weights, weights_module, atol=1e-12)
assert q.shape == (2, 2, 5, 4) and scores.shape == (2, 2, 5, 5) and out.shape == x.shape
""")

# ---------------------------------------------------------------------------------------------
md(r"""
(ch02-masks)=
## Masks: which keys a query may see

A **causal** mask lets token $i$ attend only to tokens $j \le i$ (a language model must not read
the future). A **key padding** mask hides the padding tokens that fill short sequences up to the
batch's length. Both are applied to the scores before the softmax: a blocked score becomes
$-\infty$, so its weight is exactly 0.

This course uses one convention for boolean masks, the one of
`torch.nn.functional.scaled_dot_product_attention`: **True means "may attend"**.
""")

code(r"""
causal = mha.causal_mask(5)  # (T, S), True = may attend
print("mha.causal_mask(5), 1 = may attend:")
print(causal.int())
""")

md(r"""
`nn.MultiheadAttention` uses the **opposite** convention for its boolean `attn_mask`: True means
"blocked". (Its `key_padding_mask` says True for padding, as `mha` does: there the name says what
True marks.) Handing our causal mask to `nn.MultiheadAttention` unchanged is a classic bug, and it
fails silently: token 1 then attends only to the *future*, and the last token, which may not see
anything, gets NaN.
""")

code(r"""
torch.manual_seed(0)
torch_attn = nn.MultiheadAttention(8, 2, batch_first=True, dtype=torch.float64).to(device).eval()
x1 = x[:1]  # (1, 5, 8)
with torch.no_grad():
    _, w_bug = torch_attn(x1, x1, x1, attn_mask=causal.to(device))  # BUG: True read as "blocked"
    _, w_ok = torch_attn(x1, x1, x1, attn_mask=~causal.to(device))  # correct: invert it
w_bug, w_ok = w_bug[0].cpu(), w_ok[0].cpu()
print("weights with our mask passed unchanged (row = query):")
print(w_bug)
print("weights with ~mask:")
print(w_ok)
assert w_bug[0, 0] == 0 and w_bug[0, 1:].sum().item() > 0.99 and torch.isnan(w_bug[-1]).all()
assert torch.all(w_ok.triu(1) == 0) and torch.allclose(w_ok.sum(-1), torch.ones(5, dtype=torch.float64))
""")

md(r"""
With the inverted mask, `mha.MultiHeadAttention` (True = may attend) and `nn.MultiheadAttention`
(True = blocked) agree; an additive float mask (0 keeps, $-\infty$ blocks) means the same thing to
both, so it is the safest form to pass between libraries.
""")

code(r"""
ours = mha.MultiHeadAttention.from_torch(torch_attn)
out_ours, _ = ours(x1, mask=causal.to(device))
out_torch, _ = torch_attn(x1, x1, x1, attn_mask=~causal.to(device))
float_mask = torch.zeros(5, 5, dtype=torch.float64).masked_fill(~causal, float("-inf")).to(device)
out_float, _ = torch_attn(x1, x1, x1, attn_mask=float_mask)
agree = (out_ours - out_torch).abs().max().item() < 1e-12 and (out_ours - out_float).abs().max().item() < 1e-12
print("bool mask (inverted for torch) and float mask give the same output:", agree)
assert agree
""")

md(r"""
**A fully masked row.** What if a query may attend to no key at all (the last row of the bug
above, or a query in a sequence made only of padding)? The softmax of a row of $-\infty$ is
$0/0$: NaN. `nn.MultiheadAttention` returns NaN for that row, and a single NaN spreads to
everything it touches later. `mha` returns zero weights and hence a zero context vector for it
(the module output is then just $W^O$'s bias), so the other rows of a batch stay usable.
""")

code(r"""
blocked = causal.clone()
blocked[2] = False  # query 3 may attend to nothing
_, w_ours = ours(x1, mask=blocked.to(device))
_, w_torch = torch_attn(x1, x1, x1, attn_mask=~blocked.to(device), average_attn_weights=False)
w_ours, w_torch = w_ours[0].cpu(), w_torch[0].cpu()
print("mha, weights of the blocked query (both heads):", w_ours[:, 2].tolist())
print("nn.MultiheadAttention, same row is NaN:", torch.isnan(w_torch[:, 2]).all().item())
print("plain softmax of [-inf, -inf]:", torch.softmax(torch.tensor([-math.inf, -math.inf]), dim=-1).tolist())
assert torch.all(w_ours[:, 2] == 0) and torch.isnan(w_torch[:, 2]).all()
assert torch.allclose(w_ours[:, [0, 1, 3, 4]], w_torch[:, [0, 1, 3, 4]], atol=1e-12)
""")

md(r"""
`F.scaled_dot_product_attention` is less predictable here: depending on the PyTorch version and the
kernel it picks (CPU, FlashAttention, memory-efficient), a fully masked row comes back as zeros or
as NaN. Code that may meet such rows should handle them itself, as `mha` does.
""")

# ---------------------------------------------------------------------------------------------
md(r"""
(ch02-proof)=
## Proof against PyTorch

`mha.MultiHeadAttention.from_torch` copies the weights of an `nn.MultiheadAttention`: PyTorch keeps
$W^Q, W^K, W^V$ stacked in one `in_proj_weight` of shape $3 d_{\text{model}} \times d_{\text{model}}$,
which `from_torch` cuts into three. With the same weights, the two modules should give the same
output for any input and mask. A larger module this time, $d_{\text{model}} = 32$ and $h = 4$, with
padding in the batch:
""")

code(r"""
print(inspect.getsource(mha.MultiHeadAttention.from_torch))
""")

code(r"""
def agreement(dtype):
    torch.manual_seed(0)
    reference = nn.MultiheadAttention(32, 4, batch_first=True, dtype=dtype).to(device).eval()
    module = mha.MultiHeadAttention.from_torch(reference)
    x = torch.randn(3, 6, 32, generator=torch.Generator().manual_seed(3), dtype=dtype).to(device)
    padding = torch.zeros(3, 6, dtype=torch.bool)
    padding[1, 4:] = True  # sequence 2 has 4 real tokens and 2 padding tokens
    padding = padding.to(device)
    out_ref, w_ref = reference(x, x, x, key_padding_mask=padding, average_attn_weights=False)
    out_mha, w_mha = module(x, key_padding_mask=padding)
    return max((out_ref - out_mha).abs().max().item(), (w_ref - w_mha).abs().max().item())

diff32, diff64 = agreement(torch.float32), agreement(torch.float64)
print("float32: max |diff| < 1e-6: ", diff32 < 1e-6)
print("float64: max |diff| < 1e-12:", diff64 < 1e-12)
assert diff32 < 1e-6 and diff64 < 1e-12
""")

md(r"""
The differences are at the level of rounding (float32 keeps about 7 significant digits, float64
about 16): the two modules compute the same function. The same holds one level down, for the fused
`F.scaled_dot_product_attention`, which takes the same boolean convention as `mha`:
""")

code(r"""
gen = torch.Generator().manual_seed(4)
q, k, v = (torch.randn(2, 4, 6, 8, generator=gen, dtype=torch.float64).to(device) for _ in range(3))
for name, mask in [("no mask", None), ("causal mask", mha.causal_mask(6, device=device))]:
    ours_out, _ = mha.scaled_dot_product_attention(q, k, v, mask)
    fused = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    ok = (ours_out - fused).abs().max().item() < 1e-12
    print(f"{name:12s} mha == F.scaled_dot_product_attention (max |diff| < 1e-12): {ok}")
    assert ok
causal_flag = F.scaled_dot_product_attention(q, k, v, is_causal=True)
ours_causal, _ = mha.scaled_dot_product_attention(q, k, v, mha.causal_mask(6, device=device))
assert (causal_flag - ours_causal).abs().max().item() < 1e-12
""")

md(r"""
**Averaged weights.** `nn.MultiheadAttention` combines its heads by concatenation, like every
multi-head attention, but by default it *returns* the weights **averaged over the heads**, shape
$(B, T, S)$, unless you pass `average_attn_weights=False`. An average of the heads' maps hides
exactly what makes them different, so `mha` always returns per-head weights $(B, H, T, S)$, and
averaging is a separate, explicitly named step, `mha.average_heads`:
""")

code(r"""
_, w_default = torch_attn(x, x, x)                               # default: averaged over heads
_, w_per_head = torch_attn(x, x, x, average_attn_weights=False)  # per head
_, w_mha = ours(x)
print("nn.MultiheadAttention weights, default:             ", tuple(w_default.shape), "(B, T, S)")
print("nn.MultiheadAttention, average_attn_weights=False:  ", tuple(w_per_head.shape), "(B, H, T, S)")
print("mha.MultiHeadAttention weights:                     ", tuple(w_mha.shape), "(B, H, T, S)")
same = (mha.average_heads(w_mha) - w_default).abs().max().item() < 1e-12
print("mha.average_heads(weights) == torch's default:", same)
assert same and (w_mha - w_per_head).abs().max().item() < 1e-12
""")

# ---------------------------------------------------------------------------------------------
md(r"""
(ch02-encoder)=
## Inside a Transformer encoder layer

Source 000 places `nn.MultiheadAttention` in an encoder layer with a feed-forward block, residual
connections, LayerNorm after each residual add (**post-norm**, as in the original Transformer and
BERT {cite}`devlin2019bert`) and GELU. `mha.encoder.EncoderLayer` is that layer with
`mha.MultiHeadAttention` inside:

$$
\begin{aligned}
X' &= \operatorname{LayerNorm}\big(X + \operatorname{MultiHead}(X)\big),\\
Y  &= \operatorname{LayerNorm}\big(X' + \operatorname{GELU}(X' W_1 + b_1)\, W_2 + b_2\big).
\end{aligned}
$$

With `norm_first=True` it is the **pre-norm** layer of GPT-2 and most recent models,
$X' = X + \operatorname{MultiHead}(\operatorname{LayerNorm}(X))$, and likewise for the
feed-forward block.
""")

code(r"""
print(inspect.getsource(EncoderLayer.forward))
""")

md(r"""
`EncoderLayer.from_torch` copies an `nn.TransformerEncoderLayer`; both layers then agree, for the
post-norm and the pre-norm variant, with padding in the batch. (The causal `mask` follows the
course's convention, True = may attend; PyTorch's `src_mask` would need it inverted, as above.)
""")

code(r"""
x = torch.randn(3, 6, 32, generator=torch.Generator().manual_seed(5), dtype=torch.float64).to(device)
padding = torch.zeros(3, 6, dtype=torch.bool)
padding[1, 4:] = True
padding = padding.to(device)
real = ~padding[..., None]  # PyTorch may leave padded positions as zeros: compare the real tokens
lines = []
for norm_first in (False, True):
    torch.manual_seed(0)
    reference = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=128, activation="gelu",
                                           batch_first=True, norm_first=norm_first, dtype=torch.float64)
    reference = reference.to(device).eval()
    layer = EncoderLayer.from_torch(reference)
    expected = reference(x, src_key_padding_mask=padding)
    got, _ = layer(x, key_padding_mask=padding)
    ok = ((got - expected) * real).abs().max().item() < 1e-12
    lines.append(f"{'pre' if norm_first else 'post'}-norm: EncoderLayer == nn.TransformerEncoderLayer "
                 f"(max |diff| < 1e-12): {ok}")
    assert ok
num_params = sum(p.numel() for p in layer.parameters())
assert num_params == sum(p.numel() for p in reference.parameters())
lines.append(f"parameters, both layers: {num_params:,}")
print("\n".join(lines))
""")

md(r"""
**What the residual does.** The sub-layers compute a *change* that is added to the token vectors.
If a sub-layer outputs zero, the token passes through untouched: a pre-norm layer whose attention
and feed-forward outputs are zero returns its input exactly, and a deep stack of such layers starts
close to the identity, which is why it trains. (Post-norm still applies its two LayerNorms.)
""")

code(r"""
silent = copy.deepcopy(layer)  # the pre-norm layer of the last loop iteration
with torch.no_grad():
    for linear in (silent.self_attn.out_proj, silent.linear2):  # the last linear of each sub-layer
        linear.weight.zero_()
        linear.bias.zero_()
out_silent, _ = silent(x)
print("pre-norm layer with silent sub-layers returns its input:", torch.equal(out_silent, x))
assert torch.equal(out_silent, x)
""")

md(r"""
**What the norm does.** LayerNorm rescales each token vector to mean 0 and variance 1 across its
$d_{\text{model}}$ features (before a learned gain and bias, 1 and 0 at initialisation). Feed a
post-norm layer inputs ten times larger, and its output keeps the same scale: the activations
cannot grow from layer to layer.
""")

code(r"""
torch.manual_seed(0)
post = EncoderLayer(32, 4, 128).double().to(device).eval()
lines = []
for factor in (1.0, 10.0):
    with torch.no_grad():
        out = post(factor * x)[0].cpu()
    lines.append(f"input × {factor:4.1f}: input std {(factor * x).std().item():5.2f}, "
                 f"output per-token mean {out.mean(-1).abs().max().item():.4f} (max |.|), "
                 f"std {out.std(-1, unbiased=False).mean().item():.4f}")
    assert out.mean(-1).abs().max() < 1e-4 and abs(out.std(-1, unbiased=False).mean().item() - 1) < 1e-4
print("\n".join(lines))
""")

# ---------------------------------------------------------------------------------------------
md(r"""
(ch02-trained-heads)=
## What trained heads look at

Heatmaps of a *randomly initialised* model are noise and teach nothing. So we train the model of
chapter 1 (`mha.experiments`): a single causal attention layer with $h = 4$ heads
($d_{\text{model}} = 32$, $d_k = 8$), trained for 500 Adam steps (a few seconds on a CPU) on a task
that needs four relations at once: at every position, name the tokens 1, 2, 3 and 4 places back.
A token is labelled `position:symbol`.
""")

code(r"""
result = mha.experiments.head_count_experiment(4, num_relations=4, readout="mlp", steps=500, return_model=True)
model = result["model"]  # trained on the CPU, one thread: the same weights on every run
task = mha.experiments.make_task(4)  # the same data as the experiment (seed 0)
inputs = [task.test_x[i] for i in range(3)]  # three held-out inputs
maps = torch.stack([mha.experiments.attention_maps(model, t) for t in inputs])  # (3, H, T, T)
input_labels = [mha.experiments.token_labels(t) for t in inputs]
assert torch.equal(maps[0], result["example_weights"])
accuracy = result["accuracy"]
print("held-out accuracy (all four answers right) above 0.9:", accuracy > 0.9)
assert accuracy > 0.9
fig, axes = plt.subplots(1, 4, figsize=(13.0, 3.8))
mha.plotting.plot_heads(maps[0], input_labels[0], annotate=False, title="Trained heads, first input", axes=axes)
plt.show()
""")

md(r"""
Each head has learned one fixed offset: for positions 4 and later (where all four answers exist),
its weight sits almost entirely on the token $o$ places back, and the four heads divide the four
offsets among themselves. The split of the work is measured below (which head takes which offset
depends on the random initialisation; that they split it does not).
""")

code(r"""
positions = torch.arange(4, maps.shape[-1])
offsets_taken = []
for head in range(maps.shape[1]):
    # mean weight, over inputs and positions t >= 4, on the key t - o, for o = 1..4
    on_offset = torch.stack([maps[:, head, positions, positions - o].mean() for o in range(1, 5)])
    offsets_taken.append(int(on_offset.argmax()) + 1)
    assert on_offset.max() > 0.9
print("offsets taken by the four heads, sorted:", sorted(offsets_taken))
print("each head puts > 0.9 of its weight on its offset: True")
assert sorted(offsets_taken) == [1, 2, 3, 4]
""")

md(r"""
Pick a head and an input. The pattern of a head does not depend on the input: head by head, the
bright diagonal stays at the same distance from the main diagonal, because each head attends by
*position*, whatever the symbols are.
""")

code(r"""
# NBVAL_IGNORE_OUTPUT
explorer(
    functools.partial(scaling.render_head_map, maps, input_labels),
    {"head": [1, 2, 3, 4], "example": [1, 2, 3]},
    title="Trained heads",
    caption="One head's attention weights (rows: queries, columns: keys) on one held-out input.",
)
""")

# ---------------------------------------------------------------------------------------------
md(r"""
(ch02-summary)=
## Summary

- Scaled dot-product attention is $\operatorname{softmax}(Q K^\top / \sqrt{d_k})\, V$; each row of
  weights is a distribution over the keys, and `mha` returns the weights with the output.
- The dot product of unit-variance vectors has variance $d_k$. Unscaled, a wide head's softmax
  saturates and its gradient $\operatorname{diag}(p) - p p^\top$ vanishes (over 500 times smaller
  at $d_k = 512$ for a typical query); $1/\sqrt{d_k}$ keeps the variance at 1 for every width, $1/d_k$ over-corrects.
- $h$ heads of width $d_k = d_{\text{model}} / h$ are concatenated **along the feature axis** and
  mixed by $W^O$. The loop over heads and the batched module (`split_heads`, one big matmul,
  `merge_heads`) compute the same function.
- Boolean masks: True = may attend in `mha` and `F.scaled_dot_product_attention`; True = blocked
  in `nn.MultiheadAttention`'s `attn_mask`. A fully masked row is NaN in PyTorch's module, zeros in
  `mha`.
- `mha.MultiHeadAttention` matches `nn.MultiheadAttention` to rounding error, and
  `EncoderLayer` matches `nn.TransformerEncoderLayer`; PyTorch returns head-*averaged* weights
  unless told otherwise.
- Trained heads specialise: in the chapter 1 model, each of four heads attends at its own offset.
""")

md(r"""
(ch02-exercises)=
## Exercises

**1. Write `merge_heads`.** Given `mha.split_heads`, which turns $(B, T, D)$ into $(B, H, T, D_h)$,
write the inverse: $(B, H, T, D_h) \to (B, T, H D_h)$, the heads concatenated along the features in
order. `scaling.check_merge_heads(your_function)` returns True for a correct answer and says what is
wrong otherwise. Here it rejects source 001's vertical stack:
""")

code(r"""
def vertical_stack(x):  # (B, H, T, Dh) -> (B, H*T, Dh): one row per (head, token)
    return x.reshape(x.shape[0], -1, x.shape[-1])

try:
    scaling.check_merge_heads(vertical_stack)
except AssertionError as error:
    print("rejected:", error)
""")

md(r"""
```{admonition} Answer
:class: dropdown
Move the head axis back next to the features, then fuse the two:
`x.transpose(1, 2).reshape(B, T, H * Dh)` (the `reshape` copies, because the transposed tensor is
not contiguous). Equivalently, `torch.cat(x.unbind(dim=1), dim=-1)` concatenates the heads along
the last axis. Compare with `inspect.getsource(mha.merge_heads)`.
```

**2. Over-scaling.** With scores divided by $d_k$ instead of $\sqrt{d_k}$, what is the variance of
the scores for unit-variance $q$ and $k$, and what happens to the attention weights as $d_k$ grows?
Check your answer with `scaling.dot_product_variance(d_k, scale="1/d_k")` and
`scaling.softmax_stats(d_k, "1/d_k")`.

```{admonition} Answer
:class: dropdown
$\operatorname{Var}(q \cdot k / d_k) = d_k / d_k^2 = 1 / d_k$: the scores shrink towards 0, the
softmax tends to the uniform distribution (1/16 per key, entropy 4 bits over 16 keys) and the
head can no longer prefer one key over another.
```

**3. A BERT-base layer.** How many parameters does `EncoderLayer(768, 12, 3072)` have, biases
and LayerNorms included? Count them by hand from the shapes, then check with
`sum(p.numel() for p in EncoderLayer(768, 12, 3072).parameters())`.

```{admonition} Answer
:class: dropdown
Attention: $4 \cdot 768^2 + 4 \cdot 768 = 2{,}362{,}368$. Feed-forward:
$768 \cdot 3072 + 3072 + 3072 \cdot 768 + 768 = 4{,}722{,}432$. Two LayerNorms: $2 \cdot 2 \cdot 768
= 3{,}072$. Total: $7{,}087{,}872$ per layer, the same for any $h$ that divides 768.
```
""")

code(r"""
# the answers of exercises 2 and 3, checked
assert abs(scaling.dot_product_variance(64, scale="1/d_k") * 64 - 1) < 0.1
assert sum(p.numel() for p in EncoderLayer(768, 12, 3072).parameters()) == 7_087_872
assert mha.attention_params(768, 12) == 2_362_368
assert scaling.check_merge_heads(lambda x: torch.cat(x.unbind(dim=1), dim=-1))
""")


if __name__ == "__main__":
    SOURCE.write()
