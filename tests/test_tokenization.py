"""Tokenizers: lossless round trips, offsets, unknown words, and the three explanations."""

from __future__ import annotations

import pytest

from playground.analysis import subwords
from playground.analysis import tokenization as T
from playground.text import clean_text
from playground.training import tokenizers

HARD_TEXTS = [
    "Hello, world!",
    "family: 👩‍👩‍👧 and 🏳️‍🌈 flags",           # emoji with zero-width joiners
    "مرحبا بالعالم and שלום",                     # right to left
    "cafe\u0301 nai\u0308ve",                     # combining accents
    "tab\there\nnew line\x07bell\x00nul",         # control characters
    "   leading and trailing spaces   ",
    "",
]


@pytest.fixture(scope="module")
def toks():
    return T.load_all()


@pytest.mark.parametrize("text", HARD_TEXTS)
def test_byte_level_bpe_is_lossless_and_never_unknown(toks, text):
    enc = T.encode(toks["bpe"], text)
    assert toks["bpe"].decode(enc["ids"], skip_special_tokens=False) == text
    assert enc["n_unknown"] == 0
    # the tokens' bytes, concatenated, are exactly the text's UTF-8 bytes
    assert b"".join(bytes.fromhex(b) for b in enc["bytes"]) == text.encode("utf-8")


@pytest.mark.parametrize("key", ["char", "unigram"])
def test_char_and_unigram_decode_back_text_they_know(toks, key):
    text = "It is a truth universally acknowledged, that a single man\nmust be in want of a wife."
    enc = T.encode(toks[key], text)
    assert enc["n_unknown"] == 0
    assert toks[key].decode(enc["ids"], skip_special_tokens=False) == text


@pytest.mark.parametrize("key", list(T.SPECS))
@pytest.mark.parametrize("text", HARD_TEXTS)
def test_offsets_lie_in_the_text_and_move_forward(toks, key, text):
    enc = T.encode(toks[key], text)
    assert len(enc["tokens"]) == len(enc["ids"]) == len(enc["offsets"]) == enc["n_tokens"]
    previous = 0
    for start, end in enc["offsets"]:
        assert 0 <= start <= end <= len(text)
        assert start >= previous  # byte pieces of one character share a span, so starts may repeat
        previous = start


def test_byte_level_offsets_cover_every_character(toks):
    text = "emoji 👩‍💻, Ελληνικά, e\u0301, x\ty"
    enc = T.encode(toks["bpe"], text)
    covered = set()
    for start, end in enc["offsets"]:
        covered.update(range(start, end))
    assert covered == set(range(len(text)))


def test_char_offsets_are_one_character_each(toks):
    text = "Ab c\n"
    enc = T.encode(toks["char"], text)
    assert enc["offsets"] == [[i, i + 1] for i in range(len(text))]
    assert enc["tokens"] == list(text)


def test_word_level_maps_unseen_words_to_unk_with_their_span(toks):
    text = "The zorblaxian house"
    enc = T.encode(toks["word"], text)
    assert enc["tokens"] == ["The", "[UNK]", "house"]
    assert enc["unknown"] == [False, True, False]
    start, end = enc["offsets"][1]
    assert text[start:end] == "zorblaxian"


def test_character_level_unk_for_unseen_characters(toks):
    enc = T.encode(toks["char"], "a☃b")
    assert enc["tokens"] == ["a", "[UNK]", "b"] and enc["n_unknown"] == 1


def test_wordpiece_covers_an_unseen_word_with_continuation_pieces(toks):
    enc = T.encode(toks["wordpiece"], "Zorblaxian")
    assert enc["n_unknown"] == 0 and len(enc["tokens"]) > 1
    assert all(t.startswith("##") for t in enc["tokens"][1:])
    assert "".join(t.removeprefix("##") for t in enc["tokens"]) == "zorblaxian"  # lowercased


def test_unigram_marks_spaces_with_the_metaspace(toks):
    enc = T.encode(toks["unigram"], "the cat")
    assert enc["tokens"][0].startswith("▁") and any(t.startswith("▁c") or t == "▁" for t in enc["tokens"][1:])


def test_minilm_is_the_bert_base_uncased_vocabulary(toks):
    tok = toks["minilm"]
    assert tok.get_vocab_size() == 30522
    assert tok.token_to_id("[MASK]") == 103 and tok.token_to_id("[CLS]") == 101
    assert T.encode(tok, "Hello")["tokens"] == ["hello"]   # no [CLS]/[SEP], no padding to 128


def test_compare_gives_every_chosen_tokenizer_in_the_order_chosen(toks):
    notices = ["a notice about the input"]
    [data] = T.compare(toks, "Hello there", ["unigram", "char", "bpe"], None, notices)
    assert data["text"] == "Hello there" and data["n_chars"] == 11 and data["notices"] == notices
    assert list(data["tokenizers"]) == ["unigram", "char", "bpe"]
    for key, result in data["tokenizers"].items():
        assert result == {"label": T.SPECS[key].label, **T.encode(toks[key], "Hello there")}


