"""The merging experiments (learning curves, sweeps, the cached results) and their exercise checkers."""

import pytest
import torch

from mha import provenance
from mha.chapters.heads import task as relation_task
from mha.chapters.merging import figures as merging_figures
from mha.chapters.merging import merge_exercises as X
from mha.chapters.merging import merge_training as M
from mha.chapters.merging import merging
from mha.chapters.merging.merging import STRATEGIES

# ---------------------------------------------------------------- the experiment


def test_merge_experiment_is_deterministic():
    a = M.merge_experiment("gated", seed=1, num_relations=1, steps=5)
    b = M.merge_experiment("gated", seed=1, num_relations=1, steps=5)
    assert a == b
    assert a["merge_params"] == merging.merge_params(32, 4, "gated")
    assert a["params"] - M.merge_experiment("concat", seed=1, num_relations=1, steps=1)["params"] == (
        merging.merge_params(32, 4, "gated") - merging.merge_params(32, 4, "concat")
    )
    with pytest.raises(ValueError, match="merge must be one of"):
        M.merge_experiment("max")


@pytest.mark.parametrize("strategy", ["concat_lowrank", "average"])
def test_a_curve_point_is_the_shorter_run(strategy):
    """One long run gives every budget: its point at s steps is a run of s steps, bit for bit."""
    long = M.merge_experiment(strategy, seed=2, num_relations=2, steps=30, checkpoints=(10, 30))
    short = M.merge_experiment(strategy, seed=2, num_relations=2, steps=10)
    assert [p["steps"] for p in long["curve"]] == [10, 30]
    point = long["curve"][0]
    assert point["accuracy"] == short["accuracy"] and point["train_accuracy"] == short["train_accuracy"]
    assert point["relation_accuracy"] == short["relation_accuracy"]
    assert long["curve"][1]["accuracy"] == long["accuracy"] and long["lr"] == relation_task.LEARNING_RATE


def test_learning_rate_reaches_the_optimiser():
    a = M.merge_experiment("concat", seed=0, num_relations=1, steps=20, lr=1e-3, checkpoints=(20,))
    b = M.merge_experiment("concat", seed=0, num_relations=1, steps=20, lr=1e-2, checkpoints=(20,))
    assert a["lr"] == 1e-3 and b["lr"] == 1e-2 and a["curve"][0]["loss"] != b["curve"][0]["loss"]


def test_bottleneck_matched_control_has_the_parameters_of_the_issue():
    params = {s: M.merge_experiment(s, seed=0, steps=1)["params"] for s in STRATEGIES}
    assert params["concat_lowrank"] == 6_720 and params["average"] == 6_464 and params["concat"] == 7_232
    assert params["concat_lowrank"] - params["average"] == 32 * 8  # the learned W_down


def test_model_params_of_the_easy_task():
    """Only averaging is 768 parameters smaller than concatenation: weighted 764, gated 636."""
    params = {s: M.model_params(s, num_relations=2) for s in STRATEGIES}
    smaller = {s: params["concat"] - params[s] for s in ("average", "weighted", "gated", "concat_lowrank")}
    assert smaller == {"average": 768, "weighted": 764, "gated": 636, "concat_lowrank": 512}
    assert all(smaller[s] == merging.merge_params(32, 4, "concat") - merging.merge_params(32, 4, s) for s in smaller)
    model = M.make_merge_model("gated", relation_task.make_task(2), seed=3)
    assert sum(p.numel() for p in model.parameters()) == params["gated"]
    assert model.attention.merge == "gated"


@pytest.mark.parametrize("seed", [0, 3])
def test_what_one_seed_shares_across_merges(seed):
    """With one seed every merge starts from the same W_Q, W_K, W_V; the merge layers draw different
    numbers of values, so the embeddings and the readout drawn after them differ, except between
    averaging and the weighted merge (zero logits, no draw): only those two start as one model."""
    starts = {m: M.shared_start(m, seed=seed) for m in STRATEGIES}
    assert all(s["q, k, v"] for s in starts.values())
    for m, s in starts.items():
        paired = m in ("average", "weighted")
        assert s["embeddings"] is paired and s["readout"] is paired and s["same outputs"] is paired, m
    assert [starts[m]["W_up"] for m in STRATEGIES] == [None, False, True, True, True]
    # independently of shared_start: the embeddings of a fresh model per merge, compared by hand
    task = relation_task.make_task(4, seed=seed)
    emb = {m: M.make_merge_model(m, task, seed=seed).token_embedding.weight for m in STRATEGIES}
    assert torch.equal(emb["average"], emb["weighted"])
    assert len({tuple(emb[m].flatten()[:4].tolist()) for m in ("concat", "concat_lowrank", "average", "gated")}) == 4
    # another seed changes the shared parts too, so the comparison is not vacuous
    other = M.make_merge_model("average", task, seed=seed + 1).attention.q_proj.weight
    assert not torch.equal(other, M.make_merge_model("average", task, seed=seed).attention.q_proj.weight)
    # the reference can be any merge: the gated merge shares W_up with averaging, not the readout
    start = M.shared_start("average", "gated", seed=seed)
    assert start["W_up"] and not start["readout"]


