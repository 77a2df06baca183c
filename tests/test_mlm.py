"""Masked-LM pre-training: BERT's masking statistics, sentence pairs for NSP, top-k accuracy, and a
tiny `python -m playground.train bert` run whose checkpoint loads back."""

from __future__ import annotations

import json
import random

import pytest
import torch

from playground import checkpoints, train
from playground.training import bert as mlm
from playground.training import masking
from playground.nets.bert import IGNORE_INDEX, BertConfig, BertForPreTraining

V, MASK, LOW = 1000, 4, 5  # vocabulary, [MASK] id, first non-special id


def _batch(B=256, T=128, seed=0):
    """Random ids with [CLS] at 0, a [SEP] in the middle and at the end of the real tokens, padding after."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(LOW, V, (B, T), generator=g)
    lengths = torch.randint(T // 2, T + 1, (B,), generator=g)
    pad = torch.arange(T)[None, :] >= lengths[:, None]
    ids[:, 0] = 2
    ids[:, T // 3] = 3
    ids[torch.arange(B), lengths - 1] = 3
    ids[pad] = 0
    special = (ids == 0) | (ids == 2) | (ids == 3)
    return ids, special


def test_masking_selects_15_percent_and_replaces_80_10_10():
    ids, special = _batch()
    m = masking.mask_tokens(ids, mask_id=MASK, vocab_size=V, special=special, random_low=LOW,
                        generator=torch.Generator().manual_seed(1))
    selected = m.labels != IGNORE_INDEX
    n = (~special).sum().item()
    assert n > 15_000
    assert abs(selected.sum().item() / n - 0.15) < 0.01            # ~0.003 is one standard deviation here
    action = m.action[selected]
    for value, share in ((masking.MASKED, 0.8), (masking.RANDOM, 0.1), (masking.KEPT, 0.1)):
        assert abs((action == value).float().mean().item() - share) < 0.025
    assert not selected[special].any(), "a [CLS], [SEP] or [PAD] was selected"
    assert ((m.action != 0) == selected).all()
    assert (m.labels[selected] == ids[selected]).all() and (m.labels[~selected] == IGNORE_INDEX).all()
    assert (m.input_ids[m.action == masking.MASKED] == MASK).all()
    assert (m.input_ids[(m.action == masking.NOT_SELECTED) | (m.action == masking.KEPT)]
            == ids[(m.action == masking.NOT_SELECTED) | (m.action == masking.KEPT)]).all()
    randoms = m.input_ids[m.action == masking.RANDOM]
    assert ((randoms >= LOW) & (randoms < V)).all(), "a random replacement fell on a special id"
    assert m.action.dtype == torch.int8


def test_masking_is_reproducible_with_a_generator_and_honours_its_arguments():
    ids, special = _batch(B=16, T=64)
    a = masking.mask_tokens(ids, mask_id=MASK, vocab_size=V, special=special, generator=torch.Generator().manual_seed(3))
    b = masking.mask_tokens(ids, mask_id=MASK, vocab_size=V, special=special, generator=torch.Generator().manual_seed(3))
    assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.labels, b.labels)
    every = masking.mask_tokens(ids, mask_id=MASK, vocab_size=V, special=special, prob=1.0, replace=(1.0, 0.0, 0.0))
    assert (every.input_ids[~special] == MASK).all() and (every.input_ids[special] == ids[special]).all()
    with pytest.raises(AssertionError, match="sum to 1"):
        masking.mask_tokens(ids, mask_id=MASK, vocab_size=V, special=special, replace=(0.8, 0.1, 0.2))


def test_whole_word_masking_selects_every_piece_of_a_word():
    g = torch.Generator().manual_seed(0)
    B, T = 64, 120
    ids, special = torch.randint(LOW, V, (B, T), generator=g), torch.zeros(B, T, dtype=torch.bool)
    pieces = torch.randint(1, 4, (B, T), generator=g)               # words of 1-3 pieces
    word_ids = torch.empty(B, T, dtype=torch.long)
    for r in range(B):
        row = [w for w, k in enumerate(pieces[r].tolist()) for _ in range(k)][:T]
        word_ids[r] = torch.tensor(row)
    word_ids[:, 0], special[:, 0] = -1, True                        # [CLS]
    m = masking.mask_tokens(ids, mask_id=MASK, vocab_size=V, special=special, word_ids=word_ids,
                        generator=torch.Generator().manual_seed(1))
    selected = m.labels != IGNORE_INDEX
    n_words = n_chosen = 0
    for r in range(B):
        for w in word_ids[r].unique().tolist():
            if w < 0:
                continue
            s = selected[r, word_ids[r] == w]
            assert s.all() or not s.any(), f"word {w} of row {r} is only partly selected"
            n_words += 1
            n_chosen += int(s.all())
    assert abs(n_chosen / n_words - 0.15) < 0.02
    assert not selected[:, 0].any()


def test_word_ids_that_restart_in_sentence_b_are_other_words():
    """`tokenizers` numbers the words of each sentence of a pair from 0: sentence B's word 0 is not A's. Over many
    seeded maskings, the pieces of one word are always selected together, and words that share an id across the
    [SEP] are selected apart (as often as two different words are)."""
    word_ids = torch.tensor([[-1, 0, 0, 1, -1, 0, 1, 1, -1]] * 4000)
    special = word_ids < 0
    ids = torch.arange(9).repeat(4000, 1) + 10
    selected = masking.mask_tokens(ids, mask_id=MASK, vocab_size=V, special=special, word_ids=word_ids, prob=0.5,
                                   generator=torch.Generator().manual_seed(0)).labels != IGNORE_INDEX
    assert (selected[:, 1] == selected[:, 2]).all() and (selected[:, 6] == selected[:, 7]).all()  # one word each
    for a, b in ((1, 5), (3, 6), (1, 3)):  # A's word 0 and B's word 0; A's 1 and B's 1; two words of A
        apart = (selected[:, a] != selected[:, b]).float().mean().item()
        assert 0.45 < apart < 0.55, f"positions {a} and {b} were selected apart {apart:.0%} of the time, not ~50%"


def test_topk_accuracy_on_a_hand_example():
    logits = torch.tensor([[[0.0, 5.0, 1.0, 2.0],     # label 1: top-1
                            [9.0, 9.0, 9.0, 9.0],     # ignored
                            [3.0, 2.0, 1.0, 0.0]]])   # label 2: third, so top-3 only
    labels = torch.tensor([[1, IGNORE_INDEX, 2]])
    acc = masking.topk_accuracy(logits, labels, ks=(1, 3))
    assert acc == {"top1": 0.5, "top3": 1.0, "n": 2.0}
    assert masking.topk_accuracy(logits, torch.full_like(labels, IGNORE_INDEX))["top1"] == 0.0


def test_documents_and_sentences_follow_the_rule():
    text = "It rained. Mr. Brown left! \"Why?\" she asked.\nStill one paragraph.\n\nA new document. 2 more.\n"
    assert mlm.split_documents(text) == [
        ["It rained.", "Mr. Brown left!", "\"Why?\" she asked.", "Still one paragraph."], ["A new document.", "2 more."]]
    assert mlm.split_documents("the end. next, no capital.") == [["the end. next, no capital."]]
    glosses = "a small dog\na large cat; \"the cat sat\"\n"     # no blank line: one document, a sentence per line
    assert mlm.split_documents(glosses) == [["a small dog", "a large cat; \"the cat sat\""]]


def _numbered_corpus(n_docs=40, seed=0) -> mlm.PairCorpus:
    """Sentence i is the single token 100 + i, so a segment shows which sentences it took."""
    rng = random.Random(seed)
    doc = [d for d in range(n_docs) for _ in range(rng.randint(1, 6))]
    return mlm.PairCorpus([[100 + i] for i in range(len(doc))], doc)


def test_nsp_pairs_are_half_real_next_half_random_other_document():
    corpus = _numbered_corpus()
    rng = random.Random(1)
    labels = []
    for _ in range(2000):
        a, b, label = corpus.pair(rng, max_len=6)   # room for 3 sentences: A gets at most 1, B at most 2
        sa, sb = [t - 100 for t in a], [t - 100 for t in b]
        assert sa == list(range(sa[0], sa[0] + len(sa))) and sb == list(range(sb[0], sb[0] + len(sb)))
        assert len({corpus.doc[i] for i in sa}) == 1 and len({corpus.doc[i] for i in sb}) == 1
        if label == 0:
            assert sb[0] == sa[-1] + 1 and corpus.doc[sb[0]] == corpus.doc[sa[0]], "IsNext but B does not follow A"
        else:
            assert corpus.doc[sb[0]] != corpus.doc[sa[0]], "NotNext from the same document"
        labels.append(label)
    assert 0.46 < sum(labels) / len(labels) < 0.54
    assert all(corpus.pair(rng, 6, nsp=False)[2] == 0 for _ in range(50))


def test_collate_gives_segments_padding_and_word_ids():
    continuation = torch.zeros(20, dtype=torch.bool)
    continuation[9] = True                                           # id 9 is a "##" piece
    batch = mlm.collate([([5, 6], [7, 8, 9], 0), ([5], [6], 1)], cls_id=2, sep_id=3, pad_id=0, max_len=16,
                        continuation=continuation)
    assert batch.input_ids.tolist() == [[2, 5, 6, 3, 7, 8, 9, 3], [2, 5, 3, 6, 3, 0, 0, 0]]
    assert batch.token_type_ids.tolist() == [[0, 0, 0, 0, 1, 1, 1, 1], [0, 0, 0, 1, 1, 0, 0, 0]]
    assert batch.attention_mask.tolist() == [[1] * 8, [1] * 5 + [0] * 3]
    assert batch.special.tolist()[1] == [True, False, True, False, True, True, True, True]
    assert batch.word_ids.tolist()[0] == [-1, 0, 1, -1, 2, 3, 3, -1]  # ##-piece 9 joins word 3
    assert batch.next_sentence_label.tolist() == [0, 1]
    cut = mlm.collate([([5] * 20, [6] * 20, 0)], cls_id=2, sep_id=3, pad_id=0, max_len=10, continuation=continuation)
    assert cut.input_ids.shape == (1, 10)                            # truncated to the positions


def test_losses_on_selected_positions_equal_the_full_forward():
    torch.manual_seed(0)
    model = BertForPreTraining(BertConfig(vocab_size=50, n_positions=16, n_layer=1, n_head=2, n_embd=16,
                                          n_inner=32, dropout=0.0)).eval()
    continuation = torch.zeros(50, dtype=torch.bool)
    batch = mlm.collate([([5, 6, 7], [8, 9], 0), ([10, 11], [12, 13, 14, 15], 1)], cls_id=2, sep_id=3, pad_id=0,
                        max_len=16, continuation=continuation)
    m = masking.mask_tokens(batch.input_ids, mask_id=4, vocab_size=50, special=batch.special, prob=0.5, random_low=5,
                        generator=torch.Generator().manual_seed(0))
    mlm_loss, nsp_loss, logits, labels, _ = mlm.pretraining_losses(model, batch, m)
    _, full = model(m.input_ids, batch.token_type_ids, batch.attention_mask, labels=m.labels,
                    next_sentence_label=batch.next_sentence_label)
    torch.testing.assert_close(mlm_loss + nsp_loss, full)
    assert logits.shape == (int((m.labels != IGNORE_INDEX).sum()), 50) and labels.shape == logits.shape[:1]


def _tiny_documents(path, n_docs=120, seed=0):
    """Documents of a few sentences from a toy grammar, blank lines between them."""
    rng = random.Random(seed)
    nouns, verbs = "cat dog bird fox king queen child farmer".split(), "sees likes finds follows helps calls".split()
    docs = []
    for _ in range(n_docs):
        topic = rng.choice(nouns)
        sentences = [f"The {topic} {rng.choice(verbs)} the {rng.choice(nouns)}." for _ in range(rng.randint(2, 5))]
        docs.append(" ".join(sentences))
    path.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    return path


TINY = ["--vocab_size=120", "--n_positions=32", "--n_layer=1", "--n_head=2", "--n_embd=32", "--n_inner=64",
        "--batch_size=12", "--eval_pairs=48", "--learning_rate=3e-3", "--warmup_iters=5", "--threads=1"]


@pytest.mark.slow  # a training run
def test_train_bert_kind_learns_and_its_checkpoint_loads(tmp_path):
    corpus = _tiny_documents(tmp_path / "docs.txt")
    result = train.main(["bert", "--corpus", str(corpus), "--out", str(tmp_path), "--name", "b",
                         "--max_iters=40", "--eval_interval=20", *TINY])
    history = result["history"]
    assert [h["iter"] for h in history] == [0, 20, 40]
    assert history[-1]["train"] < history[0]["train"] - 0.5, f"the loss did not drop: {history}"
    ckpt = checkpoints.load(tmp_path / "b")
    assert ckpt.kind == "bert" and isinstance(ckpt.model, BertForPreTraining) and not ckpt.model.training
    assert ckpt.tokenizer.token_to_id("[MASK]") == 4 and ckpt.config.vocab_size == ckpt.tokenizer.get_vocab_size()
    card = json.loads((tmp_path / "b" / "card.json").read_text())
    for key in ("val_top1", "val_top5", "val_nsp_accuracy", "train_loss", "val_loss", "steps", "wall_time_s"):
        assert key in card, key
    assert 0 <= card["val_top1"] <= card["val_top5"] <= 1 and 0 <= card["val_nsp_accuracy"] <= 1
    assert card["val_top1"] > history[0]["val_top1"] + 0.1, "held-out top-1 did not improve"
    assert 0 < card["frequency_baseline"]["top1"] <= card["frequency_baseline"]["top5"] < 1
    assert card["command"].startswith("python -m playground.train bert") and card["steps"] == 40
    from safetensors import safe_open

    with safe_open(str(tmp_path / "b" / "model.safetensors"), "pt") as f:
        assert f.get_tensor(f.keys()[0]).dtype == torch.float16      # half=True: stored as float16
    assert not (tmp_path / ".b.resume").exists()
    assert ckpt.model.nsp.weight.dtype == torch.float32               # loaded back as float32

    from playground.analysis import attention as att  # the Attention tab's loader

    m = att.load_bert(str(tmp_path / "b"))
    assert m is not None and m.family == "bert" and (m.n_layer, m.n_head, m.max_tokens) == (1, 2, 32)
    enc = att.encode(m, "The cat sees the dog.", "The fox helps the king.")
    assert enc.segments == [0] * enc.segments.index(1) + [1] * (len(enc.ids) - enc.segments.index(1))
    A = att.attention(m, enc)
    assert len(A) == 1 and A[0].shape == (2, len(enc.ids), len(enc.ids))
    assert abs(A[0].sum(axis=-1) - 1).max() < 1e-5
    assert att.load_bert(str(tmp_path / "no-such-model")) is None


def test_resume_continues_an_interrupted_run_without_nsp_and_with_whole_words(tmp_path, monkeypatch):
    corpus = _tiny_documents(tmp_path / "docs.txt")
    args = ["bert", "--corpus", str(corpus), "--out", str(tmp_path), "--name", "r", "--max_iters=20",
            "--eval_interval=10", "--whole_word=true", "--nsp=false", *TINY]
    real, calls = mlm.evaluate, []

    def interrupted(*a, **k):
        calls.append(1)
        if len(calls) == 5:   # the evaluation at step 20: steps 0 and 10 were written
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(mlm, "evaluate", interrupted)
    with pytest.raises(KeyboardInterrupt):
        train.main(args)
    assert (tmp_path / ".r.resume" / "current").is_file()
    assert json.loads((tmp_path / "r" / "card.json").read_text())["steps"] == 10
    monkeypatch.setattr(mlm, "evaluate", real)
    result = train.main(args + ["--resume"])
    assert [h["iter"] for h in result["history"]] == [0, 10, 20]
    card = json.loads((tmp_path / "r" / "card.json").read_text())
    assert card["steps"] == 20 and card["val_nsp_accuracy"] is None and card["train_config"]["whole_word"] is True
    assert not (tmp_path / ".r.resume").exists()


def test_time_schedule_warms_up_by_steps_then_decays_with_the_clock():
    cfg = mlm.BertTrainConfig(learning_rate=1e-3, min_lr=1e-4, warmup_iters=10, max_seconds=100, schedule="time")
    assert mlm.learning_rate(0, 50.0, cfg) < 2e-4                      # warmup ignores the clock
    assert mlm.learning_rate(10, 0.0, cfg) == pytest.approx(1e-3)
    assert mlm.learning_rate(99, 50.0, cfg) == pytest.approx(5.5e-4)   # half-way: the cosine's middle
    assert mlm.learning_rate(99, 100.0, cfg) == pytest.approx(1e-4)
    with pytest.raises(AssertionError, match="max_seconds"):
        mlm.BertTrainConfig(schedule="time")
