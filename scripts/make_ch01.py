"""Write the source of chapter 1, book/01_single_head_limits.ipynb (cells without outputs).

Usage: python scripts/make_ch01.py && python scripts/execute_notebooks.py book/01_single_head_limits.ipynb

The chapter's grid of trained models is cached in mha/data/head_count_grid.json by
scripts/make_ch01_cache.py; the chapter re-trains two of them live and checks them against it.
"""
from __future__ import annotations

from pathlib import Path

from notebook_source import NotebookSource

SOURCE = NotebookSource(Path(__file__).resolve().parents[1] / "book" / "01_single_head_limits.ipynb", "ch01")
md, code = SOURCE.md, SOURCE.code


# ---------------------------------------------------------------------------------------------
md(r"""
(ch01-single-head-limits)=
# Why one head is not enough

Attention lets every token collect information from the other tokens of its sequence. This
chapter asks what happens when a token needs *several* pieces of information at once and there is
a single attention head to fetch them. We answer with a hand-built example small enough to check
in your head, then with an experiment you can rerun in seconds. The answer turns out to be more
interesting than the slogan "one head can only learn one relation": one head *can* serve two
relations, by a trick with its weights, and the trick runs out as the number of relations grows.

The symbols are those of the {ref}`notation` page: $n$ tokens, $d_{\text{model}}$ features per
token, $h$ heads of width $d_k = d_{\text{model}} / h$.
""")

code(r"""
import inspect

import matplotlib.pyplot as plt
import torch

import mha
from mha import experiments as E
from mha import single_head
from mha.widgets import explorer

mha.plotting.use_style()
torch.set_printoptions(precision=4, sci_mode=False)
""")

md(r"""
## A word often needs several other words

Take the three-word sentence "cat chases mouse" (猫 追 老鼠). To represent "chases" well, a
model wants to know who does the chasing (the subject, "cat") and who is chased (the object,
"mouse"), and only the order of the words tells these two roles apart: "mouse chases cat" uses
the same words. The longer sentence "The animal didn't cross the street because it was too
tired" holds more: "it" refers back to "animal" (coreference), "cross" has a subject and an
object, "tired" describes "it", and "because" links the tiredness to the crossing that did not
happen. The figure draws each relation as an arrow from the word that needs the information to
the word that holds it, one colour per kind of relation.
""")

code(r"""
single_head.render_relations()
plt.show()
""")

md(r"""
Tutorials often give each colour to one attention head: from every word, each head shines a beam
of its own colour onto the words it cares about, and a word's new vector mixes the light of every
beam that reaches it. Or, in another image, a committee of experts (one for grammar, one for
reference, one for word order) whose separate reports are bound into one. Both pictures are good
places to start. Two parts of them, though, are claims rather than facts: that a single head
*cannot* serve several relations, and that trained heads split the work this neatly. This
chapter tests the first claim and shows what the heads of a small trained model do;
{cite}`clark2019what` and {cite}`voita2019analyzing` look at the heads of real language models.
""")

# ---------------------------------------------------------------------------------------------
md(r"""
(ch01-average)=
## What one head returns: an average

A head turns each query's scores into weights with a softmax, so the weights of query $i$ are
non-negative and sum to one, and its output is a weighted average of the value vectors:

$$
\text{out}_i = \sum_{j=1}^{n} a_{ij}\, v_j, \qquad a_{ij} \ge 0, \qquad \sum_{j=1}^{n} a_{ij} = 1 .
$$

Such a sum is a *convex combination*: the output always lies inside the region spanned by the
value vectors. When a query needs two tokens, the head can only return a blend of the two.

Let us build that case by hand. Give each noun a value vector with one feature per noun,
$v_{\text{cat}} = (1, 0)$ and $v_{\text{mouse}} = (0, 1)$ (the verb's own value is zero and the
verb does not attend to itself), and let the verb's head put weight $s$ on the first word and
$1 - s$ on the last. `single_head.verb_attention` builds the queries, keys and mask that produce
this split and calls `mha.scaled_dot_product_attention`; `two_sentences` runs it on both word
orders. First, an even split, $s = 0.5$:
""")

