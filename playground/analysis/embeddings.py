"""Embeddings for the Embeddings tab: word vectors in space, contextual vectors, sentence vectors, and the
classic sparse representations they replaced. Text in, numpy out; no gradio, no plotly.

- Word spaces: our word2vec (playground/word2vec.py, models/word2vec-english), the input token
  embeddings of all-MiniLM-L6-v2 (E_tok of a BERT), and the character embeddings of our GPT. A word a
  space does not have is reported by name; where the space has subword pieces its vector is built from
  them, as FastText does (Bojanowski et al. 2017: a word is the sum of its n-gram vectors; here the
  mean of its WordPiece pieces, or of its characters for the GPT).
- Neighbours by cosine; analogies a - b + c with the 3CosAdd rule of Mikolov et al. 2013a (the three
  question words excluded from the answers).
- Projections to 2D/3D: PCA (an SVD of the centred matrix), t-SNE (van der Maaten & Hinton 2008, from
  scikit-learn), UMAP (McInnes et al. 2018) when `umap-learn` is installed.
- Contextual embeddings: a word's hidden state at a chosen layer of MiniLM in several sentences.
- Sentence embeddings: SBERT (Reimers & Gurevych 2019): a pooling of the last layer's token states
  (mean over the real tokens, max, or the [CLS] state), then L2-normalised as all-MiniLM-L6-v2's
  Normalize module does. For MiniLM, ours runs our BERT encoder with MiniLM's weights (the one the
  Attention tab loaded) and pools by hand; `sentence_transformers_embed` asks the sentence-transformers
  library itself (the tests check the two agree). Our own BERT (models/bert-english) is made a real
  `sentence_transformers.SentenceTransformer` in code (`sentence_transformer(name, pooling)`: our
  encoder as the first module, then the library's Pooling and Normalize), and the app embeds with it.
- One-hot, bag of words and TF-IDF (Salton & Buckley 1988; the smoothed idf of scikit-learn).

Models are loaded once and only read, under torch.inference_mode(); caches hold results, never user state.
"""

from __future__ import annotations

import os
import re
import threading
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable

import numpy as np
import torch

from playground import checkpoints
from playground.text import words as text_words

WORD2VEC = "word2vec-english"
MAX_WORDS = 10_000          # points in one projection (WebGL scatter stays interactive)
MAX_SENTENCE_TOKENS = 256   # all-MiniLM-L6-v2's max_seq_length (sentence_bert_config.json)
POOLINGS = ("mean", "max", "cls")
METHODS = ("pca", "tsne", "umap")


# ---------------------------------------------------------------------------------------------
# Word spaces


@dataclass
class WordSpace:
    """A table of word vectors the tab can show, loaded once and read-only."""

    key: str                          # name in the API
    label: str                        # what the UI shows
    vocab: dict[str, int]             # word -> row of `vectors`
    vectors: np.ndarray               # (V, d) float32
    candidates: np.ndarray            # rows that may be answers (neighbours, analogies): whole words
    compose: Callable[[str], tuple[list[str], np.ndarray] | None] | None = None  # word -> (pieces, vector)
    lowercase: bool = True
    note: str = ""                    # how words are looked up, shown in the UI
    _unit: np.ndarray | None = field(default=None, repr=False)

    @property
    def dim(self) -> int:
        return self.vectors.shape[1]

    @property
    def unit(self) -> np.ndarray:
        """(V, d) rows scaled to length 1 (computed once)."""
        if self._unit is None:
            self._unit = unit_rows(self.vectors)
        return self._unit


def unit_rows(X: np.ndarray) -> np.ndarray:
    return (X / np.linalg.norm(X, axis=1, keepdims=True).clip(min=1e-12)).astype(np.float32)


@lru_cache(maxsize=None)
def word2vec_space(name: str = WORD2VEC) -> WordSpace | None:
    """Our word2vec: one vector per word of its vocabulary; no subwords, so an unknown word stays unknown."""
    try:
        ckpt = checkpoints.shared(name)
    except FileNotFoundError:
        return None
    vocab = {w: i for w, i in ckpt.tokenizer.get_vocab().items() if i != 0}  # [UNK] (row 0) is not a word
    vectors = ckpt.model.vectors().numpy()
    c = ckpt.config
    return WordSpace("word2vec", f"our word2vec ({name}: {c.architecture}, {len(vocab):,} words × {c.dim})", vocab,
                     vectors, np.array(sorted(vocab.values())), None, True,
                     "lowercased whole words; a word outside the vocabulary has no vector (word2vec has no subwords)")


