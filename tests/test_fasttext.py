"""FastText (playground/nets/fasttext.py, playground/training/fasttext.py): the paper's n-grams, FNV-1a, vectors
for unseen words, the written-out SGD step against autograd, a toy training run, the checkpoint round trip, the
CLI kind and the Embeddings tab's `fasttext` space. Tiny corpora made here; each test takes seconds."""

from __future__ import annotations

import json
import math
import random

import pytest
import torch

from playground import checkpoints, train
from playground.nets.fasttext import FastText, FastTextConfig, char_ngrams, fnv1a
from playground.training import fasttext as ft
from playground.training import word2vec


def test_the_ngrams_of_where_are_the_papers_example():
    assert char_ngrams("where", 3, 3) == ["<wh", "whe", "her", "ere", "re>"]    # §3.2, n = 3
    grams = char_ngrams("where", 3, 6)
    assert set(grams) == {"<wh", "whe", "her", "ere", "re>", "<whe", "wher", "here", "ere>", "<wher", "where",
                          "here>", "<where", "where>"} and len(grams) == 14     # "<where>" has 7 characters
    model = FastText(FastTextConfig(vocab_size=3, buckets=50, dim=4), vocab={"[UNK]": 0, "where": 2})
    names, rows = model.ngrams("where")
    assert names[0] == "<where>" and rows[0] == 2 and names[1:] == grams  # the word itself, as its own sequence
    assert all(3 <= r < 53 for r in rows[1:]) and rows[1] == 3 + fnv1a("<wh") % 50
    unseen, _ = model.ngrams("her")        # not in the vocabulary: n-grams only, "<her>" among them (5 characters)
    assert unseen == ["<he", "her", "er>", "<her", "her>", "<her>"]


def test_fnv1a_matches_the_published_test_vectors():
    assert fnv1a("") == 0x811C9DC5 and fnv1a("a") == 0xE40C292C and fnv1a("foobar") == 0xBF9CF968
    assert fnv1a("<wh") == fnv1a("<wh") != fnv1a("<wH")      # deterministic, unlike Python's salted hash()


def test_an_unseen_word_is_the_mean_of_its_ngram_rows():
    torch.manual_seed(0)
    model = FastText(FastTextConfig(vocab_size=4, buckets=97, dim=5), vocab={"[UNK]": 0, "cat": 1, "cats": 2})
    names, rows = model.ngrams("catz")
    assert names == char_ngrams("catz") and all(r >= 4 for r in rows)    # no word row of its own, buckets only
    W = model.W_in.weight.detach()
    expected = torch.stack([W[4 + fnv1a(g) % 97] for g in char_ngrams("catz")]).sum(0) / len(rows)
    assert torch.allclose(model.word_vector("catz"), expected, atol=1e-6)  # the paper's sum / |G_w|: same cosines
    seen = model.word_vector("cats")
    assert torch.allclose(seen, (W[2] + sum(W[4 + fnv1a(g) % 97] for g in char_ngrams("cats"))) / (1 + 10))
    assert torch.equal(model.word_vector(""), torch.zeros(5))      # "<>": no n-gram of 3..6 and no row: zero
    rows_t, mask = model.padded_ngrams(["catz", "cats", ""])
    assert torch.allclose(model.hidden(rows_t, mask), torch.stack([model.word_vector(w) for w in ["catz", "cats", ""]]))


@pytest.mark.parametrize("average_repeats", [True, False])
def test_written_out_sgd_step_equals_autograd(average_repeats):
    torch.manual_seed(0)
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(["ab", "abc", "bcd", "cde", "xyzzy"])}}
    model = FastText(FastTextConfig(vocab_size=6, buckets=11, dim=4), vocab)
    torch.nn.init.normal_(model.W_out.weight, std=0.5)
    reference = FastText(model.config, vocab)
    reference.load_state_dict(model.state_dict())
    rows, mask = ft.vocabulary_ngrams(model)
    centres, targets, negatives = torch.tensor([1, 2, 5, 2]), torch.tensor([3, 4, 1, 5]), torch.randint(1, 6, (4, 3))
    sizes = mask[centres].sum(1).float()                              # |G_w| of each centre
    lr = 0.1
    # output side: the exact gradient of the pairs' summed loss
    per_pair = [reference(rows[c:c + 1], mask[c:c + 1], targets[i:i + 1], negatives[i:i + 1])
                for i, c in enumerate(centres.tolist())]
    out_grad = torch.autograd.grad(sum(per_pair), reference.W_out.weight)[0]
    # input side: every n-gram row takes all of ∂loss/∂u, i.e. the gradient of Σ |G_w| loss (the code's update)
    per_pair = [reference(rows[c:c + 1], mask[c:c + 1], targets[i:i + 1], negatives[i:i + 1])
                for i, c in enumerate(centres.tolist())]
    in_grad = torch.autograd.grad(sum(n * l for n, l in zip(sizes, per_pair)), reference.W_in.weight)[0]
    value = model.sgd_step(rows[centres], mask[centres], targets, negatives, lr, average_repeats=average_repeats)
    assert value == pytest.approx(float(sum(per_pair).detach()) / 4, rel=1e-5)
    assert torch.allclose(model.W_out.weight, reference.W_out.weight - lr * out_grad, atol=1e-6)
    if average_repeats:  # a row used in several places of the batch moves by the mean of their updates
        uses = torch.bincount(rows[centres][mask[centres]], minlength=model.W_in.weight.size(0)).clamp(min=1)
        assert uses.max() > 1                                         # "abc" and "bcd" share a row, 2 is there twice
        in_grad = in_grad / uses.unsqueeze(1)
    assert torch.allclose(model.W_in.weight, reference.W_in.weight - lr * in_grad, atol=1e-6)
    assert not torch.equal(model.W_in.weight, reference.W_in.weight)   # the step did move the rows


