"""The training entry point: typed overrides, errors that name the key, checkpoints that load."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from playground import checkpoints, train
from playground.training import tokenizers


def test_overrides_are_typed():
    cfg = train.apply_overrides(tokenizers.TokenizerTrainConfig, ["--vocab_size=1e3", "--algorithms=bpe,char"])
    assert cfg.vocab_size == 1000 and isinstance(cfg.vocab_size, int) and cfg.algorithms == "bpe,char"


@pytest.mark.parametrize("args, message", [
    (["--vocab_sise=500"], "unknown option --vocab_sise"),
    (["--vocab_size=abc"], "takes a number"),
    (["--vocab_size=1.5"], "whole number"),
    (["--vocab_size=100"], "256 symbols"),
    (["--algorithms=bpe,sentencepiece"], "unknown algorithm"),
    (["vocab_size=500"], "--key=value"),
])
def test_bad_overrides_are_clear_errors(args, message):
    with pytest.raises(ValueError, match=message):
        train.apply_overrides(tokenizers.TokenizerTrainConfig, args)


def test_unknown_key_on_the_command_line_names_it(tiny_corpus, capsys):
    with pytest.raises(SystemExit):
        train.parse(["tokenizers", "--corpus", tiny_corpus, "--no_such_key=1"])
    err = capsys.readouterr().err
    assert "--no_such_key" in err and "--vocab_size" in err


def test_missing_corpus_is_an_error(tmp_path, capsys):
    with pytest.raises(SystemExit):
        train.parse(["tokenizers", "--corpus", str(tmp_path / "nope.txt")])
    assert "no such file" in capsys.readouterr().err


def test_coerce_bool_and_optional():
    assert train.coerce("yes", bool, "x") is True and train.coerce("0", bool, "x") is False
    assert train.coerce("none", int | None, "x") is None and train.coerce("7", int | None, "x") == 7
    with pytest.raises(ValueError):
        train.coerce("maybe", bool, "x")


def test_device_auto_prefers_cuda_then_mps(monkeypatch):
    import torch

    assert checkpoints.resolve_device("cpu") == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert checkpoints.resolve_device("auto") == "cuda"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert checkpoints.resolve_device(None) == "mps"


def test_tokenizers_kind_trains_every_algorithm(tiny_corpus, tmp_path):
    sample = tmp_path / "sample.txt"
    history = train.main(["tokenizers", "--corpus", tiny_corpus, "--out", str(tmp_path), "--vocab_size=400",
                          "--word_vocab_size=50", "--char_min_frequency=1", f"--sample_path={sample}",
                          "--sample_bytes=2000"])
    assert set(history) == {*tokenizers.ALGORITHMS, "sample"}
    assert 0 < len(sample.read_text(encoding="utf-8")) <= 2000
    for algorithm in tokenizers.ALGORITHMS:
        ckpt = checkpoints.load(tmp_path / f"tok-{algorithm}")
        assert ckpt.kind == "tokenizer" and ckpt.config.algorithm == algorithm and ckpt.model is None
        assert ckpt.card["corpus"][0]["sha256"] == checkpoints.sha256_file(tiny_corpus)
        assert "python -m playground.train tokenizers" in ckpt.card["command"]
        assert {p.name for p in ckpt.path.iterdir()} == {"config.json", "card.json", "tokenizer.json"}
    word = checkpoints.load(tmp_path / "tok-word").tokenizer
    assert word.get_vocab_size() <= 50
    bpe = checkpoints.load(tmp_path / "tok-bpe").tokenizer
    assert bpe.decode(bpe.encode("The lazy dog!").ids) == "The lazy dog!"


@pytest.mark.process
def test_the_module_runs_as_a_script(tiny_corpus, tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "playground.train", "tokenizers", "--corpus", tiny_corpus, "--out", str(tmp_path),
         "--algorithms=char", f"--sample_path={tmp_path / 's.txt'}"],
        capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parent.parent,
    )
    assert result.returncode == 0, result.stderr
    assert "tokenizers:" in result.stderr and "100%" in result.stderr  # the progress bar
    card = json.loads((tmp_path / "tok-char" / "card.json").read_text())
    assert card["command"].endswith(f"--sample_path={tmp_path / 's.txt'}")


# ---------------------------------------------------------------------------------------------
# The trainer protocol: one module per kind, the same three names, imported when the kind runs

NOT_RESUMABLE = ["tokenizers", "word2vec", "glove", "fasttext", "seq2seq", "ngram", "lora", "sft", "dpo", "classifier"]


def test_every_checkpoint_kind_is_written_by_a_kind_whose_module_has_the_protocol():
    import inspect

    converted = {"vocabulary"}   # published vocabularies, converted by playground/tools/vocabularies.py, not trained
    assert {train.checkpoint_kind(kind) for kind in train.KINDS} == set(checkpoints.KINDS) - converted
    for kind in train.KINDS:
        module = train.trainer(kind)
        assert module.__name__.startswith("playground.training."), kind
        configs = module.configs(kind)
        assert isinstance(configs, tuple) and configs, kind
        assert all(dataclasses.is_dataclass(c) for c in configs), kind
        assert list(inspect.signature(module.train_kind).parameters)[1:] == ["run"], kind
        assert isinstance(module.RESUMES, bool), kind
    assert sorted(k for k in train.KINDS if not train.trainer(k).RESUMES) == sorted(NOT_RESUMABLE)


@pytest.mark.parametrize("kind", NOT_RESUMABLE)
def test_resume_on_a_kind_that_cannot_resume_is_refused_once(kind, tiny_corpus, tmp_path, capsys):
    corpus = [] if kind in train.GENERATED else ["--corpus", tiny_corpus]
    with pytest.raises(SystemExit) as exit_info:
        train.main([kind, *corpus, "--out", str(tmp_path), "--resume"])
    assert exit_info.value.code == 2   # argparse's usage error: before anything is read or trained
    err = capsys.readouterr().err
    assert err.count(f"--resume: {kind} cannot resume an interrupted run") == 1, err
    assert "without --resume" in err and not any(tmp_path.iterdir())


def test_resume_on_a_kind_that_resumes_is_passed_on(tiny_corpus, tmp_path):
    kind, (model_cfg, train_cfg), run = train.parse(["gpt", "--corpus", tiny_corpus, "--out", str(tmp_path),
                                                     "--resume", "--n_layer=1", "--max_iters=3"])
    assert kind == run.kind == "gpt" and run.resume and model_cfg.n_layer == 1 and train_cfg.max_iters == 3


@pytest.mark.process  # a fresh interpreter
def test_importing_the_cli_imports_no_trainer_and_no_torch():
    code = ("import sys, playground.train\n"
            "heavy = ('playground.training', 'playground.nets', 'torch')\n"
            "print(sorted(m for m in sys.modules if m.startswith(heavy)))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                            cwd=Path(__file__).resolve().parent.parent)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_a_kinds_key_is_not_taken_for_a_prefix_of_a_common_option(tiny_corpus):
    """ngram's --n=3 is its order, not an abbreviation of --name (argparse's allow_abbrev took it for one)."""
    kind, cfg, run = train.parse(["ngram", "--corpus", tiny_corpus, "--n=3"])
    assert cfg.n == 3 and run.name == ""