def test_mean_readout_of_four_heads():
    """Four tokens, each as a point on a circle in two features of its head, survive the average of
    the heads (through AverageMerge's W_up) on all 16^4 inputs; in shared features they cannot."""
    separate = M.mean_readout([(0, 1), (2, 3), (4, 5), (6, 7)])
    assert separate["inputs"] == 16**4 and separate["accuracy"] == 1.0 and separate["relation_accuracy"] == [1.0] * 4
    assert M.mean_readout([(6, 7), (0, 1), (2, 3), (4, 5)], seed=5)["accuracy"] == 1.0
    shared = M.mean_readout([(0, 1)] * 4)
    assert shared["accuracy"] * shared["inputs"] == 16  # only the inputs whose four tokens are equal
    overlapping = M.mean_readout([(0, 1), (1, 2), (2, 3), (3, 4)])
    assert overlapping["accuracy"] < 0.05 and min(overlapping["relation_accuracy"]) < 0.5
    two_heads = M.mean_readout([(0, 1), (8, 9)])  # two heads of d_k = 16
    assert two_heads["inputs"] == 256 and two_heads["accuracy"] == 1.0
    for bad in ([(0, 8)] * 4, [(0,)] * 4, [], [(0, 1)] * 3):
        with pytest.raises(ValueError, match="head_features must be pairs"):
            M.mean_readout(bad)


def test_sweep_runs():
    runs = M.sweep_runs()
    assert len(runs) == 5 * 5 + 2 * 5 * 3 + 5 * 5
    assert len({M.run_key(r) for r in runs}) == len(runs)
    assert {r["strategy"] for r in runs} == set(STRATEGIES)


# ---------------------------------------------------------------- the cached sweeps


@pytest.fixture(scope="module")
def runs():
    return M.load_merge_results()


def test_cache_is_complete_and_consistent(runs):
    expected = {M.run_key(r): r for r in M.sweep_runs()}
    assert {M.run_key(r) for r in runs} == set(expected) and len(runs) == len(expected)
    for run in runs:
        budgets = [p["steps"] for p in run["curve"]]
        assert budgets == [s for s in M.CHECKPOINTS if s <= expected[M.run_key(run)]["steps"]]
        assert run["curve"][-1]["accuracy"] == run["accuracy"] and run["steps"] == budgets[-1]
        assert run["params"] == M.merge_experiment(run["strategy"], steps=1)["params"] or run["num_relations"] != 4
    record = provenance.of("merge_results.json")
    assert record["settings"]["checkpoints"] == list(M.CHECKPOINTS)


def test_cache_matches_a_fresh_run(runs):
    """A fresh 1,500-step run of the cached sweep lands in its measured band."""
    fresh = M.merge_experiment("concat", seed=0, num_relations=4)
    cached = M.point_at(M.select(runs, strategy="concat")[0], 1500)
    assert provenance.in_band("ch05.concat_seed0", fresh["accuracy"])
    assert provenance.in_band("ch05.concat_seed0", cached["accuracy"])


def test_summaries(runs):
    summary = M.summarize(runs, 1500)
    assert list(summary) == list(STRATEGIES)
    for strategy, row in summary.items():
        values = [M.point_at(r, 1500)["accuracy"] for r in M.select(runs, strategy=strategy)]
        assert sorted(row["values"]) == sorted(values) and row["min"] == min(values) and row["max"] == max(values)
        assert row["solved"] == sum(v >= relation_task.SOLVED for v in values)
    table = M.format_table(runs, (1500, 12_000)).splitlines()
    assert len(table) == 1 + 2 * len(STRATEGIES) and table[1].split()[:3] == ["concat", "7,232", "1,500"]
    assert table[-1].split()[:3] == ["gated", f"{summary['gated']['params']:,}", "12,000"]
    with pytest.raises(KeyError, match="has no point at 24000 steps"):
        M.point_at(runs[0], 24_000)


def test_spread_by_hand():
    s = relation_task.spread([0.2, 1.0, 0.995, 0.5])
    assert (s["median"], s["min"], s["max"], s["solved"]) == (0.7475, 0.2, 1.0, 2)
    assert relation_task.spread([0.3])["median"] == 0.3


def test_figures(runs):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for fig in (
        merging_figures.plot_merge_curves(runs),
        merging_figures.plot_lr_sweep(runs),
        merging_figures.plot_merge_results(runs, 12_000),
    ):
        assert isinstance(fig, matplotlib.figure.Figure)
        assert all(ax.get_title() for ax in fig.axes if ax.axison)
        plt.close(fig)
    fig = merging_figures.plot_merge_results(runs, 1500)
    # the x axis spans the models' sizes (not from zero, so that the markers stand apart) and says so
    assert fig.axes[0].get_xlim()[0] > 0 and "does not start at 0" in fig.axes[0].get_xlabel()
    plt.close(fig)


