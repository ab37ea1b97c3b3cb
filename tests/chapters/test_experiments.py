"""Tests for the single-head-limits chapter's experiment: the task, the model, reproducibility and the cached grid."""

import re

import pytest
import torch
from conftest import skip_or_fail

import mha
from mha import provenance
from mha.chapters.heads import figures as heads_figures
from mha.chapters.heads import head_count as E
from mha.chapters.heads import readout as R
from mha.chapters.heads import single_head
from mha.chapters.heads import task as relation_task

# ---------------------------------------------------------------- the task


@pytest.mark.parametrize("num_relations", [1, 2, 4])
@pytest.mark.parametrize("seed", [0, 3])
def test_labels_are_the_tokens_at_the_offsets(num_relations, seed):
    task = relation_task.make_task(num_relations, num_train=64, num_test=16, seed=seed)
    assert task.offsets == tuple(range(1, num_relations + 1))
    for x, y in ((task.train_x, task.train_y), (task.test_x, task.test_y)):
        assert y.shape == (*x.shape, num_relations)
        for n in range(x.shape[0]):
            for t in range(x.shape[1]):
                for i, offset in enumerate(task.offsets):
                    expected = x[n, t - offset].item() if t >= num_relations else -100
                    assert y[n, t, i].item() == expected


def test_custom_offsets_and_scored_positions():
    x = torch.tensor([[5, 6, 7, 8, 9]])
    y = relation_task.relation_targets(x, (1, 3))
    assert y[0, :3].tolist() == [[-100, -100]] * 3  # t < 3: offset 3 reaches before the start
    assert y[0, 3].tolist() == [7, 5]
    assert y[0, 4].tolist() == [8, 6]


def test_task_is_a_function_of_its_seed():
    a, b, c = relation_task.make_task(3, seed=1), relation_task.make_task(3, seed=1), relation_task.make_task(3, seed=2)
    assert torch.equal(a.train_x, b.train_x) and torch.equal(a.test_x, b.test_x)
    assert not torch.equal(a.train_x, c.train_x)
    assert not torch.equal(a.train_x[: a.test_x.shape[0]], a.test_x)  # test set is a fresh draw
    assert 0 <= int(a.train_x.min()) and int(a.train_x.max()) < relation_task.VOCAB_SIZE


def test_task_errors():
    with pytest.raises(ValueError, match=r"offsets must be 2 distinct ints >= 1, found \(1, 1\)"):
        relation_task.make_task(2, offsets=(1, 1))
    with pytest.raises(ValueError, match=r"seq_len \(4\) must be larger than the largest offset \(4\)"):
        relation_task.make_task(4, seq_len=4)
    with pytest.raises(ValueError, match="num_relations must be a positive int, found 0"):
        relation_task.make_task(0)


# ---------------------------------------------------------------- the model


@pytest.mark.parametrize("readout", ["linear", "mlp"])
def test_same_parameter_count_for_every_head_count(readout):
    task = relation_task.make_task(4, num_train=8, num_test=8)
    counts = {h: mha.count_params(relation_task.make_model(h, task, readout=readout)) for h in (1, 2, 4, 8, 16, 32)}
    assert len(set(counts.values())) == 1
    model = relation_task.make_model(4, task, readout=readout)
    assert mha.count_params(model.attention) == mha.attention_params(32, 4) == 4 * 32 * 32 + 4 * 32


def test_model_shapes_and_weights():
    task = relation_task.make_task(3, num_train=8, num_test=8)
    model = relation_task.make_model(4, task, seed=0)
    logits, weights = model(task.test_x[:5])
    assert logits.shape == (5, relation_task.SEQ_LEN, 3, relation_task.VOCAB_SIZE)
    assert weights.shape == (5, 4, relation_task.SEQ_LEN, relation_task.SEQ_LEN)
    assert torch.allclose(weights.sum(-1), torch.ones(5, 4, relation_task.SEQ_LEN))
    assert torch.all(weights.triu(1) == 0)  # causal: no query sees a later key


def test_model_weights_depend_on_seed_only():
    task = relation_task.make_task(2, num_train=8, num_test=8)
    torch.manual_seed(123)
    a = relation_task.make_model(2, task, seed=5)
    state = torch.random.get_rng_state()
    b = relation_task.make_model(2, task, seed=5)
    assert torch.equal(torch.random.get_rng_state(), state)  # the caller's RNG is left alone
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(p, q), name