def _minilm():
    """The MiniLM encoder the Attention tab loaded (playground.analysis.attention.load_minilm is cached): shared, read-only."""
    from playground.analysis import attention

    return attention.load_minilm()


@lru_cache(maxsize=None)
def minilm_space() -> WordSpace:
    """all-MiniLM-L6-v2's input token embeddings E_tok (30,522 WordPiece tokens × 384) before any
    position, segment or layer: a word that is not one token gets the mean of its pieces' vectors."""
    m = _minilm()
    E = m.model.embeddings.tok.weight.detach().numpy()             # (30522, 384), read-only view
    vocab = m.tokenizer.get_vocab()
    whole = np.array(sorted(i for t, i in vocab.items() if t.isalpha() and t.isascii() and len(t) > 1))

    def compose(word: str):
        ids = m.tokenizer.encode(word, add_special_tokens=False).ids
        if not ids:
            return None
        return [m.tokenizer.id_to_token(i) for i in ids], E[ids].mean(0)

    return WordSpace("minilm", "MiniLM input embeddings (all-MiniLM-L6-v2 E_tok: 30,522 WordPiece tokens × 384)",
                     vocab, E, whole, compose, True,
                     "lowercased WordPiece tokens; a word that is several pieces gets the mean of their vectors")


@lru_cache(maxsize=None)
def gpt_space(name: str = "gpt-shakespeare") -> WordSpace | None:
    """Our character-level GPT's token embedding: one vector per character. A word is the mean of its
    characters' vectors, a bag of characters ('dog' and 'god' coincide): only meaningful for comparing."""
    try:
        ckpt = checkpoints.shared(name)
    except FileNotFoundError:
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

    return WordSpace("gpt", f"our GPT's character embeddings ({name}: {len(vocab)} characters × {E.shape[1]})",
                     vocab, E, letters, compose, False,
                     "characters; a word is the mean of its characters' vectors (word order is lost)")


@lru_cache(maxsize=None)
def bert_space(name: str = "bert-english") -> WordSpace | None:
    """Our small BERT's input token embeddings (pre-trained here from scratch, its own WordPiece vocabulary),
    when its checkpoint is shipped; a word of several pieces gets their mean, as for MiniLM."""
    try:
        ckpt = checkpoints.shared(name)
        E = ckpt.model.bert.embeddings.tok.weight.detach().numpy()
    except Exception:  # not trained yet, or another layout: the tab lists the other spaces
        return None
    tok = ckpt.tokenizer
    vocab = tok.get_vocab()
    whole = np.array(sorted(i for t, i in vocab.items() if t.isalpha() and t.isascii() and len(t) > 1))

    def compose(word: str):
        ids = tok.encode(word, add_special_tokens=False).ids
        if not ids:
            return None
        return [tok.id_to_token(i) for i in ids], E[ids].mean(0)

    return WordSpace("bert", f"our BERT's input embeddings ({name}: {len(vocab):,} WordPiece tokens × {E.shape[1]})",
                     vocab, E, whole, compose, True,
                     "lowercased WordPiece tokens; a word that is several pieces gets the mean of their vectors")


SPACE_CHECKPOINTS = {"word2vec": WORD2VEC, "minilm": None, "bert": "bert-english", "gpt": "gpt-shakespeare"}


def space_keys() -> list[str]:
    """The spaces this installation can offer, without loading any (a checkpoint folder with a card counts)."""
    shipped = set(checkpoints.available())
    return [key for key, name in SPACE_CHECKPOINTS.items() if name is None or name in shipped]


def spaces() -> dict[str, WordSpace]:
    """Every word space available in this installation, word2vec first."""
    found = [word2vec_space(), minilm_space(), bert_space(), gpt_space()]
    return {s.key: s for s in found if s is not None}


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
    scores = space.unit[rows] @ v.astype(np.float32)                # (n_candidates,)
    inverse = _inverse_vocab(space)
    banned = {space.vocab[w] for w in exclude if w in space.vocab}
    take = min(len(rows), k + len(banned))
    top = np.argpartition(-scores, take - 1)[:take] if take < len(rows) else np.arange(len(rows))
    top = top[np.argsort(-scores[top], kind="stable")]
    out = [(inverse[int(rows[i])], float(scores[i])) for i in top if int(rows[i]) not in banned]
    return out[:k]


