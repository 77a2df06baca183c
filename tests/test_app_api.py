"""The app through gradio_client, as an API user (or the load test of a later issue) sees it."""

from __future__ import annotations

import pytest
from gradio_client.exceptions import AppError

ALL = ["char", "word", "bpe", "wordpiece", "unigram", "minilm", "smollm2"]
ENDPOINTS = ["/tokenize", "/bpe_trace", "/bpe_segment", "/explain_split", "/normalize", "/lemmatize"]


def tokenize(client, text, names=ALL, retrain=False, vocab=2000):
    return client.predict(text, names, retrain, vocab, api_name="/tokenize")[-1]


def test_every_endpoint_is_named(client):
    api = client.view_api(return_format="dict", print_info=False)
    assert set(ENDPOINTS) <= set(api["named_endpoints"])


def test_tokenize_returns_the_contract(client):
    data = tokenize(client, "Hello world, again!")
    assert list(data["tokenizers"]) == ALL
    for key, r in data["tokenizers"].items():
        assert {"tokens", "ids", "offsets", "n_tokens", "chars_per_token", "n_unknown"} <= set(r), key
        assert r["n_tokens"] == len(r["tokens"]) == len(r["ids"]) == len(r["offsets"]) > 0
    assert data["tokenizers"]["char"]["n_tokens"] == len("Hello world, again!")


def test_tokenize_takes_registry_model_ids_as_aliases(client):
    """A tokenizer's registry id (its checkpoint's name) names it as its key does: the same answer, under the key."""
    by_id = tokenize(client, "Hello world", ["tok-bpe", "tok-wordpiece", "char", "tok-char"])
    assert list(by_id["tokenizers"]) == ["bpe", "wordpiece", "char"]
    assert by_id == tokenize(client, "Hello world", ["bpe", "wordpiece", "char"])
    with pytest.raises(AppError, match="nope"):
        tokenize(client, "Hello world", ["nope"])


def test_tokenize_outputs_view_table_and_download(client):
    html, plot, table, path, data = client.predict("a b", ["char"], False, 2000, api_name="/tokenize")
    assert 'class="tok' in html and len(table["data"]) == 3
    with open(path, encoding="utf-8") as f:
        assert '"tokenizers"' in f.read()


@pytest.mark.parametrize("text", ["", "👩‍👩‍👧‍👦🏳️‍🌈", "مرحبا بالعالم", "e\u0301\u0301", "\x00\x01\x1b[31m\x7f", " \n\t "])
def test_odd_text_is_handled(client, text):
    data = tokenize(client, text)
    assert data["n_chars"] == len(text)
    assert data["tokenizers"]["bpe"]["n_unknown"] == 0


def test_huge_text_is_truncated_with_a_notice(client):
    data = tokenize(client, "word " * 20_000, ["bpe", "char"])
    assert data["n_chars"] == 5_000 and "100,000 characters" in data["notices"][0]


def test_retraining_follows_the_vocabulary_size(client):
    small = tokenize(client, "Extraordinarily unaffable", ["bpe", "unigram"], True, 400)
    large = tokenize(client, "Extraordinarily unaffable", ["bpe", "unigram"], True, 8000)
    assert small["tokenizers"]["bpe"]["vocab_size"] <= 400 < large["tokenizers"]["bpe"]["vocab_size"]
    assert small["tokenizers"]["bpe"]["n_tokens"] > large["tokenizers"]["bpe"]["n_tokens"]


def test_nonsense_vocabulary_size_is_refused_clearly(client):
    with pytest.raises(AppError, match="greater than maximum value 30000"):
        client.predict("abc", ["bpe"], True, 10**9, api_name="/tokenize")
    assert tokenize(client, "abc", ["bpe"])["tokenizers"]["bpe"]["n_tokens"] > 0  # and the app goes on


def test_handler_clamps_what_the_slider_would_refuse():
    from playground.ui import tokenization_tab as tab

    *_, (*_, data) = tab.tokenize("abc", ["bpe"], True, 10**9)
    assert data["tokenizers"]["bpe"]["vocab_size"] <= 30_000 and "out of range" in data["notices"][0]


@pytest.mark.parametrize("names, message", [(["nope"], "not in the list of choices"), ([], "at least one")])
def test_bad_tokenizer_names_are_clear_errors(client, names, message):
    with pytest.raises(AppError, match=message):
        client.predict("abc", names, False, 2000, api_name="/tokenize")


def test_bpe_trace_endpoint(client):
    *_, data = client.predict("low 5\nlower 2\nnewest 6\nwidest 3\nhighest 2", 5, api_name="/bpe_trace")
    assert [m["new_symbol"] for m in data["merges"]] == ["es", "est", "est</w>", "lo", "low"]
    assert data["merges"][0] == {"step": 1, "pair": ["e", "s"], "new_symbol": "es", "count": 11}
    assert data["segmentation"]["newest"] == ["n", "e", "w", "est</w>"]


