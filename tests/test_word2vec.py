"""word2vec (playground/word2vec.py): the negative-sampling loss by hand, the two distributions, the
written-out SGD step against autograd, a tiny training run, the checkpoint round trip and the CLI kind."""

from __future__ import annotations

import json
import math

import pytest
import torch

from playground import checkpoints, train
from playground.training import word2vec
from playground.nets.word2vec import Word2Vec, Word2VecConfig


def sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def tiny_model(V=6, d=2, architecture="skipgram") -> Word2Vec:
    model = Word2Vec(Word2VecConfig(vocab_size=V, dim=d, architecture=architecture, window=2))
    with torch.no_grad():
        model.W_in.weight.copy_(torch.arange(V * d, dtype=torch.float32).view(V, d) / 10 - 0.5)
        model.W_out.weight.copy_(torch.arange(V * d, dtype=torch.float32).flip(0).view(V, d) / 10 - 0.3)
    return model


def test_skipgram_loss_equals_a_hand_computation():
    model = tiny_model()
    v, u = model.W_in.weight.tolist(), model.W_out.weight.tolist()
    dot = lambda a, b: sum(x * y for x, y in zip(a, b))  # noqa: E731
    # pair 1: centre 1, context 3, noise 4 and 5; pair 2: centre 2, context 0, noise 1 and 1
    pairs = [(1, 3, (4, 5)), (2, 0, (1, 1))]
    by_hand = []
    for c, o, noise in pairs:
        loss = -math.log(sigmoid(dot(u[o], v[c])))
        loss -= sum(math.log(sigmoid(-dot(u[n], v[c]))) for n in noise)
        by_hand.append(loss)
    got = model(torch.tensor([1, 2]), torch.tensor([3, 0]), torch.tensor([[4, 5], [1, 1]]))
    assert got.item() == pytest.approx(sum(by_hand) / 2, rel=1e-6)
    # at the C code's init (v' = 0) every score is 0, so the loss is (1 + k) log 2
    fresh = Word2Vec(Word2VecConfig(vocab_size=6, dim=2))
    at_init = fresh(torch.tensor([1]), torch.tensor([2]), torch.tensor([[3, 4, 5]])).item()
    assert at_init == pytest.approx(4 * math.log(2))


def test_cbow_hidden_is_the_mean_of_the_real_context_vectors():
    model = tiny_model(architecture="cbow")
    ctx = torch.tensor([[1, 2, 3, 0]])
    mask = torch.tensor([[True, True, False, False]])
    h = model.hidden(ctx, mask)
    assert torch.allclose(h[0], (model.W_in.weight[1] + model.W_in.weight[2]) / 2)


def test_subsampling_keeps_rare_words_and_thins_frequent_ones():
    counts = torch.tensor([0, 1000, 100, 10, 1])   # total 1111; f = count / 1111
    t = 1e-2
    keep = word2vec.keep_probability(counts, t)
    f = counts.double() / counts.sum()
    assert keep[0] == 0  # [UNK]: never in the stream
    for i in range(1, 5):
        assert keep[i].item() == pytest.approx(min(1.0, math.sqrt(t / f[i].item())))
    assert keep[1] < keep[2] < 1.0 and keep[3] == keep[4] == 1.0
    assert torch.all(word2vec.keep_probability(counts, 0.0) == 1.0)  # t = 0: off


def test_noise_distribution_is_the_unigram_to_the_three_quarters():
    counts = torch.tensor([0, 16, 1])
    p = word2vec.noise_distribution(counts)
    assert p.sum().item() == pytest.approx(1.0)
    assert p[0] == 0 and (p[1] / p[2]).item() == pytest.approx(16 ** 0.75)  # 8, not 16: rare words drawn more


def test_context_pairs_stay_inside_the_window():
    ids = torch.arange(10, 30)
    g = torch.Generator().manual_seed(0)
    centres, contexts = word2vec.context_pairs(ids, window=3, generator=g)
    gaps = (centres - contexts).abs()
    assert len(centres) > 0 and gaps.min() >= 1 and gaps.max() <= 3
    one, other = word2vec.context_pairs(ids, window=1, generator=g)
    assert sorted(zip(one.tolist(), other.tolist())) == sorted(
        [(i, i + 1) for i in range(10, 29)] + [(i + 1, i) for i in range(10, 29)])
    targets, ctx, mask = word2vec.cbow_windows(ids, 2, g)
    assert ctx.shape == (20, 4) and not mask[0, :2].any()  # nothing left of the first word


@pytest.mark.parametrize("architecture", ["skipgram", "cbow"])
def test_written_out_sgd_step_equals_autograd(architecture):
    torch.manual_seed(0)
    model = tiny_model(V=12, d=4, architecture=architecture)
    reference = Word2Vec(model.config)
    reference.load_state_dict(model.state_dict())
    B, k, lr = 5, 3, 0.1
    targets, negatives = torch.randint(1, 12, (B,)), torch.randint(1, 12, (B, k))
    if architecture == "cbow":
        inputs, mask = torch.randint(1, 12, (B, 4)), torch.rand(B, 4) > 0.3
        mask[:, 0] = True
    else:
        inputs, mask = torch.randint(1, 12, (B,)), None
    loss = reference(inputs, targets, negatives, mask) * B  # the pairs' losses summed, as plain SGD per pair
    loss.backward()
    value = model.sgd_step(inputs, targets, negatives, lr, mask)
    assert value == pytest.approx(loss.item() / B, rel=1e-6)
    for ours, theirs in ((model.W_in.weight, reference.W_in.weight), (model.W_out.weight, reference.W_out.weight)):
        expected = theirs.detach() - lr * theirs.grad.to_dense()
        assert torch.allclose(ours, expected, atol=1e-6)