_INVERSE: dict[int, dict[int, str]] = {}
_INVERSE_LOCK = threading.Lock()


def _inverse_vocab(space: WordSpace) -> dict[int, str]:
    with _INVERSE_LOCK:
        inv = _INVERSE.get(id(space))
        if inv is None:
            inv = _INVERSE[id(space)] = {i: w for w, i in space.vocab.items()}
    return inv


def analogy(space: WordSpace, a: str, b: str, c: str, k: int = 5) -> dict:
    """a - b + c (king - man + woman): the k words nearest by cosine to unit(a) - unit(b) + unit(c), the
    three inputs excluded (3CosAdd, Mikolov et al. 2013a). Unknown inputs are named, not guessed."""
    found = lookup(space, [a, b, c])
    missing = found.unknown
    if missing or len(found.words) < 3:
        return {"query": [a, b, c], "unknown": missing, "answers": [],
                "note": "each word must be different and known" if not missing else ""}
    ua, ub, uc = unit_rows(found.vectors)
    target = ua - ub + uc
    answers = neighbours(space, target, k, exclude=tuple(found.words))
    return {"query": found.words, "unknown": [], "composed": found.composed,
            "answers": [{"word": w, "score": round(s, 4)} for w, s in answers]}


# ---------------------------------------------------------------------------------------------
# Projections


def umap_available() -> bool:
    try:
        import importlib.util

        return importlib.util.find_spec("umap") is not None
    except (ImportError, ValueError):
        return False


def pca(X: np.ndarray, dims: int) -> tuple[np.ndarray, np.ndarray]:
    """Principal components by SVD of the centred matrix: X - mean = U S V^T, coordinates = U S (the first
    `dims` columns). Returns (n, dims) and the share of variance each component explains."""
    Xc = X.astype(np.float64) - X.mean(0, keepdims=True)             # (n, d)
    if len(X) > 3 * X.shape[1]:  # tall: the d x d covariance's eigenvectors are V, cheaper than the full SVD
        cov = Xc.T @ Xc                                              # (d, d)
        evals, evecs = np.linalg.eigh(cov)
        order = np.argsort(evals)[::-1]
        evals, evecs = evals[order].clip(min=0), evecs[:, order]
        Y = Xc @ evecs[:, :dims]
        var = evals
    else:
        U, S, Vt = np.linalg.svd(Xc, full_matrices=False)
        Y = U[:, :dims] * S[:dims]
        var = S ** 2
    ratio = var[:dims] / max(float(var.sum()), 1e-30)
    if Y.shape[1] < dims:  # fewer components than asked (n or d too small): pad with zeros
        Y = np.pad(Y, ((0, 0), (0, dims - Y.shape[1])))
        ratio = np.pad(ratio, (0, dims - len(ratio)))
    # a component's sign is arbitrary: make each one's largest coordinate positive, so reruns agree
    signs = np.sign(Y[np.abs(Y).argmax(0), np.arange(dims)])
    return (Y * np.where(signs == 0, 1, signs)).astype(np.float32), ratio.astype(np.float32)


_PROJECTION_CACHE: OrderedDict = OrderedDict()
_PROJECTION_LOCK = threading.Lock()


