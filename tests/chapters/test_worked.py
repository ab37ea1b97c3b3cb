"""The worked example: every field recomputed with plain Python loops, and the modules agree."""

import math

import pytest
import torch

import mha
from mha.chapters.worked_example import figures as worked_example_figures
from mha.chapters.worked_example import worked, worked_edit

T, D, H, DK = 5, 8, 2, 4


# ----------------------------------------------------------------------------------------------
# Plain-Python reference: lists of floats and loops, no tensor operations
# ----------------------------------------------------------------------------------------------


def lst(t):
    return t.tolist()


def matmul(a, b):
    return [[sum(a[i][k] * b[k][j] for k in range(len(b))) for j in range(len(b[0]))] for i in range(len(a))]


def softmax_row(row):
    m = max(row)
    exps = [math.exp(s - m) for s in row]
    total = sum(exps)
    return [e / total for e in exps]


def reference(x, w_q, w_k, w_v, w_o, temperature=1.0):
    """Every step by hand: projections, dot products, scaling, softmax, weighted sums, concat, W_O."""
    q = [matmul(x, w) for w in w_q]
    k = [matmul(x, w) for w in w_k]
    v = [matmul(x, w) for w in w_v]
    scores = [[[sum(q[h][i][d] * k[h][j][d] for d in range(DK)) for j in range(T)] for i in range(T)] for h in range(H)]
    scaled = [[[s / (math.sqrt(DK) * temperature) for s in row] for row in scores[h]] for h in range(H)]
    weights = [[softmax_row(row) for row in scaled[h]] for h in range(H)]
    heads = [
        [[sum(weights[h][i][j] * v[h][j][d] for j in range(T)) for d in range(DK)] for i in range(T)] for h in range(H)
    ]
    concat = [heads[0][i] + heads[1][i] for i in range(T)]  # side by side: T x (H * DK)
    output = matmul(concat, w_o)
    return dict(
        q=q,
        k=k,
        v=v,
        scores=scores,
        scaled_scores=scaled,
        weights=weights,
        head_outputs=heads,
        concat=concat,
        output=output,
    )


def assert_close(tensor, expected, tol=1e-12):
    flat_t = torch.as_tensor(tensor).flatten().tolist()
    flat_e = torch.tensor(expected, dtype=torch.float64).flatten().tolist()
    assert len(flat_t) == len(flat_e)
    assert max(abs(a - b) for a, b in zip(flat_t, flat_e)) < tol


# Hand-written numbers the chapter's prose relies on.
X_BY_HAND = [
    [1, 0, 0, 1, 0, 0, 0, 0],  # the, position 1
    [0, 1, 0, 0, 1, 0, 0, 0],  # cat
    [0, 0, 1, 0, 0, 1, 0, 0],  # saw
    [1, 0, 0, 0, 0, 0, 1, 0],  # the, position 4
    [0, 1, 0, 0, 0, 0, 0, 1],  # dog
]


# ----------------------------------------------------------------------------------------------
# The API: fields, shapes, dtypes
# ----------------------------------------------------------------------------------------------


def test_fields_shapes_and_dtypes():
    ex = mha.worked_example()
    assert ex.tokens == ["the", "cat", "saw", "the", "dog"]
    assert (ex.d_model, ex.num_heads, ex.head_dim) == (D, H, DK)
    shapes = {
        "x": (T, D),
        "w_o": (H * DK, D),
        "q": (H, T, DK),
        "k": (H, T, DK),
        "v": (H, T, DK),
        "scores": (H, T, T),
        "scaled_scores": (H, T, T),
        "weights": (H, T, T),
        "head_outputs": (H, T, DK),
        "concat": (T, H * DK),
        "output": (T, D),
    }
    for name, shape in shapes.items():
        value = getattr(ex, name)
        assert tuple(value.shape) == shape, name
        assert value.dtype == torch.float64, name
    for name in ("w_q", "w_k", "w_v"):
        mats = getattr(ex, name)
        assert len(mats) == H
        assert all(tuple(m.shape) == (D, DK) and m.dtype == torch.float64 for m in mats)


def test_inputs_are_small_integers():
    ex = mha.worked_example()
    assert ex.x.tolist() == X_BY_HAND
    for m in [ex.x, ex.w_o, *ex.w_q, *ex.w_k, *ex.w_v]:
        assert torch.equal(m, torch.round(m))
        assert m.abs().max() <= 5


