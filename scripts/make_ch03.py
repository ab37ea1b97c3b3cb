"""Write the source of chapter 3 (book/03_worked_example.ipynb): markdown and code cells, no outputs.

Usage: python scripts/make_ch03.py && python scripts/execute_notebooks.py book/03_worked_example.ipynb
"""
from pathlib import Path

from notebook_source import NotebookSource

SOURCE = NotebookSource(Path(__file__).resolve().parents[1] / "book" / "03_worked_example.ipynb", "ch03")
md, code = SOURCE.md, SOURCE.code


md(r"""
(worked-example)=
# A worked example: five tokens, two heads, every number

Most explanations of multi-head attention stop at symbols: $Q_1$, $\operatorname{head}_2$, "and so on for
the other head". This chapter runs two-head attention on a five-word phrase with numbers small
enough to check with pencil and paper, and prints **every** intermediate: the queries, keys and
values of each head, the raw and scaled scores, the softmax weights, each head's output, their
concatenation and the final projection. Every matrix appears twice, as code output and typeset,
both generated from the same numbers, and a cell asserts each number the text quotes.

The question to keep in mind: **what does a second head buy?** The weights below are chosen by hand
so that the two heads attend in visibly different ways, and at the end the same five tokens go
through one head of the same total size for comparison.
""")

code(r"""
import inspect
import math

import matplotlib.pyplot as plt
import torch

import mha
from mha import worked
from mha.plotting import plot_attention, plot_heads, use_style

use_style()
device = mha.get_device()
ex = mha.worked_example()  # float64 on the CPU: the canonical numbers of this page
""")

md(r"""
## Where we are going

First the picture. Each heatmap is one head's attention weights: row $i$ is a query token, column
$j$ a key token, and the colour is how much of token $i$'s output comes from token $j$. Head 1 looks
at the **previous** token (the first token, which has none, looks at itself); head 2 looks at
tokens of the **same word type** (the two determiners *the*, the two nouns *cat* and *dog*, and
the verb *saw* on its own).
""")

code(r"""
fig = plot_heads(ex.weights, worked.token_labels(), ex.tokens,
                 title="the cat saw the dog: weights of the two heads")
plt.show()
""")

md(r"""
The rest of the chapter derives every number in these two heatmaps.

## The set-up

**Tokens.** $n = 5$: *the cat saw the dog*. The repeated *the* is on purpose: a head that reads
word types cannot tell the two apart, a head that reads positions can.

**Sizes.** $h = 2$ heads with $d_k = 4$ each, so $d_{\text{model}} = h \cdot d_k = 8$. The
source tutorial for this example says "2 heads, query, key and value dimension 4" and divides by
$\sqrt{4}$. The scale is the square root of the length of the vectors whose dot product is taken,
which are one head's query and key, so $\sqrt{4}$ means $d_k = 4$ *per head*, and with
$d_k = d_{\text{model}} / h$ that gives $d_{\text{model}} = 8$ (with $d_{\text{model}} = 4$ each head
would have $d_k = 2$ and the scale would be $\sqrt{2}$).

**Input.** Each row of $X$ is one token: three *type* features (one-hot: determiner, noun, verb)
next to five *position* features (one-hot: position 1 to 5). Real models add learned vectors
rather than concatenating one-hot codes, but keeping the two parts side by side lets you read
off which part each head uses.

**Conventions.** Tokens are rows and a projection is $X W$ (as in the {ref}`notation` page);
everything is float64 and there are no biases. Matrices with only integers print exactly; every
other matrix prints with 3 decimals.
""")

code(r"""
worked.show(ex, "x")
""")

