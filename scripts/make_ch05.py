"""Write the source of chapter 5, book/05_merging_heads.ipynb (no outputs).

Usage: python scripts/make_ch05.py && python scripts/execute_notebooks.py book/05_merging_heads.ipynb
"""
from __future__ import annotations

from pathlib import Path

from notebook_source import NotebookSource

SOURCE = NotebookSource(Path(__file__).resolve().parents[1] / "book" / "05_merging_heads.ipynb", "ch05")
md, code = SOURCE.md, SOURCE.code


md(r"""
(merging-heads)=
# Merging heads: concatenation, averaging and learned mixes

After attention, each of the $h$ heads holds an $n \times d_k$ matrix: one $d_k$-wide vector per
token. The next layer expects one $d_{\text{model}}$-wide vector per token. How should the heads be
merged? The Transformer {cite}`vaswani2017attention` concatenates them and multiplies by $W^O$.
Tutorials (our source 004 among them) also describe **averaging** the heads, a **learned weighted
sum** and a **gated** mix, and say averaging "has no extra parameters". This chapter builds all four
as drop-in replacements for `mha.MultiHeadAttention`, counts what each costs, shows exactly what
averaging throws away, and trains the same model with each merge.
""")

code(r"""
import inspect

import matplotlib.pyplot as plt
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

import mha
from mha import merging
from mha.merging import MERGES

mha.plotting.use_style()
device = mha.get_device()
""")

md(r"""
## Four ways to merge

Write $H_i \in \mathbb{R}^{n \times d_k}$ for head $i$'s output and $x_t$ for token $t$'s input
vector. The four merges, each ending in a projection back to $d_{\text{model}}$:

$$
\begin{aligned}
\text{concat:}\quad & O = [H_1, \dots, H_h]\, W^O, & W^O &\in \mathbb{R}^{d_{\text{model}} \times d_{\text{model}}} \\
\text{average:}\quad & O = \Big(\tfrac{1}{h} \textstyle\sum_i H_i\Big)\, W^{\text{up}}, & W^{\text{up}} &\in \mathbb{R}^{d_k \times d_{\text{model}}} \\
\text{weighted:}\quad & O = \Big(\textstyle\sum_i a_i H_i\Big)\, W^{\text{up}}, & a &= \operatorname{softmax}(\ell),\ \ell \in \mathbb{R}^{h} \\
\text{gated:}\quad & O_t = \Big(\textstyle\sum_i g_{t,i}\, H_{i,t}\Big)\, W^{\text{up}}, & g_t &= \operatorname{softmax}(x_t W^g + b^g),\ W^g \in \mathbb{R}^{d_{\text{model}} \times h}
\end{aligned}
$$

Concatenation keeps the heads **side by side** ($n \times h d_k = n \times d_{\text{model}}$); the
other three **add them up** into one $n \times d_k$ matrix, so they need an up-projection
$W^{\text{up}}$ to get back to $d_{\text{model}}$. The weighted merge learns one scalar per head; we
normalise the scalars with a softmax (positive, summing to 1), so with its logits at zero, its
starting point, it *is* the average. The gated merge computes a fresh mix for every token from that
token's input. In `mha` all four are one class, `merging.MergedMultiHeadAttention(d_model, num_heads,
merge=...)`, with the forward signature of `mha.MultiHeadAttention`; only its last step, the merge
layer, changes:
""")

code(r"""
for cls in (merging.ConcatMerge, merging.AverageMerge):
    print(inspect.getsource(cls))
print(inspect.getsource(merging.WeightedMerge.coefficients))
print(inspect.getsource(merging.GatedMerge.coefficients))
print(inspect.getsource(merging.mix_heads))
""")

md(r"""
The weighted sum over heads is one `einsum`; with coefficients $1/h$ it is the average. The first
check: with `merge="concat"` and the weights of an `mha.MultiHeadAttention` copied in, the module
computes exactly what that module computes.
""")

code(r"""
torch.manual_seed(0)
standard = mha.MultiHeadAttention(16, 4).to(device)
concat = merging.MergedMultiHeadAttention.from_multi_head(standard)
x = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(1)).to(device)
out_standard, w_standard = standard(x)
out_concat, w_concat = concat(x)
gap = (out_standard - out_concat).abs().max().item()
print("output shapes:", tuple(out_concat.shape), "weights:", tuple(w_concat.shape))
print("largest difference from mha.MultiHeadAttention below 1e-6:", gap < 1e-6)
assert gap < 1e-6 and torch.allclose(w_standard, w_concat, atol=1e-6)
for merge in MERGES:
    out, weights = merging.MergedMultiHeadAttention(16, 4, merge).to(device)(x)
    assert out.shape == (2, 5, 16) and weights.shape == (2, 4, 5, 5)
""")

