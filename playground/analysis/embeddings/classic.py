"""The classic sparse representations the dense vectors replaced: one-hot, bag of words and TF-IDF (Salton &
Buckley 1988; the smoothed idf of scikit-learn), over the sentences' own vocabulary, and what they miss."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from playground.analysis.embeddings import EmbeddingError
from playground.text import words as text_words


def words_of(sentence: str) -> list[str]:
    """Lowercased words (punctuation dropped)."""
    return [word.lower() for _, _, word in text_words(sentence)]


def representations(sentences: list[str]) -> dict:
    """One-hot, bag-of-words and TF-IDF for a list of sentences over their own vocabulary.

    bag of words: x[s, w] = count of w in s;  one-hot: one row per token, a 1 in its word's column;
    TF-IDF: tf(s, w) * idf(w) with idf(w) = ln((1 + n) / (1 + df(w))) + 1 (smoothed, as scikit-learn),
    each row L2-normalised. All three ignore word order, and give synonyms nothing in common."""
    tokens = [words_of(s) for s in sentences]
    vocab = sorted({w for ts in tokens for w in ts})
    col = {w: j for j, w in enumerate(vocab)}
    n = len(sentences)
    bow = np.zeros((n, len(vocab)), dtype=np.int64)
    for i, ts in enumerate(tokens):
        for w, c in Counter(ts).items():
            bow[i, col[w]] = c
    df = (bow > 0).sum(0)
    idf = np.log((1 + n) / (1 + df)) + 1.0
    tfidf = bow * idf
    norms = np.linalg.norm(tfidf, axis=1, keepdims=True)
    tfidf = np.divide(tfidf, norms, out=np.zeros_like(tfidf, dtype=np.float64), where=norms > 0)
    one_hot = [[[1 if col[w] == j else 0 for j in range(len(vocab))] for w in ts] for ts in tokens]
    return {"vocabulary": vocab, "tokens": tokens, "bag_of_words": bow, "idf": idf, "tfidf": tfidf,
            "one_hot": one_hot}


@dataclass
class ClassicView:
    data: dict                          # the endpoint's JSON
    arrays: dict                        # representations(): unrounded, for the tables
    same_bag: list[tuple[int, int]]     # pairs of sentences (from 1) with the same bag of words: order is lost
    disjoint: list[tuple[int, int]]     # pairs that share no word: count vectors with cosine 0


def view(sentences: list[str]) -> ClassicView:
    """The three representations of the sentences and the pairs that show what they miss; sentences without
    a word (letters or digits) to count raise EmbeddingError."""
    r = representations(sentences)
    if not r["vocabulary"]:
        raise EmbeddingError("These sentences have no words (letters or digits) to count.")
    bow, n = r["bag_of_words"], len(sentences)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    same_bag = [(i + 1, j + 1) for i, j in pairs if bow[i].any() and (bow[i] == bow[j]).all()]
    disjoint = [(i + 1, j + 1) for i, j in pairs if not np.minimum(bow[i], bow[j]).any()]
    data = {"sentences": sentences, "vocabulary": r["vocabulary"], "tokens": r["tokens"],
            "bag_of_words": bow.tolist(), "idf": np.round(r["idf"], 5).tolist(),
            "tfidf": np.round(r["tfidf"], 5).tolist(), "one_hot_sentence_1": r["one_hot"][0]}
    return ClassicView(data, r, same_bag, disjoint)