def test_pluggable_attention():
    task = relation_task.make_task(2, num_train=64, num_test=16)
    batched = relation_task.make_model(2, task, seed=0)
    looped = relation_task.make_model(2, task, seed=0, attention=lambda d, h: mha.LoopedMultiHeadAttention(d, h))
    assert isinstance(looped.attention, mha.LoopedMultiHeadAttention)
    # copy every weight: the looped model must then compute exactly what the batched one does
    looped.attention = mha.LoopedMultiHeadAttention.from_multi_head(batched.attention)
    rest = {k: v for k, v in batched.state_dict().items() if not k.startswith("attention.")}
    looped.load_state_dict(rest, strict=False)
    logits_a, weights_a = looped(task.test_x[:3])
    logits_b, weights_b = batched(task.test_x[:3])
    assert torch.allclose(logits_a, logits_b, atol=1e-5) and torch.allclose(weights_a, weights_b, atol=1e-6)
    result = relation_task.train_and_evaluate(looped, task, steps=5, seed=0)
    assert result["num_heads"] == 2 and result["example_weights"].shape == (
        2,
        relation_task.SEQ_LEN,
        relation_task.SEQ_LEN,
    )
    assert result["attention_params"] == mha.attention_params(32, 2)


def test_model_errors():
    task = relation_task.make_task(2, num_train=8, num_test=8)
    with pytest.raises(ValueError, match="readout must be 'linear' or 'mlp', found 'conv'"):
        relation_task.make_model(2, task, readout="conv")
    with pytest.raises(ValueError, match=r"d_model \(32\) must be divisible by num_heads \(3\)"):
        relation_task.make_model(3, task)
    with pytest.raises(ValueError, match="steps must be a positive int, found 0"):
        relation_task.train_and_evaluate(relation_task.make_model(1, task), task, steps=0)
    with pytest.raises(ValueError, match="readout_width must be a positive int, found 0"):
        relation_task.make_model(1, task, readout_width=0)
    with pytest.raises(ValueError, match=r"readout_width \(512\) applies to the MLP readout, found readout='linear'"):
        relation_task.make_model(1, task, readout="linear", readout_width=512)


def test_readout_width():
    """The control's wider readout: only the MLP's hidden layer changes; the default is 4 d_model."""
    task = relation_task.make_task(4, num_train=8, num_test=8)
    default = relation_task.make_model(1, task)
    same = relation_task.make_model(1, task, readout_width=4 * relation_task.D_MODEL)
    wide = relation_task.make_model(1, task, readout_width=512)
    for p, q in zip(default.state_dict().values(), same.state_dict().values()):
        assert torch.equal(p, q)  # naming the default width builds the very same model
    assert [m.out_features for m in wide.readout if isinstance(m, torch.nn.Linear)] == [512, 4 * 16]
    extra = (512 - 128) * (32 + 1) + (512 - 128) * 4 * 16  # first layer's weights and biases, second's weights
    assert mha.count_params(wide) - mha.count_params(default) == extra
    assert mha.count_params(wide.attention) == mha.count_params(default.attention)
    r = E.head_count_experiment(1, num_relations=2, steps=5, readout_width=64)
    assert r["readout_width"] == 64 and E.head_count_experiment(1, num_relations=2, steps=5)["readout_width"] == 128
    assert E.head_count_experiment(1, num_relations=2, steps=5, readout="linear")["readout_width"] is None


# ---------------------------------------------------------------- training


def test_training_is_deterministic_and_silent(capsys):
    torch.set_num_threads(2)
    a = E.head_count_experiment(2, num_relations=2, steps=40, seed=1)
    b = E.head_count_experiment(2, num_relations=2, steps=40, seed=1)
    assert torch.get_num_threads() == 2  # restored after training
    assert a["accuracy"] == b["accuracy"] and a["loss"] == b["loss"]
    assert torch.equal(a["example_weights"], b["example_weights"])
    c = E.head_count_experiment(2, num_relations=2, steps=40, seed=2)
    assert c["loss"] != a["loss"]
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def test_a_curve_point_is_the_shorter_run():
    """One long run gives every budget: its point at s steps is a run of s steps, bit for bit."""
    long = E.head_count_experiment(2, num_relations=2, steps=60, seed=1, checkpoints=(20, 60))
    short = E.head_count_experiment(2, num_relations=2, steps=20, seed=1)
    point = long["curve"][0]
    assert point["steps"] == 20 and point["accuracy"] == short["accuracy"] and point["loss"] == short["loss"]
    assert point["train_accuracy"] == short["train_accuracy"]
    assert long["curve"][1]["accuracy"] == long["accuracy"] and long["steps"] == 60
    assert short["curve"] == []


def test_training_argument_errors():
    task = relation_task.make_task(2, num_train=8, num_test=8)
    model = relation_task.make_model(1, task)
    with pytest.raises(ValueError, match=r"checkpoints must not exceed steps \(5\), found 6"):
        relation_task.train_and_evaluate(model, task, steps=5, checkpoints=(2, 6))
    with pytest.raises(TypeError, match="checkpoints must be step counts"):
        relation_task.train_and_evaluate(model, task, steps=5, checkpoints=("a",))
    with pytest.raises(ValueError, match="lr must be a number in"):
        relation_task.train_and_evaluate(model, task, steps=5, lr=0)
    assert relation_task.check_checkpoints([5, 1, 5], 5) == (1, 5)