md(r"""
## The weight matrices, chosen by hand

Each head has its own $W_i^Q, W_i^K, W_i^V$ of size $d_{\text{model}} \times d_k = 8 \times 4$. Their
rows are labelled by the input feature they read, their columns $d_1 \dots d_4$ are the head's own
dimensions.

- **Head 1** reads only the position rows. The query of position $p$ points in direction $p - 1$
  and the key of position $p$ in direction $p$, both with length 2, so a query meets the key of
  the previous token with a dot product of $2 \cdot 2 = 4$ and every other key with 0. Position 5
  is nobody's previous token, so its key row is zero; position 1 has no previous token and points
  at itself.
- **Head 2** reads only the type rows: query and key are both twice the one-hot type, so tokens of
  the same type meet with a dot product of 4 and all others with 0. It leaves its fourth dimension
  unused.
- **Values.** Both heads read the same thing from a token: its type (3 numbers) and its position
  number $1 \dots 5$. In a trained model the two $W^V$ differ; here they are equal so that every
  difference between the heads' outputs comes from *where* they look, not from what they read.
""")

code(r"""
worked.show(ex, "weights_in")
""")

md(r"""
## Step 1: queries, keys and values of each head

$$
Q_i = X W_i^Q, \qquad K_i = X W_i^K, \qquad V_i = X W_i^V \qquad (5 \times 4 \text{ each}).
$$

Because $X$ is one-hot, each row simply picks rows of the weight matrices: *cat* (type noun,
position 2) gets the query $q_2 = (2, 0, 0, 0)$ in head 1, the same as the key of *the* at position
1, $k_1 = (2, 0, 0, 0)$.
""")

code(r"""
worked.show(ex, "qkv")
""")

code(r"""
# The numbers quoted above.
assert ex.q[0, 1].tolist() == [2, 0, 0, 0] and ex.k[0, 0].tolist() == [2, 0, 0, 0]
assert ex.k[0, 4].tolist() == [0, 0, 0, 0]  # position 5 is nobody's previous token
assert ex.v[0, 1].tolist() == [0, 1, 0, 2]  # cat: a noun at position 2
assert torch.equal(ex.v[0], ex.v[1])  # both heads read the same values
""")

md(r"""
## Step 2: raw scores

Every query against every key, per head: $S_i = Q_i K_i^\top$, a $5 \times 5$ matrix whose row $i$
holds $q_i \cdot k_j$ for $j = 1 \dots 5$. By construction the entries are 4 where a head wants to
look and 0 elsewhere.
""")

code(r"""
worked.show(ex, "scores")
""")

md(r"""
## Step 3: scale by $\sqrt{d_k} = 2$

$$
\frac{Q_i K_i^\top}{\sqrt{d_k}} = \frac{Q_i K_i^\top}{2}.
$$

Dividing by $\sqrt{d_k}$ keeps the spread of the scores independent of the head width: with
unit-variance entries a dot product of $d_k$ terms has variance $d_k$, and without the scale a
wide head would push the softmax into saturation, where its gradients vanish. Here the 4s become 2s.
""")

code(r"""
worked.show(ex, "scaled_scores")
""")

md(r"""
## Step 4: softmax, row by row

$$
A_i = \operatorname{softmax}\!\left(\frac{Q_i K_i^\top}{\sqrt{d_k}}\right), \qquad
(A_i)_{jl} = \frac{e^{s_{jl}}}{\sum_{m=1}^{5} e^{s_{jm}}} .
$$

Row 2 of head 1 (*cat*) by hand: the scaled scores are $(2, 0, 0, 0, 0)$, their exponentials
$(e^2, 1, 1, 1, 1) = (7.389, 1, 1, 1, 1)$ with sum $e^2 + 4 = 11.389$, so the weights are
$e^2 / (e^2 + 4) = 0.649$ on the previous token *the* and $1 / (e^2 + 4) = 0.088$ on each of the
four others.

Every row of head 1 has this shape. In head 2, a *the* or a noun has **two** keys with score 2, so
the weights are $e^2 / (2e^2 + 3) = 0.416$ on each of them and $1 / (2e^2 + 3) = 0.056$ elsewhere;
*saw* is the only verb and gets 0.649 on itself. The last column shows that each row sums to 1.
""")

