"""Classic text normalisation before tokenization, one step at a time.

The preprocessing of count-based NLP (bag of words, TF-IDF): lowercase, drop punctuation, drop stop
words, stem with Porter's algorithm (Porter 1980), or lemmatize with WordNet (analysis/lemmatize.py). Each
step is shown on its own so a user sees what it merges (Cat/cat), what it loses (negation in "not", the
sense of "US" vs "us") and why subword tokenizers of neural models mostly skip it. Stemming and
lemmatization are two answers to one question, so the lemmatizer reads the stage *before* stemming (its
`from`) and its row stands beside the stemmer's, word for word.
"""

from __future__ import annotations

import threading
import unicodedata

from playground.analysis import lemmatize
from playground.text import words as text_words

STEPS = ("lowercase", "punctuation", "stopwords", "stem", "lemmatize")
STEP_LABELS = {
    "lowercase": "Lowercase",
    "punctuation": "Remove punctuation",
    "stopwords": "Remove stop words",
    "stem": "Porter stemming",
    "lemmatize": "WordNet lemmatizer",
}

# Closed-class English words (articles, pronouns, auxiliaries, prepositions, conjunctions) that a
# bag-of-words model usually drops; compared in lowercase, with straight or curly apostrophes.
STOP_WORDS = frozenset("""
a an the this that these those there here
i me my mine myself we us our ours ourselves you your yours yourself yourselves
he him his himself she her hers herself it its itself they them their theirs themselves
who whom whose which what
am is are was were be been being have has had having do does did doing
will would shall should can could may might must
and but or nor so yet if then than because as while until unless although though
of at by for with about against between into through during before after above below
to from up down in out on off over under again further once
all any both each few more most other some such no not only own same too very
just also s t don't doesn't didn't isn't aren't wasn't weren't won't can't i'm it's
""".split())


def words(text: str) -> list[str]:
    """Words (with inner apostrophes: don't, o'clock) and single punctuation marks."""
    return [word for _, _, word in text_words(text, marks=True)]


def is_punctuation(token: str) -> bool:
    return all(unicodedata.category(ch).startswith("P") for ch in token)


_STEMMERS = threading.local()


def _porter():
    """Porter's original 1980 algorithm, one stemmer per thread: a snowballstemmer object keeps the word it is
    stemming in itself, so threads sharing one (students asking at once) got each other's stems, or an IndexError."""
    stemmer = getattr(_STEMMERS, "porter", None)
    if stemmer is None:
        import snowballstemmer

        stemmer = _STEMMERS.porter = snowballstemmer.stemmer("porter")
    return stemmer


def stem(word: str) -> str:
    return _porter().stemWord(word)


def _lemmatized(tokens: list[str], source: str) -> dict:
    """The lemmatizer's stage over `tokens` (the stage `source`'s), each word's part of speech guessed (`auto`)."""
    rows = lemmatize.lemmatize_words(tokens, "auto")
    new = [row["lemma"] for row in rows]
    return {"step": "lemmatize", "label": STEP_LABELS["lemmatize"], "tokens": new, "from": source,
            "pos": [row["pos"] for row in rows], "changed": [i for i, (a, b) in enumerate(zip(tokens, new)) if a != b],
            "removed": []}


def apply(text: str, steps: list[str] | tuple[str, ...]) -> dict:
    """Apply the chosen steps in the fixed order of STEPS: {"stages": every stage with its tokens, what
    changed or was removed, and counts of tokens and distinct tokens (types)}. The lemmatizer's stage reads the
    stage before stemming (named in its `from`) and gives each word's part of speech (`pos`)."""
    unknown = set(steps) - set(STEPS)
    if unknown:
        raise ValueError(f"unknown normalisation step(s) {sorted(map(str, unknown))}; choose from {', '.join(STEPS)}")
    tokens = words(text)
    stages = [{"step": "original", "label": "Original", "tokens": tokens, "changed": [], "removed": []}]
    unstemmed = stages[0]
    for step in (s for s in STEPS if s in steps):
        if step == "lemmatize":
            stages.append(_lemmatized(unstemmed["tokens"], unstemmed["step"]))
            continue
        if step == "lowercase":
            new = [t.lower() for t in tokens]
        elif step == "stem":
            new = [stem(t) for t in tokens]
        else:
            drop = is_punctuation if step == "punctuation" else (lambda t: t.lower().replace("’", "'") in STOP_WORDS)
            removed = [t for t in tokens if drop(t)]
            tokens = [t for t in tokens if not drop(t)]
            stages.append({"step": step, "label": STEP_LABELS[step], "tokens": tokens, "changed": [],
                           "removed": removed})
            unstemmed = stages[-1]
            continue
        changed = [i for i, (a, b) in enumerate(zip(tokens, new)) if a != b]
        tokens = new
        stages.append({"step": step, "label": STEP_LABELS[step], "tokens": tokens, "changed": changed, "removed": []})
        if step != "stem":
            unstemmed = stages[-1]
    for stage in stages:
        stage["n_tokens"] = len(stage["tokens"])
        stage["n_types"] = len(set(stage["tokens"]))
    return {"stages": stages}


def stem_and_lemmatize(text: str, mode: str = "auto") -> dict:
    """The lecture's comparison: the text's words, lowercased and without punctuation, stemmed (Porter) and
    lemmatized (WordNet, each word's part of speech by `mode`: `auto` or one of n, v, a, r for every word).
    The `lemmatize` endpoint's JSON {mode, words, stems, lemmas, pos, rows: [{word, stem, pos, lemma, lemmas}]}."""
    tokens = [t.lower() for t in words(text) if not is_punctuation(t)]
    rows = lemmatize.lemmatize_words(tokens, mode)
    for row in rows:
        row["stem"] = stem(row["word"])
    return {"mode": mode, "words": tokens, "stems": [r["stem"] for r in rows], "lemmas": [r["lemma"] for r in rows],
            "pos": [r["pos"] for r in rows], "rows": rows}
