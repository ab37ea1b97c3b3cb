"""The pretrained-heads chapter: all-MiniLM-L6-v2 rebuilt from the course's modules (mha.bert), and its analyses.

The reference is ``transformers``' ``BertModel`` loaded from the same files; it is a test
dependency only, and the tests that need it skip with a message when it is missing.
"""

import copy
import json
import math
import sys

import numpy as np
import pytest
import torch
from conftest import skip_or_fail

from mha import bert as B
from mha.chapters.pretrained import figures as pretrained_figures
from mha.chapters.pretrained import pretrained_analysis as P
from mha.chapters.pretrained import pretrained_controls as PC
from mha.chapters.pretrained import pretrained_exercises as PE
from mha.chapters.pretrained import pretrained_pruning as PR
from mha.chapters.pretrained import pretrained_twins as TW

SENTENCES = [P.TWIN_SENTENCES["tired"], "A cat sat.", "Heads attend to different words in a sentence."]


@pytest.fixture(scope="module")
def folder():
    """The model's files; tests that need them skip (with the fix) when the package is missing."""
    try:
        return B.model_dir()
    except ModuleNotFoundError as exc:
        skip_or_fail(str(exc))


@pytest.fixture(scope="module")
def model(folder):
    return B.load_model(folder)


@pytest.fixture(scope="module")
def tokenizer(folder):
    return B.load_tokenizer(folder)


@pytest.fixture(scope="module")
def batch(tokenizer):
    return B.tokenize(tokenizer, SENTENCES)


@pytest.fixture(scope="module")
def ours(model, batch):
    with torch.no_grad():
        return model(batch.input_ids, batch.attention_mask, batch.token_type_ids)


# ---- files -------------------------------------------------------------------------------------


def test_model_dir_reads_files_without_importing_the_package(folder):
    assert all((folder / name).is_file() for name in B.MODEL_FILES)
    assert B.PACKAGE not in sys.modules  # located, never imported


def test_model_dir_missing_package_says_how_to_install():
    with pytest.raises(ModuleNotFoundError, match="not installed; install it with `pip install"):
        B.model_dir("no_such_model_package_for_mha")


def test_config_from_file(folder):
    config = B.BertConfig.from_json(folder / "config.json")
    assert (config.num_layers, config.num_heads, config.d_model, config.head_dim, config.d_ff) == (6, 12, 384, 32, 1536)
    assert config.layer_norm_eps == 1e-12


def test_config_rejects_other_variants(folder, tmp_path):
    raw = json.loads((folder / "config.json").read_text())
    raw["hidden_act"] = "relu"
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(ValueError, match="hidden_act must be 'gelu', found 'relu'"):
        B.BertConfig.from_json(path)
    with pytest.raises(ValueError, match=r"d_model \(10\) must be divisible by num_heads \(3\)"):
        B.BertConfig(d_model=10, num_heads=3)


def test_dropped_tensors_are_the_pooler_and_position_ids(folder, model):
    dropped = B.dropped_tensors(folder)
    # BERT's pooler: a d_model x d_model layer with its bias (147,840 values); position_ids: 0..511
    assert dropped == {"embeddings.position_ids": 512, "pooler.dense.weight": 384 * 384, "pooler.dense.bias": 384}
    from safetensors.torch import load_file

    tensors = load_file(folder / "model.safetensors")
    kept = B.convert_bert_state_dict(tensors)
    assert set(kept) == set(model.state_dict())  # every other tensor has a place, and only those
    assert sum(t.numel() for t in tensors.values()) == sum(kept[k].numel() for k in kept) + sum(dropped.values())


def test_convert_rejects_unknown_tensor():
    with pytest.raises(ValueError, match="unexpected tensor 'encoder.layer.0.crossattention.q.weight'"):
        B.convert_bert_state_dict({"encoder.layer.0.crossattention.q.weight": torch.zeros(1)})


def test_encoder_is_built_from_the_course_modules(model):
    import mha
    from mha.encoder import EncoderLayer

    assert len(model.layers) == 6
    assert all(isinstance(layer, EncoderLayer) for layer in model.layers)
    assert all(type(layer.self_attn) is mha.MultiHeadAttention for layer in model.layers)


# ---- the reference -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def reference(folder, batch):
    transformers = pytest.importorskip(
        "transformers", reason="the equivalence test needs transformers (pip install -r requirements.txt)"
    )
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    ref = transformers.BertModel.from_pretrained(str(folder), attn_implementation="eager").eval()
    with torch.no_grad():
        return ref(
            input_ids=batch.input_ids,
            attention_mask=batch.attention_mask,
            token_type_ids=batch.token_type_ids,
            output_hidden_states=True,
            output_attentions=True,
        )


def test_hidden_states_match_transformers(ours, reference, batch):
    real = batch.attention_mask.bool()  # padded positions carry no meaning in either model
    assert ours.hidden_states.shape == (7, 3, batch.input_ids.shape[1], 384)
    for mine, theirs in zip(ours.hidden_states, reference.hidden_states, strict=True):
        torch.testing.assert_close(mine[real], theirs[real], atol=5e-5, rtol=1e-4)