@pytest.mark.parametrize("temperature", [1.0, 0.5, 2.0])
@pytest.mark.parametrize("edit", [None, (0, 0, 1), (0, 0.5, 0.5), (1, 0, 0)])
def test_every_field_matches_plain_loops(temperature, edit):
    x = None if edit is None else worked.edited_x(*edit)
    ex = mha.worked_example(x, temperature=temperature)
    x_list = X_BY_HAND if edit is None else [row[:] for row in X_BY_HAND[:4]] + [list(edit) + [0, 0, 0, 0, 1]]
    assert_close(ex.x, x_list)
    ref = reference(
        x_list, [lst(w) for w in ex.w_q], [lst(w) for w in ex.w_k], [lst(w) for w in ex.w_v], lst(ex.w_o), temperature
    )
    for name, expected in ref.items():
        assert_close(getattr(ex, name), expected)
    assert ex.temperature == temperature


def test_weights_rows_sum_to_one():
    ex = mha.worked_example()
    for h in range(H):
        for i in range(T):
            assert abs(sum(ex.weights[h, i].tolist()) - 1.0) < 1e-12


def test_hand_numbers_of_the_prose():
    """The exact values the chapter states: e²/(e²+4), 1/(e²+4), e²/(2e²+3), 1/(2e²+3)."""
    ex = mha.worked_example()
    e2 = math.exp(2)
    # Raw scores are 4 on the chosen keys and 0 elsewhere; scaled by √4 = 2 they are 2 and 0.
    assert set(ex.scores.flatten().tolist()) == {0.0, 4.0}
    assert torch.equal(ex.scaled_scores, ex.scores / 2)
    head1_keys = [0, 0, 1, 2, 3]  # previous token; token 1 has none and looks at itself
    for i, j in enumerate(head1_keys):
        assert abs(ex.weights[0, i, j].item() - e2 / (e2 + 4)) < 1e-12
        others = [ex.weights[0, i, c].item() for c in range(T) if c != j]
        assert max(abs(o - 1 / (e2 + 4)) for o in others) < 1e-12
    # Head 2: tokens of the same type (the/the, cat/dog) share the weight; saw only has itself.
    assert abs(ex.weights[1, 0, 0].item() - e2 / (2 * e2 + 3)) < 1e-12
    assert abs(ex.weights[1, 0, 3].item() - e2 / (2 * e2 + 3)) < 1e-12
    assert abs(ex.weights[1, 1, 4].item() - e2 / (2 * e2 + 3)) < 1e-12
    assert abs(ex.weights[1, 1, 0].item() - 1 / (2 * e2 + 3)) < 1e-12
    assert abs(ex.weights[1, 2, 2].item() - e2 / (e2 + 4)) < 1e-12


def test_heads_attend_differently():
    ex = mha.worked_example()
    top1 = ex.weights[0].argmax(dim=-1).tolist()
    assert top1 == [0, 0, 1, 2, 3]  # previous token
    for i, token in enumerate(ex.tokens):  # head 2: the largest weights go to the same word type
        top = ex.weights[1, i].max()
        same = [j for j in range(T) if torch.equal(ex.x[j, :3], ex.x[i, :3])]
        assert [j for j in range(T) if abs(ex.weights[1, i, j] - top) < 1e-12] == same, token


def test_concat_is_along_the_feature_axis():
    ex = mha.worked_example()
    assert torch.equal(ex.concat[:, :DK], ex.head_outputs[0])
    assert torch.equal(ex.concat[:, DK:], ex.head_outputs[1])
    stacked = torch.cat(list(ex.head_outputs), dim=0)  # the vertical stack some tutorials write: (10, 4)
    assert tuple(stacked.shape) == (2 * T, DK)
    with pytest.raises(RuntimeError):
        stacked @ ex.w_o