def toy_corpus(path) -> str:
    """Two topics whose words share stems (swim, swimming, swimmer ...; read, reading, reader ...)."""
    rng = random.Random(0)
    topics = [["swim", "swimming", "swimmer", "swims", "water", "pool", "lake", "wet"],
              ["read", "reading", "reader", "reads", "book", "page", "letter", "library"]]
    lines = [" ".join(rng.choice(topics[i % 2]) for _ in range(10)) for i in range(1500)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    corpus = toy_corpus(tmp_path_factory.mktemp("ft") / "toy.txt")
    tok = word2vec.train_vocabulary(word2vec.read_lines([corpus]), max_vocab=100, min_count=1)
    ids = word2vec.encode_corpus(tok, word2vec.read_lines([corpus]))
    counts = torch.bincount(ids, minlength=tok.get_vocab_size())
    cfg = ft.FastTextTrainConfig(dim=16, buckets=2000, epochs=3, batch_size=256, subsample=0.0, window=3,
                                 learning_rate=0.025, threads=1)
    torch.manual_seed(0)
    model = ft.build(tok.get_vocab(), cfg)
    before = ft.pairs_loss(model, ids[-3000:], counts, seed=1)
    history = ft.train(model, ids, counts, cfg, seed=0)
    after = ft.pairs_loss(model, ids[-3000:], counts, seed=1)
    return corpus, tok, model, before, after, history


@pytest.mark.slow  # a training run
def test_training_lowers_the_loss_and_a_misspelling_lands_near_its_word(trained):
    _, tok, model, before, after, history = trained
    assert before["loss"] == pytest.approx(6 * math.log(2), rel=1e-4)   # v = 0 at init: (1 + k) log 2
    assert after["loss"] < before["loss"] - 0.5 and history["steps"] > 0 and len(history["epochs"]) == 3
    vocab = {w: i for w, i in tok.get_vocab().items() if i}
    words = sorted(vocab, key=vocab.get)
    unit = torch.nn.functional.normalize(model.vectors(words), dim=1)
    for typo, word in [("swimminng", "swimming"), ("readinng", "reading"), ("libary", "library")]:
        assert typo not in vocab
        cos = unit @ torch.nn.functional.normalize(model.word_vector(typo), dim=0)
        assert words[int(cos.argmax())] == word, (typo, words[int(cos.argmax())])
    # and the topics came apart: a word is nearer its own topic's words than the other's
    cos = lambda a, b: float(unit[words.index(a)] @ unit[words.index(b)])  # noqa: E731
    assert cos("water", "pool") > cos("water", "book") and cos("page", "library") > cos("page", "lake")


def test_checkpoint_round_trip_keeps_only_the_input_rows_in_fp16(trained, tmp_path):
    _, tok, model, *_ = trained
    checkpoints.save(tmp_path / "ft", kind="fasttext", config=model.config, card={"kind": "fasttext", "command": "t"},
                     model=ft.fp16_copy(model), tokenizer=tok)
    from safetensors import safe_open

    with safe_open(str(tmp_path / "ft" / "model.safetensors"), "pt") as f:
        assert list(f.keys()) == ["W_in.weight"] and f.get_tensor("W_in.weight").dtype == torch.float16
    loaded = checkpoints.load(tmp_path / "ft")
    assert loaded.kind == "fasttext" and loaded.config == model.config and loaded.model.vocab == tok.get_vocab()
    for word in ("swimming", "swimminng", "q"):
        assert torch.allclose(loaded.model.word_vector(word), model.word_vector(word), atol=2e-3, rtol=1e-2)


def test_the_cli_kind_writes_a_checkpoint_with_its_card(trained, tmp_path):
    corpus = trained[0]
    out = train.main(["fasttext", "--corpus", corpus, "--out", str(tmp_path), "--name=ft", "--dim=8", "--buckets=500",
                      "--epochs=1", "--min_count=1", "--batch_size=512", "--held_out_tokens=1000", "--threads=1"])
    assert out["held_out"]["loss"] < out["held_out"]["loss_before"]
    card = json.loads((tmp_path / "ft" / "card.json").read_text())
    assert card["command"].startswith("python -m playground.train fasttext --corpus")
    assert card["corpus"][0]["sha256"] == checkpoints.sha256_file(corpus) and card["buckets"] == 500
    assert {"analogy", "similarity"} <= set(card["evaluation"]) and card["storage"].startswith("float16")
    assert card["held_out"]["tokens"] == 1000 and card["held_out"]["protocol"] and "misspellings" in card["oov"]
    assert card["train_tokens"] == card["tokens"] - 1000
    with pytest.raises(SystemExit):
        train.main(["fasttext", "--corpus", corpus, "--out", str(tmp_path), "--no_such_key=1"])


def test_the_oov_check_finds_the_words_behind_their_typos(trained):
    model = trained[2]
    result = ft.oov_check(model, first=1, count=50, min_length=5)
    assert ft.misspell("strawberry") == "strabwerry" and ft.misspell("reading") == "redaing"
    typos = result["misspellings"]["examples"]
    assert len(typos) == result["misspellings"]["words"] >= 4 and all(t not in model.vocab for t, _ in typos)
    words = [w for w, i in sorted(model.vocab.items(), key=lambda x: x[1]) if i]
    unit = torch.nn.functional.normalize(model.vectors(words), dim=1)
    nearest = [words[int((unit @ model.word_vector(t)).argmax())] for t, _ in typos]   # computed here, directly
    right = sum(n == w for n, (_, w) in zip(nearest, typos))
    assert result["misspellings"]["top1"] == pytest.approx(right / len(typos), abs=1e-4)
    assert result["misspellings"]["top5"] >= result["misspellings"]["top1"] > 0
    assert 0 < result["ngrams_only"]["mean_cosine"] <= 1


def test_the_fasttext_space_composes_an_unknown_word_and_names_its_ngrams(trained, tmp_path):
    from playground.analysis.embeddings import words as ws

    _, tok, model, *_ = trained
    checkpoints.save(tmp_path / "ft", kind="fasttext", config=model.config, card={"kind": "fasttext", "command": "t"},
                     model=ft.fp16_copy(model), tokenizer=tok)
    space = ws.fasttext_space(str(tmp_path / "ft"))
    assert space.key == "fasttext" and "swimming" in space.vocab and "[UNK]" not in space.vocab
    found = ws.lookup(space, ["swimming", "Swimminng", "reader"])
    assert found.words == ["swimming", "swimminng", "reader"] and found.unknown == []
    assert found.composed == {"swimminng": char_ngrams("swimminng")}    # 9 + 8 + 7 + 6 = 30 n-grams
    notices: list[str] = []
    v = ws.view(space, ["swimming", "swimminng", "reader", "book", "pool"], ["a"] * 5, "pca", 2, notices)
    assert v.data["composed"]["swimminng"][:3] == ["<sw", "swi", "wim"]   # the 3-grams first
    assert any("‹swimminng› from 30 n-grams: <sw, swi, wim" in n for n in notices), notices
    assert v.notes["swimminng"].startswith("from 30 n-grams: <sw swi")
    assert v.data["neighbours"]["swimminng"][0][0] == "swimming"
    odd = ws.lookup(space, ["a" * (ws.MAX_NGRAM_WORD + 1), "\ud800ß", "a" * ws.MAX_NGRAM_WORD])
    assert odd.unknown == ["a" * (ws.MAX_NGRAM_WORD + 1)] and len(odd.words) == 2   # any string but a blob composes


@pytest.mark.skipif("fasttext-english" not in checkpoints.available("fasttext"), reason="fasttext-english not shipped")
def test_the_shipped_fasttext_through_the_tabs_handler():
    from playground.ui import embeddings_words as tab

    card = checkpoints.read_card("fasttext-english")
    assert card["evaluation"]["analogy"]["all"]["questions"] == 756 and card["held_out"]["protocol"]
    words = "king, queen, man, woman, qeuen, housse"
    fig, _, _, data = tab.embed_words(words, "fasttext", "pca", 2, progress=lambda *a, **k: None)
    assert data["source"] == "fasttext" and data["unknown"] == [] and len(data["points"]) == 6
    assert data["composed"] == {"qeuen": char_ngrams("qeuen"), "housse": char_ngrams("housse")}
    assert any(n.startswith("Not in fasttext's vocabulary") and "‹housse› from 18 n-grams: <ho, hou, ous, uss, sse, se>, <hou" in n
               for n in data["notices"]), data["notices"]
    assert "misspelt words" in tab.fasttext_note() and f"{card['oov']['misspellings']['top1']:.0%}" in tab.fasttext_note()
    md, out = tab.analogy("king", "man", "woman", "fasttext")
    assert out["source"] == "fasttext" and len(out["answers"]) == 5


def test_a_notice_with_angle_brackets_reaches_the_toast_whole(monkeypatch):
    """Gradio renders toasts as HTML: FastText's n-grams (<st, ...>) were read as a tag and the notice cut there."""
    import gradio as gr

    from playground.ui import common

    shown = []
    monkeypatch.setattr(gr, "Warning", shown.append)
    with common.recording_notices() as recorded:
        common.warn(["‹strawbery› from 30 n-grams: <st, str, tra, ry>"])
    assert shown == ["‹strawbery› from 30 n-grams: &lt;st, str, tra, ry&gt;"]
    assert recorded == ["‹strawbery› from 30 n-grams: <st, str, tra, ry>"]   # the raw text, for the JSON and the cache
