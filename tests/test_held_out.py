"""Every shipped card reports its figures over the whole held-out split with the protocol (issue #15, item 8);
the held-out functions cover their whole split (on tiny models made here: tests never read the corpora)."""

from __future__ import annotations

import json
import random

import pytest
import torch

from playground import checkpoints

CARDS = sorted(p for p in checkpoints.MODELS_DIR.glob("*/card.json") if not p.parent.name.startswith("tok-"))
FIGURES = {"gpt": ("loss",), "recurrent": ("loss",), "rnn": ("loss",), "lstm": ("loss",), "gru": ("loss",),
           "bert": ("top1", "top5", "nsp_accuracy", "masked_tokens", "pairs"),
           "minilm-mlm": ("top1", "top5", "loss", "masked_tokens", "windows"),
           "seq2seq": ("trained_lengths", "longer"),
           "elmo": ("perplexity_forward", "perplexity_backward", "perplexity_mean", "tokens_per_direction", "words")}


@pytest.mark.parametrize("card_path", CARDS, ids=lambda p: p.parent.name)
def test_every_model_card_has_its_held_out_figures_and_protocol(card_path):
    card = json.loads(card_path.read_text(encoding="utf-8"))
    if card.get("kind") in ("word2vec", "glove"):
        pytest.skip(f"{card['kind']} has no held-out split: its card reports analogy and similarity test sets")
    if card.get("kind") == "vocabulary":
        pytest.skip("a real LLM's vocabulary, converted from its package: nothing trained, nothing held out")
    held_out = card.get("held_out")
    assert isinstance(held_out, dict) and held_out.get("protocol"), f"{card_path.parent.name}: no held-out block"
    for key in FIGURES.get(card["kind"], ("loss",)):
        assert key in held_out, f"{card_path.parent.name}: held_out has no {key!r}"


def test_minilm_mlm_held_out_covers_every_window_of_the_split():
    from playground.nets.bert import BertConfig, BertForPreTraining
    from playground.training import minilm_mlm

    class Tok:  # what held_out reads of a tokenizer (whole-word masking is off)
        def get_vocab_size(self) -> int:
            return 200

    val = [torch.arange(10, 10 + 130), torch.arange(10, 10 + 65)]  # 130 // 62 = 2 windows, 65 // 62 = 1
    data = minilm_mlm.MLMData(Tok(), [], val, [], cls_id=1, sep_id=2, mask_id=3, random_low=4)
    model = BertForPreTraining(BertConfig(vocab_size=200, n_positions=64, n_layer=1, n_head=2, n_embd=16, n_inner=32))
    result = minilm_mlm.held_out(model, data, seq_len=64)
    assert result["windows"] == 3 and 0 < result["masked_tokens"] <= 3 * 62 and 0 <= result["top1"] <= result["top5"]


def test_bert_held_out_starts_a_pair_at_every_held_out_sentence():
    from playground.training import bert

    g = random.Random(0)
    sentences = [[g.randrange(5, 60) for _ in range(g.randrange(3, 9))] for _ in range(40)]
    corpus = bert.PairCorpus(sentences, [i // 8 for i in range(40)])  # 5 documents of 8 sentences
    seen = [corpus.pair_at(i, random.Random(1), 64)[0][:len(sentences[i])] for i in corpus.starts]
    assert seen == [sentences[i] for i in corpus.starts] and len(corpus.starts) == 35


def test_seq2seq_held_out_takes_only_held_out_sources():
    from playground.training import seq2seq

    for length in (1, 5, 33):
        assert all(seq2seq.is_test(words) for words, _ in seq2seq.test_set(length, 20))


def test_elmo_held_out_is_recomputed_by_the_tool_from_the_stored_weights(tiny_corpus, tmp_path):
    """The card's figures (the whole held-out word stream, each direction) are those of the fp16 weights it ships:
    tools/held_out.py recomputes them from the checkpoint and the corpus alone."""
    from pathlib import Path

    from playground import train
    from playground.tools import held_out

    threads = torch.get_num_threads()
    train.main(["elmo", "--corpus", tiny_corpus, "--out", str(tmp_path), "--name", "e", "--n_embd=8",
                "--batch_size=4", "--block_size=16", "--min_count=1", "--max_iters=20", "--eval_interval=10",
                "--eval_iters=2", "--threads=1"])
    torch.set_num_threads(threads)
    card = checkpoints.load(tmp_path / "e").card
    figures = card["held_out"]
    assert figures["words"] == card["words"]["held_out"] and figures["tokens_per_direction"] == figures["words"] - 1
    assert held_out.held_out(str(tmp_path / "e"), [Path(tiny_corpus)]) == figures
