"""The selected word: found in hostile text, checked against the sentence, and mapped by every view."""

from __future__ import annotations

import pytest

from playground.analysis import focus
from playground.ui import attention_tab, gradient_tab

TEXT = "Tokenizers don't see words: “naïve” 👩‍💻 users tokenize Ελληνικά and مرحبا too."


def word_list(text):
    return [w for _, _, w in focus.words(text)]


def test_words_of_hostile_text():
    assert word_list(TEXT) == ["Tokenizers", "don't", "see", "words", "naïve", "👩‍💻", "users", "tokenize",
                               "Ελληνικά", "and", "مرحبا", "too"]
    assert word_list("nai\u0308ve") == ["nai\u0308ve"]            # a combining accent stays in its word
    assert word_list("a\x00b\tc\u200bd") == ["a", "b", "c", "d"]   # control characters separate words
    assert word_list("") == [] and word_list("?! ...") == []
    for s, e, w in focus.words(TEXT):
        assert TEXT[s:e] == w


def test_a_selection_must_be_a_word_of_this_sentence():
    assert focus.parse("0:10", TEXT) == (0, 10)
    for stale in ("0:9", "5:100", "x:y", "", None, "3", "-1:2"):
        assert focus.parse(stale, TEXT) is None


def test_clicking_toggles_and_masks():
    first = focus.toggle(TEXT, 2, "")                        # "see"
    assert TEXT.__getitem__(slice(*map(int, first.split(":")))) == "see"
    assert focus.toggle(TEXT, 2, first) == ""                 # a second click clears it
    assert focus.toggle(TEXT, 99, first) == ""
    span = focus.parse(first, TEXT)
    assert focus.masked(TEXT, span).startswith("Tokenizers don't [MASK] words")
    assert focus.prefix(TEXT, span) == "Tokenizers don't see"
    assert focus.masked(TEXT, None) == TEXT
    assert 'class="chip on"' in focus.chips_html(TEXT, span) and "chips-empty" in focus.chips_html("", None)


def test_a_typed_mask_is_one_word_masked_as_itself():
    """Selecting a typed [MASK] gave the chip "MASK": masked "The [[MASK]] sat" (filled as "[unix]") and the prompt
    "The [MASK" (issue #54)."""
    text = "The [MASK] sat on the [MASK]."
    assert word_list(text) == ["The", "[MASK]", "sat", "on", "the", "[MASK]"]
    span = focus.parse(focus.toggle(text, 1, ""), text)
    assert span == (4, 10) and focus.masked(text, span) == text and focus.prefix(text, span) == "The [MASK]"
    assert ">[MASK]</span>" in focus.chips_html(text, span)


def test_a_long_texts_chips_are_capped_and_the_rest_open_on_the_selected_word():
    """5,000 characters made ~1,000 chips, which pushed the tabs 3,000 px down (issue #32 item 7)."""
    text = " ".join(f"w{i}" for i in range(100))
    shown, _, rest = focus.chips_html(text, None).partition("<details")
    assert shown.count('class="chip"') == focus.CHIPS_SHOWN and rest.count('class="chip"') == 100 - focus.CHIPS_SHOWN
    assert f"{100 - focus.CHIPS_SHOWN} more words" in rest and " open>" not in rest
    for word, opened in (("w70", True), ("w3", False)):
        start = text.index(word + " ")
        html = focus.chips_html(text, (start, start + len(word)))
        assert (" open>" in html) is opened and 'class="chip on"' in html
    assert "<details" not in focus.chips_html(" ".join(["w"] * focus.CHIPS_SHOWN), None)


def test_attention_maps_tokens_to_the_sentence():
    head_view, _, heatmap, _, _, data = attention_tab.attention("The bank flooded.", "It rained.", "minilm", 0, "mean")
    spans = heatmap.layout.meta["spans"]
    assert len(spans) == len(data["tokens"])
    by_token = dict(zip(data["tokens"], map(tuple, spans)))
    assert by_token["bank"] == (4, 8) and by_token["[CLS]"] == (-1, -1) and by_token["rained"] == (-1, -1)
    assert 'data-s="4" data-e="8"' in head_view


@pytest.mark.parametrize("text, T", [("abc", 10), ("abc ", 7), ("x" * 50, 20)])
def test_gradient_steps_map_to_the_sentence(text, T):
    from playground.analysis import gradient_flow as introspect
    from playground.analysis import models

    steps = introspect.prepare_ids(models.tokenizer(f"{gradient_tab.LISTED[0]}-shakespeare"), text, T)
    assert len(steps.spans) == T and len(steps.chars) == T + 1
    for (s, e), ch in zip(steps.spans, steps.chars):
        assert (text[s:e] == ch) if s >= 0 else ch == " "
