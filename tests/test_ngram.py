"""playground/nets/ngram.py: counts, add-k and interpolated Kneser-Ney against hand computations, the
language-model contract, and the shipped model's held-out table."""

import math

import numpy as np
import pytest
import torch

from playground import checkpoints
from playground.analysis import sampling
from playground.nets.ngram import NGramConfig, NGramLM, count, discount

# a toy corpus over V = 3 tokens: a=0, b=1, c=2
TOY = np.array([0, 1, 0, 1, 0, 2, 0, 1])


def toy(n: int, smoothing: str = "kneser-ney", k: float = 1.0) -> NGramLM:
    return NGramLM(NGramConfig(vocab_size=3, n=n, smoothing=smoothing, k=k), count(TOY, n, 3))


def test_counts_and_continuation_counts():
    t = count(TOY, 2, 3)
    assert t["keys_1"].tolist() == [0, 1, 2] and t["counts_1"].tolist() == [4, 3, 1]
    # bigrams: ab x3, ba x2, ac x1, ca x1
    assert dict(zip(t["keys_2"].tolist(), t["counts_2"].tolist())) == {0 * 3 + 1: 3, 0 * 3 + 2: 1, 1 * 3 + 0: 2,
                                                                       2 * 3 + 0: 1}
    # continuation: a follows b and c (2 contexts), b follows a only, c follows a only
    assert t["continuation_1"].tolist() == [2, 1, 1]


def test_add_k_by_hand():
    m = toy(2, "add-k", k=1.0)
    p, order = m.distribution([0])                        # after a: ab 3, ac 1, aa 0; c(a) = 4
    np.testing.assert_allclose(p, [(0 + 1) / 7, (3 + 1) / 7, (1 + 1) / 7])
    assert order == 2


def test_interpolated_kneser_ney_by_hand():
    m = toy(2)
    D2 = discount(np.array([3, 1, 2, 1]))                 # the bigram counts: n1 = 2, n2 = 1 -> 0.5
    D1 = discount(np.array([2, 1, 1]))                    # the continuation counts: n1 = 2, n2 = 1 -> 0.5
    assert D2 == D1 == 0.5
    p1 = np.maximum(np.array([2, 1, 1]) - D1, 0) / 4 + D1 * 3 / 4 * (1 / 3)    # unigram level, P_0 = 1/3
    p2 = np.maximum(np.array([0, 3, 1]) - D2, 0) / 4 + D2 * 2 / 4 * p1         # after a: 2 types, total 4
    p, order = m.distribution([0])
    np.testing.assert_allclose(p, p2)
    assert order == 2 and p.sum() == pytest.approx(1)


def test_unseen_context_backs_off_and_every_distribution_sums_to_one():
    m = toy(3)
    p, order = m.distribution([2, 2])                     # "cc" was never seen: the bigram level answers
    np.testing.assert_allclose(p, m.distribution([2])[0])
    assert order == 2
    for context in ([0], [0, 1], [1, 0], [2, 0], [2, 2], []):
        for model in (m, toy(3, "add-k", 0.5)):
            assert model.distribution(context)[0].sum() == pytest.approx(1)


def test_vectorised_log_probs_equal_the_forward_pass():
    for m in (toy(3), toy(3, "add-k", 0.1)):
        x = torch.tensor([[0, 1, 0, 2, 0], [2, 2, 1, 0, 1]])
        y = torch.tensor([[1, 0, 2, 0, 1], [2, 1, 0, 1, 0]])
        logits, loss = m(x, y)
        direct = logits.double().gather(-1, y[..., None])[..., 0].numpy()
        np.testing.assert_allclose(m.target_log_probs(x.numpy(), y.numpy()), direct, atol=1e-6)
        assert loss.item() == pytest.approx(-direct.mean(), abs=1e-5)


