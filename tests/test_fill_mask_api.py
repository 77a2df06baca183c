"""The Masked-LM tab's endpoints through gradio_client, with the shipped models (skipped until a
masked-LM checkpoint is shipped: models/minilm-mlm or models/bert-english)."""

from __future__ import annotations

import pytest
from gradio_client.exceptions import AppError

from playground import checkpoints
from playground.ui import fill_mask_tab as tab

pytestmark = pytest.mark.skipif(not tab.LISTED, reason="no masked-LM checkpoint is shipped yet")
DEFAULT = tab.DEFAULT_MODEL


def fill(client, text, model=DEFAULT, top_k=5):
    return client.predict(text, model, top_k, api_name="/fill_mask")


def test_fill_mask_returns_the_pipeline_format(client):
    html, plot, path, data = fill(client, "The cat sat on the [MASK].")
    assert isinstance(data, list) and len(data) == 5
    assert all(set(r) == {"score", "token", "token_str", "sequence"} for r in data)
    scores = [r["score"] for r in data]
    assert scores == sorted(scores, reverse=True) and 0 < sum(scores) <= 1 + 1e-6
    for r in data:
        assert r["token_str"].removeprefix("##") in r["sequence"] and "[MASK]" not in r["sequence"]
    assert 'class="fm-fill"' in html
    with open(path, encoding="utf-8") as f:
        assert '"token_str"' in f.read()


def test_the_default_model_guesses_words_on_an_everyday_sentence(client):
    data = fill(client, "The cat sat on the [MASK].")[-1]
    assert DEFAULT == "minilm-mlm", f"the default fill-in model should be minilm-mlm (shipped), not {DEFAULT!r}"
    assert sum(r["token_str"].isalpha() and len(r["token_str"]) >= 3 for r in data) >= 3, data


@pytest.mark.parametrize("model", tab.LISTED)
def test_every_model_several_and_glued_masks(client, model):
    data = fill(client, "The [MASK] barked at the [MASK], and [mask].", model, 3)[-1]
    assert len(data) == 3 and all(len(row) == 3 for row in data)
    assert all(r["sequence"].count("[MASK]") == 2 for row in data for r in row)  # the other masks stay hidden
    ten = fill(client, " ".join(["[MASK]"] * 10), model, 2)[-1]
    assert len(ten) == 10


def test_bad_input_is_refused_clearly_or_handled(client):
    with pytest.raises(AppError, match="no \\[MASK\\]"):
        fill(client, "The cat sat on the mat.")
    with pytest.raises(AppError, match="maximum"):  # the slider's bound
        fill(client, "The [MASK].", top_k=10_000)
    html, *_, data = fill(client, "word " * 600 + "the [MASK] ran " + "word " * 3_000)
    assert len(data) == 5 and "reads at most" in html and "only the first 5,000" in html


def test_how_bert_was_trained_endpoints(client):
    view, data = client.predict("The quick brown fox jumps over the lazy dog.", DEFAULT, 7, True,
                                api_name="/mlm_masking")
    assert data["seed"] == 7 and data["whole_word"] and len(data["action"]) == len(data["tokens"])
    assert abs(data["draws"]["selected"] - 0.15) < 0.03
    table, plot, label, summary, path, rep = client.predict("The man went to the store.", "He bought milk.",
                                                            tab.NSP_MODEL, api_name="/input_representation")
    assert rep["segments"][0] == 0 and rep["segments"][-1] == 1 and rep["tokens"].count("[SEP]") == 2
    assert len(rep["embeddings"]["sum"]) == len(rep["tokens"])
    if rep["has_nsp_head"]:
        assert rep["nsp"]["IsNext"] + rep["nsp"]["NotNext"] == pytest.approx(1.0, abs=1e-4)
    plot, table, cards = client.predict(api_name="/mlm_cards")
    assert [m["name"] for m in cards["models"]] == tab.LISTED


def test_the_default_pair_makes_the_panels_point_with_the_shipped_model():
    """The NSP panel starts on a pair that the shipped bert-english reads as IsNext, and says why the BERT
    paper's own example is not used (issue #20, item 12)."""
    from playground.ui import fill_mask_tab

    *_, summary, _, data = fill_mask_tab.input_representation(*fill_mask_tab.PAIR, "bert-english")
    assert data["nsp"]["IsNext"] > 0.7 and "**IsNext**" in summary
    *_, data = fill_mask_tab.input_representation("The man went to the store.", "He bought a gallon of milk.",
                                                  "bert-english")
    assert data["nsp"]["NotNext"] > 0.5 and "NotNext" in fill_mask_tab.nsp_note()


def test_the_tab_says_what_to_expect_with_the_cards_figures():
    """Every default example makes its point or the tab says why not: the held-out figures are on the page."""
    from playground.ui import fill_mask_tab

    note = fill_mask_tab.expectation_note()
    *_, cards = fill_mask_tab.model_cards()
    for numbers in cards["models"]:
        name = numbers["name"]
        assert f"*{name}* {numbers['top1']:.0%} top-1, {numbers['top5']:.0%} top-5" in note
        for o in checkpoints.outside(checkpoints.read_card(name)):   # and every text outside its corpora
            assert f"{o['top5']:.0%} top-5 on the last {o['fraction']:.0%} of {o['title']}" in note
    assert checkpoints.outside(checkpoints.read_card("minilm-mlm")), "minilm-mlm is measured outside its corpora"
    capitals = checkpoints.read_card("minilm-mlm")["capitals"]
    assert (f"*minilm-mlm* puts *capital* first for {capitals['first']} of {capitals['of']} and among its first "
            f"five for {capitals['top5']}") in note


@pytest.mark.slow
def test_the_cards_capitals_are_what_the_shipped_model_ranks():
    """The card's '{Capital} is the [MASK] of {Country}.' ranks, the figure the tab shows, measured again."""
    from playground.tools import held_out

    card = checkpoints.read_card("minilm-mlm")["capitals"]
    measured = held_out.capitals("minilm-mlm")
    assert measured == card and card["of"] == 14 and card["ranks"]["Paris is the [MASK] of France."] >= 1