@pytest.mark.slow  # tokenizers retrained
def test_compare_shows_the_others_first_while_unigram_retrains(toks):
    size = 350
    assert not T.is_retrained("unigram", size)
    first, last = T.compare(toks, "unaffable", ["unigram", "char", "wordpiece"], size, [])
    assert list(first["tokenizers"]) == ["char", "wordpiece"] and "Retraining Unigram" in first["notices"][0]
    assert list(last["tokenizers"]) == ["unigram", "char", "wordpiece"] and last["notices"] == []
    assert last["tokenizers"]["char"]["label"] == T.SPECS["char"].label  # not retrainable: the shipped one
    for key in ("unigram", "wordpiece"):
        assert last["tokenizers"][key]["label"].endswith("retrained on the corpus sample at 350")
        assert last["tokenizers"][key]["vocab_size"] <= size
    assert len(list(T.compare(toks, "unaffable", ["unigram"], size, []))) == 1  # trained now: one answer


def test_counts_and_chars_per_token(toks):
    enc = T.encode(toks["char"], "abcd")
    assert enc["n_tokens"] == 4 and enc["chars_per_token"] == 1.0
    assert T.encode(toks["char"], "")["chars_per_token"] is None


# --- classic BPE, checked against hand computation on the lecture's table -------------------

LECTURE = [("low", 5), ("lower", 2), ("newest", 6), ("widest", 3), ("highest", 2)]


def test_bpe_first_pair_counts_by_hand():
    trace = subwords.bpe_trace(LECTURE, 1)
    counts = {(a, b): n for a, b, n in trace["steps"][0]["pair_counts"]}
    # e s: newest 6 + widest 3 + highest 2 = 11; s t and t </w> likewise; l o: 5 + 2 = 7; w e: 2 + 6 = 8
    assert counts[("e", "s")] == 11 and counts[("s", "t")] == 11 and counts[("t", "</w>")] == 11
    assert counts[("w", "e")] == 8 and counts[("l", "o")] == 7
    # distinct pairs: low 3, lower +3 (we er r</w>), newest +5, widest +3 (wi id de), highest +4 (hi ig gh he)
    assert trace["steps"][0]["n_pairs"] == 18


def test_bpe_merges_match_the_worked_example():
    trace = subwords.bpe_trace(LECTURE, 5)
    assert [(m["pair"], m["count"]) for m in trace["merges"]] == [
        (["e", "s"], 11), (["es", "t"], 11), (["est", "</w>"], 11), (["l", "o"], 7), (["lo", "w"], 7)]
    assert trace["segmentation"]["low"] == ["low", "</w>"]
    assert trace["segmentation"]["widest"] == ["w", "i", "d", "est</w>"]
    # the lecture's vocabulary table after step 3: est</w> 11, </w> 7 (low, lower)
    counts = trace["steps"][2]["symbol_counts"]
    assert counts["est</w>"] == 11 and counts["</w>"] == 7 and counts["w"] == 16
    assert trace["vocabulary"][-5:] == ["es", "est", "est</w>", "lo", "low"]


def test_bpe_segments_an_unseen_word_with_learned_merges():
    trace = subwords.bpe_trace(LECTURE, 5)
    seg = subwords.bpe_segment("lowest", trace["merges"], trace["alphabet"])
    assert seg["symbols"] == ["low", "est</w>"]
    assert [a["new_symbol"] for a in seg["applied"]] == ["es", "est", "est</w>", "lo", "low"]
    assert subwords.bpe_segment("lowz", trace["merges"], trace["alphabet"])["unknown_chars"] == ["z"]


def test_bpe_ties_go_to_the_pair_counted_first():
    trace = subwords.bpe_trace([("xy", 2), ("ab", 2)], 2)
    assert [m["pair"] for m in trace["merges"]] == [["x", "y"], ["xy", "</w>"]]


def test_bpe_merges_do_not_overlap():
    trace = subwords.bpe_trace([("aaa", 1)], 1)
    assert trace["merges"][0]["pair"] == ["a", "a"] and trace["merges"][0]["count"] == 2
    assert trace["segmentation"]["aaa"] == ["aa", "a", "</w>"]


def test_bpe_stops_when_every_word_is_one_symbol():
    trace = subwords.bpe_trace([("a", 3)], 5)
    assert len(trace["merges"]) == 1 and "stopped after 1" in trace["stopped"]


def test_trace_reads_a_frequency_table_and_names_the_bad_line():
    table = "\n".join(f"{word} {count}" for word, count in LECTURE)
    assert subwords.trace(table, 5) == subwords.bpe_trace(LECTURE, 5)
    with pytest.raises(ValueError, match=r"^Frequency table: line 2: .*'lower 2'\.$"):
        subwords.trace("low 5\nlower two three", 5)