def test_evaluate_counts_a_position_only_when_all_answers_are_right():
    task = relation_task.make_task(2, num_train=8, num_test=4)

    class Oracle(torch.nn.Module):
        """Returns the right answer for relation 0 and a wrong one for relation 1 at position 5."""

        def __init__(self):
            super().__init__()
            self.dummy = torch.nn.Parameter(torch.zeros(1))

        def forward(self, x):
            y = relation_task.relation_targets(x, (1, 2)).clamp_min(0)
            y[:, 5, 1] = (y[:, 5, 1] + 1) % relation_task.VOCAB_SIZE
            return torch.nn.functional.one_hot(y, relation_task.VOCAB_SIZE).float(), None

    result = relation_task.evaluate(Oracle(), task.test_x, task.test_y)
    scored = relation_task.SEQ_LEN - 2
    assert result["accuracy"] == pytest.approx((scored - 1) / scored)
    assert result["relation_accuracy"] == pytest.approx([1.0, (scored - 1) / scored])


# ---------------------------------------------------------------- the cached grid


def test_cached_model_is_the_trained_one():
    if not E.MODEL_PATH.exists():
        skip_or_fail("run scripts/make_ch01_cache.py")
    model, tokens, labels = E.trained_model()
    task = relation_task.make_task(4, seed=0)
    assert torch.equal(tokens, task.test_x[0]) and labels == relation_task.token_labels(tokens)
    assert labels[0] == f"0:{chr(ord('a') + int(tokens[0]))}"
    accuracy = relation_task.evaluate(model, task.test_x, task.test_y)["accuracy"]
    # the same weights: on another CPU a near-tie may flip an argmax or two of the ~4,000 scored positions
    assert abs(accuracy - E.cached_run(2, seed=0)["accuracy"]) <= 3 / 4096
    weights, _ = E.cached_maps(2, seed=0)
    assert torch.allclose(relation_task.attention_maps(model, tokens), weights, atol=6e-4)


def test_cache_matches_a_fresh_run():
    cached = E.cached_run(1, seed=0, num_relations=2, readout="linear")
    fresh = E.head_count_experiment(1, seed=0, num_relations=2, readout="linear")
    # identical on the machine that wrote the cache; on another CPU training ends elsewhere, within
    # the band measured on emulated CPUs (scripts/measure_portability.py)
    assert provenance.in_band("ch01.linear_k2_heads1", fresh["accuracy"])
    assert provenance.in_band("ch01.linear_k2_heads1", cached["accuracy"])
    assert fresh["params"] == cached["params"]


def test_grid_is_complete_and_consistent():
    grid = E.load_grid()
    keys = {(r["readout"], r["num_relations"], r["num_heads"], r["seed"]) for r in grid["runs"]}
    assert keys == set(E.grid_runs()) and len(grid["runs"]) == len(keys)
    assert grid["config"]["steps"] == relation_task.STEPS and grid["config"]["d_model"] == relation_task.D_MODEL
    for readout in E.GRID_SEEDS:  # the head count never changes the parameter count
        for k in E.GRID_RELATIONS:
            assert len({r["params"] for r in grid["runs"] if (r["readout"], r["num_relations"]) == (readout, k)}) == 1
    assert {r["attention_params"] for r in grid["runs"]} == {mha.attention_params(32, 1)}
    summary = E.grid_summary("mlp")
    s = summary[(4, 1)]
    runs = [E.cached_run(1, seed=seed)["accuracy"] for seed in E.GRID_SEEDS["mlp"]]
    assert s["mean"] == pytest.approx(sum(runs) / 3) and (s["min"], s["max"]) == (min(runs), max(runs))
    # the function's documented defaults meet the bar the page's claim needs on the cached numbers:
    # two heads reach 0.9, one head stays at least 0.2 below them
    assert E.cached_run(2)["accuracy"] >= 0.9
    assert E.cached_run(1)["accuracy"] <= E.cached_run(2)["accuracy"] - 0.2


def test_curves_are_complete_and_agree_with_the_grid():
    grid = E.load_grid()
    keys = {(c["readout"], c["num_relations"], c["num_heads"], c["seed"], c["steps"]) for c in grid["curves"]}
    assert keys == set(E.curve_runs()) and len(grid["curves"]) == len(keys)
    for c in grid["curves"]:
        budgets = [p["steps"] for p in c["curve"]]
        assert budgets == [s for s in E.CURVE_STEPS if s <= c["steps"]]
        # the grid's 1,500-step runs are the curves' 1,500-step points (same seeds), to the last digit
        if c["seed"] in E.GRID_SEEDS[c["readout"]]:
            run = E.cached_run(c["num_heads"], seed=c["seed"], num_relations=c["num_relations"], readout=c["readout"])
            point = next(p for p in c["curve"] if p["steps"] == 1500)
            assert (point["accuracy"], point["train_accuracy"]) == (run["accuracy"], run["train_accuracy"])
    assert grid["provenance"]["settings"]["curve_steps"] == list(E.CURVE_STEPS)


