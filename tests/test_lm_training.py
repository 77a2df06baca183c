"""The language-model trainer on a model small enough to train in a second: a bigram table."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F

from playground import checkpoints, train
from playground.training import data, lm, loop


@dataclass
class BigramConfig:
    vocab_size: int = 0   # set from the data


class Bigram(torch.nn.Module):
    """logits(next | current) = a learned row per current token: the simplest model with the contract."""

    def __init__(self, config: BigramConfig):
        super().__init__()
        self.config = config
        self.table = torch.nn.Embedding(config.vocab_size, config.vocab_size)
        torch.nn.init.zeros_(self.table.weight)  # uniform predictions: the loss at init is exactly ln V

    def forward(self, idx, targets=None):
        logits = self.table(idx)  # (B, T, V)
        loss = None if targets is None else F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        return logits, loss


def build(config, text_data):
    return Bigram(BigramConfig(vocab_size=text_data.vocab_size))


@pytest.fixture
def bigram_kind(monkeypatch):
    monkeypatch.setitem(checkpoints.KINDS, "bigram", ("tests.test_lm_training", "BigramConfig", "Bigram"))
    spec = lm.LMKind(BigramConfig, lm.LMTrainConfig(max_iters=60, batch_size=8, block_size=16,
                                                          learning_rate=0.1, min_lr=0.01, warmup_iters=5,
                                                          eval_interval=20, eval_iters=4), build)
    monkeypatch.setitem(train.KINDS, "bigram", "lm")   # trained by training/lm.py, as rnn, lstm, gru and gpt
    monkeypatch.setitem(lm.KINDS, "bigram", lambda: spec)


def test_text_data_split_and_batches(tiny_corpus):
    d = data.load_text([tiny_corpus])
    text = open(tiny_corpus, encoding="utf-8").read()
    assert len(d.train) + len(d.val) == len(text) and len(d.val) == len(text) - int(len(text) * 0.9)
    assert d.tokenizer.decode(d.train[:50].tolist()) == text[:50]  # char-level and lossless
    g = torch.Generator().manual_seed(0)
    x, y = data.get_batch(d.train, 16, 4, g)
    assert x.shape == y.shape == (4, 16) and torch.equal(x[:, 1:], y[:, :-1])


def test_learning_rate_schedule():
    cfg = lm.LMTrainConfig(max_iters=100, learning_rate=1.0, min_lr=0.1, warmup_iters=10)
    assert loop.learning_rate(0, cfg) < loop.learning_rate(9, cfg) < 1.0   # warming up
    assert loop.learning_rate(10, cfg) == pytest.approx(1.0)                # peak
    assert loop.learning_rate(55, cfg) == pytest.approx(0.55)               # cosine midpoint
    assert loop.learning_rate(100, cfg) == pytest.approx(0.1)               # floor


def test_overrides_reach_the_right_config():
    model_cfg, train_cfg = train.apply_overrides(BigramConfig, ["--vocab_size=7", "--max_iters=3"],
                                                 lm.LMTrainConfig(batch_size=5))
    assert model_cfg.vocab_size == 7 and train_cfg.max_iters == 3 and train_cfg.batch_size == 5
    with pytest.raises(ValueError, match="unknown option --n_layers.*--max_iters"):
        train.apply_overrides(BigramConfig, ["--n_layers=2"], lm.LMTrainConfig())


def test_train_lm_learns_and_writes_a_loadable_checkpoint(bigram_kind, tiny_corpus, tmp_path):
    result = train.main(["bigram", "--corpus", tiny_corpus, "--out", str(tmp_path), "--name", "bg"])
    first, last = result["history"][0], result["history"][-1]
    vocab = data.load_text([tiny_corpus]).vocab_size
    assert first["val"] == pytest.approx(math.log(vocab), abs=1e-3)  # uniform at init: ln V
    assert last["val"] < first["val"] - 0.5 and last["iter"] == 60
    ckpt = checkpoints.load(tmp_path / "bg")
    card = json.loads((tmp_path / "bg" / "card.json").read_text())
    assert isinstance(ckpt.model, Bigram) and ckpt.tokenizer.get_vocab_size() == vocab
    assert card["steps"] == 60 and card["tokens_seen"] == 60 * 8 * 16 and card["val_loss"] == last["val"]
    assert card["val_bits_per_token"] == pytest.approx(card["val_loss"] / math.log(2), abs=1e-3)
    assert "--name bg" in card["command"]
    assert not (tmp_path / ".bg.resume").exists()  # a finished run leaves no resume state


def test_bf16_mixed_precision_trains(bigram_kind, tiny_corpus, tmp_path):
    result = train.main(["bigram", "--corpus", tiny_corpus, "--out", str(tmp_path), "--dtype=bfloat16"])
    assert result["history"][-1]["val"] < result["history"][0]["val"] - 0.5
    assert json.loads((tmp_path / "bigram-tiny" / "card.json").read_text())["train_config"]["dtype"] == "bfloat16"
    assert json.loads((tmp_path / "bigram-tiny" / "card.json").read_text())["matmul_dtype"] == "bfloat16"
    with pytest.raises(AssertionError, match="dtype must be auto, float32 or bfloat16"):
        lm.LMTrainConfig(dtype="float16")


def test_target_loss_stops_early(bigram_kind, tiny_corpus, tmp_path):
    result = train.main(["bigram", "--corpus", tiny_corpus, "--out", str(tmp_path), "--target_val_loss=10"])
    assert result["iters"] == 0  # the first estimate (ln V < 10) already reaches it


def test_resume_continues_exactly(bigram_kind, tiny_corpus, tmp_path, monkeypatch):
    args = ["bigram", "--corpus", tiny_corpus, "--out", str(tmp_path)]
    train.main(args + ["--name", "whole"])

    calls = {"n": 0}
    real_batch = lm.get_batch

    def interrupted(*a):
        calls["n"] += 1
        if calls["n"] > 50:  # after the checkpoint at step 40, before step 60
            raise KeyboardInterrupt
        return real_batch(*a)

    monkeypatch.setattr(lm, "get_batch", interrupted)
    with pytest.raises(KeyboardInterrupt):
        train.main(args + ["--name", "cut"])
    assert (tmp_path / ".cut.resume" / "current").is_file()
    monkeypatch.setattr(lm, "get_batch", real_batch)
    train.main(args + ["--name", "cut", "--resume"])
    whole, cut = checkpoints.load(tmp_path / "whole").model, checkpoints.load(tmp_path / "cut").model
    assert torch.equal(whole.table.weight, cut.table.weight), "resuming is exact: the same weights to the bit"
    histories = [[{k: v for k, v in h.items() if k != "seconds"} for h in json.loads(
        (tmp_path / n / "card.json").read_text())["history"]] for n in ("whole", "cut")]
    assert histories[0] == histories[1]
    assert json.loads((tmp_path / "cut" / "card.json").read_text())["steps"] == 60


def test_resume_without_a_run_is_a_clear_error(bigram_kind, tiny_corpus, tmp_path):
    with pytest.raises(FileNotFoundError, match="no interrupted run"):
        train.main(["bigram", "--corpus", tiny_corpus, "--out", str(tmp_path), "--resume"])


@pytest.mark.parametrize("logits_per_forward", [1 << 24, 1])  # every batch in one forward; one batch each
def test_loss_estimate_stacks_the_same_batches(tiny_corpus, monkeypatch, logits_per_forward):
    """The stacked evaluation equals the mean of one forward per batch, over the same seeded batches."""
    text_data = data.load_text([tiny_corpus])
    torch.manual_seed(0)
    model = Bigram(BigramConfig(vocab_size=text_data.vocab_size))
    torch.nn.init.normal_(model.table.weight)
    cfg = lm.LMTrainConfig(batch_size=4, block_size=8, eval_iters=5)
    monkeypatch.setattr(lm, "EVAL_LOGITS", logits_per_forward)
    got = lm.estimate_loss(model, text_data, cfg, "cpu", seed=3)
    for split, ids in (("train", text_data.train), ("val", text_data.val)):
        g = torch.Generator().manual_seed(3)
        each = [model(*data.get_batch(ids, 8, 4, g, "cpu"))[1].item() for _ in range(5)]
        assert got[split] == pytest.approx(sum(each) / 5, abs=1e-5)
    assert got["train"] != pytest.approx(got["val"], abs=1e-3)  # the splits are different batches


def test_dtype_auto_is_bfloat16_only_where_the_hardware_runs_it(monkeypatch):
    from playground.training import loop

    monkeypatch.setattr(loop, "native_bf16", lambda device: False)
    dtype, notice = loop.matmul_dtype("auto", "cpu")
    assert dtype == "float32" and "float32" in notice
    assert loop.matmul_dtype("float32", "cpu") == ("float32", None)
    assert loop.matmul_dtype("bfloat16", "cpu")[0] == "bfloat16"  # asked for: kept (fit warns)
    monkeypatch.setattr(loop, "native_bf16", lambda device: True)
    assert loop.matmul_dtype("auto", "cpu") == ("bfloat16", None)


def test_native_bf16_reads_the_cpu_flags(monkeypatch, tmp_path):
    import torch

    from playground.training import loop

    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    for flags, native in (("fpu avx2 fma", False), ("fpu avx512f avx512_bf16", True), ("avx2 amx_bf16 amx_tile", True)):
        cpuinfo = tmp_path / "cpuinfo"
        cpuinfo.write_text(f"flags\t\t: {flags}\n")
        real_path = loop.Path
        monkeypatch.setattr(loop, "Path", lambda p, real=real_path: real(cpuinfo) if p == "/proc/cpuinfo" else real(p))
        assert loop.native_bf16("cpu") is native, flags
        monkeypatch.setattr(loop, "Path", real_path)


def test_the_default_dtype_of_every_lm_recipe_is_auto():
    recipes = {name: make().train_config for name, make in lm.KINDS.items()}
    assert {"gpt", "rnn", "lstm", "gru"} <= set(recipes)
    assert {name: cfg.dtype for name, cfg in recipes.items()} == {name: "auto" for name in recipes}