def test_the_shipped_model_generates_and_its_card_makes_the_lectures_point():
    ckpt = checkpoints.load("ngram-shakespeare")
    assert all(f.stat().st_size <= 10 * 2**20 for f in ckpt.path.iterdir())
    ids = torch.tensor([ckpt.tokenizer.encode("ROMEO:\n").ids])
    steps = list(sampling.stream(ckpt.model, ids, 20, temperature=0.8, seed=0))
    assert len(steps) == 20 and all(s["prob"] > 0 for s in steps)
    table = {(r["n"], r["smoothing"]): r["loss"] for r in ckpt.card["held_out_table"]}
    assert all(table[(n, "kneser-ney")] < table[(n - 1, "kneser-ney")] for n in range(2, 6))  # context helps
    assert table[(5, "kneser-ney")] < table[(5, "add-k")]                                       # smoothing matters
    assert ckpt.card["held_out"]["loss"] == table[(5, "kneser-ney")]
    assert ckpt.card["held_out"]["perplexity"] == pytest.approx(math.exp(ckpt.card["held_out"]["loss"]), rel=1e-3)


def test_generation_says_what_the_ngram_saw_and_where_it_backed_off():
    from playground.figures import generation as fgen
    from playground.ui import generation_tab

    *_, data = list(generation_tab.generate("ROMEO:", "ngram-shakespeare", 8, "greedy", 1.0, 10, 0.9, 0))[-1]
    first = data["steps"][0]
    assert first["sees"] == "MEO:" and first["order"] == 5 and first["n"] == 5
    title = fgen.next_token_figure(first, 0, ()).layout.title.text
    assert "the 5-gram sees" in title and "whole context was counted" in title
    assert "n-grams against the networks" in generation_tab.perplexity_md()


def test_beam_search_reports_forwards_log_p_for_every_beam_of_the_shipped_model():
    """Beam search runs `step` on one row per beam: each beam must be extended with its own distribution (the step
    once read row 0 for every row: the second beam of this prompt reported -12.174 where forward gives -13.128)."""
    ckpt = checkpoints.load("ngram-shakespeare")
    ids = torch.tensor([ckpt.tokenizer.encode("ROMEO:\nBut soft").ids])
    _, best, beams = sampling.beam_search(ckpt.model, ids, 12, beam_width=4)
    assert len(beams) == 4 and best == beams[0][1]
    for seq, reported in beams:
        logits, _ = ckpt.model(seq[None])                              # log-probabilities
        logp = logits[0, :-1].double().gather(-1, seq[1:, None])[:, 0]
        assert reported == pytest.approx(float(logp[ids.size(1) - 1:].sum()), abs=1e-3)
    assert sampling.sequence_log_prob(ckpt.model, beams[0][0][None]) > sampling.sequence_log_prob(
        ckpt.model, beams[-1][0][None])


def test_the_discount_never_reaches_zero():
    """Every count seen at least twice (a repetitive text): Ney's n1 / (n1 + 2 n2) would be 0, an unseen
    continuation of a seen context would get probability 0 and the loss would be infinite. n1 is floored at 1."""
    text = np.tile([0, 1, 2, 0, 1, 0, 2, 1], 3)                       # every trigram of the text seen 2 or 3 times
    t = count(text, 3, 3)
    assert (t["counts_3"] > 1).all() and (t["counts_3"] == 2).any()
    assert discount(t["counts_3"]) == 1 / (1 + 2 * int((t["counts_3"] == 2).sum()))
    assert discount(np.array([1, 2, 2, 3])) == 1 / (1 + 2 * 2)         # with a singleton: Ney's D, unchanged
    m = NGramLM(NGramConfig(vocab_size=3, n=3), t)
    p, order = m.distribution([0, 1])                                  # seen: "01" is followed by 2 and 0 only
    assert order == 3 and (p > 0).all() and p.sum() == pytest.approx(1)
    x = torch.tensor([[0, 1, 1, 2, 2, 0]])                             # "11", "22": never seen after their contexts
    _, loss = m(x[:, :-1], x[:, 1:])
    assert math.isfinite(loss.item())
