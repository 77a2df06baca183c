"""The checkpoint layer: one loader, safetensors and JSON only, complete folders only."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
import torch

from playground import checkpoints
from playground.training import tokenizers


@dataclass
class TinyConfig:
    n_in: int = 3
    n_out: int = 2


class TinyModel(torch.nn.Module):
    def __init__(self, config: TinyConfig):
        super().__init__()
        self.proj = torch.nn.Linear(config.n_in, config.n_out)
        self.head = torch.nn.Linear(config.n_out, config.n_out, bias=False)
        if config.n_in == config.n_out:
            self.head.weight = self.proj.weight  # tied, as GPT ties its output to its input embedding


@pytest.fixture
def tiny_kind(monkeypatch):
    monkeypatch.setitem(checkpoints.KINDS, "tiny", ("tests.test_checkpoints", "TinyConfig", "TinyModel"))


def test_weights_round_trip_through_safetensors(tiny_kind, tmp_path):
    torch.manual_seed(0)
    model = TinyModel(TinyConfig())
    checkpoints.save(tmp_path / "m", kind="tiny", config=TinyConfig(), card={"steps": 1}, model=model)
    loaded = checkpoints.load(tmp_path / "m")
    assert isinstance(loaded.model, TinyModel) and not loaded.model.training
    for (k, a), (_, b) in zip(model.state_dict().items(), loaded.model.state_dict().items()):
        assert torch.equal(a, b), k
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["card.json", "config.json", "model.safetensors"]
    assert json.loads((tmp_path / "m" / "config.json").read_text())["config"] == {"n_in": 3, "n_out": 2}


def test_tied_weights_are_saved(tiny_kind, tmp_path):
    model = TinyModel(TinyConfig(n_in=2, n_out=2))
    checkpoints.save(tmp_path / "t", kind="tiny", config=TinyConfig(2, 2), card={}, model=model)
    loaded = checkpoints.load(tmp_path / "t")
    assert torch.equal(loaded.model.proj.weight, model.proj.weight)


def test_unknown_kind_and_stale_config_fail_loudly(tmp_path):
    with pytest.raises(ValueError, match="unknown checkpoint kind"):
        checkpoints.save(tmp_path / "x", kind="nope", config=TinyConfig(), card={})
    assert not (tmp_path / "x").exists()
    with pytest.raises(ValueError, match="no field"):
        checkpoints.config_from_dict(TinyConfig, {"n_in": 1, "n_hidden": 4})


def test_missing_checkpoint_names_the_shipped_ones():
    with pytest.raises(FileNotFoundError, match="tok-bpe"):
        checkpoints.load("no-such-model")


def test_shipped_tokenizers_are_complete_and_described():
    names = checkpoints.available("tokenizer")
    assert {f"tok-{a}" for a in tokenizers.ALGORITHMS} <= set(names)
    for name in names:
        ckpt = checkpoints.load(name)
        card = ckpt.card
        assert card["command"].startswith("python -m playground.train tokenizers")
        assert all(len(c["sha256"]) == 64 for c in card["corpus"])
        assert card["vocab_size"] == ckpt.tokenizer.get_vocab_size()
        for path in ckpt.path.iterdir():
            assert path.suffix in (".json", ".safetensors") and path.stat().st_size <= 10 * 2**20


def test_no_temporary_files_are_left(tmp_path):
    tok = tokenizers.train("char", ["abc"], 100)
    checkpoints.save(tmp_path / "c", kind="tokenizer", config=checkpoints.TokenizerConfig("char", 100), card={},
                     tokenizer=tok)
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == ["card.json", "config.json", "tokenizer.json"]


# ---------------------------------------------------------------------------------------------
# Damaged, missing and half-written checkpoints


@pytest.fixture
def saved(tiny_kind, tmp_path):
    """A tiny checkpoint whose card names the command that made it."""
    torch.manual_seed(0)
    checkpoints.save(tmp_path / "m", kind="tiny", config=TinyConfig(), model=TinyModel(TinyConfig()),
                     card={"steps": 1, "command": "python -m playground.train tiny --seed=0"})
    return tmp_path / "m"


def test_the_card_records_the_sha256_of_every_other_file(saved):
    files = json.loads((saved / "card.json").read_text())["files"]
    assert set(files) == {"config.json", "model.safetensors"}
    assert all(checkpoints.sha256_file(saved / name) == digest for name, digest in files.items())


def overwrite(file, offset: int, data: bytes) -> None:
    with open(file, "r+b") as f:
        f.seek(offset)
        f.write(data)


@pytest.mark.parametrize("damage", [
    pytest.param(lambda d: overwrite(d / "model.safetensors", 200, b"\x7f" * 4), id="weights-bytes-changed"),
    pytest.param(lambda d: (d / "model.safetensors").write_bytes(b"\x10\x00"), id="weights-truncated"),
    pytest.param(lambda d: (d / "model.safetensors").unlink(), id="weights-missing"),
    pytest.param(lambda d: (d / "config.json").write_text('{"kind": "ti'), id="config-truncated"),
    pytest.param(lambda d: (d / "config.json").write_bytes(b"\xff\xfe\x00"), id="config-not-utf8"),
])
def test_a_damaged_or_missing_file_is_named_with_the_command_that_rebuilds_it(saved, damage):
    damage(saved)
    with pytest.raises(checkpoints.CheckpointError) as err:
        checkpoints.load(saved)
    message = str(err.value)
    assert str(saved) in message and "python -m playground.train tiny --seed=0" in message
    assert any(name in message for name in ("model.safetensors", "config.json"))


@pytest.mark.parametrize("card", ["", "{", "[1, 2]", None], ids=["empty", "truncated", "not-an-object", "missing"])
def test_a_damaged_or_missing_card_is_named(saved, card):
    if card is None:
        (saved / "card.json").unlink()
    else:
        (saved / "card.json").write_text(card)
    with pytest.raises(checkpoints.CheckpointError, match="card.json"):
        checkpoints.load(saved)


def test_a_file_that_does_not_fit_its_config_is_named(saved, tiny_kind):
    meta = json.loads((saved / "config.json").read_text())
    meta["config"]["n_out"] = 5
    card = json.loads((saved / "card.json").read_text())
    (saved / "config.json").write_text(json.dumps(meta))
    card["files"]["config.json"] = checkpoints.sha256_file(saved / "config.json")  # consistent card, wrong shapes
    (saved / "card.json").write_text(json.dumps(card))
    with pytest.raises(checkpoints.CheckpointError, match="does not fit config.json"):
        checkpoints.load(saved)


def test_an_interrupted_save_leaves_the_previous_checkpoint_whole(saved, monkeypatch):
    before = {p.name: p.read_bytes() for p in saved.iterdir()}

    def crash(path):
        raise KeyboardInterrupt  # killed while the new files are written

    with monkeypatch.context() as patch, pytest.raises(KeyboardInterrupt):
        patch.setattr(checkpoints, "sha256_file", crash)
        checkpoints.save(saved, kind="tiny", config=TinyConfig(), card={"steps": 2}, model=TinyModel(TinyConfig()))
    assert {p.name: p.read_bytes() for p in saved.iterdir()} == before
    assert [p.name for p in saved.parent.iterdir()] == ["m"], "no staging folder is left behind"
    assert checkpoints.load(saved).card["steps"] == 1


def test_a_new_save_replaces_the_whole_folder(saved, tiny_kind):
    checkpoints.save(saved, kind="tiny", config=TinyConfig(), card={"steps": 2})  # no weights this time
    assert sorted(p.name for p in saved.iterdir()) == ["card.json", "config.json"]
    assert [p.name for p in saved.parent.iterdir()] == ["m"]


def test_available_leaves_out_a_damaged_checkpoint_and_damaged_says_why(saved, tiny_kind, monkeypatch):
    monkeypatch.setattr(checkpoints, "MODELS_DIR", saved.parent)
    assert checkpoints.available() == ["m"] and checkpoints.damaged() == {}
    assert checkpoints.shipped("m") is not None
    overwrite(saved / "model.safetensors", 200, b"\x7f" * 4)
    assert checkpoints.available() == [] and checkpoints.shipped("m") is None
    assert "model.safetensors is damaged" in checkpoints.damaged()["m"]
    assert "python -m playground.train tiny --seed=0" in checkpoints.damaged()["m"]


def test_a_save_in_progress_and_a_stray_folder_are_not_listed(saved, tiny_kind, monkeypatch):
    monkeypatch.setattr(checkpoints, "MODELS_DIR", saved.parent)
    (saved.parent / ".m.saving-x").mkdir()
    (saved.parent / "notes").mkdir()
    assert checkpoints.available() == ["m"] and checkpoints.damaged() == {}
