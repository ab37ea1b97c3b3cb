"""Write the source of chapter 4 (book/04_parameter_analysis.ipynb), without outputs.

Usage:
    .venv/bin/python scripts/make_ch04.py
    .venv/bin/python scripts/execute_notebooks.py book/04_parameter_analysis.ipynb

Every number the prose states is asserted by a code cell; the computations live in ``mha``
(``mha.counting`` and ``mha.configs``).
"""
from __future__ import annotations

from pathlib import Path

from notebook_source import NotebookSource

SOURCE = NotebookSource(Path(__file__).resolve().parents[1] / "book" / "04_parameter_analysis.ipynb", "ch04")
md, code = SOURCE.md, SOURCE.code


# ---------------------------------------------------------------------------------------------
md(r"""
(ch04-parameter-analysis)=
# Parameters, FLOPs and the KV cache

Does cutting attention into $h$ heads make it more expensive? This chapter answers with three
budgets, each computed by a formula in `mha` and checked against real modules and real tensors:

1. **parameters**: how many numbers one attention layer learns;
2. **FLOPs**: how much arithmetic one forward pass over $n$ tokens takes;
3. **the KV cache**: how many bytes a model keeps while it generates text token by token.

The short answer: the heads cost nothing extra in parameters or FLOPs. The KV cache is the budget
that hurts at inference time, and it is the one that multi-query and grouped-query attention
(MQA, GQA) shrink. Along the way the chapter corrects four claims of its source tutorials, listed
together in {ref}`ch04-corrections`. Symbols are those of the {ref}`notation` page: $n$ tokens,
$b$ sequences, $L$ layers, $d_k = d_{\text{model}} / h$, $g$ key/value heads.
""")

code(r"""
import inspect

import matplotlib.pyplot as plt
import torch
from torch import nn

import mha
from mha import configs
from mha.widgets import explorer

mha.plotting.use_style()
device = mha.get_device()
count = configs.count_params  # sum(p.numel() for p in module.parameters())
""")

# ---------------------------------------------------------------------------------------------
md(r"""
## One layer: four matrices, cut into strips

Picture the four projections of a layer as four $d_{\text{model}} \times d_{\text{model}}$
squares. One head of full width uses them whole. With $h$ heads, $W^Q$, $W^K$ and $W^V$ are cut
into $h$ column strips, one $d_{\text{model}} \times d_k$ block per head, and $W^O$ into $h$ row
strips, the rows that multiply head $i$'s output in the concatenation. Cutting a square into
strips does not change its area:
""")

code(r"""
fig = configs.plot_projection_strips((1, 4))
plt.show()
""")

md(r"""
In symbols: head $i$ has $W_i^Q, W_i^K, W_i^V \in \mathbb{R}^{d_{\text{model}} \times d_k}$ with a
bias of $d_k$ each, and the output projection is $W^O \in \mathbb{R}^{h d_k \times d_{\text{model}}}$
with a bias of $d_{\text{model}}$. The layer has

$$
P = \underbrace{3\,h\,d_k\,d_{\text{model}}}_{W^Q,\ W^K,\ W^V}
  + \underbrace{h\,d_k\,d_{\text{model}}}_{W^O}
  + \underbrace{3\,h\,d_k + d_{\text{model}}}_{\text{biases}}
  = 4\,h\,d_k\,d_{\text{model}} + 3\,h\,d_k + d_{\text{model}}
$$

parameters, and with $d_k = d_{\text{model}} / h$ (so $h\,d_k = d_{\text{model}}$)

$$
P = 4\,d_{\text{model}}^2 + 4\,d_{\text{model}} ,
$$

in which $h$ no longer appears. `mha.attention_params` computes it; it also takes a number of
key/value heads $g$ (`num_kv_heads`), used in {ref}`ch04-mqa-gqa`, and equals the multi-head
count when $g = h$:
""")

code(r"""
print(inspect.getsource(mha.attention_params))
""")

md(r"""
PyTorch's own `nn.MultiheadAttention` with BERT-base's shape ($d_{\text{model}} = 768$, $h = 12$)
stores $W^Q, W^K, W^V$ stacked in one `in_proj_weight`. Its parameters, counted one tensor at a
time, are 2,362,368, and 2,359,296 without biases, the two values of the formula:
""")

code(r"""
lines = []
torch.manual_seed(0)
torch_mha = nn.MultiheadAttention(768, 12)
for name, p in torch_mha.named_parameters():
    lines.append(f"{name:18s} {str(tuple(p.shape)):12s} {p.numel():>10,}")
lines.append(f"{'total':31s} {count(torch_mha):>10,}")
lines.append(f"{'without biases':31s} {count(nn.MultiheadAttention(768, 12, bias=False)):>10,}")

assert count(torch_mha) == mha.attention_params(768, 12) == 4 * 768**2 + 4 * 768 == 2_362_368
assert count(nn.MultiheadAttention(768, 12, bias=False)) == mha.attention_params(768, 12, bias=False)
assert mha.attention_params(768, 12, bias=False) == 4 * 768**2 == 2_359_296
print("\n".join(lines))
""")

