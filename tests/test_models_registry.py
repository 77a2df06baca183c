"""The one model registry (playground/analysis/models.py): one id per model, the short ids of older calls and links
as aliases, nothing loaded at import, each model loaded once under one lock."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from playground.analysis import models

ROOT = Path(__file__).resolve().parent.parent


def test_importing_the_tabs_loads_no_model():
    code = ("from playground.analysis import models\nfrom playground.ui import generation_tab, attention_tab\n"
            "assert not models._loaded, sorted(models._loaded)\nprint(len(generation_tab.LISTED))")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-2000:]
    assert int(run.stdout.strip().splitlines()[-1]) >= 1


def test_one_id_per_model_and_the_short_ids_are_aliases():
    assert models.resolve("gpt") == models.resolve("gpt-shakespeare") == "gpt-shakespeare"
    assert models.get("gpt") is models.get("gpt-shakespeare")
    assert models.get("gpt").id == "gpt-shakespeare" and models.get("gpt").chat is None
    for bad in ("nope", "", None, ["gpt"], 3):
        assert models.resolve(bad) is None
    with pytest.raises(KeyError):
        models.get("nope")
    assert len(set(models.ids())) == len(models.ids())


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