def test_attentions_match_transformers(ours, reference, batch):
    T = batch.input_ids.shape[1]
    assert ours.attentions.shape == (6, 3, 12, T, T)  # (L, B, H, T, T)
    for mine, theirs in zip(ours.attentions, reference.attentions, strict=True):
        torch.testing.assert_close(mine, theirs, atol=5e-5, rtol=1e-4)
    assert float(ours.attentions[:, 1, :, :, 6:].abs().max()) == 0.0  # no weight on the padding of "A cat sat."


# ---- head masks --------------------------------------------------------------------------------


def test_head_mask_equals_zeroing_the_heads_columns_of_w_o(model, batch):
    layer, head, dh = 2, 5, model.config.head_dim
    pruned = copy.deepcopy(model)
    with torch.no_grad():
        pruned.layers[layer].self_attn.out_proj.weight[:, head * dh : (head + 1) * dh] = 0.0
    masked = B.sentence_embeddings(model, batch, head_mask=P.head_mask_without(model.config, [(layer, head)]))
    torch.testing.assert_close(masked, B.sentence_embeddings(pruned, batch), atol=1e-6, rtol=1e-5)
    assert not torch.allclose(masked, B.sentence_embeddings(model, batch), atol=1e-4)
    # a per-sentence mask (B, L, H): only the second sentence loses the head
    per_sentence = torch.ones(3, 6, 12)
    per_sentence[1, layer, head] = 0.0
    mixed = B.sentence_embeddings(model, batch, head_mask=per_sentence)
    full = B.sentence_embeddings(model, batch)
    torch.testing.assert_close(mixed[[0, 2]], full[[0, 2]])
    torch.testing.assert_close(mixed[1], masked[1], atol=1e-6, rtol=1e-5)


def test_head_mask_errors(model, batch):
    with pytest.raises(ValueError, match=r"head_mask must have shape \(L, H\) = \(6, 12\)"):
        model(batch.input_ids, head_mask=torch.ones(6, 11))
    with pytest.raises(TypeError, match="head_mask must be a torch.Tensor, found list"):
        model(batch.input_ids, head_mask=[[1.0] * 12] * 6)
    with pytest.raises(ValueError, match=r"found \(6, 0\)"):
        P.head_mask_without(model.config, [(6, 0)])


# ---- embeddings --------------------------------------------------------------------------------


def test_mean_pool_ignores_padding():
    hidden = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    expected = torch.stack([hidden[0, :2].mean(0), hidden[1].mean(0)])
    torch.testing.assert_close(B.mean_pool(hidden, mask), expected)


def test_tokenize_pads_to_the_longest_sentence(tokenizer, batch):
    assert batch.tokens[1] == ["[CLS]", "a", "cat", "sat", ".", "[SEP]"]
    assert batch.input_ids.shape[1] == max(len(t) for t in batch.tokens)
    assert batch.attention_mask.sum(1).tolist() == [len(t) for t in batch.tokens]
    with pytest.raises(TypeError, match="sentences must be a non-empty list of strings"):
        B.tokenize(tokenizer, "one sentence")


def test_paraphrase_quality_by_hand():
    emb = torch.eye(3)
    assert P.paraphrase_quality(emb, emb) == P.Quality(1.0, 1.0)
    swapped = emb[[1, 0, 2]]  # a_0 is nearest to b_1 and the other way round
    q = P.paraphrase_quality(emb, swapped)
    assert q.accuracy == pytest.approx(2 / 6)
    assert q.margin == pytest.approx((-0.5 - 0.5 + 1.0) / 3)


def test_sentence_pairs_file():
    pairs = P.load_sentence_pairs()
    sentences = [s for pair in pairs for s in pair]
    assert len(pairs) >= 20
    assert all(isinstance(s, str) and s.strip() == s and s for s in sentences)
    assert len(set(sentences)) == len(sentences)


def test_paraphrase_ranked_above_unrelated_and_stored_results(model, tokenizer):
    """Every sentence of the data set is nearest to its own paraphrase, and the stored ablation
    results are what the code computes (the full model and the most harmful single head)."""
    study = PR.load_ablation_study()
    batches = P.pair_batches(tokenizer)
    emb_a, emb_b = (B.sentence_embeddings(model, b) for b in batches)
    sims = emb_a @ emb_b.T  # (N, N)
    unrelated = sims - 2.0 * torch.eye(len(sims))
    assert bool((sims.diagonal() > unrelated.max(dim=1).values).all())
    q = P.paraphrase_quality(emb_a, emb_b)
    assert q.accuracy == study["full"]["accuracy"] == 1.0
    assert q.margin == pytest.approx(study["full"]["margin"], abs=1e-4)
    worst = np.unravel_index(np.argmin(study["single_head"]["margin"]), (6, 12))
    q = P.quality_with_heads(model, batches, P.head_mask_without(model.config, [worst]))
    assert q.margin == pytest.approx(study["single_head"]["margin"][worst], abs=1e-4)


def test_stored_results_refuse_another_data_file(tmp_path, monkeypatch):
    monkeypatch.setattr(PR, "SENTENCE_PAIRS", tmp_path / "pairs.json")
    (tmp_path / "pairs.json").write_text('{"pairs": []}')
    with pytest.raises(ValueError, match="computed on another version of pairs.json"):
        PR.load_ablation_study()


# ---- the census and its criteria ---------------------------------------------------------------