md(r"""
The course's own modules agree for any number of heads, and so does a single head of full width
(`mha.SingleHeadAttention(768)`, $d_k = 768$): multi-head attention has exactly the parameters of
one big head.
""")

code(r"""
lines = []
lines.append(f"{'h':>3} {'d_k':>4} {'mha.MultiHeadAttention':>23} {'looped':>10}")
for h in (1, 2, 4, 12, 24):
    batched, looped = mha.MultiHeadAttention(768, h), mha.LoopedMultiHeadAttention(768, h)
    lines.append(f"{h:>3} {768 // h:>4} {count(batched):>23,} {count(looped):>10,}")
    assert count(batched) == count(looped) == mha.attention_params(768, h) == 2_362_368
lines.append(f"one full-width head: {count(mha.SingleHeadAttention(768)):,}")
assert count(mha.SingleHeadAttention(768)) == 2_362_368
print("\n".join(lines))
""")

md(r"""
```{admonition} Correcting the source: "≈737K parameters, the same as a single head"
:class: warning
One source tutorial counts BERT-base's attention as $W^Q$, $W^K$, $W^V$ of **one** head
(768 × 64 = 49,152 each) plus the **whole** $W^O$ (768 × 768 = 589,824), about 737K, and calls it
"the same as single-head". That sum mixes one twelfth of the input projections with all of the
output projection, so it counts no real module. Each of the 12 heads has its own three
projections: 12 × 3 × 49,152 = 1,769,472 weights (the `in_proj_weight` above), plus 589,824 for
$W^O$, gives 2,359,296, and the 3,072 biases bring it to 2,362,368. The tutorial's conclusion,
that heads add no parameters, is right, with this number: one full-width head has 2,362,368 too.
```
""")

code(r"""
lines = []
one_head = mha.AttentionHead(768, 64, bias=False)  # W_Q, W_K, W_V of one head, 768 x 64 each
lines.append(f"source's sum:  3 x {count(one_head) // 3:,} + {768 * 768:,} = {configs.source_single_head_count(768, 12):,}")
lines.append(f"real count:   12 x {count(one_head):,} + {768 * 768:,} = {12 * count(one_head) + 768 * 768:,}")
assert count(one_head) == 3 * 49_152 and configs.source_single_head_count(768, 12) == 737_280
assert 12 * count(one_head) == torch_mha.in_proj_weight.numel() == 1_769_472
assert 12 * count(one_head) + 589_824 == 2_359_296 and 2_359_296 + 3_072 == count(torch_mha)
print("\n".join(lines))
""")

md(r"""
### Two readings of "more heads, more parameters"

Another source says both that the count "grows linearly with the number of heads" and that it is
$4 d_{\text{model}}^2$, independent of $h$. Both are true, under different assumptions:

- **$d_k = d_{\text{model}} / h$** (every model in this chapter): adding heads makes them
  narrower, $h\,d_k = d_{\text{model}}$ stays fixed, and so does $P$.
- **$d_k$ fixed** (say 64) while $d_{\text{model}}$ stays: the concatenation is $h\,d_k$ wide
  and grows with $h$, and so does $P = 4\,h\,d_k\,d_{\text{model}} + 3\,h\,d_k + d_{\text{model}}$,
  by $4 \cdot 64 \cdot 768 = 196{,}608$ weights per head added at $d_{\text{model}} = 768$.

`configs.params_fixed_head_dim` is the second formula; here it is checked against modules built
from $h$ `mha.AttentionHead(768, 64)` and an `nn.Linear(h·64, 768)` as $W^O$. The two readings meet
at $h = 12$, where $12 \cdot 64 = 768$:
""")

code(r"""
lines = []
heads_list = [1, 2, 4, 8, 12, 16]
lines.append(f"{'h':>3} {'d_k = 768/h':>12} {'d_k = 64':>11}")
for h in heads_list:
    with torch.device("meta"):  # shapes only: the meta device allocates no memory
        heads = nn.ModuleList(mha.AttentionHead(768, 64) for _ in range(h))
        out_proj = nn.Linear(h * 64, 768)
    fixed = configs.params_fixed_head_dim(768, h, 64)
    assert count(heads) + count(out_proj) == fixed
    lines.append(f"{h:>3} {mha.attention_params(768, h):>12,} {fixed:>11,}")
assert configs.params_fixed_head_dim(768, 12, 64) == mha.attention_params(768, 12)
assert configs.params_fixed_head_dim(768, 5, 64, bias=False) - configs.params_fixed_head_dim(768, 4, 64, bias=False) == 196_608
print("\n".join(lines))
fig = configs.plot_params_vs_heads(768, heads_list, mark=12)
plt.show()
""")

# ---------------------------------------------------------------------------------------------
md(r"""
## Real models

BERT {cite}`devlin2019bert` and GPT-2 {cite}`radford2019language` are built from the same
attention layer at different sizes. `configs.CLASSIC_CONFIGS` holds their published shapes. For
each, the cell below builds a real `nn.MultiheadAttention(d_model, h)` and an
`mha.MultiHeadAttention(d_model, h)` (GPT-2 XL's, 1600 wide, is the largest at 10,246,400
parameters) and checks their counts against `mha.attention_params` before the table uses it.
""")

