"""Write the source of chapter 6 (book/06_making_it_fast.ipynb), without outputs.

Usage:
    .venv/bin/python -m benchmarks.bench_attention        # (by hand) refresh benchmarks/results/cpu.json
    .venv/bin/python scripts/make_ch06.py
    .venv/bin/python scripts/execute_notebooks.py book/06_making_it_fast.ipynb

No timing happens in the notebook: every time it shows comes from the stored benchmark file
(``benchmarks/results/cpu.json``, plus ``cuda.json`` when present), whose structure the notebook
checks and whose ratios the prose relies on are asserted. Byte counts that are exact (saved
activations, KV-cache sizes) are computed live and compared with the file and the formulas.
"""
from __future__ import annotations

from pathlib import Path

from notebook_source import NotebookSource

SOURCE = NotebookSource(Path(__file__).resolve().parents[1] / "book" / "06_making_it_fast.ipynb", "ch06")
md, code = SOURCE.md, SOURCE.code


# ---------------------------------------------------------------------------------------------
md(r"""
(ch06-making-it-fast)=
# Making multi-head attention fast

Every implementation in this course computes the same function; {ref}`ch02-multi-head-math`
proved that the looped and the batched module agree to rounding. So why does
`torch.nn.MultiheadAttention` take a `need_weights` flag, why do production models cache keys
and values, and why did the tutorials this course started from say that heads "suit parallel
hardware" and that long sequences hit a "memory bandwidth bottleneck"?

This chapter answers with measurements. A benchmark script runs every implementation side by
side, in one process, on the same inputs, and stores its results in the repository; the chapter
reads that file. Four ideas make attention fast:

1. **one batched matrix product** for all heads instead of a Python loop over them;
2. **one fused projection** for $Q$, $K$ and $V$ instead of three;
3. **never storing the $n \times n$ weights**: a fused attention kernel (Flash attention) when
   nobody asks for them (`need_weights=False`);
4. **a KV cache** when generating text, made smaller by grouped-query and multi-query attention.

Timings depend on the machine and on what else runs on it, so no cell of this chapter times
anything: the numbers come from the stored file, and the prose only claims what a cell asserts
from it. Byte counts do not depend on the machine; those are computed here, live, and compared
with the file and with formulas.
""")

code(r"""
import inspect
from functools import partial
from pathlib import Path

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

import mha
from mha import perf
from mha.widgets import explorer

mha.plotting.use_style()
device = mha.get_device()
RESULTS = Path("..") / "benchmarks" / "results"
""")

# ---------------------------------------------------------------------------------------------
md(r"""
(ch06-benchmark)=
## The stored benchmark

`python -m benchmarks.bench_attention` (or `make bench`) compares seven implementations with
the shape of BERT-base's attention: batch $b = 8$, $d_{\text{model}} = 768$, $h = 12$ heads,
$n$ = 128, 256 and 512 tokens on the CPU (up to 1024 on a GPU), forward alone and forward plus
backward, in fp32 (and bf16 on a GPU). It uses `torch.utils.benchmark` with a warm-up and at
least five samples per measurement, and records the median and the spread. The file also
records the device, the torch version, the number of threads and the machine's load, because a
busy machine inflates every timing.

`perf.load_results` reads the file and checks that each report has the fields this chapter uses:
""")

code(r"""
reports = perf.load_results(RESULTS / "cpu.json")
cpu = reports[0]
env = cpu["environment"]
assert env["device"] == "cpu" and env["dtype"] == "float32"
assert (cpu["batch_size"], cpu["d_model"], cpu["num_heads"]) == (8, 768, 12)
assert perf.seq_lens(cpu) == [128, 256, 512] and perf.seq_lens(cpu, "memory") == [128, 256, 512, 1024]
assert all(row["forward_backward"]["repeats"] >= 5 for row in cpu["timings"])
print(sorted(env))
print("implementations:", *perf.IMPLS, sep="\n  ")
""")

md(r"""
The measured machine and the full table (median and interquartile range in milliseconds); these
lines change whenever the file is regenerated:
""")