def test_segment_covers_each_new_word_with_the_learned_merges():
    table = "\n".join(f"{word} {count}" for word, count in LECTURE)
    data = subwords.segment(table, 5, "lowest, Newer!")
    assert data["merges"] == subwords.bpe_trace(LECTURE, 5)["merges"]
    assert [w["word"] for w in data["words"]] == ["lowest", "Newer"]
    assert data["words"][0]["symbols"] == ["low", "est</w>"] and data["words"][1]["unknown_chars"] == ["N"]
    assert len(subwords.segment(table, 5, "a " * 80)["words"]) == subwords.MAX_SEGMENTED_WORDS
    with pytest.raises(ValueError, match="Type one or more words"):
        subwords.segment(table, 5, " ,; ")


def test_parse_word_counts_sums_repeats_and_rejects_malformed_lines():
    assert subwords.parse_word_counts("low 5\n\n# comment\nlow 2\nnew 1") == [("low", 7), ("new", 1)]
    for bad, message in [("", "empty"), ("low", "line 1"), ("low 5\nnew x", "line 2"), ("low -1", "line 1"),
                         ("l o w 5", "line 1"), ("low</w> 3", "</w>"), ("a 0", "whole number")]:
        with pytest.raises(ValueError, match=message):
            subwords.parse_word_counts(bad)


# --- WordPiece and Unigram explanations agree with the tokenizers ----------------------------

WORDS = "unaffable tokenization hyperparameters the Ünïcödé zorblaxian 12345 don't"


@pytest.mark.parametrize("key", ["wordpiece", "minilm"])
def test_wordpiece_explanation_reproduces_the_tokenizer(toks, key):
    explained = subwords.wordpiece_explain(toks[key], WORDS)
    pieces = [p for item in explained for p in item["pieces"]]
    assert pieces == T.encode(toks[key], WORDS)["tokens"]
    for item in explained:
        for step in item["steps"]:
            # every rejected candidate is longer than the match: greedy longest match first
            if step["match"]:
                assert all(len(r) > len(step["match"]) for r in step["rejected"])


def test_wordpiece_unknown_word_is_one_unk(toks):
    [item] = subwords.wordpiece_explain(toks["minilm"], "☃☄")
    assert item["unknown"] and item["pieces"] == ["[UNK]"]


def test_unigram_best_segmentation_is_the_tokenizer_output(toks):
    explained = subwords.unigram_explain(toks["unigram"], WORDS, n_best=4)
    best = [p for item in explained for p in item["segmentations"][0]["pieces"]]
    assert best == T.encode(toks["unigram"], WORDS)["tokens"]
    for item in explained:
        totals = [s["total"] for s in item["segmentations"]]
        assert totals == sorted(totals, reverse=True)
        for seg in item["segmentations"]:
            assert seg["total"] == pytest.approx(sum(seg["log_probs"]), abs=1e-3)
            assert "".join(seg["pieces"]) == item["word"]


def test_explain_gives_both_explanations(toks):
    data = subwords.explain(toks["minilm"], toks["unigram"], "unaffable")
    assert data == {"wordpiece": subwords.wordpiece_explain(toks["minilm"], "unaffable"),
                    "unigram": subwords.unigram_explain(toks["unigram"], "unaffable")}


# --- retraining on the sample, input hygiene ---------------------------------------------------

def test_retrained_vocabulary_size_changes_the_split():
    text = "Extraordinarily unaffable hyperparameters."
    small, large = T.retrained("bpe", 400), T.retrained("bpe", 6000)
    assert small.get_vocab_size() <= 400 and large.get_vocab_size() > 3000
    assert T.encode(small, text)["n_tokens"] > T.encode(large, text)["n_tokens"]
    assert T.retrained("bpe", 400) is small  # cached: the slider coming back is instant
    with pytest.raises(ValueError, match="only"):
        T.retrained("char", 100)


def test_clean_text_truncates_with_a_notice_and_repairs_surrogates():
    text, notices = clean_text("x" * 10, max_chars=4)
    assert text == "xxxx" and "10 characters" in notices[0]
    text, notices = clean_text("a\ud800b")
    assert text == "a?b" and "surrogates" in notices[0]
    assert clean_text(None) == ("", [])


def test_sample_batches_are_the_sample_and_train_the_same_bpe():
    batches = T.sample_batches()
    assert len(batches) > 1 and "".join(batches) == T.sample_text()
    assert all(b.endswith("\n") for b in batches[:-1])  # whole lines: no word is cut in two
    one, batched = tokenizers.train("bpe", [T.sample_text()], 500), tokenizers.train("bpe", batches, 500)
    assert one.to_str() == batched.to_str()


def test_a_tokenizers_registry_model_id_names_it_too():
    """/tokenize's names: a key, or the registry's id (or alias) of the tokenizer's model; anything else unchanged."""
    from playground.analysis import models

    assert T.key("tok-bpe") == "bpe" and T.key("bpe") == "bpe" and T.key(models.MINILM) == "minilm"
    assert T.key(models.SMOLLM2) == "smollm2" and T.key("smollm2") == "smollm2"
    assert T.key("gpt-shakespeare") == "gpt-shakespeare" and T.key("nope") == "nope" and T.key(3) == 3