def _maps(pattern, T=6):
    """(1, 1, T, T) maps of a head that always attends by ``pattern``(i) -> key."""
    w = np.zeros((1, 1, T, T))
    for i in range(T):
        w[0, 0, i, pattern(i)] = 1.0
    return w


def test_head_scores_by_hand():
    T = 6
    prev = P.head_scores([_maps(lambda i: max(i - 1, 0))])
    assert prev["previous"][0, 0] == 1.0 and prev["next"][0, 0] == 0.0 and prev["entropy"][0, 0] == 0.0
    nxt = P.head_scores([_maps(lambda i: min(i + 1, T - 1))])
    assert nxt["next"][0, 0] == 1.0
    sep = P.head_scores([_maps(lambda i: T - 1)])
    assert sep["special"][0, 0] == sep["sep"][0, 0] == 1.0 and sep["cls"][0, 0] == 0.0
    uniform = P.head_scores([np.full((1, 1, T, T), 1.0 / T)])
    assert uniform["entropy"][0, 0] == pytest.approx(1.0)
    assert uniform["self"][0, 0] == pytest.approx(1.0 / T)
    scores = {k: np.concatenate([prev[k], nxt[k], sep[k], uniform[k]], axis=1) for k in prev}
    assert P.classify_heads(scores).tolist() == [["previous", "next", "special", "broad"]]
    with pytest.raises(ValueError, match="at least 2 words besides"):
        P.head_scores([np.full((1, 1, 3, 3), 1 / 3)])


def test_head_scores_previous_and_next_use_different_rows():
    """Three words: "previous" averages words 2-3, "next" words 1-2, so both can exceed 0.5."""
    w = np.zeros((1, 1, 5, 5))  # [CLS] w1 w2 w3 [SEP]
    w[0, 0, [0, 4], 0] = 1.0  # the special rows are not scored
    w[0, 0, 1, 2] = 1.0  # w1 -> w2 (next)
    w[0, 0, 2, [1, 3]] = 0.5  # w2 splits between its neighbours
    w[0, 0, 3, 2] = 1.0  # w3 -> w2 (previous)
    scores = P.head_scores([w])
    assert scores["previous"][0, 0] == pytest.approx(0.75) and scores["next"][0, 0] == pytest.approx(0.75)
    assert scores["special"][0, 0] == 0.0 and scores["self"][0, 0] == 0.0
    assert P.classify_heads(scores).tolist() == [["previous"]]  # both thresholds met: the first label wins


def test_head_similarity_by_hand():
    a, b = _maps(lambda i: 0), _maps(lambda i: i)
    sim = P.head_similarity([np.concatenate([a, b, a], axis=1)])
    assert sim.shape == (3, 3)
    assert sim[0, 2] == pytest.approx(1.0) and sim[0, 1] == pytest.approx(1 / 6)


def test_token_position_and_it_resolution(model, tokenizer):
    with pytest.raises(ValueError, match="word 'the' must occur exactly once"):
        P.token_position(["[CLS]", "the", "cat", "the", "[SEP]"], "the")
    r = P.it_resolution(model, tokenizer)
    tired = r["maps"]["tired"]
    i, animal = r["tokens"]["tired"].index("it"), r["tokens"]["tired"].index("animal")
    assert tired.shape == (6, 12, 15, 15)
    np.testing.assert_allclose(r["tired:animal"], tired[:, :, i, animal])
    assert r["resolves"].dtype == bool
    assert math.isclose(float(tired.sum(-1).mean()), 1.0, rel_tol=1e-6)


def test_figures_and_explorer_render(model, tokenizer):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    r = P.it_resolution(model, tokenizer)
    study = json.loads(PR.ABLATION_RESULTS.read_text())
    twins = TW.twin_study(model, tokenizer, TW.load_twin_pairs()[:3])
    norms = P.value_norms(model, tokenizer, SENTENCES)
    render = pretrained_figures.layer_explorer(r)
    figures = [
        render(layer=1, sentence="tired"),
        render(layer=6, sentence="wide"),
        pretrained_figures.plot_all_heads(r["maps"]["tired"], r["tokens"]["tired"], title="t"),
        pretrained_figures.plot_it_margins(r),
        pretrained_figures.plot_census(np.full((6, 12), "special", dtype=object), marks=r["resolves"]),
        pretrained_figures.plot_similarity({"a": np.eye(72), "b": np.ones((72, 72))}, 12),
        pretrained_figures.plot_pruning(study),
        pretrained_figures.plot_importance(study["splits"][0]),
        pretrained_figures.plot_twin_counts(twins),
        pretrained_figures.plot_value_norms(norms, np.full((6, 12), "special", dtype=object)),
    ]
    assert all(isinstance(f, matplotlib.figure.Figure) for f in figures)
    assert figures[1]._suptitle is None and "Layer 6" in figures[1].axes[0].get_title()
    plt.close("all")


def test_sentence_pairs_and_results_files_round_trip(tmp_path):
    path = tmp_path / "pairs.json"
    path.write_text('{"pairs": [{"a": "One.", "b": "Uno."}]}')
    with pytest.raises(ValueError, match="must hold at least 2 pairs, found 1"):
        P.load_sentence_pairs(path)
    study = json.loads(PR.ABLATION_RESULTS.read_text())
    out = PR.write_ablation_study(study, tmp_path / "study.json")
    assert json.loads(out.read_text()) == study
    assert len(study["single_head"]["margin"]) == 6 and study["pruning"]["least harmful first"]["removed"][-1] == 72


