"""The Classify view's handler (api_name `classify`) on the shipped classifiers: its answer, and bad input."""

from __future__ import annotations

import gradio as gr
import pytest

from playground.analysis import classify as analysis
from playground.nets.classifier import METHODS
from playground.ui import classify_tab
from playground.ui.common import recording_notices

pytestmark = pytest.mark.skipif(not analysis.available(), reason="no classifier is shipped in models/")


def test_every_shipped_classifier_answers_and_the_answer_repeats():
    out = classify_tab.classify("And God said, Let there be light: and there was light.", "")
    data = out[-1]
    assert [m["id"] for m in data["methods"]] == analysis.available() == [analysis.PREFIX + m for m in METHODS]
    for m in data["methods"]:
        assert abs(sum(m["probs"]) - 1) < 1e-3 and m["prediction"] in data["classes"]
        assert m["held_out_accuracy"] is not None
    assert data["attribution"]["tokens"][0] == "[CLS]"
    assert len(data["steps"]["words"]) == len(data["steps"]["probs"])
    assert "| method |" in out[3]                                         # the text alternative
    assert classify_tab.classify("And God said, Let there be light: and there was light.", "")[-1] == data


def test_our_bert_classifiers_attribute_over_our_bert_s_own_wordpieces():
    """A classifier on our bert-english reads the sentence through its base's tokenizer (8,192 WordPieces, framed as
    [CLS] ... [SEP]), not MiniLM's; its attributions are over those tokens."""
    from playground import checkpoints

    data = classify_tab.classify("Hello, wonderful hacker.", "classify-bert-finetune")[-1]
    ours = checkpoints.load("bert-english").tokenizer.encode("Hello, wonderful hacker.").tokens
    assert data["attribution"]["model"] == "classify-bert-finetune"
    assert data["attribution"]["tokens"] == ["[CLS]", *ours, "[SEP]"]
    assert data["attribution"]["target"] in data["classes"]


def test_an_empty_text_is_refused_with_an_example():
    with pytest.raises(gr.Error, match="Type a sentence"):
        classify_tab.classify("   ", "")


@pytest.mark.parametrize("text, notice", [("x " * 50_000, "only the first"), ("Я люблю тебя, мой друг.", "English"),
                                          ("What a day 😀😀", "Emoji")], ids=["100kB", "russian", "emoji"])
def test_odd_texts_still_get_an_answer_with_a_notice(text, notice):
    with recording_notices() as notices:
        data = classify_tab.classify(text, "")[-1]
    assert data["methods"] and any(notice in n for n in notices), notices


def test_an_unknown_model_is_a_clear_error():
    with pytest.raises(gr.Error, match="not a transfer classifier"):
        classify_tab.classify("A sentence here.", "gpt-shakespeare")


@pytest.mark.parametrize("method, n, says", [("probe-cls", 16, "probe button"), ("nonsense", 16, "Method should"),
                                             ("lstm", 256, "16, 64"), ("lstm", "many", "Labelled examples")])
def test_a_live_training_run_refuses_what_it_cannot_run_with_a_reason(method, n, says):
    with pytest.raises(gr.Error, match=says):
        classify_tab.classify_train(method, n, 0)