code(r"""
# NBVAL_IGNORE_OUTPUT
# timings from the stored benchmark file: they change whenever it is regenerated
print(perf.describe(cpu))
print((RESULTS / "cpu.md").read_text())
""")

# ---------------------------------------------------------------------------------------------
md(r"""
(ch06-loop)=
## A loop over heads or one matrix product

`mha.LoopedMultiHeadAttention` runs $h$ heads one after the other: per head, three
$d_{\text{model}} \times d_k$ projections, an $n \times n$ score matrix and a weighted sum, each a
small matrix product, plus the Python overhead of calling twelve modules. `mha.MultiHeadAttention`
does the same arithmetic ({ref}`ch04-parameter-analysis` counted it: the FLOPs do not depend on
$h$) as a few large products over a `(B, H, T, Dh)` tensor. Large products keep every core
(and on a GPU, every streaming multiprocessor) busy; small ones leave them waiting for the
next call. This is what "heads map well onto parallel hardware" means: the heads are
independent, so a single batched matrix product computes all of them at once.

The stored CPU run tells a more careful story. At 128 tokens the loop loses, forward and backward
alike: there the per-call overhead of twelve modules and twenty-four small products is a large
share of the work. At 512 tokens the gap is gone: forward plus backward, the loop and the batched
module (both returning their weights) take the same time to within 10 %:
""")

code(r"""
looped, batched = perf.IMPLS[0], perf.IMPLS[1]
for key in ("forward", "forward_backward"):
    assert perf.time_ratio(cpu, looped, batched, 128, key) > 1.0, key
assert 0.9 < perf.time_ratio(cpu, looped, batched, 512) < 1.1
print("looped / batched, forward + backward, n = 128: slower; n = 512: within 10%")
""")

md(r"""
At 512 tokens both are dominated by the $n \times n$ matrices, not by the loop. The batched module
builds one `(8, 12, 512, 512)` tensor of 96 MiB and reads and writes it once per step of the
softmax (scale, maximum, exponential, sum, division); the loop builds twelve tensors of 8 MiB,
one per head, which stay in the processor's caches while they are used. On two cores with large
caches, that smaller working set pays for the loop's overhead. A GPU, with thousands of arithmetic units that twelve
small kernels would leave idle, rewards the batched version instead. Either way, the loop is not
what makes attention slow: materialising the $n \times n$ weights is, as the next sections show.
""")

# ---------------------------------------------------------------------------------------------
md(r"""
(ch06-fused-qkv)=
## One projection for Q, K and V

In self-attention, $Q$, $K$ and $V$ are three projections of the same input $X$. Stacking the
three weight matrices gives one $d_{\text{model}} \times 3 d_{\text{model}}$ matrix and one
matrix product, $[Q\;K\;V] = X\,[W^Q\;W^K\;W^V]$, which a BLAS library or a GPU runs more
efficiently than three products a third of the size. `mha` does it in
`GroupedQueryAttention._project_fused`:
""")

code(r"""
print(inspect.getsource(mha.GroupedQueryAttention._project_fused))
print(inspect.getsource(mha.modules._FusedLinear))
""")

md(r"""
The concatenation has a price that a byte count shows. `perf.saved_tensors` runs a forward and
backward pass and lists the distinct tensors the backward pass reads (the activations autograd
keeps, parameters excluded). A plain `F.linear(x, torch.cat([W_q, W_k, W_v]))` would keep one
tensor that PyTorch's module does not: the concatenated $3 d_{\text{model}} \times d_{\text{model}}$
weight, built anew at each call and needed again to compute the gradient of $X$. PyTorch avoids
it by *storing* the three matrices as one parameter, `in_proj_weight`. `mha` keeps three separate
parameters (so that a learner can read $W^Q$, $W^K$, $W^V$ by name) and instead uses a small
autograd function, `_FusedLinear`, whose backward pass rebuilds the concatenation for a moment
from the three weights it already holds:
""")