md(r"""
(merging-what-averaging-loses)=
## What averaging loses

Take the verb of "cat chases mouse" (source 000's 猫 追 老鼠). Suppose head 1 has learned to fetch the
word *before* the verb (who chases) and head 2 the word *after* it (who is chased). With two-feature
word vectors, cat $= (1, 0)$ and mouse $= (0, 1)$, the verb's two head outputs are (cat, mouse). In
"mouse chases cat" they are (mouse, cat). Concatenation keeps the roles in separate slots; the
average does not:
""")

code(r"""
cat, mouse = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])
heads_a = torch.stack([cat, mouse])[None, :, None]  # (B=1, H=2, T=1, Dh=2): "cat chases mouse"
heads_b = torch.stack([mouse, cat])[None, :, None]  # "mouse chases cat"
for name, heads in (("cat chases mouse", heads_a), ("mouse chases cat", heads_b)):
    print(f"{name:17s} concat {mha.merge_heads(heads)[0, 0].tolist()}   "
          f"average {merging.average_head_outputs(heads)[0, 0].tolist()}")
assert torch.equal(merging.average_head_outputs(heads_a), merging.average_head_outputs(heads_b))
assert not torch.equal(mha.merge_heads(heads_a), mha.merge_heads(heads_b))
""")

md(r"""
Both sentences average to $(0.5, 0.5)$: "someone chased someone, and the two were a cat and a mouse".
Whatever comes after the average, $W^{\text{up}}$ included, sees the same numbers for both, so no
later layer can tell who chased whom. The same happens with real attention. `merging.role_heads_example`
builds a $d_{\text{model}} = 8$, two-head module by hand (no training): head 1 attends one position
back, head 2 one position ahead, and both heads' values are the word (details in its docstring).
The vector that the final projection receives at the verb:
""")

code(r"""
def verb_vector(merge, sentence):
    return merging.merge_example(merge, sentence)["merged"][1]  # row 1 = the verb, float64 CPU

print(f"{'merge':9s} {'sentence':17s} vector at 'chases' (features: {', '.join(merging.ROLE_VOCAB)}, ...)")
for merge in MERGES:
    for sentence in merging.ROLE_SENTENCES[:2]:
        print(f"{merge:9s} {sentence:17s} {[round(v, 3) for v in verb_vector(merge, sentence).tolist()]}")
a, b = merging.ROLE_SENTENCES[:2]
assert torch.allclose(verb_vector("average", a), verb_vector("average", b), atol=1e-6)
assert (verb_vector("concat", a) - verb_vector("concat", b)).abs().max() > 0.99
assert (verb_vector("weighted", a) - verb_vector("weighted", b)).abs().max() > 0.49
gate = merging.merge_example("gated", a)["coefficients"][1]  # the verb's weights for heads 1 and 2
weights = merging.merge_example("weighted", a)["coefficients"][1]
print("head weights at the verb: weighted", [round(v, 3) for v in weights.tolist()],
      " gated", [round(v, 3) for v in gate.tolist()])
assert [round(v, 3) for v in gate.tolist()] == [0.953, 0.047] and [round(v, 3) for v in weights.tolist()] == [0.75, 0.25]
""")

md(r"""
Unequal weights (0.75/0.25 for the weighted merge here, 0.953/0.047 from the gate at the verb) do
separate *this* pair: the word with the larger weight was the subject. That is not a cure. Every
merge that adds the heads up hands the final projection a $d_k$-wide vector instead of a
$d_{\text{model}}$-wide one, and many different sets of head outputs give the same sum (exercise 2
finds a pair for the weighted merge). Precisely: averaging and then projecting with $W^{\text{up}}$
is concatenating and then projecting with

$$
W^O = \tfrac{1}{h}\begin{bmatrix} W^{\text{up}} \\ \vdots \\ W^{\text{up}} \end{bmatrix}
\qquad (h \text{ equal blocks}),
$$

a $d_{\text{model}} \times d_{\text{model}}$ matrix of rank at most $d_k$. So the averaging merges
are concatenation with a constrained $W^O$: concatenation can compute anything they compute
(`merging.to_concat` builds the equivalent module), but not the reverse. At BERT-base size:
""")