# ----------------------------------------------------------------------------------------------
# The modules agree with the hand steps
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("edit", [None, (0, 0, 1)])
def test_mha_module_and_torch_module_agree(device, edit):
    ex = mha.worked_example(None if edit is None else worked.edited_x(*edit))
    module = worked.to_module(ex).to(device)
    x = ex.x[None].to(device)  # (1, T, D)
    out, weights = module(x)
    assert (out[0].cpu() - ex.output).abs().max() < 1e-12
    assert (weights[0].cpu() - ex.weights).abs().max() < 1e-12
    ref = module.to_torch()
    ref_out, ref_weights = ref(x, x, x, average_attn_weights=False)
    assert (ref_out[0].detach().cpu() - ex.output).abs().max() < 1e-12
    assert (ref_weights[0].detach().cpu() - ex.weights).abs().max() < 1e-12
    assert sum(p.numel() for p in module.parameters()) == 4 * D * D


def test_module_stores_transposed_weights():
    ex = mha.worked_example()
    module = worked.to_module(ex)
    assert torch.equal(module.q_proj.weight, torch.cat(ex.w_q, dim=1).T)
    assert torch.equal(module.out_proj.weight, ex.w_o.T)
    assert module.q_proj.bias is None


def test_single_head_of_the_same_size():
    ex = mha.worked_example()
    module = worked.single_head_module(ex)
    assert sum(p.numel() for p in module.parameters()) == sum(p.numel() for p in worked.to_module(ex).parameters())
    out, weights = module(ex.x[None])
    # Independent loop: one head whose score is the sum of both heads' scores, scaled by √8.
    q = matmul(X_BY_HAND, lst(torch.cat(ex.w_q, dim=1)))
    k = matmul(X_BY_HAND, lst(torch.cat(ex.w_k, dim=1)))
    v = matmul(X_BY_HAND, lst(torch.cat(ex.w_v, dim=1)))
    w = [
        softmax_row([sum(q[i][d] * k[j][d] for d in range(H * DK)) / math.sqrt(H * DK) for j in range(T)])
        for i in range(T)
    ]
    ctx = [[sum(w[i][j] * v[j][d] for j in range(T)) for d in range(H * DK)] for i in range(T)]
    assert_close(weights[0].detach(), w)
    assert_close(out[0].detach(), matmul(ctx, lst(ex.w_o)))
    # The single head's scores are the sum of the two heads' scores.
    assert torch.allclose(weights[0], torch.softmax(ex.scores.sum(0) / math.sqrt(8), dim=-1), atol=1e-12)
    # With identical value maps, one softmax gives identical halves: head 1 - head 2 features vanish.
    assert out[0, :, DK:].abs().max() < 1e-12


def test_two_heads_and_one_figure():
    import matplotlib.pyplot as plt

    ex = mha.worked_example()
    _, single_weights = worked.single_head_module(ex)(ex.x[None])
    fig = worked_example_figures.plot_two_heads_and_one(ex, single_weights[0].detach())
    try:
        titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
        assert titles == ["two heads: head 1", "two heads: head 2", "one head of size 8"]
        assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == list(worked.token_labels(ex.tokens))
    finally:
        plt.close(fig)


# ----------------------------------------------------------------------------------------------
# Formatting
# ----------------------------------------------------------------------------------------------


def latex_cells(latex: str) -> list[list[str]]:
    """The cells of a typeset matrix or labelled table, row by row."""
    body = latex.split(r"\begin{", 1)[1].split("}", 2)[-1].rsplit(r"\end{", 1)[0]
    return [[c.strip() for c in row.split("&")] for row in body.replace(r"\hline", "").split(r"\\")]


@pytest.mark.parametrize("step", ["x", "weights_in", "w_o", "qkv", "scores", "scaled_scores", "weights", "output"])
def test_typeset_matrices_hold_the_text_numbers_and_labels(step):
    """The book shows the LaTeX, nbval compares the text: both must say the same, labels included."""
    for m in worked_example_figures.matrices(mha.worked_example(), step):
        text_rows = [line.split() for line in m.text.splitlines()[1:]]
        cells = latex_cells(m.latex)
        assert len(cells) == len(text_rows)
        assert [c.replace(r"\text{", "").rstrip("}") for c in cells[0][1:]] == text_rows[0]  # column labels
        for text_row, latex_row in zip(text_rows[1:], cells[1:]):
            label = latex_row[0].replace(r"\text{", "").rstrip("}")
            assert " ".join(text_row).startswith(label)  # "1 the", "det", "h1.d1"
            assert text_row[-len(latex_row) + 1 :] == latex_row[1:]  # the same numbers, in order