code(r"""
torch.manual_seed(0)
for cfg in configs.CLASSIC_CONFIGS:
    expected = mha.attention_params(cfg.d_model, cfg.num_heads)
    assert count(nn.MultiheadAttention(cfg.d_model, cfg.num_heads)) == expected
    assert count(mha.MultiHeadAttention(cfg.d_model, cfg.num_heads)) == expected
assert mha.attention_params(1600, 25) == 10_246_400

rows = configs.param_table(configs.CLASSIC_CONFIGS)
print(configs.format_table(rows, {
    "model": ("model", "s"), "d_model": ("d_model", "d"), "heads": ("h", "d"), "head_dim": ("d_k", "d"),
    "layers": ("L", "d"), "attn_per_layer": ("attention/layer", ","), "attn_stack": ("attention, L layers", ","),
    "total": ("all parameters", ","), "attn_share": ("attention share", ".1%"),
}))
""")

md(r"""
Every one of these models has $d_k = 64$: the "head_dim = 64" rule of thumb the sources quote
($h = d_{\text{model}} / 64$, inherited from the original Transformer's $512 / 8$
{cite}`vaswani2017attention`). It is a habit, not a law: Llama 2, below, uses $d_k = 128$.
""")

code(r"""
assert all(cfg.head_dim == 64 and cfg.d_model == 64 * cfg.num_heads for cfg in configs.CLASSIC_CONFIGS)
assert all(cfg.head_dim == 128 for cfg in configs.LLAMA2_CONFIGS)
""")

md(r"""
### Counting the whole model

The "all parameters" column is computed, not copied. With vocabulary $V$, $P$ learned positions
and an MLP of width $4 d_{\text{model}}$ (both families), a block has
$4d^2 + 4d$ (attention) $+\ 8d^2 + 5d$ (two linear layers with biases) $+\ 4d$ (two LayerNorms)
$= 12 d^2 + 13 d$ parameters, writing $d$ for $d_{\text{model}}$, and

$$
\begin{aligned}
P_{\text{GPT-2}} &= (V + P)\,d + L\,(12 d^2 + 13 d) + 2d
  &&\text{(output layer tied to the token embedding; final LayerNorm)},\\
P_{\text{BERT}} &= (V + P + 2)\,d + 2d + L\,(12 d^2 + 13 d) + d^2 + d
  &&\text{(two token types, embedding LayerNorm, pooler)}.
\end{aligned}
$$

`configs.total_params` implements this. It is checked two ways, with no tolerance: against a
skeleton of PyTorch's own modules with the same shapes (`nn.Embedding`,
`nn.TransformerEncoderLayer`, `nn.LayerNorm`, `nn.Linear`, built on the meta device), and against
the exact parameter count of each released checkpoint (for example 124,439,808 for GPT-2 small).
The papers round: BERT's 110M and 340M are within 2 %, while the GPT-2 paper's 117M, 345M, 762M
and 1542M are all below the released models; OpenAI's repository later renamed them 124M, 355M,
774M and 1558M.
""")

code(r"""
lines = []
lines.append(f"{'model':13s} {'formula':>14s} {'torch skeleton':>15s} {'released':>14s} {'paper':>6s}")
for cfg in configs.CLASSIC_CONFIGS:
    formula, skeleton = configs.total_params(cfg), count(configs.build_skeleton(cfg))
    assert formula == skeleton == cfg.published_params
    lines.append(f"{cfg.name:13s} {formula:>14,} {skeleton:>15,} {cfg.published_params:>14,} {cfg.paper_params:>6s}")

millions = {cfg.name: configs.total_params(cfg) / 1e6 for cfg in configs.CLASSIC_CONFIGS}
assert configs.total_params(configs.config("GPT-2 small")) == 124_439_808
assert abs(millions["BERT-base"] / 110 - 1) < 0.02 and abs(millions["BERT-large"] / 340 - 1) < 0.02
assert all(millions[name] > paper for name, paper in
           [("GPT-2 small", 117), ("GPT-2 medium", 345), ("GPT-2 large", 762), ("GPT-2 XL", 1542)])
assert [round(millions[n]) for n in ("GPT-2 small", "GPT-2 medium", "GPT-2 large", "GPT-2 XL")] == [124, 355, 774, 1558]
print("\n".join(lines))
""")

md(r"""
Inside a block, attention is $4d^2$ of $12d^2$ weights, one third. Of the whole model it is less,
because the embeddings take their share: 22.8 % of GPT-2 small, rising to 31.6 % of GPT-2 XL,
where the $L \cdot 12 d^2$ of the blocks dwarf the $(V + P)\,d$ of the embeddings.
""")