code(r"""
torch.manual_seed(0)
x = torch.randn(2, 6, 768, generator=torch.Generator().manual_seed(2))
for merge in ("concat", "average", "weighted"):
    module = merging.MergedMultiHeadAttention(768, 12, merge)
    as_concat = merging.to_concat(module)
    with torch.no_grad():
        same = torch.allclose(module(x)[0], as_concat(x)[0], atol=1e-5)
    rank = int(torch.linalg.matrix_rank(merging.equivalent_out_proj(module)))
    print(f"{merge:9s} equivalent W_O: 768 x 768, rank {rank:3d}; same output as the concat copy: {same}")
    assert same and rank == (768 if merge == "concat" else 64)
assert 768 - 64 == (12 - 1) * 64 == 704
""")

md(r"""
The concatenation of the heads has $d_{\text{model}} = 768$ directions; an averaging merge ignores
every direction in which the heads' outputs differ but their sum does not: $(h - 1)\, d_k = 704$ of
the 768. Learned value projections can soften this (each head may write into its own part of the
$d_k$ features), but then $h$ heads share $d_k$ features instead of having $d_k$ each.

## What each merge costs

Source 004 says averaging adds no parameters while concatenation adds a $d_{\text{model}}^2$
matrix. The mean itself has no parameters, but the $d_k$-wide result must be projected back to
$d_{\text{model}}$, and that projection has $d_k \cdot d_{\text{model}}$ weights (plus
$d_{\text{model}}$ biases). `merging.merge_params` and `merging.merge_flops` give every merge's cost;
FLOPs count multiply-adds of matrix products as 2, for one sequence of $n = 512$ tokens.
""")

code(r"""
print(inspect.getsource(merging.merge_params))
rows = merging.merge_cost_table(merging.CONFIGS, seq_len=512)
print(f"{'config':13s} {'merge':9s} {'merge params':>13s} {'vs concat':>9s} {'merge FLOPs':>14s} {'layer params':>13s}")
for r in rows:
    print(f"{r['config']:13s} {r['merge']:9s} {r['params']:13,d} {r['params_vs_concat']:9.3f} "
          f"{r['flops']:14,d} {r['layer_params']:13,d}")
""")

md(r"""
Each count is checked against the modules: `sum(p.numel() ...)` of the merge layer and of the whole
attention module for every configuration, and PyTorch's own FLOP counter
(`torch.utils.flop_counter.FlopCounterMode`) on the merge layer.
""")

code(r"""
for name, (d_model, num_heads) in merging.CONFIGS.items():
    for merge in MERGES:
        module = merging.MergedMultiHeadAttention(d_model, num_heads, merge)
        assert sum(p.numel() for p in module.merge_layer.parameters()) == merging.merge_params(d_model, num_heads, merge)
        assert sum(p.numel() for p in module.parameters()) == merging.merged_attention_params(d_model, num_heads, merge)
        heads = torch.zeros(1, num_heads, 64, d_model // num_heads)
        with FlopCounterMode(display=False) as counter:
            module.merge_layer(heads, torch.zeros(1, 64, d_model))
        assert counter.get_total_flops() == merging.merge_flops(64, d_model, num_heads, merge)
concat_p, average_p = merging.merge_params(768, 12, "concat"), merging.merge_params(768, 12, "average")
layer = mha.attention_params(768, 12)
saved = (concat_p - average_p) / layer
print(f"BERT-base merge: concat {concat_p:,d} = 768*768 + 768, average {average_p:,d} = 64*768 + 768")
print(f"averaging saves {concat_p - average_p:,d} of the layer's {layer:,d} parameters ({saved:.1%})")
assert (concat_p, average_p, layer) == (590_592, 49_920, 2_362_368) and round(saved, 3) == 0.229
assert 4 * concat_p == layer  # the merge is a quarter of the layer
share = merging.merge_flops(512, 768, 12, "concat") / mha.attention_flops(512, 768, 12)
print(f"concat merge share of the attention layer's FLOPs at n = 512: {share:.2%}")
assert round(share, 4) == 0.1875
extra = {m: merging.merge_params(768, 12, m) - average_p for m in ("weighted", "gated")}
print("extra over the average:", extra, " average / concat:", round(average_p / concat_p, 3))
assert extra == {"weighted": 12, "gated": 9_228} and 768 * 12 + 12 == 9_228
assert round(average_p / concat_p, 3) == 0.085
""")

