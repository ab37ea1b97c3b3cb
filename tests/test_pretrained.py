"""Chapter 7: all-MiniLM-L6-v2 rebuilt from the course's modules (mha.bert), and its analyses.

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
from mha import viz
from mha.chapters import pretrained_analysis as P

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
    study = P.load_ablation_study()
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
    monkeypatch.setattr(P, "SENTENCE_PAIRS", tmp_path / "pairs.json")
    (tmp_path / "pairs.json").write_text('{"pairs": []}')
    with pytest.raises(ValueError, match="computed on another version of pairs.json"):
        P.load_ablation_study()


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
    render = viz.pretrained_analysis.layer_explorer(r)
    figures = [
        render(layer=1, sentence="tired"),
        render(layer=6, sentence="wide"),
        viz.pretrained_analysis.plot_all_heads(r["maps"]["tired"], r["tokens"]["tired"], title="t"),
        viz.pretrained_analysis.plot_it_margins(r),
        viz.pretrained_analysis.plot_census(np.full((6, 12), "special", dtype=object), marks=r["resolves"]),
        viz.pretrained_analysis.plot_similarity({"a": np.eye(72), "b": np.ones((72, 72))}, 12),
    ]
    assert all(isinstance(f, matplotlib.figure.Figure) for f in figures)
    assert figures[1]._suptitle is None and "Layer 6" in figures[1].axes[0].get_title()
    plt.close("all")


def test_sentence_pairs_and_results_files_round_trip(tmp_path):
    path = tmp_path / "pairs.json"
    path.write_text('{"pairs": [{"a": "One.", "b": "Uno."}]}')
    with pytest.raises(ValueError, match="must hold at least 2 pairs, found 1"):
        P.load_sentence_pairs(path)
    study = json.loads(P.ABLATION_RESULTS.read_text())
    out = P.write_ablation_study(study, tmp_path / "study.json")
    assert json.loads(out.read_text()) == study
    assert len(study["single_head"]["margin"]) == 6 and study["pruning"]["random"]["removed"][-1] == 72


def test_pruning_counts_come_from_the_model_shape():
    study = json.loads(P.ABLATION_RESULTS.read_text())
    assert list(P.pruning_counts(B.BertConfig())) == study["pruning"]["random"]["removed"]  # 6 x 12 heads
    small = B.BertConfig(d_model=8, num_layers=2, num_heads=4, d_ff=16)
    assert P.pruning_counts(small) == (0, 6) and P.PRUNING_STEP == 6


def test_too_many_tokens(model):
    with pytest.raises(ValueError, match="input_ids has 513 tokens, more than the 512 positions"):
        model(torch.zeros(1, 513, dtype=torch.long))
