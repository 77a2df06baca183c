"""LoRA (playground/lora.py) and the MiniLM masked-LM adaptation (playground/minilm_mlm.py).

A tiny random BERT saved in the transformers layout stands in for all-MiniLM-L6-v2 (the base is a
folder name in the config), so everything but the last test runs in a second or two.
"""

from __future__ import annotations

import hashlib
import json

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from playground import checkpoints
from playground.nets import hf
from playground.nets import lora
from playground.nets import minilm_mlm as mm
from playground.nets.bert import BertConfig, BertEncoder


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory, tiny_corpus):
    """A random 2-layer BERT with a WordPiece vocabulary trained on the tiny corpus, saved as
    transformers would (config.json, model.safetensors with transformers' names, tokenizer.json)."""
    from safetensors.torch import save_file

    from playground.training import tokenizers

    folder = tmp_path_factory.mktemp("tiny_base")
    tok = tokenizers.train("wordpiece", [open(tiny_corpus, encoding="utf-8").read()], vocab_size=120)
    config = BertConfig(vocab_size=tok.get_vocab_size(), n_positions=64, n_layer=2, n_head=2, n_embd=32, n_inner=64,
                        dropout=0.0)
    torch.manual_seed(0)
    encoder = BertEncoder(config)
    with torch.no_grad():  # larger weights than BERT's N(0, 0.02), so the random encoder mixes its context
        for m in encoder.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                m.weight.normal_(0.0, 0.3)
    ours = encoder.state_dict()
    save_file({theirs: ours[name].contiguous() for name, theirs in hf.bert_key_map(config, heads=False).items()},
              str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({
        "vocab_size": config.vocab_size, "max_position_embeddings": 64, "num_hidden_layers": 2,
        "num_attention_heads": 2, "hidden_size": 32, "intermediate_size": 64, "type_vocab_size": 2,
        "hidden_act": "gelu", "layer_norm_eps": 1e-12, "pad_token_id": 0}))
    tok.save(str(folder / "tokenizer.json"))
    return folder


def config_for(base, **kw) -> mm.MiniLMMLMConfig:
    return mm.MiniLMMLMConfig(base=str(base), **{"rank": 4, "alpha": 8.0, **kw}, **mm.base_record(str(base)))