md(r"""
For BERT-base the merge is a quarter of the attention layer's parameters ($d_{\text{model}}^2$ of
$4 d_{\text{model}}^2$) and 18.75 % of its FLOPs at 512 tokens; averaging cuts that to about a
twelfth ($1/h$). The per-head logits of the weighted merge cost 12 more numbers, the gate
$d_{\text{model}} \cdot h + h = 9{,}228$ more. Whether the saving is worth it is the experiment's
question.

## Not to be confused: averaged *weights*

`torch.nn.MultiheadAttention` has an argument `average_attn_weights=True` (the default). It
averages the attention **weights it returns for inspection** over the heads; the **output** is still
the concatenation times $W^O$. The flag changes the second return value and nothing else:
""")

code(r"""
torch.manual_seed(0)
torch_mha = nn.MultiheadAttention(16, 4, batch_first=True).to(device)
x = 4 * torch.randn(1, 5, 16, generator=torch.Generator().manual_seed(3)).to(device)  # larger inputs: sharper maps
with torch.no_grad():
    out_avg, w_avg = torch_mha(x, x, x, average_attn_weights=True)
    out_per, w_per = torch_mha(x, x, x, average_attn_weights=False)
    out_ours, _ = merging.MergedMultiHeadAttention.from_multi_head(mha.MultiHeadAttention.from_torch(torch_mha))(x)
print("weights returned:", tuple(w_avg.shape), "with averaging,", tuple(w_per.shape), "without")
print("outputs identical either way:", torch.equal(out_avg, out_per))
print("returned weights = mha.average_heads(per-head weights):", torch.allclose(w_avg, mha.average_heads(w_per), atol=1e-6))
print("output = concat + W_O (our module):", torch.allclose(out_avg, out_ours, atol=1e-5))
assert torch.equal(out_avg, out_per) and torch.allclose(w_avg, mha.average_heads(w_per), atol=1e-6)
assert torch.allclose(out_avg, out_ours, atol=1e-5)
""")

code(r"""
fig, axes = plt.subplots(1, 5, figsize=(15, 3.2))
tokens = [f"t{i}" for i in range(5)]
w_cpu = w_per[0].to("cpu", torch.float64)
mha.plotting.plot_heads(w_cpu, tokens, axes=axes[:4], annotate=False)
mha.plotting.plot_attention(w_avg[0].to("cpu", torch.float64), tokens, ax=axes[4], annotate=False,
                            color="#555555", title="average_attn_weights=True")
axes[4].set_ylabel("")
fig.suptitle("What nn.MultiheadAttention returns: four heads' weights, and their mean (a picture only)")
fig.tight_layout()
plt.show()
""")

md(r"""
The averaged map is handy for a quick look, but no computation inside the module uses it: each head
applies its *own* weights to its *own* values. The averaging merge of this chapter is a different
thing, an average of the head **outputs**, and it changes what the layer computes.

(merging-experiment)=
## The experiment: the same model, four merges

We reuse the task and model of {ref}`chapter 1 <ch01-experiment>` (`mha.experiments`): sequences of 12 tokens from a vocabulary of
16; at each position the model must name the tokens $k$ places back for every $k$ from 1 to
`num_relations`, all at once. The model is embeddings, **one** causal attention layer with
$d_{\text{model}} = 32$ and $h = 4$ heads ($d_k = 8$), a residual connection and a linear readout
(chapter 1's harsher readout); only the merge changes. Two tasks:

- **4 relations**: four tokens to fetch, one per head if each head takes one, and all four must
  reach the readout.
- **2 relations**: the easier task, where a $d_k = 8$ summary has room for what is needed, so
  averaging is not doomed in advance.

Each (task, merge) is trained with 5 seeds (seed = data, initial weights and batch order), 1,500
Adam steps each. That is 40 runs, too slow for a page that must run in a minute, so
`scripts/make_merge_results.py` ran them once and stored the results in
`mha/data/merge_results.json`; below we re-run one of them live and check it matches.
""")

code(r"""
print(inspect.signature(merging.merge_experiment))
from mha import experiments
assert (experiments.SEQ_LEN, experiments.VOCAB_SIZE, experiments.D_MODEL, experiments.STEPS) == (12, 16, 32, 1500)
runs = merging.load_merge_results()
summary = merging.summarize_merge_results(runs)
print(f"{'relations':>9s} {'merge':9s} {'params':>7s} {'merge params':>12s}  held-out accuracy over {summary[0]['seeds']} seeds")
for r in summary:
    seeds = [x["accuracy"] for x in runs if x["num_relations"] == r["num_relations"] and x["strategy"] == r["strategy"]]
    print(f"{r['num_relations']:9d} {r['strategy']:9s} {r['params']:7,d} {r['merge_params']:12,d}  "
          f"mean {r['mean']:.3f}  (min {r['min']:.3f}, max {r['max']:.3f})  seeds: {', '.join(f'{a:.3f}' for a in seeds)}")
""")