def project(X: np.ndarray, method: str = "pca", dims: int = 2, seed: int = 0, cache_key: tuple | None = None,
            progress: Callable[[float, str], None] | None = None) -> tuple[np.ndarray, dict]:
    """(n, d) -> (n, dims) with PCA, t-SNE or UMAP. Returns the coordinates and what the method reports
    (explained variance for PCA; perplexity, KL divergence for t-SNE). With a cache_key, t-SNE and UMAP
    results are kept (the presets are computed once per process)."""
    assert method in METHODS, f"method must be one of {METHODS}, not {method!r}"
    assert dims in (2, 3), f"dims must be 2 or 3, not {dims}"
    n = len(X)
    assert n >= 3, f"a projection needs at least 3 points, not {n}"
    key = None if cache_key is None or method == "pca" else (cache_key, method, dims, seed, n)
    if key is not None:
        with _PROJECTION_LOCK:
            if key in _PROJECTION_CACHE:
                _PROJECTION_CACHE.move_to_end(key)
                Y, info = _PROJECTION_CACHE[key]
                return Y, {**info, "cached": True}
    if method == "pca":
        Y, ratio = pca(X, dims)
        return Y, {"method": "pca", "explained_variance_ratio": [round(float(r), 4) for r in ratio]}
    if progress:
        progress(0.1, f"{method} of {n} points")
    if method == "tsne":
        from sklearn.manifold import TSNE

        perplexity = float(min(30.0, max(2.0, (n - 1) / 3)))   # must stay below n; 5-50 is the usual range
        tsne = TSNE(n_components=dims, perplexity=perplexity, init="pca", random_state=seed, metric="cosine",
                    learning_rate="auto", max_iter=500 if n > 1000 else 1000)
        Y = tsne.fit_transform(X.astype(np.float32)).astype(np.float32)
        info = {"method": "tsne", "perplexity": perplexity, "kl_divergence": round(float(tsne.kl_divergence_), 4),
                "metric": "cosine"}
    else:
        if not umap_available():
            raise RuntimeError("UMAP needs the umap-learn package (pip install umap-learn); use PCA or t-SNE")
        if n < 6:
            raise RuntimeError(f"UMAP needs at least 6 points (it builds a neighbour graph), not {n}; use PCA")
        import warnings

        import umap

        reducer = umap.UMAP(n_components=dims, n_neighbors=int(min(15, n - 1)), metric="cosine", random_state=seed)
        with warnings.catch_warnings():  # "n_jobs overridden by random_state": seeded runs are single-threaded
            warnings.simplefilter("ignore", UserWarning)
            Y = reducer.fit_transform(X.astype(np.float32)).astype(np.float32)
        info = {"method": "umap", "n_neighbors": int(min(15, n - 1)), "metric": "cosine"}
    if progress:
        progress(1.0, "done")
    if key is not None:
        with _PROJECTION_LOCK:
            _PROJECTION_CACHE[key] = (Y, info)
            while len(_PROJECTION_CACHE) > 32:
                _PROJECTION_CACHE.popitem(last=False)
    return Y, {**info, "cached": False}


# ---------------------------------------------------------------------------------------------
# Contextual embeddings (MiniLM)


def word_positions(offsets: list[tuple[int, int]], text: str, word: str) -> list[list[int]]:
    """For each occurrence of `word` (case-insensitive, whole word) in `text`: the token positions whose
    character spans fall inside it."""
    spans = [(m.start(), m.end()) for m in re.finditer(rf"(?<!\w){re.escape(word)}(?!\w)", text, flags=re.IGNORECASE)]
    out = []
    for s, e in spans:
        pos = [i for i, (a, b) in enumerate(offsets) if b > a and a >= s and b <= e]
        if pos:
            out.append(pos)
    return out


@dataclass(frozen=True)
class Encoder:
    """A BERT encoder the contextual and sentence views can run: shared, read-only."""

    key: str
    label: str
    model: torch.nn.Module      # bert.BertEncoder: forward(idx, token_type_ids, attention_mask, return_internals)
    tokenizer: object           # its WordPiece tokenizers.Tokenizer
    n_layer: int
    max_tokens: int             # positions the encoder has, [CLS] and [SEP] included (capped at 256)


ENCODERS = {"minilm": "all-MiniLM-L6-v2 (pretrained, 6 layers × 384)",
            "bert": "our BERT (bert-english, pre-trained here from scratch; not trained for sentence similarity)"}


def encoder(key: str = "minilm") -> Encoder | None:
    """MiniLM (the Attention tab's) or our BERT's encoder when its checkpoint is shipped; else None."""
    if key == "minilm":
        m = _minilm()
        return Encoder("minilm", ENCODERS["minilm"], m.model, m.tokenizer, m.n_layer,
                       min(MAX_SENTENCE_TOKENS, m.model.config.n_positions))
    if key == "bert":
        return _bert_encoder()
    return None


@lru_cache(maxsize=None)
def _bert_encoder(name: str = "bert-english") -> Encoder | None:
    try:
        ckpt = checkpoints.shared(name)
        model, c = ckpt.model.bert, ckpt.config
    except Exception:
        return None
    return Encoder("bert", ENCODERS["bert"], model, ckpt.tokenizer, c.n_layer, min(MAX_SENTENCE_TOKENS, c.n_positions))


