"""Links that restore a view: every query value is checked against its component before it is set."""

from __future__ import annotations

import html

import gradio as gr
import pytest

import app
from playground.ui import view


def fit(component, raw):
    notices: list[str] = []
    return view.coerce(component, raw, notices, "key"), notices


def test_numbers_are_clamped_to_the_slider_and_junk_is_refused():
    slider = gr.Slider(0, 5, value=1, step=1)
    assert fit(slider, "3") == (3, [])
    assert fit(slider, "99")[0] == 5 and fit(slider, "-4")[0] == 0
    assert fit(gr.Slider(0, 2, value=0.8, step=0.05), "1.25")[0] == 1.25
    for junk in ("abc", "nan", "inf", ""):
        value, notices = fit(slider, junk)
        assert isinstance(value, type(gr.skip())) and notices


def test_choices_must_be_among_the_choices():
    dropdown = gr.Dropdown([("MiniLM", "minilm"), ("our GPT", "gpt")], value="minilm")
    assert fit(dropdown, "gpt") == ("gpt", [])
    assert fit(dropdown, "bogus")[1]
    radio = gr.Radio([("2D", 2), ("3D", 3)], value=3)
    assert fit(radio, "2")[0] == 2  # the query string's text back to the choice's own type
    group = gr.CheckboxGroup(["rnn", "lstm", "gru"], value=["rnn"])
    assert fit(group, "lstm,bogus,gru")[0] == ["lstm", "gru"]
    assert fit(gr.Checkbox(False), "1")[0] is True and fit(gr.Checkbox(True), "off")[0] is False


def test_long_text_is_cut_with_a_notice():
    value, notices = fit(gr.Textbox(), "x" * (view.MAX_TEXT + 10))
    assert len(value) == view.MAX_TEXT and notices


def test_every_registered_key_is_a_live_input_component():
    demo = app.demo
    ids = {block._id for block in demo.blocks.values()}
    keys = [fn for fn in demo.fns.values() if fn.name == "restore"]
    assert len(keys) == 1, "one restore on page load"
    restore = keys[0]
    assert all(component._id in ids for component in restore.outputs)
    assert len(restore.outputs) >= 30  # the sentence, the tabs' controls, the tab, lecture mode, `restored`


class FakeRequest:
    """What restore reads of a request: the address's query string, as the browser sent it (`raw`: as it is)."""

    def __init__(self, raw: str | None = None, **params):
        from types import SimpleNamespace
        from urllib.parse import urlencode

        self.url = SimpleNamespace(query=urlencode(params) if raw is None else raw)


def restore_with(raw: str | None = None, **params):
    (restore,) = [fn for fn in app.demo.fns.values() if fn.name == "restore"]
    return restore.fn(FakeRequest(raw, **params))