code(r"""
# Byte counts of the CPU kernels (the stored file was measured on the CPU too); a GPU's fused
# kernels keep slightly different statistics.
torch.manual_seed(0)
d_model, num_heads = 768, 12
torch_mha = nn.MultiheadAttention(d_model, num_heads, batch_first=True)
ours = mha.MultiHeadAttention.from_torch(torch_mha)
params = list(torch_mha.parameters()) + list(ours.parameters())
x = torch.randn(2, 48, d_model, generator=torch.Generator().manual_seed(1))

paths = {
    "mha, need_weights=True": lambda x: ours(x)[0],
    "mha, need_weights=False": lambda x: ours(x, need_weights=False)[0],
    "nn.MultiheadAttention (default)": lambda x: torch_mha(x, x, x)[0],
    "nn.MultiheadAttention, need_weights=False": lambda x: torch_mha(x, x, x, need_weights=False)[0],
}
saved = {name: perf.saved_tensors(f, x.clone().requires_grad_(), params) for name, f in paths.items()}
nbytes = {name: sum(t["nbytes"] for t in tensors) for name, tensors in saved.items()}
extra = nbytes["mha, need_weights=False"] - nbytes["nn.MultiheadAttention, need_weights=False"]
assert extra == 0


def plain_concat(x):
    # The naive fused projection, for comparison: F.linear saves the concatenated weight.
    w = torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight])
    b = torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias])
    q, k, v = (mha.split_heads(t, num_heads) for t in F.linear(x, w, b).split(d_model, dim=-1))
    return ours._attend(q, k, v, None, need_weights=False)[0]


naive = sum(t["nbytes"] for t in perf.saved_tensors(plain_concat, x.clone().requires_grad_(), params))
naive_extra = naive - nbytes["nn.MultiheadAttention, need_weights=False"]
assert naive_extra == 3 * d_model * d_model * 4 == 7_077_888
print(f"mha keeps {extra} bytes more than nn.MultiheadAttention; "
      f"a plain concatenation would keep {naive_extra:,} more = 3 * {d_model}^2 * 4 bytes")
""")

md(r"""
The naive version's 6.75 MiB would be a constant at every sequence length. With `_FusedLinear`
the stored benchmark shows the two modules keeping exactly the same bytes at every length, up to
$n$ = 1024:
""")

code(r"""
sdpa, torch_fast, torch_default = perf.IMPLS[2], perf.IMPLS[4], perf.IMPLS[3]
for t in perf.seq_lens(cpu, "memory"):
    assert perf.memory_bytes(cpu, sdpa, t) == perf.memory_bytes(cpu, torch_fast, t)
t_max = perf.seq_lens(cpu, "memory")[-1]
print(f"n = {t_max}: mha and nn.MultiheadAttention(need_weights=False) keep "
      f"{perf.memory_bytes(cpu, sdpa, t_max) / 2**20:.1f} MiB each")
""")

# ---------------------------------------------------------------------------------------------
md(r"""
(ch06-weights-memory)=
## The n x n matrix nobody needs

Scaled dot-product attention computes, per head, scores $S = Q K^\top / \sqrt{d_k}$ and weights
$A = \operatorname{softmax}(S)$, both $n \times n$. For a batch they form a
`(B, H, T, T)` tensor of

$$
b \cdot h \cdot n^2 \cdot s \ \text{bytes} \qquad (s = 4 \text{ in fp32}),
$$

which grows with the *square* of the sequence length while everything else grows linearly. The
backward pass of the explicit recipe needs some of these matrices again, so autograd keeps them.
The live count above tells which ones: `perf.count_attention_matrices` finds the saved tensors
with $b \cdot h \cdot n^2$ elements and $(n, n)$ as their last two sizes.
""")

code(r"""
B, T = x.shape[:2]
rows = []
for name, tensors in saved.items():
    k = perf.count_attention_matrices(tensors, B, num_heads, T)
    rows.append((name, k, nbytes[name]))
    print(f"{name:45s} {k} (B,H,T,T) tensors kept, {nbytes[name]:>10,} bytes in all")
counts = {name: k for name, k, _ in rows}
assert counts == {"mha, need_weights=True": 2, "mha, need_weights=False": 0,
                  "nn.MultiheadAttention (default)": 1, "nn.MultiheadAttention, need_weights=False": 0}
""")