code(r"""
share = {r["model"]: r["attn_share"] for r in rows}
assert round(100 * share["GPT-2 small"], 1) == 22.8 and round(100 * share["GPT-2 XL"], 1) == 31.6
gpt2_shares = [share[n] for n in ("GPT-2 small", "GPT-2 medium", "GPT-2 large", "GPT-2 XL")]
assert gpt2_shares == sorted(gpt2_shares) and gpt2_shares[-1] < 1 / 3
assert all(configs.layer_params(c) == 12 * c.d_model**2 + 13 * c.d_model for c in configs.CLASSIC_CONFIGS)
assert round(100 * min(share.values())) == 23 and round(100 * max(share.values())) == 32  # the summary's range
""")

# ---------------------------------------------------------------------------------------------
md(r"""
## FLOPs: projections against attention

Counting each multiply-add as 2 FLOPs, the matrix products of self-attention over $n$ tokens are

| step | product | FLOPs |
| --- | --- | --- |
| $Q, K, V$ projections | three $(n \times d_{\text{model}})(d_{\text{model}} \times d_{\text{model}})$ | $6\,n\,d_{\text{model}}^2$ |
| scores $Q_i K_i^\top$, all heads | $h$ times $(n \times d_k)(d_k \times n)$ | $2\,n^2\,h\,d_k = 2\,n^2 d_{\text{model}}$ |
| weighted sums $A_i V_i$, all heads | $h$ times $(n \times n)(n \times d_k)$ | $2\,n^2 d_{\text{model}}$ |
| output projection | $(n \times d_{\text{model}})(d_{\text{model}} \times d_{\text{model}})$ | $2\,n\,d_{\text{model}}^2$ |

so

$$
F(n) = \underbrace{8\,n\,d_{\text{model}}^2}_{\text{projections}} + \underbrace{4\,n^2 d_{\text{model}}}_{\text{attention}} .
$$

Again $h$ appears only inside $h\,d_k = d_{\text{model}}$: **splitting into heads does not change
the FLOPs.** The projections grow linearly in $n$ and the attention quadratically; they are equal
when $8\,n\,d_{\text{model}}^2 = 4\,n^2 d_{\text{model}}$, that is at

$$
n^* = 2\,d_{\text{model}} .
$$

`mha.attention_flops_breakdown` gives each step (biases, scaling and softmax are left out; they
cost $O(n\,d_{\text{model}})$ and $O(h\,n^2)$). For GPT-2 small at its full context of 1,024 tokens:
""")

code(r"""
lines = []
parts = mha.attention_flops_breakdown(1024, 768, 12)
for step, flops in parts.items():
    lines.append(f"{step:13s} {flops:>15,}")
split = configs.flops_split(1024, 768, 12)
assert split["projections"] == 8 * 1024 * 768**2 and split["attention"] == 4 * 1024**2 * 768
assert parts["total"] == split["projections"] + split["attention"] == mha.attention_flops(1024, 768, 12)
print("\n".join(lines))
""")

md(r"""
To check the formula against the arithmetic a forward pass really does, PyTorch's
`torch.utils.flop_counter.FlopCounterMode` counts every matrix product while a module runs
(`configs.count_forward_flops` wraps it). With $d_{\text{model}} = 64$ and $n = 32$ tokens, the
count is the same, 1,310,720 FLOPs, for one full-width head, for the batched and the looped
multi-head modules with 1, 2, 4 or 8 heads, and for `nn.MultiheadAttention`. This also corrects a
side remark of a source, that multi-head attention costs "slightly more FLOPs than a single head
because of the extra projections": there are no extra projections, only the same ones cut into
strips. (Whether $h$ small products run as fast as one large one is a question of hardware, not of
FLOPs.)
""")

code(r"""
lines = []
gen = torch.Generator().manual_seed(0)
x = torch.randn(1, 32, 64, generator=gen).to(device)
formula = mha.attention_flops(32, 64, 1)
torch.manual_seed(0)
counts = {"one full-width head": configs.count_forward_flops(mha.SingleHeadAttention(64).to(device), x)}
for h in (1, 2, 4, 8):
    counts[f"batched, h = {h}"] = configs.count_forward_flops(mha.MultiHeadAttention(64, h).to(device).eval(), x)
    counts[f"looped, h = {h}"] = configs.count_forward_flops(mha.LoopedMultiHeadAttention(64, h).to(device), x)
    torch_module = nn.MultiheadAttention(64, h, batch_first=True).to(device).eval()
    counts[f"nn.MultiheadAttention, h = {h}"] = configs.count_forward_flops(torch_module, x, x, x, need_weights=True)
for name, flops in counts.items():
    lines.append(f"{name:28s} {flops:>10,}")
assert set(counts.values()) == {formula} and formula == 8 * 32 * 64**2 + 4 * 32**2 * 64 == 1_310_720
print("\n".join(lines))
""")

md(r"""
Where does the attention itself start to dominate? At $n^* = 2 d_{\text{model}}$: 1,536 tokens for
GPT-2 small, so at its 1,024-token context the projections still cost more (1.5 times the
attention). For Llama 2 7B ($d_{\text{model}} = 4096$) the crossover is at 8,192 tokens, twice its
4,096-token context. With grouped-query attention the $K$ and $V$ projections shrink and the
crossover moves earlier, to $n^* = d_{\text{model}} + g\,d_k$ (`configs.crossover_seq_len`).
""")