def test_pruning_counts_come_from_the_model_shape():
    study = json.loads(PR.ABLATION_RESULTS.read_text())
    assert list(PR.pruning_counts(B.BertConfig())) == study["pruning"]["least harmful first"]["removed"]  # 6 x 12
    small = B.BertConfig(d_model=8, num_layers=2, num_heads=4, d_ff=16)
    assert PR.pruning_counts(small) == (0, 6) and PR.PRUNING_STEP == 6


def test_too_many_tokens(model):
    with pytest.raises(ValueError, match="input_ids has 513 tokens, more than the 512 positions"):
        model(torch.zeros(1, 513, dtype=torch.long))


# ---- held-out pruning, importance scores, greedy pruning ---------------------------------------


@pytest.fixture(scope="module")
def model64(folder):
    return B.load_model(folder).double()


def test_margin_gradients_match_finite_differences(model64, tokenizer):
    pairs = P.load_sentence_pairs()[:4]
    batches = P.pair_batches(tokenizer, pairs)
    grads = PR.margin_gradients(model64, batches)
    assert grads.shape == (4, 6, 12)
    eps = 1e-5
    for layer, head in ((0, 2), (3, 7), (5, 10)):
        up, down = torch.ones(6, 12, dtype=torch.float64), torch.ones(6, 12, dtype=torch.float64)
        up[layer, head] += eps
        down[layer, head] -= eps
        emb = {
            s: [B.sentence_embeddings(model64, b, head_mask=m) for b in batches] for s, m in (("+", up), ("-", down))
        }
        numeric = (P.pair_margins(*emb["+"]) - P.pair_margins(*emb["-"])).numpy() / (2 * eps)  # (N,)
        np.testing.assert_allclose(grads[:, layer, head], numeric, atol=1e-7)


def test_pair_margins_average_to_the_quality_margin():
    g = torch.Generator().manual_seed(0)
    a = torch.nn.functional.normalize(torch.randn(5, 8, generator=g, dtype=torch.float64), dim=-1)
    b = torch.nn.functional.normalize(torch.randn(5, 8, generator=g, dtype=torch.float64), dim=-1)
    sims = a @ b.T
    by_hand = [float(sims[i, i] - (sims[i].sum() - sims[i, i]) / 4) for i in range(5)]
    np.testing.assert_allclose(P.pair_margins(a, b).numpy(), by_hand)
    assert P.paraphrase_quality(a, b).margin == pytest.approx(np.mean(by_hand))


def test_importance_scores_by_hand():
    grads = np.array([[[1.0, -3.0], [0.0, 2.0]], [[-1.0, 1.0], [0.0, -2.0]]])  # (N=2, L=2, H=2)
    raw = P.importance_scores(grads, normalize=False)
    np.testing.assert_allclose(raw, [[1.0, 2.0], [0.0, 2.0]])  # mean of |.|, not |mean|
    np.testing.assert_allclose(P.importance_scores(grads), [[1 / 5**0.5, 2 / 5**0.5], [0.0, 1.0]])
    assert PR.least_important_first(P.importance_scores(grads)) == [2, 0, 1, 3]


def test_rank_agreement_and_orders_by_hand():
    a = np.array([[0.1, 0.4], [0.3, 0.2]])
    assert PR.rank_agreement(a, a, 2) == {"spearman": pytest.approx(1.0), "overlap": 2}
    assert PR.rank_agreement(a, -a, 2) == {"spearman": pytest.approx(-1.0), "overlap": 0}
    assert PR.least_harmful_first(a) == [1, 2, 3, 0]  # the highest margin after removal goes first
    mask = PR.head_mask_from_order(B.BertConfig(d_model=8, num_layers=2, num_heads=2, d_ff=16), [3, 0, 1], 2)
    assert mask.tolist() == [[0.0, 1.0], [1.0, 0.0]]


def test_disjoint_matched_sets_share_no_head_and_keep_the_profile():
    strata = np.repeat(np.arange(3), 4)  # 3 "layers" of 4 heads
    chosen = [4, 5, 6, 8]  # three heads of layer 1 (one other head there), one of layer 2 (three others)
    pairs = PC.disjoint_matched_sets(strata, chosen, count=50, seed=3)
    assert len(pairs) == 50
    for mine, others in pairs:
        assert set(mine) <= set(chosen) and not set(others) & set(chosen)
        # layer 1 can match one head only; layer 0 has no chosen head
        assert sorted(strata[mine].tolist()) == sorted(strata[others].tolist()) == [1, 2]
        assert mine == sorted(mine) and others == sorted(others)
    assert pairs == PC.disjoint_matched_sets(strata, chosen, count=50, seed=3)  # seeded
    assert len({tuple(m) for m, _ in pairs}) == 3 and len({tuple(o) for _, o in pairs}) > 1  # drawn
    for bad in ([], [12], [-1]):
        with pytest.raises(ValueError, match="chosen must be head indices in"):
            PC.disjoint_matched_sets(strata, bad)


