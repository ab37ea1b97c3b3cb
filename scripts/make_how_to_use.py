"""Writes the source of book/how_to_use.ipynb; then store its outputs with
`python scripts/execute_notebooks.py book/how_to_use.ipynb`."""
from pathlib import Path

from notebook_source import NotebookSource

SOURCE = NotebookSource(Path(__file__).resolve().parents[1] / "book" / "how_to_use.ipynb", "how")
md, code = SOURCE.md, SOURCE.code

md(r"""
(how-to-use)=
# How to use this book

This page is itself a chapter: a Jupyter notebook whose outputs were stored by running it, and
checked by running it again. It shows the three habits every chapter relies on: choosing the
device, drawing reproducible random numbers, and playing with an **explorer**, an interactive
figure. The explorer here answers a first question about attention: *what does dividing the
scores before a softmax do?*
""")

md(r"""
## Reading, running, checking

- **Reading.** The HTML book shows the outputs stored in each notebook. It needs no kernel and no
  network: the explorers' sliders swap figures that were computed in advance.
- **Running.** After `make book` (or `make install`) the repository has a virtual environment,
  `.venv`, with `mha` and every pinned dependency. Open `book/*.ipynb` in JupyterLab
  (`.venv/bin/pip install jupyterlab`, then `.venv/bin/jupyter lab book/`) or in an editor that runs
  notebooks, with the `.venv` Python as kernel. There the explorers are live ipywidgets: when the
  cell runs, the figure is drawn for every value, and moving a control shows it at once
  (`explorer(..., live="render")` redraws at every move instead).
- **Checking.** `make test` re-runs every notebook with
  [nbval](https://github.com/computationalmodelling/nbval) and compares each cell's text output
  with the stored one, so a page cannot silently drift from the code. `make notebooks` regenerates
  the stored outputs after a change, always on the CPU.
""")

md(r"""
## Choosing the device

Every chapter computes on `device = mha.get_device()`. The `MHA_DEVICE` environment variable wins
when set (`cpu`, `cuda`, `cuda:1`); unset, the course takes the GPU when PyTorch sees one and the CPU
otherwise. Set it before starting Jupyter, e.g. `MHA_DEVICE=cuda .venv/bin/jupyter lab book/`; the
same variable makes `MHA_DEVICE=cuda make test-gpu` check every notebook on a GPU.
""")

code(r"""
import inspect

import torch

import mha
from mha import softmax_demo

device = mha.get_device()
""")

md(r"""
A device that cannot be used is an error with a message, never a silent fall-back to the CPU (a GPU
test run that quietly tested the CPU would prove nothing):
""")

code(r"""
import os

saved = os.environ.get("MHA_DEVICE")
os.environ["MHA_DEVICE"] = "gpu"  # not a torch device name: "cuda" is
try:
    mha.get_device()
except ValueError as error:
    print("ValueError:", error)
finally:
    if saved is None:
        del os.environ["MHA_DEVICE"]
    else:
        os.environ["MHA_DEVICE"] = saved
""")

md(r"""
## Reproducible numbers on any device

The stored outputs were computed on a CPU, and the same notebook must reproduce them on a GPU.
So every chapter follows three rules: draw random numbers from a seeded **CPU** generator and
only then move them to the device; compute on the device; print from a `float64` CPU copy rounded
to 4 decimals (GPU and CPU results differ in the last bits, never in the fourth decimal).
""")

code(r"""
generator = torch.Generator().manual_seed(0)
q = torch.randn(3, 4, generator=generator).to(device)  # 3 queries, d_k = 4
k = torch.randn(5, 4, generator=generator).to(device)  # 5 keys
v = torch.randn(5, 4, generator=generator).to(device)
output, weights = mha.scaled_dot_product_attention(q, k, v)
print(weights.to("cpu", torch.float64).numpy().round(4))
print("each row sums to", weights.sum(dim=-1).to("cpu", torch.float64).numpy().round(4))
""")

md(r"""
(softmax-temperature)=
## A first explorer: the softmax temperature

Attention turns a query's scores $s_1, \dots, s_n$ (one per key) into weights with a softmax. Dividing
the scores by a **{term}`temperature`** $\tau > 0$ first changes how peaked the weights are:

$$
a_j = \frac{e^{s_j / \tau}}{\sum_{l=1}^{n} e^{s_l / \tau}} .
$$

A small $\tau$ stretches the gaps between scores, so the largest score takes almost all the weight;
a large $\tau$ shrinks them, and the weights approach the uniform $1/n$. Scaled dot-product attention
divides by $\sqrt{d_k}$: it is a softmax at temperature $\tau = \sqrt{d_k}$ (chapter 2 explains
why). The spread of the weights is measured by their entropy,
$H = -\sum_j a_j \log_2 a_j$ bits: 0 for one-hot weights, $\log_2 n$ for uniform ones.

The example: one query scores the five tokens of *the cat chased the mouse*.
""")

code(r"""
print(inspect.getsource(softmax_demo.softmax_with_temperature))
""")