def contextual(word: str, sentences: list[str], layer: int, model: str = "minilm") -> dict:
    """The vector of `word` in each sentence at `layer` of the encoder (0: the input embeddings after
    position and LayerNorm; n_layer: the last layer), the mean of its WordPiece pieces' states; the first
    occurrence in each sentence. Returns labels, vectors (n, C), the cosine matrix, and the sentences
    where the word does not occur."""
    m = encoder(model)
    assert m is not None, f"no encoder {model!r}"
    assert 0 <= layer <= m.n_layer, f"layer must lie in 0..{m.n_layer}"
    labels, vectors, missing = [], [], []
    for sentence in sentences:
        enc = m.tokenizer.encode(sentence, add_special_tokens=False)
        ids, offsets = enc.ids[: m.max_tokens - 2], enc.offsets[: m.max_tokens - 2]
        found = word_positions(offsets, sentence, word)
        if not found:
            missing.append(sentence)
            continue
        idx = torch.tensor([[m.tokenizer.token_to_id("[CLS]"), *ids, m.tokenizer.token_to_id("[SEP]")]])
        with torch.inference_mode():
            _, _, internals = m.model(idx, return_internals=True)
        h = internals["hidden_states"][layer][0]                       # (T, C)
        positions = [p + 1 for p in found[0]]                          # +1: [CLS] comes first
        vectors.append(h[positions].mean(0).numpy())
        labels.append(sentence)
    X = np.stack(vectors) if vectors else np.zeros((0, m.model.config.n_embd), np.float32)
    sim = unit_rows(X) @ unit_rows(X).T if len(X) else np.zeros((0, 0), np.float32)
    return {"word": word, "layer": layer, "sentences": labels, "vectors": X, "similarity": sim, "missing": missing}


# ---------------------------------------------------------------------------------------------
# Sentence embeddings (SBERT pooling)


def pool(h: torch.Tensor, mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """h (B, T, C) token states, mask (B, T) 1 for real tokens -> (B, C):
    mean: Σ_t m_t h_t / Σ_t m_t;  max: max over the real tokens of each dimension;  cls: h_0 ([CLS])."""
    assert pooling in POOLINGS, f"pooling must be one of {POOLINGS}, not {pooling!r}"
    m = mask.unsqueeze(-1).to(h.dtype)                                 # (B, T, 1)
    if pooling == "mean":
        return (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
    if pooling == "max":
        return h.masked_fill(m == 0, -1e9).max(1).values               # padding never wins (the library: -inf)
    return h[:, 0]


def encode_batch(tokenizer, sentences: list[str],
                 max_tokens: int = MAX_SENTENCE_TOKENS) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """[CLS] sentence [SEP], cut to max_tokens, padded with [PAD] (id 0): ids and mask (B, T), and how
    many tokens each sentence lost to the cut."""
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    rows, cut = [], []
    for enc in tokenizer.encode_batch(sentences, add_special_tokens=False):
        ids = enc.ids[: max_tokens - 2]
        cut.append(len(enc.ids) - len(ids))
        rows.append([cls, *ids, sep])
    T = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), T, dtype=torch.long)
    mask = torch.zeros(len(rows), T, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
        mask[i, : len(r)] = 1
    return ids, mask, cut


def sentence_embeddings(sentences: list[str], pooling: str = "mean", batch_size: int = 32,
                        model: str = "minilm") -> tuple[np.ndarray, list[int]]:
    """SBERT sentence vectors: the encoder's last layer, pooled, L2-normalised. (n, C) and the tokens cut
    from each sentence.

    minilm: our own pooling (`pool`) of our BERT encoder run with MiniLM's weights (no transformers
    import; the tests check it equals sentence-transformers' all-MiniLM-L6-v2). all-MiniLM-L6-v2 was
    trained with mean pooling; max and cls run the same encoder with another pooling (not trained for them).
    bert: our own BERT as a real `SentenceTransformer` (`sentence_transformer`), which imports
    sentence-transformers on its first use."""
    m = encoder(model)
    assert m is not None, f"no encoder {model!r}"
    if model == "bert":
        st = sentence_transformer("bert-english", pooling)
        X = st_encode(st, sentences, batch_size)
        cuts = [max(0, len(e.ids) - (m.max_tokens - 2))
                for e in m.tokenizer.encode_batch(sentences, add_special_tokens=False)] if sentences else []
        return X, cuts
    out, cuts = [], []
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))  # similar lengths pad less
    for s in range(0, len(order), batch_size):
        chunk = [sentences[i] for i in order[s : s + batch_size]]
        ids, mask, cut = encode_batch(m.tokenizer, chunk, m.max_tokens)
        with torch.inference_mode():
            h, _ = m.model(ids, attention_mask=mask)                   # (B, T, C)
            e = torch.nn.functional.normalize(pool(h, mask, pooling), dim=-1)
        out.append(e.numpy()), cuts.extend(cut)
    X = np.concatenate(out) if out else np.zeros((0, m.model.config.n_embd), np.float32)
    back = np.argsort(order)
    return X[back], [cuts[i] for i in back]