md(r"""
- `mha`'s explicit `masked_softmax` keeps **two**: the exponentials (for the division's gradient)
  and the weights (for the product with $V$).
- PyTorch's default path keeps **one**: its softmax is a single kernel whose backward needs only
  its output, $\partial S = A \odot (\partial A - \operatorname{rowsum}(\partial A \odot A))$.
- The fused kernel keeps **none**. It saves $Q$, $K$, $V$, the output and one number per query,
  the log of the softmax denominator (a `(B, H, T)` tensor), and recomputes the scores block by
  block in the backward pass.

That last strategy is **Flash attention** {cite}`dao2022flashattention`: split $Q$, $K$, $V$ into
tiles that fit in fast on-chip memory, compute each tile's scores, and combine the tiles' softmax
with a running maximum and a running sum (an *online* softmax), so the $n \times n$ matrix is
never written to main memory. It does a little more arithmetic (the recomputation) and far less
memory traffic; on a GPU, where reading and writing memory is the bottleneck for long sequences,
that makes it faster as well as smaller. PyTorch exposes it (and other fused kernels, chosen per
device) as `torch.nn.functional.scaled_dot_product_attention`, which `mha` calls when the caller
passes `need_weights=False`:
""")

code(r"""
source = inspect.getsource(mha.GroupedQueryAttention._attend)
assert "F.scaled_dot_product_attention" in source
print(source)
lse = [t for t in saved["mha, need_weights=False"] if t["shape"] == (B, num_heads, T)]
assert len(lse) == 1 and lse[0]["nbytes"] == B * num_heads * T * 4
""")

md(r"""
In the stored results at $n$ = 1024 the two `mha` paths differ by the two kept matrices, each
$8 \cdot 12 \cdot 1024^2 \cdot 4$ bytes = 384 MiB, up to a few bytes per query for the softmax
statistics:
""")

code(r"""
t = 1024
weights_path = perf.IMPLS[1]
one_matrix = perf.attention_matrix_bytes(8, 12, t)
assert one_matrix == 8 * 12 * t * t * 4 == 384 * 2**20
diff = perf.memory_bytes(cpu, weights_path, t) - perf.memory_bytes(cpu, sdpa, t)
assert 0 <= diff - 2 * one_matrix <= 8 * 12 * t * 4 * 2
print(f"need_weights=True keeps {diff / 2**20:,.1f} MiB more than need_weights=False at n = {t}")
print(f"2 (B,H,T,T) matrices: {2 * one_matrix / 2**20:,.1f} MiB")
""")

md(r"""
The memory plot, log-log, shows the two families: the paths that keep $n \times n$ matrices grow
with slope 2, the fused ones with slope 1 (the looped module keeps them too, one head at a time).
""")

code(r"""
fig, ax = plt.subplots(figsize=(6.4, 4.0))
perf.plot_memory_vs_seq_len(cpu, ax=ax)
plt.show()
""")

code(r"""
mem = {impl: [perf.memory_bytes(cpu, impl, t) for t in perf.seq_lens(cpu, "memory")] for impl in perf.IMPLS}
for impl in (perf.IMPLS[0], perf.IMPLS[1], perf.IMPLS[3]):
    assert mem[impl][-1] / mem[impl][-2] > 3.0, impl  # 2x the length, about 4x the bytes
for impl in (sdpa, torch_fast):
    assert mem[impl][-1] / mem[impl][-2] < 2.1, impl  # 2x the length, 2x the bytes
""", tags=["hide-input"])

# ---------------------------------------------------------------------------------------------
md(r"""
(ch06-need-weights)=
## `need_weights`: the flag that decides

`nn.MultiheadAttention` returns the attention weights, averaged over heads, unless told
otherwise: its default is `need_weights=True`. Asking for them forbids the fused kernel, because
the kernel never forms them. Models in training and in production do not look at the weights,
so they pass `need_weights=False` (PyTorch's own `TransformerEncoderLayer` does). `mha` follows
the same rule: the weights are computed only when requested.

Time against sequence length, forward and backward, from the stored file:
""")

code(r"""
fig, (ax_f, ax_b) = plt.subplots(1, 2, figsize=(10.0, 3.8))
perf.plot_time_vs_seq_len(cpu, key="forward", ax=ax_f)
perf.plot_time_vs_seq_len(cpu, key="forward_backward", ax=ax_b)
fig.tight_layout()
plt.show()
""")