def test_format_matrix_and_latex_use_the_same_numbers():
    ex = mha.worked_example()
    text = worked_example_figures.format_matrix(ex.weights[0], "A1", worked.token_labels(), ex.tokens, row_sums=True)
    latex = worked_example_figures.to_latex(ex.weights[0], "A_1", row_sums=True)
    assert text.splitlines()[0] == "A1  (5 x 5)"
    assert "0.649" in text and "0.088" in text and "1.000" in text
    for line in text.splitlines()[2:]:
        numbers = line.split()[2:]
        assert all(n in latex for n in numbers)
    assert latex.startswith(r"A_1 = \begin{bmatrix} 0.649 & 0.088")
    assert latex.count(r"\\") == 2 * (T - 1)
    labelled = worked_example_figures.to_latex(ex.weights[0], "A_1", worked.token_labels(), ex.tokens, row_sums=True)
    assert labelled.startswith(r"A_1 = \begin{array}{l|rrrrr|r}  & \text{the} & \text{cat}")
    assert r"\text{2 cat} & 0.649 & 0.088 & 0.088 & 0.088 & 0.088 & 1.000" in labelled
    with pytest.raises(ValueError, match=r"labels must match the matrix shape \(5, 5\)"):
        worked_example_figures.to_latex(ex.weights[0], "A_1", ["a"], ex.tokens)
    # Integer matrices print exactly.
    assert worked_example_figures.to_latex(ex.scores[0], "S").startswith(r"S = \begin{bmatrix} 4 & 0 & 0")
    assert worked_example_figures.format_number(-0.0001, False) == "0.000"


def test_matrix_display_has_text_and_latex():
    ex = mha.worked_example()
    items = worked_example_figures.matrices(ex, "weights")
    assert len(items) == 2
    assert repr(items[0]) == items[0].text
    assert items[1]._repr_latex_().startswith(r"$$ A_2 = \begin{array}")
    steps = ["x", "weights_in", "w_o", "qkv", "scores", "scaled_scores", "weights", "head_outputs", "concat", "output"]
    counts = [len(worked_example_figures.matrices(ex, s)) for s in steps]
    assert counts == [1, 6, 1, 6, 2, 2, 2, 2, 1, 1]


def test_show_displays_each_matrix_once(monkeypatch, capsys):
    """The chapter shows every matrix once: typeset in the book, its text form compared by nbval."""
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(obj))
    ex = mha.worked_example()
    worked_example_figures.show(ex, "qkv")
    assert capsys.readouterr().out == ""  # nothing printed besides the displays
    each = {m.text for m in worked_example_figures.matrices(ex, "qkv")}
    texts = [t for m in shown for t in m.text.split("\n\n")]
    assert sorted(texts) == sorted(each)  # every matrix once
    assert all(m._repr_latex_().startswith("$$") and repr(m) == m.text for m in shown)
    # compared matrices side by side: [Q_1, K_1], [Q_2, K_2], [V_1, V_2]
    names = [[line.split("  (")[0] for line in m.text.split("\n") if "(5 x 4)" in line] for m in shown]
    assert names == [["Q head 1", "K head 1"], ["Q head 2", "K head 2"], ["V head 1", "V head 2"]]
    assert all(m._repr_latex_().count(r"\begin{array}") == 2 for m in shown)
    assert [len(worked_example_figures.displayed(ex, s)) for s in ("weights_in", "scores", "weights", "output")] == [
        3,
        2,
        2,
        1,
    ]