@pytest.fixture(scope="module")
def trained(tiny_corpus):
    tok = word2vec.train_vocabulary(word2vec.read_lines([tiny_corpus]), max_vocab=100, min_count=1)
    ids = word2vec.encode_corpus(tok, word2vec.read_lines([tiny_corpus]))
    counts = torch.bincount(ids, minlength=tok.get_vocab_size())
    cfg = word2vec.Word2VecTrainConfig(dim=16, epochs=2, batch_size=256, subsample=0.0, window=2)
    torch.manual_seed(0)
    model = word2vec.build(tok.get_vocab_size(), cfg)
    before = word2vec.mean_loss(model, ids, counts, seed=1)
    history = word2vec.train(model, ids, counts, cfg, seed=0)
    after = word2vec.mean_loss(model, ids, counts, seed=1)
    return tok, ids, model, before, after, history


def test_vocabulary_is_lowercased_letter_runs_and_unknowns_are_dropped(trained):
    tok, ids, *_ = trained
    vocab = tok.get_vocab()
    assert vocab["[UNK]"] == 0 and "the" in vocab and "The" not in vocab
    assert all(w == "[UNK]" or w.isalpha() and w.islower() for w in vocab)
    assert len(ids) > 1000 and (ids > 0).all()
    assert tok.encode("The FOX, the fox!").ids == [vocab["the"], vocab["fox"], vocab["the"], vocab["fox"]]


def test_a_tiny_training_run_lowers_the_loss(trained):
    *_, before, after, history = trained
    assert before == pytest.approx(6 * math.log(2), rel=1e-4)  # v' = 0 at init: (1 + k) log 2
    assert after < before - 0.5, (before, after)
    assert history["steps"] > 0 and history["pairs"] > 0 and len(history["epochs"]) == 2


def test_checkpoint_round_trip_in_fp16(trained, tmp_path):
    tok, _, model, *_ = trained
    card = {"kind": "word2vec", "command": "test"}
    checkpoints.save(tmp_path / "w2v", kind="word2vec", config=model.config, card=card,
                     model=word2vec.fp16_copy(model), tokenizer=tok)
    from safetensors import safe_open

    with safe_open(str(tmp_path / "w2v" / "model.safetensors"), "pt") as f:
        assert f.get_tensor("W_in.weight").dtype == torch.float16  # half the bytes on disk
    loaded = checkpoints.load(tmp_path / "w2v")
    assert loaded.kind == "word2vec" and loaded.config == model.config
    assert loaded.model.vectors().dtype == torch.float32
    assert torch.allclose(loaded.model.vectors(), model.vectors(), atol=1e-3, rtol=1e-3)
    assert loaded.tokenizer.get_vocab() == tok.get_vocab()


def test_evaluation_on_planted_vectors():
    words = ["[UNK]", "king", "queen", "man", "woman", "prince", "princess", "dog", "cat", "letter"]
    vocab = {w: i for i, w in enumerate(words)}
    male, royal, young = torch.tensor([1.0, 0, 0, 0]), torch.tensor([0, 1.0, 0, 0]), torch.tensor([0, 0, 1.0, 0])
    female = -male
    V = torch.zeros(len(words), 6)
    V[:, :4] = torch.stack([torch.zeros(4), male + royal, female + royal, male, female, male + royal + young,
                            female + royal + young, torch.zeros(4), torch.zeros(4), torch.zeros(4)])
    V[7, 4], V[8, 4], V[8, 5], V[9, 5] = 1.0, 1.0, 0.3, 1.0   # dog ~ cat, letter apart
    result = word2vec.evaluate(V, vocab)
    family = result["analogy"]["family-gender"]
    assert family["questions"] == 6 and family["accuracy"] == 1.0  # every a:b :: c:d among the three pairs
    assert result["similarity"]["triples"] == 1 and result["similarity"]["accuracy"] == 1.0  # (dog, cat, letter)


def test_the_cli_kind_writes_a_checkpoint_with_its_card(tiny_corpus, tmp_path):
    out = train.main(["word2vec", "--corpus", tiny_corpus, "--out", str(tmp_path), "--name=w2v", "--dim=8",
                      "--epochs=1", "--min_count=1", "--batch_size=512"])
    assert out["loss_after"] < out["loss_before"]
    card = json.loads((tmp_path / "w2v" / "card.json").read_text())
    assert card["command"].startswith("python -m playground.train word2vec --corpus")
    assert {"analogy", "similarity"} <= set(card["evaluation"]) and card["storage"] == "float16"
    assert card["corpus"][0]["sha256"] == checkpoints.sha256_file(tiny_corpus)
    with pytest.raises(SystemExit):
        train.main(["word2vec", "--corpus", tiny_corpus, "--out", str(tmp_path), "--no_such_key=1"])
