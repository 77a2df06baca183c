"""WordNet lemmatization written out: morphy's exception lists and detachment rules over WordNet's index of lemmas.

A stemmer chops suffixes by rule and may leave a non-word ("consid"); a lemmatizer returns a dictionary's base form
("consider"), and for that it needs the word's part of speech: "better" is "good" as an adjective, "better" as a
noun. Morphy (WordNet's morphological processor, morphy(7WN)) works per part of speech:

1. if the word is in that part of speech's exception list (irregular forms: "was" -> "be", "better" -> "good"), the
   candidates are the word and its listed bases;
2. otherwise the candidates are the word and what each detachment rule gives (nouns "-ies" -> "-y", "-ches" ->
   "-ch", ...; verbs "-ing" -> "", "-ing" -> "-e", "-ed" -> "", ...; adjectives "-er", "-est"; adverbs none);
3. the candidates that WordNet's index lists under that part of speech are the lemmas; the lemmatizer answers the
   shortest, or the word itself when there is none.

That is the procedure of NLTK's `WordNetLemmatizer` (3.9+: one round of rules; WordNet's own C morphy also handles
collocations and retries the rules), and tests/test_lemmatize.py checks the two agree word for word.

The part of speech comes from the user (noun, verb, adjective, adverb for every word), or `auto`: per word, the part
of speech whose lemma has the most sense-tagged occurrences in WordNet's semantic concordance (the tagsense_cnt of
its index line). That guess reads no context: it is a most-frequent-tag baseline, not a tagger; "running" is a
verb wherever it stands. Its accuracy on tagged running text is not measured: no tagged English corpus is
reachable offline here (docs/tabs.md says so).

The data is assets/wordnet/morphy.json.gz (built from Debian's wordnet-base by `playground.tools.wordnet_morphy`,
sha256 in assets/wordnet/card.json and checked on load), read once per process.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from functools import lru_cache

from playground.checkpoints import ASSETS_DIR

DATA = ASSETS_DIR / "wordnet" / "morphy.json.gz"
CARD = ASSETS_DIR / "wordnet" / "card.json"

POS = ("n", "v", "a", "r")
POS_LABELS = {"n": "noun", "v": "verb", "a": "adjective", "r": "adverb"}
MODES = ("auto",) + POS   # how each word's part of speech is chosen

# morphy's detachment rules, (suffix, ending): morphy(7WN)'s table, in its order; adverbs have none
RULES = {
    "n": (("s", ""), ("ses", "s"), ("ves", "f"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"),
          ("men", "man"), ("ies", "y")),
    "v": (("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""), ("ing", "e"), ("ing", "")),
    "a": (("er", ""), ("est", ""), ("er", "e"), ("est", "e")),
    "r": (),
}


class WordNetDataError(RuntimeError):
    """The shipped WordNet file is missing or not the one its card records: the message says how to rebuild it."""


class WordNet:
    """The part of WordNet morphy reads: per part of speech, each lemma's tagsense count, and the exceptions."""

    def __init__(self, lemmas: dict[str, dict[str, int]], exceptions: dict[str, dict[str, list[str]]]):
        self.lemmas = lemmas            # pos -> {lemma: tagsense_cnt}
        self.exceptions = exceptions    # pos -> {inflected form: [base, ...]}

    def morphy(self, form: str, pos: str) -> list[str]:
        """Every lemma of `form` under `pos`, in the order morphy finds them (steps 1-3 of the module docstring)."""
        if form in self.exceptions[pos]:
            candidates = [form, *self.exceptions[pos][form]]
        else:
            candidates = [form] + [form[:-len(suffix)] + ending for suffix, ending in RULES[pos]
                                   if form.endswith(suffix)]
        index = self.lemmas[pos]
        return list(dict.fromkeys(c for c in candidates if c in index))

    def lemma(self, word: str, pos: str) -> str:
        """The shortest lemma of `word` under `pos`, or the word itself when WordNet has none."""
        found = self.morphy(word, pos)
        return min(found, key=len) if found else word

    def guess_pos(self, word: str) -> str | None:
        """`auto`'s part of speech: the one whose lemmas of `word` have the most sense-tagged occurrences (ties and
        zero counts in the order noun, verb, adjective, adverb); None when WordNet knows the word under none."""
        best, best_count = None, -1
        for pos in POS:
            found = self.morphy(word, pos)
            if found:
                count = max(self.lemmas[pos][f] for f in found)
                if count > best_count:
                    best, best_count = pos, count
        return best


def _parse(raw: bytes) -> WordNet:
    data = json.loads(gzip.decompress(raw))
    lemmas = {pos: {lemma: int(n) for lemma, n in (line.rsplit(" ", 1) for line in text.split("\n"))}
              for pos, text in data["lemmas"].items()}
    exceptions = {pos: {form: bases for form, *bases in (line.split() for line in text.split("\n") if line)}
                  for pos, text in data["exceptions"].items()}
    return WordNet(lemmas, exceptions)


@lru_cache(maxsize=1)
def wordnet() -> WordNet:
    """The shipped file, its sha256 checked against the card, read once per process (about 0.3 s)."""
    rebuild = "python -m playground.tools.wordnet_morphy /usr/share/wordnet assets/wordnet/morphy.json.gz"
    if not DATA.is_file() or not CARD.is_file():
        raise WordNetDataError(f"{DATA.name} or its card is missing from assets/wordnet; rebuild: {rebuild}")
    raw = DATA.read_bytes()
    if hashlib.sha256(raw).hexdigest() != json.loads(CARD.read_text(encoding="utf-8"))["sha256"]:
        raise WordNetDataError(f"{DATA.name} is not the file its card records; rebuild: {rebuild}")
    return _parse(raw)


def lemmatize_words(words: list[str], mode: str = "auto") -> list[dict]:
    """Each word's {word, pos (None: in WordNet under no part of speech), lemma, lemmas (under every part of
    speech, for the table)}. Words are looked up in lowercase (WordNet's index is lowercase), as morphy does."""
    if mode not in MODES:
        raise ValueError(f"unknown part of speech {mode!r}; choose from {', '.join(MODES)}")
    wn = wordnet()
    rows = []
    for word in words:
        form = word.lower().replace("’", "'")
        pos = wn.guess_pos(form) if mode == "auto" else mode
        rows.append({"word": word, "pos": pos, "lemma": wn.lemma(form, pos) if pos else form,
                     "lemmas": {p: wn.lemma(form, p) for p in POS}})
    return rows