def randomize_adapters(model, seed=0):
    """Non-zero B (and a changed head), as after training, so merging has something to merge."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.requires_grad:
                p.add_(0.05 * torch.randn(p.shape, generator=g))


def test_lora_with_b_zero_is_the_base_layer():
    torch.manual_seed(0)
    base = nn.Linear(16, 24)
    layer = lora.LoRALinear(base, r=4, alpha=8.0)
    x = torch.randn(3, 5, 16)
    assert torch.equal(layer(x), base(x)), "with B = 0 the adapted layer must compute exactly W x + b"
    assert layer.B.abs().sum() == 0 and layer.A.abs().sum() > 0, "A starts random, B at zero"
    assert not base.weight.requires_grad and layer.A.requires_grad and layer.B.requires_grad
    with torch.no_grad():
        layer.B.normal_()
    assert not torch.allclose(layer(x), base(x)), "a non-zero B must change the output"
    expected = base(x) + (8.0 / 4) * x @ (layer.B @ layer.A).T  # h = W x + b + (α / r) B A x
    torch.testing.assert_close(layer(x), expected, atol=1e-5, rtol=1e-5)


def test_merged_linear_equals_the_unmerged_layer_and_leaves_the_base_alone():
    torch.manual_seed(1)
    base = nn.Linear(16, 24)
    before = base.weight.detach().clone()
    layer = lora.LoRALinear(base, r=2, alpha=4.0)
    with torch.no_grad():
        layer.B.normal_()
    merged = layer.merged()
    x = torch.randn(7, 16)
    torch.testing.assert_close(merged(x), layer(x), atol=1e-5, rtol=1e-5)
    assert torch.equal(base.weight, before), "merging must not write into the base weight"
    assert isinstance(merged, nn.Linear) and not any(p.requires_grad for p in merged.parameters())


def test_merged_model_equals_the_unmerged_model(tiny_base):
    model = mm.build(config_for(tiny_base)).eval()
    randomize_adapters(model)
    idx = torch.randint(5, model.config.vocab_size, (2, 12))
    with torch.no_grad():
        unmerged, _ = model(idx)
        lora.merge_lora(model)
        merged, _ = model(idx)
    assert not any(isinstance(m, lora.LoRALinear) for m in model.modules()), "every adapter must be merged"
    assert unmerged.shape == (2, 12, model.config.vocab_size)
    torch.testing.assert_close(merged, unmerged, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("train_layernorm", [True, False])
def test_only_adapters_and_head_get_gradients_and_the_count_is_right(tiny_base, train_layernorm):
    config = config_for(tiny_base, train_layernorm=train_layernorm)
    model = mm.build(config)
    c = model.config
    base_before = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}
    idx = torch.randint(5, c.vocab_size, (2, 10))
    labels = torch.full_like(idx, -100)
    labels[:, 3] = idx[:, 3]
    logits, gold = mm.masked_logits(model, idx, labels)
    assert logits.shape == (2, c.vocab_size), "the head runs at the selected positions only"
    F.cross_entropy(logits, gold).backward()
    torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1).step()

    def trained(name: str) -> bool:
        leaf = name.rsplit(".", 1)[-1]
        in_norm = ".ln" in name and name.startswith("bert.")
        return leaf in ("A", "B") or name.startswith("mlm.") or (train_layernorm and in_norm)

    for name, p in model.named_parameters():
        assert p.requires_grad == trained(name), f"{name}: requires_grad={p.requires_grad}"
        if trained(name) and not name.endswith(".A"):  # A gets no gradient while B is still 0
            assert p.grad is not None and p.grad.abs().sum() > 0, f"{name} got no gradient"
        if not trained(name):
            assert p.grad is None, f"frozen {name} got a gradient"
    for name, p in model.named_parameters():
        if name in base_before:
            assert torch.equal(p, base_before[name]), f"frozen {name} changed"
    # r (d + k) per adapted d x k layer; the head: transform C C + C, LayerNorm 2 C, bias V
    C, H, L, V, r = c.n_embd, c.n_inner, c.n_layer, c.vocab_size, config.rank
    adapters = L * (4 * r * (C + C) + 2 * r * (C + H))
    head = C * C + C + 2 * C + V
    norms = 2 * C * (1 + 2 * L) if train_layernorm else 0
    counted = lora.count_parameters(model)
    assert counted["trainable"] == adapters + head + norms
    assert counted["total"] == sum(p.numel() for p in model.parameters())
    assert counted["ratio"] == pytest.approx(counted["trainable"] / counted["total"])


@pytest.mark.slow  # a training run
def test_a_tiny_training_run_lowers_the_loss_and_round_trips(tiny_base, tmp_path):
    """Four sentences in random order: a masked word is predictable from its neighbours (the shared
    tiny corpus is random words, where nothing beyond word frequency can be learnt)."""
    import random

    from playground import train

    rng = random.Random(0)
    sentences = ["the quick brown fox jumps over a lazy dog.", "seven wizards quietly hex jolly boxers.",
                 "the lowest token and the widest tokenizer.", "a lazy dog while the newer boxers jump."]
    corpus = tmp_path / "ordered.txt"
    corpus.write_text("\n".join(rng.choice(sentences) for _ in range(600)) + "\n", encoding="utf-8")
    result = train.main(["minilm-mlm", "--corpus", str(corpus), "--out", str(tmp_path), "--name", "tiny",
                         f"--base={tiny_base}", "--rank=4", "--alpha=8", "--max_iters=200", "--batch_size=16",
                         "--seq_len=24", "--eval_interval=100", "--eval_batches=4", "--learning_rate=3e-2",
                         "--min_lr=1e-3", "--warmup_iters=5", "--val_fraction=0.1", "--threads=1"])
    first, last = result["history"][0], result["history"][-1]
    assert last["iter"] == 200
    assert last["val"] < first["val"] - 0.5, f"held-out loss {first['val']} -> {last['val']} did not drop"
    assert last["top5"] > first["top5"]
    folder = tmp_path / "tiny"
    card = json.loads((folder / "card.json").read_text())
    for key in ("val_top1", "val_top5", "val_loss", "steps", "wall_time_s", "command", "trainable_params",
                "n_params"):
        assert key in card, f"card.json lacks {key}"
    assert card["val_top5"] == pytest.approx(last["top5"], abs=1e-4)
    assert not (tmp_path / ".tiny.resume").exists(), "a finished run leaves no resume state"
    ckpt = checkpoints.load(folder)
    assert ckpt.kind == "minilm-mlm" and ckpt.model.nsp is None and not ckpt.model.training
    assert ckpt.tokenizer.token_to_id("[MASK]") is not None

    outside_text = tmp_path / "outside.txt"                # a text it was not trained on, measured as its split is
    outside_text.write_text("a lazy fox jumps over the quick brown dog.\n" * 200, encoding="utf-8")
    from playground.tools import held_out

    measured = held_out.main([str(folder), "--outside", str(outside_text), "--fraction", "0.2"])
    assert measured["windows"] > 0 and 0 <= measured["top5"] <= 1 and "the last 20% of outside.txt" in measured["protocol"]
    assert json.loads((folder / "card.json").read_text())["outside"] == [measured]
    speeches = tmp_path / "speeches"                      # a folder: its .txt files joined in name order
    speeches.mkdir()
    (speeches / "2.txt").write_text("the dog sat on the mat by the door.\n" * 100, encoding="utf-8")
    (speeches / "1.txt").write_text("a cat ran to the end of the road.\n" * 100, encoding="utf-8")
    (speeches / "notes.md").write_text("not read", encoding="utf-8")
    second = held_out.main([str(folder), "--outside", str(speeches), "--title", "two speeches"])
    joined = ("a cat ran to the end of the road.\n" * 100 + "the dog sat on the mat by the door.\n" * 100).encode()
    assert second["sha256"] == hashlib.sha256(joined).hexdigest() and second["title"] == "two speeches"
    assert "speeches/*.txt's (2 files joined in name order)" in second["protocol"]
    again = held_out.main([str(folder), "--outside", str(outside_text), "--fraction", "0.2"])
    assert json.loads((folder / "card.json").read_text())["outside"] == [second, again], "one entry per text"
    assert checkpoints.outside({"outside": measured}) == [measured], "an older card's single entry"
    with pytest.raises(SystemExit, match="corpora"):
        held_out.main([str(folder), "--outside", str(corpus)])
    with pytest.raises(SystemExit, match="no token 'capital'"):   # a vocabulary of 120 pieces cannot be asked
        held_out.main([str(folder), "--capitals"])
    card = json.loads((folder / "card.json").read_text())

    # a second stage starts from the first's weights (its step 0 scores what the first ended with) and names it
    again = train.main(["minilm-mlm", "--corpus", str(corpus), "--out", str(tmp_path), "--name", "tiny2",
                        f"--base={tiny_base}", "--rank=4", "--alpha=8", "--max_iters=20", "--batch_size=16",
                        "--seq_len=24", "--eval_interval=100", "--eval_batches=4", "--learning_rate=1e-3",
                        "--val_fraction=0.1", "--threads=1", f"--init={folder}", "--seed=2"])
    assert again["history"][0]["val"] == pytest.approx(last["val"], abs=1e-4)
    stage = json.loads((tmp_path / "tiny2" / "card.json").read_text())["init"]
    assert stage["steps"] == 200 and stage["command"] == card["command"] and stage["history"] == card["history"]
    with pytest.raises(SystemExit, match="rank"):
        train.main(["minilm-mlm", "--corpus", str(corpus), "--out", str(tmp_path), "--name", "tiny3",
                    f"--base={tiny_base}", "--rank=2", "--max_iters=1", "--val_fraction=0.1", f"--init={folder}",
                    "--seed=3"])
    for seed in ("1337", "2"):  # the first stage's seed, the second's: the same batches again
        with pytest.raises(SystemExit, match="seed"):
            train.main(["minilm-mlm", "--corpus", str(corpus), "--out", str(tmp_path), "--name", "tiny3",
                        f"--base={tiny_base}", "--rank=4", "--alpha=8", "--max_iters=1", "--val_fraction=0.1",
                        f"--init={tmp_path / 'tiny2'}", f"--seed={seed}"])
    with pytest.raises(SystemExit, match="val_fraction"):  # another cut: the first stage trained on its held-out part
        train.main(["minilm-mlm", "--corpus", str(corpus), "--out", str(tmp_path), "--name", "tiny3",
                    f"--base={tiny_base}", "--rank=4", "--alpha=8", "--max_iters=1", "--val_fraction=0.2",
                    f"--init={tmp_path / 'tiny2'}", "--seed=3"])


def test_adapter_checkpoint_round_trip_reproduces_the_logits(tiny_base, tmp_path):
    config = config_for(tiny_base)
    model = mm.build(config).eval()
    randomize_adapters(model, seed=3)
    idx = torch.randint(5, model.config.vocab_size, (2, 9))
    mask = torch.ones_like(idx)
    mask[1, 6:] = 0  # padding: the attention mask passes through the contract
    with torch.no_grad():
        expected, _ = model(idx, attention_mask=mask)
    checkpoints.save(tmp_path / "ck", kind="minilm-mlm", config=config, card={"note": "test"}, model=model)
    from safetensors.torch import load_file

    shipped = load_file(str(tmp_path / "ck" / "model.safetensors"))
    assert set(shipped) == set(mm.trained_state(model)), "the checkpoint holds only what training changed"
    assert not any(k.endswith(".base.weight") or k.startswith("bert.embeddings.tok") for k in shipped)
    loaded = checkpoints.load(tmp_path / "ck").model
    assert loaded.nsp is None and not any(p.requires_grad for p in loaded.parameters())
    with torch.inference_mode():
        got, loss = loaded(idx, attention_mask=mask)
        labels = torch.full_like(idx, -100)
        labels[0, 2] = idx[0, 2]
        _, with_loss = loaded(idx, labels=labels)
        _, _, found = loaded(idx, return_internals=True)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    assert loss is None and with_loss is not None and found["nsp_logits"] is None
    assert len(found["layers"]) == 2 and found["layers"][0]["attn"].shape == (2, 2, 9, 9)
    with pytest.raises(AssertionError, match="no next-sentence"):
        loaded(idx, next_sentence_label=torch.zeros(1, dtype=torch.long))


def test_a_base_with_other_weights_is_refused(tiny_base, tmp_path):
    config = config_for(tiny_base)
    model = mm.build(config)
    wrong = mm.MiniLMMLMConfig(**{**config.__dict__, "base_sha256": "0" * 64})
    checkpoints.save(tmp_path / "ck", kind="minilm-mlm", config=wrong, card={}, model=model)
    with pytest.raises(ValueError, match="other weights"):
        checkpoints.load(tmp_path / "ck")


def test_the_shipped_minilm_mlm_fills_in_everyday_sentences():
    ckpt = checkpoints.shared("minilm-mlm")
    model, tok = ckpt.model, ckpt.tokenizer
    assert ckpt.kind == "minilm-mlm" and model.nsp is None
    assert ckpt.card["val_top5"] > 0.4 and ckpt.card["trainable_params"] < ckpt.card["n_params"] / 10
    sentences = {
        "paris is the [MASK] of france.": {"capital", "city", "center", "centre", "heart"},
        "the cat sat on the [MASK].": {"floor", "ground", "bed", "table", "chair", "mat", "grass", "sofa", "couch",
                                       "wall", "door", "step", "steps", "roof", "fence", "window"},
        "she [MASK] to the store yesterday.": {"went", "goes", "came", "walked", "ran", "returned", "go", "drove"},
    }
    mask_id = tok.token_to_id("[MASK]")
    for text, sensible in sentences.items():
        ids = tok.encode(text).ids
        with torch.inference_mode():
            logits, _ = model(torch.tensor([ids]))
        at = ids.index(mask_id)
        top5 = [tok.id_to_token(int(i)) for i in logits[0, at].topk(5).indices]
        assert sensible & set(top5), f"{text!r}: top 5 {top5} has none of {sorted(sensible)}"
