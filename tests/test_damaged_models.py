"""The app with damaged or missing shipped models: it starts, says what it left out (the file and the command
that rebuilds it), and every other view works. Run in a fresh process on a copy of models/ (tests never
change the shipped files)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process  # the app started in a Python process of its own

ROOT = Path(__file__).resolve().parent.parent

CHECK = """
import json, sys
from playground import checkpoints
checkpoints.MODELS_DIR = __import__("pathlib").Path(sys.argv[1])
import app
from playground.ui import generation_tab, gradient_tab, tokenization_tab
from playground.analysis.embeddings import encoders
block = next(b for b in app.demo.blocks.values() if getattr(b, "elem_id", None) == "models-notice")
assert block.visible
notice = block.value
html, *_, data = next(tokenization_tab.tokenize("Hello there", list(tokenization_tab.TOKENIZERS), False, 2000))
print(json.dumps({"notice": notice, "generation": sorted(generation_tab.LISTED), "cells": sorted(gradient_tab.LISTED),
                  "tokenizers": sorted(data["tokenizers"]), "elmo": encoders.contextual_layers("elmo")}))
"""


def damage(file: Path) -> None:
    data = bytearray(file.read_bytes())
    data[len(data) // 2: len(data) // 2 + 4096] = b"\0" * 4096  # 4 kB overwritten inside the file
    file.write_bytes(bytes(data))


@pytest.mark.timeout(300)
def test_the_app_starts_without_its_damaged_models_and_names_them(tmp_path):
    models = tmp_path / "models"
    shutil.copytree(ROOT / "models", models)
    damage(models / "gpt-shakespeare" / "model.safetensors")
    (models / "lstm-shakespeare" / "card.json").unlink()
    (models / "tok-bpe" / "tokenizer.json").write_text('{"version": "1.0", "trunc')
    (models / "gru-shakespeare" / "config.json").write_text("{")
    elmo = (models / "elmo-english").is_dir()
    if elmo:
        damage(models / "elmo-english" / "model.safetensors")
    run = subprocess.run([sys.executable, "-c", CHECK, str(models)], cwd=ROOT, capture_output=True, text=True,
                         timeout=280)
    assert run.returncode == 0, run.stderr[-2000:]
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    for said in ("gpt-shakespeare/model.safetensors is damaged", "lstm-shakespeare/card.json is missing",
                 "tok-bpe/tokenizer.json is damaged", "gru-shakespeare/config.json"):
        assert said in seen["notice"], (said, seen["notice"])
    assert "python -m playground.train gpt" in seen["notice"]  # the command that rebuilds it
    assert "gpt-shakespeare" not in seen["generation"] and "rnn-shakespeare" in seen["generation"]
    assert seen["cells"] == ["rnn"]
    assert "bpe" not in seen["tokenizers"] and "wordpiece" in seen["tokenizers"]
    if elmo:   # the contextual view offers MiniLM (and our BERT) without it
        assert "elmo-english/model.safetensors is damaged" in seen["notice"] and seen["elmo"] is None