def test_curve_summary_and_table():
    summary = E.curve_summary(1, num_relations=4)
    assert list(summary) == [s for s in E.CURVE_STEPS if s <= E.CURVE_SETTINGS[("mlp", 4, 1)]]
    runs = E.cached_curves(1, num_relations=4)
    values = [next(p["accuracy"] for p in r["curve"] if p["steps"] == 6000) for r in runs]
    s = summary[6000]
    assert s["values"] == values and s["min"] == min(values) and s["median"] == sorted(values)[2]
    table = E.format_curves([("mlp", 4, 1), ("mlp", 4, 2)]).splitlines()
    assert len(table) == 1 + 3 + 2  # h = 2 stops at 6,000 steps: no 24,000 row
    assert table[0].split()[:4] == ["readout", "r", "h", "steps"]  # r relations, as on the notation page
    assert table[3].split()[:4] == ["mlp", "4", "1", "24,000"] and table[-1].split()[:4] == ["mlp", "4", "2", "6,000"]
    with pytest.raises(KeyError, match="no cached curves for num_heads=3"):
        E.cached_curves(3)


@pytest.mark.parametrize("num_heads", E.GRID_HEADS)
def test_cached_maps_are_attention_weights(num_heads):
    weights, labels = E.cached_maps(num_heads, seed=1)
    assert (
        weights.shape == (num_heads, relation_task.SEQ_LEN, relation_task.SEQ_LEN)
        and len(labels) == relation_task.SEQ_LEN
    )
    assert torch.allclose(weights.sum(-1), torch.ones(num_heads, relation_task.SEQ_LEN, dtype=torch.float64), atol=3e-3)
    assert torch.all(weights.triu(1) == 0)
    profile = E.offset_profile(weights)
    assert profile.shape == (num_heads, 5) and torch.all(profile <= 1.0 + 1e-9)


def test_offset_profile_by_hand():
    weights = torch.zeros(2, 6, 6, dtype=torch.float64)
    for t in range(6):
        weights[0, t, max(t - 1, 0)] = 1.0  # head 1: the previous token
        weights[1, t, 0] = 1.0  # head 2: the first token
    profile = E.offset_profile(weights, max_offset=2)
    assert profile[0].tolist() == [0.0, 1.0, 0.0]
    assert profile[1].tolist() == [0.0, 0.0, 0.25]  # queries 2..5; only query 2 looks 2 back at 0


def test_cache_lookup_errors():
    with pytest.raises(KeyError, match="no cached run for num_heads=3, seed=0"):
        E.cached_run(3)
    with pytest.raises(KeyError, match="no cached attention maps for num_heads=2, seed=9"):
        E.cached_maps(2, seed=9)


def test_format_grid():
    summary = {
        (1, 1): {"mean": 1.0, "min": 1.0, "max": 1.0, "seeds": 1},
        (1, 2): {"mean": 0.5, "min": 0.4, "max": 0.6, "seeds": 2},
    }
    text = E.format_grid(summary)
    assert text.splitlines()[0].split() == ["r", "\\", "h", "1", "2"]  # rows: relations r; columns: heads h
    assert text.splitlines()[1].split() == ["1", "1.00", "±", "0.00", "0.50", "±", "0.10"]
    assert E.format_grid(summary, spread=False).splitlines()[1].split() == ["1", "1.00", "0.50"]


# ---------------------------------------------------------------- the hand-built single head


@pytest.mark.parametrize("split", [0.0, 0.1, 0.3, 0.5, 0.8, 1.0])
def test_two_sentences_by_hand(split):
    r = single_head.two_sentences(split)
    expected = torch.tensor([split, 1 - split], dtype=torch.float64)
    assert torch.allclose(r["output"], expected, atol=1e-9)
    assert torch.allclose(r["output_swapped"], expected.flip(0), atol=1e-9)
    assert r["distance"] == pytest.approx(abs(2 * split - 1) * 2**0.5, abs=1e-9)
    assert torch.allclose(r["weights"][1], torch.tensor([split, 0.0, 1 - split], dtype=torch.float64), atol=1e-9)
    assert torch.allclose(r["weights"].sum(-1), torch.ones(3, dtype=torch.float64))


def test_even_split_loses_the_order():
    r = single_head.two_sentences(0.5)
    assert torch.equal(r["output"], r["output_swapped"]) and r["distance"] == 0.0