def _st_classes():
    """sentence-transformers' SentenceTransformer, Normalize, Pooling and Transformer, imported on first use
    (with transformers: ~3-5 s), never at app import; HF_HUB_OFFLINE=1 first: nothing comes from the hub."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    try:  # sentence-transformers >= 6
        from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    except ImportError:
        from sentence_transformers.models import Normalize, Pooling, Transformer
    return SentenceTransformer, Normalize, Pooling, Transformer


class BertTokenEmbeddings(torch.nn.Module):
    """Our `bert.BertEncoder` as the first module of a sentence-transformers pipeline (the place its
    `Transformer` module takes for a transformers model).

    preprocess (alias tokenize): texts -> {"input_ids": [CLS] text [SEP] padded with [PAD] (B, T),
    "attention_mask": m (B, T), 1 on real tokens}, each text cut to max_seq_length tokens.
    forward: adds "token_embeddings" = h_L (B, T, C), the encoder's last layer, to the features dict,
    which keeps "attention_mask" for the Pooling module that follows.

    A plain torch module (sentence-transformers calls a first module's `preprocess`, or `tokenize`, and
    `forward`), so defining it imports nothing; the encoder is shared with the other views, read-only."""

    def __init__(self, encoder: torch.nn.Module, tokenizer, max_seq_length: int = MAX_SENTENCE_TOKENS):
        super().__init__()
        self.encoder = encoder                                  # bert.BertEncoder
        self.tokenizer = tokenizer                              # its WordPiece tokenizers.Tokenizer
        self.max_seq_length = min(max_seq_length, encoder.config.n_positions)  # [CLS] and [SEP] included

    def preprocess(self, inputs: list[str], prompt: str | None = None, **kwargs) -> dict[str, torch.Tensor]:
        assert all(isinstance(t, str) for t in inputs), "this module embeds single texts, not pairs or images"
        ids, mask, _ = encode_batch(self.tokenizer, [(prompt or "") + t for t in inputs], self.max_seq_length)
        return {"input_ids": ids, "attention_mask": mask}

    tokenize = preprocess  # the name sentence-transformers < 6 calls

    def forward(self, features: dict[str, torch.Tensor], **kwargs) -> dict[str, torch.Tensor]:
        h, _ = self.encoder(features["input_ids"], features.get("token_type_ids"), features["attention_mask"])
        features["token_embeddings"] = h                        # (B, T, C)
        return features

    def get_word_embedding_dimension(self) -> int:
        return self.encoder.config.n_embd

    def save(self, output_path: str, *args, **kwargs) -> None:
        raise NotImplementedError("built in code from a checkpoint: use embeddings.sentence_transformer(name, "
                                  "pooling); the checkpoint itself is the saved model")


def wrap_bert(bert_encoder: torch.nn.Module, tokenizer, pooling: str = "mean", normalize: bool = True,
              max_seq_length: int = MAX_SENTENCE_TOKENS):
    """Any `bert.BertEncoder` and its WordPiece tokenizer as a `sentence_transformers.SentenceTransformer`:
    BertTokenEmbeddings -> Pooling(pooling) -> Normalize (SBERT's pipeline, all-MiniLM-L6-v2's layout), on
    the CPU. Pooling: mean Σ_t m_t h_t / Σ_t m_t, max over the real tokens, or cls h_0."""
    assert pooling in POOLINGS, f"pooling must be one of {POOLINGS}, not {pooling!r}"
    SentenceTransformer, Normalize, Pooling, _ = _st_classes()
    modules = [BertTokenEmbeddings(bert_encoder, tokenizer, max_seq_length),
               Pooling(bert_encoder.config.n_embd, pooling_mode=pooling)]
    return SentenceTransformer(modules=modules + ([Normalize()] if normalize else []), device="cpu",
                               local_files_only=True)


_ST_LOCK = threading.Lock()


@lru_cache(maxsize=None)
def _our_sentence_transformer(name: str, pooling: str):
    ckpt = checkpoints.shared(name)
    assert hasattr(ckpt.model, "bert"), f"{name} is a {ckpt.kind} checkpoint, not a BERT"
    return wrap_bert(ckpt.model.bert, ckpt.tokenizer, pooling)


def sentence_transformer(name: str = "bert-english", pooling: str = "mean"):
    """Our BERT checkpoint models/<name> as a real `sentence_transformers.SentenceTransformer` (see
    `wrap_bert`), built in code around the shared, read-only encoder (no files from the hub); one per
    (name, pooling), built on first use. `.encode(sentences)` gives unit vectors (n, C)."""
    assert pooling in POOLINGS, f"pooling must be one of {POOLINGS}, not {pooling!r}"
    with _ST_LOCK:
        return _our_sentence_transformer(name, pooling)


def st_encode(model, sentences: list[str], batch_size: int = 32) -> np.ndarray:
    """model.encode as float32 (n, C), also for no sentences (sentence-transformers returns shape (0,))."""
    if not sentences:
        width = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension  # < 6
        return np.zeros((0, width()), np.float32)
    with torch.inference_mode():
        X = model.encode(sentences, batch_size=batch_size, convert_to_numpy=True, normalize_embeddings=False)
    return np.asarray(X, np.float32)


@lru_cache(maxsize=None)
def _sentence_transformer(pooling: str):
    """all-MiniLM-L6-v2 through sentence-transformers, from the local folder (no hub), with the chosen
    pooling: Transformer -> Pooling(pooling) -> Normalize. Imports transformers (~3-5 s) on first use."""
    SentenceTransformer, Normalize, Pooling, Transformer = _st_classes()
    from playground.checkpoints import minilm_dir

    if pooling == "mean":
        return SentenceTransformer(str(minilm_dir()), device="cpu")
    word = Transformer(str(minilm_dir()), max_seq_length=MAX_SENTENCE_TOKENS)
    width = getattr(word, "get_embedding_dimension", None) or word.get_word_embedding_dimension
    return SentenceTransformer(modules=[word, Pooling(width(), pooling_mode=pooling), Normalize()], device="cpu")


def sentence_transformers_embed(sentences: list[str], pooling: str = "mean") -> np.ndarray:
    """all-MiniLM-L6-v2's embeddings asked of the sentence-transformers library directly (the reference)."""
    assert pooling in POOLINGS, f"pooling must be one of {POOLINGS}, not {pooling!r}"
    with _ST_LOCK:
        model = _sentence_transformer(pooling)
    return st_encode(model, sentences)