code(r"""
assert configs.crossover_seq_len(768, 12) == 2 * 768 == 1536
at = configs.flops_split(1536, 768, 12)
assert at["projections"] == at["attention"]
assert split["projections"] / split["attention"] == 1.5  # GPT-2 small at n = 1024
assert configs.crossover_seq_len(4096, 32) == 8192 == 2 * 4096
assert configs.crossover_seq_len(8192, 64, 8) == 8192 + 8 * 128
fig = configs.plot_flops_vs_seq_len(768, 12, [2**k for k in range(5, 15)], mark=1024)
plt.show()
""")

md(r"""
FLOPs are not time: the $n \times n$ weights of every head must also be written to and read from
memory, which is what fused kernels such as FlashAttention {cite}`dao2022flashattention` avoid
(chapter 6).
""")

# ---------------------------------------------------------------------------------------------
md(r"""
(ch04-kv-cache)=
## The KV cache

A model that generates text produces one token at a time. Token $t$'s query must meet the keys
and values of all $t - 1$ earlier tokens, in every layer. Recomputing them at each step would
repeat almost all the work, so they are kept: per layer, a key tensor and a value tensor of shape
$(b, g, n, d_k)$, where $g$ is the number of key/value heads ($g = h$ for multi-head attention).
With $s$ bytes per element (4 for fp32, 2 for fp16 or bf16, 1 for 8-bit formats),

$$
\text{KV-cache bytes} = 2 \cdot b \cdot n \cdot L \cdot g \cdot d_k \cdot s .
$$
""")

code(r"""
print(inspect.getsource(mha.kv_cache_bytes))
""")

md(r"""
`mha.KVCache` is the cache that `GroupedQueryAttention.new_cache` allocates and `decode_step`
fills. The cell below measures it: a toy stack of $L = 4$ layers ($d_{\text{model}} = 64$, $h = 8$,
$g = 2$, so $d_k = 8$) decodes 16 tokens for a batch of $b = 2$, one token per step, and after
every step the bytes of the filled part of the caches are compared with the formula (the toy
stack has no MLPs or residuals; only the caches matter here). They are equal, to the byte.
""")

code(r"""
batch_size, d_model, num_heads, num_kv_heads, num_layers, max_len = 2, 64, 8, 2, 4, 16
head_dim = d_model // num_heads
torch.manual_seed(0)
layers = [mha.GroupedQueryAttention(d_model, num_heads, num_kv_heads).to(device).eval() for _ in range(num_layers)]
caches = [layer.new_cache(batch_size, max_len) for layer in layers]
lines = [f"one layer's keys: {tuple(caches[0].keys.shape)} {caches[0].keys.dtype}"]
allocated = sum(cache.nbytes for cache in caches)
assert allocated == mha.kv_cache_bytes(batch_size, max_len, num_layers, num_kv_heads, head_dim, 4) == 16_384

gen = torch.Generator().manual_seed(1)
tokens = torch.randn(batch_size, max_len, d_model, generator=gen).to(device)
lines.append(f"{'tokens':>6} {'filled bytes':>13} {'formula':>8}")
with torch.no_grad():
    for t in range(max_len):
        h = tokens[:, t:t + 1]  # (B, 1, D): the newest token
        for layer, cache in zip(layers, caches):
            h, _ = layer.decode_step(h, cache)
        filled = sum(c.keys[:, :, :c.length].nbytes + c.values[:, :, :c.length].nbytes for c in caches)
        formula = mha.kv_cache_bytes(batch_size, t + 1, num_layers, num_kv_heads, head_dim, 4)
        assert filled == formula
        if t + 1 in (1, 2, 4, 8, 16):
            lines.append(f"{t + 1:>6} {filled:>13,} {formula:>8,}")
print("\n".join(lines))
""")

md(r"""
The element size enters as a factor: the same cache in fp16, bf16 or an 8-bit float format
(`torch.float8_e4m3fn`) takes exactly a half or a quarter of the fp32 bytes.
""")

code(r"""
lines = []
for dtype, name in [(torch.float32, "fp32"), (torch.float16, "fp16"), (torch.bfloat16, "bf16"), (torch.float8_e4m3fn, "8-bit")]:
    cache = mha.KVCache(batch_size, max_len, num_kv_heads, head_dim, dtype=dtype, device=device)
    formula = mha.kv_cache_bytes(batch_size, max_len, 1, num_kv_heads, head_dim, configs.BYTES_PER_ELEMENT[name])
    lines.append(f"{name:5s} {cache.nbytes:>6,} bytes per layer")
    assert cache.nbytes == formula
print("\n".join(lines))
""")

