"""GloVe (Pennington et al. 2014): the weighting f, the co-occurrence counts, the loss, AdaGrad, the vectors,
the checkpoint, the CLI and the Embeddings tab's `glove` space. Tiny corpora made here; seconds each."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from playground import checkpoints, train
from playground.nets.glove import GloVe, GloVeConfig, GloVeVectors, weighting
from playground.training import glove


def test_weighting_is_zero_at_zero_a_power_below_x_max_and_one_from_there():
    X = torch.tensor([0.0, 1.0, 25.0, 99.0, 100.0, 250.0])
    f = weighting(X, x_max=100.0, alpha=0.75)
    expected = [0.0, 0.01 ** 0.75, 0.25 ** 0.75, 0.99 ** 0.75, 1.0, 1.0]
    assert torch.allclose(f, torch.tensor(expected), atol=1e-6)
    assert torch.allclose(weighting(X, 10.0, 1.0)[:3], torch.tensor([0.0, 0.1, 1.0]))  # α = 1: linear, capped


def dense(i: torch.Tensor, j: torch.Tensor, X: torch.Tensor, V: int) -> torch.Tensor:
    M = torch.zeros(V, V, dtype=torch.float64)
    M[i, j] = X.double()
    return M


def test_cooccurrence_equals_a_hand_count_with_one_over_distance():
    # the stream a b c a (ids 1 2 3 1): with window 2 the two a's (distance 3) never meet
    ids = torch.tensor([1, 2, 3, 1])
    i, j, X = glove.cooccurrence(ids, vocab_size=4, window=2)
    expected = torch.zeros(4, 4, dtype=torch.float64)
    for a, b, x in [(1, 2, 1 + 1 / 2),   # a b at distance 1, b ... a at distance 2
                    (2, 3, 1.0),         # b c at distance 1
                    (1, 3, 1 + 1 / 2)]:  # c a at distance 1, a ... c at distance 2
        expected[a, b] = expected[b, a] = x
    assert torch.allclose(dense(i, j, X, 4), expected)
    # window 3 adds the a ... a pair at distance 3, once from each side: X_aa = 2/3
    i3, j3, X3 = glove.cooccurrence(ids, vocab_size=4, window=3)
    expected[1, 1] = 2 / 3
    assert torch.allclose(dense(i3, j3, X3, 4), expected)


def test_cooccurrence_equals_a_brute_force_count_on_a_random_stream():
    g = torch.Generator().manual_seed(0)
    V, window = 7, 4
    ids = torch.randint(1, V, (300,), generator=g)
    brute = torch.zeros(V, V, dtype=torch.float64)
    for t in range(len(ids)):
        for d in range(1, window + 1):
            if t + d < len(ids):
                brute[ids[t], ids[t + d]] += 1 / d
                brute[ids[t + d], ids[t]] += 1 / d
    i, j, X = glove.cooccurrence(ids, V, window)
    assert torch.allclose(dense(i, j, X, V), brute, atol=1e-5)
    assert (X > 0).all() and len(set(zip(i.tolist(), j.tolist()))) == len(X)  # nonzero, each entry once


def test_loss_equals_a_hand_computation():
    torch.manual_seed(0)
    model = GloVe(GloVeConfig(vocab_size=4, dim=3, x_max=5.0, alpha=0.75))
    with torch.no_grad():
        model.b.copy_(torch.tensor([0.1, -0.2, 0.3, 0.0]))
        model.b_tilde.copy_(torch.tensor([-0.1, 0.4, 0.0, 0.2]))
    i, j, X = torch.tensor([0, 1, 2, 3]), torch.tensor([1, 2, 0, 3]), torch.tensor([1.0, 3.0, 7.0, 5.0])
    W, Wt, b, bt = (p.detach().tolist() for p in (model.W, model.W_tilde, model.b, model.b_tilde))
    hand = 0.0
    for a, c, x in zip(i.tolist(), j.tolist(), X.tolist()):
        f = min(1.0, (x / 5.0) ** 0.75)
        dot = sum(W[a][k] * Wt[c][k] for k in range(3))
        hand += f * (dot + b[a] + bt[c] - math.log(x)) ** 2
    assert float(model(i, j, X).detach()) == pytest.approx(hand, rel=1e-5)


def test_written_out_adagrad_step_is_autograds_gradient_scaled_by_the_accumulators():
    torch.manual_seed(1)
    model = GloVe(GloVeConfig(vocab_size=6, dim=4, x_max=3.0))
    i, j = torch.tensor([0, 1, 1, 4, 5]), torch.tensor([2, 3, 3, 0, 1])  # row 1 and column 3 twice
    X = torch.tensor([1.0, 2.5, 4.0, 0.5, 9.0])
    J = model(i, j, X)
    grads = torch.autograd.grad(J, list(model.parameters()))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    G = model.new_accumulators(initial=2.0)
    lr = 0.05
    returned = model.adagrad_step(i, j, X, lr, G)
    assert returned == pytest.approx(float(J), rel=1e-5)
    for (name, p), grad in zip(model.named_parameters(), grads):
        assert torch.allclose(p - before[name], -lr * grad / math.sqrt(2.0), atol=1e-6), name
        assert (G[name] >= 2.0).all() and (G[name] > 2.0).any(), name  # squared gradients were added


def test_adagrad_lowers_the_loss_and_reconstructs_log_x():
    torch.manual_seed(0)
    V = 6
    g = torch.Generator().manual_seed(3)
    A = torch.randint(1, 30, (V, V), generator=g).float()
    M = A + A.T                                                     # a symmetric count matrix, all nonzero
    i, j = (t.reshape(-1) for t in torch.meshgrid(torch.arange(V), torch.arange(V), indexing="ij"))
    X = M[i, j]
    model = GloVe(GloVeConfig(vocab_size=V, dim=V, x_max=1.0))     # f = 1 everywhere: plain least squares
    G = model.new_accumulators()
    start = float(model(i, j, X))
    for _ in range(3000):
        model.adagrad_step(i, j, X, 0.1, G)
    end = float(model(i, j, X))
    assert end < start / 1000, (start, end)
    fitted = model.residual(i, j, torch.zeros_like(X)).detach()    # w_i · w̃_j + b_i + b̃_j
    assert torch.allclose(fitted, torch.log(X), atol=0.05)


def toy_counts():
    ids = torch.randint(1, 30, (2000,), generator=torch.Generator().manual_seed(5))
    return glove.cooccurrence(ids, 30, 4)


def run(seed: int, **overrides) -> tuple[GloVe, dict]:
    torch.manual_seed(0)  # the same initial vectors every time: only the run's seed (the order) differs
    cfg = glove.GloVeTrainConfig(**{"dim": 6, "epochs": 3, "batch_size": 128, "threads": 1, **overrides})
    model = glove.build(30, cfg)
    return model, glove.train(model, *toy_counts(), cfg, seed=seed)


def test_the_epochs_order_comes_from_the_runs_seed_and_max_seconds_stops_a_run():
    (a, ha), (b, _), (c, _) = run(0), run(0), run(1)
    assert torch.equal(a.vectors(), b.vectors()) and not torch.equal(a.vectors(), c.vectors())
    assert [e["epoch"] for e in ha["epochs"]] == [1, 2, 3] and ha["epochs"][-1]["loss"] < ha["epochs"][0]["loss"]
    _, short = run(0, epochs=100_000, max_seconds=0.5)
    assert 0 < short["steps"] < 100_000 * math.ceil(len(toy_counts()[2]) / 128)


def test_vectors_are_w_plus_w_tilde():
    model = GloVe(GloVeConfig(vocab_size=5, dim=3))
    assert torch.equal(model.vectors(), (model.W + model.W_tilde).detach())
    assert torch.equal(GloVeVectors.from_glove(model).vectors(), model.vectors())


def test_checkpoint_round_trip_stores_only_w_plus_w_tilde_in_fp16(tmp_path):
    from safetensors import safe_open
    from tokenizers import Tokenizer

    from playground.training.word2vec import new_tokenizer

    model = GloVe(GloVeConfig(vocab_size=4, dim=6, x_max=10.0, window=3))
    tok = new_tokenizer({"[UNK]": 0, "cat": 1, "dog": 2, "fox": 3})
    checkpoints.save(tmp_path / "g", kind="glove", config=model.config, card={"kind": "glove"},
                     model=GloVeVectors.from_glove(model).half(), tokenizer=tok)
    with safe_open(str(tmp_path / "g" / "model.safetensors"), "pt") as f:
        assert list(f.keys()) == ["weight"] and f.get_tensor("weight").dtype == torch.float16
    loaded = checkpoints.load(tmp_path / "g")
    assert loaded.kind == "glove" and loaded.config == model.config and isinstance(loaded.tokenizer, Tokenizer)
    assert torch.allclose(loaded.model.vectors(), model.vectors(), atol=1e-3)


@pytest.fixture(scope="module")
def trained_dir(tiny_corpus, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("glove")
    train.main(["glove", "--corpus", tiny_corpus, "--out", str(out), "--name=glove-tiny", "--dim=8", "--epochs=5",
                "--min_count=1", "--window=3", "--batch_size=64", "--x_max=5", "--threads=1"])
    return out / "glove-tiny"


def test_the_cli_kind_writes_a_checkpoint_with_its_card(trained_dir, tiny_corpus, tmp_path):
    card = json.loads((trained_dir / "card.json").read_text())
    assert card["command"].startswith("python -m playground.train glove --corpus")
    assert card["corpus"][0]["sha256"] == checkpoints.sha256_file(tiny_corpus)
    assert len(card["history"]["epochs"]) == 5 and card["loss_after"] < card["loss_before"]
    assert card["cooccurrence"]["nonzero"] > 0 and card["vocab_size"] == checkpoints.load(trained_dir).config.vocab_size
    assert set(card["evaluation"]) == {"analogy", "similarity"} and "all" in card["evaluation"]["analogy"]
    assert card["train_config"]["window"] == 3 and card["storage"].startswith("float16")
    with pytest.raises(SystemExit):
        train.main(["glove", "--corpus", tiny_corpus, "--out", str(tmp_path), "--no_such_key=1"])


def test_the_embeddings_glove_space_answers_neighbours_and_names_unknown_words(trained_dir):
    from playground.analysis.embeddings import words as ws

    space = ws.glove_space(str(trained_dir))
    assert space.key == "glove" and space.compose is None and "fox" in space.vocab
    nb = ws.neighbours(space, space.vectors[space.vocab["fox"]], k=5)
    assert nb[0][0] == "fox" and nb[0][1] == pytest.approx(1.0, abs=1e-5) and len(nb) == 5
    notices: list[str] = []
    v = ws.view(space, ["fox", "dog", "lazy", "quick", "zyzzyva"], ["a"] * 5, "pca", 2, notices)
    assert v.data["unknown"] == ["zyzzyva"] and v.data["source"] == "glove"
    assert any("zyzzyva" in n and "glove has one vector per word" in n for n in notices)
    assert "fox" in v.data["neighbours"] and len(v.data["points"]) == 4


def test_glove_is_a_source_of_the_tab_and_its_score_sits_beside_word2vecs():
    from playground.analysis.embeddings import words as ws
    from playground.ui import embeddings_words

    assert ws.SPACE_MODELS["glove"] == "glove-english" and "glove" in embeddings_words.SOURCE_LABELS
    card = checkpoints.read_card("glove-english")
    if card is None or checkpoints.read_card("word2vec-english") is None:
        pytest.skip("glove-english or word2vec-english is not shipped")
    assert "glove" in ws.space_keys()
    analogy = card["evaluation"]["analogy"]["all"]
    assert f"our GloVe, on the same words and corpus, {analogy['accuracy']:.0%} of its {analogy['questions']}" \
        in embeddings_words.word2vec_note()
    *_, data = embeddings_words.embed_words("king queen man woman qwertyuiop", "glove", "pca", 2,
                                          progress=lambda *a, **k: None)
    assert data["source"] == "glove" and data["unknown"] == ["qwertyuiop"] and len(data["neighbours"]) == 4
