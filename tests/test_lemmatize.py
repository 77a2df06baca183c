"""The WordNet lemmatizer (analysis/lemmatize.py): morphy over the shipped file, the lecture's example, and agreement
with NLTK's WordNetLemmatizer reading Debian's wordnet-base (skipped where either is missing)."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from playground.analysis import lemmatize, normalize
from playground.tools import wordnet_morphy

WORDNET_DIR = Path("/usr/share/wordnet")   # Debian's wordnet-base (.ci/run installs it)
LECTURE = "Running was considered better than going to gym."


def test_the_lectures_example_stemmer_row_and_lemmatizer_row():
    """The slide: Porter "run, wa, consid, better, than, go, to, gym"; WordNet "run, be, consider, good, than, go,
    to, gym". Assumed: the text lowercased and its punctuation removed, stop words kept (the rows keep "was",
    "than", "to"), and the part of speech the output implies (running, was, considered, going: verbs; better: an
    adjective; gym: a noun), which is what `auto` guesses for each of these words."""
    stages = normalize.apply(LECTURE, ["lowercase", "punctuation", "stem", "lemmatize"])["stages"]
    by_step = {s["step"]: s for s in stages}
    assert by_step["stem"]["tokens"] == ["run", "wa", "consid", "better", "than", "go", "to", "gym"]
    assert by_step["lemmatize"]["tokens"] == ["run", "be", "consider", "good", "than", "go", "to", "gym"]
    assert by_step["lemmatize"]["pos"] == ["v", "v", "v", "a", None, "v", None, "n"]
    assert by_step["lemmatize"]["from"] == "punctuation"    # it reads the stage before stemming, not the stems
    data = normalize.stem_and_lemmatize(LECTURE)
    assert data["stems"] == by_step["stem"]["tokens"] and data["lemmas"] == by_step["lemmatize"]["tokens"]


def test_the_part_of_speech_decides_the_lemma():
    assert normalize.stem_and_lemmatize("better", "a")["lemmas"] == ["good"]
    assert normalize.stem_and_lemmatize("better", "r")["lemmas"] == ["well"]
    assert normalize.stem_and_lemmatize("better", "n")["lemmas"] == ["better"]
    assert normalize.stem_and_lemmatize("was running", "n")["lemmas"] == ["wa", "running"]  # a noun: "WA" (the state)
    assert normalize.stem_and_lemmatize("was running", "v")["lemmas"] == ["be", "run"]


def test_morphy_rules_exceptions_and_the_index():
    wn = lemmatize.wordnet()
    assert wn.morphy("churches", "n") == ["church"]                  # -ches -> -ch
    assert wn.lemma("aardwolves", "n") == "aardwolf"                 # -ves -> -f
    assert wn.lemma("geese", "n") == "goose" and wn.lemma("ran", "v") == "run"   # the exception lists
    assert wn.lemma("hardrock", "n") == "hardrock"                   # not in WordNet: the word itself
    assert wn.lemma("quickly", "r") == "quickly" and lemmatize.RULES["r"] == ()  # adverbs: no rules
    assert wn.morphy("axes", "n") == ["ax", "axis"]    # listed as an exception: its bases, the rules not tried
    assert wn.lemma("axes", "n") == "ax"                # the shortest


def test_an_unknown_part_of_speech_and_odd_input():
    with pytest.raises(ValueError, match="unknown part of speech"):
        lemmatize.lemmatize_words(["x"], "noun")
    assert normalize.stem_and_lemmatize("", "auto")["rows"] == []
    assert normalize.stem_and_lemmatize("👋 مرحبا ¿qué?", "auto")["lemmas"] == ["👋", "مرحبا", "qué"]


def test_the_shipped_file_is_checked_against_its_card(tmp_path, monkeypatch):
    card = json.loads(lemmatize.CARD.read_text())
    assert card["bytes"] < 10_000_000 and card["licence"].startswith("WordNet 3.0")
    damaged = tmp_path / "morphy.json.gz"
    damaged.write_bytes(gzip.compress(b'{"lemmas": {}, "exceptions": {}}'))
    monkeypatch.setattr(lemmatize, "DATA", damaged)
    lemmatize.wordnet.cache_clear()
    try:
        with pytest.raises(lemmatize.WordNetDataError, match="rebuild"):
            lemmatize.wordnet()
    finally:
        monkeypatch.undo()
        lemmatize.wordnet.cache_clear()


needs_wordnet = pytest.mark.skipif(not (WORDNET_DIR / "index.noun").is_file(),
                                   reason="Debian's wordnet-base is not installed (apt-get install wordnet-base)")


@needs_wordnet
def test_the_command_rebuilds_the_shipped_file_byte_for_byte(tmp_path):
    out = tmp_path / "morphy.json.gz"
    card = wordnet_morphy.build(WORDNET_DIR, out, "test")
    assert card["sha256"] == json.loads(lemmatize.CARD.read_text())["sha256"]


# WordNet's 45 lexicographer files, in number order: NLTK's reader wants the `lexnames` file that Debian leaves out
LEXNAMES = """adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact noun.attribute noun.body
noun.cognition noun.communication noun.event noun.feeling noun.food noun.group noun.location noun.motive noun.object
noun.person noun.phenomenon noun.plant noun.possession noun.process noun.quantity noun.relation noun.shape
noun.state noun.substance noun.time verb.body verb.change verb.cognition verb.communication verb.competition
verb.consumption verb.contact verb.creation verb.emotion verb.motion verb.perception verb.possession verb.social
verb.stative verb.weather adj.ppl""".split()


def _word_list(wn: lemmatize.WordNet) -> dict[str, list[str]]:
    """Per part of speech: every exception-list form, and inflections made from every 7th lemma of the index (with
    each rule's suffix put on), plus words WordNet lacks: thousands of words, each rule and the index exercised."""
    suffixes = {"n": ["s", "es", "ies"], "v": ["s", "ed", "ing", "es"], "a": ["er", "est"], "r": ["ly"]}
    words = {}
    for pos in lemmatize.POS:
        lemmas = sorted(wn.lemmas[pos])[::7]
        made = [lemma + suffix for lemma in lemmas for suffix in suffixes[pos]]
        words[pos] = sorted(wn.exceptions[pos]) + lemmas + made + ["than", "xyzzy", "hardrock"]
    return words


@pytest.mark.slow
@needs_wordnet
@pytest.mark.filterwarnings("ignore:The multilingual functions")
def test_agrees_with_nltks_wordnet_lemmatizer_on_thousands_of_words(tmp_path, monkeypatch):
    nltk_wordnet = pytest.importorskip("nltk.corpus.reader.wordnet")
    stem_wordnet = pytest.importorskip("nltk.stem.wordnet")
    nltk_data = pytest.importorskip("nltk.data")
    for f in WORDNET_DIR.iterdir():   # copied: NLTK reads only below its data paths, which the test's folder joins
        if f.name.split(".")[0] in ("index", "data") or f.name.endswith(".exc"):
            shutil.copy(f, tmp_path / f.name)
    monkeypatch.setattr(nltk_data, "path", [str(tmp_path), *nltk_data.path])
    (tmp_path / "lexnames").write_text("".join(f"{i:02d}\t{name}\t{i // 100}\n" for i, name in enumerate(LEXNAMES)))

    class Reader(nltk_wordnet.WordNetCorpusReader):
        def map_wn(self, version="wordnet"):
            return None   # the map to another WordNet's synsets, for multilingual data (it reads NLTK's own copy)

    reader = Reader(str(tmp_path), None)
    corpus = pytest.importorskip("nltk.corpus")
    monkeypatch.setitem(vars(corpus), "wordnet", reader)   # NLTK's lemmatizer imports nltk.corpus.wordnet per call
    theirs = stem_wordnet.WordNetLemmatizer()
    ours = lemmatize.wordnet()
    checked = 0
    for pos, words in _word_list(ours).items():
        differ = [(w, ours.lemma(w, pos), theirs.lemmatize(w, pos)) for w in words
                  if ours.lemma(w, pos) != theirs.lemmatize(w, pos)]
        assert not differ, f"{pos}: {len(differ)} of {len(words)} differ, e.g. {differ[:5]}"
        checked += len(words)
    assert checked > 20_000