md(r"""
At $n$ = 512, forward plus backward, the stored run gives the comparisons the benchmark was built
to test:

- `mha` with `need_weights=False` is **faster than** `nn.MultiheadAttention` with
  `need_weights=False` (time ratio below 1): both call the same fused kernel, and both project
  $Q$, $K$, $V$ in one matrix product;
- it is faster than `nn.MultiheadAttention` with its default `need_weights=True` by at least the
  factor 1.3 the benchmark set as its target, and keeps less than a quarter of its memory at
  $n$ = 1024; on this CPU the fused kernel saves memory far more than time, because PyTorch's
  default path already computes its softmax in one kernel;
- the fused path is the fastest of the five implementations at 512 tokens, and `mha`'s explicit
  path, which keeps two $n \times n$ matrices and passes over them several times, the slowest
  batched one.
""")

code(r"""
s = cpu["summary"]
assert s["seq_len"] == 512
assert s["ours_over_torch_need_weights_false"] < 1.0
assert s["torch_default_over_ours"] >= 1.3
assert s["ours_memory_over_torch_default"] < 0.25
assert s["ours_over_torch_need_weights_false"] == perf.time_ratio(cpu, sdpa, torch_fast, 512)
times_512 = {impl: perf.median_ms(cpu, impl, 512) for impl in perf.IMPLS}
assert min(times_512, key=times_512.get) == sdpa
assert max((times_512[i], i) for i in perf.IMPLS[1:])[1] == batched
""")

code(r"""
# NBVAL_IGNORE_OUTPUT
# timings from the stored benchmark file: they change whenever it is regenerated
print(f"mha (SDPA) / nn.MultiheadAttention(need_weights=False): {s['ours_over_torch_need_weights_false']:.2f}")
print(f"nn.MultiheadAttention (default) / mha (SDPA):            {s['torch_default_over_ours']:.2f}")
""")

md(r"""
The memory target of the benchmark, "no more memory than `nn.MultiheadAttention`", is **not**
met: `mha` keeps the 6.75 MiB copy of the concatenated weight ({ref}`ch06-fused-qkv`). Storing
the three matrices as one parameter, as PyTorch does, would remove it; `mha` keeps
`q_proj`, `k_proj` and `v_proj` as separate `nn.Linear` modules because the earlier chapters
read them one at a time.

The explorer shows every bar of the stored run: choose forward or forward plus backward and a
sequence length. Each bar is labelled with how many times slower it is than the fastest.
""")

code(r"""
# NBVAL_IGNORE_OUTPUT
explorer(partial(perf.render_benchmark, cpu), perf.explorer_controls(cpu),
         title="Stored benchmark: time per implementation",
         caption=perf.describe(cpu), alt=partial(perf.benchmark_alt, cpu))
""")

md(r"""
When a GPU run is stored as well (`MHA_DEVICE=cuda make bench` writes
`benchmarks/results/cuda.json`), the next figure puts it beside the CPU, one panel per device
and precision:
""")

code(r"""
panels = [("cpu", r) for r in reports]
gpu_file = RESULTS / "cuda.json"
if gpu_file.is_file():
    panels += [("cuda", r) for r in perf.load_results(gpu_file)]
fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 3.8), squeeze=False)
for ax, (name, report) in zip(axes[0], panels):
    perf.plot_time_vs_seq_len(report, ax=ax)
fig.tight_layout()
plt.show()
print(len(panels), "panel(s):", ", ".join(f"{n} {r['environment']['dtype']}" for n, r in panels))
""")

# ---------------------------------------------------------------------------------------------
md(r"""
(ch06-kv-cache)=
## Generating text: the KV cache

A decoder generates one token at a time, and token $t$ attends to all $t$ tokens so far. Without
a cache, every step recomputes the keys and values of the whole prefix: step $t$ projects $t$
tokens, so $n$ steps project $n(n+1)/2$ token vectors. A **KV cache** keeps each token's keys
and values once they are computed, so step $t$ projects one token and reads $t$ cached keys and
values. `mha.GroupedQueryAttention.decode_step` does it with an `mha.KVCache`:
""")