@pytest.mark.parametrize("prefer_cat", [0.0, 0.3, 0.7, 1.0])
def test_content_only_keys_lose_the_order(prefer_cat):
    out_a, w_a = single_head.content_only(prefer_cat, single_head.SENTENCE)
    out_b, w_b = single_head.content_only(prefer_cat, single_head.SWAPPED)
    assert torch.allclose(out_a[1], out_b[1], atol=1e-12)  # the verb cannot tell the sentences apart
    assert torch.allclose(out_a[1], torch.tensor([prefer_cat, 1 - prefer_cat], dtype=torch.float64), atol=1e-9)
    assert torch.allclose(w_a[1, [0, 2]], w_b[1, [2, 0]], atol=1e-12)  # the weight follows the word


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_attention_without_positions_is_permutation_equivariant(seed):
    assert single_head.permutation_gap(seed) < 1e-12
    assert single_head.permutation_gap(seed, positions=True) > 0.1
    assert single_head.permutation_gap(seed, causal=True) > 0.1  # the causal mask is positional information


def test_split_errors():
    with pytest.raises(ValueError, match="split must be in \\[0, 1\\], found 1.5"):
        single_head.two_sentences(1.5)
    with pytest.raises(TypeError, match="split must be a number in \\[0, 1\\], found str"):
        single_head.two_sentences("half")


def test_split_alt_text():
    assert single_head.split_alt(0.3) == (
        "The verb puts weight 0.3 on 'cat' and 0.7 on 'mouse'; its output is [0.3, 0.7] in "
        "'cat chases mouse' and [0.7, 0.3] in 'mouse chases cat'."
    )


def test_figures():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for fig in (
        heads_figures.render_split(0.2),
        heads_figures.render_head_maps(8, seed=2),
        heads_figures.plot_accuracy_vs_heads(),
        heads_figures.plot_grid("linear"),
    ):
        assert isinstance(fig, matplotlib.figure.Figure) and fig.axes
        assert all(ax.get_title() for ax in fig.axes if ax.get_visible() and ax.axison)
        plt.close(fig)
    assert E.head_maps_alt(4, seed=0).startswith("4 heads, seed 0: head 1 attends mostly to the tokens ")


def test_accuracy_vs_heads_readouts():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    both = heads_figures.plot_accuracy_vs_heads(4)
    mlp_only = heads_figures.plot_accuracy_vs_heads(4, readouts=("mlp",))
    labels = [[t.get_text() for t in fig.axes[0].get_legend().get_texts()] for fig in (both, mlp_only)]
    assert labels == [["MLP readout (3 seeds)", "linear readout (1 seed)"], ["MLP readout (3 seeds)"]]
    assert mlp_only.axes[0].get_title() == "Copying r = 4 tokens at once, after 1,500 steps"  # budget named
    assert mlp_only.axes[0].get_ylabel() == "held-out accuracy (all r answers right)"
    plt.close("all")
    for bad in ((), ("lstm",)):
        with pytest.raises(ValueError, match="readouts must be"):
            heads_figures.plot_accuracy_vs_heads(4, readouts=bad)


# ---------------------------------------------------------------- exercise checkers

MALFORMED = ["half", float("nan"), [0.1, 0.2, 0.3], True, {"a": 1}]


def test_check_split():
    assert single_head.check_split(0.8, [0.8, 0.2], [0.2, 0.8], 0.6 * 2**0.5).ok
    assert single_head.check_split(0.8, output=(0.8, 0.2)).ok  # parts may be left out
    r = single_head.check_split(0.8, [0.2, 0.8])
    assert not r.ok and r.first_error == "output" and "first* word" in repr(r)
    assert "even split" in repr(single_head.check_split(0.8, [0.5, 0.5]))
    assert "sqrt(2)" in repr(single_head.check_split(0.8, distance=0.6))
    assert "L1" in repr(single_head.check_split(0.8, distance=1.2))
    assert "square root" in repr(single_head.check_split(0.8, distance=0.72))
    for bad in MALFORMED:
        r = single_head.check_split(0.8, output=bad)
        assert not r.ok and "output" in repr(r) and "hint" in repr(r)
    for bad in ("x", 1.5, float("nan")):
        r = single_head.check_split(bad, output=[0.8, 0.2])
        assert not r.ok and r.first_error == "split"
    assert "nothing to check" in repr(single_head.check_split(0.8))


def test_check_split_honours_the_stated_precision_of_the_distance():
    assert single_head.DISTANCE_DECIMALS == 2  # the exercise asks "to 2 decimals"
    for right in (0.6 * 2**0.5, 0.8485, 0.85):  # exact, more digits, rounded to 2 decimals
        r = single_head.check_split(0.8, distance=right)
        assert r.ok and "distance: correct" in repr(r), repr(r)
    r = single_head.check_split(0.8, distance=0.8)  # one decimal fewer
    assert not r.ok and r.first_error == "distance" and "close: give 2 decimals (found 0.8" in repr(r)
    assert "subtract the two vectors" not in repr(r) and "hint" not in repr(r) and "0.85" not in repr(r)
    r = single_head.check_split(0.8, distance=0.84)  # one unit off: rounded too early
    assert "close" in repr(r) and "only at the end" in repr(r) and "hint" not in repr(r)
    r = single_head.check_split(0.8, distance=0.5)  # wrong: the method
    assert r.first_error == "distance" and "subtract the two vectors, square, add, take the root" in repr(r)
    for bad, words in (("0.85", "found str"), (float("nan"), "finite"), ([0.85, 0.1], "found shape")):
        r = single_head.check_split(0.8, distance=bad)
        assert not r.ok and r.first_error == "distance" and words in repr(r), repr(r)