code(r"""
fig = merging.plot_merge_results(runs)
fig.suptitle("Held-out accuracy against parameters, d_model = 32, 4 heads (one marker per seed)")
fig.tight_layout()
plt.show()
""")

code(r"""
by = {(r["num_relations"], r["strategy"]): r for r in summary}
params = {m: by[(4, m)]["params"] for m in MERGES}
assert params["concat"] - params["average"] == 32 * 32 - 8 * 32 == 768
assert params["weighted"] - params["average"] == 4 and params["gated"] - params["average"] == 32 * 4 + 4
assert round(768 / by[(2, "concat")]["params"], 2) == 0.12
solved = {(k, m): sum(x["accuracy"] >= 0.99 for x in runs if (x["num_relations"], x["strategy"]) == (k, m))
          for k in (4, 2) for m in MERGES}
summing = ("average", "weighted", "gated")
assert solved[(4, "concat")] == 5 and all(solved[(4, m)] <= 1 for m in summing)
assert all(by[(4, m)]["mean"] < by[(4, "concat")]["mean"] - 0.5 for m in summing)
assert by[(4, "average")]["max"] == 1.0
assert [round(by[(4, m)]["max"], 2) for m in ("weighted", "gated")] == [0.90, 0.47]
assert sorted(round(x["accuracy"], 2) for x in runs if (x["num_relations"], x["strategy"]) == (4, "average"))[-2] == 0.61
assert all(solved[(2, m)] == 5 for m in MERGES)
failed = [x for x in runs if x["num_relations"] == 4 and x["accuracy"] < 0.5]
three_of_four = sum(sorted(x["relation_accuracy"])[1] >= 0.99 for x in failed)
print("seeds (of 5) reaching >= 0.99:", {f"k={k} {m}": n for (k, m), n in solved.items()})
print(f"4 relations, runs below 0.5: {len(failed)}; of them with three relations >= 0.99: {three_of_four}")
assert three_of_four > len(failed) / 2
assert all(sum(0.4 < x["accuracy"] < 0.99 for x in runs if (x["num_relations"], x["strategy"]) == (4, m)) == 1
           for m in ("weighted", "gated"))
""")

md(r"""
With four relations, concatenation solves the task on all five seeds. The summing merges mostly
fail, and in a telling way: in most failed runs three of the four answers are right and the fourth
is at chance, so "all four right" is near $1/16$. But not always: averaging solved the task
completely on one seed (and reached 0.61 on another), and the weighted and gated merges came part of
the way on one seed each (0.90 and 0.47).
So a sum of $d_k = 8$ features *can* carry four tokens. Nothing forbids the heads from writing into
separate features of the sum (for instance two each: 16 symbols placed on a circle in two dimensions
are still told apart by a linear readout), and on one seed in five training found a solution.
Concatenation gives every head its own 8 features by construction, and training found the solution
every time. Learning the mix, one weight per head or a gate per token, did not help here (no seed
solved the task): a weight can scale a head's contribution, but it cannot widen the sum.

The circle claim, checked: each of 16 points on the unit circle scores highest against itself, so
a linear readout with those points as weights names every symbol correctly.
""")

code(r"""
angles = torch.arange(16, dtype=torch.float64) * 2 * torch.pi / 16
points = torch.stack([angles.cos(), angles.sin()], dim=1)  # (16, 2): 16 symbols in 2 features
print("readout recovers all 16 symbols:", torch.equal((points @ points.T).argmax(dim=1), torch.arange(16)))
assert torch.equal((points @ points.T).argmax(dim=1), torch.arange(16))
""")

md(r"""
With two relations every merge reaches 100 % on every seed, and the summing merges do it with 768
fewer parameters (12 % of this small model): when the heads' combined message fits in $d_k$
features, averaging costs nothing in accuracy.

The live check, one run of the sweep (a few seconds):
""")

code(r"""
live = merging.merge_experiment("average", seed=0, num_relations=4)
cached = next(r for r in runs if (r["strategy"], r["seed"], r["num_relations"]) == ("average", 0, 4))
print(f"live run: accuracy {live['accuracy']:.4f}, params {live['params']:,d}; cached: {cached['accuracy']:.4f}, {cached['params']:,d}")
assert live["params"] == cached["params"] and abs(live["accuracy"] - cached["accuracy"]) < 1e-9
""")