def test_monte_carlo_p_and_holm_by_hand():
    # the observed value counts as one more order: 2 of the 4 random ones are at least as high
    assert PC.monte_carlo_p(0.5, [0.1, 0.5, 0.7, 0.2]) == pytest.approx(3 / 5)
    assert PC.monte_carlo_p(0.9, [0.1] * 199) == pytest.approx(1 / 200)
    # Holm at 0.05 over 3: 0.01 <= 0.05/3, 0.02 <= 0.05/2, 0.04 <= 0.05 -> all; one step fails -> stop
    assert PC.holm({"a": 0.04, "b": 0.01, "c": 0.02}) == {"a": True, "b": True, "c": True}
    assert PC.holm({"a": 0.04, "b": 0.01, "c": 0.03}) == {"a": False, "b": True, "c": False}
    assert PC.holm({"a": 0.02, "b": 0.02}, alpha=0.03) == {"a": False, "b": False}


def test_curve_statistic_needs_every_test_count():
    curve = {"removed": list(range(0, 73, 6)), "margin": [float(c) for c in range(0, 73, 6)]}
    assert PC.curve_statistic(curve) == pytest.approx(np.mean(PC.TEST_COUNTS))
    with pytest.raises(ValueError, match="missing \\[66\\]"):
        PC.curve_statistic({"removed": curve["removed"][:-2], "margin": curve["margin"][:-2]})


def test_holds_until_and_above_random_band_by_hand():
    curve = {"removed": [0, 1, 2, 3, 4], "margin": [0.5, 0.6, 0.5, 0.4, 0.1]}
    assert PR.holds_until(curve, 0.5) == 2 and PR.holds_until(curve, 0.1) == 4 and PR.holds_until(curve, 0.45) == 2
    with pytest.raises(ValueError, match="the curve starts below full_margin"):
        PR.holds_until(curve, 0.55)
    randoms = [[0.5, 0.55, 0.6, 0.3, 0.1], [0.5, 0.5, 0.4, 0.45, 0.1]]
    # above every order at 1 removed only: tied at 0 and at all removed (left out), below at 2 and 3
    assert PR.above_random_band(curve, randoms) == [1]
    assert PR.above_random_band({**curve, "margin": [0.5, 0.7, 0.7, 0.7, 0.1]}, randoms) == [1, 2, 3]


def test_split_pairs_and_random_orders():
    first, second = PR.split_pairs(24)
    assert len(first) == len(second) == 12 and sorted(first + second) == list(range(24))
    assert PR.split_pairs(24) == (first, second)  # seeded
    orders = PR.random_orders(72)
    assert len(orders) == PR.NUM_RANDOM_ORDERS >= 10
    assert all(sorted(o) == list(range(72)) for o in orders) and len({tuple(o) for o in orders}) == len(orders)


@pytest.fixture(scope="module")
def tiny():
    """A randomly initialised 2-layer, 2-head BERT and three pairs of random token ids."""
    torch.manual_seed(0)
    config = B.BertConfig(vocab_size=30, d_model=8, num_layers=2, num_heads=2, d_ff=16, max_positions=16)
    model = B.BertEncoder(config).eval()
    g = torch.Generator().manual_seed(1)

    def batch():
        ids = torch.randint(1, 30, (3, 5), generator=g)
        return B.Batch(ids, torch.ones_like(ids), torch.zeros_like(ids), [["t"] * 5] * 3)

    return model, (batch(), batch())


def test_greedy_pruning_re_ranks_after_every_removal(tiny):
    model, batches = tiny
    result = PR.greedy_pruning(model, batches)
    assert sorted(result["order"]) == [0, 1, 2, 3] and len(result["margin"]) == 5
    single = PR.single_head_ablation(model, batches)["margin"]
    assert result["order"][0] == PR.least_harmful_first(single)[0]
    assert result["margin"][1] == pytest.approx(single.max())
    # the second removal is the best of the three remaining, given the first (brute force)
    first = result["order"][0]
    trials = {h: PR.quality_after(model, batches, [first, h], 2).margin for h in range(4) if h != first}
    assert result["order"][1] == max(trials, key=trials.get)
    assert result["margin"][2] == pytest.approx(max(trials.values()))


