"""The Attention tab for each model family (issue #32, item 11): the controls that only mean something for a BERT (a
sentence pair, hiding [CLS] and [SEP]) show for MiniLM and our BERT and hide for our GPT and SmolLM2, and the
reading notes say where the chosen model's heads rest, measured on the text: [CLS]/[SEP] for a BERT, the first
token for a causal model (SmolLM2 parks most of its attention there)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from playground.analysis import attention as att

S = "The cat sat on the mat because it was warm."
BERT_ONLY = {"minilm": True, "bert": True, "gpt": False, "smollm2": False}  # does the pair / [CLS] box apply?


@pytest.fixture(scope="module")
def tab():
    from playground.ui import attention_tab

    return attention_tab


def keys(tab, wanted):
    present = [k for k in wanted if tab.models.resolve(k) in tab.LISTED]
    assert present, "no model of these families is here"
    return present


@pytest.mark.parametrize("key", list(BERT_ONLY))
def test_the_pair_and_special_token_controls_show_only_for_a_bert(tab, key):
    if tab.models.resolve(key) not in tab.LISTED:
        pytest.skip(f"{key} is not installed here")
    for updates in (tab.model_changed(key), tab.model_bounds(key)):  # a new choice, and the page's load
        text_b, hide, chat = (u["visible"] for u in updates[-3:])
        assert (text_b, hide) == (BERT_ONLY[key], BERT_ONLY[key])
        assert chat == (key == "smollm2")  # the chat template is SmolLM2's


def first_token_share(data: dict) -> float:
    """From the /attention JSON: the weight each query after the first gives the first token, averaged over every
    layer and head. The head summary's 'first' averages over every query, and the first query (causal) gives the
    first token all of its weight: mean_after = (T * mean_all - 1) / (T - 1)."""
    T, first = data["n_tokens"], np.array(data["head_summary"]["first"])
    return float(((T * first - 1) / (T - 1)).mean())


def percent(note: str, before: str) -> int:
    return int(re.search(re.escape(before) + r"[^0-9]*?(\d+)%", note).group(1))


@pytest.mark.slow  # SmolLM2
def test_smollm2_is_said_to_park_its_attention_on_the_first_token_with_its_number(tab):
    if tab.models.resolve("smollm2") not in tab.LISTED:
        pytest.skip("SmolLM2 is not installed here")
    *_, data = tab.attention(S, "", "smollm2", 0, "mean", False, "head")
    note = tab.reading(S, "", "smollm2")
    share = first_token_share(data)
    assert share > 0.4  # SmolLM2 is an attention-sink model: most of the weight on the first token
    assert percent(note, "the first token gets") == round(100 * share)
    assert "parks its attention on the first token" in note and "no-op" not in note
    even = float(np.mean(1 / np.arange(2, data["n_tokens"] + 1)))  # a head spreading its weight evenly
    assert percent(note, "would give it") == round(100 * even)


def test_a_bert_is_read_through_cls_and_sep_and_our_gpt_through_the_first_token(tab):
    for key in keys(tab, ["minilm", "bert"]):
        *_, data = tab.attention(S, "", key, 0, "mean", False, "head")
        note = tab.reading(S, "", key)
        cls = float(np.mean(data["head_summary"]["first"]))  # token 0 is [CLS]; every query may see it
        assert data["tokens"][0] == "[CLS]" and percent(note, "`[CLS]` gets") == round(100 * cls)
        assert percent(note, "and `[SEP]`") == round(100 * float(np.mean(data["head_summary"]["sep"])))
        assert "attention sink" not in note
    for key in keys(tab, ["gpt"]):
        *_, data = tab.attention(S, "", key, 0, "mean", False, "head")
        note = tab.reading(S, "", key)
        assert percent(note, "the first token gets") == round(100 * first_token_share(data))
        assert "[CLS]` gets" not in note and "no-op" not in note


def test_the_attention_json_keeps_its_keys(tab):
    """The notes and the controls changed; the /attention endpoint's JSON did not."""
    for key in keys(tab, ["minilm", "gpt", "smollm2"]):
        *_, data = tab.attention(S, "", key, 1, "mean", False, "head")
        assert set(data) == {"model", "tokens", "segments", "n_tokens", "layers", "heads", "kv_heads", "layer", "head",
                             "notices", "attention_format", "attention", "head_summary"}
        assert set(data["head_summary"]) == set(att.SUMMARY)