code(r"""
worked.show(ex, "weights")
""")

code(r"""
e2 = math.exp(2)
assert f"{e2:.3f}" == "7.389" and f"{e2 + 4:.3f}" == "11.389"
assert f"{e2 / (e2 + 4):.3f}" == "0.649" and f"{1 / (e2 + 4):.3f}" == "0.088"
assert f"{e2 / (2 * e2 + 3):.3f}" == "0.416" and f"{1 / (2 * e2 + 3):.3f}" == "0.056"
assert abs(ex.weights[0, 1, 0].item() - e2 / (e2 + 4)) < 1e-12
assert abs(ex.weights[1, 1, 4].item() - e2 / (2 * e2 + 3)) < 1e-12
assert abs(ex.weights[1, 2, 2].item() - e2 / (e2 + 4)) < 1e-12
assert (ex.weights.sum(dim=-1) - 1).abs().max() < 1e-12  # every row sums to 1
""")

md(r"""
## Step 5: each head's output

$$
\operatorname{head}_i = A_i V_i \qquad (5 \times 4): \text{ row } j \text{ is } \textstyle\sum_l (A_i)_{jl}\, v_l .
$$

Row 2 of head 1 by hand, with the value rows $v_1 = (1, 0, 0, 1)$, $v_2 = (0, 1, 0, 2)$,
$v_3 = (0, 0, 1, 3)$, $v_4 = (1, 0, 0, 4)$, $v_5 = (0, 1, 0, 5)$ and the exact weights of step 4:

$$
\frac{e^2 v_1 + v_2 + v_3 + v_4 + v_5}{e^2 + 4}
= \left(\frac{e^2 + 1}{e^2 + 4},\; \frac{2}{e^2 + 4},\; \frac{1}{e^2 + 4},\; \frac{e^2 + 14}{e^2 + 4}\right)
= (0.737, 0.176, 0.088, 1.878).
$$

With the rounded weights instead, the last entry comes out as $0.649 + 14 \cdot 0.088 = 1.881$:
three decimals are enough to check a result, not to carry through a long sum.

Read it as a message: head 1 tells *cat* "the token before you is mostly a determiner, around
position 1 to 2". Head 2 tells *cat* "tokens like you are nouns, around position 3.4" (the average
of positions 2 and 5, pulled towards the middle by the small weights).
""")

code(r"""
worked.show(ex, "head_outputs")
""")

code(r"""
by_hand = [(e2 + 1) / (e2 + 4), 2 / (e2 + 4), 1 / (e2 + 4), (e2 + 14) / (e2 + 4)]
assert [f"{value:.3f}" for value in by_hand] == ["0.737", "0.176", "0.088", "1.878"]
assert f"{0.649 + 14 * 0.088:.3f}" == "1.881"
assert [f"{value:.3f}" for value in ex.head_outputs[0, 1].tolist()] == ["0.737", "0.176", "0.088", "1.878"]
assert f"{ex.head_outputs[1, 1, 3].item():.3f}" == "3.359"
""")

md(r"""
## Step 6: concatenate along the feature axis

The two $5 \times 4$ head outputs are put **side by side**, giving one $5 \times h d_k = 5 \times 8$
matrix: each token keeps one row, now holding what both heads found for it.

The source tutorial writes the merge as a vertical stack $\begin{bmatrix}\operatorname{head}_1 \\
\operatorname{head}_2\end{bmatrix} W^O$. That would be a $10 \times 4$ matrix: ten rows for five
tokens, and it cannot even be multiplied by the $8 \times 8$ matrix $W^O$.
""")

code(r"""
worked.show(ex, "concat")
""")