def test_stored_study_is_consistent():
    study = PR.load_ablation_study()
    assert len(study["random"]["orders"]) >= 10
    folds = study["splits"]
    assert len(folds) == 2 and folds[0]["rank_pairs"] == folds[1]["eval_pairs"]
    assert sorted(folds[0]["rank_pairs"] + folds[0]["eval_pairs"]) == list(range(24))
    for fold in folds:
        for order in fold["orders"].values():
            assert sorted(order) == list(range(72))
        assert fold["orders"]["ablation"] == PR.least_harmful_first(fold["single_head_margin"])
        assert fold["orders"]["importance"] == PR.least_important_first(fold["importance"])
        # greedy's first step is the best single removal on the ranking pairs
        assert fold["greedy_in_sample"][1] == pytest.approx(fold["single_head_margin"].max(), abs=1e-6)
        assert fold["greedy_in_sample"][0] == pytest.approx(fold["full"]["rank"]["margin"], abs=1e-6)
        assert len(fold["random_held_out"]["margin"]) == len(study["random"]["orders"])
    live = study["live_check"]
    assert live["largest_difference"] * 10 <= live["tolerance"] <= 1e-4
    parking = study["parking"]
    assert sorted(parking["heads"]) == parking["heads"] and len(parking["random_removed"]) >= 10
    controls = study["controls"]
    assert [len(r) for r in controls["random_statistics"]] == [PC.NUM_TEST_ORDERS] * 2
    assert PC.NUM_TEST_ORDERS + 1 >= 6 / PC.FAMILY_ALPHA  # a p-value can fall below the Bonferroni bound
    for name, size in (("layer", 18), ("layer_and_sign", 15)):
        side = controls["parking"][name]
        assert side["size"] == size and len(side["parking"]) == len(side["others"]) == PC.NUM_MATCHED_DRAWS
    layer = np.arange(72) // 12
    pairs = PC.disjoint_matched_sets(layer, parking["heads"], seed=controls["parking"]["seed"])
    # as many parking heads of each layer as the layer has other heads: 0, 5, 3, 3, 2, 5
    assert np.bincount(layer[pairs[0][1]], minlength=6).tolist() == [0, 5, 3, 3, 2, 5]


def test_stored_study_supports_chapter_7s_pruning_claims():
    """The pretrained-heads chapter's claims, from the stored study: the pre-specified curve statistic calls the
    ablation and greedy rankings better than 199 fresh random orders in both folds (Holm, familywise 0.05), and
    not Michel et al.'s score; the margin yardstick fails for the model without heads (counting found
    paraphrases does not); the parking heads cost less than as many other heads of the same layers,
    but not than others matched also on the sign of their single removal."""
    study = PR.load_ablation_study()
    controls = study["controls"]
    p_values = {
        (n, name): PC.monte_carlo_p(PC.curve_statistic(fold["held_out"][name]), randoms)
        for n, (fold, randoms) in enumerate(zip(study["splits"], controls["random_statistics"]), start=1)
        for name in ("ablation", "importance", "greedy")
    }
    called = PC.holm(p_values)
    assert {key for key, yes in called.items() if yes} == {(n, r) for n in (1, 2) for r in ("ablation", "greedy")}
    assert [round(p_values[n, "importance"], 3) for n in (1, 2)] == [0.105, 0.26]
    for fold in study["splits"]:
        for curve in fold["held_out"].values():
            assert curve["margin"][-1] < 0.5 * fold["full"]["eval"]["margin"]  # the margin can fail ...
            assert curve["accuracy"][-1] == 1.0  # ... counting found paraphrases cannot
    parking = study["parking"]
    margin = parking["parking_removed"]["margin"]
    assert sum(q["margin"] < margin for q in parking["random_removed"]) == 20
    cheaper = {
        name: sum(a > b for a, b in zip(side["parking"], side["others"]))
        for name, side in controls["parking"].items()
        if name != "seed"
    }
    assert cheaper == {"layer": 99, "layer_and_sign": 58}


def test_stored_held_out_entry_recomputes(model, tokenizer):
    study = PR.load_ablation_study()
    fold = study["splits"][1]
    pairs = P.load_sentence_pairs()
    held = P.pair_batches(tokenizer, [pairs[i] for i in fold["eval_pairs"]])
    q = PR.quality_after(model, held, fold["orders"]["greedy"], 36)
    assert q.margin == pytest.approx(fold["held_out"]["greedy"]["margin"][6], abs=1e-4)
    # and the first pair of sets matched to the parking heads by layer and by sign, on all 24 pairs
    layer = np.arange(72) // 12
    raises = study["single_head"]["margin"].ravel() > study["full"]["margin"]
    stored = study["controls"]["parking"]
    mine, others = PC.disjoint_matched_sets(2 * layer + raises, study["parking"]["heads"], seed=stored["seed"])[0]
    everything = P.pair_batches(tokenizer, pairs)
    assert PC.margin_without(model, everything, mine) == pytest.approx(stored["layer_and_sign"]["parking"][0], abs=1e-4)
    assert PC.margin_without(model, everything, others) == pytest.approx(
        stored["layer_and_sign"]["others"][0], abs=1e-4
    )
    # and one random order's curve statistic on fold 2's held-out half
    order = PC.fresh_orders(72)[5]
    assert PC.random_statistics(model, held, [order])[0] == pytest.approx(
        study["controls"]["random_statistics"][1][5], abs=1e-4
    )


# ---- Winograd-style twins ----------------------------------------------------------------------


def test_twin_file_is_consistent(tokenizer):
    pairs = TW.load_twin_pairs()
    assert len(pairs) >= 20
    assert pairs[0].sentences == (P.TWIN_SENTENCES["tired"], P.TWIN_SENTENCES["wide"])
    assert TW.token_problems(tokenizer, pairs) == []  # pronoun and nouns: one token, once each
    sentences = [s for p in pairs for s in p.sentences]
    assert len(set(sentences)) == len(sentences)
    for p in pairs:
        assert p.referents[0] != p.referents[1] and set(p.referents) == set(p.candidates)
        for tokens in B.tokenize(tokenizer, list(p.sentences)).tokens:  # the pronoun follows both nouns
            assert tokens.index(p.pronoun) > max(tokens.index(c) for c in p.candidates)