code(r"""
even = single_head.two_sentences(0.5)
print("weights of 'chases' over (cat, chases, mouse):", even["weights"][1].numpy().round(4))
print("output in 'cat chases mouse':", even["output"].numpy().round(4))
print("output in 'mouse chases cat':", even["output_swapped"].numpy().round(4))
print("distance between them:", round(even["distance"], 4))
""")

code(r"""
assert torch.equal(even["output"], even["output_swapped"])  # the two sentences look identical
assert even["distance"] == 0.0
""")

md(r"""
The two sentences mean opposite things, yet the verb receives exactly the same vector
$(0.5, 0.5)$. The average has erased which noun came first, and no later layer can bring it back:
the information is simply not in the vector any more.

An *uneven* split keeps it. With $s = 0.7$ the verb receives $(0.7, 0.3)$ in one sentence and
$(0.3, 0.7)$ in the other; the order now lives in the weights, the larger share marking the
first word. Remember this loophole: it is how a single head copes with two relations in the
experiment below, and it is why it stops coping when there are more.
""")

code(r"""
uneven = single_head.two_sentences(0.7)
print("output in 'cat chases mouse':", uneven["output"].numpy().round(4))
print("output in 'mouse chases cat':", uneven["output_swapped"].numpy().round(4))
print("distance between them:", round(uneven["distance"], 4))
assert torch.allclose(uneven["output"], torch.tensor([0.7, 0.3], dtype=torch.float64))
assert torch.allclose(uneven["output_swapped"], torch.tensor([0.3, 0.7], dtype=torch.float64))
assert abs(uneven["distance"] - 0.4 * 2**0.5) < 1e-12
""")

code(r"""
single_head.render_split(0.5)
plt.show()
""")

md(r"""
Move the split from "all on cat" to "all on mouse" and watch the two sentences' outputs
approach each other, coincide at $s = 0.5$ and move apart again. The distance between them is
$|2s - 1|\sqrt{2}$.
""")

code(r"""
# NBVAL_IGNORE_OUTPUT
explorer(single_head.render_split, {"split": list(single_head.SPLITS)},
         title="One head, two nouns: the verb's output as the split moves",
         caption="At split 0.5 'cat chases mouse' and 'mouse chases cat' give the verb the same vector.",
         alt=single_head.split_alt)
""")

# ---------------------------------------------------------------------------------------------
md(r"""
(ch01-experiment)=
## An experiment: k relations, h heads

To test the claim on trained models we need a task in which every position needs $k$ pieces
of information at once, and we know exactly which. The simplest one: a sequence of random
symbols, and at every position the model must name the symbols $1, 2, \dots, k$ places back,
all at once. Each offset is one "relation": a stand-in for relations like "the previous word" or
"the subject of this verb", fixed and independent of one another. The labels are copies of the
input, so they are right by construction. Here is a held-out sequence of the $k = 4$ task, with
symbols written as letters, and the four answers expected at position 6:
""")

code(r"""
task = E.make_task(4, seed=0)
tokens = task.test_x[0]
print("sequence:   ", " ".join(E.token_labels(tokens)))
print("answers at position 6 (1, 2, 3, 4 back):",
      [E.token_labels(tokens)[6 - o] for o in task.offsets])
print("train", tuple(task.train_x.shape), "test", tuple(task.test_x.shape), "targets", tuple(task.test_y.shape))
assert task.test_y[0, 6].tolist() == [tokens[6 - o].item() for o in (1, 2, 3, 4)]
assert (task.test_y[:, :4] == -100).all()  # positions 0-3 lack an answer 4 back: not scored
""")

