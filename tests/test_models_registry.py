"""The one model registry (playground/analysis/models.py): one id per model, the short ids of older calls and links
as aliases, nothing loaded at import (by any tab), each model loaded once under one lock, every tab's models listed
by family, cards and tokenizers read without loading their models."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from playground.analysis import models

ROOT = Path(__file__).resolve().parent.parent


IMPORT_EVERY_TAB = """
import importlib, pkgutil, sys
from playground import checkpoints
from playground.nets import hf, smollm2
calls = []

def counted(module, name):
    real = getattr(module, name)
    setattr(module, name, lambda *a, **k: (calls.append(f"{module.__name__}.{name}"), real(*a, **k))[1])

for module, name in [(checkpoints, "load"), (checkpoints, "read_hf_tokenizer"), (smollm2, "load"),
                     (smollm2, "load_tokenizer"), (hf, "load_bert_dir")]:
    counted(module, name)
import playground.ui
tabs = [m.name for m in pkgutil.iter_modules(playground.ui.__path__)]
for name in tabs:
    importlib.import_module(f"playground.ui.{name}")
from playground.analysis import models
assert not calls, calls
assert "sentence_transformers" not in sys.modules and "transformers" not in sys.modules
assert not models._loaded and not models._tokenizers, (sorted(models._loaded), sorted(models._tokenizers))
from playground.ui import generation_tab
print(len(tabs), len(generation_tab.LISTED))
"""


@pytest.mark.process  # a fresh interpreter
def test_importing_the_tabs_loads_no_model():
    """Every module of playground/ui (each tab, the page, its caches) imported in a fresh process: no checkpoint,
    tokenizer or package model is read; what the tabs list comes from the models' folders."""
    run = subprocess.run([sys.executable, "-c", IMPORT_EVERY_TAB], cwd=ROOT, capture_output=True, text=True,
                         timeout=240)
    assert run.returncode == 0, run.stderr[-2000:]
    modules, listed = map(int, run.stdout.strip().splitlines()[-1].split())
    assert modules >= 15 and listed >= 1


def test_one_id_per_model_and_the_short_ids_are_aliases():
    assert models.resolve("gpt") == models.resolve("gpt-shakespeare") == "gpt-shakespeare"
    assert models.get("gpt") is models.get("gpt-shakespeare")
    assert models.get("gpt").id == "gpt-shakespeare" and models.get("gpt").chat is None
    for bad in ("nope", "", None, ["gpt"], 3):
        assert models.resolve(bad) is None
    with pytest.raises(KeyError):
        models.get("nope")
    assert len(set(models.ids())) == len(models.ids())


def test_a_model_is_found_as_a_student_types_its_name():
    """A model box takes what is typed: Enter pressed before the list narrowed to 'SmolLM2' sent 'SmolLM2' itself,
    and the page said 'Unknown model' (a CI run's browser test)."""
    assert models.resolve("GPT") == models.resolve(" gpt-Shakespeare ") == "gpt-shakespeare"
    assert models.resolve("SmolLM2") == models.resolve(models.SMOLLM2)
    assert models.resolve("GPT Shakespeare") is None and models.resolve("  ") is None


def test_a_model_is_loaded_once_however_many_ask_at_once(monkeypatch):
    monkeypatch.setattr(models, "_loaded", {})
    calls = []
    real = models._checkpoint

    def slow(name):
        calls.append(name)
        return real(name)

    monkeypatch.setattr(models, "_checkpoint", slow)
    got = []
    threads = [threading.Thread(target=lambda: got.append(models.get("rnn-shakespeare"))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == ["rnn-shakespeare"] and len({id(m) for m in got}) == 1


def test_every_tab_s_models_are_listed_by_family_and_cards_and_tokenizers_read_without_loading(monkeypatch):
    monkeypatch.setattr(models, "_loaded", {})
    monkeypatch.setattr(models, "_tokenizers", {})
    for family in ("seq2seq", "tokenizer", "word2vec", "minilm-mlm", "lstm"):
        listed = models.ids(family)
        assert listed and all(models.family(name) == family for name in listed), family
    assert set(models.ids()) >= {*models.ids("seq2seq"), *models.ids("bert"), models.MINILM}
    assert models.card("minilm-mlm")["held_out"]["top5"] > 0.3 and not models.loaded("minilm-mlm")
    tokenizer = models.tokenizer("minilm")
    assert tokenizer.token_to_id("[MASK]") is not None and models.tokenizer("minilm") is tokenizer
    assert not models._loaded, "a card or MiniLM's tokenizer loaded a model"
    assert models.tokenizer("tok-char") is models.get("tok-char").tokenizer and models.get("tok-char").model is None


def test_a_folder_outside_models_is_found_by_its_path_never_by_an_id(tmp_path):
    folder = tmp_path / "tok"
    shutil.copytree(ROOT / "models" / "tok-char", folder)
    found = models.find(str(folder))
    assert found is not None and found.family == "tokenizer" and models.find(folder) is found
    assert models.resolve(str(folder)) is None and str(folder) not in models.ids()
    with pytest.raises(KeyError):
        models.get(str(folder))
    assert models.find(str(tmp_path / "nothing")) is None and models.find("no-such-model") is None
    assert models.find("gpt") is models.get("gpt-shakespeare")


def test_the_shape_is_known_before_loading_and_agrees_after():
    gpt = models.get("gpt-shakespeare")
    assert models.shape("gpt") == gpt.shape == models.Shape(gpt.config.n_layer, gpt.config.n_head, 1,
                                                            gpt.config.n_positions)
    if models.resolve("smollm2") is not None:
        before = models.shape("smollm2")
        assert (before.layers, before.heads, before.kv_group) == (30, 9, 3)


def test_generate_answers_the_same_under_the_alias_and_the_id():
    from playground.ui import generation_tab

    *_, by_id = list(generation_tab.generate("ROMEO:", "gpt-shakespeare", 8, "top-k", 0.8, 10, 0.9, 3))[-1]
    *_, by_alias = list(generation_tab.generate("ROMEO:", "gpt", 8, "top-k", 0.8, 10, 0.9, 3))[-1]
    assert by_alias == by_id and by_id["model"] == "gpt-shakespeare"
    _, _, compared = generation_tab.compare("ROMEO:", "gpt", "gpt-shakespeare", 4, "greedy", 1, 10, 0.9, 0)
    assert compared["models"]["gpt"]["text"] == compared["models"]["gpt-shakespeare"]["text"]
    with pytest.raises(Exception, match="Unknown model"):
        list(generation_tab.generate("ROMEO:", "tok-bpe", 8, "greedy", 0.8, 10, 0.9, 3))


def test_attention_answers_the_same_under_the_alias_and_the_id():
    from playground.ui import attention_tab

    *_, by_id = attention_tab.attention("to be or not", "", "gpt-shakespeare", 1, "0", False, "head")
    *_, by_alias = attention_tab.attention("to be or not", "", "gpt", 1, "0", False, "head")
    assert by_alias == by_id and by_id["model"] == "gpt-shakespeare"
    assert attention_tab.applies("bert") == attention_tab.applies("bert-english") == {
        "pair": True, "hide_special": True, "chat": False}
    with pytest.raises(Exception, match="Unknown model"):
        attention_tab.attention("to be", "", "lstm-shakespeare", 0, "0", False, "head")