def test_twin_file_errors(tmp_path):
    path = tmp_path / "twins.json"
    pair = {"pronoun": "it", "candidates": ["cat", "box"], "referents": ["cat", "box"]}
    path.write_text(
        json.dumps(
            {
                "pairs": [
                    {
                        **pair,
                        "sentences": ["The cat left the box as it was bored.", "A cat left the box as it was full."],
                    }
                ]
            }
        )
    )
    with pytest.raises(ValueError, match="pair 0 .* must differ in exactly one word"):
        TW.load_twin_pairs(path)
    sentences = ["The cat left the box as it was bored.", "The cat left the box as it was full."]
    path.write_text(json.dumps({"pairs": [{**pair, "sentences": sentences, "referents": ["cat", "cat"]}]}))
    with pytest.raises(ValueError, match="pair 0: the referents"):
        TW.load_twin_pairs(path)


def test_twin_study_by_hand(model, tokenizer):
    pairs = TW.load_twin_pairs()[:3]
    twins = TW.twin_study(model, tokenizer, pairs)
    assert twins["margins"].shape == (3, 2, 6, 12) and twins["vector_margins"].shape == (3, 2, 7)
    pair, k = pairs[1], 1  # "...because it was too small": it = the suitcase
    tokens, weights = twins["tokens"][3], twins["maps"][3]
    p, r, o = tokens.index("it"), tokens.index("suitcase"), tokens.index("trophy")
    np.testing.assert_allclose(twins["margins"][1, k], weights[:, :, p, r] - weights[:, :, p, o])
    assert pair.referents[k] == "suitcase"
    np.testing.assert_array_equal(twins["resolves"], (twins["margins"] > 0).all(axis=1))
    np.testing.assert_array_equal(twins["moves"], twins["margins"].sum(axis=1) > 0)
    # pair 0 is the chapter's source sentence: the same verdicts as it_resolution
    np.testing.assert_array_equal(twins["resolves"][0], P.it_resolution(model, tokenizer)["resolves"])


def test_binomial_tail_and_held_out_best():
    assert TW.binomial_tail(0, 7, 0.3) == pytest.approx(1.0)
    assert TW.binomial_tail(4, 4, 0.5) == pytest.approx(1 / 16)
    assert TW.binomial_tail(3, 4, 0.25) == pytest.approx(4 * 0.25**3 * 0.75 + 0.25**4)
    resolves = np.zeros((4, 1, 3), dtype=bool)
    resolves[[0, 2], 0, 1] = True  # head 1 wins on the even pairs...
    resolves[[1], 0, 2] = True  # ...and head 2 is the only one that resolves an odd pair
    assert TW.held_out_best(resolves, [0, 2], [1, 3]) == {"head": (0, 1), "chosen": 2, "judged": 0}


# ---- Kobayashi et al.'s vector norms -----------------------------------------------------------


def test_head_value_vectors_add_up_to_the_attention_output(model64, tokenizer):
    batch = B.tokenize(tokenizer, SENTENCES[:1])
    with torch.no_grad():
        out = model64(*batch[:3])
        for layer in (0, 4):
            attn = model64.layers[layer].self_attn
            x = out.hidden_states[layer]  # (1, T, D): the layer's input
            f = P.head_value_vectors(attn, x)  # (1, H, T, D)
            by_heads = torch.einsum("bhts,bhsd->btd", out.attentions[layer], f) + attn.out_proj.bias
            reference, _ = attn(x)  # the module's own forward
            torch.testing.assert_close(by_heads, reference, atol=1e-10, rtol=1e-10)


def test_value_norms_shapes_and_ranges(model64, tokenizer):
    norms = P.value_norms(model64, tokenizer, SENTENCES)
    assert set(norms) == {"cls_weight", "cls_norm_share", "cls_norm_ratio", "output_norm"}
    assert all(v.shape == (6, 12) for v in norms.values())
    for key in ("cls_weight", "cls_norm_share"):
        assert (norms[key] >= 0).all() and (norms[key] <= 1).all()
    scores = P.head_scores(P.attention_maps(model64, tokenizer, SENTENCES)[1])
    np.testing.assert_allclose(norms["cls_weight"], scores["cls"])  # the census's [CLS] score


# ---- exercise checkers -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def grads():
    return np.random.default_rng(0).normal(size=(5, 6, 12))


def test_check_importance_right_and_wrong(grads):
    right = P.importance_scores(grads)
    assert PE.check_importance(right, grads).ok
    assert PE.check_importance(np.round(right, 3), grads).ok  # 3 decimals are enough
    rounded = PE.check_importance(np.round(right, 2), grads)  # 2 decimals: close, no hint on the method
    assert not rounded.ok and "close: give them to 3 decimals" in repr(rounded) and "hint" not in repr(rounded)
    assert PE.check_importance(torch.tensor(right), grads).ok
    raw = np.abs(grads).mean(0)
    slips = {
        "not normalised": raw,
        "take the absolute value of each pair's derivative first": np.abs(grads.mean(0))
        / np.linalg.norm(np.abs(grads.mean(0)), axis=1, keepdims=True),
        "no absolute value": grads.mean(0) / np.linalg.norm(grads.mean(0), axis=1, keepdims=True),
        "normalised the whole table": raw / np.linalg.norm(raw),
        "divided by the row's sum": raw / raw.sum(1, keepdims=True),
    }
    for hint, answer in slips.items():
        r = PE.check_importance(answer, grads)
        assert not r.ok and r.first_error == "importance" and hint in _said(r), hint
    r = PE.check_importance(np.abs(grads.mean(0)), grads)  # two slips at once: both are named
    assert "|mean|" in _said(r) and "not normalised" in _said(r)
    wrong = right.copy()
    wrong[2, 3] += 0.1
    r = PE.check_importance(wrong, grads)
    assert "wrong in layers L3" in _said(r) and "mean over pairs" in _said(r)
    assert f"{right[2, 3]:.3f}" not in _said(r)  # never prints the expected numbers