md(r"""
The model is as small as it can be while still being a transformer layer: token and position
embeddings of width $d_{\text{model}} = 32$, **one** causal attention layer
`mha.MultiHeadAttention(d_model, h)` with a residual connection, and a readout that produces the
$k$ answers of each position. Its forward pass:
""")

code(r"""
print(inspect.getsource(E.RelationModel.forward))
""")

md(r"""
The readout is an MLP with one hidden layer of $4 d_{\text{model}} = 128$ units (the main
setting) or a single linear layer (a harder test for the heads, used below). Only the number of
heads changes from model to model. Since $d_k = d_{\text{model}} / h$, the attention layer has
$4 d_{\text{model}}^2 + 4 d_{\text{model}} = 4{,}224$ parameters for every $h$, and so does every
other part of the model:
""")

code(r"""
for h in (1, 2, 4, 8):
    model = E.make_model(h, task, readout="mlp")
    print(f"h = {h}: d_k = {model.attention.head_dim:2d}, attention {E.count_params(model.attention):,}, "
          f"whole model {E.count_params(model):,} parameters")
""")

code(r"""
counts = {h: E.count_params(E.make_model(h, task)) for h in (1, 2, 4, 8)}
assert len(set(counts.values())) == 1 and counts[1] == 17_600
assert all(E.count_params(E.make_model(h, task).attention) == mha.attention_params(32, h) == 4_224
           for h in (1, 2, 4, 8))
""")

md(r"""
Each model trains for 1,500 Adam steps (learning rate 0.003, batches of 64 sequences) on 4,096
sequences of 12 symbols from a vocabulary of 16, on the CPU with fixed seeds. We then count, on
512 held-out sequences, the positions where **all** $k$ answers are right (guessing would score
$16^{-k}$). `head_count_experiment` does all of this in one call; here are the two runs that
matter most, one head against two on $k = 4$ relations, trained live (a few seconds each; in a
live notebook, `show_progress=True` adds a progress bar):
""")

code(r"""
live = {h: E.head_count_experiment(h, seed=0, num_relations=4) for h in (1, 2)}
for h, result in live.items():
    print(f"{h} head{'s' if h > 1 else ''}: held-out accuracy {result['accuracy']:.2f} "
          f"with {result['params']:,} parameters")
""")

code(r"""
assert live[2]["accuracy"] >= 0.9
assert live[1]["accuracy"] <= live[2]["accuracy"] - 0.2
assert 0.7 < live[1]["accuracy"] < 0.8  # "about one position in four" wrong
assert live[1]["params"] == live[2]["params"]
for h, result in live.items():  # the cached grid below holds the same numbers
    assert abs(result["accuracy"] - E.cached_run(h, seed=0)["accuracy"]) < 0.02
""")

md(r"""
Same width, same parameters, same data, same training: the two-head model gets essentially every
position right, and the one-head model misses about one position in four. To see where the limit
lies, we vary both $k$ and $h$. The grid below (5 values of $k$, 4 values of $h$, 3 seeds for the
MLP readout and 1 for the linear one, 80 runs) was trained by `scripts/make_ch01_cache.py` and
cached in the package, because it takes minutes rather than seconds; the live runs above are two
of its entries and the tests re-run another.
""")

code(r"""
mlp, linear = E.grid_summary("mlp"), E.grid_summary("linear")
print("held-out accuracy, MLP readout: mean ± half the range over 3 seeds")
print(E.format_grid(mlp))
print()
print("held-out accuracy, linear readout: 1 seed")
print(E.format_grid(linear, spread=False))
""")

code(r"""
fig, axes = plt.subplots(1, 3, figsize=(14, 3.8), gridspec_kw={"width_ratios": [1.4, 1, 1]})
E.plot_accuracy_vs_heads(4, ax=axes[0])
E.plot_grid("mlp", ax=axes[1])
E.plot_grid("linear", ax=axes[2])
fig.tight_layout()
plt.show()
""")