md(r"""
```{admonition} Correcting the source: "the KV cache takes $2\,b\,d_{\text{model}}\,L$"
:class: warning
One source gives the cache size of multi-head attention as $2\,b\,d_{\text{model}}\,L$ with $b$ the
batch size and $L$ the sequence length. That is a count of **elements**, for **one layer**, of a
**multi-head** model ($g\,d_k = d_{\text{model}}$). Bytes need the element size $s$ and the number
of layers; with MQA or GQA it shrinks by $h$ or $h / g$. For Llama 2 7B at 4,096 tokens it gives
$2 \cdot 1 \cdot 4096 \cdot 4096 = 33{,}554{,}432$ elements per layer; times 32 layers and 2 bytes,
that is 2 GiB, what `mha.kv_cache_bytes` gives directly.
```
""")

code(r"""
per_layer_elements = configs.source_cache_elements(1, 4096, 4096)
assert per_layer_elements == 33_554_432
assert per_layer_elements * 32 * 2 == mha.kv_cache_bytes(1, 4096, 32, 32, 128, 2) == 2 * configs.GIB
assert per_layer_elements // (32 // 8) == 2 * 1 * 4096 * 8 * 128  # with g = 8 of h = 32: divided by h/g
""")

md(r"""
### Real models: Llama 2 7B and 70B

Llama 2 (Touvron et al., 2023) comes in a 7B model with multi-head attention ($L = 32$, $h = g = 32$,
$d_k = 128$) and a 70B model with grouped-query attention ($L = 80$, $h = 64$, $g = 8$, $d_k = 128$);
neither has attention biases. Their total parameter counts, computed the same way as above (a
SwiGLU MLP of three bias-free matrices, RMSNorm, an untied output layer), match the released
checkpoints exactly:
""")

code(r"""
lines = []
for cfg in configs.LLAMA2_CONFIGS:
    formula, skeleton = configs.total_params(cfg), count(configs.build_skeleton(cfg))
    assert formula == skeleton == cfg.published_params
    per_token = configs.cache_bytes_per_token(cfg)
    lines.append(f"{cfg.name:12s} parameters {formula:>14,}   KV cache per token (fp16) {configs.format_bytes(per_token)}")
assert configs.cache_bytes_per_token(configs.config("Llama-2-7B")) == 512 * 2**10
assert configs.cache_bytes_per_token(configs.config("Llama-2-70B")) == 320 * 2**10
print("\n".join(lines))
""")

md(r"""
Sizes are in binary units (1 GiB = $2^{30}$ bytes). At 32k tokens the 7B model needs 16 GiB of
cache in fp16, more than its own weights, while the 70B model, ten times larger, needs 10 GiB,
because 8 key/value heads serve its 64 query heads. With multi-head attention the 70B model would
need 8 times more, 80 GiB. An 8-bit cache halves every figure.
""")

code(r"""
kv_rows = configs.kv_cache_table(configs.LLAMA2_CONFIGS, seq_lens=(4096, 32768), precisions=("fp16", "8-bit"))
print(configs.format_table(kv_rows, {
    "model": ("model", "s"), "kv_heads": ("g", "d"), "seq_len": ("context n", ","),
    "precision": ("precision", "s"), "bytes": ("KV cache", configs.format_bytes),
}))
size = {(r["model"], r["seq_len"], r["precision"]): r["bytes"] for r in kv_rows}
assert size["Llama-2-7B", 32768, "fp16"] == 16 * configs.GIB and size["Llama-2-70B", 32768, "fp16"] == 10 * configs.GIB
assert size["Llama-2-7B", 32768, "fp16"] > 2 * configs.total_params(configs.config("Llama-2-7B"))  # > fp16 weights
assert mha.kv_cache_bytes(1, 32768, 80, 64, 128, 2) == 8 * size["Llama-2-70B", 32768, "fp16"] == 80 * configs.GIB
assert all(size[m, n, "8-bit"] * 2 == size[m, n, "fp16"] for m, n, _ in size)
assert round(configs.total_params(configs.config("Llama-2-70B")) / configs.total_params(configs.config("Llama-2-7B"))) == 10
""")

# ---------------------------------------------------------------------------------------------
md(r"""
(ch04-mqa-gqa)=
## MQA and GQA: fewer key/value heads

Multi-query attention {cite}`shazeer2019fast` keeps $h$ query heads but a single key/value head;
grouped-query attention {cite}`ainslie2023gqa` keeps $g$ of them, each shared by $h / g$ query
heads. $W^K$ and $W^V$ shrink to $d_{\text{model}} \times g\,d_k$; $W^Q$ and $W^O$ do not change.
Without biases:

| | $W^Q$ | $W^K$, $W^V$ | $W^O$ | parameters | cache elements per token and layer |
| --- | --- | --- | --- | --- | --- |
| MHA ($g = h$) | $h d_k d_{\text{model}}$ | $2 h d_k d_{\text{model}}$ | $h d_k d_{\text{model}}$ | $4 h\, d_k d_{\text{model}}$ | $2 h d_k$ |
| GQA | $h d_k d_{\text{model}}$ | $2 g d_k d_{\text{model}}$ | $h d_k d_{\text{model}}$ | $(2h + 2g)\, d_k d_{\text{model}}$ | $2 g d_k$ |
| MQA ($g = 1$) | $h d_k d_{\text{model}}$ | $2 d_k d_{\text{model}}$ | $h d_k d_{\text{model}}$ | $(2h + 2)\, d_k d_{\text{model}}$ | $2 d_k$ |

```{admonition} Correcting the source: MQA and GQA without $W^O$
:class: warning
A source's comparison table gives $4 h d_k d_{\text{model}}$ for MHA (with $W^O$) but
$h d_k d_{\text{model}} + 2 d_k d_{\text{model}}$ for MQA and $(h + 2g) d_k d_{\text{model}}$ for
GQA: these leave out $W^O$, $h\,d_k\,d_{\text{model}} = d_{\text{model}}^2$ parameters, so the
three rows cannot be compared. MQA and GQA keep the output projection; the consistent counts are
the ones in the table above.
```

The check, for Llama 2 70B's layer shape ($d_{\text{model}} = 8192$, $h = 64$) built as
`mha.GroupedQueryAttention(8192, 64, g, bias=False)` on the meta device, and for small modules
built for real:
""")