code(r"""
stacked = torch.cat([ex.head_outputs[0], ex.head_outputs[1]], dim=0)  # the vertical stack: (10, 4)
print("side by side:", tuple(ex.concat.shape), "  stacked:", tuple(stacked.shape), "  W_O:", tuple(ex.w_o.shape))
assert tuple(ex.concat.shape) == (5, 8) and tuple(stacked.shape) == (10, 4)
assert stacked.shape[1] != ex.w_o.shape[0]  # 4 columns cannot meet 8 rows
assert torch.equal(ex.concat, torch.cat([ex.head_outputs[0], ex.head_outputs[1]], dim=1))
""")

md(r"""
## Step 7: the output projection $W^O$

$$
\operatorname{MultiHead}(X) = [\operatorname{head}_1, \operatorname{head}_2]\, W^O, \qquad
W^O = \begin{bmatrix} I_4 & I_4 \\ I_4 & -I_4 \end{bmatrix} \quad (8 \times 8).
$$

$W^O$ is not a mere reordering: its first four output features are head 1 **plus** head 2, the
last four head 1 **minus** head 2, so every output feature depends on both heads. (Its rows are
labelled by the concatenated features `h1.d1 … h2.d4`; its columns get neutral names `o1 … o8`,
because after mixing they no longer mean "det" or "p1".) In a trained model, this is where the
heads' findings are combined into the vector that goes on to the next layer.
""")

code(r"""
worked.show(ex, "w_o")
worked.show(ex, "output")
""")

code(r"""
assert torch.equal(ex.output[:, :4], ex.head_outputs[0] + ex.head_outputs[1])
assert torch.equal(ex.output[:, 4:], ex.head_outputs[0] - ex.head_outputs[1])
""")

md(r"""
## The same numbers through `mha.MultiHeadAttention` and `torch.nn.MultiheadAttention`

The hand steps are exactly what the library modules compute. To load the example into
`mha.MultiHeadAttention`, the two heads' $8 \times 4$ matrices go side by side into one
$8 \times 8$ projection (the batched form of step 1), and since `nn.Linear` computes
$x W^\top$, it stores the **transpose**:
""")

code(r"""
print(inspect.getsource(worked.to_module))
""")

md(r"""
The module runs on the course device; `to_torch()` copies the same weights into PyTorch's own
`nn.MultiheadAttention`. Both must agree with the hand steps to within $10^{-12}$ (float64).
""")

code(r"""
module = worked.to_module(ex).to(device)
x = ex.x[None].to(device)  # (B, T, D) = (1, 5, 8)
out, weights = module(x)
reference = module.to_torch()
ref_out, ref_weights = reference(x, x, x, average_attn_weights=False)

differences = {
    "mha.MultiHeadAttention output": (out[0].cpu() - ex.output).abs().max().item(),
    "mha.MultiHeadAttention weights": (weights[0].cpu() - ex.weights).abs().max().item(),
    "nn.MultiheadAttention output": (ref_out[0].detach().cpu() - ex.output).abs().max().item(),
    "nn.MultiheadAttention weights": (ref_weights[0].detach().cpu() - ex.weights).abs().max().item(),
}
for name, difference in differences.items():
    print(f"{name:32s} max |difference| < 1e-12: {difference < 1e-12}")
assert all(difference < 1e-12 for difference in differences.values())
print("parameters:", sum(p.numel() for p in module.parameters()), "= 4 * d_model**2 =", 4 * 8**2)
""")

md(r"""
(worked-single-head)=
## One head of the same size

What if the same budget went into **one** head of width $h \cdot d_k = 8$? Put each head's
matrices side by side and keep $W^O$: `mha.SingleHeadAttention(8, head_dim=8)` then has exactly the
same 256 parameters. But a single head has a single softmax: its score for a pair of tokens is the
*sum* of the two heads' scores, scaled by $\sqrt 8$, and it must express both relations with one
distribution per token.
""")

code(r"""
single = worked.single_head_module(ex).to(device)
single_out, single_weights = single(x)
single_weights = single_weights[0].cpu()
single_out = single_out[0].detach().cpu()
print("parameters:", sum(p.numel() for p in single.parameters()))
worked.Matrix(single_weights, "single head (head_dim = 8): weights", r"A_{\text{single}}",
              worked.token_labels(), ex.tokens, row_sums=True)
""")