md(r"""
Read the MLP table row by row, from the top:

- With $k = 1$ and $k = 2$ relations, **one head is enough**: every model, on every seed, gets every
  held-out position right. "One head learns one relation" is simply false here.
- With $k = 3$, one head still reaches 0.95, and two heads or more reach 1.00 (to two decimals).
- With $k = 4$, one head falls to 0.78 while two heads reach 0.99 and four reach 1.00.
- With $k = 6$, one head collapses (0.06), and only eight heads solve the task on every seed.

The need for heads grows with the number of relations, gradually, not at $k = 2$. The linear
readout, which cannot post-process what the heads deliver, is much stricter: every model with at
least as many heads as relations ($h \ge k$) scores 1.00, one head already fails at $k = 2$ (0.36),
and heads that must carry two relations each succeed only sometimes (0.94 for $k = 3, h = 2$,
but 0.07 for $k = 4, h = 2$). More heads than relations never hurt in this grid, even at
$d_k = 4$.
""")

code(r"""
assert all(mlp[(k, h)]["min"] == 1.0 for k in (1, 2) for h in E.GRID_HEADS)
assert round(mlp[(3, 1)]["mean"], 2) == 0.95 and all(mlp[(3, h)]["min"] > 0.999 for h in (2, 4, 8))
assert round(mlp[(4, 1)]["mean"], 2) == 0.78 and round(mlp[(4, 2)]["mean"], 2) == 0.99
assert mlp[(4, 4)]["min"] == mlp[(4, 8)]["min"] == 1.0
assert round(mlp[(6, 1)]["mean"], 2) == 0.06 and mlp[(6, 8)]["min"] == 1.0 and mlp[(6, 4)]["min"] < 1.0
assert all(linear[(k, h)]["mean"] == 1.0 for k in E.GRID_RELATIONS for h in E.GRID_HEADS if h >= k)
assert round(linear[(2, 1)]["mean"], 2) == 0.36
assert round(linear[(3, 2)]["mean"], 2) == 0.94 and round(linear[(4, 2)]["mean"], 2) == 0.07
assert all(mlp[(k, h)]["min"] > 0.999 for k in E.GRID_RELATIONS for h in E.GRID_HEADS if h >= k)
""")

# ---------------------------------------------------------------------------------------------
md(r"""
(ch01-heads)=
## What the heads learned

For each trained model of the main setting ($k = 4$, MLP readout) the cache keeps every head's
attention map on a held-out sequence. Averaging a map along its diagonals gives a compact summary:
the weight a head puts, on average, on the token $0, 1, \dots, 4$ places back.
""")

code(r"""
for h in (1, 2, 4):
    weights, labels = E.cached_maps(h, seed=0)
    profile = E.offset_profile(weights)
    print(f"{h} head{'s' if h > 1 else ''}: average weight on the token 0, 1, 2, 3, 4 places back")
    for i, row in enumerate(profile):
        print(f"   head {i + 1}:", " ".join(f"{w:.2f}" for w in row.tolist()))
""")

code(r"""
E.render_head_maps(4, seed=0)
plt.show()
""")

code(r"""
profile_1 = E.offset_profile(E.cached_maps(1, seed=0)[0])[0]
profile_2 = E.offset_profile(E.cached_maps(2, seed=0)[0])
profile_4 = E.offset_profile(E.cached_maps(4, seed=0)[0])
# four heads: each puts almost all of its weight on one offset, and together they cover 1 to 4
assert sorted(profile_4.argmax(dim=1).tolist()) == [1, 2, 3, 4]
assert bool((profile_4.max(dim=1).values > 0.95).all())
# two heads: each covers two neighbouring offsets, about 2 : 1
top_two = profile_2.topk(2, dim=1)
assert sorted(top_two.indices.flatten().tolist()) == [1, 2, 3, 4]
assert bool((top_two.values.sum(dim=1) > 0.95).all())
assert bool((top_two.values[:, 0] / top_two.values[:, 1] > 1.8).all())
# eight heads: some heads duplicate others (fewer distinct offsets than heads)
assert len(set(E.offset_profile(E.cached_maps(8, seed=0)[0]).argmax(dim=1).tolist())) < 8
# one head: all four offsets share one unit of weight, offset 4 gets the least
assert torch.allclose(profile_1[1:], torch.tensor([0.13, 0.28, 0.53, 0.05], dtype=torch.float64), atol=0.006)
""")