code(r"""
lines = []
lines.append(f"{'g':>3} {'module':>13} {'(2h+2g)·d_k·d':>14} {'source table':>13} {'missing':>11}")
for g in (1, 8, 64):
    with torch.device("meta"):
        module = mha.GroupedQueryAttention(8192, 64, g, bias=False)
    formula = (2 * 64 + 2 * g) * 128 * 8192
    source = configs.source_kv_params(8192, 64, g)
    assert count(module) == mha.attention_params(8192, 64, g, bias=False) == formula
    assert formula - source == 8192**2
    lines.append(f"{g:>3} {count(module):>13,} {formula:>14,} {source:>13,} {formula - source:>11,}")
assert mha.attention_params(8192, 64, 8, bias=False) == 150_994_944
for g in (1, 2, 4, 8):
    module = mha.GroupedQueryAttention(64, 8, g, bias=False).to(device)
    assert count(module) == (2 * 8 + 2 * g) * 8 * 64 == mha.attention_params(64, 8, g, bias=False)
print("\n".join(lines))
""")

md(r"""
Sweeping $g$ from MQA ($g = 1$) to MHA ($g = h = 64$) for the 70B shape at 32k tokens in fp16: the
cache grows linearly in $g$, from 1.25 GiB to 80 GiB, while the attention parameters move much
less, from 50.8 % of the MHA count at $g = 1$ to 100 % ($130/256$ to $256/256$). Llama 2 70B's
$g = 8$ keeps 56.25 % of the parameters and one eighth of the cache. The price is quality:
{cite}`ainslie2023gqa` find that GQA with a few groups comes close to MHA, and MQA a little further;
{cite}`pope2022efficiently` explain why the cache, read in full at every decoding step, dominates
the cost of generation.
""")

code(r"""
sweep = configs.gqa_sweep(8192, 64, num_layers=80, seq_len=32768, bytes_per_element=2)
mha_row, mqa_row = sweep[-1], sweep[0]
assert mqa_row["cache_bytes"] * 64 == mha_row["cache_bytes"] == 80 * configs.GIB
assert mqa_row["cache_bytes"] == 5 * configs.GIB // 4
assert mqa_row["params_per_layer"] / mha_row["params_per_layer"] == 130 / 256 and round(130 / 256, 3) == 0.508
g8 = next(r for r in sweep if r["kv_heads"] == 8)
assert g8["params_per_layer"] / mha_row["params_per_layer"] == 0.5625 and g8["cache_bytes"] * 8 == mha_row["cache_bytes"]
fig = configs.plot_gqa_sweep(sweep, title="Llama 2 70B shape (d_model 8192, h 64, 80 layers), 32k tokens, fp16")
plt.show()
""")

# ---------------------------------------------------------------------------------------------
md(r"""
## A calculator

`configs.calculator` puts the three budgets together for one setting; the explorers below are
drawn from it and from `configs.kv_explorer_values`, which the unit tests check. For Llama 2 70B's
shape with a batch of 4 at 4,096 tokens in fp16:
""")

code(r"""
lines = []
c = configs.calculator(d_model=8192, num_heads=64, num_kv_heads=8, num_layers=80, seq_len=4096,
                       batch_size=4, bytes_per_element=2)
for key, value in c.items():
    lines.append(f"{key:18s} {configs.format_bytes(value) if 'bytes' in key else f'{value:,.0f}'}")
assert c["cache_bytes"] == 4 * size["Llama-2-70B", 4096, "fp16"] and c["cache_bytes_mha"] == 8 * c["cache_bytes"]
assert c["params_stack"] == 80 * 150_994_944
print("\n".join(lines))
""")

md(r"""
The first explorer varies $d_{\text{model}}$, $h$ and $n$: the parameter curve for
$d_k = d_{\text{model}} / h$ stays flat whatever $h$, and the black dots show the projection and
attention FLOPs at the chosen $n$. The second varies $g$, $L$, $b$ and the element size for a model
with $h = 32$ heads of width 128, and shows how long a context fits in a 24 GiB cache budget.
""")