def test_check_content_only():
    assert single_head.check_content_only(0.7, [0.7, 0.3], [0.7, 0.3]).ok
    r = single_head.check_content_only(0.7, [0.7, 0.3], [0.3, 0.7])
    assert not r.ok and r.first_error == "output_swapped" and "positions in the keys" in repr(r)
    assert "weight p is on cat" in repr(single_head.check_content_only(0.7, [0.3, 0.7]))
    for bad in MALFORMED:
        assert not single_head.check_content_only(0.7, bad).ok
    assert not single_head.check_content_only("0.7", [0.7, 0.3]).ok


def test_heads_cancel_each_others_interference():
    """The counterexample to "some head must give the relation more than 1/2": heads (0.45, 0.45, 0.1)
    and (0, 0.5, 0.5) on offsets 1-3, readout head1 - 0.9 head2, read relation 1 on every input."""
    weights = ((0.0, 0.45, 0.45, 0.1), (0.0, 0.0, 0.5, 0.5))
    assert max(max(row[1:]) for row in weights) <= 0.5
    beta = torch.tensor(weights[0], dtype=torch.float64) - 0.9 * torch.tensor(weights[1], dtype=torch.float64)
    assert R.reads_on_every_input(beta, 1, vocab_size=6)
    assert not any(R.reads_on_every_input(row, 1, vocab_size=6) for row in weights)  # neither head alone
    assert R.readable_relations(weights) == [1]
    assert R.readout_combination(weights, 1) is not None


def test_exercise_4_reads_relations_1_and_3():
    """(1/6)(-head1) + head2 reads relation 3 on all 16^4 = 65,536 inputs; relation 2 is not readable."""
    w = torch.tensor(R.EXERCISE_WEIGHTS, dtype=torch.float64)
    assert R.reads_on_every_input(-w[0] / 6 + w[1], 3, vocab_size=16)
    assert R.readable_relations(R.EXERCISE_WEIGHTS) == [1, 3]
    for o in (1, 3):  # the combination the function finds reads it too
        c = R.readout_combination(R.EXERCISE_WEIGHTS, o)
        assert R.reads_on_every_input(c @ w, o, vocab_size=8)
    # relation 2: its column (0.3, 0.45) = y0 a0 + y1 a1 + y3 a3 with every |y| <= 1, a certificate that no
    # combination c reads it (c . a2 = sum y_j c . a_j <= sum |c . a_j|)
    y1 = (0.3 - 0.05) / (0.6 - 0.05 * 0.1 / 0.45)
    y3 = (0.45 - 0.1 * y1) / 0.45
    assert torch.allclose(y1 * w[:, 1] + y3 * w[:, 3], w[:, 2]) and max(abs(y1), abs(y3)) <= 1
    assert R.readout_combination(R.EXERCISE_WEIGHTS, 2) is None


def test_readable_relations_one_head_is_the_majority_rule():
    gen = torch.Generator().manual_seed(0)
    for _ in range(200):
        row = torch.rand(5, generator=gen, dtype=torch.float64) ** 3
        row = row / row.sum()
        assert R.readable_relations([row.tolist()]) == [o for o in range(1, 5) if row[o] > 0.5]
    assert R.readable_relations([[0.0, 0.5, 0.5]]) == []  # a tie reads neither on every input
    assert R.readable_relations([[0.0, 1.0, 0.0]]) == [1]


def test_readable_relations_agrees_with_a_scan_of_combinations():
    """Two heads: scanning 20,001 directions of (c1, c2) finds a reading combination exactly when the
    function does (margins within 1e-6 of zero are left out); never more relations than heads."""
    import math

    gen = torch.Generator().manual_seed(1)
    angles = torch.linspace(0, 2 * math.pi, 20_001, dtype=torch.float64)
    directions = torch.stack([angles.cos(), angles.sin()], dim=1)  # (N, 2)
    for _ in range(100):
        w = torch.rand(2, 5, generator=gen, dtype=torch.float64) ** 2
        w = w / w.sum(dim=1, keepdim=True) * 0.9  # 0.1 left for a token further back
        table = torch.cat([w, torch.full((2, 1), 0.1, dtype=torch.float64)], dim=1)
        beta = directions @ table  # (N, 6)
        readable = R.readable_relations(w)
        assert len(readable) <= 2
        for o in range(1, 5):
            margin = float((2 * beta[:, o] - beta.abs().sum(dim=1)).max())
            if abs(margin) > 1e-6:
                assert (margin > 0) == (o in readable)