md(r"""
The four-head model has separated the relations completely: each head puts more than 95 % of its
weight on a single offset, and the four heads cover the offsets 1 to 4 between them, the coloured
beams of the tutorial picture, found by training alone. The two-head model uses the loophole of
the hand-built example: each head covers two neighbouring offsets and splits its weight roughly
2 : 1 between them, so that the two tokens it returns stay distinguishable. The single head has to
share one unit of weight among all four offsets: 0.13, 0.28, 0.53 and 0.05 for the tokens 1, 2, 3
and 4 places back. With eight heads, several heads duplicate one another: spare heads do no harm
here, but they find nothing new to do.
""")

md(r"""
Pick a number of heads and a seed to see every head's map on the same held-out sequence (the
label `5:k` means position 5 holds symbol k; rows are queries, columns keys, and the causal mask
leaves the upper triangle empty).
""")

code(r"""
# NBVAL_IGNORE_OUTPUT
explorer(E.render_head_maps, {"num_heads": list(E.GRID_HEADS), "seed": list(E.GRID_SEEDS["mlp"])},
         title="Attention maps of trained models (k = 4 relations)",
         caption="Each head in its own colour; with 4 or more heads each relation gets a head of its own.",
         alt=E.head_maps_alt)
""")

# ---------------------------------------------------------------------------------------------
md(r"""
(ch01-why)=
## Why one head copes with two relations but not with four

The single head looks at positions, not at content, so its weights are nearly the same for every
sequence and its output at position $t$ is a fixed mixture

$$
\text{out}_t \approx a_1\, u(x_{t-1}) + a_2\, u(x_{t-2}) + \dots + a_k\, u(x_{t-k}) + c_t,
\qquad a_1 + \dots + a_k \approx 1,
$$

where $u(x)$ is the vector that symbol $x$ contributes (its value vector, projected by $W^O$) and
$c_t$ depends only on the position. The readout has to *unmix* this vector: find which symbol
sits at each offset.

- A **linear** readout cannot unmix. Its scores are linear in the mixture, so the symbol with the
  largest weight dominates them; it reads that symbol reliably and the others poorly. With one
  head and $k = 2$ it gets the first relation right almost always and the second one about a
  third of the time (cell below). A linear readout needs a head per relation.
- An **MLP** readout can unmix, as long as the mixture keeps the symbols apart. With $k = 2$ the
  head splits its weight unevenly; the $16^2 = 256$ ordered pairs then land on 256 separate points
  and the MLP reads both symbols on every seed. With $k = 4$ the one unit of weight is shared four
  ways, and an offset that receives little weight barely moves the output when its symbol changes:
  our single head gives the token 4 places back a weight of 0.05, and that is exactly the relation
  it reads worst.
- Equal weights are no escape. With $a_1 = \dots = a_k$ the mixture is symmetric, and symbols
  swapped between offsets give the same vector: the 50/50 case of "cat chases mouse" again. So the
  weights must be *unequal* to keep the order apart, and each must be *large* to keep its symbol
  readable. With a total of 1, these two demands clash more with every relation added.

That is the precise form of the tutorials' claim. One head *can* carry more than one relation,
but its relations share one softmax and one unit of weight. Splitting $d_{\text{model}}$ into $h$
heads gives $h$ independent units of weight, with no extra parameters.
""")