def test_errors():
    with pytest.raises(ValueError, match=r"step must be one of"):
        worked_example_figures.matrices(mha.worked_example(), "softmax")
    with pytest.raises(ValueError, match=r"x must have shape \(T, D\) = \(5, 8\), found shape \(5, 4\)"):
        mha.worked_example(torch.zeros(5, 4, dtype=torch.float64))
    with pytest.raises(TypeError, match=r"x must be a torch.Tensor"):
        mha.worked_example([[0.0] * 8] * 5)
    with pytest.raises(TypeError, match=r"x must be a floating-point tensor"):
        mha.worked_example(torch.zeros(5, 8, dtype=torch.long))
    with pytest.raises(ValueError, match=r"temperature must be a positive finite number, found 0"):
        mha.worked_example(temperature=0)
    with pytest.raises(TypeError, match=r"temperature must be a positive number, found str"):
        mha.worked_example(temperature="1")
    with pytest.raises(ValueError, match=r"token must be a token number 1..5"):
        worked.edited_x(token=0)
    with pytest.raises(ValueError, match=r"matrix must have 2 dimensions"):
        worked_example_figures.format_matrix(torch.zeros(2, 2, 2), "M")
    with pytest.raises(ValueError, match=r"labels must match the matrix shape \(2, 2\)"):
        worked_example_figures.format_matrix(torch.zeros(2, 2), "M", ["a"], ["b", "c"])


# ----------------------------------------------------------------------------------------------
# check_row: says which step went wrong
# ----------------------------------------------------------------------------------------------


def right_answers(head, row, ex=None):
    ex = ex or mha.worked_example()
    h, r = head - 1, row - 1
    return dict(
        scores=ex.scores[h, r].tolist(),
        weights=[round(w, 3) for w in ex.weights[h, r].tolist()],
        output=[round(o, 3) for o in ex.head_outputs[h, r].tolist()],
    )


@pytest.mark.parametrize("head", [1, 2])
@pytest.mark.parametrize("row", [1, 2, 3, 4, 5])
def test_check_row_accepts_3_decimal_answers(head, row):
    result = worked.check_row(head, row, **right_answers(head, row))
    assert result.ok and result.first_error is None
    assert repr(result).endswith("all steps given are correct")


def test_check_row_names_the_wrong_step_and_the_slip():
    ex = mha.worked_example()
    good = right_answers(2, 3)
    scaled = ex.scaled_scores[1, 2].tolist()
    r = worked.check_row(2, 3, scores=scaled)
    assert r.first_error == "scores" and "scaled" in repr(r)
    r = worked.check_row(2, 2, scores=ex.scores[1, :, 1].tolist())  # symmetric: column == row
    assert r.ok  # head 2's scores are symmetric, so a column is also right
    r = worked.check_row(1, 2, scores=ex.scores[0, :, 1].tolist())
    assert r.first_error == "scores" and "column 2" in repr(r)
    r = worked.check_row(1, 3, scores=ex.scores[1, 2].tolist())
    assert "head 2's scores" in repr(r)
    r = worked.check_row(2, 3, scores=good["scores"], weights=torch.softmax(ex.scores[1, 2], -1).tolist())
    assert r.first_error == "weights" and "softmax of the raw scores" in repr(r) and "scores   correct" in repr(r)
    r = worked.check_row(2, 3, weights=torch.softmax(ex.scores[1, 2] / 4, -1).tolist())
    assert "divided the scores by d_k = 4" in repr(r)
    r = worked.check_row(2, 3, weights=[0.5, 0.1, 0.6, 0.1, 0.1])
    assert "sums to 1.400" in repr(r)
    wrong_scores = [0, 0, 4, 4, 0]
    r = worked.check_row(
        2, 3, scores=wrong_scores, weights=torch.softmax(torch.tensor(wrong_scores) / 2.0, -1).tolist()
    )
    assert r.first_error == "scores" and "fix the scores first" in repr(r)
    r = worked.check_row(1, 2, output=(ex.weights[0, :, 1] @ ex.v[0]).tolist())
    assert r.first_error == "output" and "column 2 of the weights" in repr(r)
    r = worked.check_row(1, 2, output=(ex.weights[0, 1] @ ex.k[0]).tolist())
    assert "averaged the keys" in repr(r)
    bad_w = torch.tensor([0.2] * 5, dtype=torch.float64)
    r = worked.check_row(1, 2, weights=bad_w.tolist(), output=(bad_w @ ex.v[0]).tolist())
    assert r.first_error == "weights" and "fix the weights first" in repr(r)
    # The hints never print the expected numbers.
    assert "0.649" not in repr(worked.check_row(1, 2, weights=[0.6, 0.1, 0.1, 0.1, 0.1]))


def test_check_row_with_temperature():
    ex = mha.worked_example(temperature=0.5)
    answers = right_answers(1, 2, ex)
    assert worked.check_row(1, 2, example=ex, **answers).ok
    r = worked.check_row(1, 2, example=ex, weights=torch.softmax(ex.scores[0, 1] / 2, -1).tolist())
    assert "temperature" in repr(r)


