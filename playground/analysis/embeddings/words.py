"""Word spaces for the Embeddings tab: tables of word vectors, their neighbours and analogies, and the view
that places words in 2D or 3D.

- The spaces: our word2vec (playground/nets/word2vec.py, models/word2vec-english), our GloVe
  (playground/nets/glove.py, models/glove-english: the same words and corpus, vectors W + W̃), our FastText
  (playground/nets/fasttext.py, models/fasttext-english), the input token embeddings E_tok of all-MiniLM-L6-v2
  and of our own BERT, and the character embeddings of our GPT. A word a space does not have is reported by
  name; where the space has subword pieces its vector is built from them: FastText from its character
  n-grams, as it was trained (Bojanowski et al. 2017; the mean of the n-gram rows, as the paper's code), the
  others from the mean of their WordPiece pieces, or of their characters for the GPT.
- Neighbours by cosine; analogies a - b + c with the 3CosAdd rule of Mikolov et al. 2013a (the three
  question words excluded from the answers). The neighbour lists of the app's own words (presets, defaults,
  chips) leave out a reviewed list of slurs and vulgar words (unshown_neighbours.txt says why); what a user
  types is never filtered.

Models are loaded once and only read; the spaces are cached per process, never user state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable, Collection

import numpy as np

from playground.analysis import models
from playground.analysis.embeddings import EmbeddingError
from playground.analysis.embeddings.encoders import Encoder, encoder
from playground.analysis.embeddings.projection import Settings, project
from playground.nets import fasttext

WORD2VEC = "word2vec-english"
GLOVE = "glove-english"
FASTTEXT = "fasttext-english"
MAX_WORDS = 10_000          # points in one projection (WebGL scatter stays interactive)
MAX_NEIGHBOUR_WORDS = 20    # the neighbours table covers the first 20 words (each is a scan of the vocabulary)
K_NEIGHBOURS = 8
MAX_NGRAM_WORD = 100        # FastText composes words up to this many characters; longer ones are left out, named
UNSHOWN_FILE = Path(__file__).with_name("unshown_neighbours.txt")


# ---------------------------------------------------------------------------------------------
# Word spaces


@dataclass
class WordSpace:
    """A table of word vectors the tab can show, loaded once and read-only."""

    key: str                          # name in the API
    vocab: dict[str, int]             # word -> row of `vectors`
    vectors: np.ndarray               # (V, d) float32
    candidates: np.ndarray            # rows that may be answers (neighbours, analogies): whole words
    compose: Callable[[str], tuple[list[str], np.ndarray] | None] | None = None  # word -> (pieces, vector)
    lowercase: bool = True
    pieces: str = "pieces"            # what compose builds from: "pieces" (their mean) or "n-grams" (FastText)
    _inverse: dict[int, str] | None = field(default=None, repr=False)
    _answers: np.ndarray | None = field(default=None, repr=False)

    @property
    def dim(self) -> int:
        return self.vectors.shape[1]

    def unit(self, rows) -> np.ndarray:
        """(len(rows), d) those rows scaled to length 1. The whole table is never kept scaled: it would be a second
        copy of every row (45 MB for MiniLM's), where only the candidates' (`answers`) are read often."""
        return unit_rows(self.vectors[rows])

    @property
    def answers(self) -> np.ndarray:
        """(n_candidates, d) the unit rows of `candidates` (computed once: indexing them copied the table for every
        neighbour list, 64 copies of it for one plot)."""
        if self._answers is None:
            self._answers = self.unit(self.candidates)
        return self._answers

    @property
    def inverse(self) -> dict[int, str]:
        """row -> word (computed once)."""
        if self._inverse is None:
            self._inverse = {i: w for w, i in self.vocab.items()}
        return self._inverse


def unit_rows(X: np.ndarray) -> np.ndarray:
    return (X / np.linalg.norm(X, axis=1, keepdims=True).clip(min=1e-12)).astype(np.float32, copy=False)


def _whole_word_space(key: str, name: str) -> WordSpace | None:
    """A table with one vector per word of a word-level vocabulary (word2vec, GloVe): no subwords, so an
    unknown word stays unknown. None when the checkpoint is not shipped (`name`: a registry id, or a folder's path)."""
    ckpt = models.find(name)
    if ckpt is None:
        return None
    vocab = {w: i for w, i in ckpt.tokenizer.get_vocab().items() if i != 0}  # [UNK] (row 0) is not a word
    vectors = ckpt.model.vectors().numpy()
    return WordSpace(key, vocab, vectors, np.array(sorted(vocab.values())), None, True)


@lru_cache(maxsize=None)
def word2vec_space(name: str = WORD2VEC) -> WordSpace | None:
    """Our word2vec: its input vectors v_w, one per word of its vocabulary."""
    return _whole_word_space("word2vec", name)


@lru_cache(maxsize=None)
def glove_space(name: str = GLOVE) -> WordSpace | None:
    """Our GloVe: W + W̃ (Pennington et al. 2014, §4.2), one vector per word of its vocabulary (word2vec's)."""
    return _whole_word_space("glove", name)


@lru_cache(maxsize=None)
def fasttext_space(name: str = FASTTEXT) -> WordSpace | None:
    """Our FastText: each vocabulary word's vector u_w (its own row and its n-grams' rows, averaged); any other
    string is composed from its character n-grams alone, and the n-grams are reported."""
    ckpt = models.find(name)
    if ckpt is None:
        return None
    model = ckpt.model
    vocab = {w: i for w, i in ckpt.tokenizer.get_vocab().items() if i != 0}  # [UNK] (row 0) is not a word
    words = [""] * model.config.vocab_size
    for w, i in vocab.items():
        words[i] = w
    vectors = model.vectors(words).numpy()                          # (V, d) u_w of every vocabulary word

    def compose(word: str):
        if len(word) > MAX_NGRAM_WORD:   # ~4 n-grams per character, each hashed in Python: a pasted blob is no word
            return None
        grams, rows = model.ngrams(word)
        if not rows:       # no n-gram in range (only the empty string): the zero vector would point nowhere
            return None
        return grams, model.word_vector(word).numpy()

    return WordSpace("fasttext", vocab, vectors, np.array(sorted(vocab.values())), compose, True, "n-grams")


def shared_ngrams(typo: str, word: str, minn: int = 3, maxn: int = 6) -> tuple[int, int]:
    """How many of `typo`'s character n-grams `word` has too, and how many `typo` has: FastText builds an unseen
    word's vector from its n-grams alone, so a typo that keeps most of them lands near its word."""
    grams, theirs = fasttext.char_ngrams(typo, minn, maxn), set(fasttext.char_ngrams(word, minn, maxn))
    return sum(g in theirs for g in grams), len(grams)


def composed_text(space: WordSpace, word: str, pieces: list[str], limit: int = 12) -> str:
    """How a composed word reads in a notice: "‹strawbery› from 30 n-grams: <st, str, ..." for FastText,
    "unbelievably = mean(un ##bel ##ie ##vably)" for the spaces that average pieces."""
    if space.pieces == "n-grams":
        more = f", … (+{len(pieces) - limit})" if len(pieces) > limit else ""
        return f"‹{word}› from {len(pieces)} n-grams: {', '.join(pieces[:limit])}{more}"
    return f"{word} = mean({' '.join(pieces)})"


def _wordpiece_space(key: str, m: Encoder) -> WordSpace:
    """A BERT's input token embeddings E_tok (before any position, segment or layer): one vector per
    WordPiece token; a word that is not one token gets the mean of its pieces' vectors."""
    E = m.model.embeddings.tok.weight.detach().numpy()             # (V, C), read-only view
    vocab = m.tokenizer.get_vocab()
    whole = np.array(sorted(i for t, i in vocab.items() if t.isalpha() and t.isascii() and len(t) > 1))

    def compose(word: str):
        ids = m.tokenizer.encode(word, add_special_tokens=False).ids
        if not ids:
            return None
        return [m.tokenizer.id_to_token(i) for i in ids], E[ids].mean(0)

    return WordSpace(key, vocab, E, whole, compose, True)


@lru_cache(maxsize=None)
def minilm_space() -> WordSpace:
    """all-MiniLM-L6-v2's input token embeddings (30,522 WordPiece tokens × 384), from the encoder the
    Attention tab loaded."""
    return _wordpiece_space("minilm", encoder("minilm"))


@lru_cache(maxsize=None)
def bert_space() -> WordSpace | None:
    """Our small BERT's input token embeddings (pre-trained here from scratch, its own WordPiece vocabulary),
    when its checkpoint is shipped."""
    m = encoder("bert")
    return None if m is None else _wordpiece_space("bert", m)


@lru_cache(maxsize=None)
def gpt_space(name: str = "gpt-shakespeare") -> WordSpace | None:
    """Our character-level GPT's token embedding: one vector per character. A word is the mean of its
    characters' vectors, a bag of characters ('dog' and 'god' coincide): only meaningful for comparing."""
    ckpt = models.find(name)
    if ckpt is None:
        return None
    E = ckpt.model.transformer.wte.weight.detach().numpy() if hasattr(ckpt.model, "transformer") else None
    if E is None:
        return None
    vocab = ckpt.tokenizer.get_vocab()
    letters = np.array(sorted(i for t, i in vocab.items() if len(t) == 1 and t.isalpha()))

    def compose(word: str):
        ids = [vocab[ch] for ch in word if ch in vocab]
        if not ids:
            return None
        return list(word), E[ids].mean(0)

    return WordSpace("gpt", vocab, E, letters, compose, False)


SPACE_MODELS = {"word2vec": WORD2VEC, "glove": GLOVE, "fasttext": FASTTEXT, "minilm": models.MINILM,
                "bert": "bert-english", "gpt": "gpt-shakespeare"}   # each space's model: its id in the registry
_LOADERS = {"word2vec": word2vec_space, "glove": glove_space, "fasttext": fasttext_space, "minilm": minilm_space,
            "bert": bert_space,
            "gpt": gpt_space}


def space_keys() -> list[str]:
    """The spaces this installation can offer, without loading any (a whole shipped checkpoint counts)."""
    return [key for key, name in SPACE_MODELS.items() if models.resolve(name) is not None]


def space(key: str) -> WordSpace | None:
    """The word space of that key (loaded on first use), or None when unknown or not shipped."""
    return _LOADERS[key]() if key in _LOADERS else None


@dataclass
class Lookup:
    words: list[str]                       # the words that have a vector, in input order, deduplicated
    vectors: np.ndarray                    # (n, d)
    composed: dict[str, list[str]]         # word -> the pieces its vector was built from
    unknown: list[str]                     # words with no vector at all
    duplicates: list[str]                  # words given more than once (kept once)


def lookup(space: WordSpace, words: list[str]) -> Lookup:
    """The vectors of `words` in `space`: a word of the vocabulary directly, else composed from its pieces
    when the space can, else reported unknown."""
    seen, out, rows, composed, unknown, dup = set(), [], [], {}, [], []
    for raw in words:
        word = raw.strip()
        key = word.lower() if space.lowercase else word
        if not word:
            continue
        if key in seen:
            dup.append(word)
            continue
        seen.add(key)
        if key in space.vocab:
            out.append(key), rows.append(space.vectors[space.vocab[key]])
            continue
        built = space.compose(key) if space.compose else None
        if built is None:
            unknown.append(word)
            continue
        pieces, vec = built
        composed[key] = pieces
        out.append(key), rows.append(vec)
    vectors = np.stack(rows).astype(np.float32) if rows else np.zeros((0, space.dim), np.float32)
    return Lookup(out, vectors, composed, unknown, dup)


def neighbours(space: WordSpace, vector: np.ndarray, k: int = 10,
               exclude: tuple[str, ...] = ()) -> list[tuple[str, float]]:
    """The k words whose vectors have the largest cosine with `vector`, best first, among the space's
    whole words (a vector of the vocabulary finds itself first, at 1.0)."""
    v = vector / max(float(np.linalg.norm(vector)), 1e-12)
    rows = space.candidates
    scores = space.answers @ v.astype(np.float32)                   # (n_candidates,)
    banned = {space.vocab[w] for w in exclude if w in space.vocab}
    take = min(len(rows), k + len(banned))
    top = np.argpartition(-scores, take - 1)[:take] if take < len(rows) else np.arange(len(rows))
    top = top[np.argsort(-scores[top], kind="stable")]
    out = [(space.inverse[int(rows[i])], float(scores[i])) for i in top if int(rows[i]) not in banned]
    return out[:k]


@lru_cache(maxsize=None)
def unshown() -> frozenset[str]:
    """The reviewed slurs and vulgar words that the neighbour lists of the app's own words leave out (the
    file's header says what it is for and what it never does)."""
    lines = (line.split("#", 1)[0].strip().lower() for line in UNSHOWN_FILE.read_text(encoding="utf-8").splitlines())
    return frozenset(line for line in lines if line)


def neighbour_rows(space: WordSpace, words: list[str], vectors: np.ndarray, given: Collection[str],
                   shipped: Collection[str], k: int = K_NEIGHBOURS) -> list[dict]:
    """[{word, neighbours: [[word, cosine], ...]}] for each word. The lists of `shipped` words (the app's
    presets, defaults and chips) leave out unshown(): nobody asked for a slur next to *lion*. A listed word
    the user gave (in `given`) is theirs to see, and a word the user brought has its list unfiltered."""
    hidden = tuple(unshown() - set(given))
    return [{"word": w, "neighbours": [[n, round(s, 4)] for n, s in
                                       neighbours(space, v, k, exclude=hidden if w in shipped else ())]}
            for w, v in zip(words, vectors)]


def preset_words() -> frozenset[str]:
    """Every word of the presets: the app's own words, whose neighbour lists are filtered."""
    return frozenset(w for group in PRESETS.values() for w in group)


def analogy(space: WordSpace, a: str, b: str, c: str, notices: list[str], k: int = 5) -> dict:
    """a - b + c (king - man + woman): the k words nearest by cosine to unit(a) - unit(b) + unit(c), the
    three inputs excluded (3CosAdd, Mikolov et al. 2013a). Unknown inputs are named, not guessed: they
    raise EmbeddingError, as do three words that are not all different."""
    found = lookup(space, [a, b, c])
    if found.unknown:
        raise EmbeddingError(f"Not in {space.key}'s vocabulary: {', '.join(found.unknown)}.")
    if len(found.words) < 3:
        raise EmbeddingError("The three words must be different.")
    if found.composed:
        notices.append(f"Built from {space.pieces}: " + "; ".join(composed_text(space, w, p)
                                                                 for w, p in found.composed.items()))
    ua, ub, uc = unit_rows(found.vectors)
    answers = neighbours(space, ua - ub + uc, k, exclude=tuple(found.words))
    return {"source": space.key, "query": found.words, "unknown": [], "composed": found.composed,
            "answers": [{"word": w, "score": round(s, 4)} for w, s in answers]}


# ---------------------------------------------------------------------------------------------
# The word-space view


@dataclass
class WordView:
    data: dict                  # the endpoint's JSON
    words: list[str]            # the words shown, as the space spells them, in input order
    groups: list[str]           # each word's set (its colour)
    coords: np.ndarray          # (n, dims) the projection
    vectors: np.ndarray         # (n, d) the words' vectors
    notes: dict[str, str]       # word -> what its hover says about it (built from pieces)
    neighbours: list[dict]      # [{word, neighbours: [[word, cosine], ...]}] for at most MAX_NEIGHBOUR_WORDS


def view(space: WordSpace, given: list[str], groups: list[str], method: str, dims: int, notices: list[str],
         progress: Callable[[float, str], None] | None = None, settings: Settings | None = None,
         shipped: Collection[str] | None = None, first: Collection[str] = ()) -> WordView:
    """The given words (each in its set) placed in 2D or 3D by `method`, and the nearest neighbours of
    MAX_NEIGHBOUR_WORDS of them: the words of the sets named in `first` (the word selected in the sentence),
    then the others in order. The neighbour lists of `shipped` words (default: the presets') leave out the
    unshown() list (neighbour_rows). Unknown and repeated words are left out with a notice; fewer than three
    known words raise EmbeddingError."""
    found = lookup(space, given)
    _lookup_notices(found, space, notices)
    if len(found.words) < 3:
        raise EmbeddingError(f"A projection needs at least three different known words; {len(found.words)} of "
                             f"these ({', '.join(found.words) or 'none'}) have a vector in {space.key}.")
    group_of = {}
    for w, g in zip(given, groups):
        group_of.setdefault(w.strip().lower() if space.lowercase else w.strip(), g)
    word_groups = [group_of.get(w, "your words") for w in found.words]
    try:
        Y, info = project(found.vectors, method, dims, cache_key=(space.key, tuple(found.words)), progress=progress,
                          settings=settings)
    except RuntimeError as err:  # UMAP on too few points
        raise EmbeddingError(str(err)) from None
    # the selected word's row first: at the end of a long list it was never among the first rows
    rows = sorted(range(len(found.words)), key=lambda i: word_groups[i] not in first)[:MAX_NEIGHBOUR_WORDS]
    nb = neighbour_rows(space, [found.words[i] for i in rows], found.vectors[rows], found.words,
                        preset_words() if shipped is None else shipped)
    axes = ("x", "y", "z")[:dims]
    points = [{"word": w, "set": g, **{a: round(float(c), 5) for a, c in zip(axes, row)}}
              for w, g, row in zip(found.words, word_groups, Y)]
    data = {"source": space.key, "method": method, "dims": dims, "projection": info, "points": points,
            "neighbours": {r["word"]: r["neighbours"] for r in nb}, "unknown": found.unknown,
            "composed": found.composed, "duplicates": sorted(set(found.duplicates)), "notices": notices}
    notes = {w: (f"from {len(p)} n-grams: {' '.join(p)}" if space.pieces == "n-grams" else f"from pieces {' '.join(p)}")
             for w, p in found.composed.items()}
    return WordView(data, found.words, word_groups, Y, found.vectors, notes, nb)


def _lookup_notices(found: Lookup, space: WordSpace, notices: list[str]) -> None:
    if found.duplicates:
        notices.append(f"Given more than once (shown once): {', '.join(sorted(set(found.duplicates))[:20])}.")
    if found.unknown:
        more = f" and {len(found.unknown) - 30:,} more" if len(found.unknown) > 30 else ""
        notices.append(f"Not in {space.key}'s vocabulary, left out: {', '.join(found.unknown[:30])}{more}"
                       + (f" ({space.key} has one vector per word it saw in training and nothing for the others)."
                          if space.key in ("word2vec", "glove") else "."))
    if found.composed:
        shown = "; ".join(composed_text(space, w, p) for w, p in list(found.composed.items())[:8])
        if space.pieces == "n-grams":
            notices.append(f"Not in {space.key}'s vocabulary, built from their character n-grams (the mean of "
                           f"their rows): {shown}.")
        else:
            notices.append(f"Not single tokens of {space.key}, built from their pieces as FastText does: {shown}.")


# ---------------------------------------------------------------------------------------------
# Presets

PRESETS: dict[str, list[str]] = {
    "animals": ["dog", "cat", "horse", "cow", "sheep", "lion", "wolf", "bear", "fox", "mouse", "eagle", "goat",
                "pig", "deer", "snake", "bird"],
    "countries": ["france", "england", "italy", "spain", "germany", "egypt", "greece", "russia", "china", "japan",
                  "india", "ireland", "scotland", "israel", "persia", "rome"],
    "numbers": ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "hundred",
                "thousand", "twenty", "twelve", "forty"],
    "verbs": ["go", "went", "come", "came", "see", "saw", "take", "took", "give", "gave", "speak", "spoke",
              "write", "wrote", "run", "ran"],
    "family": ["father", "mother", "son", "daughter", "brother", "sister", "husband", "wife", "uncle", "aunt",
               "king", "queen", "prince", "princess", "man", "woman"],
    "colours": ["red", "blue", "green", "yellow", "white", "black", "purple", "brown", "grey", "scarlet"],
    "computing": ["computer", "program", "file", "software", "hacker", "unix", "memory", "code", "bug", "network",
                  "data", "system"],
    "emotions": ["joy", "sorrow", "anger", "fear", "love", "hate", "grief", "happy", "sad", "glad", "angry"],
}