code(r"""
print(inspect.getsource(mha.GroupedQueryAttention.decode_step))
""")

md(r"""
Decoding with the cache gives the same outputs as one causal pass over the whole sequence:
""")

code(r"""
torch.manual_seed(0)
small = mha.GroupedQueryAttention(64, 8, 2).to(device).eval()
tokens = torch.randn(1, 16, 64, generator=torch.Generator().manual_seed(2)).to(device)
with torch.no_grad():
    cache = small.new_cache(1, 16)
    stepwise = torch.cat([small.decode_step(tokens[:, i:i + 1], cache)[0] for i in range(16)], dim=1)
    full = small(tokens, mask=mha.causal_mask(16, device=device), need_weights=False)[0]
max_diff = (stepwise - full).abs().max().item()
assert max_diff < 1e-5
print("token by token with a cache == one causal pass (max difference < 1e-5)")
""")

md(r"""
The stored run generates 512 tokens with $d_{\text{model}} = 768$ and $h = 12$, once with the cache
and once recomputing the prefix at every step, for $g$ = 12 key/value heads (MHA), 3 (GQA) and 1
(MQA). The cache is faster in every case, and its size equals
{ref}`chapter 4's formula <ch04-kv-cache>` $2 \cdot b \cdot n \cdot L \cdot g \cdot d_k \cdot s$
exactly:
""")

code(r"""
for entry in cpu["decoding"]:
    assert entry["new_tokens"] == 512 and entry["speedup"] > 1.0
    assert entry["max_abs_diff"] < 1e-4
    assert entry["cache_bytes"] == mha.kv_cache_bytes(1, 512, 1, entry["num_kv_heads"], 64, 4)
print([entry["num_kv_heads"] for entry in cpu["decoding"]], "KV heads: cache faster than recomputing")
""")

code(r"""
# NBVAL_IGNORE_OUTPUT
# timings from the stored benchmark file: they change whenever it is regenerated
for entry in cpu["decoding"]:
    print(f"g = {entry['num_kv_heads']:2d}: cache {entry['cache_ms']:7.1f} ms, recompute {entry['recompute_ms']:8.1f} ms, "
          f"speed-up {entry['speedup']:.1f}x, cache {entry['cache_bytes'] / 2**20:.2f} MiB")
""")

md(r"""
The same sizes, computed live from real `KVCache` tensors: with $g$ key/value heads the cache is
$h / g$ times smaller than multi-head attention's, because query heads share keys and values
(multi-query attention {cite}`shazeer2019fast` shares one pair among all heads; grouped-query
attention {cite}`ainslie2023gqa` one pair per group of $h/g$ heads):
""")

code(r"""
sizes = {}
for g in (12, 3, 1):
    module = mha.GroupedQueryAttention(768, 12, g)
    sizes[g] = module.new_cache(1, 512, device="cpu").nbytes
    assert sizes[g] == mha.kv_cache_bytes(1, 512, 1, g, 64, 4)
    print(f"g = {g:2d}: {sizes[g]:>9,} bytes, {sizes[12] // sizes[g]:2d}x smaller than MHA")
assert sizes[12] == 4 * sizes[3] == 12 * sizes[1]
""")

md(r"""
Why does a smaller cache make decoding *faster*, not only smaller? Each decoding step does
little arithmetic per byte: one query vector against the whole cache. On a GPU such a step is
limited by how fast the cache streams from memory, not by the arithmetic units, so reading
$h/g$ times fewer bytes makes it nearly $h/g$ times faster once the context is long; Pope et al.
{cite}`pope2022efficiently` analyse exactly this trade-off for serving large models. The stored
CPU run shows only part of it: generating with the cache is faster with $g$ = 3 or 1 than with
12, but $g$ = 1 does not beat $g$ = 3 there. At 512 tokens and batch 1, a CPU decoding step is
dominated by fixed per-step costs (a dozen small kernel calls), and `mha` copies the shared keys
and values once per query head (`repeat_interleave` in `_attend`) before calling the kernel,
which an optimised decoder avoids. The memory saving, the point of MQA and GQA, is exact.
""")