@pytest.mark.parametrize("table, merges, message", [
    ("", 5, "empty"), ("low five", 5, "line 1"), ("low 5\n\nlow 2 3", 5, "line 3"), ("low 5", "many", "Expected a `float`"),
])
def test_bpe_trace_bad_input(client, table, merges, message):
    with pytest.raises(AppError, match=message):
        client.predict(table, merges, api_name="/bpe_trace")


def test_bpe_segment_endpoint(client):
    html, data = client.predict("low 5\nlower 2\nnewest 6\nwidest 3\nhighest 2", 5, "lowest", api_name="/bpe_segment")
    assert data["words"][0]["symbols"] == ["low", "est</w>"] and "lowest" in html
    with pytest.raises(AppError, match="words"):
        client.predict("low 5", 5, "  ", api_name="/bpe_segment")


def test_explain_split_endpoint(client):
    wp, uni, data = client.predict("unaffable", "minilm", api_name="/explain_split")
    assert data["wordpiece"][0]["pieces"] == ["una", "##ffa", "##ble"]
    assert data["unigram"][0]["segmentations"][0]["pieces"] and "log P" in uni
    with pytest.raises(AppError, match="word"):
        client.predict("", "wordpiece", api_name="/explain_split")


def test_normalize_endpoint(client):
    html, data = client.predict("The cats are running!", ["lowercase", "stopwords", "stem"], api_name="/normalize")
    assert data["stages"][-1]["tokens"] == ["cat", "run", "!"]


def test_the_smollm2_reasoning_endpoints_refuse_an_empty_question(client):
    from playground.analysis import models

    if models.resolve(models.SMOLLM2) is None:
        pytest.skip("SmolLM2 is not installed: the Generation tab has no reasoning panels")
    with pytest.raises(AppError, match="Type a question"):
        client.predict("  ", 0, 0, api_name="/chain_of_thought")
    with pytest.raises(AppError, match="Type a question"):
        client.predict("", 0, 0, True, api_name="/chat_tools")


def test_lemmatize_endpoint_and_the_lemmatizer_stage(client):
    lecture = "Running was considered better than going to gym."
    html, data = client.predict(lecture, "auto", api_name="/lemmatize")
    assert data["stems"] == ["run", "wa", "consid", "better", "than", "go", "to", "gym"]
    assert data["lemmas"] == ["run", "be", "consider", "good", "than", "go", "to", "gym"]
    assert "WordNet lemma" in html and "consid" in html
    assert client.predict(lecture, "n", api_name="/lemmatize")[1]["lemmas"][:2] == ["running", "wa"]
    with pytest.raises(AppError, match="not in the list of choices"):   # gradio refuses it before the handler
        client.predict(lecture, "noun", api_name="/lemmatize")
    _, stages = client.predict(lecture, ["lowercase", "stem", "lemmatize"], api_name="/normalize")
    assert [s["step"] for s in stages["stages"]] == ["original", "lowercase", "stem", "lemmatize"]
    assert stages["stages"][-1]["tokens"][:4] == ["run", "be", "consider", "good"]


def test_every_model_event_clears_its_results_when_it_fails(app_url):
    """A refused input must not leave the previous input's answer on screen: each queued event that shows
    results has a browser-side failure handler clearing them (tests/test_browser_seq2seq.py sees it work)."""
    import gradio as gr

    import app

    fns = app.demo.fns.values()
    handled = {fn.trigger_after for fn in fns if fn.trigger_only_on_failure}
    shows = [fn for fn in fns if fn.queue and fn.fn is not None and not fn.trigger_only_on_failure and
             any(isinstance(block, (gr.Plot, gr.JSON, gr.HTML, gr.Markdown)) for block in fn.outputs)]
    assert len(shows) > 20
    assert [fn.name for fn in shows if fn._id not in handled] == []
    # a Stop button's cancel reaches the failure handler too: it is marked so that the handler keeps the output
    for fn in fns:
        if fn.cancels:
            buttons = [block for block, _ in fn.targets if block is not None]
            assert all("stop-button" in (app.demo.blocks[b].elem_classes or []) for b in buttons), fn.name


def test_the_word_chips_are_redrawn_before_the_tabs_run(app_url):
    """The browser sends an event's requests in the order the events were registered: the chips' (a quick
    answer) come first, so they never show the old sentence while the tabs already show the new one."""
    import app

    relay = next(b for b in app.demo.blocks.values() if b.elem_id == "relay-text")  # the sentence's real changes
    listeners = [fn for fn in app.demo.fns.values() if (relay._id, "select") in fn.targets and fn.fn is not None]
    chips = [i for i, fn in enumerate(listeners) if any(getattr(b, "elem_id", None) == "word-chips" for b in fn.outputs)]
    assert chips == [0] and len(listeners) > 5