def test_the_residual_can_cancel_the_token_itself():
    """One head (0.3, 0.4, 0.3): without the residual offset 1 holds less than half; with it, the readout
    can cancel offset 0 and read offset 1 (0.4 > 0.3) on every input."""
    weights = [[0.3, 0.4, 0.3]]
    assert R.readable_relations(weights) == [] and R.readable_relations(weights, residual=True) == [1]
    c = R.readout_combination(weights, 1, residual=True)
    beta = c @ torch.tensor([[0.3, 0.4, 0.3], [1.0, 0.0, 0.0]], dtype=torch.float64)
    assert abs(float(beta[0])) < 1e-12 and R.reads_on_every_input(beta, 1, vocab_size=5)
    gen = torch.Generator().manual_seed(2)
    for _ in range(50):  # still no more relations than heads
        w = torch.rand(2, 6, generator=gen, dtype=torch.float64) ** 3
        assert len(R.readable_relations((w / w.sum(dim=1, keepdim=True)).tolist(), residual=True)) <= 2


def test_readable_relations_errors():
    for bad in ([[0.7, 0.7]], [[-0.1, 0.5]], [[float("nan"), 0.5]], [0.5, 0.5], "x"):
        with pytest.raises(ValueError, match="weights must be"):
            R.readable_relations(bad)
    with pytest.raises(ValueError, match="offset must be between 0 and 2"):
        R.readout_combination([[0.2, 0.3, 0.5]], 3)
    with pytest.raises(ValueError, match="beta must be one weight per offset"):
        R.reads_on_every_input([[0.5, 0.5]], 0)
    with pytest.raises(ValueError, match="offset must be between 0 and 1, found 2"):
        R.reads_on_every_input([0.5, 0.5], 2)
    with pytest.raises(ValueError, match="vocab_size must be a whole number >= 2, found 1"):
        R.reads_on_every_input([0.5, 0.5], 0, vocab_size=1)


def test_printed_sources_fit_the_page():
    import inspect

    from mha.chapters.heads.task import RelationModel

    assert max(len(line) for line in inspect.getsource(RelationModel.forward).splitlines()) <= 74


def test_check_readable():
    assert R.check_readable([1, 3]).ok and R.check_readable((3, 1)).ok
    r = R.check_readable([1])  # the old "more than 1/2 in one head" rule
    assert not r.ok and "offset 3 can be read" in repr(r) and "cancel" in repr(r)
    said = " ".join(repr(R.check_readable([1, 2, 3])).split())  # reports wrap at 74 characters
    assert "no combination of the heads puts more weight on offset 2" in said
    assert "offset 1 can be read" in " ".join(repr(R.check_readable([])).split())
    assert max(len(line) for line in repr(R.check_readable([1])).splitlines()) <= 74
    for bad in ("1", 1, None, [1, "x"], [1, 9], [float("nan")]):
        r = R.check_readable(bad)
        assert not r.ok and "hint" in repr(r)


def test_check_head_params():
    assert E.check_head_params(8, 4_224, 4).ok and E.check_head_params(1, 4_224, 32).ok
    assert "without their biases" in repr(E.check_head_params(8, 4_096))
    assert "W_O is part" in repr(E.check_head_params(8, 3 * 1024 + 96))
    assert "d_model x d_k blocks" in repr(E.check_head_params(8, 8 * 4_224))
    assert "split d_model" in repr(E.check_head_params(8, head_dim=32))
    for bad in MALFORMED:
        assert not E.check_head_params(8, bad).ok
    for bad in (3, "8", 0, 2.5):
        r = E.check_head_params(bad, 4_224)
        assert not r.ok and r.first_error == "num_heads"


def test_curve_figures():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for fig in (
        heads_figures.plot_learning_curves(4),
        heads_figures.plot_learning_curves(2, readout="linear"),
        heads_figures.plot_grids(),
    ):
        assert isinstance(fig, matplotlib.figure.Figure)
        assert all(ax.get_title() and ax.get_xlabel() for ax in fig.axes)
        # the relation count is r everywhere (k is a key): titles, labels, the grids' heading
        shown = [fig.get_suptitle()]
        shown += [text for ax in fig.axes for text in (ax.get_title(), ax.get_xlabel(), ax.get_ylabel())]
        assert not [text for text in shown if re.search(r"\bk\b", text)], shown
        plt.close(fig)
    curves = heads_figures.plot_learning_curves(4)
    assert curves.axes[0].get_title() == "r = 4 relations, MLP readout"
    assert curves.axes[0].get_ylabel() == "accuracy (all r answers right)"
    grids = heads_figures.plot_grids()
    assert [ax.get_ylabel() for ax in grids.axes] == ["relations r", "relations r"]
    assert grids.get_suptitle() == "Held-out accuracy after 1,500 steps (all r answers right)"
    plt.close("all")


# ---------------------------------------------- the head-count experiments' control and measured spread


def _control():
    if not E.CONTROL_PATH.exists():
        skip_or_fail("run scripts/make_ch08_control.py")
    return E.load_control()