def test_a_link_names_a_sub_tab_as_top_slash_sub():
    subs = view.sub_tab_ids([b for b in app.demo.blocks.values() if getattr(b, "elem_id", None) == "tabs"][0])
    assert "normalisation" in subs["tokenization"] and subs["generation"] == []
    assert view.sub_id("Why this split? WordPiece and Unigram") == "why-this-split-wordpiece-and-unigram"
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outputs = restore_with(tab="tokenization/normalisation")
    assert not [w for w in caught if "tab" in str(w.message)]
    assert any(isinstance(o, gr.Tabs) and o.selected == "tokenization" for o in outputs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outputs = restore_with(tab="tokenization/bogus")
    assert any("sub-tab 'bogus' is not in tokenization" in str(w.message) for w in caught)
    assert any(isinstance(o, gr.Tabs) and o.selected == "tokenization" for o in outputs)  # the top tab still opens


def test_the_notice_banners_take_no_room_when_there_is_nothing_to_say():
    banners = {b.elem_id: b for b in app.demo.blocks.values() if getattr(b, "elem_id", None) in ("link-notice",
                                                                                                     "models-notice")}
    assert set(banners) == {"link-notice", "models-notice"} and not any(b.visible for b in banners.values())
    outputs = restore_with()
    assert outputs[-2]["visible"] is False
    assert restore_with(foo="1")[-2]["visible"] is True
    assert restore_with(__theme="dark")[-2]["visible"] is False   # Gradio's own key: the page is dark, nothing to say


def test_a_bad_links_banner_names_each_key_and_the_address_bar_loses_it():
    """Issue #54: an empty key's banner read "The link's  are not part of this app's views"; `lecture=maybe` was
    refused but stayed in the address bar; `text=%E0%A4%A` (a link cut inside a character) became the sentence
    "�%A"."""
    def banner(outputs) -> str:
        return html.unescape(outputs[-2]["value"])

    outputs = restore_with("=1&foo=2")
    assert "The link's keys '', 'foo' are not part of this app's views" in banner(outputs)
    assert outputs[-1].split(",") == ["", "foo"]
    assert "key 'foo' is not part" in banner(restore_with(foo="1"))
    outputs = restore_with(lecture="maybe")
    assert "lecture=" in banner(outputs) and outputs[-1] == "lecture"
    assert restore_with(lecture="1")[-1] == ""
    outputs = restore_with("text=%E0%A4%A&tab=attention")
    assert isinstance(restored_value(outputs, "text"), type(gr.skip())) and outputs[-1] == "text"
    assert "key 'text' is not valid text" in banner(outputs) and "\ufffd" not in banner(outputs)
    assert any(isinstance(o, gr.Tabs) and o.selected == "attention" for o in outputs)   # the rest is followed
    assert restore_with("text=%EF%BF%BD%25A")[-1] == "text"   # as the browser hands it on, re-encoded
    assert restored_value(restore_with("text=caf%C3%A9+%25A"), "text") == "café %A"


def restored_value(outputs, key: str):
    (restore,) = [fn for fn in app.demo.fns.values() if fn.name == "restore"]
    return outputs[[block._id for block in restore.outputs].index(app.demo.view[key]._id)]


def test_a_links_layer_and_head_are_checked_against_the_links_model():
    """Issue #32 item 8: att.layer=99 was clamped to the deepest model's last layer (SmolLM2's 29) while MiniLM's 6
    layers were shown, and the page then refused 29 ("Value 29 is greater than maximum value 5")."""
    import warnings

    from playground.ui import attention_tab as tab

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outputs = restore_with(**{"att.layer": "99"})
    assert restored_value(outputs, "att.layer") == tab._model("minilm").n_layer - 1 == 5
    assert any("using 5 (0 to 5)" in str(w.message) for w in caught)
    if tab.models.resolve("gpt") in tab.LISTED:
        outputs = restore_with(**{"att.model": "gpt", "att.layer": "99", "att.head": "5"})
        assert restored_value(outputs, "att.layer") == tab._model("gpt").n_layer - 1
        assert restored_value(outputs, "att.model") == "gpt-shakespeare"  # an old link's short id, read as the id
        assert restored_value(outputs, "att.head") == "5"
        head = str(tab._model("gpt").n_head)  # one past its last head (MiniLM has it)
        assert isinstance(restored_value(restore_with(**{"att.model": "gpt", "att.head": head}), "att.head"),
                          type(gr.skip()))
    if tab.models.resolve("smollm2") in tab.LISTED:
        assert restored_value(restore_with(**{"att.model": "smollm2", "att.layer": "20"}), "att.layer") == 20


def test_a_links_empty_sentence_is_refused_as_the_box_refuses_it():
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outputs = restore_with(text="  ")
    assert isinstance(restored_value(outputs, "text"), type(gr.skip()))
    assert any("text is empty" in str(w.message) for w in caught)


def test_generations_steering_link_sets_the_causal_labs_steering_to_its_preset_without_a_notice():
    """The Generation tab's link to SmolLM2's steering: every value it carries is restored as the preset has it (the
    Causal lab then runs it: redraw_when_linked), none refused."""
    import warnings
    from urllib.parse import parse_qsl

    from playground.ui import causal_tab

    presets = [name for name in causal_tab.STEER_PRESETS if "SmolLM2" in name]
    if not presets:
        pytest.skip("SmolLM2 is not installed")
    params = dict(parse_qsl(causal_tab.steer_link(presets[0])[1:]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outputs = restore_with(**params)
    assert not [w for w in caught if "link" in str(w.message).lower()]
    keys = ("model", "prompt", "positive", "negative", "layer", "strength", "words")
    for key, want in zip(keys, causal_tab.STEER_PRESETS[presets[0]]):
        got = restored_value(outputs, f"causal_steer.{key}")
        assert got == want or (isinstance(want, (int, float)) and float(got) == float(want)), (key, got, want)