code(r"""
one_head = E.cached_run(1, seed=0)
print("one head, k = 4, MLP readout: accuracy per relation (1, 2, 3, 4 back):",
      [round(a, 2) for a in one_head["relation_accuracy"]])
print(f"    all four at once: held-out {one_head['accuracy']:.2f}, training set {one_head['train_accuracy']:.2f}")
linear_2 = E.cached_run(1, seed=0, num_relations=2, readout="linear")
print("one head, k = 2, linear readout: accuracy per relation (1, 2 back):",
      [round(a, 2) for a in linear_2["relation_accuracy"]])
""")

code(r"""
per_relation = one_head["relation_accuracy"]
assert min(range(4), key=per_relation.__getitem__) == int(profile_1[1:].argmin())  # least weight, worst read
assert per_relation[3] < 0.85 and min(per_relation[:3]) > 0.9
assert one_head["train_accuracy"] < 0.85  # not overfitting: it cannot fit the training set either
assert linear_2["relation_accuracy"][0] > 0.98 and 0.3 < linear_2["relation_accuracy"][1] < 0.4
assert all(E.cached_run(1, seed=s, num_relations=2)["accuracy"] == 1.0 for s in (0, 1, 2))
""")

md(r"""
## Summary

- A softmax head returns a convex combination of value vectors. When a query needs two tokens,
  an even split averages away which token said what; an uneven split keeps it, stored in the
  weights.
- On a task that needs $k$ tokens per position at once, one head copes with $k = 2$ (through
  uneven weights and an MLP readout that undoes the mixture), falls behind at $k = 4$ and
  collapses at $k = 6$. The heads needed grow with $k$; with a linear readout, $h \ge k$ heads
  always suffice and fewer rarely do.
- The comparison is fair: $d_k = d_{\text{model}} / h$ keeps the attention layer at
  $4 d_{\text{model}}^2 + 4 d_{\text{model}}$ parameters for every $h$. Splitting the same
  parameters into more heads buys more *independent softmaxes*, each free to look at its own
  token.
- Trained heads of this small model do separate the relations, one offset per head once there
  are enough heads. Whether heads of large models are as tidy is a separate question.

{ref}`Chapter 2 <ch02-multi-head-math>` writes the multi-head layer down exactly, equation by
equation.
""")

md(r"""
## Exercises

1. In the hand-built example the verb puts weight $s = 0.8$ on the first word. Predict its output
   in "cat chases mouse" and in "mouse chases cat", and the distance between the two. Check with
   `single_head.two_sentences(0.8)`.
2. Using the cached grid (`E.grid_summary("mlp")`), find the smallest number of heads whose mean
   accuracy on the $k = 3$ task reaches 0.99. Then do the same for the linear readout
   (`E.grid_summary("linear")`).
3. How many parameters does the attention layer of the $h = 8$ model have, and how many values does
   each of its heads' query vectors hold? Check with `mha.attention_params(32, 8)`.

```{admonition} Answers
:class: dropdown
1. $(0.8, 0.2)$ and $(0.2, 0.8)$; the distance is $0.6\sqrt{2} \approx 0.8485$.
2. Two heads with the MLP readout (one head reaches 0.95); four heads with the linear readout
   (two heads reach 0.94).
3. $4 \cdot 32^2 + 4 \cdot 32 = 4{,}224$, the same as for one head; each query holds
   $d_k = 32 / 8 = 4$ values.
```
""")

code(r"""
# the answers, checked
answer = single_head.two_sentences(0.8)
assert torch.allclose(answer["output"], torch.tensor([0.8, 0.2], dtype=torch.float64))
assert abs(answer["distance"] - 0.8485) < 1e-4
smallest = {readout: min(h for h in E.GRID_HEADS if E.grid_summary(readout)[(3, h)]["mean"] >= 0.99)
            for readout in ("mlp", "linear")}
assert smallest == {"mlp": 2, "linear": 4}
assert mha.attention_params(32, 8) == 4_224 and E.make_model(8, task).attention.head_dim == 4
""")


if __name__ == "__main__":
    SOURCE.write()