code(r"""
cache_ms = [entry["cache_ms"] for entry in cpu["decoding"]]
assert [entry["num_kv_heads"] for entry in cpu["decoding"]] == [12, 3, 1]
assert cache_ms[0] > max(cache_ms[1], cache_ms[2])
print("decoding with the cache: g = 12 slower than g = 3 and than g = 1")
""")

md(r"""

(ch06-compile)=
## Compiling

The explicit path launches several small operations on the `(B, H, T, T)` tensor: scale, mask,
maximum, exponential, sum, division. Each reads and writes the whole tensor. `torch.compile`
traces a module and generates fused kernels that do several such steps in one pass over memory,
and it removes most of the Python overhead of a forward call:

```python
compiled = torch.compile(mha.MultiHeadAttention(768, 12))
out, weights = compiled(x)          # the first call compiles (seconds); later calls are fast
```

It cannot turn the explicit recipe into Flash attention's tiling by itself when the weights must
be returned, and compiling takes seconds to minutes, so it pays off for long runs (training, a
server) rather than for a notebook. The benchmark does not include it: on the 2-core machine that
produced the stored file, compilation would dominate the measurement. It is a good exercise on a
machine with more cores or a GPU.

(ch06-summary)=
## Summary

- Same arithmetic, different speed. A Python loop over heads pays overhead that shows at short
  sequences; at long ones the cost is the $n \times n$ matrices, whichever way the heads run.
- A fused $Q, K, V$ projection is one large matrix product; built by concatenation at each call it
  keeps a $3 d_{\text{model}}^2$-element copy for the backward pass (6.75 MiB at
  $d_{\text{model}} = 768$), which storing the matrices fused avoids.
- The explicit recipe keeps $n \times n$ matrices for the backward pass: $b h n^2 s$ bytes each,
  quadratic in $n$. Fused kernels (Flash attention, via `F.scaled_dot_product_attention`) keep
  none, and `need_weights=False` is what allows them.
- A KV cache turns generation's recomputation of the prefix into one new token per step; MQA and
  GQA make the cache $h$ and $h/g$ times smaller, which on memory-bound hardware also makes each
  step faster.

## Exercises

1. How many bytes does one fp32 `(B, H, T, T)` weight tensor take for $b = 8$, $h = 12$ and
   $n$ = 4096? And the two that `mha`'s explicit path keeps?
2. A plain `F.linear` on the concatenation of $W^Q, W^K, W^V$ (built at every call) keeps that
   concatenation for the backward pass. How many bytes is it at $d_{\text{model}}$ = 1024 in
   fp32? And for a GQA module with
   $d_{\text{model}} = 1024$, $h = 16$, $g = 4$?
3. Without a cache, how many token vectors does generating $n$ = 512 tokens project in total? With
   a cache?

````{admonition} Answers
:class: dropdown
1. $8 \cdot 12 \cdot 4096^2 \cdot 4$ = 6,442,450,944 bytes = 6 GiB; two of them, 12 GiB (check
   with `perf.attention_matrix_bytes(8, 12, 4096)`).
2. $3 \cdot 1024^2 \cdot 4$ = 12,582,912 bytes. For GQA the stacked matrix has
   $d_{\text{model}} + 2 g d_k = 1024 + 2 \cdot 4 \cdot 64 = 1536$ rows: $1536 \cdot 1024 \cdot 4$
   = 6,291,456 bytes.
3. $512 \cdot 513 / 2$ = 131,328 without a cache, 512 with one: 256.5 times fewer.
````
""")

code(r"""
assert perf.attention_matrix_bytes(8, 12, 4096) == 6_442_450_944 == 6 * 2**30
assert 3 * 1024 * 1024 * 4 == 12_582_912
gqa = mha.GroupedQueryAttention(1024, 16, 4)
stacked = torch.cat([gqa.q_proj.weight, gqa.k_proj.weight, gqa.v_proj.weight])
assert tuple(stacked.shape) == (1536, 1024) and stacked.numel() * 4 == 6_291_456
assert 512 * 513 // 2 == 131_328 and 131_328 / 512 == 256.5
""", tags=["hide-input"])

if __name__ == "__main__":
    SOURCE.write()
