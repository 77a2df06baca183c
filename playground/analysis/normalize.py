"""Classic text normalisation before tokenization, one step at a time.

The preprocessing of count-based NLP (bag of words, TF-IDF): lowercase, drop punctuation, drop stop
words, stem with Porter's algorithm (Porter 1980). Each step is shown on its own so a user sees what
it merges (Cat/cat), what it loses (negation in "not", the sense of "US" vs "us") and why subword
tokenizers of neural models mostly skip it.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

from playground.text import words as text_words

STEPS = ("lowercase", "punctuation", "stopwords", "stem")
STEP_LABELS = {
    "lowercase": "Lowercase",
    "punctuation": "Remove punctuation",
    "stopwords": "Remove stop words",
    "stem": "Porter stemming",
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


@lru_cache(maxsize=1)
def _porter():
    import snowballstemmer

    return snowballstemmer.stemmer("porter")  # Porter's original 1980 algorithm


def stem(word: str) -> str:
    return _porter().stemWord(word)


def apply(text: str, steps: list[str] | tuple[str, ...]) -> dict:
    """Apply the chosen steps in the fixed order of STEPS: {"stages": every stage with its tokens, what
    changed or was removed, and counts of tokens and distinct tokens (types)}."""
    unknown = set(steps) - set(STEPS)
    if unknown:
        raise ValueError(f"unknown normalisation step(s) {sorted(map(str, unknown))}; choose from {', '.join(STEPS)}")
    tokens = words(text)
    stages = [{"step": "original", "label": "Original", "tokens": tokens, "changed": [], "removed": []}]
    for step in (s for s in STEPS if s in steps):
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
            continue
        changed = [i for i, (a, b) in enumerate(zip(tokens, new)) if a != b]
        tokens = new
        stages.append({"step": step, "label": STEP_LABELS[step], "tokens": tokens, "changed": changed, "removed": []})
    for stage in stages:
        stage["n_tokens"] = len(stage["tokens"])
        stage["n_types"] = len(set(stage["tokens"]))
    return {"stages": stages}