code(r"""
# NBVAL_IGNORE_OUTPUT
explorer(configs.render_cost, configs.COST_CONTROLS, title="Parameters and FLOPs of one attention layer",
         caption="Left: parameters against h, flat when d_k = d_model / h. Right: FLOPs against n.",
         alt=configs.cost_alt)
""")

code(r"""
# NBVAL_IGNORE_OUTPUT
explorer(configs.render_kv, configs.KV_CONTROLS, title="KV cache against context length",
         caption="h = 32 query heads of width 128; g key/value heads; the dashed line is a 24 GiB budget.",
         alt=configs.kv_alt)
""")

# ---------------------------------------------------------------------------------------------
md(r"""
(ch04-corrections)=
## What the sources got wrong, and why it matters

1. **"≈737K parameters, the same as a single head"** for BERT-base. The sum takes one head's
   $W^Q, W^K, W^V$ and the whole $W^O$. The real layer has 2,362,368 parameters (2,359,296
   without biases), as `nn.MultiheadAttention(768, 12)` shows; one full-width head has the same
   number, so the conclusion holds with the right count.
2. **MQA and GQA parameter formulas without $W^O$.** MQA and GQA still project the concatenated
   heads back with $W^O$; leaving it out of two rows of a three-row table understates them by
   $d_{\text{model}}^2$ each and makes the comparison meaningless. Consistent counts:
   $4 h d_k d_{\text{model}}$, $(2h + 2) d_k d_{\text{model}}$, $(2h + 2g) d_k d_{\text{model}}$.
3. **"Parameters grow linearly with the number of heads" next to "$4 d_{\text{model}}^2$,
   independent of $h$".** Linear growth holds when $d_k$ is fixed; independence holds when
   $d_k = d_{\text{model}} / h$, the convention of every model here. A statement about cost has
   to say which is held fixed.
4. **"The KV cache is $2\,b\,d_{\text{model}}\,L$".** That counts elements of one layer of a
   multi-head model. Memory is bytes for all layers: $2 \cdot b \cdot n \cdot L \cdot g \cdot d_k \cdot s$;
   forgetting the 32 layers and the 2 bytes of Llama 2 7B understates its cache 64 times.

## Summary

- One attention layer has $4 h d_k d_{\text{model}} + 3 h d_k + d_{\text{model}}$ parameters,
  $4 d_{\text{model}}^2 + 4 d_{\text{model}}$ when $d_k = d_{\text{model}} / h$: heads cut the
  projections into strips and add nothing.
- Its forward pass costs $8 n d_{\text{model}}^2 + 4 n^2 d_{\text{model}}$ FLOPs, whatever $h$;
  the quadratic attention term overtakes the projections at $n^* = 2 d_{\text{model}}$.
- In BERT and GPT-2, attention is a third of each block and 23 to 32 % of the model.
- The KV cache takes $2 b n L g d_k s$ bytes. MQA and GQA shrink it by $h$ and $h / g$ at a modest
  cost in parameters, which is why large models such as Llama 2 70B use them.

## Exercises

1. A 24 GB card (24 GiB) is reserved for the KV cache alone. What is the longest context, batch
   1, for Llama 2 7B in fp16? In 8-bit?
2. Same budget, Llama 2 70B in fp16. Compare with the 7B model: ten times the parameters, and how
   much context?
3. A model shaped like Llama 2 7B ($L = 32$, $h = 32$, $d_k = 128$) must serve a batch of 8 at
   32k tokens in fp16 within the same 24 GiB. What is the largest number of key/value heads $g$
   (a divisor of 32) that fits?

````{admonition} Answers
:class: dropdown
1. `configs.max_context(24 * configs.GIB, 32, 32, 128, 2)` = 49,152 tokens (512 KiB per token);
   in 8-bit, 98,304.
2. 78,643 tokens (320 KiB per token): 1.6 times the context of the 7B model with ten times its
   parameters, thanks to $g = 8$.
3. Each key/value head costs $2 \cdot 8 \cdot 32768 \cdot 32 \cdot 128 \cdot 2$ bytes = 4 GiB, so
   $g \le 6$ and the largest divisor of 32 is $g = 4$ (16 GiB); $g = 8$ would need 32 GiB.
````
""")

code(r"""
budget = 24 * configs.GIB
assert configs.max_context(budget, 32, 32, 128, 2) == 49_152 and configs.max_context(budget, 32, 32, 128, 1) == 98_304
assert configs.max_context(budget, 80, 8, 128, 2) == 78_643 and round(78_643 / 49_152, 1) == 1.6
per_kv_head = mha.kv_cache_bytes(8, 32768, 32, 1, 128, 2)
assert per_kv_head == 4 * configs.GIB
assert max(g for g in configs.divisors(32) if g * per_kv_head <= budget) == 4
assert mha.kv_cache_bytes(8, 32768, 32, 8, 128, 2) == 32 * configs.GIB
""", tags=["hide-input"])

if __name__ == "__main__":
    SOURCE.write()
