"""Speculative decoding (analysis/speculative.py) against plain greedy decoding: the same tokens, bit for bit, for
both drafts, several prompts, depths k and draft lengths γ, on a tiny Llama and on SmolLM2; the self-draft is the
logit lens of layer k and reads the model's own weights; prompt lookup finds what Saxena's code finds."""

from __future__ import annotations

import pytest
import torch

from playground.analysis import speculative as sp
from playground.nets.llama import Llama, LlamaConfig
from tests.smollm2_reference import require_smollm2


@pytest.fixture(scope="module")
def tiny() -> Llama:
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=48, n_positions=256, n_layer=4, n_head=4, n_kv_head=2, n_embd=32, n_inner=64)
    return Llama(config).eval()


def test_prompt_lookup_copies_after_the_first_earlier_occurrence_of_the_longest_tail():
    seq = [5, 6, 7, 1, 2, 9, 6, 7, 3, 4, 6, 7]
    assert sp.prompt_lookup(seq, 3) == ([1, 2, 9], "the last 2 tokens found at position 1")
    assert sp.prompt_lookup([1, 2, 3, 1, 2, 3], 10)[0] == [1, 2, 3]      # the 3-gram first, cut at the end
    assert sp.prompt_lookup([1, 2, 3, 4], 2) == ([], "no n-gram of the text's end occurs earlier: a plain step")
    assert sp.prompt_lookup([8, 8], 4)[0] == [8]


def test_the_self_draft_is_the_logit_lens_of_layer_k_on_the_models_own_weights(tiny):
    idx = torch.randint(0, 48, (1, 9), generator=torch.Generator().manual_seed(1))
    for k in (1, 3):
        draft = sp.early_exit(tiny, k)
        assert draft.model.layers[k - 1] is tiny.model.layers[k - 1] and draft.model.norm is tiny.model.norm
        with torch.inference_mode():
            _, _, internals = tiny(idx, return_internals=True)
            assert torch.allclose(draft(idx)[0], tiny.unembed(internals["hidden"][k]), atol=1e-5)
    with pytest.raises(sp.SpeculativeError, match="1 to 3 layers"):
        sp.early_exit(tiny, 4)


@pytest.mark.parametrize("how,k", [("lookup", 0), ("self", 1), ("self", 3)])
@pytest.mark.parametrize("gamma", [1, 3, 6])
def test_speculative_decoding_is_greedy_decoding_on_a_tiny_llama(tiny, how, k, gamma):
    generator = torch.Generator().manual_seed(gamma)
    for length in (3, 12):
        prompt = torch.randint(0, 48, (length,), generator=generator).tolist() * 2   # something to look up
        plain = sp.greedy(tiny, prompt, 30, frozenset())
        fast = sp.speculative(tiny, prompt, 30, frozenset(), how, gamma, k)
        assert fast.tokens == plain.tokens and len(plain.tokens) == plain.passes == 30
        assert fast.passes == 1 + len(fast.steps) <= plain.passes
        assert sum(len(s["emitted"]) for s in fast.steps) == len(fast.tokens) - 1
        assert all(len(s["drafted"]) <= gamma and 1 <= len(s["emitted"]) <= s["accepted"] + 1 for s in fast.steps)
        assert fast.draft_passes == (sum(len(s["drafted"]) for s in fast.steps) if how == "self" else 0)


def test_a_stop_token_ends_both_where_greedy_meets_it(tiny):
    prompt = [3, 9, 4, 3, 9, 4, 3]
    text = sp.greedy(tiny, prompt, 20, frozenset()).tokens
    stop = frozenset({text[6]})
    plain = sp.greedy(tiny, prompt, 20, stop)
    assert plain.tokens == text[:text.index(text[6]) + 1]
    for how, k in (("lookup", 0), ("self", 2)):
        assert sp.speculative(tiny, prompt, 20, stop, how, 4, k).tokens == plain.tokens


# each prompt with prompt lookup and the self-draft at one depth k and draft length γ (three depths in all)
PROMPTS = [("Repeat this sentence exactly: The bank raised its interest rates again this spring.", True, 6, 2),
           ("What is the capital of France? Answer in one sentence.", True, 18, 4),
           ("One, two, three, four, five, six,", False, 28, 3)]


@pytest.fixture(scope="module")
def smollm2():
    require_smollm2()
    from playground.analysis import models

    return models.get(models.SMOLLM2)


@pytest.mark.parametrize("prompt,chat,k,gamma", PROMPTS)
def test_smollm2_decodes_the_same_tokens_with_either_draft(smollm2, prompt, chat, k, gamma):
    """Shown in the view and checked here: prompt lookup and the self-draft give plain greedy's text token for token."""
    for how in ("lookup", "self"):
        data = sp.compare(smollm2, prompt, chat, how, k, gamma, 12)
        assert data["identical"], (how, k, gamma, data["plain"]["text"], data["speculative"]["text"])
        assert data["speculative"]["ids"] == data["plain"]["ids"]
        assert data["speculative"]["passes"] <= data["plain"]["passes"] == len(data["plain"]["ids"])


def test_smollm2s_report(smollm2):
    data = sp.compare(smollm2, PROMPTS[0][0], True, "lookup", 0, 4, 12)
    assert data["acceptance_rate"] is not None and 0 < data["acceptance_rate"] <= 1
    assert data["accepted"] == sum(s["accepted"] for s in data["steps"]) and data["drafted"] >= data["accepted"]
    assert data["speculative"]["passes"] < data["plain"]["passes"]      # a copy: lookup saves passes
    assert data["speedup_passes"] == pytest.approx(data["plain"]["passes"] / data["speculative"]["passes"], abs=1e-3)
    assert data["closest_call"] > 0 and data["first_difference"] is None
    assert all(s["rejected"] == s["drafted"][s["accepted"]:] for s in data["steps"])
    with pytest.raises(sp.SpeculativeError, match="Unknown draft"):
        sp.compare(smollm2, "Hi", True, "medusa", 0, 4, 8)


def test_the_endpoint_answers_its_json_and_refuses_what_it_cannot_decode(client):
    require_smollm2()
    from gradio_client.exceptions import AppError

    *_, text, _, data = client.predict(PROMPTS[0][0], True, "self", 29, 4, 8, api_name="/speculative")
    assert data["k"] == 29 and data["identical"] and len(data["plain"]["ids"]) <= 8
    assert "Speed-up" in text and "| pass |" in text
    with pytest.raises(AppError, match="Type a prompt"):
        client.predict("", True, "lookup", 24, 4, 8, api_name="/speculative")
    with pytest.raises(AppError, match="greater than maximum value 29"):     # the slider's own range
        client.predict("Hi", True, "self", 30, 4, 8, api_name="/speculative")