@pytest.mark.parametrize(
    "args,kwargs,message",
    [
        ((0, 1), {"scores": [0] * 5}, r"head must be 1 or 2 (numbered from 1, as on the page), found 0"),
        ((1, 6), {"scores": [0] * 5}, "row must be a token number 1..5"),
        (("1", 2), {"scores": [0] * 5}, "head must be 1 or 2"),
        ((1, 1), {}, "give at least one of"),
        ((1, 1), {"scores": [0] * 4}, "scores must hold 5 numbers, found shape (4,)"),
        ((1, 1), {"scores": [[0] * 5]}, "scores must hold 5 numbers, found shape (1, 5)"),
        ((1, 1), {"weights": "0.2"}, "weights must be a list of 5 numbers, found the string '0.2'"),
        ((1, 1), {"weights": [0.2, float("nan"), 0.2, 0.2, 0.2]}, "entries [2] are NaN or infinite"),
        ((1, 1), {"output": {"a": 1}}, "output must be a list of 4 numbers, found dict"),
    ],
)
def test_check_row_answers_malformed_input_with_a_message(args, kwargs, message):
    verdict = worked.check_row(*args, **kwargs)  # never raises for a reader's answer
    assert not verdict.ok and verdict.first_error == "input"
    assert message in repr(verdict) and "cannot check this answer" in repr(verdict)


def test_check_row_refuses_a_wrong_example():
    with pytest.raises(TypeError, match="example must be a WorkedExample"):
        worked.check_row(1, 1, scores=[0] * 5, example=torch.zeros(5, 8))


def test_check_temperature():
    boundary = worked.temperature_boundary()
    assert abs(boundary - 2 / math.log(36)) < 1e-12
    # the boundary is where head 1's weight crosses 0.9, computed from the example itself
    assert mha.worked_example(temperature=boundary * 0.999).weights[0, 1, 0] > 0.9
    assert mha.worked_example(temperature=boundary * 1.001).weights[0, 1, 0] < 0.9
    assert worked.check_temperature(0.558).ok and worked.check_temperature(torch.tensor(0.5581)).ok
    assert "correct" in repr(worked.check_temperature(round(boundary, 3)))
    # the verdict states the boundary, not the reader's 2-decimal rounding (false at 0.56: 0.8989)
    assert "below τ = 0.5581 head 1 puts more than 0.9" in repr(worked.check_temperature(0.56))
    assert abs(boundary - 0.5581) < 5e-5
    slips = {
        2 / math.log(9): "four others",
        4 / math.log(36): "raw score 4",
        1 / math.log(36): "divided the score by d_k",
        math.log(36) / 2: "upside down",
        2 / math.log(3.6): "e > 36, not 3.6",
        2 / math.log(40): "not 4 / 0.1 = 40",
        0.3: "sharper than at the boundary",
        1.5: "flatter than at the boundary",
    }
    for answer, hint in slips.items():
        verdict = worked.check_temperature(answer)
        assert not verdict.ok and verdict.first_error == "tau" and hint in repr(verdict), (answer, repr(verdict))
    for bad, message in [
        ("0.558", "found the string '0.558'"),
        (float("nan"), "finite number, found nan"),
        (True, "found bool"),
        (torch.zeros(2), "found a tensor of shape (2,)"),
        ([0.558], "found list"),
    ]:
        verdict = worked.check_temperature(bad)
        assert verdict.first_error == "input" and message in repr(verdict), (bad, repr(verdict))