def test_check_importance_malformed_input(grads):
    right = P.importance_scores(grads)
    cases = {
        "a string": "0.5",
        "shape (6, 12), found (12, 6) (rows are layers": right.T,
        "shape (6, 12), found (6,)": right[:, 0],
        "NaN": np.where(np.eye(6, 12) > 0, np.nan, right),
        "numbers of shape": [[1, "x"]],
    }
    for message, answer in cases.items():
        r = PE.check_importance(answer, grads)
        assert not r.ok and r.first_error == "answer" and message in _said(r), message
    assert PE.check_importance(right, "grads").first_error == "gradients"


@pytest.fixture(scope="module")
def twins(model, tokenizer):
    return TW.twin_study(model, tokenizer, TW.load_twin_pairs()[:3])


def test_check_twin_margins_right_and_wrong(twins):
    m = twins["margins"][1, :, 3, 1]  # pair 2, L4H2
    verdict = bool((m > 0).all())
    assert PE.check_twin_margins(twins, 2, 4, 2, m.round(3), verdict).ok
    assert np.abs(m.round(2) - m).max() > 1e-3  # so 2 decimals are not enough here
    rounded = PE.check_twin_margins(twins, 2, 4, 2, m.round(2), verdict)  # right to 2 decimals
    assert rounded.first_error == "margins" and "close: give them to 3 decimals" in _said(rounded)
    assert "hint" not in _said(rounded)
    cases = {
        "signs are reversed": (-m, verdict),
        "the referent changes between the twins": (m * [1, -1], verdict),
        "page counts from 1": (twins["margins"][2, :, 3, 1], verdict),  # pair 3 instead of 2
    }
    for hint, (answer, v) in cases.items():
        r = PE.check_twin_margins(twins, 2, 4, 2, answer, v)
        assert r.first_error == "margins" and hint in _said(r), hint
    column = []  # the slip of reading the column: how much each noun attends to "it"
    for k, (tok, w) in enumerate(zip(twins["tokens"][2:4], twins["maps"][2:4])):
        ref = twins["pairs"][1].referents[k]
        other = ({"trophy", "suitcase"} - {ref}).pop()
        column.append(w[3, 1][tok.index(ref), tok.index("it")] - w[3, 1][tok.index(other), tok.index("it")])
    assert "column" in _said(PE.check_twin_margins(twins, 2, 4, 2, column, verdict))
    r = PE.check_twin_margins(twins, 2, 4, 2, m, not verdict)
    assert r.first_error == "resolves" and "both" in _said(r)
    # a verdict that follows from wrong margins is not blamed twice
    assert not verdict  # L4H2 prefers the trophy in both sentences of pair 2
    r = PE.check_twin_margins(twins, 2, 4, 2, [abs(m[0]) + 0.5, abs(m[1]) + 0.5], True)
    assert r.first_error == "margins" and "fix them first" in _said(r)


def test_check_twin_margins_malformed_input(twins):
    m = twins["margins"][0, :, 0, 0]
    cases = {
        ("pair", 0): "pair must be a whole number from 1 to 3",
        ("layer", 7): "layer must be a whole number from 1 to 6",
        ("head", "2"): "head must be a whole number from 1 to 12",
    }
    for (name, value), message in cases.items():
        args = {"pair": 1, "layer": 1, "head": 1, name: value}
        r = PE.check_twin_margins(twins, margins=m, resolves=False, **args)
        assert not r.ok and message in _said(r)
    assert "found a string" in _said(PE.check_twin_margins(twins, 1, 1, 1, "0.1, 0.2", False))
    assert "NaN" in _said(PE.check_twin_margins(twins, 1, 1, 1, [np.nan, 0.1], False))
    assert "shape (2,)" in _said(PE.check_twin_margins(twins, 1, 1, 1, [0.1, 0.2, 0.3], False))
    assert "True or False" in _said(PE.check_twin_margins(twins, 1, 1, 1, m, "yes"))


def _said(check) -> str:
    """A checker's report with its line wrapping undone (reports wrap at 74 characters)."""
    return " ".join(repr(check).split())


def test_checker_reports_fit_the_page(twins):
    m = twins["margins"][1, :, 3, 1]
    r = PE.check_twin_margins(twins, 2, 4, 2, -m, bool((m > 0).all()))
    assert len(r.source) < len(repr(r).splitlines())  # the long hint was wrapped
    assert max(len(line) for line in repr(r).splitlines()) <= 74
    assert " ".join(r.source[2].split()) in _said(r)  # nothing lost