def semantic_search(query_vector: np.ndarray, vectors: np.ndarray, k: int = 5) -> list[tuple[int, float]]:
    """Rows of `vectors` by cosine with the query, best first: (row, score)."""
    scores = unit_rows(vectors) @ (query_vector / max(float(np.linalg.norm(query_vector)), 1e-12))
    top = np.argsort(-scores, kind="stable")[:k]
    return [(int(i), float(scores[i])) for i in top]


# ---------------------------------------------------------------------------------------------
# The classic representations


def words_of(sentence: str) -> list[str]:
    """Lowercased words (punctuation dropped)."""
    return [word.lower() for _, _, word in text_words(sentence)]


def classic(sentences: list[str]) -> dict:
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
    cos_bow = unit_rows(bow.astype(np.float32)) @ unit_rows(bow.astype(np.float32)).T if n else np.zeros((0, 0))
    return {"vocabulary": vocab, "tokens": tokens, "bag_of_words": bow, "idf": idf, "tfidf": tfidf,
            "one_hot": one_hot, "bow_cosine": cos_bow}


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

SENTENCES = [
    "The cat sat on the mat.",
    "A kitten was sleeping on the rug.",
    "The stock market fell sharply today.",
    "Shares dropped as investors panicked.",
    "I deposited money at the bank.",
    "We had a picnic on the river bank.",
    "The dog bit the man.",
    "The man bit the dog.",
]

CONTEXT_SENTENCES = [
    "I deposited my salary at the bank this morning.",
    "The bank raised its interest rates again.",
    "She sat on the bank of the river and watched the water.",
    "Reeds grew thick along the muddy bank of the stream.",
    "He robbed a bank and fled in a stolen car.",
]