def test_check_output_row():
    ex = mha.worked_example()
    for t in range(1, 6):
        assert worked.check_output_row(t, [round(v, 3) for v in ex.output[t - 1].tolist()]).ok
    h1, h2 = ex.head_outputs[0, 1], ex.head_outputs[1, 1]
    slips = {
        "concatenation": ex.concat[1],
        "halves are swapped": torch.cat([h1 - h2, h1 + h2]),
        "head 1 - head 2": torch.cat([h1 + h2, h2 - h1]),
        "I above -I": torch.cat([h1 + h2, h1 + h2]),
        "entries 8 (o8) are off": torch.cat([h1 + h2, h1 - h2]) + torch.tensor([0.0] * 7 + [1.0], dtype=torch.float64),
    }
    for hint, answer in slips.items():
        verdict = worked.check_output_row(2, answer.tolist())
        assert not verdict.ok and verdict.first_error == "output" and hint in repr(verdict), repr(verdict)
    for row, answer, message in [
        (2, [1.0, 2.0], "output must hold 8 numbers, found shape (2,)"),
        (2, "0.849 1.007", "found the string"),
        (2, [float("nan")] * 8, "are NaN or infinite"),
        (9, ex.output[1].tolist(), "row must be a token number 1..5"),
    ]:
        verdict = worked.check_output_row(row, answer)
        assert verdict.first_error == "input" and message in repr(verdict)


# ----------------------------------------------------------------------------------------------
# Explorer
# ----------------------------------------------------------------------------------------------


def test_explorer_grid_is_small_and_renders():
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    from mha.viz.widgets import frame_count

    assert frame_count(worked_edit.EXPLORER_CONTROLS) <= 30
    fig = worked_example_figures.render_explorer(dog_type="verb", temperature=0.5)
    try:
        assert isinstance(fig, Figure)
        assert [ax.get_title() for ax in fig.axes[:2]] == ["head 1 (previous token)", "head 2 (same type)"]
    finally:
        plt.close(fig)


def test_explorer_opens_on_the_page_example():
    """The explorer opens on the text's case; its temperature slider grows to the right."""
    first = dict(worked_edit.EXPLORER_INITIAL)
    assert first == {"dog_type": "noun", "temperature": 1}
    assert all(first[name] in values for name, values in worked_edit.EXPLORER_CONTROLS.items())
    assert worked_edit.EXPLORER_CONTROLS["temperature"] == sorted(worked_edit.EXPLORER_CONTROLS["temperature"])
    assert torch.equal(worked_edit.explorer_example(**first).weights, mha.worked_example().weights)
    assert set(worked_edit.EXPLORER_CONTROLS["dog_type"]) == {"det", "noun", "verb", "none"}  # one type at a time


def test_explorer_text_is_readable():
    """Every text in a frame is at least 9 pt, i.e. 10 px at the 80 dpi frames are stored at, and
    the frame is narrower than the book's text column, so the page shows it unscaled."""
    import matplotlib.pyplot as plt
    import matplotlib.text

    from mha.viz.widgets import FRAME_DPI

    fig = worked_example_figures.render_explorer("none", 0.25)
    try:
        texts = [t for t in fig.findobj(matplotlib.text.Text) if t.get_text().strip()]
        assert min(t.get_fontsize() for t in texts) >= 9
        assert worked_example_figures.PANEL_FONTSIZE * FRAME_DPI / 72 >= 12  # the step panel: 12 px or more
        width_px = fig.get_tightbbox().width * FRAME_DPI
        assert width_px <= 700, width_px
    finally:
        plt.close(fig)


def test_explorer_data():
    verb_dog = worked_edit.explorer_example("verb")
    assert torch.equal(verb_dog.x[4, :3], torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64))
    assert verb_dog.weights[1, 4].argmax().item() == 2  # head 2: dog, now a verb, looks at saw
    assert torch.equal(verb_dog.weights[0], mha.worked_example().weights[0])  # head 1 ignores types
    assert worked_edit.explorer_example().output.equal(mha.worked_example().output)
    sharp = worked_edit.explorer_example(temperature=0.5)
    assert sharp.weights[0, 1, 0] > mha.worked_example().weights[0, 1, 0]
    alt = worked_edit.explorer_alt("verb", temperature=1)
    assert "head 2: dog's largest weight 0.42 on token 3 (saw) and 5 (dog)" in alt
    summary = worked_example_figures.explorer_summary(verb_dog)
    assert summary.splitlines()[0] == "token 5 (dog): det 0, noun 0, verb 1; temperature 1"
    assert summary.splitlines()[5].split() == [
        "A",
        "0.088",
        "0.088",
        "0.088",
        "0.649",
        "0.088",
        "0.056",
        "0.056",
        "0.416",
        "0.056",
        "0.416",
    ]
    det_dog = worked_edit.explorer_example("det")
    assert [f"{w:.3f}" for w in det_dog.weights[1, 4, [0, 3, 4]].tolist()] == [
        "0.306"
    ] * 3  # three determiners: e²/(3e² + 2)
    none_dog = worked_edit.explorer_example("none")
    assert torch.allclose(none_dog.weights[1, 4], torch.full((5,), 0.2, dtype=torch.float64))  # uniform
    with pytest.raises(ValueError, match=r"dog_type must be one of \['noun', 'verb', 'det', 'none'\], found 'adj'"):
        worked_edit.explorer_example("adj")


