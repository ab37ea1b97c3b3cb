"""mha.chapters.heads.softmax_demo: the single-head-limits chapter's worked row and its temperature explorer
(book/01_single_head_limits.ipynb)."""

import math

import pytest
import torch

from mha.chapters.heads import figures as heads_figures
from mha.chapters.heads import softmax_demo


def reference_softmax(scores, tau):
    exps = [math.exp(s / tau) for s in scores]
    return [e / sum(exps) for e in exps]


@pytest.mark.parametrize("tau", softmax_demo.TEMPERATURES + [3.7, 100.0])
def test_matches_a_plain_loop(tau):
    got = softmax_demo.softmax_with_temperature(softmax_demo.SCORES, tau)
    assert got.dtype == torch.float64
    assert torch.allclose(got, torch.tensor(reference_softmax(softmax_demo.SCORES, tau), dtype=torch.float64))


def test_hand_numbers_and_limits():
    probs = softmax_demo.softmax_with_temperature(torch.tensor([0.0, 0.0]), 1.0)
    assert torch.equal(probs, torch.tensor([0.5, 0.5]))
    assert softmax_demo.entropy_bits(probs).item() == pytest.approx(1.0)
    one_hot = softmax_demo.softmax_with_temperature(torch.tensor([0.0, 10.0], dtype=torch.float64), 0.01)
    assert one_hot[1].item() == pytest.approx(1.0) and softmax_demo.entropy_bits(one_hot).item() < 1e-9
    flat = softmax_demo.softmax_with_temperature(softmax_demo.SCORES, 1e6)
    assert softmax_demo.entropy_bits(flat).item() == pytest.approx(math.log2(5), abs=1e-6)


def test_temperature_is_the_attention_scale():
    scores = torch.randn(3, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    d_k = 64  # attention divides the scores by sqrt(d_k) = 8: a temperature of 8
    assert torch.allclose(
        softmax_demo.softmax_with_temperature(scores, 8.0), torch.softmax(scores / math.sqrt(d_k), dim=-1)
    )


def test_entropy_rises_with_temperature_and_order_is_kept():
    probs = [softmax_demo.softmax_with_temperature(softmax_demo.SCORES, t) for t in softmax_demo.TEMPERATURES]
    entropies = [softmax_demo.entropy_bits(p).item() for p in probs]
    assert entropies == sorted(entropies)
    assert all(torch.equal(p.argsort(), probs[0].argsort()) for p in probs)


@pytest.mark.parametrize(
    "bad, error, message",
    [
        (0.0, ValueError, "positive finite number, found 0.0"),
        (-1, ValueError, "positive finite number, found -1"),
        (float("inf"), ValueError, "positive finite number, found inf"),
        ("2", TypeError, "temperature must be a positive number, found str"),
        (True, TypeError, "found bool"),
    ],
)
def test_bad_temperature(bad, error, message):
    with pytest.raises(error, match=message):
        softmax_demo.softmax_with_temperature(softmax_demo.SCORES, bad)


def test_bad_scores_and_tokens():
    with pytest.raises(TypeError, match="scores must be a floating-point tensor"):
        softmax_demo.softmax_with_temperature(torch.tensor([1, 2]), 1.0)
    with pytest.raises(ValueError, match="tokens must name each of the 5 scores, found 2"):
        heads_figures.plot_temperature(1.0, tokens=["a", "b"])


def test_plot_and_alt_text():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = heads_figures.plot_temperature(0.25)
    ax = fig.axes[0]
    assert ax.get_title() == "softmax(scores / 0.25): entropy 0.64 bits"
    assert ax.get_ylabel() == "attention weight" and ax.get_xlabel() == "key token"
    heights = [bar.get_height() for bar in ax.patches]
    assert heights == pytest.approx(softmax_demo.softmax_with_temperature(softmax_demo.SCORES, 0.25).tolist())
    plt.close(fig)
    assert softmax_demo.describe_temperature(1.0) == (
        "Bar chart of the attention weights at temperature 1: 'cat' gets 0.46, entropy 1.89 bits."
    )


def test_worked_row_by_hand_and_by_pytorch():
    row = softmax_demo.worked_row()
    # the scores are the dot products of the query with each key: the explorer's scores
    assert row["scores"].tolist() == list(softmax_demo.SCORES)
    by_hand = reference_softmax(softmax_demo.SCORES, 1.0)
    assert torch.allclose(row["weights"], torch.tensor(by_hand, dtype=torch.float64))
    output = [sum(w * v[i] for w, v in zip(by_hand, softmax_demo.VALUES)) for i in range(2)]
    assert torch.allclose(row["output"], torch.tensor(output, dtype=torch.float64))
    q, k, v = (
        torch.tensor(x, dtype=torch.float64) for x in ([softmax_demo.QUERY], softmax_demo.KEYS, softmax_demo.VALUES)
    )
    reference = torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=1.0)
    assert torch.allclose(row["output"], reference[0])
    hot = softmax_demo.worked_row(4.0)
    assert torch.allclose(hot["weights"], softmax_demo.softmax_with_temperature(softmax_demo.SCORES, 4.0))
    with pytest.raises(ValueError, match="positive finite number, found 0"):
        softmax_demo.worked_row(0)


def test_worked_row_figure():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mha.viz.describe import smallest_text_pt

    fig = heads_figures.plot_worked_row()
    ax_s, ax_w, ax_o = fig.axes
    row = softmax_demo.worked_row()
    assert [bar.get_width() for bar in ax_s.patches] == pytest.approx(row["scores"].tolist())
    assert [bar.get_width() for bar in ax_w.patches] == pytest.approx(row["weights"].tolist())
    assert ax_w.get_xlabel() == "attention weight" and ax_s.get_ylabel() == "key token"
    star = ax_o.collections[-1].get_offsets()[0]
    assert star.tolist() == pytest.approx(row["output"].tolist())
    assert "(1.50, 0.89)" in [t.get_text().split("\n")[-1] for t in ax_o.texts]
    assert smallest_text_pt(fig) >= 6.5  # drawn 6.9 inches wide at 100 dpi: full size on the page
    plt.close(fig)