code(r"""
fig, axes = plt.subplots(1, 3, figsize=(11, 3.6))
for h in range(2):
    plot_attention(ex.weights[h], worked.token_labels(), ex.tokens, ax=axes[h],
                   title=f"two heads: head {h + 1}", color=mha.plotting.head_color(h))
plot_attention(single_weights, worked.token_labels(), ex.tokens, ax=axes[2],
               title="one head of size 8", color="#555555")
for ax in axes[1:]:
    ax.set_ylabel("")
fig.tight_layout()
plt.show()
""")

md(r"""
The single head blurs the two patterns into one: *cat* now spreads its weight evenly, 0.287 each,
over *the* (its previous token), itself and *dog* (the other noun), and nothing in its output says
which of the three is the previous token and which the same type. Two heads keep the two questions
apart, and $W^O$ can still combine their answers ({ref}`chapter 1 <ch01-average>` shows the same
averaging at work). Here the blur also erases information: the two
heads' outputs differed, so the "head 1 minus head 2" features of the two-head output carry
something, while with one softmax both halves of the concatenated values are equal and those four
features are exactly zero.
""")

code(r"""
assert sum(p.numel() for p in single.parameters()) == sum(p.numel() for p in module.parameters()) == 256
assert torch.allclose(single_weights, torch.softmax(ex.scores.sum(0) / math.sqrt(8), dim=-1), atol=1e-12)
assert [f"{w:.3f}" for w in single_weights[1].tolist()] == ["0.287", "0.287", "0.070", "0.070", "0.287"]
assert single_out[:, 4:].abs().max() < 1e-12 and ex.output[:, 4:].abs().max() > 0.5
""")

md(r"""
## Explorer: edit a token, change the temperature

The explorer edits the type part of *dog* (its noun and verb features; its position stays 5) and
divides the scaled scores by a temperature $\tau$ (see {ref}`softmax-temperature`):
$A_i = \operatorname{softmax}\big(Q_i K_i^\top / (\sqrt{d_k}\,\tau)\big)$. The panel on the right
follows *dog* through every step. Things to try: make *dog* a verb and watch head 2 pair it with
*saw* while head 1 does not move (it reads only positions); give it no type at all (both features 0)
and head 2's row for *dog* becomes uniform; lower $\tau$ and both heads sharpen.

The numbers behind each frame come from `worked.explorer_example`, which a checked cell and the
unit tests call; here is the "dog is a verb" frame's data:
""")

code(r"""
verb_dog = worked.explorer_example(noun=0, verb=1, temperature=1)
print(worked.explorer_summary(verb_dog))
assert torch.equal(verb_dog.weights[0], ex.weights[0])  # head 1 ignores types
assert [f"{w:.3f}" for w in verb_dog.weights[1, 4].tolist()] == ["0.056", "0.056", "0.416", "0.056", "0.416"]
""")

code(r"""
# NBVAL_IGNORE_OUTPUT
from mha.widgets import explorer

explorer(worked.render_explorer, worked.EXPLORER_CONTROLS, title="Edit dog, change the temperature",
         caption="Both heads' weights, and dog's row at every step, for each setting.",
         alt=worked.explorer_alt)
""")