def test_check_row_honours_2_decimals():
    ex = mha.worked_example()
    exact = ex.head_outputs[1, 1].tolist()
    for answer in (exact, [round(o, 3) for o in exact], [round(o, 2) for o in exact]):
        assert worked.check_row(2, 2, output=answer).ok, answer
    assert worked.check_row(2, 2, output=[0.112, 0.831, 0.056, 3.360]).ok  # from the page's rounded weights
    r = worked.check_row(2, 2, output=[round(o, 1) for o in exact])  # one decimal fewer
    assert not r.ok and r.first_error == "output" and "give 2 decimals" in repr(r) and "hint" not in repr(r)
    assert "0.11" not in repr(r) and "3.36" not in repr(r)
    r = worked.check_row(2, 2, weights=[0.06, 0.41, 0.06, 0.06, 0.41])  # one unit off at 0.416
    assert r.first_error == "weights" and "off by one" in repr(r) and "hint" not in repr(r)
    r = worked.check_row(2, 2, output=(ex.weights[1, 1] @ ex.k[1]).tolist())  # wrong: the method
    assert r.first_error == "output" and "averaged the keys" in repr(r)
    assert worked.check_row(2, 2, output=[0.11, "x", 0.06, 3.36]).first_error == "input"


def test_check_temperature_honours_2_decimals():
    boundary = worked.temperature_boundary()  # 0.5581
    for answer in (boundary, 0.558, 0.56):
        assert worked.check_temperature(answer).ok, answer
    r = worked.check_temperature(0.6)  # one decimal fewer
    assert r.first_error == "tau" and "close: give 2 decimals (found 0.6" in repr(r) and "hint" not in repr(r)
    assert "0.56" not in repr(r) and "0.558" not in repr(r)
    r = worked.check_temperature(0.57)  # one unit off
    assert r.first_error == "tau" and "off by one" in repr(r) and "hint" not in repr(r)
    assert "not 4 / 0.1 = 40" in repr(worked.check_temperature(0.54))  # a slip, told apart at 2 decimals
    assert "flatter than at the boundary" in repr(worked.check_temperature(0.7))
    assert worked.check_temperature([0.56]).first_error == "input"


def test_check_output_row_honours_2_decimals():
    ex = mha.worked_example()
    exact = ex.output[1].tolist()
    for answer in (exact, [round(o, 3) for o in exact], [round(o, 2) for o in exact]):
        assert worked.check_output_row(2, answer).ok, answer
    r = worked.check_output_row(2, [round(o, 1) for o in exact])  # one decimal fewer
    assert r.first_error == "output" and "give 2 decimals" in repr(r) and "hint" not in repr(r)
    off = [round(o, 2) for o in exact]
    off[3] += 0.01
    r = worked.check_output_row(2, off)  # one unit off in one entry
    assert r.first_error == "output" and "entries 4 (o4)" in repr(r) and "off by one" in repr(r)
    assert "multiply it by W^O" in repr(worked.check_output_row(2, ex.concat[1].tolist()))  # wrong: the method
    assert worked.check_output_row(2, [1.0, 2.0]).first_error == "input"


def test_check_row_names_weights_rounded_before_the_sum():
    """An output summed from weights already rounded to 2 decimals is off in the second decimal."""
    for head, row, output in ((1, 2, [0.74, 0.18, 0.09, 1.91]), (2, 2, [0.12, 0.84, 0.06, 3.42])):
        verdict = worked.check_row(head, row, output=output)
        assert verdict.first_error == "output", verdict
        assert "weights rounded to 2 decimals" in " ".join(repr(verdict).split()), verdict
    assert worked.check_row(2, 2, output=[0.112, 0.831, 0.056, 3.359]).ok  # the unrounded sum