code(r"""
scores = torch.tensor(softmax_demo.SCORES, dtype=torch.float32).to(device)
print("tokens:", softmax_demo.TOKENS)
print("scores:", softmax_demo.SCORES)
for tau in softmax_demo.TEMPERATURES:
    probs = softmax_demo.softmax_with_temperature(scores, tau)
    probs = probs.to("cpu", torch.float64)  # print from a float64 CPU copy
    entropy = softmax_demo.entropy_bits(probs).item()
    shown = " ".join(f"{p:.4f}" for p in probs.tolist())
    print(f"tau = {tau:>4}: weights {shown}  entropy {entropy:.4f} bits")
""")

md(r"""
At $\tau = 1$ the highest-scoring token, *cat*, gets 0.46 of the weight; at $\tau = 0.25$ it gets 0.87
and the entropy falls to 0.64 bits; at $\tau = 8$ the entropy is 2.31 bits, close to the
$\log_2 5 = 2.32$ bits of uniform weights. The next cell checks these numbers, as every chapter
checks the numbers its text uses.
""")

code(r"""
import math

def weights_at(tau):
    return softmax_demo.softmax_with_temperature(softmax_demo.SCORES, tau)

cat = softmax_demo.TOKENS.index("cat")
assert round(weights_at(1.0)[cat].item(), 2) == 0.46
assert round(weights_at(0.25)[cat].item(), 2) == 0.87
assert round(softmax_demo.entropy_bits(weights_at(0.25)).item(), 2) == 0.64
assert round(softmax_demo.entropy_bits(weights_at(8.0)).item(), 2) == 2.31
assert round(math.log2(5), 2) == 2.32
# The temperature changes how peaked the weights are, never their order.
order = weights_at(1.0).argsort().tolist()
assert all(weights_at(t).argsort().tolist() == order for t in softmax_demo.TEMPERATURES)
""")

md(r"""
The same weights as a figure, at $\tau = 1$:
""")

code(r"""
import matplotlib.pyplot as plt

mha.plotting.use_style()
softmax_demo.plot_temperature(1.0)
plt.show()
""")

md(r"""
Now move the slider. `softmax_demo.plot_temperature` drew a figure for each temperature when the
cell ran; the slider swaps between them, in the HTML book and in a running notebook alike, so it
answers at once. Watch the entropy in the title, and notice that the bars keep their order.
""")

code(r"""
# NBVAL_IGNORE_OUTPUT
from mha.widgets import explorer

explorer(
    softmax_demo.plot_temperature,
    {"temperature": softmax_demo.TEMPERATURES},
    title="Softmax temperature",
    caption="Lower temperatures sharpen the weights; "
            "higher ones flatten them towards 1/5 each.",
    alt=softmax_demo.describe_temperature,
)
""")

md(r"""
Every explorer in the book works this way: the figure comes from a plain function in `mha`
(here `softmax_demo.plot_temperature`), and the numbers behind it are printed and checked in
ordinary cells such as the table above. Only the explorer cell itself starts with
`# NBVAL_IGNORE_OUTPUT`, because it holds a widget rather than text to compare.

## Summary

- `mha.get_device()` picks the device; `MHA_DEVICE` overrides it, and a device that is not there
  is an error.
- Random numbers are drawn on the CPU with a seed and then moved; printed numbers are rounded
  `float64` copies, so CPU and GPU runs print the same text.
- Dividing scores by a temperature $\tau$ before the softmax keeps their order and changes only how
  peaked the weights are; attention's $1/\sqrt{d_k}$ is a temperature of $\sqrt{d_k}$.

## Exercises

1. Attention with $d_k = 64$ divides the scores by $\sqrt{64}$. Which temperature is that? Check
   that `softmax_demo.softmax_with_temperature(s, tau)` equals `mha.masked_softmax(s / 8)` for the
   example scores `s`.
2. What entropy, in bits, do the weights approach as $\tau \to \infty$ for five tokens? Check it
   with `softmax_demo.entropy_bits` at $\tau = 1000$.
3. Add 10 to every score. Do the weights change at $\tau = 1$? Why not?

```{dropdown} Answers
1. $\tau = 8$. `torch.allclose(softmax_demo.softmax_with_temperature(s, 8.0), mha.masked_softmax(s / 8))`
   is `True` (the cell below checks it).
2. $\log_2 5 \approx 2.3219$ bits: the weights become uniform, $1/5$ each.
3. No: $e^{(s_j + c)} / \sum_l e^{(s_l + c)} = e^{s_j} / \sum_l e^{s_l}$, the constant cancels. This is
   also why `mha.masked_softmax` can subtract the row maximum to avoid overflow.
```
""")

code(r"""
s = torch.tensor(softmax_demo.SCORES, dtype=torch.float64)
soft = softmax_demo.softmax_with_temperature
# 1. A temperature of 8 is attention's 1 / sqrt(64).
assert torch.allclose(soft(s, 8.0), mha.masked_softmax(s / math.sqrt(64)))
# 2. Very hot: uniform weights, log2(5) bits.
assert abs(softmax_demo.entropy_bits(soft(s, 1000.0)).item() - math.log2(5)) < 1e-4
# 3. Adding a constant to every score changes nothing.
assert torch.allclose(soft(s + 10, 1.0), soft(s, 1.0))
print("all three answers check out")
""")

SOURCE.write()