def test_control_is_complete():
    control = _control()
    keys = [(r["lr"], r["readout_width"], r["seed"]) for r in control["runs"]]
    assert sorted(keys) == sorted(E.control_runs()) and len(set(keys)) == len(E.control_runs()) == 18
    for run in control["runs"]:
        assert (run["num_heads"], run["num_relations"], run["steps"]) == (1, 4, E.CONTROL_STEPS)
        assert [p["steps"] for p in run["curve"]] == list(E.CONTROL_CHECKPOINTS)
        assert run["params"] == mha.count_params(
            relation_task.make_model(
                1, relation_task.make_task(4, num_train=8, num_test=8), readout_width=run["readout_width"]
            )
        )
    settings = control["provenance"]["settings"]
    assert settings["rates"] == list(E.CONTROL_RATES) and settings["readout_widths"] == list(E.CONTROL_WIDTHS)
    assert [s["seed"] for s in control["splits"]] == list(E.SPLIT_SEEDS)


def test_control_repeats_the_chapters_own_runs():
    """The control's (lr 0.003, width 128) runs are the grid's and curves' one-head r = 4 runs, retrained: the
    same to the last digit on a machine with the same kernels, else within the measured band."""
    _control()
    same_kernels = (
        provenance.of("head_count_control.json")["machine"]["cpu_capability"]
        == (provenance.of("head_count_grid.json")["machine"]["cpu_capability"])
    )
    for seed in E.CONTROL_SEEDS:
        run = next(
            r for r in E.load_control()["runs"] if (r["lr"], r["readout_width"], r["seed"]) == (0.003, 128, seed)
        )
        curve = next(c for c in E.cached_curves(1) if c["seed"] == seed)["curve"]
        for point in run["curve"]:
            reference = next(p for p in curve if p["steps"] == point["steps"])
            if same_kernels:
                assert point["accuracy"] == reference["accuracy"], (seed, point["steps"])
            elif point["steps"] == 1500 and seed == 0:
                assert provenance.in_band("ch01.heads1", point["accuracy"])


def test_control_summary_and_best():
    _control()
    summary = E.control_summary(1500)
    assert set(summary) == {(lr, w) for lr in E.CONTROL_RATES for w in E.CONTROL_WIDTHS}
    assert all(len(s["values"]) == len(E.CONTROL_SEEDS) for s in summary.values())
    config, best = E.best_control(1500)
    assert best["median"] == max(s["median"] for s in summary.values()) and summary[config] == best
    train = E.control_summary(6000, key="train_accuracy")
    assert set(train) == set(summary)
    with pytest.raises(KeyError, match="not 1234"):
        E.control_summary(1234)
    table = E.format_control()
    assert table.splitlines()[0].split()[:3] == ["lr", "width", "params"] and len(table.splitlines()) == 7
    assert "1,500 steps, solved" in table and "6,000 steps, solved" in table
    assert max(len(line) for line in table.splitlines()) <= 74  # fits the book's code column


def test_weight_split():
    _control()
    for seed in E.SPLIT_SEEDS:
        split = E.weight_split(seed)
        assert len(split["profile"]) == E.SPLIT_RELATIONS + 2 and abs(sum(split["profile"]) - 1) < 1e-3
        assert min(split["profile"]) >= 0
    with pytest.raises(KeyError, match="no cached weight split for seed=9"):
        E.weight_split(9)


def test_held_out_profile_averages_every_sequence():
    task = relation_task.make_task(2, num_train=64, num_test=6, seed=1)
    model = relation_task.make_model(2, task, seed=1)
    profile = E.held_out_profile(model, task, 2)
    assert profile.shape == (2, 4) and torch.allclose(profile.sum(dim=-1), torch.ones(2, dtype=torch.float64))
    one_by_one = torch.stack([E.offset_profile(relation_task.attention_maps(model, x), 2) for x in task.test_x])
    assert torch.allclose(profile[:, :3], one_by_one.mean(dim=0), atol=1e-6)


def test_control_supports_chapter_8s_scoped_claim():
    """The claim the head-count experiments keep after the control (one head fails, tuned or not). No tuned
    one-head setting (3 rates x 2 readouts x 3 seeds) solves r = 4 (0.99 of held-out positions) at any budget
    up to 6,000 steps, and at 1,500 steps the worst two-head seed beats every one-head run of the control."""
    control = _control()
    solved = [
        (r["lr"], r["readout_width"], r["seed"], p["steps"])
        for r in control["runs"]
        for p in r["curve"]
        if p["accuracy"] >= 0.99
    ]
    assert solved == []
    two_heads = E.cached_curves(2)
    worst_two = min(next(p for p in c["curve"] if p["steps"] == 1500)["accuracy"] for c in two_heads)
    best_one = max(next(p for p in r["curve"] if p["steps"] == 1500)["accuracy"] for r in control["runs"])
    assert best_one < worst_two
