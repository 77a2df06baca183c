"""The word space's own words (presets, the default list, the chips) on the shipped word models: their neighbour
lists show no slur or vulgar word of the reviewed list (unshown_neighbours.txt), what a user types is still
shown, the selected word's neighbours are listed, any word's can be, and a chip says which presets it holds.
Through the handlers, without a server."""

from __future__ import annotations

import gradio as gr
import pytest

from playground.analysis.embeddings import words as ws
from playground.ui import embeddings_tab as tab

SPACES = ws.space_keys()
WHOLE_WORD = [k for k in ("word2vec", "glove", "fasttext") if k in SPACES]


def shipped_lists() -> list[str]:
    """Every word list the app puts in the box by itself: each preset, the default, each chip."""
    return ([tab.fill_presets([name]) for name in ws.PRESETS] + [tab.DEFAULT_WORDS]
            + [text for _, (text,) in tab.TRY])


def listed_in(rows: dict) -> set[tuple[str, str]]:
    return {(word, n) for word, nb in rows.items() for n, _ in nb if n in ws.unshown()}


def test_the_list_is_read_from_its_file_and_holds_no_preset_word():
    assert {"jew", "fart", "nipple"} <= ws.unshown()
    assert all(w == w.lower() and " " not in w for w in ws.unshown())
    assert not ws.unshown() & tab.shipped_words()


def test_the_shipped_models_put_listed_words_next_to_presets_unfiltered():
    """What the filter is for (so the next test is not vacuous): the raw nearest neighbours of the presets'
    words on the shipped models include listed words (GloVe: jew beside lion, wolf and fox)."""
    if "glove" not in WHOLE_WORD:
        pytest.skip("models/glove-english is not shipped")
    raw = set()
    for key in WHOLE_WORD:
        space = ws.space(key)
        found = ws.lookup(space, sorted(tab.shipped_words()))
        raw |= {(w, n) for w, v in zip(found.words, found.vectors)
                for n, _ in ws.neighbours(space, v, ws.K_NEIGHBOURS) if n in ws.unshown()}
    assert {("lion", "jew"), ("deer", "fart"), ("mouse", "nipple")} <= raw


@pytest.mark.parametrize("key", SPACES)
def test_no_preset_default_or_chip_shows_a_listed_neighbour(key):
    for text in shipped_lists():
        data = tab.embed_words(text, key, "pca", 2)[-1]
        assert not listed_in(data["neighbours"]), (key, text[:30])
    for word in sorted(tab.shipped_words()):   # the table lists 20 words; the picker any of them
        try:
            data = tab.word_neighbours(word, tab.DEFAULT_WORDS, key)[-1]
        except gr.Error:                        # not in this vocabulary, nor built from pieces
            continue
        assert not listed_in({word: data["neighbours"]}), (key, word)


@pytest.mark.skipif("glove" not in WHOLE_WORD or "word2vec" not in WHOLE_WORD, reason="word models not shipped")
def test_a_word_the_user_types_is_still_shown():
    data = tab.embed_words("lion, wolf, fox, jew", "glove", "pca", 2)[-1]
    assert "jew" in [p["word"] for p in data["points"]] and data["neighbours"]["jew"][0][0] == "jew"
    assert "jew" in [n for n, _ in data["neighbours"]["lion"]]       # typed, so theirs to see beside lion
    mine = tab.word_neighbours("whore", "", "word2vec")[-1]          # a user's own word: its list unfiltered
    assert "strumpet" in [n for n, _ in mine["neighbours"]]
    assert "fart" in [n for n, _ in tab.word_neighbours("deer", "deer, fart", "glove")[-1]["neighbours"]]


@pytest.mark.parametrize("key", WHOLE_WORD)
def test_the_selected_word_s_neighbours_are_listed_first(key):
    """The default list has 64 words and the table 20 rows: the word selected in the sentence (appended last
    as 'selected: ...') used to be left out of it."""
    data = tab.embed_words(tab.DEFAULT_WORDS + "\nselected: sorrow", key, "pca", 2)[-1]
    assert len(data["points"]) > ws.MAX_NEIGHBOUR_WORDS
    assert list(data["neighbours"])[0] == "sorrow" and data["neighbours"]["sorrow"][0][0] == "sorrow"
    assert len(data["neighbours"]) == ws.MAX_NEIGHBOUR_WORDS


@pytest.mark.parametrize("key", WHOLE_WORD)
def test_any_word_s_neighbours_can_be_listed(key):
    space = ws.space(key)
    html, data = tab.word_neighbours("horse", tab.DEFAULT_WORDS, key)
    expected = ws.neighbours(space, space.vectors[space.vocab["horse"]], ws.K_NEIGHBOURS)
    assert [n for n, _ in data["neighbours"]] == [n for n, _ in expected]
    assert "horse" in html and data["source"] == key


def test_a_chip_ticks_exactly_the_presets_its_list_holds():
    assert tab.chip_presets(tab.DEFAULT_WORDS) == tab.DEFAULT_SETS
    assert tab.chip_presets(tab.fill_presets(["colours", "verbs"])) == ["verbs", "colours"]
    for _, (text,) in tab.TRY:   # no chip holds a whole preset: each clears the boxes
        assert tab.chip_presets(text) == [], text


@pytest.mark.parametrize("key", SPACES)
def test_the_default_analogy_shown_on_load_shows_no_listed_word(key):
    """The analogy panel answers king − man + woman when the page opens: a default, so the same rule holds
    (not filtered: checked, on the shipped models)."""
    md, data = tab.analogy("king", "man", "woman", key)
    assert data["answers"] and not {a["word"] for a in data["answers"]} & ws.unshown()