md(r"""
## Summary

- With $h = 2$ heads of $d_k = 4$, $d_{\text{model}} = 8$; the scale $\sqrt{d_k} = 2$ uses one head's
  width.
- Each head projects the same $X$ with its own $W_i^Q, W_i^K, W_i^V$, scores, scales and takes a
  softmax **per row and per head**, and averages its own values: here head 1 found the previous
  token and head 2 the tokens of the same type.
- The head outputs are concatenated **along the feature axis** ($5 \times 8$, not $10 \times 4$)
  and $W^O$ mixes them into every output feature.
- `mha.MultiHeadAttention` and `torch.nn.MultiheadAttention` with these weights give the same
  numbers to $10^{-12}$; one head of the same size has the same parameters but a single softmax,
  and blurs the two patterns together.

## Exercises

**1. One row by hand.** Compute row 2 (*cat*) of head 2: the five raw scores, the five weights and
the head's output (4 numbers), using only the matrices printed above. Then check your numbers; the
function says which step is wrong first and gives a hint for the usual slips (forgetting the
$\sqrt{d_k}$, dividing by $d_k$, reading a column instead of a row, averaging $K$ instead of $V$).
Here is what it says about an attempt that forgot the scale:
""")

code(r"""
forgot_scale = torch.softmax(torch.tensor([0.0, 4, 0, 0, 4]), dim=-1).tolist()
worked.check_row(2, 2, scores=[0, 4, 0, 0, 4], weights=[round(w, 3) for w in forgot_scale])
""")

md(r"""
:::{admonition} Answer
:class: dropdown
Scores $(0, 4, 0, 0, 4)$; scaled $(0, 2, 0, 0, 2)$; weights $(0.056, 0.416, 0.056, 0.056, 0.416)$;
output $\big(e^2 (v_2 + v_5) + v_1 + v_3 + v_4\big) / (2e^2 + 3) = (0.112, 0.831, 0.056, 3.359)$
(with the rounded weights the last entry is $7 \cdot 0.416 + 8 \cdot 0.056 = 3.360$, which the
check accepts: it allows a difference of 0.01).
The hidden cell below checks this answer.
:::
""")

code(r"""
answer = worked.check_row(2, 2, scores=[0, 4, 0, 0, 4], weights=[0.056, 0.416, 0.056, 0.056, 0.416],
                          output=[0.112, 0.831, 0.056, 3.359])
assert answer.ok
assert worked.check_row(2, 2, output=[0.112, 0.831, 0.056, 7 * 0.416 + 8 * 0.056]).ok
assert [f"{v:.3f}" for v in ex.head_outputs[1, 1].tolist()] == ["0.112", "0.831", "0.056", "3.359"]
answer
""", tags=["hide-cell"])

md(r"""
**2. Temperature.** Below which temperature $\tau$ does head 1 put more than 0.9 of each row's weight
on its chosen token? (Hint: at temperature $\tau$ the weight is $e^{2/\tau} / (e^{2/\tau} + 4)$.)

:::{admonition} Answer
:class: dropdown
$e^{2/\tau} / (e^{2/\tau} + 4) > 0.9 \iff e^{2/\tau} > 36 \iff \tau < 2 / \ln 36 = 0.558$.
The hidden cell below checks it on both sides of the boundary.
:::
""")

code(r"""
boundary = 2 / math.log(36)
print(f"tau < {boundary:.3f}")
assert f"{boundary:.3f}" == "0.558"
assert mha.worked_example(temperature=0.55).weights[0, 1, 0] > 0.9
assert mha.worked_example(temperature=0.57).weights[0, 1, 0] < 0.9
""", tags=["hide-cell"])

md(r"""
**3. A verb dog.** If *dog* becomes a verb (type $(0, 0, 1)$), which head's weights change, and what
is head 2's new row for *dog*? Predict, then check with
`worked.check_row(2, 5, weights=..., example=worked.explorer_example(noun=0, verb=1))`.

:::{admonition} Answer
:class: dropdown
Head 1 reads only positions, so it does not change. In head 2, *dog* now matches *saw* and itself:
weights $(0.056, 0.056, 0.416, 0.056, 0.416)$. *saw*'s row changes too (it now has two verbs to
look at), and *cat* loses its partner. The hidden cell below checks the row.
:::
""")

code(r"""
verb_check = worked.check_row(2, 5, weights=[0.056, 0.056, 0.416, 0.056, 0.416], example=verb_dog)
assert verb_check.ok
verb_check
""", tags=["hide-cell"])

SOURCE.write()
