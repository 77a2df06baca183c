"""Sentence embeddings (SBERT, Reimers & Gurevych 2019): a pooling of the encoder's last-layer token states
(mean over the real tokens, max, or the [CLS] state), then L2-normalised as all-MiniLM-L6-v2's Normalize
module does; their cosine similarity, and a semantic search that ranks sentences by cosine with a query.

For MiniLM, ours runs our BERT encoder with MiniLM's weights (the one the Attention tab loaded) and pools by
hand; "sentence-transformers" asks the library itself (sbert.py; the tests check the two agree). Our own BERT
(models/bert-english) is embedded through a real `SentenceTransformer` built around it (sbert.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from playground.analysis.embeddings import EmbeddingError, sbert
from playground.analysis.embeddings.encoders import encode_batch, encoder, pool
from playground.analysis.embeddings.projection import pca
from playground.analysis.embeddings.words import unit_rows

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
MODELS = ("minilm", "sentence-transformers", "bert")  # our encoders (encoders.ENCODERS) and the library's MiniLM


def sentence_embeddings(sentences: list[str], pooling: str = "mean", batch_size: int = 32,
                        model: str = "minilm") -> tuple[np.ndarray, list[int]]:
    """SBERT sentence vectors: the encoder's last layer, pooled, L2-normalised. (n, C) and the tokens cut
    from each sentence.

    minilm: our own pooling (`pool`) of our BERT encoder run with MiniLM's weights (no transformers
    import; the tests check it equals sentence-transformers' all-MiniLM-L6-v2). all-MiniLM-L6-v2 was
    trained with mean pooling; max and cls run the same encoder with another pooling (not trained for them).
    bert: our own BERT as a real `SentenceTransformer` (`sbert.sentence_transformer`), which imports
    sentence-transformers on its first use."""
    m = encoder(model)
    assert m is not None, f"no encoder {model!r}"
    if model == "bert":
        st = sbert.sentence_transformer("bert-english", pooling)
        X = sbert.st_encode(st, sentences, batch_size)
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


def embed(sentences: list[str], model: str, pooling: str, notices: list[str]) -> np.ndarray:
    """(n, C) unit vectors from one of MODELS; a notice for sentences cut to the encoder's length. Raises
    EmbeddingError when the model needs the sentence-transformers package and it is not installed."""
    if model == "sentence-transformers":
        try:
            return sbert.sentence_transformers_embed(sentences, pooling)
        except ImportError:
            raise EmbeddingError("The sentence-transformers package is not installed here (pip install "
                                 "sentence-transformers); choose the minilm model: the same embeddings.") from None
    m = encoder(model)
    assert m is not None, f"no encoder {model!r}"
    try:
        X, cut = sentence_embeddings(sentences, pooling, model=m.key)
    except ImportError:  # our BERT goes through sentence-transformers
        raise EmbeddingError("The sentence-transformers package is not installed here (pip install "
                             "sentence-transformers); choose the minilm model.") from None
    if any(cut):
        notices.append(f"{sum(1 for c in cut if c)} sentence(s) longer than {m.max_tokens} tokens were cut.")
    return X


@dataclass
class SentenceView:
    data: dict                  # the endpoint's JSON
    vectors: np.ndarray         # (n, C) unit sentence vectors
    coords: np.ndarray          # (n, 2) their PCA (zeros for two sentences)
    similarity: np.ndarray      # (n, n) cosines


def view(sentences: list[str], model: str, pooling: str, notices: list[str]) -> SentenceView:
    """At least two sentences: their vectors, the cosine similarity matrix and a 2D PCA."""
    X = embed(sentences, model, pooling, notices)
    sim = X @ X.T                                                     # unit vectors: cosine
    if len(sentences) >= 3:
        Y, _ = pca(X, 2)
    else:
        notices.append("Two sentences: the plot needs three points; see the similarity instead.")
        Y = np.zeros((len(sentences), 2), np.float32)
    data = {"model": model, "pooling": pooling, "sentences": sentences,
            "points": [{"sentence": s, "x": round(float(y[0]), 5), "y": round(float(y[1]), 5)}
                       for s, y in zip(sentences, Y)],
            "similarity": np.round(sim, 5).tolist(), "notices": notices}
    return SentenceView(data, X, Y, sim)


def search(query: str, sentences: list[str], model: str, pooling: str, notices: list[str]) -> dict:
    """The sentences ranked by cosine with the query, best first (ties keep the input order)."""
    X = embed([query, *sentences], model, pooling, notices)
    q = X[0] / max(float(np.linalg.norm(X[0])), 1e-12)
    scores = unit_rows(X[1:]) @ q                                     # (n,)
    ranked = np.argsort(-scores, kind="stable")
    results = [{"sentence": sentences[i], "score": round(float(scores[i]), 4)} for i in ranked]
    return {"query": query, "model": model, "pooling": pooling, "results": results}