md(r"""
## Explorer: per-head outputs and the merged result

Pick a merge and a sentence. The first two panels show what the two hand-built heads of
`merging.role_heads_example` return for each token (rows) as word features (columns); the third
shows what the final projection receives: the heads side by side for concat, their (weighted) sum
otherwise, with each token's head weights in its row label. Compare the verb row of "cat chases
mouse" and "mouse chases cat" under `average`. (The first word has no word before it and the last
none after it, so there the head spreads its attention evenly: the rows of 0.33.)
""")

code(r"""
# NBVAL_IGNORE_OUTPUT
from mha.widgets import explorer

explorer(merging.plot_merge_example, {"merge": list(MERGES), "sentence": list(merging.ROLE_SENTENCES)},
         title="Merging two heads", alt=merging.merge_example_alt,
         caption="Each head's output per token, and the vector the final projection receives.")
""")

md(r"""
## Summary

- **Concatenation + $W^O$** keeps every head's $d_k$ features in its own slot and lets $W^O$
  ($d_{\text{model}} \times d_{\text{model}}$) mix them. It is the standard: the original
  Transformer {cite}`vaswani2017attention`, BERT {cite}`devlin2019bert`, GPT-2
  {cite}`radford2019language` and the multi-query and grouped-query variants
  {cite}`shazeer2019fast,ainslie2023gqa` (which share keys and values but still concatenate) all
  use it, and `torch.nn.MultiheadAttention` computes it.
- **Averaging** is concatenation with $W^O$ forced to $h$ equal blocks (rank $\le d_k$). It costs
  $d_k \cdot d_{\text{model}} + d_{\text{model}}$ parameters, not zero: 49,920 instead of 590,592 for
  BERT-base. It loses which head said what. It solved our four-relation task on one seed of five
  (concatenation: five of five) and matched concatenation on the two-relation task.
- **Learned weights per head** and **gates per token** add a few parameters and did not do better
  than the plain average here. Per-head scalars do appear in practice in a different role: as
  gates or masks that scale each head *inside* the concatenation, to measure which heads matter and
  to prune them {cite}`michel2019sixteen,voita2019analyzing`; $W^O$ stays.
- `nn.MultiheadAttention(average_attn_weights=True)` averages the weights it **returns** for
  inspection, never the outputs.

## Exercises

1. What do the concat and average merges of BERT-large ($d_{\text{model}} = 1024$, $h = 16$) cost in
   parameters, biases included? Check with `merging.merge_params`.

```{admonition} Answer
:class: dropdown
$d_k = 64$. Concat: $1024^2 + 1024 = 1{,}049{,}600$. Average: $64 \cdot 1024 + 1024 = 66{,}560$,
about $1/16$. `merging.merge_params(1024, 16, "concat")` and `(..., "average")` return these numbers.
```

2. The weighted merge of the explorer uses $a = (0.75, 0.25)$. Find two *different* pairs of head
   outputs $(H_1, H_2)$ and $(H_1', H_2')$ it cannot tell apart.

```{admonition} Answer
:class: dropdown
It needs $0.75 (H_1' - H_1) + 0.25 (H_2' - H_2) = 0$, so $H_2' - H_2 = -3 (H_1' - H_1)$. For
example $(H_1, H_2) = ((1, 0), (0, 1))$ and $(H_1', H_2') = ((0, 0), (3, 1))$: both give
$(0.75, 0.25)$. Check: `merging.mix_heads(h, torch.tensor([0.75, 0.25]))` on
`h = torch.tensor([[1., 0], [0, 1]])[None, :, None]` and on the second pair. Every summing merge has
such pairs: a $(h - 1)\, d_k$-dimensional family of them.
```

3. Given a trained `average` module, `merging.to_concat` builds a concat module with the same
   outputs. Why can there be no `to_average` that does the reverse for every concat module?

```{admonition} Answer
:class: dropdown
An average module's output, minus the bias, always lies in the $d_k$-dimensional row space of its
$W^{\text{up}}$: its equivalent $W^O$ has rank at most $d_k$. A concat module's $W^O$ generally has
rank $d_{\text{model}}$ (768 versus 64 in the check above), so its outputs span directions no
average module can produce. `torch.linalg.matrix_rank(merging.equivalent_out_proj(m))` shows it.
```
""")


if __name__ == "__main__":
    SOURCE.write()