# ---------------------------------------------------------------- exercise checkers


MALFORMED = ["seven", float("nan"), [1, 2], True]


def test_check_merge_costs():
    right = {"concat": 1_049_600, "average": 66_560, "concat_lowrank": 2 * 64 * 1024 + 1024}
    assert X.check_merge_costs(**right).ok
    r = X.check_merge_costs(concat=1024 * 1024)
    assert not r.ok and r.first_error == "concat" and "bias" in repr(r)
    r = X.check_merge_costs(average=0)
    assert "the mean is free" in repr(r) and "W_up" in repr(r) and "source" not in repr(r)
    r = X.check_merge_costs(average=1024 * 1024 + 1024)
    assert "d_k x d_model" in repr(r)
    r = X.check_merge_costs(concat_lowrank=64 * 1024 + 1024)
    assert "W_down" in repr(r)
    assert "count every weight" in repr(X.check_merge_costs(average=12345))
    for bad in MALFORMED:
        r = X.check_merge_costs(average=bad)
        assert not r.ok and r.first_error == "average" and ("must be a number" in repr(r) or "finite" in repr(r))
    assert not X.check_merge_costs().ok and "nothing to check" in repr(X.check_merge_costs())
    # the merging-heads chapter's exercise asks for two merges: the low-rank one (the merging experiments)
    # is listed only when given
    asked = repr(X.check_merge_costs(concat=1_049_600, average=66_560))
    assert "concat_lowrank" not in asked and "concat" in asked and "average" in asked
    assert "concat_lowrank: not given" not in repr(X.check_merge_costs(average=0))


def test_check_indistinguishable():
    assert X.check_indistinguishable([[1, 0], [0, 1]], [[0, 0], [3, 1]]).ok
    assert X.check_indistinguishable(torch.tensor([[1.0], [0.0]]), [[0.0], [3.0]]).ok
    assert "same" in repr(X.check_indistinguishable([[1, 0], [0, 1]], [[1, 0], [0, 1]]))
    assert "swapping" in repr(X.check_indistinguishable([[1, 0], [0, 1]], [[0, 1], [1, 0]]))
    assert "they mix to" in repr(X.check_indistinguishable([[1, 0], [0, 1]], [[2, 0], [0, 1]]))
    # the plain average is fooled by a swap
    assert X.check_indistinguishable([[1, 0], [0, 1]], [[0, 1], [1, 0]], weights=(0.5, 0.5)).ok
    for bad in ("ab", None, [[1, 0]], [[1, 0], [0, "x"]], [[1, float("nan")], [0, 1]]):
        r = X.check_indistinguishable(bad, [[0, 0], [3, 1]])
        assert not r.ok and "hint" in repr(r)
    assert "shape (2, 2)" in repr(X.check_indistinguishable([[1, 0], [0, 1]], [[0, 1, 3], [1, 0, 3]]))


def test_check_average_out_proj():
    up = X.EXERCISE_W_UP.clone()
    assert X.check_average_out_proj(torch.cat([up, up]) / 2).ok
    assert X.check_average_out_proj((torch.cat([up, up]) / 2).tolist()).ok
    assert "sum" in repr(X.check_average_out_proj(torch.cat([up, up])))
    assert "nn.Linear layout" in repr(X.check_average_out_proj((torch.cat([up, up]) / 2).T))
    assert "one *under* the other" in repr(X.check_average_out_proj(torch.cat([up, up], dim=1) / 2))
    assert "same" in repr(X.check_average_out_proj(torch.cat([up, torch.zeros(2, 4)]) / 2))
    for bad in ("W", float("nan"), [[float("nan")] * 4] * 4, [[1, 2], [3, 4]]):
        r = X.check_average_out_proj(bad)
        assert not r.ok and "w_o" in repr(r)


def test_the_exercise_w_up_is_a_tensor_a_learner_can_concatenate():
    """``torch.cat([W_up, W_up])`` works as written; a learner's in-place change does not move the answer."""
    w_up = X.EXERCISE_W_UP
    assert isinstance(w_up, torch.Tensor) and w_up.shape == (2, 4)
    answer = torch.cat([w_up, w_up]) / 2
    try:
        w_up.mul_(3)  # a learner scales the exercise's tensor in place
        assert X.check_average_out_proj(answer).ok
    finally:
        w_up.div_(3)


def test_check_solved_merges(runs):
    expected = [s for s, row in M.summarize(runs, 12_000).items() if row["solved"] >= 4]
    assert X.check_solved_merges(expected, runs=runs).ok
    early = [s for s, row in M.summarize(runs, 1500).items() if row["solved"] >= 4]
    if set(early) != set(expected):
        assert "1,500 steps" in repr(X.check_solved_merges(early, runs=runs))
    assert "unknown merge 'mean'" in repr(X.check_solved_merges(["mean"], runs=runs))
    for bad in ("concat", 3, None):
        r = X.check_solved_merges(bad, runs=runs)
        assert not r.ok and "list of merge names" in repr(r)
